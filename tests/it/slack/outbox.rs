//! Slack through the outbox (DESIGN §14): a pause and a decision made by
//! other processes (the CLI), which no server's live follower sees, reach
//! Slack through their notices: one post, though Slack failed the first
//! call, then one edit showing the decision.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use serde_json::json;
use tollgate_runtime::notices::{NoticeChannel, NoticeEvent, NoticeStatus};
use tollgate_runtime::store::NoticeQuery;

use crate::common;
use crate::common::server::Served;
use crate::common::slack_stub::*;
use crate::common::stub_server::{Request, Response, StubServer};
use common::Workspace;

#[tokio::test(flavor = "multi_thread")]
async fn notices_post_once_through_a_failure_then_edit_the_message() {
    let tool = StubServer::start(|_| Response::json(200, json!({"id": "rf_1"})));
    let answer = api_handler();
    let calls = Arc::new(AtomicUsize::new(0));
    let seen = Arc::clone(&calls);
    let slack = StubServer::start(move |request: &Request| {
        if seen.fetch_add(1, Ordering::SeqCst) == 0 {
            return Response::json(500, json!({"ok": false, "error": "internal_error"}));
        }
        answer(request)
    });
    let ws = Workspace::new(&spec(&tool.url("")));
    let key = ws.pause_run(r#"{"order_id": "O-1"}"#);
    let db = ws.state_db();
    let env = env(slack.port);
    let _served = Served::start(
        &ws.spec,
        &db,
        &env_refs(&env),
        &["--notify-retry-window", "60s"],
    );
    eventually(20, "the message posted", || stored_message(&db, &key)).await;

    // Decided by another process: only its notice tells the server.
    let out = ws
        .decide("approve", &key)
        .args(["--by", "alice"])
        .output()
        .expect("run tollgate");
    common::assert_success(&out);
    eventually(20, "the message shows the decision", || {
        decision_posted(&db, &key).then_some(())
    })
    .await;

    let posts = slack.requests_to(POST_PATH);
    assert_eq!(posts.len(), 2, "one failed post, then one that stuck");
    assert_eq!(slack.requests_to(UPDATE_PATH).len(), 1, "one edit");

    let store = common::open_store(&db);
    let notices = store
        .list_notices(&NoticeQuery {
            key: Some(key.clone()),
            channel: Some(NoticeChannel::Slack),
            limit: 10,
            ..NoticeQuery::default()
        })
        .await
        .expect("list");
    let mut events: Vec<(NoticeEvent, NoticeStatus)> =
        notices.iter().map(|n| (n.notice.event, n.status)).collect();
    events.sort_by_key(|(event, _)| event.as_str());
    assert_eq!(
        events,
        vec![
            (NoticeEvent::Approved, NoticeStatus::Sent),
            (NoticeEvent::Requested, NoticeStatus::Sent),
        ]
    );
}
