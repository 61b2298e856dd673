//! Step execution: what one step does, where it may pause, and how it takes
//! a stored decision when a resumed run re-enters it.
//!
//! Nothing here writes to the store except a dedupe claim; persistence of
//! pauses and ends belongs to the run driver (`run.rs`).

use std::time::Duration;

use serde_json::{Map, Value, json};

use crate::domain::expr::{self, Context, ExprError};
use crate::domain::pending_approval::{ApprovalRecord, ApprovalStatus, Phase};
use crate::domain::spec::{ApprovalStep, DedupeStep, GateStep, OnReject, Spec, Step, StepKind};
use crate::engine::tools::{CallContext, ModelRequest, ToolInvoker, idempotency_key};
use crate::store::{SharedStore, StoreError};

/// Everything a run knows so far: what templates can read.
#[derive(Debug, Clone)]
pub struct RunContext {
    pub run_id: String,
    pub agent: String,
    /// Shared with every step's expression context, not copied into it.
    pub input: crate::support::json_doc::JsonDoc,
    pub trigger: Value,
    pub outputs: Map<String, Value>,
    /// The key of the approval that most recently gated this run, if any:
    /// part of every call's idempotency key from that gate on.
    pub gate_key: Option<String>,
}

impl RunContext {
    /// The idempotency key of the call `step_id` makes (see
    /// [`crate::engine::tools::idempotency_key`]).
    pub fn idempotency_key(&self, step_id: &str) -> String {
        idempotency_key(&self.run_id, step_id, self.gate_key.as_deref())
    }

    pub fn expr_context(&self) -> Context {
        let steps: Map<String, Value> = self
            .outputs
            .iter()
            .map(|(id, output)| (id.clone(), json!({ "output": output })))
            .collect();
        Context::new()
            .with_doc("input", self.input.clone())
            .with("trigger", self.trigger.clone())
            .with("steps", Value::Object(steps))
            .with("run", json!({ "id": self.run_id, "agent": self.agent }))
    }
}

/// A request to pause at a gate.
#[derive(Debug, Clone)]
pub struct GateRequest {
    pub phase: Phase,
    pub message: Option<String>,
    /// Shown to the decider; editable with a modify decision.
    pub payload: Value,
    pub ttl: Duration,
}

/// What executing (or re-entering) a step produced.
#[derive(Debug)]
pub enum StepOutcome {
    Completed(Value),
    Paused(GateRequest),
    /// A person rejected the gate: the run ends `rejected`.
    Rejected {
        reason: Option<String>,
    },
    /// A dedupe key was already claimed: the run ends `skipped`.
    Skipped {
        dedupe_key: String,
    },
    Failed(StepFailure),
}

/// Why a step failed. Infrastructure failures (the store) are kept apart
/// because they say nothing about the run's own logic.
#[derive(Debug)]
pub enum StepFailure {
    Step(String),
    Store(StoreError),
}

impl std::fmt::Display for StepFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StepFailure::Step(message) => f.write_str(message),
            StepFailure::Store(e) => write!(f, "{e}"),
        }
    }
}

impl From<ExprError> for StepFailure {
    fn from(e: ExprError) -> Self {
        StepFailure::Step(e.message)
    }
}

/// The collaborators a step may need.
pub struct StepEnv<'a> {
    pub spec: &'a Spec,
    pub store: &'a SharedStore,
    pub tools: &'a dyn ToolInvoker,
    /// The run's clock (dedupe claims are dated with it).
    pub clock: &'a dyn crate::support::time::Clock,
}

/// Execute step `index`. `decision` is the decided record when a resumed run
/// re-enters this step at a `before` gate.
pub async fn execute_step(
    env: &StepEnv<'_>,
    step: &Step,
    ctx: &RunContext,
    decision: Option<&ApprovalRecord>,
) -> StepOutcome {
    let result = match &step.kind {
        StepKind::Set { values } => expr::evaluate_value(values, &ctx.expr_context())
            .map(StepOutcome::Completed)
            .map_err(StepFailure::from),
        StepKind::Approval(approval) => approval_step(env, step, approval, ctx, decision),
        StepKind::Gate(gate) => gate_step(env, step, gate, ctx, decision),
        StepKind::Dedupe(dedupe) => dedupe_step(env, dedupe, ctx).await,
        StepKind::Tool { tool, with } => tool_step(env, step, tool, with, ctx, decision).await,
        StepKind::Model(_) => model_step(env, step, ctx).await,
    };
    result.unwrap_or_else(|failure| match failure {
        StepFailure::Step(msg) => {
            StepOutcome::Failed(StepFailure::Step(format!("step {:?}: {msg}", step.id)))
        }
        other => StepOutcome::Failed(other),
    })
}

/// What a decided record means for a `before` gate.
enum Verdict {
    Go { payload: Value },
    Stop { reason: Option<String> },
}

fn verdict(record: &ApprovalRecord) -> Verdict {
    match record.status {
        ApprovalStatus::Approved | ApprovalStatus::Modified => Verdict::Go {
            payload: record.effective_payload().clone(),
        },
        // A claimed record is never PENDING or EXPIRED; treat anything else
        // as a stop so nothing runs on an unclear decision.
        _ => Verdict::Stop {
            reason: record.reason().map(str::to_string),
        },
    }
}

/// `{approved, decided_by, reason, payload, input}`, and `timed_out:
/// true` when the gate's own `on_timeout` decided it (`decided_by` is then
/// `timeout`). `input` is the approver's input on a gate with a `form:`
/// (null otherwise, on a reject, and on a timeout).
fn decision_output(record: &ApprovalRecord, approved: bool, payload: Value) -> Value {
    let mut output = json!({
        "approved": approved,
        "decided_by": record.decided_by,
        "reason": record.reason(),
        "payload": payload,
        "input": record.approver_input(),
    });
    if record.timed_out().is_some() {
        output["timed_out"] = Value::Bool(true);
    }
    output
}

fn gate_ttl(spec: &Spec, own: Option<Duration>) -> Duration {
    own.unwrap_or(spec.approvals.ttl)
}

/// What a pause at `step` of `spec` asks for the run at `ctx`, rendered
/// as a pause renders it (message, payload, TTL): what `approvals
/// migrate` shows and stores for a pause it moves onto `spec`. `payload`
/// is the paused record's: a step gated after it ran (a guardrail) keeps
/// its output as it was, the one thing not rendered again. A step that
/// would not pause here for this run (no gate, or an `if` condition now
/// false) is an error saying so.
pub fn render_pause(
    spec: &Spec,
    step: &Step,
    ctx: &RunContext,
    payload: &Value,
) -> Result<GateRequest, StepFailure> {
    let ectx = ctx.expr_context();
    let eval_payload = |template: Option<&Value>| match template {
        Some(p) => expr::evaluate_value(p, &ectx).map_err(StepFailure::from),
        None => Ok(Value::Null),
    };
    match &step.kind {
        StepKind::Approval(approval) => {
            let payload = eval_payload(approval.payload.as_ref())?;
            approval_request(spec, step, approval, &ectx, payload)
        }
        StepKind::Gate(gate) => {
            if !expr::is_truthy(&expr::evaluate_str(&gate.condition, &ectx)?) {
                return Err(StepFailure::Step(format!(
                    "its condition {:?} is false for this run: step {} would not pause it",
                    gate.condition, step.id
                )));
            }
            let payload = eval_payload(gate.payload.as_ref())?;
            if_request(spec, step, gate, &ectx, payload)
        }
        StepKind::Tool { tool, with } => match spec.tools.get(tool) {
            Some(t) if t.approval_required => {
                let args = expr::evaluate_value(with, &ectx)?;
                tool_request(spec, t, &ectx, args)
            }
            _ => Err(not_a_gate(step)),
        },
        StepKind::Model(model) => match &model.guardrail {
            Some(guardrail) => {
                let gctx = ectx.with("output", payload.clone());
                guardrail_request(spec, step, guardrail, &gctx, payload.clone(), None)
            }
            None => Err(not_a_gate(step)),
        },
        StepKind::Dedupe(_) | StepKind::Set { .. } => Err(not_a_gate(step)),
    }
}

fn not_a_gate(step: &Step) -> StepFailure {
    StepFailure::Step(format!("step {} does not pause for approval", step.id))
}

fn approval_request(
    spec: &Spec,
    step: &Step,
    approval: &ApprovalStep,
    ectx: &Context,
    payload: Value,
) -> Result<GateRequest, StepFailure> {
    check_gate_payload(&payload, approval.payload.as_ref())?;
    let message = eval_message(approval.message.as_deref(), ectx)?
        .or_else(|| Some(format!("Approve step {}?", step.id)));
    Ok(GateRequest {
        phase: Phase::Before,
        message,
        payload,
        ttl: gate_ttl(spec, approval.ttl),
    })
}

fn if_request(
    spec: &Spec,
    step: &Step,
    gate: &GateStep,
    ectx: &Context,
    payload: Value,
) -> Result<GateRequest, StepFailure> {
    check_gate_payload(&payload, gate.payload.as_ref())?;
    let message = eval_message(gate.message.as_deref(), ectx)?
        .or_else(|| Some(format!("Step {} requires human approval", step.id)));
    Ok(GateRequest {
        phase: Phase::Before,
        message,
        payload,
        ttl: gate_ttl(spec, gate.ttl),
    })
}

fn tool_request(
    spec: &Spec,
    tool: &crate::domain::spec::ToolSpec,
    ectx: &Context,
    args: Value,
) -> Result<GateRequest, StepFailure> {
    let message = eval_message(
        tool.message.as_deref(),
        &ectx.clone().with("args", args.clone()),
    )?
    .or_else(|| Some(format!("Call tool {}?", tool.name)));
    Ok(GateRequest {
        phase: Phase::Before,
        message,
        payload: args,
        ttl: gate_ttl(spec, tool.ttl),
    })
}

/// `score` is the confidence that fell short, for the default message;
/// unknown when the pause is rendered again (a migrate).
fn guardrail_request(
    spec: &Spec,
    step: &Step,
    guardrail: &crate::domain::spec::Guardrail,
    gctx: &Context,
    output: Value,
    score: Option<f64>,
) -> Result<GateRequest, StepFailure> {
    let message = eval_message(guardrail.message.as_deref(), gctx)?.or_else(|| {
        Some(match score {
            Some(score) => format!(
                "Confidence {score} is below {} for step {}",
                guardrail.min_confidence, step.id
            ),
            None => format!(
                "Confidence is below {} for step {}",
                guardrail.min_confidence, step.id
            ),
        })
    });
    Ok(GateRequest {
        phase: Phase::After,
        message,
        payload: output,
        ttl: gate_ttl(spec, guardrail.ttl),
    })
}

fn eval_message(template: Option<&str>, ctx: &Context) -> Result<Option<String>, StepFailure> {
    template
        .map(|t| expr::evaluate_to_string(t, ctx))
        .transpose()
        .map_err(StepFailure::from)
}

fn approval_step(
    env: &StepEnv<'_>,
    step: &Step,
    approval: &ApprovalStep,
    ctx: &RunContext,
    decision: Option<&ApprovalRecord>,
) -> Result<StepOutcome, StepFailure> {
    let ectx = ctx.expr_context();
    // Inputs are evaluated on every entry, also on re-entry after a decision.
    let payload = match &approval.payload {
        Some(p) => expr::evaluate_value(p, &ectx)?,
        None => Value::Null,
    };
    let Some(record) = decision else {
        return approval_request(env.spec, step, approval, &ectx, payload).map(StepOutcome::Paused);
    };
    Ok(match verdict(record) {
        Verdict::Go { payload } => StepOutcome::Completed(decision_output(record, true, payload)),
        // `on_timeout: continue` goes on as `on_reject: continue` does, but
        // for a timeout only: a person's reject still ends the run.
        Verdict::Stop { reason } => {
            let continues = approval.on_reject == OnReject::Continue
                || record.timed_out() == Some(crate::domain::policy::OnTimeout::Continue);
            if continues {
                StepOutcome::Completed(decision_output(record, false, record.payload.clone()))
            } else {
                StepOutcome::Rejected { reason }
            }
        }
    })
}

/// The spec allows a `payload:` that is one whole expression (validation
/// refuses every other shape that is not a mapping); what it gave must be a
/// mapping too, or nothing (null, as without `payload:`). Checked when the
/// run pauses, so a decided gate's re-entry takes the stored payload.
fn check_gate_payload(payload: &Value, template: Option<&Value>) -> Result<(), StepFailure> {
    if payload.is_object() || payload.is_null() {
        return Ok(());
    }
    let written = match template {
        Some(Value::String(text)) => format!(" {text:?}"),
        _ => String::new(),
    };
    Err(StepFailure::Step(format!(
        "the payload{written} gave {}, not a mapping of fields: a gate's payload is an object the person approves or edits",
        crate::support::json_kind::json_kind(payload)
    )))
}

fn gate_step(
    env: &StepEnv<'_>,
    step: &Step,
    gate: &GateStep,
    ctx: &RunContext,
    decision: Option<&ApprovalRecord>,
) -> Result<StepOutcome, StepFailure> {
    let ectx = ctx.expr_context();
    let required = expr::is_truthy(&expr::evaluate_str(&gate.condition, &ectx)?);
    if !required && decision.is_none() {
        return Ok(StepOutcome::Completed(json!({ "required": false })));
    }
    let payload = match &gate.payload {
        Some(p) => expr::evaluate_value(p, &ectx)?,
        None => Value::Null,
    };
    let Some(record) = decision else {
        return if_request(env.spec, step, gate, &ectx, payload).map(StepOutcome::Paused);
    };
    Ok(match verdict(record) {
        Verdict::Go { payload } => {
            let mut output = decision_output(record, true, payload);
            output["required"] = Value::Bool(true);
            StepOutcome::Completed(output)
        }
        Verdict::Stop { reason } => StepOutcome::Rejected { reason },
    })
}

async fn dedupe_step(
    env: &StepEnv<'_>,
    dedupe: &DedupeStep,
    ctx: &RunContext,
) -> Result<StepOutcome, StepFailure> {
    let key = expr::evaluate_to_string(&dedupe.key, &ctx.expr_context())?;
    if key.is_empty() {
        return Err(StepFailure::Step(
            "dedupe key evaluated to an empty string".into(),
        ));
    }
    let now = env.clock.now();
    let until = crate::support::time::add(now, dedupe.ttl);
    let claimed = env
        .store
        .claim_key(
            &dedupe_claim_key(&env.spec.agent, &key),
            &ctx.run_id,
            now,
            until,
        )
        .await
        .map_err(StepFailure::Store)?;
    Ok(if claimed {
        StepOutcome::Completed(
            json!({ "key": key, "expires_at": crate::support::time::format_utc(until) }),
        )
    } else {
        StepOutcome::Skipped { dedupe_key: key }
    })
}

/// Dedupe keys are scoped by agent so two agents sharing a store do not
/// suppress each other's runs.
pub fn dedupe_claim_key(agent: &str, key: &str) -> String {
    format!("dedupe:{agent}:{key}")
}

/// A gated tool's `when:` (DESIGN §13) for this call, when its gate does
/// not fire: the predicate as written and what it evaluated to over the
/// call's arguments. `None`: the gate fires (it has no `when:`, or the
/// predicate holds), or the step is no gated tool. An argument or a
/// predicate that cannot be evaluated fires the gate: the step then fails
/// on it, never calls unasked.
pub fn skipped_gate(spec: &Spec, step: &Step, ctx: &RunContext) -> Option<(String, Value)> {
    let StepKind::Tool { tool, with } = &step.kind else {
        return None;
    };
    let tool = spec.tools.get(tool).filter(|t| t.approval_required)?;
    let when = tool.when.as_ref()?;
    let ectx = ctx.expr_context();
    let args = expr::evaluate_value(with, &ectx).ok()?;
    let value = expr::evaluate_str(when, &ectx.with("args", args)).ok()?;
    (!expr::is_truthy(&value)).then(|| (when.clone(), value))
}

async fn tool_step(
    env: &StepEnv<'_>,
    step: &Step,
    tool_name: &str,
    with: &Value,
    ctx: &RunContext,
    decision: Option<&ApprovalRecord>,
) -> Result<StepOutcome, StepFailure> {
    let Some(tool) = env.spec.tools.get(tool_name) else {
        return Err(StepFailure::Step(format!("unknown tool {tool_name:?}")));
    };
    let ectx = ctx.expr_context();
    // Re-evaluated on every entry: a resumed gate calls with fresh inputs.
    let args = expr::evaluate_value(with, &ectx)?;
    // The driver set `ctx.gate_key` to this step's own decision, if any.
    let mut call = CallContext {
        run_id: ctx.run_id.clone(),
        step_id: step.id.clone(),
        idempotency_key: Some(ctx.idempotency_key(&step.id)),
        scope: Context::new(),
    };
    let args = if tool.approval_required {
        match decision {
            // `when:` does not hold for these arguments: no gate, the call
            // goes out as an ungated one (the driver journaled its start).
            None if skipped_gate(env.spec, step, ctx).is_some() => args,
            None => {
                return tool_request(env.spec, tool, &ectx, args).map(StepOutcome::Paused);
            }
            Some(record) => match verdict(record) {
                Verdict::Stop { reason } => return Ok(StepOutcome::Rejected { reason }),
                Verdict::Go { .. } => match record.modified_payload() {
                    Some(edited) => edited.clone(),
                    None => args,
                },
            },
        }
    } else {
        args
    };
    call.scope = ectx.with("args", args.clone());
    env.tools
        .call_tool(tool, &args, &call)
        .await
        .map(StepOutcome::Completed)
        .map_err(|e| StepFailure::Step(e.message))
}

async fn model_step(
    env: &StepEnv<'_>,
    step: &Step,
    ctx: &RunContext,
) -> Result<StepOutcome, StepFailure> {
    let StepKind::Model(model) = &step.kind else {
        return Err(StepFailure::Step("not a model step".into()));
    };
    let ectx = ctx.expr_context();
    let prompt = expr::evaluate_to_string(&model.prompt, &ectx)?;
    let system = model
        .system
        .as_deref()
        .map(|s| expr::evaluate_to_string(s, &ectx))
        .transpose()?;
    // Model calls are POSTs and carry the key too (see `tools::model`).
    let call = CallContext {
        run_id: ctx.run_id.clone(),
        step_id: step.id.clone(),
        idempotency_key: Some(ctx.idempotency_key(&step.id)),
        scope: ectx.clone(),
    };
    let request = ModelRequest {
        step: model,
        defaults: env.spec.model.as_ref(),
        system,
        prompt,
    };
    let output = env
        .tools
        .call_model(request, &call)
        .await
        .map_err(|e| StepFailure::Step(e.message))?;
    let Some(guardrail) = &model.guardrail else {
        return Ok(StepOutcome::Completed(output));
    };
    let gctx = ectx.with("output", output.clone());
    let confidence = expr::evaluate_str(&guardrail.confidence, &gctx)?;
    let Some(score) = confidence_score(&confidence) else {
        return Err(StepFailure::Step(format!(
            "guardrail confidence {} is not a number",
            confidence
        )));
    };
    if score >= guardrail.min_confidence {
        return Ok(StepOutcome::Completed(output));
    }
    guardrail_request(env.spec, step, guardrail, &gctx, output, Some(score))
        .map(StepOutcome::Paused)
}

fn confidence_score(v: &Value) -> Option<f64> {
    match v {
        Value::Number(n) => n.as_f64(),
        Value::String(s) => s.trim().parse().ok(),
        _ => None,
    }
}

/// The output of a step gated `after`, once decided: the stored output, or
/// the replacement for a modify. `None` means the run was rejected.
pub fn after_gate_output(record: &ApprovalRecord) -> Result<Value, Option<String>> {
    match verdict(record) {
        Verdict::Go { payload } => Ok(payload),
        Verdict::Stop { reason } => Err(reason),
    }
}
