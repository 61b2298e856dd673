//! Model steps against a real loopback chat-completions stub: the request
//! tollgate sends, the output it records, the guardrail's `after` pause and
//! its three decisions, the ways a call fails, and the API key staying out
//! of everything tollgate writes.

use crate::common;
use crate::common::model_stub;
use crate::common::stub_server;

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use tollgate_runtime::tools::Toolbox;
use tollgate_runtime::{AgentRun, RunStatus, Spec};

use common::{Workspace, assert_exit, assert_success, awaiting_key, contains_bytes, sqlite_bytes};
use model_stub::{
    API_KEY, chat_reply, decide, event, event_types, json_reply, row_count, run_id, run_persisted,
    run_status, stored_events, usage,
};
use stub_server::{Request, Response, StubServer};

/// Assess with a guardrail, then a step that uses the assessment.
const GUARDED_SPEC: &str = r#"version: 1
agent: refund-desk
model:
  base_url: ${MODEL_BASE_URL}
  api_key: ${MODEL_API_KEY}
  name: gpt-test
steps:
  - id: assess
    model:
      system: "You assess refund requests."
      prompt: "Order {{ input.order_id }}. Reply JSON {refund, amount, confidence}."
      output: json
    guardrail: { min_confidence: 0.8 }
  - id: refund
    set:
      amount: "{{ steps.assess.output.amount }}"
      confidence: "{{ steps.assess.output.confidence }}"
"#;

/// One json model step with a short timeout, then a step that must not run.
const FAILING_SPEC: &str = r#"version: 1
agent: refund-desk
model:
  base_url: ${MODEL_BASE_URL}
  api_key: ${MODEL_API_KEY}
  name: gpt-test
  timeout: 30s
steps:
  - id: assess
    model:
      prompt: "Order {{ input.order_id }}"
      output: json
      timeout: 1s
  - id: refund
    set: { amount: "{{ steps.assess.output.amount }}" }
"#;

const INPUT: &str = r#"{"order_id": "A-17"}"#;

fn low_confidence() -> Value {
    json!({"refund": true, "amount": 42, "confidence": 0.4})
}

/// The assessment as the step records it.
fn recorded(reply: Value) -> Value {
    let mut output = reply;
    output["_usage"] = usage();
    output
}

fn paused_workspace(stub: &StubServer) -> (Workspace, String, Value) {
    let ws = Workspace::new(GUARDED_SPEC);
    let out = run_persisted(&ws, stub, INPUT);
    assert_success(&out);
    let paused = event(&out, "awaiting_approval").expect("the guardrail paused the run");
    let key = awaiting_key(&common::stdout(&out)).expect("a key");
    (ws, key, paused)
}

/// Whether `step` executed (not merely replayed) in this process.
fn step_ran(out: &std::process::Output, step: &str) -> bool {
    common::events(&common::stdout(out))
        .iter()
        .any(|e| e["type"] == "step_started" && e["step"] == step)
}

#[test]
fn the_request_is_an_openai_chat_completion_with_the_key_from_the_environment() {
    let stub = StubServer::start(|_| json_reply(low_confidence()));
    let _ = paused_workspace(&stub);

    let requests = stub.requests();
    assert_eq!(requests.len(), 1);
    let request: &Request = &requests[0];
    assert_eq!(request.method, "POST");
    assert_eq!(request.path(), "/v1/chat/completions");
    assert_eq!(
        request.header("authorization"),
        Some(format!("Bearer {API_KEY}").as_str())
    );
    assert_eq!(request.header("content-type"), Some("application/json"));
    assert_eq!(
        request.json(),
        json!({
            "model": "gpt-test",
            "messages": [
                {"role": "system", "content": "You assess refund requests."},
                {"role": "user", "content": "Order A-17. Reply JSON {refund, amount, confidence}."},
            ],
            "response_format": {"type": "json_object"},
        })
    );
}

#[test]
fn low_confidence_pauses_after_the_step_with_the_output_as_payload() {
    let stub = StubServer::start(|_| json_reply(low_confidence()));
    let (ws, key, paused) = paused_workspace(&stub);

    assert_eq!(paused["phase"], "after");
    assert_eq!(paused["step"], "assess");
    assert_eq!(paused["payload"], recorded(low_confidence()));
    let message = paused["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("0.4") && message.contains("0.8"),
        "{message}"
    );
    let list = ws
        .tollgate()
        .args(["approvals", "list", "--spec", ws.spec_arg(), "--json"])
        .output()
        .expect("list");
    assert_success(&list);
    let listed: Value = serde_json::from_slice(&list.stdout).expect("JSON list");
    assert_eq!(listed["approvals"][0]["key"], key.as_str());
    assert_eq!(listed["approvals"][0]["phase"], "after");
}

#[test]
fn approve_continues_with_the_next_step_without_calling_the_model_again() {
    let stub = StubServer::start(|_| json_reply(low_confidence()));
    let (ws, key, _) = paused_workspace(&stub);

    let out = decide(&ws, &stub, "approve", &key, &[]);
    assert_success(&out);
    assert_eq!(stub.count(), 1, "the approved step is never re-run");
    let done = event(&out, "run_completed").expect("the run completed");
    assert_eq!(
        done["outputs"]["refund"],
        json!({"amount": 42, "confidence": 0.4})
    );
    assert_eq!(done["outputs"]["assess"], recorded(low_confidence()));
    assert!(!step_ran(&out, "assess"), "assess is only replayed");
    assert_eq!(run_status(&ws.state_db(), &run_id(&out)), "completed");
}

#[test]
fn modify_replaces_the_output_the_next_step_sees() {
    let stub = StubServer::start(|_| json_reply(low_confidence()));
    let (ws, key, _) = paused_workspace(&stub);

    let edited = r#"{"refund": true, "amount": 7, "confidence": 1.0}"#;
    let out = decide(&ws, &stub, "approve", &key, &["--payload", edited]);
    assert_success(&out);
    assert_eq!(stub.count(), 1);
    let done = event(&out, "run_completed").expect("the run completed");
    assert_eq!(
        done["outputs"]["refund"],
        json!({"amount": 7, "confidence": 1.0})
    );
    assert_eq!(
        done["outputs"]["assess"],
        json!({"refund": true, "amount": 7, "confidence": 1.0})
    );
}

#[test]
fn a_replacement_output_that_is_not_an_object_is_refused_and_the_gate_stays_open() {
    let stub = StubServer::start(|_| json_reply(low_confidence()));
    let (ws, key, _) = paused_workspace(&stub);

    let refused = decide(&ws, &stub, "approve", &key, &["--payload", "[7]"]);
    assert_exit(&refused, 2);
    assert!(
        common::stderr(&refused).contains("must be a JSON object"),
        "{}",
        common::stderr(&refused)
    );
    let approved = decide(&ws, &stub, "approve", &key, &[]);
    assert_success(&approved);
    assert!(event(&approved, "run_completed").is_some());
    assert_eq!(stub.count(), 1);
}

#[test]
fn reject_ends_the_run_and_runs_nothing_after_the_step() {
    let stub = StubServer::start(|_| json_reply(low_confidence()));
    let (ws, key, _) = paused_workspace(&stub);

    let out = decide(&ws, &stub, "reject", &key, &["--reason", "looks wrong"]);
    // A winning reject that ends the run exits 5 (rejected).
    assert_exit(&out, 5);
    assert_eq!(stub.count(), 1);
    let types = event_types(&out);
    assert!(types.contains(&"run_rejected".to_string()), "{types:?}");
    assert!(!step_ran(&out, "refund"), "{types:?}");
    let id = run_id(&out);
    assert_eq!(run_status(&ws.state_db(), &id), "rejected");
    assert!(
        stored_events(&ws.state_db(), &id)
            .iter()
            .all(|e| e["step"] != "refund"),
        "nothing about the next step was stored"
    );
}

#[test]
fn confidence_at_the_threshold_does_not_pause() {
    let stub =
        StubServer::start(|_| json_reply(json!({"refund": true, "amount": 5, "confidence": 0.8})));
    let ws = Workspace::new(GUARDED_SPEC);
    let out = run_persisted(&ws, &stub, INPUT);
    assert_success(&out);
    let done = event(&out, "run_completed").expect("no pause");
    assert_eq!(done["outputs"]["refund"]["amount"], 5);
    assert_eq!(row_count(&ws.state_db(), "tollgate_approvals"), 0);
}

/// Run FAILING_SPEC against `stub`; the run must fail cleanly. Returns stderr.
fn assert_fails_cleanly(stub: &StubServer) -> String {
    let ws = Workspace::new(FAILING_SPEC);
    let out = run_persisted(&ws, stub, INPUT);
    assert_exit(&out, 1);
    let stderr = common::stderr(&out);
    let failed = event(&out, "run_failed").expect("a run_failed event");
    let error = failed["error"].as_str().unwrap_or_default().to_string();
    assert!(error.starts_with("step \"assess\": "), "{error}");
    assert!(
        error.contains(&format!("127.0.0.1:{}", stub.port)),
        "names the endpoint host: {error}"
    );
    assert!(
        stderr.contains(&error),
        "stderr repeats the error: {stderr}"
    );
    assert!(!step_ran(&out, "refund"), "nothing after the failed step");
    let db = ws.state_db();
    assert_eq!(run_status(&db, &run_id(&out)), "failed");
    assert_eq!(row_count(&db, "tollgate_approvals"), 0);
    let list = ws
        .tollgate()
        .args(["approvals", "list", "--spec", ws.spec_arg(), "--json"])
        .output()
        .expect("list");
    assert_success(&list);
    let listed: Value = serde_json::from_slice(&list.stdout).expect("JSON list");
    assert_eq!(listed["approvals"], json!([]));
    assert_eq!(stub.count(), 1, "no automatic retry: a call may be billed");
    error
}

#[test]
fn a_reply_that_is_not_json_fails_the_run_with_an_excerpt() {
    let chatter = format!("Sure! The refund looks fine. {}", "blah ".repeat(200));
    let stub = StubServer::start(move |_| chat_reply(&chatter));
    let error = assert_fails_cleanly(&stub);
    assert!(
        error.contains("output: json needs a JSON object"),
        "{error}"
    );
    assert!(error.contains("\"Sure! The refund looks fine."), "{error}");
    assert!(error.contains("characters in all"), "bounded: {error}");
    assert!(error.len() < 600, "bounded: {} chars", error.len());
}

#[test]
fn an_http_500_fails_the_run_with_the_status_and_a_bounded_body() {
    let body = format!("upstream exploded {}", "x".repeat(5000));
    let stub = StubServer::start(move |_| Response::text(500, &body));
    let error = assert_fails_cleanly(&stub);
    assert!(error.contains("HTTP 500"), "{error}");
    assert!(error.contains("upstream exploded"), "{error}");
    assert!(error.len() < 600, "bounded: {} chars", error.len());
}

#[test]
fn a_slow_endpoint_times_out_at_the_step_timeout() {
    let stub = StubServer::start(|_| json_reply(low_confidence()).delayed(Duration::from_secs(4)));
    let started = std::time::Instant::now();
    let error = assert_fails_cleanly(&stub);
    assert!(error.contains("did not answer within 1s"), "{error}");
    assert!(
        started.elapsed() < Duration::from_secs(4),
        "the step's 1s wins over model.timeout 30s"
    );
}

/// The key must never be written or printed, even when the endpoint echoes
/// the Authorization header back in an error body or in its reply.
#[test]
fn the_api_key_never_reaches_the_store_events_or_output() {
    let echo = |r: &Request| {
        let auth = r.header("authorization").unwrap_or_default().to_string();
        Response::text(500, &format!("bad request, you sent: {auth}"))
    };
    let stub = StubServer::start(echo);
    let ws = Workspace::new(FAILING_SPEC);
    let failed = run_persisted(&ws, &stub, INPUT);
    assert_exit(&failed, 1);
    let error = event(&failed, "run_failed").expect("failed")["error"].clone();
    assert!(
        error
            .as_str()
            .unwrap_or_default()
            .contains("you sent: Bearer [redacted]"),
        "{error}"
    );

    // A reply that repeats the key inside the model's answer: a guarded
    // step stores it as the pause payload and the step output.
    stub.set_handler(|r: &Request| {
        let auth = r.header("authorization").unwrap_or_default().to_string();
        json_reply(json!({"amount": 1, "confidence": 0.1, "note": auth}))
    });
    ws.write_spec(GUARDED_SPEC);
    let paused = run_persisted(&ws, &stub, INPUT);
    assert_success(&paused);
    let payload = &event(&paused, "awaiting_approval").expect("paused")["payload"];
    assert_eq!(payload["note"], "Bearer [redacted]");
    let key = awaiting_key(&common::stdout(&paused)).expect("key");
    let approved = decide(&ws, &stub, "approve", &key, &[]);
    assert_success(&approved);

    assert_eq!(stub.count(), 2);
    for request in stub.requests() {
        assert_eq!(
            request.header("authorization"),
            Some(format!("Bearer {API_KEY}").as_str()),
            "the key was sent"
        );
    }
    let db = ws.state_db();
    assert!(!contains_bytes(&sqlite_bytes(&db), API_KEY), "key in store");
    for out in [&failed, &paused, &approved] {
        assert!(!common::stdout(out).contains(API_KEY), "key on stdout");
        assert!(!common::stderr(out).contains(API_KEY), "key on stderr");
    }
    for id in [run_id(&failed), run_id(&paused)] {
        let events = serde_json::to_string(&stored_events(&db, &id)).expect("json");
        assert!(!events.contains(API_KEY), "key in stored events");
    }
}

/// Library-level: a text step, through `AgentRun` + `Toolbox` + SQLite.
#[tokio::test(flavor = "multi_thread")]
async fn text_output_is_text_and_usage() {
    let stub = StubServer::start(|_| chat_reply("  Refund approved.\n"));
    let spec = format!(
        r#"version: 1
agent: writer
model:
  base_url: "{}/"
  name: gpt-test
steps:
  - id: draft
    model:
      prompt: "Write to {{{{ input.name }}}}"
  - id: send
    set: {{ body: "{{{{ steps.draft.output.text }}}}", tokens: "{{{{ steps.draft.output._usage.total_tokens }}}}" }}
"#,
        stub.url("/v1")
    );
    let spec = Arc::new(Spec::parse(&spec, "writer.yaml").expect("valid spec"));
    let dir = tempfile::tempdir().expect("temp dir");
    let store = common::open_store(&dir.path().join("state.db"));
    let agent =
        AgentRun::new(spec, store.clone()).with_tools(Arc::new(Toolbox::new().expect("toolbox")));

    let done = agent
        .start(json!({"name": "Ada"}), json!({}))
        .await
        .expect("run");
    assert_eq!(done.status, RunStatus::Completed, "{:?}", done.error);
    assert_eq!(
        done.outputs["draft"],
        json!({"text": "  Refund approved.\n", "_usage": usage()})
    );
    assert_eq!(
        done.outputs["send"],
        json!({"body": "  Refund approved.\n", "tokens": 30})
    );
    let stored = store
        .get_run(&done.run_id)
        .await
        .expect("get")
        .expect("run");
    assert_eq!(stored.outputs["draft"]["_usage"]["prompt_tokens"], 21);

    let request = &stub.requests()[0];
    assert_eq!(
        request.path(),
        "/v1/chat/completions",
        "trailing slash tolerated"
    );
    assert_eq!(request.header("authorization"), None, "no key, no header");
    let body = request.json();
    assert_eq!(
        body["messages"],
        json!([{"role": "user", "content": "Write to Ada"}])
    );
    assert!(
        body.get("response_format").is_none(),
        "text asks for no format"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_step_without_a_model_name_fails_naming_the_step() {
    let spec = r#"version: 1
agent: nameless
steps:
  - id: think
    model: { prompt: "hi", base_url: "http://127.0.0.1:9/v1" }
"#;
    let spec = Arc::new(Spec::parse(spec, "nameless.yaml").expect("valid spec"));
    let agent = AgentRun::new(spec, Arc::new(tollgate_runtime::store::MemoryStore::new()))
        .with_tools(Arc::new(Toolbox::new().expect("toolbox")));
    let done = agent.start(json!({}), json!({})).await.expect("run");
    assert_eq!(done.status, RunStatus::Failed);
    let error = done.error.unwrap_or_default();
    assert!(
        error.starts_with("step \"think\": no model name"),
        "{error}"
    );
}
