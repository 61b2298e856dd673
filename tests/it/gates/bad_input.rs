//! Bad requests are refused with 400 `invalid_request` and a message
//! naming the field at fault, and store nothing.

use serde_json::{Value, json};

use super::{SPEC, ask, error_of, gate, pending_keys, requester, serve};
use crate::common::Workspace;

#[tokio::test(flavor = "multi_thread")]
async fn each_bad_request_names_its_field_and_stores_nothing() {
    let ws = Workspace::new(SPEC);
    let served = serve(&ws);
    let bot = requester();
    let cases: Vec<(Value, &str)> = vec![
        (json!({"payload": {"a": 1}}), "message"),
        (json!({"message": "", "payload": {"a": 1}}), "message"),
        (json!({"message": "   ", "payload": {"a": 1}}), "message"),
        (json!({"message": "Go?"}), "payload"),
        (
            json!({"message": "Go?", "payload": {}, "ttl": "soon"}),
            "ttl",
        ),
        (json!({"message": "Go?", "payload": {}, "ttl": "0s"}), "ttl"),
        (
            json!({"message": "Go?", "payload": {}, "colour": "red"}),
            "colour",
        ),
        (
            json!({"message": "Go?", "payload": {}, "step": "send payout"}),
            "step",
        ),
        (json!({"message": "Go?", "payload": {}, "step": ""}), "step"),
        (
            json!({"message": "Go?", "payload": {}, "idempotency_key": " "}),
            "idempotency_key",
        ),
        (
            json!({"message": "Go?", "payload": {}, "requester": "a\nb"}),
            "requester",
        ),
        (
            json!({"message": "Go?", "payload": {}, "policy": {"quorum": 2}}),
            "quorum",
        ),
    ];
    let mut failures = Vec::new();
    for (body, field) in &cases {
        let (status, answer) = bot.post(&served.url("/gates"), body.clone()).await;
        let (code, message) = error_of(&answer);
        if status != 400 || code != "invalid_request" || !message.contains(field) {
            failures.push(format!(
                "{body} -> {status} {answer} (should name {field:?})"
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "refused badly:\n{}",
        failures.join("\n")
    );
    assert!(pending_keys(&served).await.is_empty(), "nothing stored");
    assert_eq!(ws.list_json()["approvals"], json!([]));

    // A body that is not JSON, or not an object.
    for raw in [&b"{not json"[..], b"[1, 2]"] {
        let (status, answer) = bot
            .post_raw(
                &served.url("/gates"),
                raw.to_vec(),
                &[("content-type", "application/json")],
            )
            .await;
        assert_eq!(status, 400, "{answer}");
        assert_eq!(error_of(&answer).0, "invalid_request", "{answer}");
    }

    // A bad wait on a request that exists.
    let key = ask(&served, &bot, json!({"message": "Go?", "payload": {}})).await;
    let (status, answer) = gate(&served, &bot, &key, Some("soon")).await;
    assert_eq!(status, 400, "{answer}");
    let (code, message) = error_of(&answer);
    assert_eq!(code, "invalid_request");
    assert!(message.contains("wait"), "{message}");
    // A key that is not one.
    let (status, answer) = gate(&served, &bot, "no-such-key", Some("1s")).await;
    assert_eq!(status, 404, "{answer}");
    assert_eq!(error_of(&answer).0, "approval_not_found");
}
