//! Gate requests live in the store, not in a server: a server killed
//! with SIGKILL (no shutdown at all) mid-wait or before any wait leaves
//! the request to the next server on the same state, where the waiter
//! reconnects and gets the decision made meanwhile.

use serde_json::json;

use super::{
    SPEC, TOKENS, ask, create, decide_by_cli, full, gate, key_of, let_it_wait, requester, waiter,
};
use crate::common::Workspace;
use crate::common::server::Served;

fn start(ws: &Workspace) -> Served {
    Served::start(
        &ws.spec,
        &ws.state_db(),
        &[("TOLLGATE_API_TOKENS", TOKENS)],
        &[],
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_waiter_reconnects_after_a_sigkill_and_gets_the_decision_made_meanwhile() {
    let ws = Workspace::new(SPEC);
    let mut served = start(&ws);
    let bot = requester();
    let key = ask(
        &served,
        &bot,
        json!({"message": "Ship order 9?", "payload": {"order": 9}}),
    )
    .await;
    let waiting = waiter(&served, &bot, &key, "30s");
    let_it_wait().await;
    served.kill();
    let (status, cut_off, _) = waiting.await.expect("the waiter");
    assert_ne!(status, 200, "the wait cannot have ended well: {cut_off}");

    // Decided from another process while no server runs.
    let state = ws.state_db();
    decide_by_cli(
        &ws,
        "approve",
        &key,
        &["--state", state.to_str().expect("utf-8")],
        &["--reason", "while it was down"],
    )
    .await;

    let served = start(&ws);
    let (status, view) = gate(&served, &bot, &key, Some("30s")).await;
    assert_eq!(status, 200, "{view}\n{}", served.logs());
    assert_eq!(view["status"], "APPROVED", "{view}");
    assert_eq!(view["decision"]["by"], "dana");
    assert_eq!(view["decision"]["reason"], "while it was down");
    assert_eq!(view["decision"]["payload"], json!({"order": 9}));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_request_made_before_a_sigkill_is_waited_on_and_decided_after_it() {
    let ws = Workspace::new(SPEC);
    let mut served = start(&ws);
    let bot = requester();
    let asked = create(
        &served,
        &bot,
        json!({"message": "Ship order 10?", "payload": {"order": 10}, "idempotency_key": "order-10"}),
    )
    .await;
    let key = key_of(&asked);
    served.kill();

    let served = start(&ws);
    // The agent, restarted too, asks again with its key: the same request.
    let (status, again) = bot
        .post(
            &served.url("/gates"),
            json!({"message": "Ship order 10?", "payload": {"order": 10}, "idempotency_key": "order-10"}),
        )
        .await;
    assert_eq!(status, 200, "{again}");
    assert_eq!(again["key"], key.as_str());
    assert_eq!(again["status"], "PENDING");

    let waiting = waiter(&served, &bot, &key, "30s");
    let_it_wait().await;
    let (status, answer) = full()
        .post(
            &served.url(&format!("/approvals/{key}/approve")),
            json!({"payload": {"order": 10, "carrier": "post"}}),
        )
        .await;
    assert_eq!(status, 200, "{answer}");
    let (status, view, _) = waiting.await.expect("the waiter");
    assert_eq!(status, 200, "{view}");
    assert_eq!(view["status"], "MODIFIED", "{view}");
    assert_eq!(view["decision"]["by"], "carol");
    assert_eq!(
        view["decision"]["payload"],
        json!({"order": 10, "carrier": "post"})
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_graceful_shutdown_answers_its_waiters_with_the_request_as_it_stands() {
    let ws = Workspace::new(SPEC);
    let mut served = start(&ws);
    let bot = requester();
    let key = ask(
        &served,
        &bot,
        json!({"message": "Ship order 11?", "payload": {"order": 11}}),
    )
    .await;
    let waiting = waiter(&served, &bot, &key, "30s");
    let_it_wait().await;
    // SIGTERM: the server stops waiting and answers before it exits, so a
    // client is not left with a cut connection.
    let code = tokio::task::block_in_place(|| served.terminate());
    assert_eq!(code, Some(0), "{}", served.logs());
    let (status, view, _) = waiting.await.expect("the waiter");
    assert_eq!(status, 200, "{view}");
    assert_eq!(view["state"], "pending", "{view}");

    let served = start(&ws);
    let (status, view) = gate(&served, &bot, &key, None).await;
    assert_eq!(
        (status, view["state"].as_str()),
        (200, Some("pending")),
        "{view}"
    );
}
