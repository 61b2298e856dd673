//! The pause points of a spec, as the export's README describes them.
//!
//! The default messages mirror the ones the runtime uses when a gate has no
//! `message:` (vendored/src/engine/workflow.rs).

use tollgate_runtime::Spec;
use tollgate_runtime::policy::{GatePolicy, OnTimeout, RejectWhen};
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
    /// Who decides, in words: the gate's rules with their groups'
    /// members, or one decision from the approvers (DESIGN §13).
    pub policy: String,
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
                match &t.when {
                    Some(when) => format!("tool approval (`{tool}`, only when `{when}`)"),
                    None => format!("tool approval (`{tool}`, `approval: required`)"),
                },
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
        policy: spec
            .gate_policy(index)
            .map(|policy| describe_policy(spec, policy))
            .unwrap_or_default(),
    })
}

/// A gate's policy as the exported README states it: "2 of finance
/// (alice, bob, carol) and 1 of security (dave); one reject ends it; who
/// started the run may decide it too", or who may decide a plain gate.
fn describe_policy(spec: &Spec, policy: &GatePolicy) -> String {
    let mut parts = Vec::new();
    if policy.has_rules() {
        let rules: Vec<String> = policy
            .rules
            .iter()
            .map(|rule| {
                let members = spec
                    .approvals
                    .groups
                    .get(&rule.group)
                    .map(|m| m.join(", "))
                    .unwrap_or_default();
                format!("{} of {} ({members})", rule.min, rule.group)
            })
            .collect();
        parts.push(rules.join(" and "));
        parts.push(match policy.reject {
            RejectWhen::Any => "one reject ends it".to_string(),
            RejectWhen::WhenUnreachable => {
                "rejected once the votes left cannot meet the rules".to_string()
            }
        });
        if !policy.voter_counts_once {
            parts.push("a vote counts for every group of its voter".to_string());
        }
    } else {
        parts.push(match &spec.approvals.approvers {
            Some(names) => format!("one decision by {}", names.join(", ")),
            None => "one decision by anyone with an API token".to_string(),
        });
    }
    // Barred by default (the README says so once); only the exception is
    // worth a word per gate.
    if policy.self_approval_allowed() {
        parts.push("who started the run may decide it too".to_string());
    }
    if policy.require_reason {
        parts.push("a reject or an edit needs a reason".to_string());
    }
    parts.extend(describe_timing(policy));
    if let Some(form) = &policy.form {
        let fields: Vec<String> = form
            .fields
            .iter()
            .map(|f| {
                let required = if f.required { ", required" } else { "" };
                format!("{} ({}{required})", f.name, f.type_name())
            })
            .collect();
        parts.push(if fields.is_empty() {
            "an approval gives an empty form".to_string()
        } else {
            format!("an approval fills in {}", fields.join(", "))
        });
    }
    parts.join("; ")
}

/// What the gate does by itself: reminders, escalations, and its action
/// when its time runs out (said only when it is not `expire`).
fn describe_timing(policy: &GatePolicy) -> Vec<String> {
    let mut parts = Vec::new();
    if !policy.remind.is_empty() {
        let at: Vec<String> = policy.remind.iter().map(|p| format!("{p}%")).collect();
        parts.push(format!("reminders at {} of its time", at.join(", ")));
    }
    for escalation in &policy.escalate {
        parts.push(format!(
            "after {} {} may decide too",
            tollgate_runtime::time::format_duration(escalation.after),
            escalation.add.join(", ")
        ));
    }
    match policy.on_timeout {
        OnTimeout::Expire => {}
        OnTimeout::Approve => parts.push("approved by timeout when its time runs out".into()),
        OnTimeout::Reject => parts.push("rejected by timeout when its time runs out".into()),
        OnTimeout::Continue => {
            parts.push("the run goes on unapproved when its time runs out".into())
        }
    }
    parts
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_gate_says_who_decides() {
        let spec = Spec::parse(
            r#"version: 1
agent: team
approvals:
  groups: { finance: [alice, bob, carol], security: [dave] }
  approvers: [alice, erin]
tools:
  pay:
    http: { method: POST, url: "https://pay.example" }
    approval: { rules: [{ group: finance, min: 1 }], reject: when_unreachable }
steps:
  - id: check
    approval:
      rules: [{ group: finance, min: 2 }, { group: security, min: 1 }]
      require_reason: true
  - id: plain
    approval: { message: "Go?", allow_self_approval: true }
  - id: strict
    approval: { allow_self_approval: false, on_timeout: continue, remind: [50%], escalate: [{ after: 2h, add: [security] }] }
  - id: input
    approval:
      form: { type: object, properties: { note: { type: string }, n: { type: integer } }, required: [n] }
  - id: pay
    tool: pay
    with: {}
"#,
            "team.yaml",
        )
        .expect("spec");
        let policies: Vec<String> = gates(&spec).into_iter().map(|g| g.policy).collect();
        assert_eq!(
            policies,
            [
                "2 of finance (alice, bob, carol) and 1 of security (dave); one reject ends it; \
                 a reject or an edit needs a reason",
                "one decision by alice, erin; who started the run may decide it too",
                "one decision by alice, erin; reminders at 50% of its time; after 2h security \
                 may decide too; the run goes on unapproved when its time runs out",
                "one decision by alice, erin; an approval fills in note (string), n (integer, required)",
                "1 of finance (alice, bob, carol); rejected once the votes left cannot meet the \
                 rules",
            ]
        );
    }
}
