//! `DELETE /gates/{key}`: the requester withdraws its request. Cancelling
//! twice answers the same; a cancelled request cannot be decided, a
//! decided one cannot be cancelled, and another requester's is not found.

use serde_json::json;

use super::{
    SPEC, ask, cancel_gate, error_of, full, gate, let_it_wait, other_requester, requester, serve,
    waiter,
};
use crate::common::{Workspace, assert_exit};

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_requester_cancels_once_and_nothing_decides_it_after() {
    let ws = Workspace::new(SPEC);
    let served = serve(&ws);
    let bot = requester();
    let key = ask(
        &served,
        &bot,
        json!({"message": "Scale the cluster to 40 nodes?", "payload": {"nodes": 40}}),
    )
    .await;

    // Another requester cannot cancel it.
    let (status, answer) = cancel_gate(&served, &other_requester(), &key, None).await;
    assert_eq!(status, 404, "{answer}");
    assert_eq!(error_of(&answer).0, "approval_not_found");

    // A waiter hears the cancel like a decision.
    let waiting = waiter(&served, &bot, &key, "30s");
    let_it_wait().await;
    let (status, cancelled) = cancel_gate(&served, &bot, &key, Some("traffic went down")).await;
    assert_eq!(status, 200, "{cancelled}");
    assert_eq!(cancelled["state"], "cancelled", "{cancelled}");
    assert_eq!(cancelled["status"], "CANCELLED");
    assert_eq!(cancelled["approved"], serde_json::Value::Null);
    assert_eq!(cancelled["decision"]["outcome"], "cancelled");
    assert_eq!(cancelled["decision"]["by"], "bot");
    assert_eq!(cancelled["decision"]["reason"], "traffic went down");
    assert_eq!(cancelled["decision"]["payload"], serde_json::Value::Null);
    let (status, heard, _) = waiting.await.expect("the waiter");
    assert_eq!(status, 200, "{heard}");
    assert_eq!(heard["state"], "cancelled", "{heard}");

    // Again: the same answer.
    let (status, again) = cancel_gate(&served, &bot, &key, None).await;
    assert_eq!(status, 200, "{again}");
    assert_eq!(again["state"], "cancelled");
    assert_eq!(again["decision"]["reason"], "traffic went down");

    // No decision after it: over HTTP, nor from the CLI.
    let (status, refused) = full()
        .post(&served.url(&format!("/approvals/{key}/approve")), json!({}))
        .await;
    assert_eq!(status, 409, "{refused}");
    assert_eq!(error_of(&refused).0, "already_resolved", "{refused}");
    let out = ws
        .decide("approve", &key)
        .args(["--by", "dana"])
        .output()
        .expect("run tollgate");
    assert_exit(&out, 4);
    let (_, view) = gate(&served, &bot, &key, None).await;
    assert_eq!(view["status"], "CANCELLED", "{view}");
    assert!(super::pending_keys(&served).await.is_empty());
}

#[tokio::test(flavor = "multi_thread")]
async fn a_decided_request_cannot_be_cancelled() {
    let ws = Workspace::new(SPEC);
    let served = serve(&ws);
    let bot = requester();
    let key = ask(
        &served,
        &bot,
        json!({"message": "Merge the release branch?", "payload": {"branch": "release"}}),
    )
    .await;
    let (status, answer) = full()
        .post(
            &served.url(&format!("/approvals/{key}/reject")),
            json!({"reason": "tests are red"}),
        )
        .await;
    assert_eq!(status, 200, "{answer}");
    let (status, refused) = cancel_gate(&served, &bot, &key, None).await;
    assert_eq!(status, 409, "{refused}");
    let (code, message) = error_of(&refused);
    assert_eq!(code, "already_resolved");
    assert!(message.contains("carol"), "says who decided: {message}");
    let (_, view) = gate(&served, &bot, &key, None).await;
    assert_eq!(view["status"], "REJECTED", "{view}");
    assert_eq!(view["decision"]["reason"], "tests are red");
}

/// Rounds of the race: each a fresh request cancelled and approved at once.
const ROUNDS: usize = 6;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_cancel_and_an_approval_at_once_one_wins_and_the_run_ends_its_way() {
    let ws = Workspace::new(SPEC);
    let served = std::sync::Arc::new(serve(&ws));
    for round in 0..ROUNDS {
        let key = ask(
            &served,
            &requester(),
            json!({"message": format!("Race {round}?"), "payload": {"round": round}}),
        )
        .await;
        let start = std::sync::Arc::new(tokio::sync::Barrier::new(2));
        let cancelling = {
            let (served, key, start) = (served.clone(), key.clone(), start.clone());
            tokio::spawn(async move {
                start.wait().await;
                cancel_gate(&served, &requester(), &key, None).await
            })
        };
        let approving = {
            let (served, key, start) = (served.clone(), key.clone(), start.clone());
            tokio::spawn(async move {
                start.wait().await;
                full()
                    .post(&served.url(&format!("/approvals/{key}/approve")), json!({}))
                    .await
            })
        };
        let (cancel_status, cancelled) = cancelling.await.expect("cancel");
        let (approve_status, approved) = approving.await.expect("approve");
        let (winner, loser) = match (cancel_status, approve_status) {
            (200, 409) => ("CANCELLED", approved),
            (409, 200) => ("APPROVED", cancelled),
            other => panic!("not one winner: {other:?}\n{cancelled}\n{approved}"),
        };
        assert_eq!(error_of(&loser).0, "already_resolved", "{loser}");
        let (_, view) = gate(&served, &requester(), &key, None).await;
        assert_eq!(view["status"], winner, "{view}");
        let ended = if winner == "CANCELLED" {
            "cancelled"
        } else {
            "completed"
        };
        let store = crate::common::open_store(&ws.state_db());
        assert_eq!(
            super::run_status(&store, &key).await,
            ended,
            "the run ends as its request did"
        );
    }
}
