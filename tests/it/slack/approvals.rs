//! Slack approvals end to end against a local Slack stub: a pause is posted
//! once with both buttons; a signed click made after the server was killed
//! and restarted resumes the run exactly once and edits the message; a
//! decision made over the HTTP API edits it too; and no credential ends up
//! in the store, the logs or the events.

use crate::common;
use crate::common::server;
use crate::common::slack_stub;
use crate::common::stub_server;

use std::time::Duration;

use common::{Workspace, contains_bytes, sqlite_bytes};
use serde_json::{Value, json};
use server::{Api, Paused, Served};
use slack_stub::*;
use stub_server::{Response, StubServer};

fn tool_stub() -> StubServer {
    StubServer::start(|_| Response::json(200, json!({"id": "rf_1"})))
}

fn has_actions(body: &Value) -> bool {
    body["blocks"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|b| b["type"] == "actions")
}

#[tokio::test(flavor = "multi_thread")]
async fn a_click_after_a_restart_resumes_the_run_once_and_updates_the_message() {
    let tool = tool_stub();
    let slack = start_api();
    let replies = StubServer::start(|_| Response::text(200, "ok"));
    let ws = Workspace::new(&spec(&tool.url("")));
    let db = ws.path().join("state.db");
    let env = env(slack.port);
    let api = Api::new();

    let mut first = Served::start(&ws.spec, &db, &env_refs(&env), &[]);
    let Paused { run_id, key } = api
        .trigger_and_wait_for_pause(&first, "/hooks/refund", json!({ "order_id": "A-7" }))
        .await;

    // Exactly one message, with both buttons carrying the key.
    let stored = eventually(15, "the message's channel and ts in the store", || {
        stored_message(&db, &key)
    })
    .await;
    let posts = slack.requests_to(POST_PATH);
    assert_eq!(posts.len(), 1, "one chat.postMessage per pause");
    let post = &posts[0];
    assert_eq!(
        post.header("authorization"),
        Some(format!("Bearer {BOT_TOKEN}").as_str())
    );
    let body = post.json();
    assert_eq!(body["channel"], "#refunds");
    // Each button carries the key and the digest of the payload shown, so
    // a click after the payload changed is refused, never counted.
    let value = buttons(&body)[0].2.clone();
    assert!(value.starts_with(&format!("{key} sha256:")), "{value}");
    assert_eq!(
        buttons(&body),
        vec![
            (
                "tollgate_approve".to_string(),
                "primary".to_string(),
                value.clone()
            ),
            (
                "tollgate_reject".to_string(),
                "danger".to_string(),
                value.clone()
            ),
        ]
    );
    let text = body.to_string();
    for shown in [
        "Refund order A-7?",
        "refund-desk",
        "`refund`",
        "before",
        "\\\"order_id\\\": \\\"A-7\\\"",
    ] {
        assert!(text.contains(shown), "the message shows {shown:?}: {text}");
    }
    assert_eq!(stored.0, CHANNEL_ID);

    // The server dies without any shutdown; a new one starts on the same store.
    first.kill();
    let second = Served::start(&ws.spec, &db, &env_refs(&env), &[]);
    let http = reqwest::Client::new();
    let (status, answer) = send_click(
        &http,
        &second.base,
        click_body(&value, "tollgate_approve", USER, &replies.url("/respond")),
    )
    .await;
    assert_eq!(status, 200, "{answer}");

    let run = api.wait_for_status(&second, &run_id, "completed").await;
    assert!(
        run["outputs"]["refund"].to_string().contains("rf_1"),
        "the tool's reply is the step's output: {run}"
    );
    assert_eq!(
        tool.requests_to("/refunds").len(),
        1,
        "the side effect ran once"
    );
    let (_, record) = api.get(&second.url(&format!("/approvals/{key}"))).await;
    assert_eq!(record["status"], "APPROVED");
    assert_eq!(record["decided_by"], format!("slack:{USER}"));

    // The message now shows the decision and who made it; no buttons.
    eventually(15, "the decision recorded on the message", || {
        decision_posted(&db, &key).then_some(())
    })
    .await;
    let updates = slack.requests_to(UPDATE_PATH);
    assert_eq!(updates.len(), 1, "one chat.update");
    let update = updates[0].json();
    assert_eq!(update["channel"], stored.0.as_str());
    assert_eq!(update["ts"], stored.1.as_str());
    assert!(!has_actions(&update), "buttons removed: {update}");
    let text = update.to_string();
    assert!(text.contains(&format!("slack:{USER}")), "{text}");
    assert!(text.contains("Approved"), "{text}");
    assert_eq!(
        slack.requests_to(POST_PATH).len(),
        1,
        "the restart did not post again"
    );
    assert!(
        replies.requests().is_empty(),
        "a winning click needs no reply"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_decision_over_the_http_api_updates_the_slack_message() {
    let tool = tool_stub();
    let slack = start_api();
    let ws = Workspace::new(&spec(&tool.url("")));
    let db = ws.path().join("state.db");
    let env = env(slack.port);
    let api = Api::new();
    let served = Served::start(&ws.spec, &db, &env_refs(&env), &[]);

    let Paused { run_id, key } = api
        .trigger_and_wait_for_pause(&served, "/hooks/refund", json!({ "order_id": "B-2" }))
        .await;
    eventually(15, "the message posted", || stored_message(&db, &key)).await;
    let (status, body) = api
        .post(
            &served.url(&format!("/approvals/{key}/reject")),
            json!({"reason": "duplicate order"}),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    api.wait_for_status(&served, &run_id, "rejected").await;

    eventually(15, "the decision recorded on the message", || {
        decision_posted(&db, &key).then_some(())
    })
    .await;
    let updates = slack.requests_to(UPDATE_PATH);
    assert_eq!(updates.len(), 1);
    let update = updates[0].json();
    assert!(!has_actions(&update));
    let text = update.to_string();
    assert!(text.contains("Rejected"), "{text}");
    assert!(text.contains("local"), "who decided: {text}");
    assert!(text.contains("duplicate order"), "why: {text}");
    assert!(tool.requests().is_empty());
}

#[tokio::test(flavor = "multi_thread")]
async fn no_bot_token_or_signing_secret_in_the_store_logs_or_events() {
    let tool = tool_stub();
    // Slack refuses the first post (a 200 with ok: false), then accepts.
    let slack = start_api();
    let refused = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let normal = api_handler();
    let flag = refused.clone();
    slack.set_handler(move |request| {
        if request.path() == POST_PATH && !flag.swap(true, std::sync::atomic::Ordering::SeqCst) {
            return Response::json(200, json!({"ok": false, "error": "internal_error"}));
        }
        normal(request)
    });
    let replies = StubServer::start(|_| Response::text(200, "ok"));
    let ws = Workspace::new(&spec(&tool.url("")));
    let db = ws.path().join("state.db");
    let env = env(slack.port);
    let api = Api::new();
    let served = Served::start(&ws.spec, &db, &env_refs(&env), &[]);

    let Paused { run_id, key } = api
        .trigger_and_wait_for_pause(&served, "/hooks/refund", json!({ "order_id": "C-3" }))
        .await;
    eventually(15, "the message posted after a refusal", || {
        stored_message(&db, &key)
    })
    .await;
    assert_eq!(
        slack.requests_to(POST_PATH).len(),
        2,
        "refused once, retried"
    );
    let http = reqwest::Client::new();
    let click = click_body(&key, "tollgate_approve", USER, &replies.url("/respond"));
    let (status, _) = send_click(&http, &served.base, click.clone()).await;
    assert_eq!(status, 200);
    api.wait_for_status(&served, &run_id, "completed").await;
    // A refused click too (already resolved), and a forged one.
    let (status, _) = send_click(&http, &served.base, click).await;
    assert_eq!(status, 200);
    eventually(15, "the message updated", || {
        decision_posted(&db, &key).then_some(())
    })
    .await;

    let (_, events) = api.get(&served.url(&format!("/runs/{run_id}"))).await;
    let mut seen = events.to_string();
    let store = common::open_store(&db);
    for event in store.run_events(&run_id, 0).await.expect("events") {
        seen.push_str(&serde_json::to_string(&event).expect("json"));
    }
    served
        .log_line("Slack message posted", Duration::from_secs(30))
        .await;
    let logs = served.logs();
    let bytes = sqlite_bytes(&db);
    for secret in [BOT_TOKEN, SIGNING_SECRET] {
        assert!(
            !contains_bytes(&bytes, secret),
            "{secret} is in the SQLite file"
        );
        assert!(
            !logs.contains(secret),
            "{secret} is in the server log:\n{logs}"
        );
        assert!(!seen.contains(secret), "{secret} is in the run's events");
    }
    // The spec's references are what the store may hold, as written.
    assert!(!logs.contains("xoxb-"), "{logs}");
}
