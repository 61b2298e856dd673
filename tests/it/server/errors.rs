//! Every error code of the HTTP API, each produced by a request a user
//! could really send, with the JSON shape `{"error": {"code", "message"}}`.

use crate::common;
use crate::common::server;

use std::time::Duration;

use common::Workspace;
use serde_json::{Value, json};
use server::{Api, Served, code};
use tollgate_runtime::server::signature;

/// `agent` starts the runs that alice decides: whoever starts a run may
/// not decide its gates.
const TOKENS: &str = "agent:agent-token,alice:alice-token,mallory:mallory-token";
const HOOK_SECRET: &str = "hook-secret-value";

/// One tool gate (the tool itself is never called here) and a signed webhook.
const SPEC: &str = r#"version: 1
agent: error-desk
trigger:
  webhook:
    path: /hooks/in
    secret: ${HOOK_SECRET}
approvals:
  approvers: [alice]
tools:
  send:
    http:
      method: POST
      url: "http://127.0.0.1:9/never"
      json: { amount: "{{ args.amount }}" }
    approval: required
    message: "Send {{ args.amount }}?"
steps:
  - id: send
    tool: send
    with: { amount: "{{ input.amount }}" }
"#;

const JSON: &[(&str, &str)] = &[("Content-Type", "application/json")];

fn env() -> Vec<(&'static str, &'static str)> {
    vec![
        ("TOLLGATE_API_TOKENS", TOKENS),
        ("HOOK_SECRET", HOOK_SECRET),
    ]
}

fn assert_error(status: u16, body: &Value, want_status: u16, want_code: &str) {
    assert_eq!(status, want_status, "{body}");
    assert_eq!(code(body), want_code, "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .is_some_and(|m| !m.is_empty()),
        "every error has a message: {body}"
    );
}

fn unix_now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64)
}

#[tokio::test(flavor = "multi_thread")]
async fn every_error_code_from_a_real_request() {
    let ws = Workspace::new(SPEC);
    let state = ws.path().join("state.db");
    let mut served = Served::start(&ws.spec, &state, &env(), &[]);
    let alice = Api::with_token("alice-token");
    let mallory = Api::with_token("mallory-token");
    let agent = Api::with_token("agent-token");
    let key = agent.pause(&served, json!({"amount": 5})).await.key;
    let approve_url = served.url(&format!("/approvals/{key}/approve"));

    // invalid_request: bad JSON, wrong types, unknown fields, a bad payload,
    // bad query parameters.
    let (s, b) = alice
        .post_raw(&served.url("/runs"), b"{\"input\": ".to_vec(), JSON)
        .await;
    assert_error(s, &b, 400, "invalid_request");
    let (s, b) = alice.post(&approve_url, json!({"reason": 42})).await;
    assert_error(s, &b, 400, "invalid_request");
    let (s, b) = alice
        .post(
            &served.url(&format!("/runs/{key}/approve")),
            json!({"approved": "yes"}),
        )
        .await;
    assert_error(s, &b, 400, "invalid_request");
    let (s, b) = alice.post(&approve_url, json!({"aproved": true})).await;
    assert_error(s, &b, 400, "invalid_request");
    let (s, b) = alice
        .post(&approve_url, json!({"payload": "not an object"}))
        .await;
    assert_error(s, &b, 400, "invalid_request");
    let (s, b) = alice.get(&served.url("/approvals?limit=0")).await;
    assert_error(s, &b, 400, "invalid_request");
    let (s, b) = alice.get(&served.url("/approvals?limit=501")).await;
    assert_error(s, &b, 400, "invalid_request");
    let (s, b) = alice.get(&served.url("/approvals?cursor=garbage")).await;
    assert_error(s, &b, 400, "invalid_request");
    let (s, b) = alice.post(&served.url("/runs?wait=maybe"), json!({})).await;
    assert_error(s, &b, 400, "invalid_request");

    // unauthorized: no token, a wrong token, a different scheme.
    let nobody = Api::new();
    let (s, b) = nobody.get(&served.url("/approvals")).await;
    assert_error(s, &b, 401, "unauthorized");
    let (s, b) = Api::with_token("alice-token-but-wrong")
        .post(&approve_url, json!({}))
        .await;
    assert_error(s, &b, 401, "unauthorized");
    let (s, b) = nobody
        .post_raw(
            &approve_url,
            b"{}".to_vec(),
            &[("Authorization", "Basic YWxpY2U6YWxpY2UtdG9rZW4=")],
        )
        .await;
    assert_error(s, &b, 401, "unauthorized");
    // /healthz needs no token.
    let (s, b) = nobody.get(&served.url("/healthz")).await;
    assert_eq!((s, &b["status"]), (200, &json!("ok")));

    // forbidden: a valid token whose name is not an approver; untouched.
    let (s, b) = mallory.post(&approve_url, json!({})).await;
    assert_error(s, &b, 403, "forbidden");
    let (s, b) = mallory
        .post(&served.url(&format!("/approvals/{key}/reject")), json!({}))
        .await;
    assert_error(s, &b, 403, "forbidden");
    let (_, record) = alice.get(&served.url(&format!("/approvals/{key}"))).await;
    assert_eq!(record["status"], "PENDING", "{record}");
    assert_eq!(record["decided_by"], Value::Null);

    // approval_not_found and run_not_found.
    let unknown = "00000000-0000-4000-8000-000000000000";
    let (s, b) = alice
        .get(&served.url(&format!("/approvals/{unknown}")))
        .await;
    assert_error(s, &b, 404, "approval_not_found");
    let (s, b) = alice
        .post(
            &served.url(&format!("/approvals/{unknown}/approve")),
            json!({}),
        )
        .await;
    assert_error(s, &b, 404, "approval_not_found");
    let (s, b) = alice.get(&served.url(&format!("/runs/{unknown}"))).await;
    assert_error(s, &b, 404, "run_not_found");
    let (s, b) = alice
        .post(
            &served.url(&format!("/runs/{unknown}/approve")),
            json!({"approved": true}),
        )
        .await;
    assert_error(s, &b, 404, "run_not_found");

    // not_found and method_not_allowed.
    let (s, b) = alice.get(&served.url("/no/such/route")).await;
    assert_error(s, &b, 404, "not_found");
    let response = alice
        .http
        .delete(served.url("/runs"))
        .bearer_auth("alice-token")
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    let body: Value = response.json().await.unwrap();
    assert_error(status, &body, 405, "method_not_allowed");
    let (s, b) = alice.get(&served.url("/hooks/in")).await;
    assert_error(s, &b, 405, "method_not_allowed");

    // payload_too_large: a 2 MiB body, on an API route and on the webhook.
    let big = format!("{{\"input\": \"{}\"}}", "x".repeat(2 * 1024 * 1024));
    let (s, b) = alice
        .post_raw(&served.url("/runs"), big.clone().into_bytes(), JSON)
        .await;
    assert_error(s, &b, 413, "payload_too_large");
    let (s, b) = nobody
        .post_raw(
            &served.url("/hooks/in"),
            big.clone().into_bytes(),
            &[(
                "X-Tollgate-Signature",
                &signature::sign(HOOK_SECRET.as_bytes(), big.as_bytes()),
            )],
        )
        .await;
    assert_error(s, &b, 413, "payload_too_large");

    // unsupported_media_type: JSON sent as text/plain (a web page's
    // cross-origin "simple" POST).
    let (s, b) = alice
        .post_raw(
            &served.url("/runs"),
            br#"{"input": {"amount": 1}}"#.to_vec(),
            &[("Content-Type", "text/plain")],
        )
        .await;
    assert_error(s, &b, 415, "unsupported_media_type");

    // Webhook signatures: missing, wrong, right.
    let body = br#"{"amount": 7}"#.to_vec();
    let (s, b) = nobody
        .post_raw(&served.url("/hooks/in"), body.clone(), &[])
        .await;
    assert_error(s, &b, 401, "unauthorized");
    let wrong = signature::sign(b"not-the-secret", &body);
    let (s, b) = nobody
        .post_raw(
            &served.url("/hooks/in"),
            body.clone(),
            &[("X-Tollgate-Signature", &wrong)],
        )
        .await;
    assert_error(s, &b, 401, "unauthorized");
    let right = signature::sign(HOOK_SECRET.as_bytes(), &body);
    let (s, b) = nobody
        .post_raw(
            &served.url("/hooks/in"),
            b"not json".to_vec(),
            &[(
                "X-Tollgate-Signature",
                &signature::sign(HOOK_SECRET.as_bytes(), b"not json"),
            )],
        )
        .await;
    assert_error(s, &b, 400, "invalid_request");
    let (s, b) = nobody
        .post_raw(
            &served.url("/hooks/in"),
            body.clone(),
            &[("X-Tollgate-Signature", &right)],
        )
        .await;
    assert_eq!(s, 202, "{b}");
    assert!(b["run_id"].is_string());
    // replayed: one timestamped request sent twice.
    let stamped = signature::sign_at(HOOK_SECRET.as_bytes(), &body, unix_now());
    for want in [202, 409] {
        let (s, b) = nobody
            .post_raw(
                &served.url("/hooks/in"),
                body.clone(),
                &[("X-Tollgate-Signature", &stamped)],
            )
            .await;
        if want == 202 {
            assert_eq!(s, 202, "{b}");
        } else {
            assert_error(s, &b, 409, "replayed");
        }
    }

    // already_resolved: the second decision on one key.
    let (s, b) = alice
        .post(
            &served.url(&format!("/approvals/{key}/reject")),
            json!({"reason": "no"}),
        )
        .await;
    assert_eq!(s, 200, "{b}");
    assert_eq!(b["approval"]["status"], "REJECTED");
    assert_eq!(b["approval"]["decided_by"], "alice");
    let run_id = b["run_id"].as_str().unwrap().to_string();
    let (s, b) = alice.post(&approve_url, json!({})).await;
    assert_error(s, &b, 409, "already_resolved");
    assert!(
        b["error"]["message"].as_str().unwrap().contains("alice"),
        "{b}"
    );
    // ...also when the run is named by its id.
    let (s, b) = alice
        .post(
            &served.url(&format!("/runs/{run_id}/approve")),
            json!({"approved": true}),
        )
        .await;
    assert_error(s, &b, 409, "already_resolved");

    // spec_changed: a run paused under this spec, the server restarted
    // with an edited one. The record stays PENDING; a reject still works.
    let key = agent.pause(&served, json!({"amount": 5})).await.key;
    assert_eq!(served.terminate(), Some(0), "SIGTERM exits cleanly");
    ws.write_spec(&SPEC.replace("Send {{ args.amount }}?", "Really send {{ args.amount }}?"));
    let served = Served::start(&ws.spec, &state, &env(), &[]);
    let (s, b) = alice
        .post(&served.url(&format!("/approvals/{key}/approve")), json!({}))
        .await;
    assert_error(s, &b, 409, "spec_changed");
    let (_, record) = alice.get(&served.url(&format!("/approvals/{key}"))).await;
    assert_eq!(record["status"], "PENDING");
    let (s, b) = alice
        .post(
            &served.url(&format!("/runs/{key}/approve")),
            json!({"approved": false}),
        )
        .await;
    assert_eq!(s, 200, "a reject is allowed under any spec: {b}");
}

#[tokio::test(flavor = "multi_thread")]
async fn an_expired_key_is_gone() {
    let ws = Workspace::new(
        r#"version: 1
agent: quick-desk
steps:
  - id: gate
    approval: { message: "Quick?", ttl: 1h }
"#,
    );
    let state = ws.path().join("state.db");
    let served = Served::start(&ws.spec, &state, &[], &[]);
    let api = Api::new();
    // Answered only after the startup sweep: the pause below comes later.
    assert_eq!(api.get(&served.url("/approvals")).await.0, 200);
    // Paused two hours ago (on a clock set back) with a one-hour TTL.
    let clock = common::hours_ago(2);
    let key = ws.pause_run_in(&state, json!({}), clock).await.key;
    let (s, b) = api
        .post(&served.url(&format!("/approvals/{key}/approve")), json!({}))
        .await;
    assert_error(s, &b, 410, "approval_expired");
    let (s, b) = api.get(&served.url("/approvals")).await;
    assert_eq!(s, 200);
    assert_eq!(
        b["approvals"],
        json!([]),
        "expired records are never listed"
    );
}

/// Every JSON route that changes state needs a JSON Content-Type, even with
/// an empty body: a browser page of another origin can send `text/plain`
/// or a form without a preflight, and must not start or decide anything.
#[tokio::test(flavor = "multi_thread")]
async fn json_routes_need_a_json_content_type() {
    let ws = Workspace::new(SPEC);
    let served = Served::start(&ws.spec, &ws.path().join("state.db"), &env(), &[]);
    let alice = Api::with_token("alice-token");
    let agent = Api::with_token("agent-token");
    let key = agent.pause(&served, json!({"amount": 5})).await.key;
    let routes = [
        served.url("/runs"),
        served.url(&format!("/approvals/{key}/approve")),
        served.url(&format!("/approvals/{key}/reject")),
        served.url(&format!("/runs/{key}/approve")),
    ];
    let bodies: [&[u8]; 3] = [
        b"",
        br#"{"input": {"amount": 1}}"#,
        br#"{"approved": true}"#,
    ];
    let refused: [&[(&str, &str)]; 6] = [
        &[],
        &[("Content-Type", "text/plain")],
        &[("Content-Type", "text/plain; charset=utf-8")],
        &[("Content-Type", "application/x-www-form-urlencoded")],
        &[("Content-Type", "multipart/form-data; boundary=x")],
        &[("Content-Type", "application/jsonp")],
    ];
    for url in &routes {
        for body in bodies {
            for headers in refused {
                let (s, b) = alice.post_raw(url, body.to_vec(), headers).await;
                assert_error(s, &b, 415, "unsupported_media_type");
                assert!(
                    b["error"]["message"]
                        .as_str()
                        .unwrap()
                        .contains("application/json"),
                    "the message says what to send: {b}"
                );
            }
        }
    }
    // Two Content-Type headers are ambiguous.
    let request = alice
        .http
        .post(&routes[1])
        .bearer_auth("alice-token")
        .header("Content-Type", "application/json")
        .header("Content-Type", "text/plain")
        .body("{}");
    let response = request.send().await.unwrap();
    let status = response.status().as_u16();
    assert_error(
        status,
        &response.json().await.unwrap(),
        415,
        "unsupported_media_type",
    );

    // Nothing was decided or started by any of them.
    let (_, record) = alice.get(&served.url(&format!("/approvals/{key}"))).await;
    assert_eq!(record["status"], "PENDING", "{record}");
    let (_, list) = alice.get(&served.url("/approvals")).await;
    assert_eq!(list["approvals"].as_array().unwrap().len(), 1, "{list}");

    // JSON with parameters, in any case, and +json types are accepted.
    for content_type in [
        "application/json; charset=utf-8",
        "Application/JSON",
        "application/vnd.api+json",
    ] {
        let (s, b) = alice
            .post_raw(
                &served.url("/runs"),
                br#"{"input": {"amount": 2}}"#.to_vec(),
                &[("Content-Type", content_type)],
            )
            .await;
        assert_eq!(s, 202, "{content_type}: {b}");
    }
    // An empty body with the JSON type is `{}`.
    let (s, b) = alice
        .post_raw(
            &served.url(&format!("/approvals/{key}/approve")),
            Vec::new(),
            JSON,
        )
        .await;
    assert_eq!(s, 200, "{b}");
    assert_eq!(b["approval"]["status"], "APPROVED");
}

/// Bodies are JSON objects: an array, a string or `null` is refused (serde
/// would read a struct from an array), and `{"payload": null}` on an
/// approve is refused too: it could mean "no edit" or "replace with null".
#[tokio::test(flavor = "multi_thread")]
async fn bodies_are_objects_and_a_null_payload_is_refused() {
    let ws = Workspace::new(SPEC);
    let served = Served::start(&ws.spec, &ws.path().join("state.db"), &env(), &[]);
    let alice = Api::with_token("alice-token");
    let key = alice.pause(&served, json!({"amount": 5})).await.key;
    let approve_url = served.url(&format!("/approvals/{key}/approve"));
    for body in [
        json!([{"input": {"amount": 3}}]),
        json!([]),
        json!("input"),
        json!(7),
        json!(null),
    ] {
        let (s, b) = alice.post(&served.url("/runs"), body.clone()).await;
        assert_error(s, &b, 400, "invalid_request");
        assert!(
            b["error"]["message"]
                .as_str()
                .unwrap()
                .contains("must be a JSON object"),
            "{body}: {b}"
        );
        let (s, b) = alice.post(&approve_url, body.clone()).await;
        assert_error(s, &b, 400, "invalid_request");
    }
    let (_, list) = alice.get(&served.url("/approvals")).await;
    assert_eq!(
        list["approvals"].as_array().unwrap().len(),
        1,
        "no run started: {list}"
    );

    for (url, body) in [
        (approve_url.clone(), json!({"payload": null})),
        (approve_url.clone(), json!({"payload": null, "reason": "x"})),
        (
            served.url(&format!("/runs/{key}/approve")),
            json!({"approved": true, "payload": null}),
        ),
        (
            served.url(&format!("/runs/{key}/approve")),
            json!({"approved": false, "payload": null}),
        ),
    ] {
        let (s, b) = alice.post(&url, body.clone()).await;
        assert_error(s, &b, 400, "invalid_request");
        assert!(
            b["error"]["message"].as_str().unwrap().contains("null"),
            "{body}: {b}"
        );
    }
    let (_, record) = alice.get(&served.url(&format!("/approvals/{key}"))).await;
    assert_eq!(record["status"], "PENDING", "{record}");

    // The input itself may be any JSON, as with `tollgate run --input`.
    let (s, b) = alice
        .post(&served.url("/runs"), json!({"input": [1, 2]}))
        .await;
    assert_eq!(s, 202, "{b}");
}

/// A store another process holds the write lock of (SQLite's "database is
/// locked") is busy, not broken: a decision answers 503 `store_busy` with
/// `Retry-After` once the server's busy timeout is out, decides nothing, and
/// the same request succeeds after the lock is released.
#[tokio::test(flavor = "multi_thread")]
async fn a_busy_store_answers_503_with_retry_after() {
    let ws = Workspace::new(SPEC);
    let state = ws.path().join("state.db");
    let mut env = env();
    env.push((tollgate_runtime::env::SQLITE_BUSY_TIMEOUT, "200ms"));
    let served = Served::start(&ws.spec, &state, &env, &[]);
    let alice = Api::with_token("alice-token");
    let agent = Api::with_token("agent-token");
    let key = agent.pause(&served, json!({"amount": 5})).await.key;
    let approve_url = served.url(&format!("/approvals/{key}/approve"));

    // Another process takes the write lock and keeps it.
    let holder = rusqlite::Connection::open(&state).expect("open the state file");
    holder
        .busy_timeout(Duration::from_secs(30))
        .expect("busy timeout");
    holder.execute_batch("BEGIN EXCLUSIVE").expect("lock");

    let response = alice
        .http
        .post(&approve_url)
        .bearer_auth("alice-token")
        .json(&json!({}))
        .send()
        .await
        .expect("POST");
    let status = response.status().as_u16();
    let retry_after = response
        .headers()
        .get("retry-after")
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    let body: Value = response.json().await.expect("JSON body");
    assert_error(status, &body, 503, "store_busy");
    let seconds: u64 = retry_after
        .as_deref()
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("Retry-After in seconds, found {retry_after:?}"));
    assert!(seconds >= 1, "{seconds}");
    // The message names neither the file nor SQLite's text.
    let message = body["error"]["message"].as_str().unwrap();
    assert!(!message.contains("state.db"), "{message}");

    // Readers do not wait for the writer (WAL): nothing was decided.
    let (_, record) = alice.get(&served.url(&format!("/approvals/{key}"))).await;
    assert_eq!(record["status"], "PENDING", "{record}");

    holder.execute_batch("ROLLBACK").expect("unlock");
    let (s, b) = alice.post(&approve_url, json!({})).await;
    assert_eq!(s, 200, "{b}");
}
