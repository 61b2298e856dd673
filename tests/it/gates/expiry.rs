//! A request nobody decides in time: its waiter hears `expired` when the
//! time runs out (no decision, nothing to act on), and it can be neither
//! decided nor cancelled after.

use std::time::Duration;

use serde_json::{Value, json};

use super::{SPEC, ask, cancel_gate, error_of, full, gate, requester, serve};
use crate::common::Workspace;

#[tokio::test(flavor = "multi_thread")]
async fn a_waiter_hears_expired_when_the_time_runs_out_and_no_one_decides_after() {
    let ws = Workspace::new(SPEC);
    let served = serve(&ws);
    let bot = requester();
    let key = ask(
        &served,
        &bot,
        json!({"message": "Retry the import?", "payload": {"job": 5}, "ttl": "1s"}),
    )
    .await;
    let (status, view) = gate(&served, &bot, &key, Some("30s")).await;
    assert_eq!(status, 200, "{view}");
    assert_eq!(view["state"], "expired", "{view}");
    assert_eq!(view["status"], "EXPIRED");
    assert_eq!(view["approved"], Value::Null);
    assert_eq!(view["decision"], Value::Null);

    let (status, answer) = full()
        .post(&served.url(&format!("/approvals/{key}/approve")), json!({}))
        .await;
    assert_eq!(status, 410, "{answer}");
    assert_eq!(error_of(&answer).0, "approval_expired");
    // Give the sweeper no say in it: read again, still expired.
    tokio::time::sleep(Duration::from_millis(100)).await;
    let (_, again) = gate(&served, &bot, &key, None).await;
    assert_eq!(again["state"], "expired", "{again}");
}

#[tokio::test(flavor = "multi_thread")]
async fn cancelling_an_expired_request_is_refused_as_expired() {
    let ws = Workspace::new(SPEC);
    let served = serve(&ws);
    let bot = requester();
    let key = ask(
        &served,
        &bot,
        json!({"message": "Retry the import?", "payload": {"job": 6}, "ttl": "1s"}),
    )
    .await;
    let (_, view) = gate(&served, &bot, &key, Some("30s")).await;
    assert_eq!(view["state"], "expired", "{view}");
    let (status, answer) = cancel_gate(&served, &bot, &key, None).await;
    assert_eq!(status, 410, "{answer}");
    let (code, message) = error_of(&answer);
    assert_eq!(code, "approval_expired", "{answer}");
    assert!(message.contains("expired at"), "{message}");
}
