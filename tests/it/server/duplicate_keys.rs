//! A JSON body with a key twice in one object is refused (400
//! `invalid_request`, naming the key and where) on every route that reads
//! JSON, and changes nothing. serde_json keeps the last of two equal keys;
//! a proxy or signature check in front that keeps the first would see
//! another request than the one run. The old code accepted every one of
//! these and acted on the last key.
//!
//! Also the key limit: a body of more than `MAX_JSON_KEYS` object keys is
//! a 400 naming the limit.

use crate::common::Workspace;
use crate::common::server::{Api, Served, code};

use serde_json::{Value, json};
use tollgate_runtime::json_keys::MAX_JSON_KEYS;

const TOKENS: &str = "alice:tok-alice,bot/requester:tok-bot";

/// A gate, and a webhook that starts the same run.
const SPEC: &str = r#"version: 1
agent: twice-desk
trigger:
  webhook:
    path: /hooks/twice
steps:
  - id: gate
    approval:
      message: "Go?"
      payload: { order: "{{ input.order }}" }
"#;

fn refused(what: &str, status: u16, body: &Value, needle: &str) {
    assert_eq!(status, 400, "{what}: {body}");
    assert_eq!(code(body), "invalid_request", "{what}: {body}");
    let message = body["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains(needle), "{what}: {message}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_key_twice_is_refused_on_every_json_body() {
    let ws = Workspace::new(SPEC);
    let served = Served::start(
        &ws.spec,
        &ws.state_db(),
        &[("TOLLGATE_API_TOKENS", TOKENS)],
        &[],
    );
    let api = Api::with_token("tok-alice");
    let run = api.pause(&served, json!({"order": "A-1"})).await;
    let (run_id, key) = (run.run_id.clone(), run.key.clone());
    let json_type = [("Content-Type", "application/json")];

    let cases: Vec<(String, &str, &str)> = vec![
        (
            "/runs".into(),
            r#"{"input": {"order": "A-2", "order": "B-2"}}"#,
            r#"duplicate key "order" in the object at "/input""#,
        ),
        (
            "/hooks/twice".into(),
            r#"{"order": "A-3", "order": "B-3"}"#,
            r#"duplicate key "order" in the top-level object"#,
        ),
        (
            format!("/approvals/{key}/approve"),
            r#"{"payload": {"order": "A"}, "payload": {"order": "B"}}"#,
            r#"duplicate key "payload""#,
        ),
        (
            format!("/approvals/{key}/reject"),
            r#"{"reason": "no", "reason": "yes"}"#,
            r#"duplicate key "reason""#,
        ),
        (
            format!("/runs/{run_id}/approve"),
            r#"{"approved": false, "approved": true}"#,
            r#"duplicate key "approved""#,
        ),
        (
            "/approvals/batch".into(),
            r#"{"keys": ["k"], "keys": ["l"], "decision": "approve"}"#,
            r#"duplicate key "keys""#,
        ),
        (
            "/gates".into(),
            r#"{"message": "m", "payload": {"a": [{"x": 1, "x": 2}]}}"#,
            r#"duplicate key "x" in the object at "/payload/a/0""#,
        ),
        (
            format!("/runs/{run_id}/cancel"),
            r#"{"reason": "a", "reason": "b"}"#,
            r#"duplicate key "reason""#,
        ),
        (
            format!("/runs/{run_id}/fail"),
            r#"{"reason": "a", "reason": "b"}"#,
            r#"duplicate key "reason""#,
        ),
    ];
    for (path, body, needle) in &cases {
        let (status, answer) = api
            .post_raw(&served.url(path), body.as_bytes().to_vec(), &json_type)
            .await;
        refused(path, status, &answer, needle);
    }

    // Nothing was decided, cancelled or started.
    let (status, approval) = api.get(&served.url(&format!("/approvals/{key}"))).await;
    assert_eq!(status, 200, "{approval}");
    assert_eq!(approval["status"], "PENDING", "{approval}");
    let (_, runs) = api.get(&served.url("/runs")).await;
    assert_eq!(runs["runs"].as_array().map(Vec::len), Some(1), "{runs}");

    // MCP: a JSON-RPC error, id null (the message was not read).
    let message = r#"{"jsonrpc": "2.0", "id": 1, "method": "tools/list", "method": "initialize"}"#;
    let response = reqwest::Client::new()
        .post(served.url("/mcp"))
        .bearer_auth("tok-bot")
        .header("Content-Type", "application/json")
        .header("Accept", "application/json, text/event-stream")
        .body(message)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 400);
    let answer: Value = response.json().await.unwrap();
    assert_eq!(answer["error"]["code"], -32600, "{answer}");
    assert_eq!(answer["id"], Value::Null, "{answer}");
    let text = answer["error"]["message"].as_str().unwrap_or_default();
    assert!(text.contains(r#"duplicate key "method""#), "{answer}");

    // Equal keys in different objects are no duplicates.
    let (status, answer) = api
        .post_raw(
            &served.url("/runs"),
            br#"{"input": {"order": "C", "more": {"order": "D"}}}"#.to_vec(),
            &json_type,
        )
        .await;
    assert_eq!(status, 202, "{answer}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_body_of_more_keys_than_the_limit_is_refused() {
    let ws = Workspace::new(SPEC);
    // Room for the body: some 8 bytes a key.
    let served = Served::start(
        &ws.spec,
        &ws.state_db(),
        &[("TOLLGATE_MAX_BODY_BYTES", "4194304")],
        &[],
    );
    let api = Api::new();
    let body = |keys: usize| {
        let members: Vec<String> = (0..keys).map(|i| format!("\"{i:x}\":0")).collect();
        format!("{{\"input\": {{{}}}}}", members.join(",")).into_bytes()
    };
    let json_type = [("Content-Type", "application/json")];
    // The top-level "input" is a key too.
    let (status, answer) = api
        .post_raw(&served.url("/runs"), body(MAX_JSON_KEYS), &json_type)
        .await;
    refused(
        "past the limit",
        status,
        &answer,
        &format!("more than {MAX_JSON_KEYS} object keys"),
    );
    let (status, answer) = api
        .post_raw(&served.url("/runs"), body(MAX_JSON_KEYS - 1), &json_type)
        .await;
    assert_eq!(status, 202, "{answer}");
}
