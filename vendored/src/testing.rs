//! Run a spec's workflow in a test: tools answered by stubs (a fixed reply
//! or a closure over the call's arguments), each gate decided by a script
//! (approve, reject, modify, let it expire), on the memory store and a
//! [`ManualClock`], so nothing leaves the process and an expiry needs no
//! waiting. Then assert on the run's status, outputs, and the calls made.
//!
//! The run goes through the same [`AgentRun`] the server drives: templates,
//! conditions, `approval: required` tools, dedupe, journaling and the
//! idempotency keys are the real ones; only the outside world is stubbed.
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use tollgate_runtime::RunStatus;
//! use tollgate_runtime::serde_json::json;
//! use tollgate_runtime::testing::Workflow;
//!
//! let spec = r#"
//! version: 1
//! agent: refunds
//! tools:
//!   refund:
//!     http: { method: POST, url: "https://pay.example/refunds" }
//!     approval: required
//! steps:
//!   - id: pay
//!     tool: refund
//!     with: { order: "{{ input.order }}", amount: 20 }
//! "#;
//! let finished = Workflow::new(spec)?
//!     .respond("refund", |args| Ok(json!({ "refunded": args["amount"] })))
//!     .modify("pay", json!({ "order": "o-1", "amount": 15 }))
//!     .run(json!({ "order": "o-1" }))
//!     .await?;
//! assert_eq!(finished.status, RunStatus::Completed);
//! assert_eq!(finished.output("pay"), Some(&json!({ "refunded": 15 })));
//! assert_eq!(finished.calls_to("refund")[0].args["amount"], 15);
//! # Ok(())
//! # }
//! ```

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use serde_json::{Map, Value, json};
use thiserror::Error;

use crate::domain::pending_approval::{ApprovalRecord, Decision};
use crate::domain::run_state::RunStatus;
use crate::domain::spec::{Spec, SpecError, ToolKind, ToolSpec};
use crate::engine::run::{AgentRun, RunError, RunOutcome};
use crate::engine::tools::{
    CallContext, CustomTool, CustomTools, ModelRequest, ToolError, ToolInvoker,
};
use crate::store::{self, SqliteOptions, StoreError};
use crate::support::time::{Clock, ManualClock};

/// How a stub answers: from the call's arguments (a tool's evaluated
/// `with:`, or `{"system", "prompt"}` for a model step).
type Reply = Arc<dyn Fn(&Value) -> Result<Value, ToolError> + Send + Sync>;

/// What a script does when the run pauses at a gate.
#[derive(Debug, Clone, PartialEq)]
pub enum Scripted {
    Approve {
        reason: Option<String>,
    },
    Reject {
        reason: Option<String>,
    },
    /// Approve with a new payload: the tool's edited arguments (a gate
    /// before a tool call) or the step's replacement output (after).
    Modify {
        payload: Value,
    },
    /// Nobody decides: the clock moves past the approval's expiry and the
    /// sweeper ends the run `expired`.
    Expire,
}

impl Scripted {
    /// The name a [`Gate`] records: approve, reject, modify or expire.
    pub fn name(&self) -> &'static str {
        match self {
            Scripted::Approve { .. } => "approve",
            Scripted::Reject { .. } => "reject",
            Scripted::Modify { .. } => "modify",
            Scripted::Expire => "expire",
        }
    }

    fn decision(&self) -> Option<Decision> {
        match self {
            Scripted::Approve { reason } => Some(Decision::Approve {
                reason: reason.clone(),
            }),
            Scripted::Reject { reason } => Some(Decision::Reject {
                reason: reason.clone(),
            }),
            Scripted::Modify { payload } => Some(Decision::Modify {
                payload: payload.clone(),
                reason: None,
            }),
            Scripted::Expire => None,
        }
    }
}

/// A spec, its stubs and its script, ready to [`run`](Workflow::run).
pub struct Workflow {
    spec: Arc<Spec>,
    clock: Arc<ManualClock>,
    tools: BTreeMap<String, Reply>,
    models: BTreeMap<String, Reply>,
    custom: CustomTools,
    script: BTreeMap<String, Scripted>,
    /// The approver's input given with a step's decision (a gate with a
    /// `form:`).
    inputs: BTreeMap<String, Value>,
    decided_by: String,
}

/// One call the run made.
#[derive(Debug, Clone, PartialEq)]
pub struct Call {
    pub step: String,
    /// The tool called; `None` for a model step.
    pub tool: Option<String>,
    /// A tool's evaluated `with:` arguments (edited ones after a modify);
    /// `{"system", "prompt"}` for a model step.
    pub args: Value,
    /// The `Idempotency-Key` the call carries (DESIGN §9).
    pub idempotency_key: Option<String>,
}

/// A gate the run met, and what the script did there.
#[derive(Debug, Clone)]
pub struct Gate {
    pub step: String,
    /// The approval as it stood when the run paused (message, payload, expiry).
    pub record: ApprovalRecord,
    /// approve, reject, modify or expire.
    pub decision: &'static str,
}

/// Where the run stands once the script has nothing more to do: it ended,
/// or it waits at a gate the script does not decide ([`Finished::pending`]).
#[derive(Debug, Clone)]
pub struct Finished {
    pub run_id: String,
    pub status: RunStatus,
    pub outputs: Map<String, Value>,
    pub error: Option<String>,
    /// The approval the run waits on, when it stopped at an undecided gate.
    pub pending: Option<ApprovalRecord>,
    /// Every tool and model call, in order.
    pub calls: Vec<Call>,
    /// Every gate met and decided, in order.
    pub gates: Vec<Gate>,
}

impl Finished {
    /// A step's output.
    pub fn output(&self, step: &str) -> Option<&Value> {
        self.outputs.get(step)
    }

    /// The calls made to tool `tool`, in order.
    pub fn calls_to(&self, tool: &str) -> Vec<&Call> {
        self.calls
            .iter()
            .filter(|c| c.tool.as_deref() == Some(tool))
            .collect()
    }
}

/// Why a workflow could not be run (a run that fails on its own is a
/// [`Finished`] with status `failed`, not this).
#[derive(Debug, Error)]
pub enum HarnessError {
    #[error(transparent)]
    Run(#[from] RunError),
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The script decides a step that is not in the spec.
    #[error("the script decides step {step:?}, which the spec does not have (its steps: {steps})")]
    UnknownStep { step: String, steps: String },
    /// A stub for a tool the spec does not declare.
    #[error("a stub answers tool {tool:?}, which the spec does not declare (its tools: {tools})")]
    UnknownTool { tool: String, tools: String },
    /// The run kept pausing past every step the spec has.
    #[error("the run paused more often than the spec has steps; stopped at step {step:?}")]
    Runaway { step: String },
}

impl Workflow {
    /// The workflow of a spec's YAML (named `agent.yaml` in errors).
    pub fn new(spec_yaml: &str) -> Result<Workflow, SpecError> {
        Ok(Workflow::from_spec(Spec::parse(spec_yaml, "agent.yaml")?))
    }

    /// The workflow of a parsed spec.
    pub fn from_spec(spec: Spec) -> Workflow {
        // Someone the spec lets decide, so a scripted decision is not refused.
        let decided_by = spec
            .approvals
            .approvers
            .as_ref()
            .and_then(|approvers| approvers.first().cloned())
            .unwrap_or_else(|| "test".to_string());
        Workflow {
            spec: Arc::new(spec),
            clock: Arc::new(ManualClock::starting_now()),
            tools: BTreeMap::new(),
            models: BTreeMap::new(),
            custom: CustomTools::new(),
            script: BTreeMap::new(),
            inputs: BTreeMap::new(),
            decided_by,
        }
    }

    /// Tool `tool` (HTTP or `rust:`) answers every call with `output`.
    pub fn reply(self, tool: &str, output: Value) -> Workflow {
        self.respond(tool, move |_| Ok(output.clone()))
    }

    /// Tool `tool` answers with what `reply` makes of the call's arguments;
    /// an `Err` fails the step as the tool's error would.
    pub fn respond(
        mut self,
        tool: &str,
        reply: impl Fn(&Value) -> Result<Value, ToolError> + Send + Sync + 'static,
    ) -> Workflow {
        self.tools.insert(tool.to_string(), Arc::new(reply));
        self
    }

    /// Every call to `tool` fails with `message`.
    pub fn fail(self, tool: &str, message: &str) -> Workflow {
        let message = message.to_string();
        self.respond(tool, move |_| Err(ToolError::new(message.clone())))
    }

    /// The real implementation of `rust:` tool `name` (a stub given with
    /// [`Workflow::reply`] or [`Workflow::respond`] wins over it).
    pub fn tool(mut self, name: &str, tool: impl CustomTool + 'static) -> Workflow {
        self.custom.register(name, Arc::new(tool));
        self
    }

    /// Model step `step` answers with `output` (its output as the step
    /// stores it: for `output: json`, the parsed object).
    pub fn model(self, step: &str, output: Value) -> Workflow {
        self.respond_model(step, move |_| Ok(output.clone()))
    }

    /// Model step `step` answers with what `reply` makes of
    /// `{"system": ..., "prompt": ...}`.
    pub fn respond_model(
        mut self,
        step: &str,
        reply: impl Fn(&Value) -> Result<Value, ToolError> + Send + Sync + 'static,
    ) -> Workflow {
        self.models.insert(step.to_string(), Arc::new(reply));
        self
    }

    /// Approve the gate of step `step`.
    pub fn approve(self, step: &str) -> Workflow {
        self.decide(step, Scripted::Approve { reason: None })
    }

    /// Reject the gate of step `step`, giving `reason`.
    pub fn reject(self, step: &str, reason: &str) -> Workflow {
        self.decide(
            step,
            Scripted::Reject {
                reason: Some(reason.to_string()),
            },
        )
    }

    /// Approve the gate of step `step` with `payload` instead of what it asked.
    pub fn modify(self, step: &str, payload: Value) -> Workflow {
        self.decide(step, Scripted::Modify { payload })
    }

    /// Give `input` with the decision on the gate of step `step` (a gate
    /// with a `form:`): checked against the form as every channel's is,
    /// and the step's output `input`.
    pub fn input(mut self, step: &str, input: Value) -> Workflow {
        self.inputs.insert(step.to_string(), input);
        self
    }

    /// Let the gate of step `step` expire undecided.
    pub fn expire(self, step: &str) -> Workflow {
        self.decide(step, Scripted::Expire)
    }

    /// Decide the gate of step `step` as `scripted`.
    pub fn decide(mut self, step: &str, scripted: Scripted) -> Workflow {
        self.script.insert(step.to_string(), scripted);
        self
    }

    /// Who decides (`decided_by`): by default the first of the spec's
    /// `approvals.approvers`, or `test` when it names none.
    pub fn decided_by(mut self, name: &str) -> Workflow {
        self.decided_by = name.to_string();
        self
    }

    /// Every step of the spec that can pause for a person, in order: to
    /// script them all (`for step in workflow.gate_steps() { ... }`).
    pub fn gate_steps(&self) -> Vec<String> {
        self.spec
            .steps
            .iter()
            .filter(|step| self.spec.step_can_pause(step))
            .map(|step| step.id.clone())
            .collect()
    }

    /// The clock the run reads (set it before [`Workflow::run`] to start at
    /// a given time).
    pub fn clock(&self) -> &ManualClock {
        &self.clock
    }

    /// Start a run with `input`, decide each gate as scripted, and return
    /// where it ends or waits. Each call is a fresh run on a fresh store.
    pub async fn run(&self, input: Value) -> Result<Finished, HarnessError> {
        self.check()?;
        let calls = Arc::new(Mutex::new(Vec::new()));
        let stubs = Stubs {
            tools: self.tools.clone(),
            models: self.models.clone(),
            custom: self.custom.clone(),
            calls: Arc::clone(&calls),
        };
        let store = store::open("memory:", SqliteOptions::default())?;
        let agent = AgentRun::new(Arc::clone(&self.spec), store)
            .with_tools(Arc::new(stubs))
            .with_clock(self.clock.clone());
        let trigger = json!({
            "kind": "test",
            "received_at": crate::support::time::format_utc(self.clock.now()),
        });
        let mut outcome = agent.start(input, trigger).await?;
        let mut gates = Vec::new();
        let most = self.spec.steps.len() * 2 + 1;
        while let Some(record) = waiting(&outcome) {
            let Some(scripted) = self.script.get(&record.step_id) else {
                break;
            };
            if gates.len() >= most {
                return Err(HarnessError::Runaway {
                    step: record.step_id.clone(),
                });
            }
            gates.push(Gate {
                step: record.step_id.clone(),
                record: record.clone(),
                decision: scripted.name(),
            });
            outcome = match scripted.decision() {
                Some(decision) => {
                    let ballot = crate::engine::run::Ballot::new(
                        decision,
                        &self.decided_by,
                        crate::domain::policy::Channel::Gate,
                    )
                    .with_input(self.inputs.get(&record.step_id).cloned());
                    let claimed = agent.vote(&record.key, ballot).await?;
                    agent.resume_claimed(claimed).await?
                }
                None => {
                    self.clock.set(crate::support::time::add(
                        record.expires_at,
                        Duration::from_secs(1),
                    ));
                    agent.sweep_expired().await?;
                    agent.stored_outcome(&outcome.run_id).await?
                }
            };
        }
        let calls = std::mem::take(&mut *lock(&calls));
        Ok(Finished {
            run_id: outcome.run_id,
            status: outcome.status,
            outputs: outcome.outputs,
            error: outcome.error,
            pending: outcome.pending,
            calls,
            gates,
        })
    }

    /// Every scripted step and stubbed tool must be the spec's: a typo
    /// would otherwise leave a gate undecided or a tool unstubbed silently.
    fn check(&self) -> Result<(), HarnessError> {
        let steps: Vec<&str> = self.spec.steps.iter().map(|s| s.id.as_str()).collect();
        for step in self.script.keys().chain(self.models.keys()) {
            if !steps.contains(&step.as_str()) {
                return Err(HarnessError::UnknownStep {
                    step: step.clone(),
                    steps: steps.join(", "),
                });
            }
        }
        for tool in self.tools.keys() {
            if !self.spec.tools.contains_key(tool) {
                return Err(HarnessError::UnknownTool {
                    tool: tool.clone(),
                    tools: self
                        .spec
                        .tools
                        .keys()
                        .map(String::as_str)
                        .collect::<Vec<_>>()
                        .join(", "),
                });
            }
        }
        Ok(())
    }
}

/// The approval a run waits on, if it waits.
fn waiting(outcome: &RunOutcome) -> Option<ApprovalRecord> {
    match outcome.status {
        RunStatus::AwaitingApproval => outcome.pending.clone(),
        _ => None,
    }
}

fn lock(calls: &Mutex<Vec<Call>>) -> std::sync::MutexGuard<'_, Vec<Call>> {
    // A list of calls, consistent after every push.
    calls
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// The tool invoker of a test run: stubs first, then registered `rust:`
/// tools; anything else fails the call (no network).
struct Stubs {
    tools: BTreeMap<String, Reply>,
    models: BTreeMap<String, Reply>,
    custom: CustomTools,
    calls: Arc<Mutex<Vec<Call>>>,
}

impl Stubs {
    fn record(&self, call: &CallContext, tool: Option<&str>, args: Value) {
        lock(&self.calls).push(Call {
            step: call.step_id.clone(),
            tool: tool.map(str::to_string),
            args,
            idempotency_key: call.idempotency_key.clone(),
        });
    }
}

#[async_trait]
impl ToolInvoker for Stubs {
    async fn call_tool(
        &self,
        tool: &ToolSpec,
        args: &Value,
        call: &CallContext,
    ) -> Result<Value, ToolError> {
        self.record(call, Some(&tool.name), args.clone());
        if let Some(reply) = self.tools.get(&tool.name) {
            return reply(args);
        }
        match tool.kind {
            ToolKind::Rust if self.custom.contains(&tool.name) => {
                self.custom.call(&tool.name, args, call).await
            }
            _ => Err(ToolError::new(format!(
                "tool {:?} has no stub in this test: give it one with Workflow::reply or Workflow::respond{}",
                tool.name,
                if matches!(tool.kind, ToolKind::Rust) {
                    ", or its implementation with Workflow::tool"
                } else {
                    ""
                }
            ))),
        }
    }

    async fn call_model(
        &self,
        request: ModelRequest<'_>,
        call: &CallContext,
    ) -> Result<Value, ToolError> {
        let args = json!({ "system": request.system, "prompt": request.prompt });
        self.record(call, None, args.clone());
        match self.models.get(&call.step_id) {
            Some(reply) => reply(&args),
            None => Err(ToolError::new(format!(
                "model step {:?} has no stub in this test: give it one with Workflow::model or Workflow::respond_model",
                call.step_id
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A refund: look the order up (GET), a person reviews the amount, pay
    /// it (POST, `approval: required`), note it.
    const SPEC: &str = r#"
version: 1
agent: refunds
approvals:
  ttl: 2h
tools:
  lookup:
    http: { method: GET, url: "http://127.0.0.1:9/orders/{{ args.order }}" }
  pay:
    http: { method: POST, url: "http://127.0.0.1:9/refunds" }
    approval: required
    message: "Refund {{ args.amount }} on {{ args.order }}?"
steps:
  - id: find
    tool: lookup
    with: { order: "{{ input.order }}" }
  - id: review
    approval:
      message: "Refund order {{ input.order }}?"
      payload: { amount: "{{ steps.find.output.total }}" }
  - id: refund
    tool: pay
    with:
      order: "{{ input.order }}"
      amount: "{{ steps.review.output.payload.amount }}"
  - id: done
    set:
      refunded: "{{ steps.refund.output.id }}"
"#;

    fn workflow() -> Workflow {
        Workflow::new(SPEC)
            .unwrap()
            .respond("lookup", |args| {
                Ok(json!({ "order": args["order"], "total": 40 }))
            })
            .respond("pay", |args| {
                Ok(json!({ "id": format!("rf-{}", args["order"].as_str().unwrap_or("?")) }))
            })
    }

    #[tokio::test]
    async fn approving_every_gate_runs_to_the_end_with_the_stubs_answers() {
        let finished = workflow()
            .approve("review")
            .approve("refund")
            .run(json!({ "order": "o-7" }))
            .await
            .unwrap();
        assert_eq!(
            finished.status,
            RunStatus::Completed,
            "{:?}",
            finished.error
        );
        assert_eq!(
            finished.output("done"),
            Some(&json!({ "refunded": "rf-o-7" }))
        );
        let steps: Vec<(&str, Option<&str>)> = finished
            .calls
            .iter()
            .map(|c| (c.step.as_str(), c.tool.as_deref()))
            .collect();
        assert_eq!(steps, [("find", Some("lookup")), ("refund", Some("pay"))]);
        assert_eq!(
            finished.calls_to("pay")[0].args,
            json!({ "order": "o-7", "amount": 40 })
        );
        // A POST carries an idempotency key; so does the GET (every call has one).
        assert!(
            finished.calls_to("pay")[0]
                .idempotency_key
                .as_deref()
                .is_some_and(|k| k.starts_with("tg-"))
        );
        let gates: Vec<(&str, &str)> = finished
            .gates
            .iter()
            .map(|g| (g.step.as_str(), g.decision))
            .collect();
        assert_eq!(gates, [("review", "approve"), ("refund", "approve")]);
        assert_eq!(
            finished.gates[1].record.message.as_deref(),
            Some("Refund 40 on o-7?")
        );
        assert!(finished.pending.is_none());
    }

    #[tokio::test]
    async fn a_rejection_ends_the_run_before_the_gated_call() {
        let finished = workflow()
            .approve("review")
            .reject("refund", "not this one")
            .run(json!({ "order": "o-7" }))
            .await
            .unwrap();
        assert_eq!(finished.status, RunStatus::Rejected);
        assert!(finished.calls_to("pay").is_empty(), "{:?}", finished.calls);
        assert_eq!(finished.calls_to("lookup").len(), 1);
    }

    #[tokio::test]
    async fn a_modified_payload_is_what_the_tool_is_called_with() {
        let finished = workflow()
            .modify("review", json!({ "amount": 25 }))
            .modify("refund", json!({ "order": "o-7", "amount": 20 }))
            .run(json!({ "order": "o-7" }))
            .await
            .unwrap();
        assert_eq!(
            finished.status,
            RunStatus::Completed,
            "{:?}",
            finished.error
        );
        let pay = finished.calls_to("pay");
        assert_eq!(pay.len(), 1);
        assert_eq!(pay[0].args, json!({ "order": "o-7", "amount": 20 }));
        let gates: Vec<&str> = finished.gates.iter().map(|g| g.decision).collect();
        assert_eq!(gates, ["modify", "modify"]);
        // The tool gate asked about the amount the first person set.
        assert_eq!(
            finished.gates[1].record.message.as_deref(),
            Some("Refund 25 on o-7?")
        );
    }

    #[tokio::test]
    async fn an_expiry_moves_the_manual_clock_past_the_ttl_and_ends_the_run() {
        let workflow = workflow().expire("review");
        let before = workflow.clock().now();
        let finished = workflow.run(json!({ "order": "o-7" })).await.unwrap();
        assert_eq!(finished.status, RunStatus::Expired);
        assert!(finished.calls_to("pay").is_empty());
        let ttl = finished.gates[0].record.expires_at - finished.gates[0].record.created_at;
        assert_eq!(ttl, chrono::Duration::hours(2), "the spec's ttl");
        assert!(workflow.clock().now() - before > chrono::Duration::hours(2));
    }

    #[tokio::test]
    async fn an_undecided_gate_leaves_the_run_waiting_there() {
        let finished = workflow()
            .approve("review")
            .run(json!({ "order": "o-7" }))
            .await
            .unwrap();
        assert_eq!(finished.status, RunStatus::AwaitingApproval);
        let pending = finished.pending.as_ref().unwrap();
        assert_eq!(pending.step_id, "refund");
        assert_eq!(pending.payload, json!({ "order": "o-7", "amount": 40 }));
    }

    #[tokio::test]
    async fn a_failing_or_missing_stub_fails_the_run_and_says_which() {
        let finished = workflow()
            .fail("lookup", "orders service is down")
            .run(json!({ "order": "o-7" }))
            .await
            .unwrap();
        assert_eq!(finished.status, RunStatus::Failed);
        assert!(
            finished
                .error
                .as_deref()
                .is_some_and(|e| e.contains("orders service is down")),
            "{:?}",
            finished.error
        );

        let finished = Workflow::new(SPEC)
            .unwrap()
            .run(json!({ "order": "o-7" }))
            .await
            .unwrap();
        assert_eq!(finished.status, RunStatus::Failed);
        assert!(
            finished
                .error
                .as_deref()
                .is_some_and(|e| e.contains("tool \"lookup\" has no stub in this test")),
            "{:?}",
            finished.error
        );
    }

    #[tokio::test]
    async fn a_script_or_stub_naming_what_the_spec_lacks_is_refused() {
        let err = workflow()
            .approve("reveiw")
            .run(json!({}))
            .await
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "the script decides step \"reveiw\", which the spec does not have (its steps: find, review, refund, done)"
        );
        let err = workflow()
            .reply("lookpu", json!({}))
            .run(json!({}))
            .await
            .unwrap_err();
        assert!(
            err.to_string()
                .starts_with("a stub answers tool \"lookpu\", which the spec does not declare"),
            "{err}"
        );
    }

    #[tokio::test]
    async fn the_default_decider_is_one_the_spec_allows() {
        let spec = SPEC.replace("  ttl: 2h\n", "  ttl: 2h\n  approvers: [alice, bob]\n");
        let workflow = Workflow::new(&spec)
            .unwrap()
            .reply("lookup", json!({ "total": 5 }))
            .reply("pay", json!({ "id": "rf-1" }));
        assert_eq!(workflow.gate_steps(), ["review", "refund"]);
        let mut scripted = workflow;
        for step in scripted.gate_steps() {
            scripted = scripted.approve(&step);
        }
        let finished = scripted.run(json!({ "order": "o-1" })).await.unwrap();
        assert_eq!(
            finished.status,
            RunStatus::Completed,
            "{:?}",
            finished.error
        );
        let refused = Workflow::new(&spec)
            .unwrap()
            .reply("lookup", json!({ "total": 5 }))
            .approve("review")
            .decided_by("mallory")
            .run(json!({ "order": "o-1" }))
            .await
            .unwrap_err();
        assert!(refused.to_string().contains("mallory"), "{refused}");
    }

    #[tokio::test]
    async fn a_script_gives_a_forms_input_and_the_step_outputs_it() {
        let spec = "version: 1\nagent: desk\nsteps:\n  - id: check\n    approval:\n      form: { type: object, properties: { note: { type: string }, rush: { type: boolean, default: false } }, required: [note] }\n  - id: done\n    set: { note: \"{{ steps.check.output.input.note }}\" }\n";
        let finished = Workflow::new(spec)
            .unwrap()
            .approve("check")
            .input("check", json!({ "note": "ok" }))
            .run(json!({}))
            .await
            .unwrap();
        assert_eq!(
            finished.status,
            RunStatus::Completed,
            "{:?}",
            finished.error
        );
        assert_eq!(
            finished.output("check").unwrap()["input"],
            json!({ "note": "ok", "rush": false })
        );
        assert_eq!(finished.output("done").unwrap()["note"], "ok");
        let refused = Workflow::new(spec)
            .unwrap()
            .approve("check")
            .run(json!({}))
            .await
            .unwrap_err();
        assert!(
            refused.to_string().contains("/note: is required"),
            "{refused}"
        );
    }

    struct Counter(std::sync::atomic::AtomicUsize);

    #[async_trait]
    impl CustomTool for Counter {
        async fn call(&self, args: Value, _call: &CallContext) -> Result<Value, ToolError> {
            let n = self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1;
            Ok(json!({ "n": n, "echo": args["x"] }))
        }
    }

    #[tokio::test]
    async fn rust_tools_run_their_implementation_and_model_steps_their_stub() {
        let spec = r#"
version: 1
agent: mixed
model:
  base_url: http://127.0.0.1:9/v1
  name: test-model
tools:
  count:
    rust: {}
steps:
  - id: ask
    model:
      prompt: "Classify {{ input.text }}"
      output: json
  - id: tally
    tool: count
    with: { x: "{{ steps.ask.output.label }}" }
"#;
        let finished = Workflow::new(spec)
            .unwrap()
            .tool("count", Counter(0.into()))
            .respond_model("ask", |args| {
                let label = if args["prompt"].as_str().unwrap_or("").contains("spam") {
                    "spam"
                } else {
                    "ham"
                };
                Ok(json!({ "label": label }))
            })
            .run(json!({ "text": "buy spam now" }))
            .await
            .unwrap();
        assert_eq!(
            finished.status,
            RunStatus::Completed,
            "{:?}",
            finished.error
        );
        assert_eq!(
            finished.output("tally"),
            Some(&json!({ "n": 1, "echo": "spam" }))
        );
        assert_eq!(finished.calls[0].tool, None);
        assert_eq!(finished.calls[0].args["prompt"], "Classify buy spam now");
    }
}
