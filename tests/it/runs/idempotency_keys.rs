//! The Idempotency-Key on every POST, PUT, PATCH and DELETE a run makes,
//! against a real loopback stub: derived from the run id and the step (and
//! the approval that most recently gated the run), present after an `if`
//! gate and after an `approval:` step, the same on every retry, different
//! per step and per run, never on a GET, off with `idempotency: false`,
//! renamed with `idempotency: {header: X}`; custom Rust tools and model
//! calls get the same key.

use crate::common;
use crate::common::http::{created, one_tool_spec, run_in_process, scripted};
use crate::common::model_stub;
use crate::common::stub_server::{Response, StubServer};

use std::sync::{Arc, Mutex};

use serde_json::{Value, json};
use tollgate_runtime::store::MemoryStore;
use tollgate_runtime::tools::{
    CallContext, CustomTool, CustomTools, ToolError, Toolbox, idempotency_key,
};
use tollgate_runtime::{AgentRun, Decision, RunStatus, Spec, async_trait};

/// A POST before any gate, one after an `if` gate, one after an `approval:`
/// step, and a GET last.
const GATED_SPEC: &str = r#"version: 1
agent: keys
tools:
  post_it:
    http: { method: POST, url: "@URL@/post", json: { n: "{{ args.n }}" } }
  get_it:
    http: { method: GET, url: "@URL@/get" }
steps:
  - id: before
    tool: post_it
    with: { n: 1 }
  - id: large
    if: "{{ input.amount > 100 }}"
    then: request_human_approval
  - id: after_if
    tool: post_it
    with: { n: 2 }
  - id: confirm
    approval: { message: "Go on?" }
  - id: after_approval
    tool: post_it
    with: { n: 3 }
  - id: read
    tool: get_it
    with: {}
"#;

fn agent(spec: &str) -> AgentRun {
    let spec = Spec::parse(spec, "agent.yaml").expect("valid spec");
    AgentRun::new(Arc::new(spec), Arc::new(MemoryStore::new()))
        .with_tools(Arc::new(Toolbox::new().expect("toolbox")))
}

fn approve() -> Decision {
    Decision::Approve { reason: None }
}

fn keys_at(stub: &StubServer, path: &str) -> Vec<Option<String>> {
    stub.requests_to(path)
        .iter()
        .map(|r| r.header("idempotency-key").map(str::to_string))
        .collect()
}

fn sent_key(stub: &StubServer, n: u64) -> Option<String> {
    stub.requests_to("/post")
        .into_iter()
        .find(|r| r.json()["n"] == json!(n))
        .unwrap_or_else(|| panic!("call {n} reached the stub"))
        .header("idempotency-key")
        .map(str::to_string)
}

#[tokio::test(flavor = "multi_thread")]
async fn calls_after_an_if_gate_and_after_an_approval_step_carry_keys_derived_from_the_gate() {
    let stub = StubServer::start(|_| created());
    let agent = agent(&GATED_SPEC.replace("@URL@", &stub.url("")));

    let paused = agent
        .start(json!({"amount": 500}), json!({"kind": "test"}))
        .await
        .unwrap();
    assert_eq!(paused.status, RunStatus::AwaitingApproval);
    let run = paused.run_id.clone();
    let if_gate = paused.pending.expect("the if gate paused").key;
    assert_eq!(
        sent_key(&stub, 1),
        Some(idempotency_key(&run, "before", None)),
        "an ungated POST carries the run's key for its step"
    );

    let paused = agent
        .resume_by_key(&if_gate, approve(), "alice")
        .await
        .unwrap();
    assert_eq!(paused.status, RunStatus::AwaitingApproval);
    let approval_gate = paused.pending.expect("the approval step paused").key;
    assert_eq!(
        sent_key(&stub, 2),
        Some(idempotency_key(&run, "after_if", Some(&if_gate))),
        "the call after the if gate derives its key from that gate"
    );

    let done = agent
        .resume_by_key(&approval_gate, approve(), "alice")
        .await
        .unwrap();
    assert_eq!(done.status, RunStatus::Completed, "{:?}", done.error);
    assert_eq!(
        sent_key(&stub, 3),
        Some(idempotency_key(
            &run,
            "after_approval",
            Some(&approval_gate)
        )),
        "the call after the approval step derives its key from that step's gate"
    );
    assert_eq!(keys_at(&stub, "/get"), vec![None], "a GET carries no key");

    let sent: Vec<String> = (1..=3).filter_map(|n| sent_key(&stub, n)).collect();
    assert_eq!(sent.len(), 3);
    assert!(sent[0] != sent[1] && sent[1] != sent[2] && sent[0] != sent[2]);
    for key in &sent {
        assert!(
            !key.contains(&if_gate) && !key.contains(&approval_gate) && !key.contains(&run),
            "a key is a digest, never the approval key or the run id: {key}"
        );
    }
}

/// Two POST steps, no gate.
fn two_posts(url: &str, http_extra: &str) -> String {
    format!(
        r#"version: 1
agent: keys
tools:
  post_it:
    http: {{ method: POST, url: "{url}", json: {{ n: "{{{{ args.n }}}}" }}{http_extra} }}
steps:
  - id: first
    tool: post_it
    with: {{ n: 1 }}
  - id: second
    tool: post_it
    with: {{ n: 2 }}
"#
    )
}

#[tokio::test(flavor = "multi_thread")]
async fn keys_differ_per_step_and_per_run() {
    let stub = StubServer::start(|_| created());
    let spec = two_posts(&stub.url("/post"), "");
    let one = run_in_process(&spec, json!({})).await;
    let two = run_in_process(&spec, json!({})).await;
    assert_eq!(one.status, RunStatus::Completed, "{:?}", one.error);
    assert_eq!(two.status, RunStatus::Completed, "{:?}", two.error);
    let expected: Vec<Option<String>> = [&one.run_id, &two.run_id]
        .iter()
        .flat_map(|run| ["first", "second"].map(|step| Some(idempotency_key(run, step, None))))
        .collect();
    assert_eq!(keys_at(&stub, "/post"), expected);
    let mut distinct = expected.clone();
    distinct.sort();
    distinct.dedup();
    assert_eq!(distinct.len(), 4, "four calls, four keys: {expected:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn every_retry_of_a_post_carries_the_same_key() {
    let stub = StubServer::start(scripted(vec![
        Response::text(503, "busy"),
        Response::text(503, "busy"),
        created(),
    ]));
    let spec = one_tool_spec(
        &format!(
            "http: {{ method: PUT, url: \"{}\", json: {{ a: 1 }}, retry: {{ attempts: 3, backoff: 10ms }} }}",
            stub.url("/put")
        ),
        "{}",
    );
    let outcome = run_in_process(&spec, json!({})).await;
    assert_eq!(outcome.status, RunStatus::Completed, "{:?}", outcome.error);
    let expected = idempotency_key(&outcome.run_id, "call", None);
    assert_eq!(keys_at(&stub, "/put"), vec![Some(expected); 3]);
}

#[tokio::test(flavor = "multi_thread")]
async fn delete_and_patch_carry_a_key_get_does_not() {
    let stub = StubServer::start(|_| created());
    for method in ["DELETE", "PATCH", "GET", "HEAD"] {
        let path = format!("/{method}");
        let spec = one_tool_spec(
            &format!("http: {{ method: {method}, url: \"{}\" }}", stub.url(&path)),
            "{}",
        );
        let outcome = run_in_process(&spec, json!({})).await;
        assert_eq!(outcome.status, RunStatus::Completed, "{:?}", outcome.error);
        let expected = match method {
            "GET" | "HEAD" => None,
            _ => Some(idempotency_key(&outcome.run_id, "call", None)),
        };
        assert_eq!(keys_at(&stub, &path), vec![expected], "{method}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn idempotency_false_sends_no_key_and_a_header_name_renames_it() {
    let stub = StubServer::start(|_| created());
    let off = run_in_process(
        &two_posts(&stub.url("/off"), ", idempotency: false"),
        json!({}),
    )
    .await;
    assert_eq!(off.status, RunStatus::Completed, "{:?}", off.error);
    for call in stub.requests_to("/off") {
        assert_eq!(call.header("idempotency-key"), None);
        assert!(
            !call.headers.values().any(|v| v.starts_with("tg-")),
            "{:?}",
            call.headers
        );
    }

    let renamed = run_in_process(
        &two_posts(
            &stub.url("/renamed"),
            ", idempotency: { header: X-Request-Key }",
        ),
        json!({}),
    )
    .await;
    assert_eq!(renamed.status, RunStatus::Completed, "{:?}", renamed.error);
    let calls = stub.requests_to("/renamed");
    assert_eq!(calls.len(), 2);
    assert_eq!(calls[0].header("idempotency-key"), None);
    assert_eq!(
        calls[0].header("x-request-key"),
        Some(idempotency_key(&renamed.run_id, "first", None).as_str())
    );
}

/// Records the key each call's context carries.
#[derive(Default)]
struct KeyRecorder(Mutex<Vec<Option<String>>>);

#[async_trait]
impl CustomTool for KeyRecorder {
    async fn call(&self, _args: Value, call: &CallContext) -> Result<Value, ToolError> {
        self.0.lock().unwrap().push(call.idempotency_key.clone());
        Ok(json!({"ok": true}))
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_custom_rust_tool_gets_the_same_key_in_its_context() {
    let spec = r#"version: 1
agent: keys
tools:
  ship:
    rust: {}
steps:
  - id: early
    tool: ship
    with: {}
  - id: confirm
    approval: { message: "Ship?" }
  - id: late
    tool: ship
    with: {}
"#;
    let recorder = Arc::new(KeyRecorder::default());
    let mut custom = CustomTools::new();
    custom.register("ship", recorder.clone());
    let spec = Spec::parse(spec, "agent.yaml").expect("valid spec");
    let agent = AgentRun::new(Arc::new(spec), Arc::new(MemoryStore::new())).with_tools(Arc::new(
        Toolbox::new().expect("toolbox").with_custom_tools(custom),
    ));
    let paused = agent.start(json!({}), json!({})).await.unwrap();
    let gate = paused.pending.expect("paused").key;
    let done = agent.resume_by_key(&gate, approve(), "bob").await.unwrap();
    assert_eq!(done.status, RunStatus::Completed, "{:?}", done.error);
    assert_eq!(
        recorder.0.lock().unwrap().clone(),
        vec![
            Some(idempotency_key(&done.run_id, "early", None)),
            Some(idempotency_key(&done.run_id, "late", Some(&gate))),
        ]
    );
}

#[test]
fn a_model_call_carries_the_key_of_its_step() {
    let stub = StubServer::start(|_| model_stub::json_reply(json!({"amount": 3})));
    let ws = common::Workspace::new(
        r#"version: 1
agent: keys
model:
  base_url: ${MODEL_BASE_URL}
  api_key: ${MODEL_API_KEY}
  name: gpt-test
steps:
  - id: assess
    model: { prompt: "How much?", output: json }
"#,
    );
    let out = model_stub::run_persisted(&ws, &stub, "{}");
    common::assert_success(&out);
    let run_id = model_stub::run_id(&out);
    let calls = stub.requests();
    assert_eq!(calls.len(), 1);
    assert_eq!(
        calls[0].header("idempotency-key"),
        Some(idempotency_key(&run_id, "assess", None).as_str())
    );
}
