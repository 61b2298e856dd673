//! An idempotency key makes one approval however often it is sent: 16
//! identical requests at once answer one 201 and fifteen 200s with the
//! same key, and one approval is listed. The same key with another body
//! is refused; the same key from another token is that token's own.

use std::sync::Arc;

use serde_json::json;

use super::{
    SPEC, create, error_of, full, gate, key_of, other_requester, pending_keys, requester, serve,
};
use crate::common::Workspace;

const RACERS: usize = 16;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sixteen_identical_requests_at_once_make_one_approval() {
    let ws = Workspace::new(SPEC);
    let served = Arc::new(serve(&ws));
    let body = json!({
        "message": "Restart the billing service?",
        "payload": {"service": "billing"},
        "idempotency_key": "restart-billing-42",
    });
    let start = Arc::new(tokio::sync::Barrier::new(RACERS));
    let mut racers = Vec::new();
    for _ in 0..RACERS {
        let (served, body, start) = (served.clone(), body.clone(), start.clone());
        racers.push(tokio::spawn(async move {
            // A client each: sixteen connections, not one pooled one.
            let bot = requester();
            start.wait().await;
            bot.post(&served.url("/gates"), body).await
        }));
    }
    let mut answers = Vec::new();
    for racer in racers {
        answers.push(racer.await.expect("a racer"));
    }
    let created = answers.iter().filter(|(status, _)| *status == 201).count();
    let repeated = answers.iter().filter(|(status, _)| *status == 200).count();
    assert_eq!((created, repeated), (1, RACERS - 1), "{answers:#?}");
    let key = key_of(&answers[0].1);
    for (_, view) in &answers {
        assert_eq!(view["key"], key.as_str(), "{answers:#?}");
        assert_eq!(view["state"], "pending");
        assert_eq!(view["idempotency_key"], "restart-billing-42");
    }
    assert_eq!(
        pending_keys(&served).await,
        vec![key.clone()],
        "one approval listed"
    );
    // Its approval record says it is a request: who asked, the request's
    // fingerprint, and no spec version.
    let (status, record) = full().get(&served.url(&format!("/approvals/{key}"))).await;
    assert_eq!(status, 200, "{record}");
    assert_eq!(record["spec_hash"], serde_json::Value::Null, "{record}");
    assert_eq!(record["origin"]["kind"], "request", "{record}");
    assert_eq!(record["origin"]["requested_by"], "bot", "{record}");
    assert!(
        record["origin"]["fingerprint"]
            .as_str()
            .is_some_and(|f| !f.is_empty()),
        "{record}"
    );
    assert_eq!(record["spec_current"], true, "a request is never stale");

    // The same key with another request: refused, nothing stored.
    let (status, refused) = requester()
        .post(
            &served.url("/gates"),
            json!({
                "message": "Restart the billing service NOW?",
                "payload": {"service": "billing"},
                "idempotency_key": "restart-billing-42",
            }),
        )
        .await;
    assert_eq!(status, 409, "{refused}");
    let (code, message) = error_of(&refused);
    assert_eq!(code, "idempotency_conflict");
    assert!(message.contains("idempotency_key"), "{message}");
    assert_eq!(pending_keys(&served).await, vec![key.clone()]);

    // The same key from another token is another token's request.
    let theirs = create(&served, &other_requester(), body.clone()).await;
    assert_ne!(key_of(&theirs), key, "another token's key is its own");
    assert_eq!(theirs["requested_by"], "other-bot");
    assert_eq!(pending_keys(&served).await.len(), 2);

    // After a decision, the same request again answers with the decision.
    let (status, _) = full()
        .post(&served.url(&format!("/approvals/{key}/approve")), json!({}))
        .await;
    assert_eq!(status, 200);
    let (status, again) = requester().post(&served.url("/gates"), body).await;
    assert_eq!(status, 200, "{again}");
    assert_eq!(again["key"], key.as_str());
    assert_eq!(again["status"], "APPROVED", "{again}");
    let (status, view) = gate(&served, &requester(), &key, None).await;
    assert_eq!((status, &view["status"]), (200, &json!("APPROVED")));
}

/// Before, the fingerprint a repeated key is checked against hashed the
/// payload with its keys in the order they came, so a retry whose JSON
/// library wrote them in another order got 409 `idempotency_conflict`.
/// The same request is the same whatever the order of its keys.
#[tokio::test(flavor = "multi_thread")]
async fn a_retry_with_its_payload_keys_in_another_order_is_the_same_request() {
    let ws = Workspace::new(SPEC);
    let served = serve(&ws);
    let first = requester()
        .post(
            &served.url("/gates"),
            serde_json::from_str(
                r#"{"message": "Pay?", "payload": {"a": 1, "b": {"x": 1, "y": 2}}, "idempotency_key": "k-7"}"#,
            )
            .unwrap(),
        )
        .await;
    assert_eq!(first.0, 201, "{}", first.1);
    let retry = requester()
        .post(
            &served.url("/gates"),
            serde_json::from_str(
                r#"{"idempotency_key": "k-7", "payload": {"b": {"y": 2, "x": 1}, "a": 1}, "message": "Pay?"}"#,
            )
            .unwrap(),
        )
        .await;
    assert_eq!(retry.0, 200, "{}", retry.1);
    assert_eq!(retry.1["key"], first.1["key"]);
}
