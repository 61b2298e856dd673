//! The pause points of a spec, as the export's README describes them.
//!
//! The default messages mirror the ones the runtime uses when a gate has no
//! `message:` (vendored/src/engine/workflow.rs).

use tollgate_runtime::Spec;
use tollgate_runtime::spec::{OnSpecChange, Step, StepKind};

/// One step that can pause for a person.
#[derive(Debug, Clone, PartialEq)]
pub struct Gate {
    pub step: String,
    /// Position in `steps:`, from 1.
    pub number: usize,
    /// What kind of gate, in words: `approval step`, `tool approval (issue_refund)`, ...
    pub kind: String,
    /// `before` (nothing with side effects ran yet) or `after` (the step ran).
    pub phase: &'static str,
    /// The message template as written, or the runtime's default.
    pub message: String,
    pub message_is_default: bool,
    /// Formatted (`2d`, `1h30m`).
    pub ttl: String,
    /// The TTL comes from `approvals.ttl` (or its 7d default).
    pub ttl_is_default: bool,
    /// What a `modify` decision's payload replaces, for this gate.
    pub payload: &'static str,
    /// What approving one of its pauses does after a spec change: the
    /// gate's own `on_spec_change`, else `approvals.on_spec_change`.
    pub on_spec_change: OnSpecChange,
}

pub fn gates(spec: &Spec) -> Vec<Gate> {
    spec.steps
        .iter()
        .enumerate()
        .filter_map(|(i, step)| gate(spec, i, step))
        .collect()
}

fn gate(spec: &Spec, index: usize, step: &Step) -> Option<Gate> {
    let (kind, phase, message, default_message, ttl, payload) = match &step.kind {
        StepKind::Approval(a) => (
            "approval step".to_string(),
            "before",
            a.message.clone(),
            format!("Approve step {}?", step.id),
            a.ttl,
            "the step's payload (its output's `payload`)",
        ),
        StepKind::Gate(g) => (
            format!("`if: {}` then request_human_approval", g.condition),
            "before",
            g.message.clone(),
            format!("Step {} requires human approval", step.id),
            g.ttl,
            "the step's payload",
        ),
        StepKind::Tool { tool, .. } => {
            let t = spec.tools.get(tool).filter(|t| t.approval_required)?;
            (
                format!("tool approval (`{tool}`, `approval: required`)"),
                "before",
                t.message.clone(),
                format!("Call tool {tool}?"),
                t.ttl,
                "the tool's arguments (a JSON object)",
            )
        }
        StepKind::Model(m) => {
            let g = m.guardrail.as_ref()?;
            (
                format!("guardrail (`min_confidence: {}`)", g.min_confidence),
                "after",
                g.message.clone(),
                format!(
                    "Confidence <score> is below {} for step {}",
                    g.min_confidence, step.id
                ),
                g.ttl,
                "the model's output",
            )
        }
        StepKind::Dedupe(_) | StepKind::Set { .. } => return None,
    };
    Some(Gate {
        step: step.id.clone(),
        number: index + 1,
        kind,
        phase,
        message_is_default: message.is_none(),
        message: message.unwrap_or(default_message),
        ttl: tollgate_runtime::time::format_duration(ttl.unwrap_or(spec.approvals.ttl)),
        ttl_is_default: ttl.is_none(),
        payload,
        on_spec_change: spec.on_spec_change(step),
    })
}
