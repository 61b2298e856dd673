//! The spec's workflow, run in-process by `tollgate_runtime::testing`:
//! every tool and model step answers with a stub, each gate is decided by
//! the test, on the memory store and a manual clock (no network, no
//! waiting). A template for your own cases: give the stubs replies like
//! your tools' real ones, script approve, reject, modify or expire per
//! gate, and assert the outputs and the calls made.
//!
//! This file is yours: `tollgate export` writes it once and never
//! overwrites your edits.

use tollgate_runtime::RunStatus;
use tollgate_runtime::serde_json::{self, Value};
use tollgate_runtime::testing::Workflow;

const SPEC: &str = include_str!("../agent.yaml");

/// What each tool answers (by tool name) and each model step (by step
/// id): an object with every field of its output the spec reads.
const STUBS: &str = r#"
{{ m.workflow.stubs_json() }}
"#;

/// A run's input: every `input.*` field the spec reads.
const INPUT: &str = r#"
{{ m.example_input }}
"#;
{%- if let Some(gate) = m.workflow.first_gate %}

/// The first step that pauses for a person with these stubs.
const FIRST_GATE: &str = {{ gate|rust }};
{%- endif %}

fn json(text: &str) -> Value {
    serde_json::from_str(text).expect("valid JSON")
}

/// The spec with every tool and model step stubbed.
fn workflow() -> Workflow {
    let mut workflow = Workflow::new(SPEC).expect("agent.yaml is a valid spec");
    let stubs = json(STUBS);
    for (tool, reply) in stubs["tools"].as_object().into_iter().flatten() {
        workflow = workflow.reply(tool, reply.clone());
    }
    for (step, reply) in stubs["models"].as_object().into_iter().flatten() {
        workflow = workflow.model(step, reply.clone());
    }
    workflow
}
{%- if m.workflow.first_gate.is_some() %}

#[tokio::test]
async fn the_run_waits_at_its_first_gate_until_someone_decides() {
    let mut workflow = workflow();
    for gate in workflow.gate_steps() {
        if gate != FIRST_GATE {
            workflow = workflow.approve(&gate);
        }
    }
    let finished = workflow.run(json(INPUT)).await.expect("the workflow runs");
    assert_eq!(finished.status, RunStatus::AwaitingApproval, "{finished:?}");
    let pending = finished.pending.expect("a pending approval");
    assert_eq!(pending.step_id, FIRST_GATE);
}

#[tokio::test]
async fn approving_every_gate_completes_the_run() {
    let mut workflow = workflow();
    for gate in workflow.gate_steps() {
        workflow = workflow.approve(&gate);
    }
    let finished = workflow.run(json(INPUT)).await.expect("the workflow runs");
    assert_eq!(finished.status, RunStatus::Completed, "{finished:?}");
    assert_eq!(finished.gates[0].step, FIRST_GATE);
}

#[tokio::test]
async fn letting_the_first_gate_expire_ends_the_run_expired() {
    let mut workflow = workflow().expire(FIRST_GATE);
    for gate in workflow.gate_steps() {
        if gate != FIRST_GATE {
            workflow = workflow.approve(&gate);
        }
    }
    let finished = workflow.run(json(INPUT)).await.expect("the workflow runs");
    assert_eq!(finished.status, RunStatus::Expired, "{finished:?}");
}
{%- else %}

#[tokio::test]
async fn a_run_completes() {
    let mut workflow = workflow();
    for gate in workflow.gate_steps() {
        workflow = workflow.approve(&gate);
    }
    let finished = workflow.run(json(INPUT)).await.expect("the workflow runs");
    assert_eq!(finished.status, RunStatus::Completed, "{finished:?}");
}
{%- endif %}
