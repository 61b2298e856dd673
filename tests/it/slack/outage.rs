//! Slack being down never blocks or loses a pause: the pause is stored and
//! listed at once, and the message is posted once Slack is back. Pauses
//! made by another process (`tollgate run --persist`) are posted by the
//! server's outbox worker.

use crate::common;
use crate::common::server;
use crate::common::slack_stub;
use crate::common::stub_server;

use std::time::Duration;

use common::Workspace;
use serde_json::json;
use server::{Api, Served};
use slack_stub::*;
use stub_server::{Response, StubServer};

#[tokio::test(flavor = "multi_thread")]
async fn a_pause_during_a_slack_outage_is_stored_listed_and_posted_once_slack_is_back() {
    let tool = StubServer::start(|_| Response::json(200, json!({"id": "rf_1"})));
    let port = free_port();
    let ws = Workspace::new(&spec(&tool.url("")));
    let db = ws.path().join("state.db");
    let env = env(port);
    let api = Api::new();
    let served = Served::start(&ws.spec, &db, &env_refs(&env), &[]);

    let (status, body) = api
        .post(
            &served.url("/runs?wait=true"),
            json!({"input": {"order_id": "G-7"}}),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["status"], "awaiting_approval", "{body}");
    let key = body["pending_approval"]["key"]
        .as_str()
        .expect("key")
        .to_string();
    let (_, list) = api.get(&served.url("/approvals")).await;
    assert_eq!(list["approvals"][0]["key"], key.as_str(), "listed: {list}");

    // Slack stays down until the post has failed and been retried: two
    // failed attempts recorded with the Slack notice, saying what failed.
    let failed_attempts = || -> Option<(i64, Option<String>)> {
        rusqlite::Connection::open(&db)
            .and_then(|c| {
                c.query_row(
                    "SELECT attempts, last_error FROM tollgate_outbox \
                     WHERE key = ?1 AND channel = 'slack'",
                    [&key],
                    |r| Ok((r.get(0)?, r.get(1)?)),
                )
            })
            .ok()
    };
    let (_, last_error) = eventually(30, "two failed posts", || {
        failed_attempts().filter(|(n, _)| *n >= 2)
    })
    .await;
    let last_error = last_error.expect("the notice says why");
    assert!(
        last_error.contains("cannot post the message"),
        "{last_error}"
    );
    assert!(!last_error.contains(BOT_TOKEN), "{last_error}");
    assert!(stored_message(&db, &key).is_none());
    let slack = StubServer::start_on(port, api_handler());
    eventually(30, "the message posted once Slack is back", || {
        stored_message(&db, &key)
    })
    .await;
    assert_eq!(slack.requests_to(POST_PATH).len(), 1);
    served.log_line("will retry", Duration::from_secs(30)).await;
    let logs = served.logs();
    assert!(!logs.contains(BOT_TOKEN), "{logs}");
    let (attempts, _) = failed_attempts().expect("attempts");
    assert!(
        attempts >= 3,
        "the failed attempts and the post are counted: {attempts}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_pause_made_by_the_cli_is_posted_by_the_server() {
    let tool = StubServer::start(|_| Response::json(200, json!({"id": "rf_1"})));
    let slack = start_api();
    let ws = Workspace::new(&spec(&tool.url("")));
    let key = ws.pause_run(r#"{"order_id": "H-8"}"#);
    assert!(slack.requests().is_empty(), "the CLI does not post");

    let env = env(slack.port);
    let db = ws.state_db();
    let _served = Served::start(&ws.spec, &db, &env_refs(&env), &[]);
    eventually(15, "the server's repair posts it", || {
        stored_message(&db, &key)
    })
    .await;
    let posts = slack.requests_to(POST_PATH);
    assert_eq!(posts.len(), 1);
    assert!(
        buttons(&posts[0].json())
            .iter()
            .all(|(_, _, value)| value.starts_with(&format!("{key} sha256:")))
    );
}
