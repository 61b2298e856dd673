//! Policy settings the spec language reads that a gate could not honour,
//! refused at parse (so at `validate`, `serve`, `run` and `export`) with
//! the position they are written at: settings that make no sense on the
//! kind of gate they are written on, and any setting a version reads
//! before it enforces it.
//!
//! Fail closed: such a gate would otherwise run as if the setting were
//! not there, quietly other than written. Each setting is one entry of
//! [`not_honoured`]; a version that reads a setting before enforcing it
//! adds an entry, and the version that enforces it removes the entry.

use super::marked::{Pos, Seg, Tree};
use super::{Spec, SpecError, SpecErrorKind, StepKind};
use crate::domain::policy::{GatePolicy, OnTimeout};

/// The settings of one gate that it would not honour, each with the key it
/// is written under and why the spec is refused. `step_gate` says whether
/// the gate is an `approval` step's, the one kind whose step can go on
/// without an approval.
fn not_honoured(policy: &GatePolicy, step_gate: bool) -> Vec<(&'static str, String)> {
    let goes_on = policy.on_timeout == OnTimeout::Continue;
    [
        ("on_timeout", (goes_on && !step_gate).then(|| "on_timeout: continue is only for an approval step (its step then goes on as with on_reject: continue); a tool's, an if's or a guardrail's gate cannot go on without a decision: use expire, reject or approve".to_string())),
    ]
    .into_iter()
    .filter_map(|(key, refusal)| Some((key, refusal?)))
    .collect()
}

/// The first setting (in file order) of any gate that [`not_honoured`]
/// lists, as an error at its key.
pub fn refuse(spec: &Spec, tree: &Tree, origin: &str) -> Result<(), SpecError> {
    let mut refusals: Vec<(Pos, String)> = Vec::new();
    let mut check = |path: &[Seg<'_>], policy: &GatePolicy, step_gate: bool| {
        for (key, message) in not_honoured(policy, step_gate) {
            let pos = tree
                .key_pos(path, key)
                .unwrap_or(Pos { line: 1, column: 1 });
            refusals.push((pos, message));
        }
    };
    for (name, tool) in &spec.tools {
        if tool.approval_required {
            let path = [Seg::Key("tools"), Seg::Key(name), Seg::Key("approval")];
            check(&path, &tool.policy, false);
        }
    }
    for (i, step) in spec.steps.iter().enumerate() {
        let (Some(policy), Some(within)) = (spec.policy_of(step), gate_key(&step.kind)) else {
            continue;
        };
        let mut path = vec![Seg::Key("steps"), Seg::Index(i)];
        path.extend(within.map(Seg::Key));
        check(&path, policy, matches!(step.kind, StepKind::Approval(_)));
    }
    match refusals
        .into_iter()
        .min_by_key(|(pos, _)| (pos.line, pos.column))
    {
        Some((pos, message)) => Err(SpecError::at(
            SpecErrorKind::Invalid,
            origin,
            pos.line,
            pos.column,
            message,
        )),
        None => Ok(()),
    }
}

/// Where a step's own gate keeps its policy keys: under `approval:`, under
/// `guardrail:`, or on the `if` step itself. None for a tool step (its
/// tool's gate is checked once, under the tool) and for steps without one.
fn gate_key(kind: &StepKind) -> Option<Option<&'static str>> {
    match kind {
        StepKind::Approval(_) => Some(Some("approval")),
        StepKind::Model(_) => Some(Some("guardrail")),
        StepKind::Gate(_) => Some(None),
        StepKind::Tool { .. } | StepKind::Dedupe(_) | StepKind::Set { .. } => None,
    }
}

#[cfg(test)]
mod tests {
    use super::super::Spec;

    /// A spec whose approval step `check` carries `line` (at line 8,
    /// column 7), or whose tool `pay` does when `tool` is set.
    fn spec_with(line: &str) -> String {
        format!(
            "version: 1\nagent: desk\napprovals:\n  groups: {{ finance: [alice, bob], security: [dave] }}\nsteps:\n  - id: check\n    approval:\n      {line}\n"
        )
    }

    #[track_caller]
    fn refused(source: &str) -> String {
        match Spec::parse(source, "t.yaml") {
            Ok(_) => panic!("parsed:\n{source}"),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn what_is_enforced_is_accepted() {
        for line in [
            "on_timeout: expire",
            "on_timeout: reject",
            "on_timeout: approve",
            "on_timeout: continue",
            "remind: [50%, 90%]",
            "escalate: [{ after: 4h, add: [security] }]",
            "rules: [{ group: finance, min: 2 }, { group: security, min: 1 }]",
            "reject: when_unreachable",
            "allow_self_approval: true",
            "voter_counts_once: false",
            "require_reason: true",
            "form: { type: object }",
        ] {
            Spec::parse(&spec_with(line), "t.yaml").unwrap_or_else(|e| panic!("{line}: {e}"));
        }
    }

    #[test]
    fn every_gate_is_checked_and_the_first_in_the_file_is_named() {
        let source = r#"version: 1
agent: desk
approvals:
  groups: { finance: [alice] }
model: { name: small }
tools:
  pay:
    http: { url: "https://x.example" }
    approval: { when: "{{ args.amount > 100 }}", on_timeout: continue }
steps:
  - id: a
    tool: pay
  - id: b
    if: "{{ input.big }}"
    then: request_human_approval
    on_timeout: continue
  - id: c
    model: { prompt: hi, output: json }
    guardrail: { min_confidence: 0.5, on_timeout: continue }
  - id: d
    approval: { on_timeout: continue }
"#;
        let only_approval_steps = "on_timeout: continue is only for an approval step (its step then goes on as with on_reject: continue); a tool's, an if's or a guardrail's gate cannot go on without a decision: use expire, reject or approve";
        assert_eq!(
            refused(source),
            format!("t.yaml:9:50: {only_approval_steps}")
        );
        let without_tool = source.replace(
            "    approval: { when: \"{{ args.amount > 100 }}\", on_timeout: continue }\n",
            "    approval: required\n",
        );
        assert_eq!(
            refused(&without_tool),
            format!("t.yaml:16:5: {only_approval_steps}")
        );
        let only_guardrail = without_tool.replace("    on_timeout: continue\n", "");
        assert_eq!(
            refused(&only_guardrail),
            format!("t.yaml:18:39: {only_approval_steps}")
        );
        let approval_step_only = only_guardrail.replace(", on_timeout: continue }", " }");
        Spec::parse(&approval_step_only, "t.yaml").expect("an approval step may continue");
    }
}
