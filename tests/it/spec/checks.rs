//! What `tollgate validate` checks of the parts only a run fills in (URLs,
//! headers, gate payloads), and what it leaves to the run: a templated
//! value that may still be right passes, and when the run finds it wrong
//! the run fails with a message that names the step.

use serde_json::Value;

use crate::common::{Workspace, assert_exit, assert_success, events, stderr, stdout};

/// Each of these is valid only with the values a run gives it, so
/// validation must let it through.
const VALID_UNTIL_A_VALUE_SAYS_OTHERWISE: &str = r#"version: 1
agent: desk
trigger:
  schedule:
    - cron: "0 9 29 2 *"
tools:
  by_base:
    http: { url: "{{ args.base }}/orders" }
  by_secret:
    http: { url: "${SHOP_URL}/orders/{{ args.id }}" }
  by_host:
    http: { url: "https://{{ args.host }}/x" }
  by_port:
    http: { url: "https://shop.example:{{ args.port }}/x" }
  by_scheme:
    http: { url: "http{{ 's' if args.tls }}://shop.example/x" }
  by_branch:
    http:
      url: "{% if args.eu %}https://eu.shop.example{% else %}https://us.shop.example{% endif %}/x"
  fixed:
    http:
      method: POST
      url: HTTPS://pay.example/refunds?source=tollgate
      headers:
        Authorization: "Bearer ${PAY_TOKEN}"
        X-Note: "{{ args.note }}"
      idempotency: { header: X-Request-Id }
steps:
  - id: draft
    set: { amount: 5 }
  - id: close
    approval:
      payload: "{{ steps.draft.output }}"
      ttl: 1w2d3h4m5s6ms
  - id: big
    if: "{{ steps.draft.output.amount > 1 }}"
    then: request_human_approval
    payload: { amount: "{{ steps.draft.output.amount }}" }
"#;

#[test]
fn templated_parts_a_value_may_still_make_right_are_left_to_the_run() {
    let ws = Workspace::new(VALID_UNTIL_A_VALUE_SAYS_OTHERWISE);
    let out = ws.validate();
    assert_success(&out);
}

#[test]
fn the_cli_refuses_each_with_the_position_of_the_value() {
    let ws = Workspace::new("version: 1\nagent: desk\n");
    for (spec, at, says) in [
        (
            "tools:\n  t:\n    http: {url: \"not a url\"}\nsteps:\n  - id: a\n    tool: t\n",
            "5:17",
            "not an absolute http or https URL",
        ),
        (
            "tools:\n  t:\n    http: {url: \"file:///etc/passwd\"}\nsteps:\n  - id: a\n    tool: t\n",
            "5:17",
            "\"file\"",
        ),
        (
            "trigger:\n  schedule:\n    - cron: \"0 0 30 2 *\"\nsteps:\n  - id: a\n    set: {x: 1}\n",
            "5:13",
            "never fires",
        ),
        (
            "steps:\n  - id: a\n    dedupe: {key: k, ttl: 1h1h}\n",
            "5:27",
            "appears twice",
        ),
        (
            "trigger:\n  webhook: {path: /runs/hook}\nsteps:\n  - id: a\n    set: {x: 1}\n",
            "4:19",
            "clashes with the API's route /runs (it lies under it)",
        ),
        (
            "tools:\n  t:\n    http:\n      url: https://h.example\n      headers: {X-A: \"1\\r\\nX-B: 2\"}\nsteps:\n  - id: a\n    tool: t\n",
            "7:22",
            "control character",
        ),
        (
            "steps:\n  - id: a\n    approval: {payload: \"ok?\"}\n",
            "5:25",
            "must be a mapping of fields",
        ),
    ] {
        ws.write_spec(&format!("version: 1\nagent: desk\n{spec}"));
        let out = ws.validate();
        assert_exit(&out, 2);
        let err = stderr(&out);
        let expected = format!("{}:{at}: ", ws.spec_arg());
        assert!(err.contains(&expected), "{spec}\nwanted {expected}\n{err}");
        assert!(err.contains(says), "{spec}\n{err}");
    }
}

const PAYLOAD_FROM_INPUT: &str = r#"version: 1
agent: desk
steps:
  - id: close
    approval:
      message: Close?
      payload: "{{ input.details }}"
"#;

/// `tollgate run --persist --json` with `input`: its events.
fn run(ws: &Workspace, input: &str) -> (std::process::Output, Vec<Value>) {
    let out = ws
        .tollgate()
        .args([
            "run",
            ws.spec_arg(),
            "--persist",
            "--json",
            "--input",
            input,
        ])
        .output()
        .expect("run tollgate");
    let events = events(&stdout(&out));
    (out, events)
}

#[test]
fn a_payload_expression_that_gives_no_mapping_fails_the_run_naming_the_step() {
    let ws = Workspace::new(PAYLOAD_FROM_INPUT);
    assert_success(&ws.validate());

    for (input, kind) in [
        (r#"{"details": "just text"}"#, "a string"),
        (r#"{"details": [1, 2]}"#, "an array"),
        (r#"{"details": 7}"#, "a number"),
    ] {
        let (out, events) = run(&ws, input);
        let failed = events
            .iter()
            .find(|e| e["type"] == "run_failed")
            .unwrap_or_else(|| panic!("{input}: no run_failed in {events:?}\n{}", stderr(&out)));
        let error = failed["error"].as_str().unwrap_or_default();
        assert!(error.starts_with("step \"close\": "), "{error}");
        assert!(
            error.contains("{{ input.details }}") && error.contains(kind),
            "{input}: {error}"
        );
        assert!(
            !events.iter().any(|e| e["type"] == "awaiting_approval"),
            "{input}: paused on a payload that is no mapping: {events:?}"
        );
    }

    // A mapping pauses, and so does null (as without `payload:`).
    for (input, payload) in [
        (r#"{"details": {"order": "A1"}}"#, r#"{"order":"A1"}"#),
        (r#"{"details": null}"#, "null"),
    ] {
        let (out, events) = run(&ws, input);
        assert_success(&out);
        let paused = events
            .iter()
            .find(|e| e["type"] == "awaiting_approval")
            .unwrap_or_else(|| panic!("{input}: no pause in {events:?}"));
        assert_eq!(paused["payload"].to_string(), payload, "{input}");
    }
}
