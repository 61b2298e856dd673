//! The spec language end to end: the design example, webhook paths, cron and HTTP details.

use super::super::*;
use serde_json::json;
use std::time::Duration;

/// DESIGN.md §2, as in examples/refund-desk.yaml (inlined: this crate is
/// copied into exports without the examples).
const DESIGN_EXAMPLE: &str = r##"version: 1
agent: refund-desk                 # agent id: lowercase letters, digits, '-'
description: Refund small orders, ask a person for large ones.

trigger:
  webhook:
    path: /hooks/refund            # POST here starts a run; the JSON body is `input`
    secret: ${REFUND_HOOK_SECRET}  # optional: X-Tollgate-Signature: sha256=<hex HMAC of raw body>
  schedule:
    - cron: "0 9 * * 1-5"
      input: { batch: daily }

approvals:                         # defaults for every gate in this spec
  ttl: 7d                          # default 7d; per gate `ttl:` overrides
  approvers: [alice, "slack:U024BE7LH"]   # optional allow-list of identities
  notify:
    slack:
      bot_token: ${SLACK_BOT_TOKEN}
      channel: "#refunds"
      signing_secret: ${SLACK_SIGNING_SECRET}

model:                             # any OpenAI-compatible chat-completions endpoint
  base_url: ${OPENAI_BASE_URL}
  api_key: ${OPENAI_API_KEY}
  name: gpt-4o-mini

tools:
  lookup_order:
    http:
      method: GET
      url: "https://shop.example/orders/{{ args.order_id }}"
      headers: { Authorization: "Bearer ${SHOP_TOKEN}" }
  issue_refund:
    http:
      method: POST
      url: https://pay.example/refunds
      json: { order: "{{ args.order_id }}", amount: "{{ args.amount }}" }
    approval: required             # every call pauses first (phase before)
    message: "Refund {{ args.amount }} on order {{ args.order_id }}?"
  score_risk:
    rust: {}                       # implemented in Rust inside an exported crate

steps:
  - id: order
    tool: lookup_order
    with: { order_id: "{{ input.order_id }}" }
  - id: once
    dedupe: { key: "refund-{{ input.order_id }}", ttl: 24h }
  - id: assess
    model:
      prompt: "Order: {{ steps.order.output | tojson }}. Reply JSON {refund, amount, confidence}."
      output: json
    guardrail: { min_confidence: 0.8 }      # below it: pause AFTER the step ran
  - id: large
    if: "{{ steps.assess.output.amount > 100 }}"
    then: request_human_approval
    message: "Large refund: {{ steps.assess.output.amount }}"
  - id: refund
    tool: issue_refund
    with: { order_id: "{{ input.order_id }}", amount: "{{ steps.assess.output.amount }}" }
  - id: close
    approval: { message: "Close the ticket?", ttl: 2d }
  - id: result
    set: { refunded: "{{ steps.refund.output.id }}" }
"##;

fn parse(source: &str) -> Spec {
    Spec::parse(source, "t.yaml").unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn the_design_example_converts_to_the_typed_model() {
    let spec = parse(DESIGN_EXAMPLE);
    assert_eq!(spec.version, 1);
    assert_eq!(spec.agent, "refund-desk");
    let hook = spec.trigger.webhook.as_ref().unwrap();
    assert_eq!(hook.path, "/hooks/refund");
    assert_eq!(hook.secret.as_deref(), Some("${REFUND_HOOK_SECRET}"));
    assert_eq!(spec.trigger.schedule[0].cron, "0 9 * * 1-5");
    assert_eq!(spec.trigger.schedule[0].input, json!({"batch": "daily"}));
    assert_eq!(spec.approvals.ttl, Duration::from_secs(7 * 86_400));
    assert_eq!(
        spec.approvals.approvers.as_deref(),
        Some(&["alice".to_string(), "slack:U024BE7LH".to_string()][..])
    );
    assert_eq!(
        spec.approvals.notify.slack.as_ref().unwrap().channel,
        "#refunds"
    );
    assert_eq!(
        spec.model.as_ref().unwrap().name.as_deref(),
        Some("gpt-4o-mini")
    );

    let refund = &spec.tools["issue_refund"];
    assert!(refund.approval_required);
    let ToolKind::Http(http) = &refund.kind else {
        panic!("http tool")
    };
    assert_eq!(http.method, "POST");
    assert_eq!(
        http.json,
        Some(json!({"order": "{{ args.order_id }}", "amount": "{{ args.amount }}"}))
    );
    assert_eq!(
        http.idempotency,
        IdempotencySpec::Header("Idempotency-Key".into())
    );
    assert_eq!(spec.tools["score_risk"].kind, ToolKind::Rust);

    let kinds: Vec<&str> = spec
        .steps
        .iter()
        .map(|s| match &s.kind {
            StepKind::Tool { .. } => "tool",
            StepKind::Model(_) => "model",
            StepKind::Approval(_) => "approval",
            StepKind::Gate(_) => "gate",
            StepKind::Dedupe(_) => "dedupe",
            StepKind::Set { .. } => "set",
        })
        .collect();
    assert_eq!(
        kinds,
        ["tool", "dedupe", "model", "gate", "tool", "approval", "set"]
    );
    let StepKind::Dedupe(dedupe) = &spec.steps[1].kind else {
        panic!("dedupe")
    };
    assert_eq!(dedupe.ttl, Duration::from_secs(86_400));
    assert!(dedupe.release_on_failure);
    let StepKind::Model(model) = &spec.steps[2].kind else {
        panic!("model")
    };
    assert_eq!(model.output, ModelOutput::Json);
    let guardrail = model.guardrail.as_ref().unwrap();
    assert_eq!(guardrail.min_confidence, 0.8);
    assert_eq!(guardrail.confidence, "{{ output.confidence }}");
    let StepKind::Approval(close) = &spec.steps[5].kind else {
        panic!("approval")
    };
    assert_eq!(close.ttl, Some(Duration::from_secs(2 * 86_400)));
    assert_eq!(close.on_reject, OnReject::Fail);
    assert_eq!(spec.document["agent"], json!("refund-desk"));
    assert_eq!(spec.hash, SpecHash::of_document(&spec.document));
}

#[test]
fn webhook_paths_are_request_paths_off_the_api_routes() {
    for ok in [
        "/hooks/refund",
        "/hooks/{id}",
        "/runs-hook",
        "/approvalsx",
        "/a-b",
        "/ui2",
        "/hooks/%41",
        "/hooks/~x_y.z",
    ] {
        assert_eq!(WebhookTrigger::path_problem(ok), None, "{ok}");
    }
    for (bad, says) in [
        ("/", "root"),
        ("/runs", "clashes with the API's route /runs:"),
        ("/runs/", "route /runs (it lies under it)"),
        ("/runs/x/approve", "route /runs (it lies under it)"),
        ("/a", "route /a"),
        ("/a/b/c", "route /a"),
        ("/ui", "route /ui"),
        ("/ui/login", "route /ui"),
        ("/slack/actions", "route /slack"),
        ("/metrics", "route /metrics"),
        ("/openapi.json", "route /openapi.json"),
        ("/healthz", "route /healthz"),
        ("/readyz", "route /readyz"),
        ("/approvals/x", "route /approvals"),
        ("/hooks/x?y=1", "query string"),
        ("/hooks#x", "fragment"),
        ("/hooks x", "' '"),
        ("/hooks/\u{e9}", "'\u{e9}'"),
        ("/hooks/\n", "'\\n'"),
        ("/hooks/../runs", "'..' segment"),
        ("/hooks/./x", "'.' or '..' segment"),
    ] {
        let problem = WebhookTrigger::path_problem(bad).unwrap_or_else(|| panic!("{bad:?} passed"));
        assert!(problem.contains(says), "{bad:?}: {problem}");
    }
}

fn cron(expression: &str) -> Result<croner::Cron, String> {
    ScheduleTrigger {
        cron: expression.into(),
        input: json!({}),
    }
    .parse_cron()
}

#[test]
fn a_cron_that_can_fire_passes_and_one_that_never_can_is_refused() {
    // 29 February, the fifth Friday of February (once in 28 years), the
    // last day of February, and day-of-month OR day-of-week.
    for ok in [
        "0 0 29 2 *",
        "0 0 * 2 5#5",
        "0 0 L 2 *",
        "0 0 30 2 5",
        "0 0 31 * *",
        "30 0 0 29 2 *",
    ] {
        assert!(cron(ok).is_ok(), "{ok}: {:?}", cron(ok).err());
    }
    for never in [
        "0 0 30 2 *",
        "0 0 31 4 *",
        "0 0 31 2,4,6,9,11 *",
        "0 0 30-31 2 *",
        "0 0 0 1 1 * 2001",
    ] {
        let err = cron(never)
            .err()
            .unwrap_or_else(|| panic!("{never} passed"));
        assert!(err.contains("never fires"), "{never}: {err}");
    }
}

#[test]
fn http_details_and_defaults() {
    let spec = parse(
        r#"version: 1
agent: a
tools:
  t:
    http:
      method: patch
      url: https://x.example
      ok_status: [404, 409]
      retry: { attempts: 3 }
      idempotency: false
  u:
    http: { url: https://x.example, idempotency: { header: X-Request-Id }, body: raw }
steps:
  - id: one
    tool: t
  - id: two
    tool: u
  - id: three
    approval:
  - id: four
    approval: { on_reject: continue, payload: { n: 1, x: "{{ input.x }}" } }
"#,
    );
    let ToolKind::Http(t) = &spec.tools["t"].kind else {
        panic!()
    };
    assert_eq!(t.method, "PATCH");
    assert_eq!(t.ok_status, [404, 409]);
    assert_eq!(
        t.retry,
        Some(RetrySpec {
            attempts: 3,
            backoff: Duration::from_secs(1)
        })
    );
    assert_eq!(t.idempotency, IdempotencySpec::Off);
    let ToolKind::Http(u) = &spec.tools["u"].kind else {
        panic!()
    };
    assert_eq!(u.method, "GET");
    assert_eq!(
        u.idempotency,
        IdempotencySpec::Header("X-Request-Id".into())
    );
    assert_eq!(u.body.as_deref(), Some("raw"));
    assert_eq!(
        spec.steps[0].kind,
        StepKind::Tool {
            tool: "t".into(),
            with: json!({})
        }
    );
    let StepKind::Approval(four) = &spec.steps[3].kind else {
        panic!()
    };
    assert_eq!(four.on_reject, OnReject::Continue);
    assert_eq!(four.payload, Some(json!({"n": 1, "x": "{{ input.x }}"})));
    assert!(matches!(spec.steps[2].kind, StepKind::Approval(_)));
}
