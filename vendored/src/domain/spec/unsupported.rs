//! Policy settings the spec language reads but this version of tollgate
//! does not enforce yet, refused at parse (so at `validate`, `serve`,
//! `run` and `export`) with the position they are written at.
//!
//! Fail closed: a spec that asks for a reminder, an escalation or
//! a timeout other than `expire` would otherwise run as if it had not, a
//! gate quietly weaker than written. Each setting is one entry
//! of [`not_enforced`]; the version that enforces one removes its entry.

use super::marked::{Pos, Seg, Tree};
use super::{Spec, SpecError, SpecErrorKind, StepKind};
use crate::policy::{GatePolicy, OnTimeout};

/// The settings of one gate that this version would not honour, each with
/// the key it is written under and why the spec is refused.
fn not_enforced(policy: &GatePolicy) -> Vec<(&'static str, String)> {
    let timeout = policy.on_timeout;
    [
        ("on_timeout", (timeout != OnTimeout::Expire).then(|| format!("on_timeout: {timeout} is not supported by this version of tollgate yet; the gate would expire instead, so the spec is refused"))),
        ("remind", (!policy.remind.is_empty()).then(|| not_yet("remind", "no reminder would be sent"))),
        ("escalate", (!policy.escalate.is_empty()).then(|| not_yet("escalate", "no group would ever be added"))),
    ]
    .into_iter()
    .filter_map(|(key, refusal)| Some((key, refusal?)))
    .collect()
}

fn not_yet(key: &str, instead: &str) -> String {
    format!(
        "{key} is not supported by this version of tollgate yet; {instead}, so the spec is refused"
    )
}

/// The first setting (in file order) of any gate that [`not_enforced`]
/// lists, as an error at its key.
pub fn refuse(spec: &Spec, tree: &Tree, origin: &str) -> Result<(), SpecError> {
    let mut refusals: Vec<(Pos, String)> = Vec::new();
    let mut check = |path: &[Seg<'_>], policy: &GatePolicy| {
        for (key, message) in not_enforced(policy) {
            let pos = tree
                .key_pos(path, key)
                .unwrap_or(Pos { line: 1, column: 1 });
            refusals.push((pos, message));
        }
    };
    for (name, tool) in &spec.tools {
        if tool.approval_required {
            let path = [Seg::Key("tools"), Seg::Key(name), Seg::Key("approval")];
            check(&path, &tool.policy);
        }
    }
    for (i, step) in spec.steps.iter().enumerate() {
        let (Some(policy), Some(within)) = (spec.policy_of(step), gate_key(&step.kind)) else {
            continue;
        };
        let mut path = vec![Seg::Key("steps"), Seg::Index(i)];
        path.extend(within.map(Seg::Key));
        check(&path, policy);
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
    fn each_setting_not_enforced_yet_is_refused_at_its_key() {
        for (line, error) in [
            (
                "on_timeout: approve",
                "t.yaml:8:7: on_timeout: approve is not supported by this version of tollgate yet; the gate would expire instead, so the spec is refused",
            ),
            (
                "on_timeout: reject",
                "t.yaml:8:7: on_timeout: reject is not supported by this version of tollgate yet; the gate would expire instead, so the spec is refused",
            ),
            (
                "on_timeout: continue",
                "t.yaml:8:7: on_timeout: continue is not supported by this version of tollgate yet; the gate would expire instead, so the spec is refused",
            ),
            (
                "remind: [50%]",
                "t.yaml:8:7: remind is not supported by this version of tollgate yet; no reminder would be sent, so the spec is refused",
            ),
            (
                "escalate: [{ after: 4h, add: [security] }]",
                "t.yaml:8:7: escalate is not supported by this version of tollgate yet; no group would ever be added, so the spec is refused",
            ),
        ] {
            assert_eq!(refused(&spec_with(line)), error, "{line}");
        }
    }

    #[test]
    fn what_is_enforced_is_accepted() {
        for line in [
            "on_timeout: expire",
            "rules: [{ group: finance, min: 2 }, { group: security, min: 1 }]",
            "reject: when_unreachable",
            "allow_self_approval: true",
            "voter_counts_once: false",
            "require_reason: true",
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
    approval: { when: "{{ args.amount > 100 }}", remind: [50%] }
steps:
  - id: a
    tool: pay
  - id: b
    if: "{{ input.big }}"
    then: request_human_approval
    remind: [90%]
  - id: c
    model: { prompt: hi, output: json }
    guardrail: { min_confidence: 0.5, on_timeout: continue }
"#;
        assert_eq!(
            refused(source),
            "t.yaml:9:50: remind is not supported by this version of tollgate yet; no reminder would be sent, so the spec is refused"
        );
        let without_tool = source.replace(
            "    approval: { when: \"{{ args.amount > 100 }}\", remind: [50%] }\n",
            "    approval: required\n",
        );
        assert_eq!(
            refused(&without_tool),
            "t.yaml:16:5: remind is not supported by this version of tollgate yet; no reminder would be sent, so the spec is refused"
        );
        let only_guardrail = without_tool.replace("    remind: [90%]\n", "");
        assert_eq!(
            refused(&only_guardrail),
            "t.yaml:18:39: on_timeout: continue is not supported by this version of tollgate yet; the gate would expire instead, so the spec is refused"
        );
    }
}
