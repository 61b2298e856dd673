//! JSON-RPC batches on `POST /mcp`: their calls run concurrently (up to 8
//! at once), and a batch of more than 32 messages is refused whole.
//!
//! The old code ran a batch's calls one after another: a batch of
//! `wait_for_approval` calls held its connection for the sum of the waits
//! (hours, with enough of them), and a wait never saw what a later call of
//! the same batch did.

use serde_json::{Value, json};

use super::{DESK_SPEC, TOKENS};
use crate::common::Workspace;
use crate::common::server::Served;

/// POST `body` to /mcp with the requester token: status and JSON answer.
async fn post(served: &Served, body: &Value) -> (u16, Value) {
    let response = reqwest::Client::new()
        .post(served.url("/mcp"))
        .bearer_auth("tok-bot")
        .header("Content-Type", "application/json")
        .header("Accept", "application/json, text/event-stream")
        .body(body.to_string())
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    (status, response.json().await.unwrap())
}

fn call(id: u64, tool: &str, arguments: Value) -> Value {
    json!({
        "jsonrpc": "2.0",
        "id": id,
        "method": "tools/call",
        "params": {"name": tool, "arguments": arguments},
    })
}

/// What a tool answered: its structured content.
fn result_of(answer: &Value) -> &Value {
    let result = &answer["result"]["structuredContent"];
    assert!(result.is_object(), "{answer}");
    result
}

#[tokio::test(flavor = "multi_thread")]
async fn a_wait_in_a_batch_sees_what_a_later_call_of_the_batch_does() {
    let ws = Workspace::new(DESK_SPEC);
    let served = Served::start(
        &ws.spec,
        &ws.state_db(),
        &[("TOLLGATE_API_TOKENS", TOKENS)],
        &[],
    );
    let (status, asked) = post(
        &served,
        &call(
            1,
            "request_approval",
            json!({"message": "Refund?", "payload": {"amount": 5}}),
        ),
    )
    .await;
    assert_eq!(status, 200, "{asked}");
    let key = result_of(&asked)["key"].as_str().unwrap().to_string();

    // One after another, the wait ran out first (8 s, still pending) and
    // only then was the request cancelled. Concurrently, the wait sees
    // the cancellation.
    let batch = json!([
        call(
            2,
            "wait_for_approval",
            json!({"key": key, "timeout_seconds": 8})
        ),
        call(
            3,
            "cancel_approval",
            json!({"key": key, "reason": "changed my mind"})
        ),
    ]);
    let (status, answers) = post(&served, &batch).await;
    assert_eq!(status, 200, "{answers}");
    let answers = answers.as_array().expect("a batch answer");
    assert_eq!(answers.len(), 2, "{answers:?}");
    // Answers keep the batch's order.
    assert_eq!(answers[0]["id"], 2);
    assert_eq!(answers[1]["id"], 3);
    assert_eq!(result_of(&answers[1])["state"], "cancelled", "{answers:?}");
    assert_eq!(
        result_of(&answers[0])["state"],
        "cancelled",
        "the wait ran before the cancel, not beside it: {answers:?}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_batch_past_32_messages_is_refused_whole() {
    let ws = Workspace::new(DESK_SPEC);
    let served = Served::start(
        &ws.spec,
        &ws.state_db(),
        &[("TOLLGATE_API_TOKENS", TOKENS)],
        &[],
    );
    let ping = |id: usize| json!({"jsonrpc": "2.0", "id": id, "method": "ping"});
    let (status, answers) = post(&served, &Value::Array((0..32).map(ping).collect())).await;
    assert_eq!(status, 200, "{answers}");
    assert_eq!(answers.as_array().map(Vec::len), Some(32), "{answers}");

    let (status, refused) = post(&served, &Value::Array((0..33).map(ping).collect())).await;
    assert_eq!(status, 400, "{refused}");
    assert_eq!(refused["error"]["code"], -32600, "{refused}");
    assert_eq!(refused["id"], Value::Null, "{refused}");
    let message = refused["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("at most 32"), "{refused}");
}
