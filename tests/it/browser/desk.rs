//! The browser tests' setup: a refund desk served by a real `tollgate
//! serve` on a real SQLite file, with API tokens, a link secret and a public
//! URL that points at the server itself, plus a chromedriver to open
//! sessions on. Also the store-side checks every test ends with, and the
//! screenshots.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Value, json};

use crate::common::Workspace;
use crate::common::server::{Api, Paused, Served};
use crate::common::webdriver::{Driver, Session, SessionOptions, free_port};

/// alice and bob may decide; mallory has a token but is no approver; carol
/// has no token at all, only links bound to her. The agent starts the runs
/// (whoever starts a run may not decide its gate) and is no approver.
pub const TOKENS: &str = "agent:agent-token,alice:alice-token,bob:bob-token,mallory:mallory-token";
pub const LINK_SECRET: &str = "browser-tests-link-secret-6f1d0c9a-not-a-real-one";

/// How long a page may take to show what a test waits for.
pub const WAIT: Duration = Duration::from_secs(15);

pub const SPEC: &str = r#"version: 1
agent: refund-desk
description: Refunds above the automatic limit wait for a person.
approvals:
  approvers: [alice, bob, carol, local]
steps:
  - id: prepare
    set:
      order: "{{ input.order_id }}"
  - id: refund
    approval:
      message: "Refund {{ input.amount }} EUR on order {{ input.order_id }} for {{ input.customer }}? {{ input.note }}"
      payload:
        order: "{{ input.order_id }}"
        amount: "{{ input.amount }}"
        customer: "{{ input.customer }}"
        note: "{{ input.note }}"
        lines: "{{ input.lines }}"
  - id: result
    set:
      refunded: "{{ steps.refund.output.payload }}"
      by: "{{ steps.refund.output.decided_by }}"
"#;

/// A refund request, as a run's input.
pub fn order(id: &str, amount: f64, customer: &str, note: &str) -> Value {
    json!({
        "order_id": id,
        "amount": amount,
        "customer": customer,
        "note": note,
        "lines": [
            {"sku": "KB-87", "item": "Mechanical keyboard", "qty": 1, "price": amount * 0.8},
            {"sku": "CB-2", "item": "USB-C cable", "qty": 2, "price": amount * 0.1},
        ],
    })
}

pub struct Desk {
    /// Holds the temp dir with the spec and the state file.
    ws: Workspace,
    /// The environment the server was started with, besides the link
    /// secret and the public URL (a redeploy starts it the same way).
    extra: Vec<(String, String)>,
    pub state: PathBuf,
    pub served: Served,
    pub driver: Driver,
    /// The API as alice (or without a token, in loopback mode).
    pub api: Api,
    /// The API as the agent that starts runs (or without a token, in
    /// loopback mode, where `local` is exempt from separation of duties).
    pub agent: Api,
}

impl Desk {
    /// With API tokens: people sign in.
    pub async fn start() -> Desk {
        Desk::launch(&[("TOLLGATE_API_TOKENS", TOKENS)]).await
    }

    /// No tokens: loopback only, every decision is `local`'s.
    pub async fn start_loopback() -> Desk {
        Desk::launch(&[]).await
    }

    async fn launch(extra: &[(&str, &str)]) -> Desk {
        let with_tokens = !extra.is_empty();
        let ws = Workspace::new(SPEC);
        let state = ws.path().join("state.db");
        let extra: Vec<(String, String)> = extra
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let (spec, db, env) = (ws.spec.clone(), state.clone(), extra.clone());
        // Start chromedriver while the server starts: both take a moment.
        let server = tokio::task::spawn_blocking(move || serve(&spec, &db, &env));
        let driver = Driver::start().await;
        let (served, public) = server.await.expect("the server started");
        assert_eq!(served.base, public, "listening where the public URL says");
        let (api, agent) = if with_tokens {
            (
                Api::with_token("alice-token"),
                Api::with_token("agent-token"),
            )
        } else {
            (Api::new(), Api::new())
        };
        Desk {
            ws,
            extra,
            state,
            served,
            driver,
            api,
            agent,
        }
    }

    pub fn url(&self, path: &str) -> String {
        self.served.url(path)
    }

    /// A deploy: stop the server, write `spec` (another version of the
    /// desk) and serve it on the same state file, the same way.
    pub async fn redeploy(&mut self, spec: &str) {
        self.served.terminate();
        self.ws.write_spec(spec);
        let (path, db, env) = (self.ws.spec.clone(), self.state.clone(), self.extra.clone());
        let (served, _public) = tokio::task::spawn_blocking(move || serve(&path, &db, &env))
            .await
            .expect("the server started");
        self.served = served;
    }

    /// A browser with JavaScript on, at desktop size.
    pub async fn browser(&self) -> Session {
        self.driver.session(SessionOptions::default()).await
    }

    /// The agent starts a run that pauses at the refund gate: the people
    /// who decide it did not start it.
    pub async fn pause(&self, input: Value) -> Paused {
        self.agent.pause(&self.served, input).await
    }

    /// Alice starts a run that pauses at the refund gate: she asks, so she
    /// may not decide it.
    pub async fn pause_as_alice(&self, input: Value) -> Paused {
        self.api.pause(&self.served, input).await
    }

    /// Sign `session` in with `token` through the login form.
    pub async fn sign_in(&self, session: &Session, token: &str, name: &str) {
        session.goto(&self.url("/ui/login")).await;
        session.find("#token").await.send_keys(token).await;
        session.find("#sign-in").await.click().await;
        let whoami = session.wait_for("#whoami", WAIT).await;
        assert!(
            whoami.text().await.contains(name),
            "signed in as {name}: {}",
            whoami.text().await
        );
    }

    /// `GET /approvals/{key}`: the record, any status.
    pub async fn record(&self, key: &str) -> Value {
        let (status, record) = self.api.get(&self.url(&format!("/approvals/{key}"))).await;
        assert_eq!(status, 200, "{record}");
        record
    }

    /// The run once it reached `status`.
    pub async fn run_when(&self, run_id: &str, status: &str) -> Value {
        self.api.wait_for_status(&self.served, run_id, status).await
    }

    /// The approval's row and the run's events, read from the SQLite file
    /// itself: what "nothing changed" is checked against.
    pub fn stored(&self, paused: &Paused) -> Stored {
        let db = rusqlite::Connection::open_with_flags(
            &self.state,
            rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY,
        )
        .expect("open the state file");
        let approval: String = db
            .query_row(
                "SELECT json_array(status, decided_by, decided_at, decision_data, payload, \
                 created_at, expires_at) FROM tollgate_approvals WHERE key = ?1",
                [&paused.key],
                |row| row.get(0),
            )
            .expect("the approval row");
        let events: i64 = db
            .query_row(
                "SELECT count(*) FROM tollgate_run_events WHERE run_id = ?1",
                [&paused.run_id],
                |row| row.get(0),
            )
            .expect("count events");
        Stored { approval, events }
    }

    /// The signed link of a pending approval, as the API serves it.
    pub async fn link(&self, key: &str) -> String {
        let record = self.record(key).await;
        record["link"]
            .as_str()
            .unwrap_or_else(|| panic!("no link in {record}"))
            .to_string()
    }
}

/// `tollgate serve` with the link secret and a public URL naming its own
/// port, plus `extra`: the server and its public URL. The port is picked
/// before the server binds it (the URL must name it), so another process
/// may take it first: then try another.
fn serve(spec: &Path, state: &Path, extra: &[(String, String)]) -> (Served, String) {
    let mut failures = Vec::new();
    for _ in 0..3 {
        let listen = format!("127.0.0.1:{}", free_port());
        let public = format!("http://{listen}");
        let mut env = vec![
            ("TOLLGATE_LINK_SECRET", LINK_SECRET),
            ("TOLLGATE_PUBLIC_URL", public.as_str()),
        ];
        env.extend(extra.iter().map(|(k, v)| (k.as_str(), v.as_str())));
        match Served::try_start(spec, state, &env, &["--listen", &listen]) {
            Ok(served) => return (served, public),
            Err(failure) => failures.push(failure.stderr),
        }
    }
    panic!("the server did not start:\n{}", failures.join("\n---\n"));
}

/// One approval's stored row and its run's event count.
#[derive(Debug, PartialEq, Eq)]
pub struct Stored {
    pub approval: String,
    pub events: i64,
}

/// From the inbox, open `key`'s approval page and approve it; the
/// outcome's text.
pub async fn approve_from_inbox(session: &Session, key: &str) -> String {
    session
        .wait_for(&format!("tr.approval[data-key=\"{key}\"] a.open"), WAIT)
        .await
        .click()
        .await;
    session
        .wait_for("#approve-button", WAIT)
        .await
        .click()
        .await;
    outcome(session).await
}

/// Wait for `#outcome` and return its text.
pub async fn outcome(session: &Session) -> String {
    session.wait_for("#outcome", WAIT).await.text().await
}

/// The page has no horizontal scroll: nothing is wider than the viewport.
pub async fn assert_no_horizontal_scroll(session: &Session, what: &str) {
    let sizes = session
        .execute(
            "return [document.documentElement.scrollWidth, window.innerWidth];",
            vec![],
        )
        .await;
    let (scroll, inner) = (sizes[0].as_u64().unwrap(), sizes[1].as_u64().unwrap());
    assert!(
        scroll <= inner,
        "{what} scrolls sideways: scrollWidth {scroll} > innerWidth {inner}"
    );
}

/// Save a PNG of `session`'s viewport as target/screenshots/NAME.png, and
/// with TOLLGATE_UPDATE_SCREENSHOTS=1 (`scripts/screenshots`) over
/// docs/screenshots/NAME.png when the guides show one of that name.
pub async fn screenshot(session: &Session, name: &str) {
    let png = session.screenshot().await;
    assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n", "{name} is a PNG");
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("target"));
    let mut dirs = vec![target.join("screenshots")];
    let published = root.join("docs").join("screenshots");
    if std::env::var("TOLLGATE_UPDATE_SCREENSHOTS").as_deref() == Ok("1")
        && published.join(format!("{name}.png")).exists()
    {
        dirs.push(published);
    }
    for dir in dirs {
        std::fs::create_dir_all(&dir).expect("screenshot dir");
        std::fs::write(dir.join(format!("{name}.png")), &png).expect("write screenshot");
    }
}
