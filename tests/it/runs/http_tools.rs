//! HTTP tools against a real loopback server: gates decide how many calls
//! reach the downstream (approve 1, reject 0, modify 1 with the edits, a
//! race of approvers still 1, a restart in between still 1), calls carry a
//! derived Idempotency-Key, and responses become outputs or clear
//! errors.

use crate::common;
use crate::common::http;
use crate::common::stub_server;

use std::io::{BufRead, BufReader};
use std::process::{Child, Stdio};
use std::time::Duration;

use common::*;
use http::*;
use serde_json::json;
use stub_server::{Response, StubServer};
use tollgate_runtime::store::PendingQuery;
use tollgate_runtime::tools::idempotency_key;
use tollgate_runtime::{ApprovalStatus, RunStatus};

const ORDER: &str = r#"{"order_id": "A-7", "amount": 40}"#;

fn refund_stub() -> StubServer {
    StubServer::start(|_| created())
}

fn gated_workspace(stub: &StubServer, http_extra: &str) -> Workspace {
    Workspace::new(&gated_post_spec(&stub.url("/refunds"), http_extra))
}

async fn run_status(
    ws: &Workspace,
    key: &str,
) -> (RunStatus, serde_json::Map<String, serde_json::Value>) {
    let store = open_store(&ws.state_db());
    let record = store.get_approval(key).await.unwrap().expect("record");
    let run = store.get_run(&record.run_id).await.unwrap().expect("run");
    (run.status, run.outputs)
}

/// The key a call at `step` carries after the gate `key`: derived from the
/// run id, the step and the gate (the run id read from the store).
async fn gated_key(ws: &Workspace, key: &str, step: &str) -> String {
    let store = open_store(&ws.state_db());
    let record = store.get_approval(key).await.unwrap().expect("record");
    idempotency_key(&record.run_id, step, Some(key))
}

// ---- gates ----------------------------------------------------------------

#[tokio::test(flavor = "multi_thread")]
async fn approve_makes_exactly_one_call_with_a_derived_idempotency_key() {
    let stub = refund_stub();
    let ws = gated_workspace(&stub, "");
    let key = ws.pause_run(ORDER);
    assert_eq!(stub.count(), 0, "nothing is called before the decision");

    assert_success(&approve(&ws, &key, &[]));

    let calls = stub.requests_to("/refunds");
    assert_eq!(calls.len(), 1);
    let call = &calls[0];
    assert_eq!(call.method, "POST");
    assert_eq!(call.json(), json!({"order": "A-7", "amount": 40}));
    assert_eq!(call.header("content-type"), Some("application/json"));
    let sent = call
        .header("idempotency-key")
        .expect("Idempotency-Key sent");
    assert_eq!(sent, gated_key(&ws, &key, "refund").await);
    assert!(!sent.contains(&key), "the approval key itself never leaves");

    let (status, outputs) = run_status(&ws, &key).await;
    assert_eq!(status, RunStatus::Completed);
    assert_eq!(outputs["refund"]["status"], 201);
    assert_eq!(outputs["refund"]["body"], json!({"id": "rf_1", "ok": true}));
    assert_eq!(outputs["result"], json!({"refund": "rf_1"}));
}

#[tokio::test(flavor = "multi_thread")]
async fn two_approvals_send_different_idempotency_keys() {
    let stub = refund_stub();
    let ws = gated_workspace(&stub, "");
    let first = ws.pause_run(ORDER);
    let second = ws.pause_run(ORDER);
    assert_success(&approve(&ws, &first, &[]));
    assert_success(&approve(&ws, &second, &[]));

    let sent: Vec<String> = stub
        .requests()
        .iter()
        .map(|r| r.header("idempotency-key").unwrap_or_default().to_string())
        .collect();
    assert_eq!(
        sent,
        vec![
            gated_key(&ws, &first, "refund").await,
            gated_key(&ws, &second, "refund").await
        ]
    );
    assert_ne!(sent[0], sent[1]);
}

#[tokio::test(flavor = "multi_thread")]
async fn reject_makes_no_call() {
    let stub = refund_stub();
    let ws = gated_workspace(&stub, "");
    let key = ws.pause_run(ORDER);
    let out = ws
        .tollgate()
        .args(["approvals", "reject", &key, "--spec", ws.spec_arg()])
        .args(["--reason", "too much"])
        .output()
        .unwrap();
    // A winning reject that ends the run exits 5 (rejected).
    assert_exit(&out, 5);
    assert_eq!(stub.count(), 0);
    assert_eq!(run_status(&ws, &key).await.0, RunStatus::Rejected);
}

#[tokio::test(flavor = "multi_thread")]
async fn modify_calls_once_with_the_edited_arguments() {
    let stub = refund_stub();
    let ws = gated_workspace(&stub, "");
    let key = ws.pause_run(ORDER);
    let out = approve(
        &ws,
        &key,
        &["--payload", r#"{"order_id": "A-7", "amount": 25}"#],
    );
    assert_success(&out);

    let calls = stub.requests();
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0].json(), json!({"order": "A-7", "amount": 25}));
    assert_eq!(
        calls[0].header("idempotency-key"),
        Some(gated_key(&ws, &key, "refund").await.as_str())
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn approvers_racing_from_four_processes_make_one_call() {
    let stub = refund_stub();
    let ws = gated_workspace(&stub, "");
    let key = ws.pause_run(ORDER);
    let racers: Vec<Child> = (0..4)
        .map(|n| {
            ws.tollgate()
                .args(["approvals", "approve", &key, "--spec", ws.spec_arg()])
                .args(["--by", &format!("racer-{n}")])
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .expect("spawn approve")
        })
        .collect();
    let outputs: Vec<_> = racers
        .into_iter()
        .map(|c| c.wait_with_output().expect("wait"))
        .collect();

    let codes: Vec<Option<i32>> = outputs.iter().map(|o| o.status.code()).collect();
    assert_eq!(
        codes.iter().filter(|c| **c == Some(0)).count(),
        1,
        "{codes:?}"
    );
    assert_eq!(
        codes.iter().filter(|c| **c == Some(4)).count(),
        3,
        "{codes:?}"
    );
    assert_eq!(stub.count(), 1, "the downstream saw exactly one call");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_restart_between_pause_and_approval_still_makes_one_call() {
    let stub = refund_stub();
    let ws = gated_workspace(&stub, "");
    let mut child = ws
        .tollgate()
        .args([
            "run",
            ws.spec_arg(),
            "--persist",
            "--json",
            "--input",
            ORDER,
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn run");
    let lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
    let mut key = None;
    for line in lines.take(100) {
        if let Some(k) = awaiting_key(&line.expect("line")) {
            key = Some(k);
            child.kill().expect("SIGKILL");
            break;
        }
    }
    let _ = child.wait();
    let key = key.expect("the run printed its key");
    assert_eq!(stub.count(), 0);

    assert_success(&approve(&ws, &key, &[]));
    assert_eq!(stub.count(), 1);
    assert_eq!(run_status(&ws, &key).await.0, RunStatus::Completed);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_custom_idempotency_header_name_is_used() {
    let stub = refund_stub();
    let ws = gated_workspace(&stub, "idempotency: { header: X-Request-Key }");
    let key = ws.pause_run(ORDER);
    assert_success(&approve(&ws, &key, &[]));
    let call = &stub.requests()[0];
    assert_eq!(
        call.header("x-request-key"),
        Some(gated_key(&ws, &key, "refund").await.as_str())
    );
    assert_eq!(call.header("idempotency-key"), None);
}

#[tokio::test(flavor = "multi_thread")]
async fn idempotency_false_sends_no_key() {
    let stub = refund_stub();
    let ws = gated_workspace(&stub, "idempotency: false");
    let key = ws.pause_run(ORDER);
    assert_success(&approve(&ws, &key, &[]));
    let call = &stub.requests()[0];
    assert_eq!(call.header("idempotency-key"), None);
    assert!(
        !call.headers.values().any(|v| v.starts_with("tg-")),
        "{:?}",
        call.headers
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn an_ungated_post_carries_the_run_and_step_key() {
    let stub = refund_stub();
    let spec = one_tool_spec(
        &format!(
            "http: {{ method: POST, url: \"{}\", json: {{ a: 1 }} }}",
            stub.url("/x")
        ),
        "{}",
    );
    let outcome = run_in_process(&spec, json!({})).await;
    assert_eq!(outcome.status, RunStatus::Completed, "{:?}", outcome.error);
    assert_eq!(
        stub.requests()[0].header("idempotency-key"),
        Some(idempotency_key(&outcome.run_id, "call", None).as_str())
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn retries_of_an_approved_call_carry_the_same_idempotency_key() {
    let stub = StubServer::start(scripted(vec![
        Response::text(503, "busy"),
        Response::text(503, "busy"),
        created(),
    ]));
    let ws = gated_workspace(&stub, "retry: { attempts: 3, backoff: 10ms }");
    let key = ws.pause_run(ORDER);
    assert_success(&approve(&ws, &key, &[]));
    let expected = gated_key(&ws, &key, "refund").await;
    let sent: Vec<_> = stub
        .requests()
        .iter()
        .map(|r| r.header("idempotency-key").map(str::to_string))
        .collect();
    assert_eq!(sent, vec![Some(expected.clone()); 3]);
}

#[tokio::test(flavor = "multi_thread")]
async fn an_approved_call_that_fails_leaves_nothing_pending() {
    let stub = StubServer::start(|_| Response::text(500, "ledger down"));
    let ws = gated_workspace(&stub, "");
    let key = ws.pause_run(ORDER);
    let out = approve(&ws, &key, &[]);
    assert_exit(&out, 1);
    assert!(stderr(&out).contains("500"), "{}", stderr(&out));
    assert_eq!(stub.count(), 1);

    let store = open_store(&ws.state_db());
    let record = store.get_approval(&key).await.unwrap().unwrap();
    assert_eq!(record.status, ApprovalStatus::Approved);
    assert_eq!(run_status(&ws, &key).await.0, RunStatus::Failed);
    assert!(nothing_pending(&ws).await);
}

async fn nothing_pending(ws: &Workspace) -> bool {
    let store = open_store(&ws.state_db());
    let page = store
        .list_pending(&PendingQuery {
            agent_id: None,
            now: tollgate_runtime::time::now(),
            limit: 10,
            cursor: None,
        })
        .await
        .unwrap();
    page.approvals.is_empty()
}

// ---- responses ------------------------------------------------------------

#[tokio::test(flavor = "multi_thread")]
async fn json_and_text_bodies_and_credential_headers() {
    let stub = StubServer::start(|req| match req.path() {
        "/json" => Response::json(200, json!({"items": [1, 2]}))
            .with_header("Set-Cookie", "session=abc")
            .with_header("X-Auth-Token", "t0k")
            .with_header("X-Request-Id", "req-1"),
        _ => Response::text(200, "plain words"),
    });
    let spec = r#"version: 1
agent: http-desk
tools:
  get_json:
    http: { url: "@BASE@/json" }
  get_text:
    http: { url: "@BASE@/text" }
steps:
  - id: j
    tool: get_json
  - id: t
    tool: get_text
"#
    .replace("@BASE@", &stub.url(""));
    let outcome = run_in_process(&spec, json!({})).await;
    assert_eq!(outcome.status, RunStatus::Completed, "{:?}", outcome.error);

    let j = &outcome.outputs["j"];
    assert_eq!(j["status"], 200);
    assert_eq!(j["body"], json!({"items": [1, 2]}));
    assert_eq!(j["headers"]["x-request-id"], "req-1");
    assert_eq!(j["headers"]["content-type"], "application/json");
    assert!(j["headers"].get("set-cookie").is_none(), "{j}");
    assert!(j["headers"].get("x-auth-token").is_none(), "{j}");
    assert_eq!(outcome.outputs["t"]["body"], json!("plain words"));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_non_2xx_status_fails_the_run_with_a_bounded_excerpt() {
    let long_body = format!("order A-7 is unknown. {}", "x".repeat(2000));
    let body = long_body.clone();
    let stub = StubServer::start(move |_| Response::text(404, &body));
    let ws = Workspace::new(&one_tool_spec(
        &format!("http: {{ method: POST, url: \"{}\" }}", stub.url("/orders")),
        "{}",
    ));
    let out = run_persisted(&ws, "{}", &[]);
    assert_exit(&out, 1);

    let err = stderr(&out);
    assert!(err.contains("tool \"call_it\""), "{err}");
    assert!(err.contains("404 Not Found"), "{err}");
    assert!(err.contains("order A-7 is unknown."), "{err}");
    assert!(
        !err.contains(&"x".repeat(400)),
        "the excerpt is bounded: {err}"
    );
    let failed = events(&stdout(&out))
        .into_iter()
        .find(|e| e["type"] == "run_failed")
        .expect("run_failed event");
    let message = failed["error"].as_str().unwrap();
    assert!(message.contains("404") && message.len() < 600, "{message}");
    assert!(nothing_pending(&ws).await);
    assert_eq!(stub.count(), 1);
}

#[tokio::test(flavor = "multi_thread")]
async fn ok_status_accepts_a_listed_status() {
    let stub = StubServer::start(|_| Response::json(404, json!({"found": false})));
    let spec = one_tool_spec(
        &format!(
            "http: {{ url: \"{}\", ok_status: [404] }}",
            stub.url("/o/1")
        ),
        "{}",
    );
    let outcome = run_in_process(&spec, json!({})).await;
    assert_eq!(outcome.status, RunStatus::Completed, "{:?}", outcome.error);
    assert_eq!(outcome.outputs["call"]["status"], 404);
    assert_eq!(outcome.outputs["call"]["body"], json!({"found": false}));
}

#[tokio::test(flavor = "multi_thread")]
async fn url_and_query_values_are_encoded() {
    let stub = StubServer::start(|_| Response::json(200, json!({})));
    let tool = r#"http:
  url: "@BASE@/orders/{{ args.id }}"
  query: { q: "{{ args.q }}", region: eu }
"#
    .replace("@BASE@", &stub.url(""));
    let spec = one_tool_spec(&tool, r#"{ id: "A 1/../admin", q: "a b&c=d" }"#);
    let outcome = run_in_process(&spec, json!({})).await;
    assert_eq!(outcome.status, RunStatus::Completed, "{:?}", outcome.error);
    assert_eq!(
        stub.requests()[0].target,
        "/orders/A%201%2F..%2Fadmin?q=a+b%26c%3Dd&region=eu"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_slow_downstream_times_out_clearly() {
    let stub =
        StubServer::start(|_| Response::json(200, json!({})).delayed(Duration::from_millis(1500)));
    let spec = one_tool_spec(
        &format!("http: {{ url: \"{}\", timeout: 1s }}", stub.url("/slow")),
        "{}",
    );
    let outcome = run_in_process(&spec, json!({})).await;
    assert_eq!(outcome.status, RunStatus::Failed);
    let error = outcome.error.unwrap();
    assert!(error.contains("tool \"call_it\""), "{error}");
    assert!(error.contains("timed out after 1s"), "{error}");
    assert_eq!(stub.count(), 1, "a timeout is not retried without retry:");
}

#[tokio::test(flavor = "multi_thread")]
async fn opt_in_retry_survives_503s() {
    let stub = StubServer::start(scripted(vec![
        Response::text(503, "busy"),
        Response::text(503, "busy"),
        Response::json(200, json!({"done": true})),
    ]));
    let spec = one_tool_spec(
        &format!(
            "http: {{ method: POST, url: \"{}\", retry: {{ attempts: 3, backoff: 10ms }} }}",
            stub.url("/jobs")
        ),
        "{}",
    );
    let outcome = run_in_process(&spec, json!({})).await;
    assert_eq!(outcome.status, RunStatus::Completed, "{:?}", outcome.error);
    assert_eq!(outcome.outputs["call"]["body"], json!({"done": true}));
    assert_eq!(stub.count(), 3);
}

#[tokio::test(flavor = "multi_thread")]
async fn opt_in_retry_gives_up_after_its_attempts() {
    let stub = StubServer::start(|_| Response::text(500, "still broken"));
    let spec = one_tool_spec(
        &format!(
            "http: {{ method: PUT, url: \"{}\", retry: {{ attempts: 2, backoff: 10ms }} }}",
            stub.url("/jobs")
        ),
        "{}",
    );
    let outcome = run_in_process(&spec, json!({})).await;
    assert_eq!(outcome.status, RunStatus::Failed);
    assert!(outcome.error.unwrap().contains("(after 2 attempts)"));
    assert_eq!(stub.count(), 2);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_post_without_retry_is_called_once_on_503() {
    let stub = StubServer::start(|_| Response::text(503, "busy"));
    let spec = one_tool_spec(
        &format!("http: {{ method: POST, url: \"{}\" }}", stub.url("/jobs")),
        "{}",
    );
    let outcome = run_in_process(&spec, json!({})).await;
    assert_eq!(outcome.status, RunStatus::Failed);
    assert!(outcome.error.unwrap().contains("503 Service Unavailable"));
    assert_eq!(stub.count(), 1);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_get_retries_a_502_by_default() {
    let stub = StubServer::start(scripted(vec![
        Response::text(502, "gateway"),
        Response::json(200, json!({"ok": 1})),
    ]));
    let spec = one_tool_spec(&format!("http: {{ url: \"{}\" }}", stub.url("/o")), "{}");
    let outcome = run_in_process(&spec, json!({})).await;
    assert_eq!(outcome.status, RunStatus::Completed, "{:?}", outcome.error);
    assert_eq!(stub.count(), 2);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_refused_connection_names_the_tool_and_the_cause() {
    let url = format!("http://127.0.0.1:{}/x", closed_port());
    let spec = one_tool_spec(&format!("http: {{ method: POST, url: \"{url}\" }}"), "{}");
    let outcome = run_in_process(&spec, json!({})).await;
    assert_eq!(outcome.status, RunStatus::Failed);
    let error = outcome.error.unwrap();
    assert!(
        error.contains("tool \"call_it\": POST http://127.0.0.1:"),
        "{error}"
    );
    assert!(error.to_lowercase().contains("refused"), "{error}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_raw_body_and_custom_headers_are_sent_as_written() {
    let stub = StubServer::start(|_| Response::text(200, "ok"));
    let tool = r#"http:
  method: PUT
  url: "@BASE@/notes"
  headers: { X-Order: "{{ args.id }}", Content-Type: text/csv }
  body: "id,amount\n{{ args.id }},{{ args.amount }}"
"#
    .replace("@BASE@", &stub.url(""));
    let spec = one_tool_spec(&tool, r#"{ id: "A-7", amount: 40 }"#);
    let outcome = run_in_process(&spec, json!({})).await;
    assert_eq!(outcome.status, RunStatus::Completed, "{:?}", outcome.error);
    let call = &stub.requests()[0];
    assert_eq!(call.method, "PUT");
    assert_eq!(call.header("x-order"), Some("A-7"));
    assert_eq!(call.header("content-type"), Some("text/csv"));
    assert_eq!(call.body_text(), "id,amount\nA-7,40");
}

#[tokio::test(flavor = "multi_thread")]
async fn redirects_are_followed_within_the_origin_only() {
    let elsewhere = StubServer::start(|_| Response::json(200, json!({"leaked": true})));
    let away = elsewhere.url("/catch");
    let stub = StubServer::start(move |req| match req.path() {
        "/old" => Response::text(307, "").with_header("Location", "/new"),
        "/new" => Response::json(200, json!({"moved": true})),
        _ => Response::text(302, "").with_header("Location", &away),
    });
    let tool = r#"http:
  url: "@BASE@/old"
  headers: { X-Api-Key: "${API_KEY:-k-123456}" }
"#
    .replace("@BASE@", &stub.url(""));
    let outcome = run_in_process(&one_tool_spec(&tool, "{}"), json!({})).await;
    assert_eq!(outcome.status, RunStatus::Completed, "{:?}", outcome.error);
    assert_eq!(outcome.outputs["call"]["body"], json!({"moved": true}));

    let tool = tool.replace("/old", "/away");
    let outcome = run_in_process(&one_tool_spec(&tool, "{}"), json!({})).await;
    assert_eq!(outcome.status, RunStatus::Failed);
    assert!(outcome.error.unwrap().contains("302"));
    assert_eq!(
        elsewhere.count(),
        0,
        "the secret header never left the origin"
    );
}
