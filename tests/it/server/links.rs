//! Signed approval links (DESIGN §11, issues 16 and 22): with
//! TOLLGATE_LINK_SECRET a real `tollgate serve` shows the link of a pending
//! approval in its `awaiting_approval` events and in GET /approvals/{key},
//! bound to the caller (loopback mode: `local`), and `approvals show
//! --link-for NAME` shows one bound to NAME, all naming the signature
//! `LinkSigner` computes; where nobody in particular looks (a Slack
//! channel, `approvals show` alone) no capability is shown unless
//! TOLLGATE_UNBOUND_LINKS is on: Slack opens the inbox page instead; the
//! link is gone once the approval is decided; without a secret links are
//! off and say so; a bad secret or public URL stops start-up; and the
//! secret reaches no log, event, message or store.

use crate::common;
use crate::common::server;
use crate::common::slack_stub;
use crate::common::stub_server;

use std::process::Output;
use std::time::Duration;

use common::{GATED_SPEC, Workspace, assert_exit, assert_success, contains_bytes, sqlite_bytes};
use serde_json::{Value, json};
use server::{Api, Paused, Served, SseEvent, SseNext, SseStream};
use stub_server::{Response, StubServer};
use tollgate_runtime::links::{LINK_SECRET_ENV, LinkSigner, PUBLIC_URL_ENV};

const SECRET: &str = "link-secret-5f0c9a7e2b41d83c6e19a0f7b25d";
/// With a trailing slash, which links must not double.
const PUBLIC_URL: &str = "https://approvals.example.com/";

/// The stored events of a paused run, read up to its `awaiting_approval`.
async fn events_until_paused(api: &Api, served: &Served, run_id: &str) -> Vec<SseEvent> {
    let mut stream =
        SseStream::open(api, &served.url(&format!("/runs/{run_id}/events")), None).await;
    let mut seen = Vec::new();
    loop {
        match stream.next(Duration::from_secs(10)).await {
            SseNext::Event(e) => {
                let paused = e.kind() == "awaiting_approval";
                seen.push(e);
                if paused {
                    return seen;
                }
            }
            other => panic!("expected the run's events, got {other:?} after {seen:?}"),
        }
    }
}

/// `tollgate approvals show KEY --state DB ARGS...` with exactly the link
/// variables given (none of the caller's).
fn show(
    ws: &Workspace,
    db: &std::path::Path,
    key: &str,
    env: &[(&str, &str)],
    args: &[&str],
) -> Output {
    let mut cmd = ws.tollgate();
    cmd.env_remove(LINK_SECRET_ENV)
        .env_remove(PUBLIC_URL_ENV)
        .env_remove("TOLLGATE_UNBOUND_LINKS");
    cmd.envs(env.iter().copied());
    cmd.args([
        "approvals",
        "show",
        key,
        "--state",
        db.to_str().expect("utf-8 path"),
    ]);
    cmd.args(args)
        .output()
        .expect("run tollgate approvals show")
}

fn show_json(ws: &Workspace, db: &std::path::Path, key: &str, env: &[(&str, &str)]) -> Value {
    let out = show(ws, db, key, env, &["--json"]);
    assert_success(&out);
    serde_json::from_slice(&out.stdout).expect("show --json prints JSON")
}

/// The `link:` line of `approvals show`, if it printed one.
fn link_line(out: &Output) -> Option<String> {
    common::stdout(out)
        .lines()
        .find_map(|l| l.strip_prefix("link:").map(|rest| rest.trim().to_string()))
}

#[tokio::test(flavor = "multi_thread")]
async fn a_pending_link_shows_everywhere_with_one_signature_and_goes_once_decided() {
    let tool = StubServer::start(|_| Response::json(200, json!({"id": "rf_1"})));
    let slack = slack_stub::start_api();
    let ws = Workspace::new(&slack_stub::spec(&tool.url("")));
    let db = ws.path().join("state.db");
    let mut env = slack_stub::env(slack.port);
    env.push((LINK_SECRET_ENV, SECRET.to_string()));
    env.push((PUBLIC_URL_ENV, PUBLIC_URL.to_string()));
    let served = Served::start(&ws.spec, &db, &slack_stub::env_refs(&env), &[]);
    let on = served
        .log_line("signed links on", Duration::from_secs(10))
        .await;
    assert!(on.contains("https://approvals.example.com"), "{on}");

    let api = Api::new();
    let Paused { run_id, key } = api
        .trigger_and_wait_for_pause(&served, "/hooks/refund", json!({ "order_id": "A-7" }))
        .await;
    // What the API and its streams must show the caller (loopback mode:
    // `local`): the signature computed independently of the server, bound
    // to the caller, under the public URL without its trailing slash.
    let signer = LinkSigner::new(SECRET, Some(PUBLIC_URL)).expect("a valid signer");
    let signature = signer.signature(&key, Some("local"));
    let expected = format!("https://approvals.example.com/a/{key}/{signature}?as=local");
    assert!(signer.verify(&key, &signature, Some("local")));

    // The event stream: the pause carries the link, no other event does.
    let events = events_until_paused(&api, &served, &run_id).await;
    let (paused, others) = events.split_last().expect("events");
    assert_eq!(paused.data["link"], expected.as_str(), "{:?}", paused.data);
    assert_eq!(paused.data["key"], key.as_str());
    assert!(
        others.iter().all(|e| e.data.get("link").is_none()),
        "{others:?}"
    );

    // GET /approvals/{key}.
    let (status, record) = api.get(&served.url(&format!("/approvals/{key}"))).await;
    assert_eq!(status, 200, "{record}");
    assert_eq!(record["link"], expected.as_str(), "{record}");

    // `approvals show` alone has nobody to bind a link to: none, saying
    // how to get one; with unbound links on, the unbound link; and a link
    // bound to an odd identity on request.
    let cli_env = [(LINK_SECRET_ENV, SECRET), (PUBLIC_URL_ENV, PUBLIC_URL)];
    let out = show(&ws, &db, &key, &cli_env, &[]);
    assert_success(&out);
    let line = link_line(&out).expect("a link: line");
    assert!(line.starts_with("none: --link-for NAME"), "{line}");
    assert!(line.contains("TOLLGATE_UNBOUND_LINKS"), "{line}");
    assert!(show_json(&ws, &db, &key, &cli_env).get("link").is_none());
    let unbound = signer.url(&key, None);
    let unbound_env = [
        (LINK_SECRET_ENV, SECRET),
        (PUBLIC_URL_ENV, PUBLIC_URL),
        ("TOLLGATE_UNBOUND_LINKS", "1"),
    ];
    let out = show(&ws, &db, &key, &unbound_env, &[]);
    assert_success(&out);
    assert_eq!(link_line(&out).as_deref(), Some(unbound.as_str()));
    assert_eq!(
        show_json(&ws, &db, &key, &unbound_env)["link"],
        unbound.as_str()
    );
    let odd = "Zoë & ops/on-call";
    let out = show(&ws, &db, &key, &cli_env, &["--link-for", odd]);
    assert_success(&out);
    let bound = link_line(&out).expect("a bound link");
    assert_eq!(bound, signer.url(&key, Some(odd)));
    assert!(
        bound.ends_with("?as=Zo%C3%AB%20%26%20ops%2Fon-call"),
        "{bound}"
    );
    let bound_signature = bound
        .strip_prefix(&format!("https://approvals.example.com/a/{key}/"))
        .and_then(|rest| rest.split_once('?'))
        .map(|(sig, _)| sig)
        .expect("the bound link's signature");
    assert_ne!(bound_signature, signature, "a bound link is another link");
    assert!(signer.verify(&key, bound_signature, Some(odd)));

    // Slack: a channel has no single viewer, so "Open in browser" opens
    // the approval's inbox page (sign-in first), not a capability.
    let post = slack_stub::eventually(15, "the Slack message", || {
        slack.requests_to(slack_stub::POST_PATH).into_iter().next()
    })
    .await
    .json();
    let open = post["blocks"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|b| b["type"] == "actions")
        .flat_map(|b| b["elements"].as_array().cloned().unwrap_or_default())
        .find(|e| e["action_id"] == "tollgate_open")
        .unwrap_or_else(|| panic!("no Open in browser button: {post}"));
    assert_eq!(open["type"], "button");
    assert_eq!(open["text"]["text"], "Open in browser");
    assert_eq!(
        open["url"],
        format!("https://approvals.example.com/ui/approvals/{key}").as_str()
    );
    assert!(!post.to_string().contains("/a/"), "{post}");

    // Decided: no link anywhere, and --link-for refuses.
    let (status, decided) = api
        .post(
            &served.url(&format!("/approvals/{key}/approve?wait=true")),
            json!({ "reason": "fine" }),
        )
        .await;
    assert_eq!(status, 200, "{decided}");
    let (_, record) = api.get(&served.url(&format!("/approvals/{key}"))).await;
    assert_eq!(record["status"], "APPROVED", "{record}");
    assert!(record.get("link").is_none(), "{record}");
    let out = show(&ws, &db, &key, &unbound_env, &[]);
    assert_success(&out);
    assert_eq!(link_line(&out), None, "{}", common::stdout(&out));
    assert!(show_json(&ws, &db, &key, &cli_env).get("link").is_none());
    let out = show(&ws, &db, &key, &cli_env, &["--link-for", "alice"]);
    assert_exit(&out, 4);
    common::assert_stderr_contains(&out, "only while it is PENDING");
    // A replay of the run's events shows the old pause without a link.
    let mut stream =
        SseStream::open(&api, &served.url(&format!("/runs/{run_id}/events")), None).await;
    let replay = stream.collect_until_end(Duration::from_secs(10)).await;
    let pause = replay
        .iter()
        .find(|e| e.kind() == "awaiting_approval")
        .expect("the stored pause");
    assert!(pause.data.get("link").is_none(), "{:?}", pause.data);

    // The secret is nowhere; the link is computed, never stored.
    let settled = slack_stub::eventually(15, "the settled Slack message", || {
        slack
            .requests_to(slack_stub::UPDATE_PATH)
            .into_iter()
            .next()
    })
    .await;
    assert!(
        !settled.body_text().contains(&signature),
        "a settled message has no link"
    );
    let mut shown = served.logs();
    for e in events.iter().chain(&replay) {
        shown.push_str(&e.data.to_string());
    }
    for request in slack.requests() {
        shown.push_str(&request.body_text());
    }
    assert!(!shown.contains(SECRET), "the secret was shown:\n{shown}");
    let bytes = sqlite_bytes(&db);
    assert!(
        !contains_bytes(&bytes, SECRET),
        "the secret is in the store"
    );
    assert!(
        !contains_bytes(&bytes, &signature),
        "a link is in the store"
    );
    assert!(
        !contains_bytes(&bytes, bound_signature),
        "a bound link is in the store"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn without_a_secret_links_are_off_and_say_so() {
    let ws = Workspace::new(GATED_SPEC);
    let db = ws.path().join("state.db");
    // A public URL alone turns nothing on.
    let served = Served::start(&ws.spec, &db, &[(PUBLIC_URL_ENV, PUBLIC_URL)], &[]);
    served
        .log_line(
            &format!("signed links off: set {LINK_SECRET_ENV}"),
            Duration::from_secs(10),
        )
        .await;
    let api = Api::new();
    let Paused { run_id, key } = api.pause(&served, json!({ "order_id": "B-2" })).await;

    let events = events_until_paused(&api, &served, &run_id).await;
    assert!(
        events.iter().all(|e| e.data.get("link").is_none()),
        "{events:?}"
    );
    let (status, record) = api.get(&served.url(&format!("/approvals/{key}"))).await;
    assert_eq!(status, 200, "{record}");
    assert_eq!(record["status"], "PENDING");
    assert!(record.get("link").is_none(), "{record}");

    let out = show(&ws, &db, &key, &[], &[]);
    assert_success(&out);
    assert_eq!(
        link_line(&out).as_deref(),
        Some(format!("off (set {LINK_SECRET_ENV})").as_str())
    );
    assert!(show_json(&ws, &db, &key, &[]).get("link").is_none());
    let out = show(&ws, &db, &key, &[], &["--link-for", "alice"]);
    assert_exit(&out, 2);
    common::assert_stderr_contains(
        &out,
        &format!("signed links are off: set {LINK_SECRET_ENV}"),
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn without_a_public_url_links_are_paths_and_slack_shows_none() {
    let tool = StubServer::start(|_| Response::json(200, json!({"id": "rf_1"})));
    let slack = slack_stub::start_api();
    let ws = Workspace::new(&slack_stub::spec(&tool.url("")));
    let db = ws.path().join("state.db");
    let mut env = slack_stub::env(slack.port);
    env.push((LINK_SECRET_ENV, SECRET.to_string()));
    let served = Served::start(&ws.spec, &db, &slack_stub::env_refs(&env), &[]);
    let on = served
        .log_line("signed links on", Duration::from_secs(10))
        .await;
    assert!(on.contains(PUBLIC_URL_ENV), "says what is missing: {on}");

    let api = Api::new();
    let Paused { key, .. } = api
        .trigger_and_wait_for_pause(&served, "/hooks/refund", json!({ "order_id": "C-3" }))
        .await;
    let signature = LinkSigner::new(SECRET, None)
        .expect("a valid signer")
        .signature(&key, Some("local"));
    let (_, record) = api.get(&served.url(&format!("/approvals/{key}"))).await;
    assert_eq!(
        record["link"],
        format!("/a/{key}/{signature}?as=local").as_str(),
        "{record}"
    );

    // Slack opens absolute URLs only: the message has its two buttons alone.
    let post = slack_stub::eventually(15, "the Slack message", || {
        slack.requests_to(slack_stub::POST_PATH).into_iter().next()
    })
    .await
    .json();
    let ids: Vec<String> = slack_stub::buttons(&post)
        .into_iter()
        .map(|b| b.0)
        .collect();
    assert_eq!(ids, ["tollgate_approve", "tollgate_reject"], "{post}");
    assert!(!post.to_string().contains(&signature), "{post}");
}

/// A server's environment for one case.
type Env<'a> = &'a [(&'a str, &'a str)];

#[test]
fn a_bad_secret_or_public_url_stops_start_up_naming_the_variable_not_the_value() {
    let ws = Workspace::new(GATED_SPEC);
    let db = ws.path().join("state.db");
    let cases: [(Env, &str, &str); 5] = [
        (
            &[(LINK_SECRET_ENV, "too-short-hunter2")],
            LINK_SECRET_ENV,
            "too-short-hunter2",
        ),
        (&[(LINK_SECRET_ENV, "   ")], LINK_SECRET_ENV, "   "),
        (
            &[
                (LINK_SECRET_ENV, SECRET),
                (PUBLIC_URL_ENV, "ftp://files.example.net/hunter2"),
            ],
            PUBLIC_URL_ENV,
            "hunter2",
        ),
        (
            &[
                (LINK_SECRET_ENV, SECRET),
                (PUBLIC_URL_ENV, "https://links.example.net/?k=hunter2"),
            ],
            PUBLIC_URL_ENV,
            "hunter2",
        ),
        (
            &[
                (LINK_SECRET_ENV, SECRET),
                (PUBLIC_URL_ENV, "hunter2.example.net"),
            ],
            PUBLIC_URL_ENV,
            "hunter2",
        ),
    ];
    for (env, named, value) in cases {
        let failure = match Served::try_start(&ws.spec, &db, env, &[]) {
            Ok(_) => panic!("started with {env:?}"),
            Err(failure) => failure,
        };
        assert_eq!(failure.code, Some(2), "{env:?}: {}", failure.stderr);
        assert!(
            failure.stderr.contains(named),
            "{env:?}: {}",
            failure.stderr
        );
        assert!(!failure.stderr.contains(SECRET), "{}", failure.stderr);
        if !value.trim().is_empty() {
            assert!(!failure.stderr.contains(value), "{}", failure.stderr);
        }
        // `approvals show` reads the same variables and refuses them too.
        let out = show(&ws, &db, "no-such-key", env, &[]);
        assert_exit(&out, 2);
        common::assert_stderr_contains(&out, named);
        assert!(!common::stderr(&out).contains(SECRET));
    }
}
