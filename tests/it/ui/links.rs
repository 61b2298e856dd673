//! Signed links: a GET shows the approval page without sign-in and writes
//! nothing (the record and its run's events are byte for byte the same);
//! a POST decides as the bound identity (or `link`); forged, decided and
//! switched-off links all show `#bad-link`.

use serde_json::{Value, json};

use super::client::Client;
use crate::common::server::{Api, Served};
use crate::common::{GATED_SPEC, Workspace};

const LINK_SECRET: &str = "a-link-secret-of-at-least-32-bytes!!";

fn start(ws: &Workspace, link_secret: Option<&str>) -> Served {
    let mut env = vec![("TOLLGATE_API_TOKENS", "alice:tok-a,carol:tok-c")];
    if let Some(secret) = link_secret {
        env.push(("TOLLGATE_LINK_SECRET", secret));
    }
    Served::start(&ws.spec, &ws.state_db(), &env, &[])
}

/// The record and the run as served, and the store's files (the main file
/// and its write-ahead log): all the same means nothing was written.
async fn snapshot(
    api: &Api,
    served: &Served,
    ws: &Workspace,
    key: &str,
    run_id: &str,
) -> (Value, Value, Vec<Vec<u8>>) {
    let (_, record) = api.get(&served.url(&format!("/approvals/{key}"))).await;
    let (_, run) = api.get(&served.url(&format!("/runs/{run_id}"))).await;
    let db = ws.state_db();
    let files = ["", "-wal"]
        .iter()
        .map(|suffix| std::fs::read(format!("{}{suffix}", db.display())).unwrap_or_default())
        .collect();
    (record, run, files)
}

#[tokio::test]
async fn a_get_changes_nothing_and_a_post_decides_as_the_bound_identity() {
    let spec = GATED_SPEC.replace(
        "steps:\n",
        "approvals:\n  approvers: [carol, link]\nsteps:\n",
    );
    let ws = Workspace::new(&spec);
    let served = start(&ws, Some(LINK_SECRET));
    let api = Api::with_token("tok-a");
    let paused = api.pause(&served, json!({"order_id": "A1"})).await;
    let before = snapshot(&api, &served, &ws, &paused.key, &paused.run_id).await;
    let unbound = before.0["link"].as_str().expect("link").to_string();
    let (_, bound_view) = api
        .get(&served.url(&format!("/approvals/{}", paused.key)))
        .await;
    assert!(bound_view["link"].is_string());

    let mut stranger = Client::new(&served);
    for _ in 0..3 {
        let page = stranger.get(&unbound).await;
        assert_eq!(page.status, 200, "{}", page.body);
        assert!(page.has_id("approve") && page.has_id("message"));
        assert_eq!(page.text_of("whoami"), "link");
        assert!(!page.body.contains(LINK_SECRET));
    }
    let after = snapshot(&api, &served, &ws, &paused.key, &paused.run_id).await;
    assert!(before == after, "a GET of a link wrote nothing");
    assert_eq!(after.1["status"], "awaiting_approval");

    // A link bound to carol (made the way `approvals show --link-for` makes
    // it) decides as carol.
    let out = ws
        .tollgate()
        .args([
            "approvals",
            "show",
            &paused.key,
            "--spec",
            ws.spec_arg(),
            "--link-for",
            "carol",
        ])
        .env("TOLLGATE_LINK_SECRET", LINK_SECRET)
        .output()
        .expect("approvals show");
    let shown = String::from_utf8_lossy(&out.stdout).into_owned();
    let at = shown.find("/a/").unwrap_or_else(|| {
        panic!(
            "no link in:\n{shown}\n{}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    let bound: String = shown[at..]
        .chars()
        .take_while(|c| !c.is_whitespace())
        .collect();
    assert!(bound.contains("?as=carol"), "{bound}");

    // The CSRF token of the unbound page is not the bound page's.
    let unbound_page = stranger.get(&unbound).await;
    let wrong = stranger
        .post(
            &bound,
            &[("decision", "approve"), ("csrf", &unbound_page.csrf())],
        )
        .await;
    assert_eq!(wrong.status, 403);
    assert!(wrong.body.contains("data-reason=\"csrf\""));
    let no_csrf = stranger.post(&bound, &[("decision", "approve")]).await;
    assert_eq!(no_csrf.status, 403);
    assert_eq!(
        api.get(&served.url(&format!("/approvals/{}", paused.key)))
            .await
            .1["status"],
        "PENDING"
    );

    let page = stranger.get(&bound).await;
    assert_eq!(page.text_of("whoami"), "carol");
    let decided = stranger
        .post(
            &bound,
            &[
                ("decision", "reject"),
                ("reason", "not today"),
                ("csrf", &page.csrf()),
            ],
        )
        .await;
    assert_eq!(decided.status, 200, "{}", decided.body);
    let outcome = decided.text_of("outcome");
    assert!(
        outcome.contains("REJECTED") && outcome.contains("carol"),
        "{outcome}"
    );
    let (_, record) = api
        .get(&served.url(&format!("/approvals/{}", paused.key)))
        .await;
    assert_eq!(record["decided_by"], "carol");
    assert_eq!(record["decision_data"]["reason"], "not today");

    // Decided: both links are dead now.
    for link in [&unbound, &bound] {
        let dead = stranger.get(link).await;
        assert!(dead.has_id("bad-link"), "{link}");
        assert_eq!(dead.status, 404);
    }
}

#[tokio::test]
async fn an_unbound_link_decides_as_link_and_forgeries_are_bad_links() {
    let ws = Workspace::new(GATED_SPEC);
    let served = start(&ws, Some(LINK_SECRET));
    let api = Api::with_token("tok-a");
    let paused = api.pause(&served, json!({"order_id": "A1"})).await;
    let other = api.pause(&served, json!({"order_id": "A2"})).await;
    let (_, record) = api
        .get(&served.url(&format!("/approvals/{}", paused.key)))
        .await;
    let link = record["link"].as_str().unwrap().to_string();
    let signature = link.rsplit('/').next().unwrap().to_string();
    let mut stranger = Client::new(&served);
    for forged in [
        format!("/a/{}/{}", other.key, signature),
        format!("/a/{}/{}x", paused.key, signature),
        format!("/a/{}/AAAA", paused.key),
        format!("{link}?as=alice"),
        format!("/a/no-such-key/{signature}"),
    ] {
        let page = stranger.get(&forged).await;
        assert!(page.has_id("bad-link"), "{forged}: {}", page.body);
        assert!(!page.body.contains(&paused.key) || forged.contains("as=alice"));
        let post = stranger.post(&forged, &[("decision", "approve")]).await;
        assert!(post.has_id("bad-link"), "POST {forged}");
    }
    // The page's timeline stream works with the link alone, and not with a forged one.
    let stream = reqwest::Client::new()
        .get(served.url(&format!("{link}/stream")))
        .send()
        .await
        .expect("stream");
    assert_eq!(stream.status().as_u16(), 200);
    assert!(
        stream.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/event-stream")
    );
    drop(stream);
    let forged = stranger
        .get(&format!("/a/{}/AAAA/stream", paused.key))
        .await;
    assert!(forged.has_id("bad-link"));
    let page = stranger.get(&link).await;
    // From a page of another site: refused, and the refusal's log line
    // does not carry the link (a capability).
    let mut foreign = Client::new(&served);
    foreign
        .extra
        .push(("origin".into(), "https://evil.example".into()));
    let refused = foreign
        .post(&link, &[("decision", "approve"), ("csrf", &page.csrf())])
        .await;
    assert_eq!(refused.status, 403);
    served
        .log_line(
            "refused a request from a browser page",
            std::time::Duration::from_secs(10),
        )
        .await;
    assert!(!served.logs().contains(&signature), "{}", served.logs());
    let decided = stranger
        .post(&link, &[("decision", "approve"), ("csrf", &page.csrf())])
        .await;
    assert_eq!(decided.status, 200);
    let (_, record) = api
        .get(&served.url(&format!("/approvals/{}", paused.key)))
        .await;
    assert_eq!(record["status"], "APPROVED");
    assert_eq!(record["decided_by"], "link");
}

#[tokio::test]
async fn without_a_link_secret_links_are_off() {
    let ws = Workspace::new(GATED_SPEC);
    let served = start(&ws, None);
    let api = Api::with_token("tok-a");
    let paused = api.pause(&served, json!({"order_id": "A1"})).await;
    let mut stranger = Client::new(&served);
    let page = stranger.get(&format!("/a/{}/anything", paused.key)).await;
    assert!(page.has_id("bad-link"));
    let (_, record) = api
        .get(&served.url(&format!("/approvals/{}", paused.key)))
        .await;
    assert_eq!(record["status"], "PENDING");
}

/// A link whose record the store cannot read is an error page, not a "bad
/// link": the approver should try again later, not ask for a new link.
#[tokio::test]
async fn a_store_that_cannot_read_the_record_is_an_error_not_a_bad_link() {
    let ws = Workspace::new(GATED_SPEC);
    let served = start(&ws, Some(LINK_SECRET));
    let api = Api::with_token("tok-a");
    let paused = api.pause(&served, json!({"order_id": "A1"})).await;
    let (_, record) = api
        .get(&served.url(&format!("/approvals/{}", paused.key)))
        .await;
    let link = record["link"].as_str().expect("link").to_string();
    let db = rusqlite::Connection::open(ws.state_db()).expect("open state");
    let changed = db
        .execute(
            "UPDATE tollgate_approvals SET payload = '{not json' WHERE key = ?1",
            [&paused.key],
        )
        .expect("corrupt the row");
    assert_eq!(changed, 1);

    let page = Client::new(&served).get(&link).await;
    assert!(page.status >= 500, "{}: {}", page.status, page.body);
    assert!(!page.has_id("bad-link"), "{}", page.body);
    assert!(page.has_id("refused"), "{}", page.body);
}
