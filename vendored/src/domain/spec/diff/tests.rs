//! Two versions of one spec, written as YAML, and what the comparison says.

use std::collections::BTreeMap;

use super::super::{OnSpecChange, Spec};
use super::*;
use crate::domain::pending_approval::Phase;

/// Version 1: a lookup, an approval step, a tool gate, a guardrail and a
/// result, the four kinds of gate among them.
const V1: &str = r#"version: 1
agent: desk
model: { base_url: "https://models.example/v1", name: small }
tools:
  lookup:
    http: { method: GET, url: "https://shop.example/orders/{{ args.id }}" }
  pay:
    http:
      method: POST
      url: https://pay.example/refunds
      json: { order: "{{ args.id }}", amount: "{{ args.amount }}" }
    approval: required
    message: "Pay {{ args.amount }}?"
steps:
  - id: order
    tool: lookup
    with: { id: "{{ input.id }}" }
  - id: check
    approval:
      message: "Refund order {{ input.id }}?"
      payload: { amount: "{{ input.amount }}" }
  - id: large
    if: "{{ input.amount > 100 }}"
    then: request_human_approval
    message: "Large refund"
  - id: refund
    tool: pay
    with: { id: "{{ input.id }}", amount: "{{ steps.check.output.payload.amount }}" }
  - id: assess
    model: { prompt: "Rate {{ steps.order.output | tojson }}", output: json }
    guardrail: { min_confidence: 0.8 }
  - id: result
    set: { done: true, refund: "{{ steps.refund.output }}" }
"#;

fn spec(text: &str) -> Spec {
    Spec::parse(text, "spec.yaml").unwrap_or_else(|e| panic!("{e}\n{text}"))
}

/// V1 with `from` replaced by `to` (exactly once, so a typo in a test
/// fails instead of comparing V1 with itself).
fn v1_with(from: &str, to: &str) -> Spec {
    edited(V1, &[(from, to)])
}

fn edited(base: &str, edits: &[(&str, &str)]) -> Spec {
    let mut text = base.to_string();
    for (from, to) in edits {
        assert_eq!(text.matches(from).count(), 1, "{from:?} must occur once");
        text = text.replace(from, to);
    }
    spec(&text)
}

fn no_map() -> BTreeMap<String, String> {
    BTreeMap::new()
}

fn map(old: &str, new: &str) -> BTreeMap<String, String> {
    BTreeMap::from([(old.to_string(), new.to_string())])
}

fn classify(old: &Spec, new: &Spec, step: &str, phase: Phase) -> Classification {
    classify_pause(old, new, step, phase, &no_map())
}

fn resumable(old: &Spec, new: &Spec, step: &str, phase: Phase) -> bool {
    gate_unchanged_for_resume(old, new, step, phase, &no_map())
}

fn changed(d: &SpecDiff, id: &str) -> Vec<Change> {
    d.changed
        .iter()
        .find(|c| c.id == id)
        .map(|c| c.changes.clone())
        .unwrap_or_default()
}

// --- the policy in the spec language -------------------------------------

#[test]
fn the_policy_defaults_to_refuse_everywhere() {
    let v1 = spec(V1);
    assert_eq!(v1.approvals.on_spec_change, OnSpecChange::Refuse);
    for step in &v1.steps {
        assert_eq!(v1.on_spec_change(step), OnSpecChange::Refuse, "{}", step.id);
    }
}

#[test]
fn a_gate_policy_overrides_the_spec_policy_for_that_gate_only() {
    let both = edited(
        V1,
        &[
            (
                "agent: desk\n",
                "agent: desk\napprovals: { on_spec_change: pin }\n",
            ),
            (
                "      payload: { amount: \"{{ input.amount }}\" }\n",
                "      payload: { amount: \"{{ input.amount }}\" }\n      on_spec_change: auto\n",
            ),
            (
                "    message: \"Large refund\"\n",
                "    message: \"Large refund\"\n    on_spec_change: refuse\n",
            ),
            (
                "    message: \"Pay {{ args.amount }}?\"\n",
                "    message: \"Pay {{ args.amount }}?\"\n    on_spec_change: auto\n",
            ),
            (
                "{ min_confidence: 0.8 }",
                "{ min_confidence: 0.8, on_spec_change: auto }",
            ),
        ],
    );
    let policy = |id: &str| both.on_spec_change(&both.steps[both.step_index(id).unwrap()]);
    assert_eq!(both.approvals.on_spec_change, OnSpecChange::Pin);
    assert_eq!(policy("check"), OnSpecChange::Auto, "approval step");
    assert_eq!(policy("large"), OnSpecChange::Refuse, "if step");
    assert_eq!(policy("refund"), OnSpecChange::Auto, "tool gate");
    assert_eq!(policy("assess"), OnSpecChange::Auto, "guardrail");
    assert_eq!(policy("order"), OnSpecChange::Pin, "no gate: the spec's");
    assert_eq!(policy("result"), OnSpecChange::Pin, "no gate: the spec's");

    let top_only = v1_with(
        "agent: desk\n",
        "agent: desk\napprovals: { on_spec_change: auto }\n",
    );
    for step in &top_only.steps {
        assert_eq!(
            top_only.on_spec_change(step),
            OnSpecChange::Auto,
            "{}",
            step.id
        );
    }
}

#[test]
fn names_are_the_ones_plan_prints_and_serde_agrees() {
    fn check<T: serde::Serialize + std::fmt::Display + Copy>(all: &[T], names: &str) {
        let written: Vec<String> = all.iter().map(|v| v.to_string()).collect();
        assert_eq!(written.join(","), names);
        for v in all {
            assert_eq!(serde_json::to_value(v).unwrap(), v.to_string());
        }
    }
    check(OnSpecChange::ALL, "refuse,pin,auto");
    check(
        Classification::ALL,
        "identical_gate,message_changed,payload_changed,policy_changed,step_removed",
    );
    check(Change::ALL, "message,payload,tool_call,policy,other");
    check(Outcome::ALL, "current,refused,pinned,moves_to_new");
    check(
        TopLevel::ALL,
        "agent,description,trigger,approvals,model,tools",
    );
    assert_eq!(OnSpecChange::parse("auto"), Some(OnSpecChange::Auto));
    assert_eq!(OnSpecChange::parse("Auto"), None);
}

// --- the step-level diff --------------------------------------------------

#[test]
fn formatting_comments_and_key_order_change_nothing() {
    let v1 = spec(V1);
    let reformatted = spec(
        r#"# the same spec, written differently
agent: desk
version: 1
model:
  name: small          # the model
  base_url: "https://models.example/v1"
tools:
  pay:
    message: 'Pay {{ args.amount }}?'
    approval: required
    http:
      json: { amount: "{{ args.amount }}", order: "{{ args.id }}" }
      url: "https://pay.example/refunds"
      method: post
  lookup:
    http: { url: "https://shop.example/orders/{{ args.id }}" }
steps:
  - tool: lookup
    id: order
    with:
      id: "{{ input.id }}"
  - id: check
    approval:
      payload:
        amount: "{{ input.amount }}"
      message: "Refund order {{ input.id }}?"
  - id: large
    then: request_human_approval
    if: "{{ input.amount > 100 }}"
    message: Large refund
  - id: refund
    with: { amount: "{{ steps.check.output.payload.amount }}", id: "{{ input.id }}" }
    tool: pay
  - id: assess
    guardrail: { min_confidence: 0.80 }
    model: { output: json, prompt: "Rate {{ steps.order.output | tojson }}" }
  - id: result
    set: { refund: "{{ steps.refund.output }}", done: true }
"#,
    );
    let d = diff(&v1, &reformatted);
    assert!(d.is_empty(), "{d:?}");
    for (step, phase) in [
        ("check", Phase::Before),
        ("large", Phase::Before),
        ("refund", Phase::Before),
        ("assess", Phase::After),
    ] {
        assert_eq!(
            classify(&v1, &reformatted, step, phase),
            Classification::IdenticalGate,
            "{step}"
        );
        assert!(resumable(&v1, &reformatted, step, phase), "{step}");
    }
}

#[test]
fn added_removed_and_changed_steps_are_listed_with_what_changed() {
    let v1 = spec(V1);
    let v2 = edited(
        V1,
        &[
            // `large` removed.
            (
                "  - id: large\n    if: \"{{ input.amount > 100 }}\"\n    then: request_human_approval\n    message: \"Large refund\"\n",
                "",
            ),
            // `note` added at the end.
            (
                "    set: { done: true, refund: \"{{ steps.refund.output }}\" }\n",
                "    set: { done: true, refund: \"{{ steps.refund.output }}\" }\n  - id: note\n    set: { n: 1 }\n",
            ),
            ("Refund order {{ input.id }}?", "Refund {{ input.id }} now?"),
            ("Rate {{", "Score {{"),
        ],
    );
    let d = diff(&v1, &v2);
    assert_eq!(
        d.removed,
        vec![StepRef {
            id: "large".into(),
            kind: "if".into(),
            number: 3
        }]
    );
    assert_eq!(
        d.added,
        vec![StepRef {
            id: "note".into(),
            kind: "set".into(),
            number: 6
        }]
    );
    assert!(d.renamed.is_empty());
    assert_eq!(changed(&d, "check"), vec![Change::Message]);
    assert_eq!(changed(&d, "assess"), vec![Change::ToolCall]);
    assert_eq!(d.changed.len(), 2, "{:?}", d.changed);
    assert!(d.top_level.is_empty());
}

#[test]
fn each_kind_of_change_is_named() {
    let v1 = spec(V1);
    let cases: [(&str, &str, &str, &[Change]); 12] = [
        (
            "refund",
            "amount: \"{{ steps.check.output.payload.amount }}\"",
            "amount: 5",
            &[Change::Payload],
        ),
        (
            "refund",
            "https://pay.example/refunds",
            "https://pay.example/v2/refunds",
            &[Change::ToolCall],
        ),
        (
            "refund",
            "Pay {{ args.amount }}?",
            "Pay {{ args.amount }} now?",
            &[Change::Message],
        ),
        (
            "order",
            "orders/{{ args.id }}",
            "order/{{ args.id }}",
            &[Change::ToolCall],
        ),
        (
            "order",
            "with: { id: \"{{ input.id }}\" }",
            "with: { id: \"{{ input.order }}\" }",
            &[Change::ToolCall],
        ),
        (
            "check",
            "payload: { amount: \"{{ input.amount }}\" }",
            "payload: { amount: 1 }",
            &[Change::Payload],
        ),
        (
            "check",
            "      message: \"Refund",
            "      on_reject: continue\n      message: \"Refund",
            &[Change::Policy],
        ),
        (
            "large",
            "{{ input.amount > 100 }}",
            "{{ input.amount > 200 }}",
            &[Change::Policy],
        ),
        (
            "large",
            "message: \"Large refund\"",
            "message: \"Large refund\"\n    ttl: 1d",
            &[Change::Policy],
        ),
        (
            "assess",
            "min_confidence: 0.8",
            "min_confidence: 0.9",
            &[Change::Policy],
        ),
        (
            "assess",
            "output: json }",
            "output: json, system: \"Be brief\" }",
            &[Change::ToolCall],
        ),
        ("result", "done: true", "done: false", &[Change::Other]),
    ];
    for (step, from, to, expected) in cases {
        let d = diff(&v1, &v1_with(from, to));
        assert_eq!(changed(&d, step), expected, "{from:?} -> {to:?}");
        assert_eq!(d.changed.len(), 1, "{from:?} -> {to:?}: {:?}", d.changed);
    }
}

#[test]
fn a_shared_setting_changes_the_steps_that_use_it() {
    let v1 = spec(V1);
    // The spec's model: the one model step reads it.
    let d = diff(&v1, &v1_with("name: small", "name: large"));
    assert_eq!(changed(&d, "assess"), vec![Change::ToolCall]);
    assert_eq!(d.changed.len(), 1);
    assert_eq!(d.top_level, vec![TopLevel::Model]);
    // The same model named on the step itself is the same call.
    let d = diff(
        &v1,
        &v1_with("output: json }", "output: json, name: small }"),
    );
    assert!(d.changed.is_empty(), "{d:?}");
    // Approval settings of the spec: every gate's policy, no other step.
    let d = diff(
        &v1,
        &v1_with(
            "agent: desk\n",
            "agent: desk\napprovals: { approvers: [alice] }\n",
        ),
    );
    let gates: Vec<&str> = d.changed.iter().map(|c| c.id.as_str()).collect();
    assert_eq!(gates, ["check", "large", "refund", "assess"]);
    assert!(d.changed.iter().all(|c| c.changes == [Change::Policy]));
    assert_eq!(d.top_level, vec![TopLevel::Approvals]);
    // A default TTL written out as the default is no change.
    let d = diff(
        &v1,
        &v1_with("agent: desk\n", "agent: desk\napprovals: { ttl: 7d }\n"),
    );
    assert!(d.is_empty(), "{d:?}");
}

#[test]
fn another_kind_under_the_same_id_is_other_with_both_kinds() {
    let v1 = spec(V1);
    let v2 = v1_with(
        "  - id: large\n    if: \"{{ input.amount > 100 }}\"\n    then: request_human_approval\n    message: \"Large refund\"\n",
        "  - id: large\n    set: { x: 1 }\n",
    );
    let d = diff(&v1, &v2);
    let large = d.changed.iter().find(|c| c.id == "large").unwrap();
    assert_eq!(large.kind, "set");
    assert_eq!(large.old_kind.as_deref(), Some("if"));
    assert_eq!(large.changes, [Change::Other]);
}

#[test]
fn a_step_moved_among_the_others_is_other_and_only_that_step() {
    let v1 = spec(V1);
    // `large` moved after `assess`: only `large` is out of place.
    let large = "  - id: large\n    if: \"{{ input.amount > 100 }}\"\n    then: request_human_approval\n    message: \"Large refund\"\n";
    let v2 = edited(
        V1,
        &[
            (large, ""),
            ("  - id: result\n", &format!("{large}  - id: result\n")),
        ],
    );
    let d = diff(&v1, &v2);
    assert_eq!(d.changed.len(), 1, "{:?}", d.changed);
    assert_eq!(changed(&d, "large"), [Change::Other]);
    assert!(d.added.is_empty() && d.removed.is_empty());
}

#[test]
fn a_renamed_looking_step_is_paired_only_when_unambiguous() {
    let v1 = spec(V1);
    let v2 = v1_with("  - id: large\n", "  - id: big\n");
    let d = diff(&v1, &v2);
    assert_eq!(
        d.renamed,
        vec![RenamedStep {
            from: "large".into(),
            to: "big".into(),
            kind: "if".into()
        }]
    );
    assert!(
        d.added.is_empty() && d.removed.is_empty() && d.changed.is_empty(),
        "{d:?}"
    );

    // Renamed and changed: an added and a removed step, no guess.
    let v3 = edited(
        V1,
        &[
            ("  - id: large\n", "  - id: big\n"),
            ("Large refund", "Big refund"),
        ],
    );
    let d = diff(&v1, &v3);
    assert!(d.renamed.is_empty());
    assert_eq!(d.removed[0].id, "large");
    assert_eq!(d.added[0].id, "big");

    // Two removed steps equal to one added step: which one was renamed is
    // a guess too far.
    let twins = "version: 1\nagent: desk\nsteps:\n  - id: a\n    approval: { message: \"Go?\" }\n  - id: b\n    approval: { message: \"Go?\" }\n  - id: z\n    set: { x: 1 }\n";
    let one = "version: 1\nagent: desk\nsteps:\n  - id: c\n    approval: { message: \"Go?\" }\n  - id: z\n    set: { x: 1 }\n";
    let d = diff(&spec(twins), &spec(one));
    assert!(d.renamed.is_empty(), "{d:?}");
    assert_eq!(d.removed.len(), 2);
    assert_eq!(d.added.len(), 1);
    // ... and the other way round.
    let d = diff(&spec(one), &spec(twins));
    assert!(d.renamed.is_empty(), "{d:?}");

    // Equal definitions of another kind never pair (the kind is part of
    // the definition).
    let a = "version: 1\nagent: desk\nsteps:\n  - id: a\n    set: { x: 1 }\n";
    let b = "version: 1\nagent: desk\nsteps:\n  - id: b\n    set: { x: 2 }\n";
    assert!(diff(&spec(a), &spec(b)).renamed.is_empty());
}

#[test]
fn the_diff_serializes_with_snake_case_names() {
    let v1 = spec(V1);
    let v2 = edited(
        V1,
        &[
            ("  - id: large\n", "  - id: big\n"),
            ("Pay {{", "Really pay {{"),
        ],
    );
    let json = serde_json::to_value(diff(&v1, &v2)).unwrap();
    assert_eq!(
        json,
        serde_json::json!({
            "added": [],
            "removed": [],
            "renamed": [{ "from": "large", "to": "big", "kind": "if" }],
            "changed": [{ "id": "refund", "kind": "tool", "changes": ["message"] }],
            "top_level": ["tools"],
        })
    );
    let back: SpecDiff = serde_json::from_value(json).unwrap();
    assert_eq!(back, diff(&v1, &v2));
}

// --- classifying a pause --------------------------------------------------

#[test]
fn each_classification_at_each_kind_of_gate() {
    let v1 = spec(V1);
    let cases = [
        (
            "check",
            Phase::Before,
            "Refund order {{",
            "Refund the order {{",
            Classification::MessageChanged,
        ),
        (
            "check",
            Phase::Before,
            "{ amount: \"{{ input.amount }}\" }",
            "{ amount: \"{{ input.total }}\" }",
            Classification::PayloadChanged,
        ),
        (
            "check",
            Phase::Before,
            "      message: \"Refund",
            "      ttl: 2d\n      message: \"Refund",
            Classification::PolicyChanged,
        ),
        (
            "large",
            Phase::Before,
            "message: \"Large refund\"",
            "message: \"Big refund\"",
            Classification::MessageChanged,
        ),
        (
            "large",
            Phase::Before,
            "message: \"Large refund\"",
            "message: \"Large refund\"\n    payload: { a: 1 }",
            Classification::PayloadChanged,
        ),
        (
            "large",
            Phase::Before,
            "> 100 }}",
            "> 500 }}",
            Classification::PolicyChanged,
        ),
        (
            "refund",
            Phase::Before,
            "Pay {{ args.amount }}?",
            "Pay out {{ args.amount }}?",
            Classification::MessageChanged,
        ),
        (
            "refund",
            Phase::Before,
            "amount: \"{{ steps.check.output.payload.amount }}\"",
            "amount: 1",
            Classification::PayloadChanged,
        ),
        (
            "refund",
            Phase::Before,
            "url: https://pay.example/refunds",
            "url: https://pay.example/refund",
            Classification::PayloadChanged,
        ),
        (
            "refund",
            Phase::Before,
            "    message: \"Pay",
            "    on_spec_change: pin\n    message: \"Pay",
            Classification::IdenticalGate,
        ),
        (
            "assess",
            Phase::After,
            "{ min_confidence: 0.8 }",
            "{ min_confidence: 0.8, message: \"Sure?\" }",
            Classification::MessageChanged,
        ),
        (
            "assess",
            Phase::After,
            "Rate {{",
            "Grade {{",
            Classification::PayloadChanged,
        ),
        (
            "assess",
            Phase::After,
            "min_confidence: 0.8",
            "min_confidence: 0.5",
            Classification::PolicyChanged,
        ),
    ];
    for (step, phase, from, to, expected) in cases {
        assert_eq!(
            classify(&v1, &v1_with(from, to), step, phase),
            expected,
            "{step}: {from:?} -> {to:?}"
        );
    }
}

#[test]
fn a_gate_gone_or_no_longer_the_same_gate_is_step_removed() {
    let v1 = spec(V1);
    let removed = v1_with(
        "  - id: large\n    if: \"{{ input.amount > 100 }}\"\n    then: request_human_approval\n    message: \"Large refund\"\n",
        "",
    );
    assert_eq!(
        classify(&v1, &removed, "large", Phase::Before),
        Classification::StepRemoved
    );
    // Another kind of gate under the same id.
    let other_kind = v1_with(
        "    if: \"{{ input.amount > 100 }}\"\n    then: request_human_approval\n    message: \"Large refund\"\n",
        "    approval: { message: \"Large refund\" }\n",
    );
    assert_eq!(
        classify(&v1, &other_kind, "large", Phase::Before),
        Classification::StepRemoved
    );
    // The tool is no longer a gate.
    let no_gate = v1_with(
        "    approval: required\n    message: \"Pay {{ args.amount }}?\"\n",
        "",
    );
    assert_eq!(
        classify(&v1, &no_gate, "refund", Phase::Before),
        Classification::StepRemoved
    );
    // The guardrail is gone.
    let no_guardrail = v1_with("    guardrail: { min_confidence: 0.8 }\n", "");
    assert_eq!(
        classify(&v1, &no_guardrail, "assess", Phase::After),
        Classification::StepRemoved
    );
    // A pause whose phase is not the gate's, or at a step the old version
    // lacks, matches nothing.
    assert_eq!(
        classify(&v1, &v1, "check", Phase::After),
        Classification::StepRemoved
    );
    assert_eq!(
        classify(&v1, &v1, "nowhere", Phase::Before),
        Classification::StepRemoved
    );
    // A renamed step is removed until mapped.
    let renamed = v1_with("  - id: large\n", "  - id: big\n");
    assert_eq!(
        classify(&v1, &renamed, "large", Phase::Before),
        Classification::StepRemoved
    );
}

#[test]
fn precedence_is_removed_then_policy_then_payload_then_message() {
    let v1 = spec(V1);
    let message = ("Refund order {{ input.id }}?", "Refund it?");
    let payload = ("{ amount: \"{{ input.amount }}\" }", "{ amount: 0 }");
    let policy = (
        "      message: \"Refund",
        "      ttl: 1h\n      message: \"Refund",
    );
    let at_check =
        |edits: &[(&str, &str)]| classify(&v1, &edited(V1, edits), "check", Phase::Before);
    assert_eq!(
        at_check(&[message, payload, policy]),
        Classification::PolicyChanged
    );
    assert_eq!(
        at_check(&[message, payload]),
        Classification::PayloadChanged
    );
    assert_eq!(at_check(&[message, policy]), Classification::PolicyChanged);
    assert_eq!(at_check(&[message]), Classification::MessageChanged);
    // Removed beats everything, even when the other changes are made too.
    let gone = edited(
        V1,
        &[
            message,
            payload,
            policy,
            ("  - id: check\n", "  - id: check2\n"),
            ("steps.check.output", "steps.check2.output"),
        ],
    );
    assert_eq!(
        classify(&v1, &gone, "check", Phase::Before),
        Classification::StepRemoved
    );
}

#[test]
fn another_steps_change_leaves_a_gates_classification_alone() {
    let v1 = spec(V1);
    for (from, to) in [
        ("orders/{{ args.id }}", "order/{{ args.id }}"), // before every gate
        ("done: true", "done: false"),                   // after every gate
        ("Large refund", "Big refund"),                  // another gate
        ("agent: desk\n", "agent: desk\ndescription: Refunds.\n"),
    ] {
        let v2 = v1_with(from, to);
        assert_eq!(
            classify(&v1, &v2, "check", Phase::Before),
            Classification::IdenticalGate,
            "{from:?}"
        );
        assert_eq!(
            classify(&v1, &v2, "assess", Phase::After),
            Classification::IdenticalGate,
            "{from:?}"
        );
    }
}

#[test]
fn a_mapping_names_the_step_in_the_new_version() {
    let v1 = spec(V1);
    let renamed = v1_with("  - id: large\n", "  - id: big\n");
    let m = map("large", "big");
    assert_eq!(
        classify_pause(&v1, &renamed, "large", Phase::Before, &m),
        Classification::IdenticalGate
    );
    assert!(gate_unchanged_for_resume(
        &v1,
        &renamed,
        "large",
        Phase::Before,
        &m
    ));
    let plan = plan_pause(&v1, &renamed, "large", Phase::Before, &m);
    assert_eq!(plan.new_step.as_deref(), Some("big"));

    // Mapped and changed: classified like any change.
    let changed = edited(
        V1,
        &[
            ("  - id: large\n", "  - id: big\n"),
            ("Large refund", "Big refund"),
        ],
    );
    assert_eq!(
        classify_pause(&v1, &changed, "large", Phase::Before, &m),
        Classification::MessageChanged
    );
    // Mapped onto a step that is no such gate, or that does not exist.
    assert_eq!(
        classify_pause(&v1, &v1, "large", Phase::Before, &map("large", "result")),
        Classification::StepRemoved
    );
    assert_eq!(
        classify_pause(&v1, &v1, "large", Phase::Before, &map("large", "nowhere")),
        Classification::StepRemoved
    );
    // A mapping of other steps does not touch this one.
    assert_eq!(
        classify_pause(&v1, &v1, "check", Phase::Before, &map("large", "big")),
        Classification::IdenticalGate
    );
    // Mapped onto another gate of the same kind: compared with that one.
    assert_eq!(
        classify_pause(&v1, &v1, "check", Phase::Before, &map("check", "large")),
        Classification::StepRemoved,
        "an approval step is not an if step"
    );
}

// --- the auto rule --------------------------------------------------------

#[test]
fn a_change_before_the_gate_stops_the_move_and_one_after_does_not() {
    let v1 = spec(V1);
    // Before `refund`: the approval step `check` reads another amount.
    let before = v1_with(
        "{ amount: \"{{ input.amount }}\" }",
        "{ amount: \"{{ input.total }}\" }",
    );
    assert_eq!(
        classify(&v1, &before, "refund", Phase::Before),
        Classification::IdenticalGate
    );
    assert!(!resumable(&v1, &before, "refund", Phase::Before));
    assert!(!resumable(&v1, &before, "assess", Phase::After));
    // After `refund`: the set step.
    let after = v1_with("done: true", "done: false");
    assert!(resumable(&v1, &after, "refund", Phase::Before));
    assert!(resumable(&v1, &after, "check", Phase::Before));
    // The tool an earlier step calls: its definition is part of that step.
    let tool = v1_with("orders/{{ args.id }}", "order/{{ args.id }}");
    assert!(!resumable(&v1, &tool, "check", Phase::Before));
    // The spec's model is used by `assess` only, after `check`.
    let model = v1_with("name: small", "name: large");
    assert!(resumable(&v1, &model, "check", Phase::Before));
    assert!(
        !resumable(&v1, &model, "assess", Phase::After),
        "the gate's own call"
    );
}

#[test]
fn the_gates_own_tool_definition_counts() {
    let v1 = spec(V1);
    for (from, to) in [
        (
            "url: https://pay.example/refunds",
            "url: https://pay.example/refund",
        ),
        ("      method: POST\n", "      method: PUT\n"),
        (
            "    approval: required\n",
            "    approval: required\n    idempotent: true\n",
        ),
        ("Pay {{ args.amount }}?", "Pay now?"),
    ] {
        assert!(
            !resumable(&v1, &v1_with(from, to), "refund", Phase::Before),
            "{from:?}"
        );
    }
    // `on_crash` written as its default is the same call.
    assert!(resumable(
        &v1,
        &v1_with(
            "    approval: required\n",
            "    approval: required\n    on_crash: stuck\n"
        ),
        "refund",
        Phase::Before
    ));
}

#[test]
fn only_approval_settings_may_differ_at_the_gate() {
    let v1 = spec(V1);
    // TTL, approvers, the policy itself: who decides and until when.
    for (from, to) in [
        (
            "    message: \"Large refund\"\n",
            "    message: \"Large refund\"\n    ttl: 1d\n",
        ),
        (
            "agent: desk\n",
            "agent: desk\napprovals: { approvers: [bob], ttl: 2d, on_spec_change: auto }\n",
        ),
    ] {
        let v2 = v1_with(from, to);
        assert_eq!(
            classify(&v1, &v2, "large", Phase::Before),
            Classification::PolicyChanged,
            "{to:?}"
        );
        assert!(resumable(&v1, &v2, "large", Phase::Before), "{to:?}");
        // Settings of an earlier gate do not stop a later one either.
        assert!(resumable(&v1, &v2, "assess", Phase::After), "{to:?}");
    }
    // Decision rules change what the run does: no move.
    let condition = v1_with("> 100 }}", "> 500 }}");
    assert!(!resumable(&v1, &condition, "large", Phase::Before));
    assert!(
        !resumable(&v1, &condition, "refund", Phase::Before),
        "an earlier gate's rule"
    );
    let on_reject = v1_with(
        "      message: \"Refund",
        "      on_reject: continue\n      message: \"Refund",
    );
    assert!(!resumable(&v1, &on_reject, "check", Phase::Before));
}

#[test]
fn steps_added_or_moved_before_the_gate_stop_the_move() {
    let v1 = spec(V1);
    let added_before = v1_with(
        "  - id: check\n",
        "  - id: extra\n    set: { x: 1 }\n  - id: check\n",
    );
    assert_eq!(
        classify(&v1, &added_before, "check", Phase::Before),
        Classification::IdenticalGate
    );
    assert!(!resumable(&v1, &added_before, "check", Phase::Before));
    let added_after = v1_with(
        "  - id: result\n",
        "  - id: extra\n    set: { x: 1 }\n  - id: result\n",
    );
    assert!(resumable(&v1, &added_after, "assess", Phase::After));
    // `order` and `check` swapped: same steps, another order.
    let order = "  - id: order\n    tool: lookup\n    with: { id: \"{{ input.id }}\" }\n";
    let swapped = edited(
        V1,
        &[
            (order, ""),
            ("  - id: large\n", &format!("{order}  - id: large\n")),
        ],
    );
    assert!(!resumable(&v1, &swapped, "large", Phase::Before));
    assert!(!resumable(&v1, &swapped, "check", Phase::Before));
    // The agent is read by templates as run.agent.
    let agent = v1_with("agent: desk\n", "agent: counter\n");
    assert!(!resumable(&v1, &agent, "check", Phase::Before));
    // A removed gate never moves.
    let gone = v1_with("  - id: large\n", "  - id: big\n");
    assert!(!resumable(&v1, &gone, "large", Phase::Before));
}

// --- what the policy does -------------------------------------------------

#[test]
fn the_outcome_follows_the_new_versions_policy() {
    let v1 = spec(V1);
    let describe = ("agent: desk\n", "agent: desk\ndescription: changed\n");
    let with_policy = |policy: &str, more: &[(&str, &str)]| {
        let top = format!(
            "agent: desk\ndescription: changed\napprovals: {{ on_spec_change: {policy} }}\n"
        );
        let mut edits = vec![("agent: desk\n", top.as_str())];
        edits.extend_from_slice(more);
        edited(V1, &edits)
    };
    let plan = |new: &Spec, step: &str, phase: Phase| plan_pause(&v1, new, step, phase, &no_map());

    // Same hash: nothing to decide, whatever the policy.
    assert_eq!(plan(&v1, "check", Phase::Before).outcome, Outcome::Current);
    // refuse (the default), pin.
    let refuse = edited(V1, &[describe]);
    assert_eq!(
        plan(&refuse, "check", Phase::Before).outcome,
        Outcome::Refused
    );
    let pin = with_policy("pin", &[]);
    assert_eq!(plan(&pin, "check", Phase::Before).outcome, Outcome::Pinned);
    // auto: unchanged moves, changed stays pinned.
    let auto = with_policy("auto", &[]);
    let moved = plan(&auto, "check", Phase::Before);
    assert_eq!(moved.outcome, Outcome::MovesToNew);
    assert_eq!(
        moved.classification,
        Classification::IdenticalGate,
        "adopting a policy changes no gate"
    );
    // (From a version already under auto, so the policy itself is no change.)
    let plan_from_auto =
        |new: &Spec, step: &str| plan_pause(&auto, new, step, Phase::Before, &no_map());
    let changed = with_policy("auto", &[("Refund order {{", "Refund the order {{")]);
    let stays = plan_from_auto(&changed, "check");
    assert_eq!(stays.classification, Classification::MessageChanged);
    assert_eq!(stays.outcome, Outcome::Pinned);
    // A change before the gate: identical gate, still pinned.
    let earlier = with_policy("auto", &[("orders/{{", "order/{{")]);
    let p = plan_from_auto(&earlier, "check");
    assert_eq!(
        (p.classification, p.outcome),
        (Classification::IdenticalGate, Outcome::Pinned)
    );
    // And one after it: identical gate, moves.
    let later = with_policy("auto", &[("done: true", "done: false")]);
    let p = plan_from_auto(&later, "check");
    assert_eq!(
        (p.classification, p.outcome),
        (Classification::IdenticalGate, Outcome::MovesToNew)
    );
}

#[test]
fn the_new_gates_own_policy_wins_and_a_removed_gate_gets_the_new_spec_policy() {
    // The old gate said auto; the new one says pin: pin is in force.
    let old = v1_with(
        "    message: \"Large refund\"\n",
        "    message: \"Large refund\"\n    on_spec_change: auto\n",
    );
    let new = edited(
        V1,
        &[
            (
                "    message: \"Large refund\"\n",
                "    message: \"Large refund\"\n    on_spec_change: pin\n",
            ),
            (
                "agent: desk\n",
                "agent: desk\napprovals: { on_spec_change: auto }\n",
            ),
        ],
    );
    let p = plan_pause(&old, &new, "large", Phase::Before, &no_map());
    assert_eq!((p.policy, p.outcome), (OnSpecChange::Pin, Outcome::Pinned));
    // The other gates take the new spec's auto, and they did not change.
    let p = plan_pause(&old, &new, "check", Phase::Before, &no_map());
    assert_eq!(
        (p.policy, p.outcome),
        (OnSpecChange::Auto, Outcome::MovesToNew)
    );

    // Removed in the new version: the new top level decides.
    let removed = edited(
        V1,
        &[
            (
                "  - id: large\n    if: \"{{ input.amount > 100 }}\"\n    then: request_human_approval\n    message: \"Large refund\"\n",
                "",
            ),
            (
                "agent: desk\n",
                "agent: desk\napprovals: { on_spec_change: pin }\n",
            ),
        ],
    );
    let p = plan_pause(&old, &removed, "large", Phase::Before, &no_map());
    assert_eq!(p.classification, Classification::StepRemoved);
    assert_eq!(p.new_step, None);
    assert_eq!((p.policy, p.outcome), (OnSpecChange::Pin, Outcome::Pinned));
    let refused = v1_with(
        "  - id: large\n    if: \"{{ input.amount > 100 }}\"\n    then: request_human_approval\n    message: \"Large refund\"\n",
        "",
    );
    let p = plan_pause(&old, &refused, "large", Phase::Before, &no_map());
    assert_eq!(
        (p.policy, p.outcome),
        (OnSpecChange::Refuse, Outcome::Refused)
    );
}

#[test]
fn a_pause_plan_serializes_with_snake_case_names() {
    let v1 = spec(V1);
    let v2 = v1_with(
        "agent: desk\n",
        "agent: desk\napprovals: { on_spec_change: auto }\n",
    );
    let plan = plan_pause(&v1, &v2, "assess", Phase::After, &no_map());
    assert_eq!(
        serde_json::to_value(&plan).unwrap(),
        serde_json::json!({
            "step": "assess",
            "phase": "after",
            "new_step": "assess",
            "classification": "identical_gate",
            "policy": "auto",
            "outcome": "moves_to_new",
        })
    );
}

#[test]
fn a_dedupe_step_before_the_gate_counts_though_no_template_reads_it() {
    let base = "version: 1\nagent: desk\nsteps:\n  - id: once\n    dedupe: { key: \"k-{{ input.id }}\", ttl: 1h }\n  - id: check\n    approval: { message: Go? }\n";
    let old = spec(base);
    let new = edited(base, &[("ttl: 1h", "ttl: 2h")]);
    assert_eq!(changed(&diff(&old, &new), "once"), [Change::Other]);
    assert_eq!(
        classify(&old, &new, "check", Phase::Before),
        Classification::IdenticalGate
    );
    assert!(
        !resumable(&old, &new, "check", Phase::Before),
        "its claim is a side effect"
    );
}

// --- team approval policy (DESIGN §13) -------------------------------------

/// Groups, an approval step with rules, a tool gate with rules, and a
/// plain `if` gate that names no group.
const TEAM: &str = r#"version: 1
agent: desk
approvals:
  groups: { finance: [alice, bob, carol], security: [dave], spare: [erin] }
tools:
  pay:
    http: { method: POST, url: "https://pay.example/refunds", json: { amount: "{{ args.amount }}" } }
    approval: { rules: [{ group: security, min: 1 }] }
steps:
  - id: check
    approval:
      message: "Refund?"
      rules: [{ group: finance, min: 2 }]
  - id: large
    if: "{{ input.amount > 100 }}"
    then: request_human_approval
  - id: refund
    tool: pay
    with: { amount: "{{ input.amount }}" }
"#;

fn team_with(from: &str, to: &str) -> Spec {
    edited(TEAM, &[(from, to)])
}

/// `spec` with the policy of the gate at step `index` changed by `edit`:
/// for settings `Spec::parse` refuses until they are enforced.
fn policy_edited(spec: &Spec, index: usize, edit: impl Fn(&mut GatePolicy)) -> Spec {
    let mut spec = spec.clone();
    let step = spec.steps[index].clone();
    match &mut spec.steps[index].kind {
        StepKind::Approval(a) => edit(&mut a.policy),
        StepKind::Gate(g) => edit(&mut g.policy),
        StepKind::Model(m) => edit(&mut m.guardrail.as_mut().unwrap().policy),
        StepKind::Tool { tool, .. } => edit(&mut spec.tools.get_mut(tool).unwrap().policy),
        _ => panic!("no gate at {}", step.id),
    }
    spec
}

#[test]
fn a_change_of_who_decides_is_policy_and_never_moves_a_pause() {
    let v1 = spec(TEAM);
    for (from, to) in [
        ("{ group: finance, min: 2 }", "{ group: finance, min: 3 }"),
        (
            "{ group: finance, min: 2 }]\n",
            "{ group: finance, min: 2 }, { group: spare, min: 1 }]\n",
        ),
        (
            "      message: \"Refund?\"\n",
            "      message: \"Refund?\"\n      reject: when_unreachable\n",
        ),
        (
            "      message: \"Refund?\"\n",
            "      message: \"Refund?\"\n      allow_self_approval: true\n",
        ),
        (
            "      message: \"Refund?\"\n",
            "      message: \"Refund?\"\n      voter_counts_once: false\n",
        ),
        (
            "      message: \"Refund?\"\n",
            "      message: \"Refund?\"\n      require_reason: true\n",
        ),
        // The members as written of a group the gate counts votes from.
        ("finance: [alice, bob, carol]", "finance: [alice, bob, zoe]"),
    ] {
        let v2 = team_with(from, to);
        assert_eq!(
            classify(&v1, &v2, "check", Phase::Before),
            Classification::PolicyChanged,
            "{to:?}"
        );
        assert!(!resumable(&v1, &v2, "check", Phase::Before), "{to:?}");
        assert_eq!(
            changed(&diff(&v1, &v2), "check"),
            [Change::Policy],
            "{to:?}"
        );
        // A later gate: the run's earlier gate decided under other rules.
        assert!(!resumable(&v1, &v2, "refund", Phase::Before), "{to:?}");
    }
    // The tool gate's own rules.
    let v2 = team_with("{ group: security, min: 1 }", "{ group: finance, min: 1 }");
    assert_eq!(
        classify(&v1, &v2, "refund", Phase::Before),
        Classification::PolicyChanged
    );
    assert!(!resumable(&v1, &v2, "refund", Phase::Before));
    assert!(
        resumable(&v1, &v2, "check", Phase::Before),
        "a later gate's change"
    );
}

#[test]
fn members_of_groups_a_gate_does_not_name_leave_it_alone() {
    let v1 = spec(TEAM);
    let v2 = team_with("spare: [erin]", "spare: [erin, fay]");
    for (step, phase) in [
        ("check", Phase::Before),
        ("large", Phase::Before),
        ("refund", Phase::Before),
    ] {
        assert_eq!(
            classify(&v1, &v2, step, phase),
            Classification::IdenticalGate,
            "{step}"
        );
        assert!(resumable(&v1, &v2, step, phase), "{step}");
    }
    assert_eq!(diff(&v1, &v2).top_level, [TopLevel::Approvals]);
    // A plain gate names no group: finance's members are not its deciders.
    let v3 = team_with("finance: [alice, bob, carol]", "finance: [alice, bob, zoe]");
    assert_eq!(
        classify(&v1, &v3, "large", Phase::Before),
        Classification::IdenticalGate
    );
    // ... but the run passed `check`, whose deciders changed.
    assert!(!resumable(&v1, &v3, "large", Phase::Before));
}

#[test]
fn writing_out_a_default_is_no_change() {
    let v1 = spec(TEAM);
    let v2 = team_with(
        "      message: \"Refund?\"\n",
        "      message: \"Refund?\"\n      allow_self_approval: false\n      voter_counts_once: true\n      reject: any\n      on_timeout: expire\n",
    );
    assert_eq!(
        classify(&v1, &v2, "check", Phase::Before),
        Classification::IdenticalGate
    );
    assert!(resumable(&v1, &v2, "check", Phase::Before));
    assert!(changed(&diff(&v1, &v2), "check").is_empty());
}

#[test]
fn settings_not_enforced_yet_are_compared_too() {
    let v1 = spec(TEAM);
    let check = v1.step_index("check").unwrap();
    // What the gate does when its time runs out, who is added later, what
    // the approver fills in: how it decides.
    for v2 in [
        policy_edited(&v1, check, |p| {
            p.on_timeout = crate::domain::policy::OnTimeout::Approve
        }),
        policy_edited(&v1, check, |p| {
            p.escalate = vec![crate::domain::policy::Escalation {
                after: Duration::from_secs(3600),
                add: vec!["security".into()],
            }]
        }),
        policy_edited(&v1, check, |p| {
            p.form = crate::domain::form::Form::parse(&serde_json::json!({"type": "object"})).ok()
        }),
    ] {
        assert_eq!(
            classify(&v1, &v2, "check", Phase::Before),
            Classification::PolicyChanged
        );
        assert!(!resumable(&v1, &v2, "check", Phase::Before));
    }
    // An escalation's group's members count as the gate's.
    let escalating = policy_edited(&v1, check, |p| {
        p.escalate = vec![crate::domain::policy::Escalation {
            after: Duration::from_secs(3600),
            add: vec!["spare".into()],
        }]
    });
    let mut other_spare = escalating.clone();
    other_spare
        .approvals
        .groups
        .insert("spare".into(), vec!["zed".into()]);
    assert!(!resumable(
        &escalating,
        &other_spare,
        "check",
        Phase::Before
    ));
    // Reminders only say when to nudge: a setting, as the TTL is.
    let reminded = policy_edited(&v1, check, |p| p.remind = vec![50]);
    assert_eq!(
        classify(&v1, &reminded, "check", Phase::Before),
        Classification::PolicyChanged
    );
    assert!(resumable(&v1, &reminded, "check", Phase::Before));
    // `when:` decides whether a tool gate fires at all.
    let mut when = v1.clone();
    when.tools.get_mut("pay").unwrap().when = Some("{{ args.amount > 100 }}".into());
    assert_eq!(
        classify(&v1, &when, "refund", Phase::Before),
        Classification::PolicyChanged
    );
    assert!(!resumable(&v1, &when, "refund", Phase::Before));
    assert_eq!(changed(&diff(&v1, &when), "refund"), [Change::Policy]);
}

#[test]
fn where_notices_go_is_no_change_of_the_gate() {
    let v1 = spec(V1);
    let hook = "    webhooks: [{ url: \"${HOOK_URL}\", secret: \"${HOOK_SECRET}\" }]\n";
    // Each gate's own `notify:`, and the spec's: who hears, not what is
    // decided, so `auto` moves a pause past it like a change of Slack.
    for v2 in [
        v1_with(
            "      payload: { amount: \"{{ input.amount }}\" }\n",
            "      payload: { amount: \"{{ input.amount }}\" }\n      notify: { webhooks: [], email: false }\n",
        ),
        v1_with(
            "    message: \"Large refund\"\n",
            "    message: \"Large refund\"\n    notify: { webhooks: [{ url: \"https://ops.example/h\", secret: \"${OPS}\" }] }\n",
        ),
        v1_with(
            "    approval: required\n",
            "    approval: { notify: { email: { smtp_url: \"${SMTP_URL}\", from: a@example.com } } }\n",
        ),
        v1_with(
            "guardrail: { min_confidence: 0.8 }",
            "guardrail: { min_confidence: 0.8, notify: { webhooks: [] } }",
        ),
        v1_with(
            "model: { base_url",
            &format!("approvals:\n  notify:\n{hook}model: {{ base_url"),
        ),
    ] {
        assert_ne!(v1.hash, v2.hash);
        let d = diff(&v1, &v2);
        assert!(d.changed.is_empty(), "{:?}", d.changed);
        for (step, phase) in [
            ("check", Phase::Before),
            ("large", Phase::Before),
            ("refund", Phase::Before),
            ("assess", Phase::After),
        ] {
            assert_eq!(
                classify(&v1, &v2, step, phase),
                Classification::IdenticalGate,
                "{step}"
            );
            assert!(resumable(&v1, &v2, step, phase), "{step}");
        }
    }
}
