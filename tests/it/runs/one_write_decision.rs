//! A decision whose run has nothing left to call, claim or pause for (only
//! `set:` steps follow the gate) is one write: the claim stores the decision
//! and the run's end together (`AgentRun::claim`). The run is therefore
//! finished as soon as the claim returns, a losing claim writes nothing, and
//! a run with a call after its gate still takes the two-step path.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use async_trait::async_trait;
use serde_json::{Value, json};
use tollgate_runtime::spec::ToolSpec;
use tollgate_runtime::tools::{CallContext, ModelRequest, ToolError, ToolInvoker};
use tollgate_runtime::{AgentRun, ApprovalError, Decision, RunError, RunStatus, SharedStore, Spec};

const PURE_TAIL: &str = r#"version: 1
agent: refunds
steps:
  - id: prepare
    set: { amount: "{{ input.amount }}" }
  - id: gate
    approval: { message: "Refund {{ steps.prepare.output.amount }}?", payload: { amount: "{{ steps.prepare.output.amount }}" } }
  - id: act
    set: { refunded: "{{ steps.gate.output.payload.amount }}", by: "{{ steps.gate.output.decided_by }}" }
"#;

const CALL_AFTER: &str = r#"version: 1
agent: payer
tools:
  pay:
    rust: {}
steps:
  - id: gate
    approval: { message: "Pay?" }
  - id: pay
    tool: pay
    with: { amount: 5 }
"#;

struct Counting(AtomicUsize);

#[async_trait]
impl ToolInvoker for Counting {
    async fn call_tool(
        &self,
        _tool: &ToolSpec,
        _args: &Value,
        _call: &CallContext,
    ) -> Result<Value, ToolError> {
        self.0.fetch_add(1, Ordering::SeqCst);
        Ok(json!({ "paid": true }))
    }

    async fn call_model(
        &self,
        _request: ModelRequest<'_>,
        _call: &CallContext,
    ) -> Result<Value, ToolError> {
        Err(ToolError::new("no model here"))
    }
}

fn agent(spec: &str, store: SharedStore) -> AgentRun {
    AgentRun::new(
        Arc::new(Spec::parse(spec, "spec.yaml").expect("spec")),
        store,
    )
}

fn sqlite(dir: &tempfile::TempDir) -> SharedStore {
    crate::common::open_store(&dir.path().join("state.db"))
}

/// The event names of a run, checking that seq numbers have no gap.
async fn event_names(store: &SharedStore, run_id: &str) -> Vec<String> {
    let events = store.run_events(run_id, 0).await.expect("events");
    let seqs: Vec<u64> = events.iter().map(|e| e.seq).collect();
    let expected: Vec<u64> = (1..=events.len() as u64).collect();
    assert_eq!(seqs, expected, "gap-free seq");
    events.iter().map(|e| e.kind.name().to_string()).collect()
}

async fn paused(agent: &AgentRun, amount: u64) -> (String, String) {
    let outcome = agent
        .start(json!({ "amount": amount }), json!({}))
        .await
        .expect("start");
    assert_eq!(outcome.status, RunStatus::AwaitingApproval);
    let key = outcome.pending.expect("pending").key;
    (outcome.run_id, key)
}

#[tokio::test(flavor = "multi_thread")]
async fn the_claim_alone_ends_a_run_whose_gate_only_sets_values_after_it() {
    let dir = tempfile::tempdir().expect("temp dir");
    let store = sqlite(&dir);
    let agent = agent(PURE_TAIL, store.clone());
    let cases = [
        (
            Decision::Approve { reason: None },
            RunStatus::Completed,
            json!(12),
        ),
        (
            Decision::Modify {
                payload: json!({ "amount": 7 }),
                reason: Some("partial".into()),
            },
            RunStatus::Completed,
            json!(7),
        ),
        (
            Decision::Reject {
                reason: Some("no".into()),
            },
            RunStatus::Rejected,
            Value::Null,
        ),
    ];
    for (decision, status, refunded) in cases {
        let (run_id, key) = paused(&agent, 12).await;
        let claimed = agent.claim(&key, decision, "alice").await.expect("claim");
        // Before anything resumes it, the store already holds the end.
        let run = store.get_run(&run_id).await.expect("get").expect("run");
        assert_eq!(run.status, status, "{run:?}");
        assert_eq!((run.owner.clone(), run.lease_until), (None, None));
        if status == RunStatus::Completed {
            assert_eq!(
                run.outputs["act"]["refunded"], refunded,
                "{:?}",
                run.outputs
            );
            assert_eq!(run.outputs["act"]["by"], "alice");
        }
        let names = event_names(&store, &run_id).await;
        let resolved = names
            .iter()
            .position(|n| n == "approval_resolved")
            .expect("resolved event");
        let last = if status == RunStatus::Completed {
            "run_completed"
        } else {
            "run_rejected"
        };
        assert_eq!(names.last().map(String::as_str), Some(last), "{names:?}");
        assert!(resolved < names.len() - 1, "{names:?}");
        // Resuming answers with that end and writes nothing more.
        let outcome = agent.resume_claimed(claimed).await.expect("resume");
        assert_eq!(outcome.status, status);
        assert_eq!(event_names(&store, &run_id).await, names);
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn of_many_claims_at_once_one_ends_the_run_and_the_others_write_nothing() {
    let dir = tempfile::tempdir().expect("temp dir");
    let store = sqlite(&dir);
    let agent = agent(PURE_TAIL, store.clone());
    let (run_id, key) = paused(&agent, 3).await;
    let mut racers = Vec::new();
    for n in 0..8 {
        let agent = agent.clone();
        let key = key.clone();
        racers.push(tokio::spawn(async move {
            agent
                .claim(
                    &key,
                    Decision::Approve { reason: None },
                    &format!("decider-{n}"),
                )
                .await
        }));
    }
    let mut won = 0;
    for racer in racers {
        match racer.await.expect("join") {
            Ok(claimed) => {
                assert!(claimed.won(), "{claimed:?}");
                won += 1;
            }
            Err(RunError::Approval(ApprovalError::AlreadyResolved { .. })) => {}
            Err(other) => panic!("unexpected: {other:?}"),
        }
    }
    assert_eq!(won, 1);
    let names = event_names(&store, &run_id).await;
    let ends = names.iter().filter(|n| *n == "run_completed").count();
    let resolved = names.iter().filter(|n| *n == "approval_resolved").count();
    assert_eq!((ends, resolved), (1, 1), "{names:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn the_winner_repeating_its_decision_gets_the_stored_end() {
    let dir = tempfile::tempdir().expect("temp dir");
    let store = sqlite(&dir);
    let agent = agent(PURE_TAIL, store.clone());
    let (run_id, key) = paused(&agent, 4).await;
    agent
        .resume_by_key(&key, Decision::Approve { reason: None }, "alice")
        .await
        .expect("first");
    let names = event_names(&store, &run_id).await;
    let again = agent
        .resume_by_key(&key, Decision::Approve { reason: None }, "alice")
        .await
        .expect("repeat");
    assert_eq!(again.status, RunStatus::Completed);
    assert_eq!(again.outputs["act"]["refunded"], 4);
    assert_eq!(event_names(&store, &run_id).await, names);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_run_with_a_call_after_its_gate_is_driven_after_the_claim() {
    let dir = tempfile::tempdir().expect("temp dir");
    let store = sqlite(&dir);
    let tools = Arc::new(Counting(AtomicUsize::new(0)));
    let agent = agent(CALL_AFTER, store.clone()).with_tools(tools.clone());
    let (run_id, key) = paused(&agent, 1).await;
    let claimed = agent
        .claim(&key, Decision::Approve { reason: None }, "alice")
        .await
        .expect("claim");
    // The claim made this process the running run's owner; no call yet.
    let run = store.get_run(&run_id).await.expect("get").expect("run");
    assert_eq!(run.status, RunStatus::Running);
    assert!(run.owner.is_some());
    assert_eq!(tools.0.load(Ordering::SeqCst), 0);
    let outcome = agent.resume_claimed(claimed).await.expect("resume");
    assert_eq!(outcome.status, RunStatus::Completed);
    assert_eq!(tools.0.load(Ordering::SeqCst), 1);
}
