//! Malformed specs and the exact error each one gets: `FILE:LINE:COL: message`.
//!
//! Every case is a whole spec, so the line and column in the expectation can
//! be checked by eye against the source above it.

use tollgate_runtime::spec::{Spec, SpecErrorKind};

/// Parse `source` as `spec.yaml` and return the error's display text.
#[track_caller]
fn error_of(source: &str) -> String {
    match Spec::parse(source, "spec.yaml") {
        Ok(_) => panic!("expected an error, the spec parsed:\n{source}"),
        Err(e) => e.to_string(),
    }
}

#[track_caller]
fn kind_of(source: &str) -> SpecErrorKind {
    match Spec::parse(source, "spec.yaml") {
        Ok(_) => panic!("expected an error, the spec parsed:\n{source}"),
        Err(e) => e.kind,
    }
}

#[test]
fn yaml_syntax_error() {
    let source = r#"version: 1
agent: [desk
steps: []
"#;
    assert_eq!(
        error_of(source),
        "spec.yaml:3:6: invalid YAML: illegal placement of ':' indicator"
    );
    assert_eq!(kind_of(source), SpecErrorKind::Syntax);
}

#[test]
fn tab_indentation() {
    let source = "version: 1\nagent: desk\nsteps:\n\t- id: a\n\t  set: {x: 1}\n";
    assert_eq!(
        error_of(source),
        "spec.yaml:4:2: invalid YAML: tabs disallowed within this context (block indentation)"
    );
    assert_eq!(kind_of(source), SpecErrorKind::Syntax);
}

#[test]
fn duplicate_mapping_key() {
    let source = r#"version: 1
agent: desk
steps:
  - id: a
    set: {x: 1}
agent: other
"#;
    assert_eq!(
        error_of(source),
        "spec.yaml:6:1: duplicate key \"agent\" (first defined at line 2)"
    );
    assert_eq!(kind_of(source), SpecErrorKind::Syntax);
}

#[test]
fn empty_file() {
    let source = "";
    assert_eq!(
        error_of(source),
        "spec.yaml:1:1: the spec is empty: expected a mapping with version, agent and steps"
    );
}

#[test]
fn only_comments() {
    let source = r#"# nothing here yet
"#;
    assert_eq!(
        error_of(source),
        "spec.yaml:1:1: the spec is empty: expected a mapping with version, agent and steps"
    );
}

#[test]
fn top_level_unknown_key() {
    let source = r#"version: 1
agent: desk
stepz:
  - id: a
    set: {x: 1}
"#;
    assert_eq!(
        error_of(source),
        "spec.yaml:3:1: unknown top-level key \"stepz\" (allowed: version, agent, description, trigger, approvals, model, tools, steps)"
    );
}

#[test]
fn wrong_version() {
    let source = r#"version: 2
agent: desk
steps:
  - id: a
    set: {x: 1}
"#;
    assert_eq!(
        error_of(source),
        "spec.yaml:1:10: unsupported spec version 2 (this tollgate reads version 1)"
    );
}

#[test]
fn version_as_string() {
    let source = r#"version: "1"
agent: desk
steps:
  - id: a
    set: {x: 1}
"#;
    assert_eq!(
        error_of(source),
        "spec.yaml:1:10: expected an integer for \"version\", found a string"
    );
}

#[test]
fn bad_agent_id() {
    let source = r#"version: 1
agent: Refund_Desk
steps:
  - id: a
    set: {x: 1}
"#;
    assert_eq!(
        error_of(source),
        "spec.yaml:2:8: invalid agent id \"Refund_Desk\": use lowercase letters, digits and '-', starting with a letter or digit, not ending with '-', at most 63 characters"
    );
}

#[test]
fn agent_id_ending_with_dash() {
    let source = r#"version: 1
agent: desk-
steps:
  - id: a
    set: {x: 1}
"#;
    assert_eq!(
        error_of(source),
        "spec.yaml:2:8: invalid agent id \"desk-\": use lowercase letters, digits and '-', starting with a letter or digit, not ending with '-', at most 63 characters"
    );
}

#[test]
fn missing_steps() {
    let source = r#"version: 1
agent: desk
description: nothing to do
"#;
    assert_eq!(
        error_of(source),
        "spec.yaml:1:1: missing required top-level key \"steps\""
    );
}

#[test]
fn empty_steps() {
    let source = r#"version: 1
agent: desk
steps: []
"#;
    assert_eq!(
        error_of(source),
        "spec.yaml:3:8: \"steps\" is empty: a spec needs at least one step"
    );
}

#[test]
fn steps_as_a_mapping() {
    let source = r#"version: 1
agent: desk
steps:
  a:
    set: {x: 1}
"#;
    assert_eq!(
        error_of(source),
        "spec.yaml:4:3: expected a sequence for \"steps\", found a mapping"
    );
}

#[test]
fn unknown_step_kind() {
    let source = r#"version: 1
agent: desk
steps:
  - id: a
    tol: lookup
"#;
    assert_eq!(
        error_of(source),
        "spec.yaml:5:5: unknown step kind \"tol\" in step \"a\" (a step has one of: tool, model, approval, if, dedupe, set)"
    );
}

#[test]
fn step_with_only_an_id() {
    let source = r#"version: 1
agent: desk
steps:
  - id: a
"#;
    assert_eq!(
        error_of(source),
        "spec.yaml:4:5: unknown step kind in step \"a\": it needs one of tool, model, approval, if, dedupe, set"
    );
}

#[test]
fn two_kinds_in_one_step() {
    let source = r#"version: 1
agent: desk
steps:
  - id: a
    set: {x: 1}
    approval: {}
"#;
    assert_eq!(
        error_of(source),
        "spec.yaml:6:5: step \"a\" has two kinds, \"set\" and \"approval\" (a step has exactly one of: tool, model, approval, if, dedupe, set)"
    );
}

#[test]
fn missing_step_id() {
    let source = r#"version: 1
agent: desk
steps:
  - id: a
    set: {x: 1}
  - set: {y: 2}
"#;
    assert_eq!(
        error_of(source),
        "spec.yaml:6:5: missing required key \"id\" in step 2"
    );
}

#[test]
fn invalid_step_id() {
    let source = r#"version: 1
agent: desk
steps:
  - id: refund-1
    set: {x: 1}
"#;
    assert_eq!(
        error_of(source),
        "spec.yaml:4:9: invalid step id \"refund-1\": use lowercase letters, digits and '_', starting with a letter or '_', at most 63 characters (templates read steps.<id>, where '-' would be a minus)"
    );
}

#[test]
fn duplicate_step_id() {
    let source = r#"version: 1
agent: desk
steps:
  - id: order
    set: {x: 1}
  - id: check
    approval: {}
  - id: order
    set: {y: 2}
"#;
    assert_eq!(
        error_of(source),
        "spec.yaml:8:9: duplicate step id \"order\" (first defined at line 4)"
    );
}

#[test]
fn unknown_tool() {
    let source = r#"version: 1
agent: desk
tools:
  issue_refund:
    http: {method: POST, url: https://pay.example/refunds}
steps:
  - id: refund
    tool: issue_refnd
"#;
    assert_eq!(
        error_of(source),
        "spec.yaml:8:11: step \"refund\" uses unknown tool \"issue_refnd\""
    );
}

#[test]
fn unknown_key_in_tool() {
    let source = r#"version: 1
agent: desk
tools:
  issue_refund:
    http: {method: POST, url: https://pay.example/refunds}
    aproval: required
steps:
  - id: refund
    tool: issue_refund
"#;
    assert_eq!(
        error_of(source),
        "spec.yaml:6:5: unknown key \"aproval\" in tool \"issue_refund\" (allowed: http, rust, approval, message, ttl)"
    );
}

#[test]
fn unknown_key_in_http() {
    let source = r#"version: 1
agent: desk
tools:
  lookup_order:
    http:
      method: GET
      url: https://shop.example/orders
      tmeout: 5s
steps:
  - id: order
    tool: lookup_order
"#;
    assert_eq!(
        error_of(source),
        "spec.yaml:8:7: unknown key \"tmeout\" in tool \"lookup_order\" (allowed: method, url, headers, query, json, body, timeout, ok_status, retry, idempotency)"
    );
}

#[test]
fn unknown_key_in_step() {
    let source = r#"version: 1
agent: desk
steps:
  - id: a
    set: {x: 1}
    with: {y: 2}
"#;
    assert_eq!(
        error_of(source),
        "spec.yaml:6:5: unknown key \"with\" in step \"a\" (allowed: id, set)"
    );
}

#[test]
fn unknown_key_in_approval() {
    let source = r#"version: 1
agent: desk
steps:
  - id: close
    approval:
      mesage: Close the ticket?
"#;
    assert_eq!(
        error_of(source),
        "spec.yaml:6:7: unknown key \"mesage\" in the approval of step \"close\" (allowed: message, ttl, payload, on_reject)"
    );
}

#[test]
fn unknown_key_in_model() {
    let source = r#"version: 1
agent: desk
steps:
  - id: assess
    model:
      promt: Is this fine?
"#;
    assert_eq!(
        error_of(source),
        "spec.yaml:6:7: unknown key \"promt\" in the model of step \"assess\" (allowed: prompt, system, output, name, base_url, api_key, timeout)"
    );
}

#[test]
fn unknown_key_in_guardrail() {
    let source = r#"version: 1
agent: desk
steps:
  - id: assess
    model: {prompt: Rate it, output: json}
    guardrail: {min_confidance: 0.8}
"#;
    assert_eq!(
        error_of(source),
        "spec.yaml:6:17: unknown key \"min_confidance\" in the guardrail of step \"assess\" (allowed: min_confidence, confidence, message, ttl)"
    );
}

#[test]
fn unknown_key_in_dedupe() {
    let source = r#"version: 1
agent: desk
steps:
  - id: once
    dedupe: {keys: "{{ input.id }}", ttl: 1h}
"#;
    assert_eq!(
        error_of(source),
        "spec.yaml:5:14: unknown key \"keys\" in the dedupe of step \"once\" (allowed: key, ttl, release_on_failure)"
    );
}

#[test]
fn unknown_key_in_approvals_notify_slack() {
    let source = "version: 1\nagent: desk\napprovals:\n  notify:\n    slack:\n      bot_token: ${SLACK_BOT_TOKEN}\n      chanel: \"#refunds\"\nsteps:\n  - id: a\n    approval: {}\n";
    assert_eq!(
        error_of(source),
        "spec.yaml:7:7: unknown key \"chanel\" in approvals.notify.slack (allowed: bot_token, channel, signing_secret)"
    );
}

#[test]
fn bad_duration() {
    let source = r#"version: 1
agent: desk
steps:
  - id: close
    approval: {message: Close?, ttl: 7days}
"#;
    assert_eq!(
        error_of(source),
        "spec.yaml:5:38: bad \"ttl\" in the approval of step \"close\": invalid duration \"7days\": unknown unit \"days\" (use ms, s, m, h, d or w)"
    );
}

#[test]
fn bad_method() {
    let source = r#"version: 1
agent: desk
tools:
  fetch:
    http: {method: FETCH, url: https://x.example}
steps:
  - id: a
    tool: fetch
"#;
    assert_eq!(
        error_of(source),
        "spec.yaml:5:20: \"method\" in tool \"fetch\" must be one of GET, POST, PUT, PATCH, DELETE, HEAD, found \"FETCH\""
    );
}

#[test]
fn json_and_body_together() {
    let source = r#"version: 1
agent: desk
tools:
  send:
    http:
      method: POST
      url: https://x.example
      json: {a: 1}
      body: raw
steps:
  - id: a
    tool: send
"#;
    assert_eq!(
        error_of(source),
        "spec.yaml:9:7: tool \"send\" sets both \"json\" and \"body\": use json for a JSON body or body for raw text, not both"
    );
}

#[test]
fn http_tool_without_url() {
    let source = r#"version: 1
agent: desk
tools:
  send:
    http:
      method: POST
steps:
  - id: a
    tool: send
"#;
    assert_eq!(
        error_of(source),
        "spec.yaml:6:7: missing required key \"url\" in tool \"send\""
    );
}

#[test]
fn ok_status_out_of_range() {
    let source = r#"version: 1
agent: desk
tools:
  send:
    http: {url: https://x.example, ok_status: [404, 700]}
steps:
  - id: a
    tool: send
"#;
    assert_eq!(
        error_of(source),
        "spec.yaml:5:53: \"ok_status\" in tool \"send\": 700 is not an HTTP status (100 to 599)"
    );
}

#[test]
fn retry_attempts_out_of_range() {
    let source = r#"version: 1
agent: desk
tools:
  send:
    http: {url: https://x.example, retry: {attempts: 11}}
steps:
  - id: a
    tool: send
"#;
    assert_eq!(
        error_of(source),
        "spec.yaml:5:54: \"attempts\" in the retry of tool \"send\" must be from 1 to 10, found 11"
    );
}

#[test]
fn bad_expression_syntax() {
    let source = r#"version: 1
agent: desk
steps:
  - id: a
    set: {x: "{{ input.amount + }}"}
"#;
    assert_eq!(
        error_of(source),
        "spec.yaml:5:14: bad template in step \"a\": syntax error: unexpected end of input, expected expression"
    );
}

#[test]
fn reference_to_a_later_step() {
    let source = r#"version: 1
agent: desk
steps:
  - id: a
    set: {x: "{{ steps.b.output }}"}
  - id: b
    set: {y: 1}
"#;
    assert_eq!(
        error_of(source),
        "spec.yaml:5:14: step \"a\" refers to step \"b\", which runs later"
    );
}

#[test]
fn reference_to_an_unknown_step() {
    let source = r#"version: 1
agent: desk
steps:
  - id: assess
    set: {x: 1}
  - id: refund
    set: {y: "{{ steps.asses.output.amount }}"}
"#;
    assert_eq!(
        error_of(source),
        "spec.yaml:7:14: step \"refund\" refers to unknown step \"asses\""
    );
}

#[test]
fn reference_to_the_step_itself() {
    let source = r#"version: 1
agent: desk
steps:
  - id: a
    approval:
      message: "Again? {{ steps.a.output.approved }}"
"#;
    assert_eq!(
        error_of(source),
        "spec.yaml:6:16: step \"a\" refers to itself (steps.a): a step reads only the outputs of earlier steps"
    );
}

#[test]
fn then_other_than_request_human_approval() {
    let source = r#"version: 1
agent: desk
steps:
  - id: large
    if: "{{ input.amount > 100 }}"
    then: skip
"#;
    assert_eq!(
        error_of(source),
        "spec.yaml:6:11: \"then\" in step \"large\" must be request_human_approval (the only action an if step takes), found \"skip\""
    );
}

#[test]
fn then_without_if() {
    let source = r#"version: 1
agent: desk
steps:
  - id: large
    then: request_human_approval
"#;
    assert_eq!(
        error_of(source),
        "spec.yaml:5:5: \"then\" in step \"large\" is allowed only together with \"if\" (e.g. if: \"{{ input.amount > 100 }}\", then: request_human_approval)"
    );
}

#[test]
fn if_without_braces() {
    let source = r#"version: 1
agent: desk
steps:
  - id: large
    if: input.amount > 100
    then: request_human_approval
"#;
    assert_eq!(
        error_of(source),
        "spec.yaml:5:9: \"if\" in step \"large\" must be an expression in {{ }}, e.g. \"{{ steps.assess.output.amount > 100 }}\", found \"input.amount > 100\""
    );
}

#[test]
fn min_confidence_out_of_range() {
    let source = r#"version: 1
agent: desk
steps:
  - id: assess
    model: {prompt: Rate it, output: json}
    guardrail: {min_confidence: 80}
"#;
    assert_eq!(
        error_of(source),
        "spec.yaml:6:33: \"min_confidence\" in the guardrail of step \"assess\" must be between 0 and 1, found 80"
    );
}

#[test]
fn guardrail_on_text_output() {
    let source = r#"version: 1
agent: desk
steps:
  - id: assess
    model: {prompt: Rate it}
    guardrail: {min_confidence: 0.8}
"#;
    assert_eq!(
        error_of(source),
        "spec.yaml:6:5: the guardrail of step \"assess\" reads output.confidence, but the model's output is text: add output: json to the model, or give the guardrail a confidence expression"
    );
}

#[test]
fn wrong_type_with_as_a_string() {
    let source = r#"version: 1
agent: desk
tools:
  t:
    rust: {}
steps:
  - id: a
    tool: t
    with: order_id
"#;
    assert_eq!(
        error_of(source),
        "spec.yaml:9:11: expected a mapping for \"with\" in step \"a\", found a string"
    );
}

#[test]
fn malformed_secret_reference() {
    let source = r#"version: 1
agent: desk
tools:
  lookup:
    http:
      url: https://shop.example
      headers: {Authorization: "Bearer ${1SHOP_TOKEN}"}
steps:
  - id: a
    tool: lookup
"#;
    assert_eq!(
        error_of(source),
        "spec.yaml:7:32: malformed secret reference \"${1SHOP_TOKEN}\": a name starts with a letter or '_' followed by letters, digits or '_' (write $${ for a literal \"${\")"
    );
}

#[test]
fn empty_secret_reference() {
    let source = r#"version: 1
agent: desk
model:
  api_key: ${}
steps:
  - id: a
    set: {x: 1}
"#;
    assert_eq!(
        error_of(source),
        "spec.yaml:4:12: malformed secret reference \"${}\": a name starts with a letter or '_' followed by letters, digits or '_' (write $${ for a literal \"${\")"
    );
}

#[test]
fn tool_approval_other_than_required() {
    let source = r#"version: 1
agent: desk
tools:
  pay:
    http: {url: https://pay.example}
    approval: always
steps:
  - id: a
    tool: pay
"#;
    assert_eq!(
        error_of(source),
        "spec.yaml:6:15: \"approval\" in tool \"pay\" must be \"required\" (omit it for a tool that runs without a gate), found \"always\""
    );
}

#[test]
fn tool_message_without_gate() {
    let source = r#"version: 1
agent: desk
tools:
  pay:
    http: {url: https://pay.example}
    message: Pay?
steps:
  - id: a
    tool: pay
"#;
    assert_eq!(
        error_of(source),
        "spec.yaml:6:5: \"message\" in tool \"pay\" applies only to a gate: add approval: required or remove it"
    );
}

#[test]
fn model_step_without_prompt() {
    let source = r#"version: 1
agent: desk
steps:
  - id: assess
    model:
      system: You are careful.
"#;
    assert_eq!(
        error_of(source),
        "spec.yaml:6:7: missing required key \"prompt\" in the model of step \"assess\""
    );
}

#[test]
fn args_outside_a_tool() {
    let source = r#"version: 1
agent: desk
steps:
  - id: a
    set: {x: "{{ args.order_id }}"}
"#;
    assert_eq!(
        error_of(source),
        "spec.yaml:5:14: step \"a\" reads \"args.order_id\", but args exists only in a tool's definition"
    );
}

#[test]
fn unknown_template_root() {
    let source = r#"version: 1
agent: desk
steps:
  - id: a
    set: {x: "{{ inputs.order_id }}"}
"#;
    assert_eq!(
        error_of(source),
        "spec.yaml:5:14: step \"a\" reads \"inputs.order_id\": unknown name \"inputs\" (available here: input, trigger, steps, run)"
    );
}

#[test]
fn tool_template_reads_a_step_that_runs_later() {
    let source = r#"version: 1
agent: desk
tools:
  send:
    http: {url: "https://x.example/{{ steps.b.output.id }}"}
steps:
  - id: a
    tool: send
  - id: b
    set: {id: 1}
"#;
    assert_eq!(
        error_of(source),
        "spec.yaml:5:17: tool \"send\" refers to step \"b\", which does not run before step \"a\" that calls the tool"
    );
}

#[test]
fn webhook_path_without_slash() {
    let source = r#"version: 1
agent: desk
trigger:
  webhook: {path: hooks/refund}
steps:
  - id: a
    set: {x: 1}
"#;
    assert_eq!(
        error_of(source),
        "spec.yaml:4:19: \"path\" in trigger.webhook must start with '/', found \"hooks/refund\""
    );
}

#[test]
fn empty_approvers() {
    let source = r#"version: 1
agent: desk
approvals:
  approvers: []
steps:
  - id: a
    approval: {}
"#;
    assert_eq!(
        error_of(source),
        "spec.yaml:4:14: \"approvers\" in approvals is empty: nobody could decide (omit it to let any authenticated caller decide)"
    );
}

#[test]
fn rust_tool_with_options() {
    let source = r#"version: 1
agent: desk
tools:
  score:
    rust: {crate: scoring}
steps:
  - id: a
    tool: score
"#;
    assert_eq!(
        error_of(source),
        "spec.yaml:5:11: \"rust\" in tool \"score\" takes no options: write rust: {} and implement the tool in the exported crate"
    );
}

#[test]
fn tool_with_two_kinds() {
    let source = r#"version: 1
agent: desk
tools:
  score:
    http: {url: https://x.example}
    rust: {}
steps:
  - id: a
    tool: score
"#;
    assert_eq!(
        error_of(source),
        "spec.yaml:6:5: tool \"score\" has two kinds: a tool is either http or rust, not both"
    );
}

#[test]
fn non_string_mapping_key() {
    let source = r#"version: 1
agent: desk
steps:
  - id: a
    set: {200: ok}
"#;
    assert_eq!(
        error_of(source),
        "spec.yaml:5:11: mapping keys must be strings, found an integer (quote it to use it as a key)"
    );
}

#[test]
fn two_documents() {
    let source = r#"version: 1
agent: desk
steps:
  - id: a
    set: {x: 1}
---
version: 1
"#;
    assert_eq!(
        error_of(source),
        "spec.yaml:6:1: a spec is one YAML document, found a second one (remove the '---')"
    );
}

#[test]
fn unsupported_tag() {
    let source = r#"version: 1
agent: desk
steps:
  - id: a
    set: {x: !!binary aGVsbG8=}
"#;
    assert_eq!(
        error_of(source),
        "spec.yaml:5:23: unsupported tag !!binary (a spec may use only !!str, !!int, !!float, !!bool, !!null, !!map and !!seq)"
    );
}

#[test]
fn on_reject_unknown_value() {
    let source = r#"version: 1
agent: desk
steps:
  - id: a
    approval: {on_reject: ignore}
"#;
    assert_eq!(
        error_of(source),
        "spec.yaml:5:27: \"on_reject\" in the approval of step \"a\" must be one of fail, continue, found \"ignore\""
    );
}

#[test]
fn empty_tool_approval() {
    let source = r#"version: 1
agent: desk
tools:
  pay:
    http: {url: https://pay.example}
    approval:
steps:
  - id: a
    tool: pay
"#;
    assert_eq!(
        error_of(source),
        "spec.yaml:6:5: \"approval\" in tool \"pay\" must be \"required\" (omit it for a tool that runs without a gate), found null"
    );
}

#[test]
fn empty_guardrail() {
    let source = r#"version: 1
agent: desk
steps:
  - id: assess
    model: {prompt: Rate it, output: json}
    guardrail:
"#;
    assert_eq!(
        error_of(source),
        "spec.yaml:6:5: expected a mapping for \"guardrail\" in step \"assess\", found null"
    );
}

#[test]
fn every_example_parses() {
    let mut seen = 0;
    for entry in std::fs::read_dir(examples_dir()).expect("examples/") {
        let path = entry.expect("dir entry").path();
        if path.extension().and_then(|e| e.to_str()) != Some("yaml") {
            continue;
        }
        if let Err(e) = Spec::load(&path) {
            panic!("{e}");
        }
        seen += 1;
    }
    assert!(seen >= 3, "expected the example specs, found {seen}");
}

#[test]
fn the_examples_have_the_gates_they_promise() {
    let load = |name: &str| Spec::load(&examples_dir().join(name)).expect(name);
    assert!(load("hello-approval.yaml").has_gate());
    assert!(load("refund-desk.yaml").has_gate());
    assert!(!load("no-gate.yaml").has_gate());
}

fn examples_dir() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("examples")
}

/// A tiny deterministic generator, so failures reproduce without extra crates.
struct XorShift(u64);

impl XorShift {
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

/// Parse and require an answer, never a panic; name the input that panicked.
fn must_not_panic(source: &str) {
    let result = std::panic::catch_unwind(|| {
        let _ = Spec::parse(source, "fuzz.yaml");
    });
    if result.is_err() {
        panic!("Spec::parse panicked on {source:?}");
    }
}

#[test]
fn no_input_makes_the_parser_panic() {
    let mut rng = XorShift(0x9E37_79B9_7F4A_7C15);
    let mut examples = Vec::new();
    for entry in std::fs::read_dir(examples_dir()).expect("examples/") {
        let path = entry.expect("dir entry").path();
        if path.extension().and_then(|e| e.to_str()) == Some("yaml") {
            examples.push(std::fs::read_to_string(&path).expect("read example"));
        }
    }

    // Every truncated prefix of every example.
    for text in &examples {
        for (i, _) in text.char_indices() {
            must_not_panic(&text[..i]);
        }
    }

    // Examples with a few bytes replaced by YAML-significant characters.
    const NOISE: &[u8] = b":-[]{}&*!|>'\"#%@`?,\t\n ${}0aZ.\\~";
    for text in &examples {
        for _ in 0..300 {
            let mut bytes = text.as_bytes().to_vec();
            for _ in 0..1 + rng.below(4) {
                let at = rng.below(bytes.len());
                if let Some(b) = bytes.get_mut(at) {
                    *b = NOISE[rng.below(NOISE.len())];
                }
            }
            must_not_panic(&String::from_utf8_lossy(&bytes));
        }
    }

    // Plain garbage: random bytes of random lengths.
    for _ in 0..500 {
        let len = rng.below(200);
        let bytes: Vec<u8> = (0..len).map(|_| rng.next() as u8).collect();
        must_not_panic(&String::from_utf8_lossy(&bytes));
    }

    // Pathological shapes: deep nesting and alias bombs end in errors.
    must_not_panic(&"[".repeat(10_000));
    must_not_panic(&"- ".repeat(10_000));
    must_not_panic(&format!(
        "a: {}1{}",
        "{b: ".repeat(5_000),
        "}".repeat(5_000)
    ));
    let mut bomb = String::from("a: &a [x, x, x, x, x, x, x, x, x, x]\n");
    for (prev, name) in ["a", "b", "c", "d", "e", "f", "g", "h"]
        .iter()
        .zip(["b", "c", "d", "e", "f", "g", "h", "i"])
    {
        bomb.push_str(&format!(
            "{name}: &{name} [{}]\n",
            vec![format!("*{prev}"); 10].join(", ")
        ));
    }
    must_not_panic(&bomb);
}
