//! Two-phase gate semantics, on the memory store and on a SQLite file:
//! a `before` gate re-enters its step and re-evaluates its inputs; an
//! `after` gate never re-runs its step; reject ends the run with nothing
//! after the gate; modify replaces the payload.

use crate::common;

use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use serde_json::{Value, json};
use tollgate_runtime::spec::ToolSpec;
use tollgate_runtime::store::MemoryStore;
use tollgate_runtime::tools::{CallContext, ModelRequest, ToolError, ToolInvoker};
use tollgate_runtime::{
    AgentRun, ApprovalError, ApprovalRecord, ApprovalStatus, Decision, EventKind, Phase, RunError,
    RunStatus, SharedStore, Spec,
};

const PAY_SPEC: &str = r#"version: 1
agent: payer
tools:
  pay:
    rust: {}
    approval: required
    message: "Pay {{ args.amount }} to {{ args.to }}?"
steps:
  - id: quote
    set: { amount: "{{ input.amount }}", to: "{{ input.to }}" }
  - id: pay
    tool: pay
    with: { amount: "{{ steps.quote.output.amount }}", to: "{{ steps.quote.output.to }}" }
  - id: receipt
    set: { paid: "{{ steps.pay.output.paid }}" }
"#;

const GUARDED_SPEC: &str = r#"version: 1
agent: assessor
steps:
  - id: assess
    model:
      prompt: "Assess {{ input.order }}"
      output: json
    guardrail: { min_confidence: 0.8 }
  - id: use
    set: { amount: "{{ steps.assess.output.amount }}" }
"#;

const BRANCH_SPEC: &str = r#"version: 1
agent: brancher
steps:
  - id: large
    if: "{{ input.amount > 100 }}"
    then: request_human_approval
    message: "Large: {{ input.amount }}"
  - id: soft
    approval: { message: "Carry on?", on_reject: continue }
  - id: end
    set: { large: "{{ steps.large.output }}", soft: "{{ steps.soft.output.approved }}" }
"#;

/// Records every call; pays the amount back, or answers a model prompt with
/// a fixed low-confidence assessment.
#[derive(Default)]
struct Recorder {
    tool_calls: Mutex<Vec<(Value, Option<String>)>>,
    model_calls: Mutex<Vec<String>>,
}

#[async_trait]
impl ToolInvoker for Recorder {
    async fn call_tool(
        &self,
        _tool: &ToolSpec,
        args: &Value,
        call: &CallContext,
    ) -> Result<Value, ToolError> {
        self.tool_calls
            .lock()
            .unwrap()
            .push((args.clone(), call.idempotency_key.clone()));
        Ok(json!({ "paid": args["amount"] }))
    }

    async fn call_model(
        &self,
        request: ModelRequest<'_>,
        _call: &CallContext,
    ) -> Result<Value, ToolError> {
        self.model_calls.lock().unwrap().push(request.prompt);
        Ok(json!({ "amount": 42, "confidence": 0.4 }))
    }
}

struct Harness {
    agent: AgentRun,
    store: SharedStore,
    tools: Arc<Recorder>,
    _dir: Option<tempfile::TempDir>,
}

fn harness(spec: &str, durable: bool) -> Harness {
    let spec = Arc::new(Spec::parse(spec, "spec.yaml").unwrap());
    let (store, dir): (SharedStore, _) = if durable {
        let dir = tempfile::tempdir().unwrap();
        (common::open_store(&dir.path().join("state.db")), Some(dir))
    } else {
        (Arc::new(MemoryStore::new()), None)
    };
    let tools = Arc::new(Recorder::default());
    let agent = AgentRun::new(spec, store.clone()).with_tools(tools.clone());
    Harness {
        agent,
        store,
        tools,
        _dir: dir,
    }
}

impl Harness {
    /// Start a run that must pause at a gate: its pending approval.
    async fn pause(&self, input: Value) -> ApprovalRecord {
        let outcome = self.agent.start(input, json!({})).await.unwrap();
        assert_eq!(outcome.status, RunStatus::AwaitingApproval, "{outcome:?}");
        outcome.pending.expect("a pending approval")
    }
}

fn approve() -> Decision {
    Decision::Approve { reason: None }
}

async fn event_types(store: &SharedStore, run_id: &str) -> Vec<String> {
    store
        .run_events(run_id, 0)
        .await
        .unwrap()
        .iter()
        .map(|e| match &e.kind {
            EventKind::StepCompleted { step, replayed, .. } => {
                format!(
                    "step_completed:{step}{}",
                    if *replayed { ":replayed" } else { "" }
                )
            }
            EventKind::StepStarted { step, .. } => format!("step_started:{step}"),
            other => other.name().to_string(),
        })
        .collect()
}

async fn tool_gate_approve_calls_once_with_reevaluated_inputs(durable: bool) {
    let h = harness(PAY_SPEC, durable);
    let record = h.pause(json!({"amount": 30, "to": "acme"})).await;
    assert_eq!(record.phase, Phase::Before);
    assert_eq!(record.step_id, "pay");
    assert_eq!(record.payload, json!({"amount": 30, "to": "acme"}));
    assert_eq!(record.message.as_deref(), Some("Pay 30 to acme?"));
    assert!(
        h.tools.tool_calls.lock().unwrap().is_empty(),
        "nothing ran before the decision"
    );

    let done = h
        .agent
        .resume_by_key(&record.key, approve(), "alice")
        .await
        .unwrap();
    assert_eq!(done.status, RunStatus::Completed);
    assert_eq!(done.run_id, record.run_id, "a resumed run keeps its id");
    assert_eq!(done.outputs["receipt"], json!({"paid": 30}));
    let calls = h.tools.tool_calls.lock().unwrap().clone();
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0].0, json!({"amount": 30, "to": "acme"}));
    let idem = calls[0]
        .1
        .clone()
        .expect("approved call carries an idempotency key");
    assert!(
        !idem.contains(&record.key),
        "derived from the key, not the key itself"
    );

    assert_eq!(
        event_types(&h.store, &done.run_id).await,
        vec![
            "run_started",
            "step_started:quote",
            "step_completed:quote",
            "step_started:pay",
            "awaiting_approval",
            "approval_resolved",
            "step_completed:quote:replayed",
            "step_started:pay",
            "step_completed:pay",
            "step_started:receipt",
            "step_completed:receipt",
            "run_completed",
        ]
    );
}

#[tokio::test]
async fn tool_gate_approve_memory() {
    tool_gate_approve_calls_once_with_reevaluated_inputs(false).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn tool_gate_approve_sqlite() {
    tool_gate_approve_calls_once_with_reevaluated_inputs(true).await;
}

async fn reject_runs_nothing_after_the_gate(durable: bool) {
    let h = harness(PAY_SPEC, durable);
    let key = h.pause(json!({"amount": 500, "to": "x"})).await.key;
    let decision = Decision::Reject {
        reason: Some("too much".into()),
    };
    let done = h.agent.resume_by_key(&key, decision, "bob").await.unwrap();
    assert_eq!(done.status, RunStatus::Rejected);
    assert!(
        h.tools.tool_calls.lock().unwrap().is_empty(),
        "rejected tool never called"
    );
    assert!(!done.outputs.contains_key("pay"));
    assert!(!done.outputs.contains_key("receipt"));
    let run = h.store.get_run(&done.run_id).await.unwrap().unwrap();
    assert_eq!(run.status, RunStatus::Rejected);
    let events = h.store.run_events(&done.run_id, 0).await.unwrap();
    let last = events.last().unwrap();
    assert_eq!(
        last.kind,
        EventKind::RunRejected {
            reason: Some("too much".into())
        }
    );
    let record = h.store.get_approval(&key).await.unwrap().unwrap();
    assert_eq!(record.status, ApprovalStatus::Rejected);
    assert_eq!(record.decided_by.as_deref(), Some("bob"));
}

#[tokio::test]
async fn reject_memory() {
    reject_runs_nothing_after_the_gate(false).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn reject_sqlite() {
    reject_runs_nothing_after_the_gate(true).await;
}

async fn modify_calls_with_the_edited_arguments(durable: bool) {
    let h = harness(PAY_SPEC, durable);
    let key = h.pause(json!({"amount": 500, "to": "x"})).await.key;

    let not_an_object = Decision::Modify {
        payload: json!([1, 2]),
        reason: None,
    };
    let err = h
        .agent
        .resume_by_key(&key, not_an_object, "carol")
        .await
        .unwrap_err();
    assert!(
        matches!(
            err,
            RunError::Approval(ApprovalError::InvalidPayload { .. })
        ),
        "{err}"
    );
    let untouched = h.store.get_approval(&key).await.unwrap().unwrap();
    assert_eq!(
        untouched.status,
        ApprovalStatus::Pending,
        "a bad edit changes nothing"
    );

    let edit = Decision::Modify {
        payload: json!({"amount": 50, "to": "x"}),
        reason: Some("cap it".into()),
    };
    let done = h.agent.resume_by_key(&key, edit, "carol").await.unwrap();
    assert_eq!(done.status, RunStatus::Completed);
    assert_eq!(done.outputs["receipt"], json!({"paid": 50}));
    let calls = h.tools.tool_calls.lock().unwrap().clone();
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0].0, json!({"amount": 50, "to": "x"}));
    let record = h.store.get_approval(&key).await.unwrap().unwrap();
    assert_eq!(record.status, ApprovalStatus::Modified);
    assert_eq!(
        record.decision_data,
        Some(json!({"reason": "cap it", "payload": {"amount": 50, "to": "x"}}))
    );
}

#[tokio::test]
async fn modify_memory() {
    modify_calls_with_the_edited_arguments(false).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn modify_sqlite() {
    modify_calls_with_the_edited_arguments(true).await;
}

/// The stored payload is what the person saw; the call itself is built by
/// re-entering the step. Tampering with the stored payload (without a
/// MODIFIED decision) does not change what is called.
#[tokio::test(flavor = "multi_thread")]
async fn before_gate_reevaluates_inputs_instead_of_trusting_the_stored_payload() {
    let h = harness(PAY_SPEC, true);
    let key = h.pause(json!({"amount": 30, "to": "acme"})).await.key;
    let db = h._dir.as_ref().unwrap().path().join("state.db");
    let conn = rusqlite::Connection::open(&db).unwrap();
    let changed = conn
        .execute(
            "UPDATE tollgate_approvals SET payload = ?1 WHERE key = ?2",
            (r#"{"amount": 999999, "to": "mallory"}"#, &key),
        )
        .unwrap();
    assert_eq!(changed, 1);
    drop(conn);

    h.agent
        .resume_by_key(&key, approve(), "alice")
        .await
        .unwrap();
    let calls = h.tools.tool_calls.lock().unwrap().clone();
    assert_eq!(
        calls,
        vec![(json!({"amount": 30, "to": "acme"}), calls[0].1.clone())]
    );
}

async fn after_gate_never_reruns_the_step(durable: bool) {
    let h = harness(GUARDED_SPEC, durable);
    let record = h.pause(json!({"order": "O-9"})).await;
    assert_eq!(record.phase, Phase::After);
    assert_eq!(record.payload, json!({"amount": 42, "confidence": 0.4}));
    assert_eq!(
        record.message.as_deref(),
        Some("Confidence 0.4 is below 0.8 for step assess")
    );

    let done = h
        .agent
        .resume_by_key(&record.key, approve(), "dan")
        .await
        .unwrap();
    assert_eq!(done.status, RunStatus::Completed);
    assert_eq!(done.outputs["use"], json!({"amount": 42}));
    assert_eq!(
        h.tools.model_calls.lock().unwrap().len(),
        1,
        "the model ran once in total"
    );

    // Modify replaces the output the next step sees.
    let key = h.pause(json!({"order": "O-10"})).await.key;
    let edit = Decision::Modify {
        payload: json!({"amount": 7, "confidence": 1.0}),
        reason: None,
    };
    let done = h.agent.resume_by_key(&key, edit, "dan").await.unwrap();
    assert_eq!(
        done.outputs["assess"],
        json!({"amount": 7, "confidence": 1.0})
    );
    assert_eq!(done.outputs["use"], json!({"amount": 7}));
    assert_eq!(h.tools.model_calls.lock().unwrap().len(), 2);

    // Reject ends the run and the next step never runs.
    let key = h.pause(json!({"order": "O-11"})).await.key;
    let done = h
        .agent
        .resume_by_key(&key, Decision::Reject { reason: None }, "dan")
        .await
        .unwrap();
    assert_eq!(done.status, RunStatus::Rejected);
    assert!(!done.outputs.contains_key("use"));
}

#[tokio::test]
async fn after_gate_memory() {
    after_gate_never_reruns_the_step(false).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn after_gate_sqlite() {
    after_gate_never_reruns_the_step(true).await;
}

#[tokio::test]
async fn if_gate_pauses_only_when_its_condition_holds() {
    let h = harness(BRANCH_SPEC, false);
    // Small amount: no pause at `large`, pause at `soft`.
    let record = h.pause(json!({"amount": 10})).await;
    assert_eq!(record.step_id, "soft");
    assert_eq!(record.outputs["large"], json!({"required": false}));
    // on_reject: continue -> the run goes on with approved = false.
    let done = h
        .agent
        .resume_by_key(
            &record.key,
            Decision::Reject {
                reason: Some("meh".into()),
            },
            "eve",
        )
        .await
        .unwrap();
    assert_eq!(done.status, RunStatus::Completed);
    assert_eq!(done.outputs["soft"]["approved"], json!(false));
    assert_eq!(done.outputs["soft"]["reason"], json!("meh"));
    assert_eq!(done.outputs["end"]["soft"], json!(false));

    // Large amount: pause at `large` first.
    let record = h.pause(json!({"amount": 150})).await;
    assert_eq!(record.step_id, "large");
    assert_eq!(record.message.as_deref(), Some("Large: 150"));
    let next = h
        .agent
        .resume_by_key(&record.key, approve(), "eve")
        .await
        .unwrap();
    assert_eq!(next.status, RunStatus::AwaitingApproval);
    assert_eq!(next.outputs["large"]["approved"], json!(true));
    assert_eq!(next.outputs["large"]["decided_by"], json!("eve"));
    let soft = next.pending.unwrap();
    assert_ne!(soft.key, record.key, "every pause has its own key");
    let done = h
        .agent
        .resume_by_key(&soft.key, approve(), "eve")
        .await
        .unwrap();
    assert_eq!(done.status, RunStatus::Completed);
}

#[tokio::test]
async fn approvers_restrict_who_may_decide() {
    let spec = PAY_SPEC.replace("tools:", "approvals:\n  approvers: [alice]\ntools:");
    let h = harness(&spec, false);
    let key = h.pause(json!({"amount": 1, "to": "y"})).await.key;
    let err = h
        .agent
        .resume_by_key(&key, approve(), "mallory")
        .await
        .unwrap_err();
    assert!(
        matches!(err, RunError::Approval(ApprovalError::Forbidden { .. })),
        "{err}"
    );
    let record = h.store.get_approval(&key).await.unwrap().unwrap();
    assert_eq!(record.status, ApprovalStatus::Pending);
    let done = h
        .agent
        .resume_by_key(&key, approve(), "alice")
        .await
        .unwrap();
    assert_eq!(done.status, RunStatus::Completed);
}
