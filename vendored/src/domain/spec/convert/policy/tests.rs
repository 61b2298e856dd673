//! The team approval policy in the spec language: what each key reads as,
//! and the exact error (line:col) of each mistake.

use std::time::Duration;

use serde_json::json;

use super::super::super::{Spec, StepKind};
use crate::domain::policy::{Escalation, GatePolicy, OnTimeout, RejectWhen, RuleSpec};

/// DESIGN §13, with what this version refuses (`remind`, `escalate`,
/// `form`, `when`) left out and the tool's `http: { ... }` written out.
const DESIGN_EXAMPLE: &str = r#"version: 1
agent: refunds
approvals:
  groups: { finance: [alice, bob, carol], security: [dave] }   # members by token name
steps:
  - id: check
    approval:
      message: "Refund {{ input.amount }}?"
      rules: [{ group: finance, min: 2 }, { group: security, min: 1 }]  # all required
      reject: any                # or when_unreachable
      allow_self_approval: false # default
      on_timeout: expire         # reject | expire | approve | continue
  - id: refund
    tool: pay
    with: { amount: "{{ input.amount }}" }
tools:
  pay:
    http: { method: POST, url: "https://pay.example/refunds", json: { amount: "{{ args.amount }}" } }
    approval: { rules: [{ group: finance, min: 1 }] }
"#;

fn parse(source: &str) -> Spec {
    Spec::parse(source, "t.yaml").unwrap_or_else(|e| panic!("{e}\n{source}"))
}

/// The error `source` gets, as `line:col: message`.
#[track_caller]
fn refused(source: &str) -> String {
    match Spec::parse(source, "t.yaml") {
        Ok(_) => panic!("expected an error, the spec parsed:\n{source}"),
        Err(e) => e.to_string().trim_start_matches("t.yaml:").to_string(),
    }
}

/// Each source with the error it must get; every mismatch is listed.
#[track_caller]
fn expect_errors(cases: impl IntoIterator<Item = (String, &'static str)>) {
    let wrong: Vec<String> = cases
        .into_iter()
        .map(|(source, error)| (refused(&source), error, source))
        .filter(|(got, error, _)| got != error)
        .map(|(got, error, source)| format!("{source}\n  got:  {got}\n  want: {error}"))
        .collect();
    assert!(wrong.is_empty(), "{}", wrong.join("\n\n"));
}

/// A spec with `groups` and one approval step whose mapping is `approval`
/// (each line indented under `approval:`).
fn with_approval(groups: &str, approval: &str) -> String {
    let approval: String = approval.lines().map(|l| format!("      {l}\n")).collect();
    format!(
        "version: 1\nagent: desk\napprovals:\n  groups: {groups}\nsteps:\n  - id: check\n    approval:\n{approval}"
    )
}

const GROUPS: &str = "{ finance: [alice, bob, carol], security: [dave] }";

#[test]
fn the_design_example_reads_as_typed_values() {
    let spec = parse(DESIGN_EXAMPLE);
    assert_eq!(
        spec.approvals.groups,
        [
            (
                "finance".to_string(),
                vec!["alice".into(), "bob".into(), "carol".into()]
            ),
            ("security".to_string(), vec!["dave".to_string()]),
        ]
        .into_iter()
        .collect()
    );
    let StepKind::Approval(check) = &spec.steps[0].kind else {
        panic!("approval")
    };
    assert_eq!(
        check.policy,
        GatePolicy {
            rules: vec![
                RuleSpec {
                    group: "finance".into(),
                    min: 2
                },
                RuleSpec {
                    group: "security".into(),
                    min: 1
                },
            ],
            reject: RejectWhen::Any,
            allow_self_approval: Some(false),
            voter_counts_once: true,
            require_reason: false,
            on_timeout: OnTimeout::Expire,
            remind: vec![],
            escalate: vec![],
            form: None,
            notify: Default::default(),
        }
    );
    assert_eq!(check.message.as_deref(), Some("Refund {{ input.amount }}?"));
    let pay = &spec.tools["pay"];
    assert!(pay.approval_required);
    assert_eq!(pay.when, None);
    assert_eq!(
        pay.policy.rules,
        [RuleSpec {
            group: "finance".into(),
            min: 1
        }]
    );
    assert_eq!(spec.gate_policy(0), Some(&check.policy));
    assert_eq!(spec.gate_policy(1), Some(&pay.policy));
    assert_eq!(spec.gate_policy(2), None);
}

#[test]
fn every_gate_takes_the_policy_keys_and_defaults_to_plain() {
    let spec = parse(&format!(
        r#"version: 1
agent: desk
approvals:
  groups: {GROUPS}
model: {{ name: small }}
tools:
  plain:
    http: {{ url: "https://x.example" }}
    approval: required
  open:
    http: {{ url: "https://x.example" }}
steps:
  - id: a
    tool: plain
  - id: b
    tool: open
  - id: c
    if: "{{{{ input.big }}}}"
    then: request_human_approval
    rules: [{{ group: security, min: 1 }}]
    reject: when_unreachable
    require_reason: true
  - id: d
    model: {{ prompt: hi, output: json }}
    guardrail: {{ min_confidence: 0.5, rules: [{{ group: finance, min: 3 }}], voter_counts_once: false, allow_self_approval: true }}
  - id: e
    approval:
  - id: f
    set: {{ x: 1 }}
"#
    ));
    assert_eq!(spec.gate_policy(0), Some(&GatePolicy::plain()));
    assert_eq!(spec.gate_policy(1), None);
    let c = spec.gate_policy(2).unwrap();
    assert_eq!(
        c.rules,
        [RuleSpec {
            group: "security".into(),
            min: 1
        }]
    );
    assert_eq!(c.reject, RejectWhen::WhenUnreachable);
    assert!(c.require_reason);
    assert!(c.voter_counts_once);
    assert_eq!(c.allow_self_approval, None);
    let d = spec.gate_policy(3).unwrap();
    assert_eq!(
        d.rules,
        [RuleSpec {
            group: "finance".into(),
            min: 3
        }]
    );
    assert!(!d.voter_counts_once);
    assert_eq!(d.allow_self_approval, Some(true));
    assert_eq!(spec.gate_policy(4), Some(&GatePolicy::plain()));
    assert_eq!(spec.gate_policy(5), None);
    assert_eq!(spec.gate_policy(6), None);
}

#[test]
fn settings_not_enforced_yet_are_read_in_full() {
    // Read through the converter alone: Spec::parse refuses them
    // (unsupported.rs), and its tests say how.
    let source = format!(
        r#"version: 1
agent: desk
approvals:
  groups: {GROUPS}
tools:
  pay:
    http: {{ url: "https://x.example" }}
    approval:
      when: "{{{{ args.amount > 100 }}}}"
      ttl: 1d
      on_timeout: approve
      remind: [50%, 90%]
      escalate: [{{ after: 4h, add: [security] }}, {{ after: 20h, add: [finance, security] }}]
steps:
  - id: a
    tool: pay
"#
    );
    let spec = converted(&source);
    let pay = &spec.tools["pay"];
    assert_eq!(pay.when.as_deref(), Some("{{ args.amount > 100 }}"));
    assert_eq!(pay.ttl, Some(Duration::from_secs(86_400)));
    assert_eq!(pay.policy.on_timeout, OnTimeout::Approve);
    assert_eq!(pay.policy.remind, [50, 90]);
    assert_eq!(
        pay.policy.escalate,
        [
            Escalation {
                after: Duration::from_secs(4 * 3600),
                add: vec!["security".into()]
            },
            Escalation {
                after: Duration::from_secs(20 * 3600),
                add: vec!["finance".into(), "security".into()]
            },
        ]
    );
}

#[test]
fn a_form_reads_on_an_approval_and_an_if_step() {
    let source = r#"version: 1
agent: desk
steps:
  - id: check
    approval:
      form: { type: object, properties: { note: { type: string } }, required: [note] }
  - id: big
    if: "{{ input.big }}"
    then: request_human_approval
    form: { type: object, properties: { ok: { type: boolean, default: false } } }
"#;
    let spec = parse(source);
    let check = spec.gate_policy(0).unwrap().form.as_ref().unwrap();
    assert_eq!(
        check.schema,
        json!({"type": "object", "properties": {"note": {"type": "string"}}, "required": ["note"]})
    );
    assert!(check.field("note").unwrap().required);
    let big = spec.gate_policy(1).unwrap().form.as_ref().unwrap();
    assert_eq!(big.field("ok").unwrap().default, Some(json!(false)));
}

#[test]
fn a_form_outside_the_subset_or_where_input_has_nowhere_to_go_is_refused_at_its_key() {
    let tool = "version: 1\nagent: desk\ntools:\n  pay:\n    http: { url: \"https://x.example\" }\n    approval: { form: { type: object } }\nsteps:\n  - id: a\n    tool: pay\n".to_string();
    let guardrail = "version: 1\nagent: desk\nmodel: { name: small }\nsteps:\n  - id: m\n    model: { prompt: hi, output: json }\n    guardrail: { min_confidence: 0.5, form: { type: object } }\n".to_string();
    expect_errors([
        (
            tool,
            "6:17: \"form\" in the approval of tool \"pay\" is not supported on this gate: a tool's output is what the tool returns, so the approver's input would have nowhere to go; ask for input on an approval step (or an if step's request_human_approval), whose output carries it as input",
        ),
        (
            guardrail,
            "7:39: \"form\" in the guardrail of step \"m\" is not supported on this gate: a model step's output is what the model returned, so the approver's input would have nowhere to go; ask for input on an approval step (or an if step's request_human_approval), whose output carries it as input",
        ),
        (
            with_approval(
                GROUPS,
                "form: { type: object, properties: { note: { type: string, pattern: \"^x\" } } }",
            ),
            "8:65: properties.note.pattern in \"form\" in the approval of step \"check\": \"pattern\" is not supported in a form's field; a field takes type, title, description, default, enum, minLength, maxLength, minimum, maximum, exclusiveMinimum, exclusiveMaximum",
        ),
        (
            with_approval(
                GROUPS,
                "form:\n  type: object\n  properties:\n    n: { type: integer, minimum: 5, default: 1 }",
            ),
            "11:43: properties.n.default in \"form\" in the approval of step \"check\": default 1 does not fit field \"n\": it must be at least 5",
        ),
    ]);
}

/// The typed spec before `validate` and `unsupported` run.
fn converted(source: &str) -> Spec {
    let mut tree = super::super::super::marked::parse(source, "t.yaml").unwrap();
    let document = std::mem::take(&mut tree.document);
    super::super::to_spec(&tree, document, source.into(), "t.yaml")
        .unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn groups_are_named_like_tools_and_never_empty_nor_doubled() {
    let spec = |groups: &str| {
        format!(
            "version: 1\nagent: desk\napprovals:\n  groups: {groups}\nsteps:\n  - id: a\n    approval:\n"
        )
    };
    let cases = [
        (
            "{ Finance: [alice] }",
            "4:13: invalid group name \"Finance\" in \"groups\" in approvals: use lowercase letters, digits and '_', starting with a letter or '_', at most 63 characters",
        ),
        (
            "{ finance: [] }",
            "4:22: group \"finance\" in approvals.groups is empty: a rule over it could never be met",
        ),
        (
            "{ finance: alice }",
            "4:22: expected a sequence of members for group \"finance\" in approvals.groups, found a string",
        ),
        (
            "{ finance: [alice, bob, alice] }",
            "4:35: \"alice\" is listed twice in group \"finance\" in approvals.groups",
        ),
        (
            "{ finance: [alice, \" \"] }",
            "4:30: member 2 of group \"finance\" in approvals.groups is empty",
        ),
        (
            "{ finance: [\"alice, bob\"] }",
            "4:23: member 1 of group \"finance\" in approvals.groups is \"alice, bob\": a member is an API-token name, without commas or spaces",
        ),
        (
            "[alice]",
            "4:11: expected a mapping of group names to members for \"groups\" in approvals, found a sequence",
        ),
    ]
    .map(|(groups, error)| (spec(groups), error));
    expect_errors(cases);
}

#[test]
fn rules_name_known_groups_with_a_min_they_can_meet() {
    let cases = [
        (
            "rules: [{ group: legal, min: 1 }]",
            "8:24: \"group\" in rule 1 in the approval of step \"check\": unknown group \"legal\" (approvals.groups defines: finance, security)",
        ),
        (
            "rules: [{ group: finance, min: 4 }]",
            "8:38: \"min\" in rule 1 in the approval of step \"check\" is 4 but group \"finance\" has 3 member(s): the rule could never be met",
        ),
        (
            "rules: [{ group: finance, min: 0 }]",
            "8:38: \"min\" in rule 1 in the approval of step \"check\" must be at least 1, found 0",
        ),
        (
            "rules: [{ group: finance, min: two }]",
            "8:38: expected an integer for \"min\" in rule 1 in the approval of step \"check\", found a string",
        ),
        (
            "rules: [{ group: finance, min: 1 }, { group: finance, min: 2 }]",
            "8:52: group \"finance\" has two rules in the approval of step \"check\": write one rule with the larger min",
        ),
        (
            "rules: [{ group: finance }]",
            "8:15: missing required key \"min\" in rule 1 in the approval of step \"check\"",
        ),
        (
            "rules: [{ group: finance, min: 1, max: 2 }]",
            "8:41: unknown key \"max\" in rule 1 in the approval of step \"check\" (allowed: group, min)",
        ),
        (
            "rules: []",
            "8:14: \"rules\" in the approval of step \"check\" is empty: omit it for a gate that any approver decides alone",
        ),
        (
            "rules: { group: finance }",
            "8:14: expected a sequence of {group, min} for \"rules\" in the approval of step \"check\", found a mapping",
        ),
    ]
    .map(|(approval, error)| (with_approval(GROUPS, approval), error));
    expect_errors(cases);
    // Without groups at all.
    let no_groups = "version: 1\nagent: desk\nsteps:\n  - id: check\n    approval: { rules: [{ group: finance, min: 1 }] }\n";
    assert_eq!(
        refused(no_groups),
        "5:34: \"group\" in rule 1 in the approval of step \"check\": unknown group \"finance\" (approvals.groups defines none)"
    );
}

#[test]
fn rules_the_members_as_written_cannot_meet_are_refused_at_rules() {
    // dave is the only member of both groups and counts toward one rule.
    let shared = "{ finance: [dave], security: [dave] }";
    let approval = "rules: [{ group: finance, min: 1 }, { group: security, min: 1 }]";
    assert_eq!(
        refused(&with_approval(shared, approval)),
        "8:14: \"rules\" in the approval of step \"check\": rule security of 1 can never be met: it needs 1 vote(s) and at most 0 member(s) can give one (a voter counts toward one rule only: voter_counts_once)"
    );
    // Counting a voter toward every rule makes it satisfiable.
    parse(&with_approval(
        shared,
        &format!("{approval}\nvoter_counts_once: false"),
    ));
}

#[test]
fn the_choices_and_switches_say_what_they_take() {
    let cases = [
        (
            "reject: all",
            "8:15: \"reject\" in the approval of step \"check\" must be one of any, when_unreachable, found \"all\"",
        ),
        (
            "on_timeout: never",
            "8:19: \"on_timeout\" in the approval of step \"check\" must be one of reject, expire, approve, continue, found \"never\"",
        ),
        (
            "allow_self_approval: sometimes",
            "8:28: expected true or false for \"allow_self_approval\" in the approval of step \"check\", found a string",
        ),
        (
            "voter_counts_once: 1",
            "8:26: expected true or false for \"voter_counts_once\" in the approval of step \"check\", found an integer",
        ),
        (
            "require_reason: yes please",
            "8:23: expected true or false for \"require_reason\" in the approval of step \"check\", found a string",
        ),
    ]
    .map(|(approval, error)| (with_approval(GROUPS, approval), error));
    expect_errors(cases);
}

#[test]
fn reminders_escalations_and_forms_are_checked_before_being_refused() {
    let cases = [
        (
            "remind: [90%, 50%]",
            "8:21: \"remind\" in the approval of step \"check\" must be ascending: 50% comes after 90%",
        ),
        (
            "remind: [100%]",
            "8:16: an entry of \"remind\" in the approval of step \"check\" must be a percentage of the gate's time from 1% to 99%, such as 50%, found \"100%\"",
        ),
        (
            "remind: [50]",
            "8:16: an entry of \"remind\" in the approval of step \"check\" must be a percentage of the gate's time from 1% to 99%, such as 50%, found an integer",
        ),
        (
            "remind: []",
            "8:15: \"remind\" in the approval of step \"check\" is empty: omit it for no reminders",
        ),
        (
            "ttl: 1d\nescalate: [{ after: 1d, add: [security] }]",
            "9:27: \"after\" in escalation 1 in the approval of step \"check\" is 1d, not shorter than the gate's ttl of 1d: the gate would expire first",
        ),
        (
            "escalate: [{ after: 8d, add: [security] }]",
            "8:27: \"after\" in escalation 1 in the approval of step \"check\" is 8d, not shorter than the gate's ttl of 7d: the gate would expire first",
        ),
        (
            "escalate: [{ after: 4h, add: [legal] }]",
            "8:37: \"add\" in escalation 1 in the approval of step \"check\": unknown group \"legal\" (approvals.groups defines: finance, security)",
        ),
        (
            "escalate: [{ after: 4h, add: [] }]",
            "8:36: \"add\" in escalation 1 in the approval of step \"check\" is empty: name a group to add",
        ),
        (
            "escalate: [{ after: 4h }]",
            "8:18: missing required key \"add\" in escalation 1 in the approval of step \"check\"",
        ),
        (
            "form: { type: string }",
            "8:15: type in \"form\" in the approval of step \"check\": must be object: a form is the JSON Schema of an object, its fields under properties",
        ),
        (
            "form: [note]",
            "8:13: expected a mapping (a JSON Schema) for \"form\" in the approval of step \"check\", found a sequence",
        ),
    ]
    .map(|(approval, error)| (with_approval(GROUPS, approval), error));
    expect_errors(cases);
}

#[test]
fn a_tools_approval_is_required_or_a_mapping_of_the_gate() {
    let tool = |approval: &str| {
        format!(
            "version: 1\nagent: desk\napprovals:\n  groups: {GROUPS}\ntools:\n  pay:\n    http: {{ url: \"https://x.example\" }}\n{approval}steps:\n  - id: a\n    tool: pay\n"
        )
    };
    let spec = parse(&tool(
        "    approval: { rules: [{ group: finance, min: 2 }], message: \"Pay?\", ttl: 2d, on_spec_change: pin }\n",
    ));
    let pay = &spec.tools["pay"];
    assert!(pay.approval_required);
    assert_eq!(pay.message.as_deref(), Some("Pay?"));
    assert_eq!(pay.ttl, Some(Duration::from_secs(2 * 86_400)));
    assert_eq!(
        pay.on_spec_change,
        Some(crate::domain::spec::OnSpecChange::Pin)
    );
    assert_eq!(
        pay.policy.rules,
        [RuleSpec {
            group: "finance".into(),
            min: 2
        }]
    );

    let cases = [
        (
            "    approval: { message: a }\n    message: b\n",
            "9:5: tool \"pay\" gives \"message\" twice, beside approval: and inside it: keep one",
        ),
        (
            "    approval: { rules: [{ group: finance, min: 1 }], when: \"amount > 100\" }\n",
            "8:60: \"when\" in the approval of tool \"pay\" must be one expression in {{ }} over the call's arguments, e.g. \"{{ args.amount > 100 }}\", found \"amount > 100\"",
        ),
        (
            "    approval: { when: \"over {{ args.amount }}\" }\n",
            "8:23: \"when\" in the approval of tool \"pay\" must be one expression in {{ }} over the call's arguments, e.g. \"{{ args.amount > 100 }}\", found \"over {{ args.amount }}\"",
        ),
        (
            "    approval: { when: \"{{ nope.x }}\" }\n",
            "8:23: tool \"pay\" reads \"nope.x\": unknown name \"nope\" (available here: input, trigger, steps, run, args)",
        ),
        (
            "    approval: { when: \"{{ output.x }}\" }\n",
            "8:23: tool \"pay\" reads \"output.x\", but output exists only in a guardrail's confidence and message",
        ),
        (
            "    approval: { rules: [{ group: finance, min: 1 }], payload: {} }\n",
            "8:54: unknown key \"payload\" in the approval of tool \"pay\" (allowed: when, message, ttl, on_spec_change, rules, reject, allow_self_approval, voter_counts_once, require_reason, on_timeout, remind, escalate, form, notify)",
        ),
        (
            "    approval: optional\n",
            "8:15: \"approval\" in tool \"pay\" must be \"required\" or a mapping of the gate's policy (omit it for a tool that runs without a gate), found \"optional\"",
        ),
    ]
    .map(|(approval, error)| (tool(approval), error));
    expect_errors(cases);
}
