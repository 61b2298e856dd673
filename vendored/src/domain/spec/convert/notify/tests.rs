use std::collections::BTreeMap;

use crate::domain::notices::NoticeEvent;
use crate::domain::spec::{EmailSpec, GateNotify, Spec, StepKind, WebhookSpec};

/// A spec with `notify` as its `approvals.notify` (lines from 4, indented
/// by four) and `gate` as the approval step's keys (lines after it,
/// indented by six).
fn spec_with(notify: &str, gate: &str) -> String {
    format!(
        "version: 1\nagent: desk\napprovals:\n  notify:\n{}\nsteps:\n  - id: check\n    approval:\n      message: ok\n{}\n",
        indent(notify, 4),
        indent(gate, 6)
    )
}

fn indent(text: &str, by: usize) -> String {
    text.lines()
        .map(|l| format!("{}{l}", " ".repeat(by)))
        .collect::<Vec<_>>()
        .join("\n")
}

#[track_caller]
fn parsed(source: &str) -> Spec {
    Spec::parse(source, "t.yaml").unwrap_or_else(|e| panic!("{e}\n{source}"))
}

#[track_caller]
fn refused(source: &str) -> String {
    match Spec::parse(source, "t.yaml") {
        Ok(_) => panic!("parsed:\n{source}"),
        Err(e) => e.to_string(),
    }
}

const HOOK: &str = "webhooks:\n  - url: ${HOOK_URL}\n    secret: ${HOOK_SECRET}";
const MAIL: &str = "email:\n  smtp_url: ${SMTP_URL}\n  from: tollgate@example.com";

fn gate_notify(spec: &Spec) -> &GateNotify {
    match &spec.steps[0].kind {
        StepKind::Approval(a) => &a.policy.notify,
        _ => panic!("approval step"),
    }
}

#[test]
fn the_spec_wide_channels_are_read_as_written() {
    let spec = parsed(&spec_with(
        r#"webhooks:
  - url: ${HOOK_URL}
    secret: ${HOOK_SECRET}
  - url: https://hooks.example/tollgate?team=ops
    secret: ${OPS_SECRET}
    events: [approval.requested, approval.expired]
email:
  smtp_url: smtps://mail.example:465?tls=required
  from: "Tollgate <tollgate@example.com>"
  to:
    alice: alice@example.com
    ops-bot.1: ${OPS_MAIL}
  events: [approval.requested]"#,
        "",
    ));
    let notify = &spec.approvals.notify;
    assert_eq!(
        notify.webhooks,
        [
            WebhookSpec {
                url: "${HOOK_URL}".into(),
                secret: "${HOOK_SECRET}".into(),
                events: None,
            },
            WebhookSpec {
                url: "https://hooks.example/tollgate?team=ops".into(),
                secret: "${OPS_SECRET}".into(),
                events: Some(vec![NoticeEvent::Requested, NoticeEvent::Expired]),
            },
        ]
    );
    assert_eq!(
        notify.email,
        Some(EmailSpec {
            smtp_url: "smtps://mail.example:465?tls=required".into(),
            from: "Tollgate <tollgate@example.com>".into(),
            to: BTreeMap::from([
                ("alice".to_string(), "alice@example.com".to_string()),
                ("ops-bot.1".to_string(), "${OPS_MAIL}".to_string()),
            ]),
            events: Some(vec![NoticeEvent::Requested]),
        })
    );
    assert!(gate_notify(&spec).is_inherited());
}

#[test]
fn a_gate_replaces_the_keys_it_writes_and_inherits_the_others() {
    let spec = parsed(&spec_with(
        &format!("{HOOK}\n{MAIL}"),
        "notify:\n  webhooks: []\n  email: false",
    ));
    assert_eq!(
        gate_notify(&spec),
        &GateNotify {
            webhooks: Some(vec![]),
            email: Some(None),
        }
    );
    let spec = parsed(&spec_with(
        HOOK,
        "notify:\n  email: { smtp_url: \"smtp://relay.internal:25?tls=none\", from: \"${FROM}\", events: [approval.escalated] }",
    ));
    let own = gate_notify(&spec);
    assert_eq!(own.webhooks, None);
    let email = own.email.clone().flatten().expect("the gate's own email");
    assert_eq!(email.smtp_url, "smtp://relay.internal:25?tls=none");
    assert_eq!(email.events, Some(vec![NoticeEvent::Escalated]));
    // Every kind of gate takes it.
    let source = format!(
        "{}tools:\n  pay:\n    http: {{ url: \"https://pay.example\" }}\n    approval: {{ notify: {{ webhooks: [] }} }}\n",
        spec_with(HOOK, "")
            .replace("steps:\n", "")
            .replace("  - id: check\n    approval:\n      message: ok\n", "")
            .trim_end()
            .to_string()
            + "\n"
    ) + "steps:\n  - { id: a, tool: pay }\n  - { id: b, if: \"{{ input.x }}\", then: request_human_approval, notify: { webhooks: [] } }\n  - id: c\n    model: { prompt: hi, output: json }\n    guardrail: { min_confidence: 0.5, notify: { email: false } }\n";
    let source = source.replace("agent: desk\n", "agent: desk\nmodel: { name: small }\n");
    let spec = parsed(&source);
    for (index, expected) in [
        GateNotify {
            webhooks: Some(vec![]),
            email: None,
        },
        GateNotify {
            webhooks: Some(vec![]),
            email: None,
        },
        GateNotify {
            webhooks: None,
            email: Some(None),
        },
    ]
    .into_iter()
    .enumerate()
    {
        assert_eq!(spec.gate_policy(index).map(|p| &p.notify), Some(&expected));
    }
}

#[test]
fn a_literal_secret_is_refused_without_being_quoted() {
    let message = refused(&spec_with(
        "webhooks:\n  - url: ${HOOK_URL}\n    secret: whsec_c2VjcmV0",
        "",
    ));
    assert_eq!(
        message,
        "t.yaml:7:17: \"secret\" in webhook 1 in approvals.notify.webhooks must be a ${NAME} reference, such as ${ORDERS_WEBHOOK_SECRET}, not a literal: the spec's text is stored with every version of it, so a secret written here would be kept in the store; set it in the server's environment"
    );
    assert!(!message.contains("whsec_"));
    let message = refused(&spec_with(
        "webhooks:\n  - url: ${HOOK_URL}\n    secret: ${HOOK_SECRET:-whsec_c2VjcmV0}",
        "",
    ));
    assert!(message.starts_with("t.yaml:7:17: \"secret\" in webhook 1 in approvals.notify.webhooks has a default (${HOOK_SECRET:-...}): the default would be a secret written in the spec"), "{message}");
    assert!(!message.contains("whsec_"));
    // Part of a text is not a reference either.
    refused(&spec_with(
        "webhooks:\n  - url: ${HOOK_URL}\n    secret: whsec_${HOOK_SECRET}",
        "",
    ));
}

#[test]
fn events_are_known_names_each_once() {
    let message = refused(&spec_with(
        "webhooks:\n  - url: ${HOOK_URL}\n    secret: ${HOOK_SECRET}\n    events: [approval.requested, approval.denied]",
        "",
    ));
    assert_eq!(
        message,
        "t.yaml:8:38: unknown event \"approval.denied\" in \"events\" in webhook 1 in approvals.notify.webhooks (the events are: approval.requested, approval.voted, approval.approved, approval.rejected, approval.expired, approval.cancelled, approval.reminded, approval.escalated)"
    );
    let message = refused(&spec_with(
        &format!("{MAIL}\n  events: [approval.voted, approval.voted]"),
        "",
    ));
    assert_eq!(
        message,
        "t.yaml:8:32: \"events\" in approvals.notify.email lists \"approval.voted\" twice"
    );
    let message = refused(&spec_with(&format!("{MAIL}\n  events: []"), ""));
    assert_eq!(
        message,
        "t.yaml:8:15: \"events\" in approvals.notify.email is empty: nothing would be sent (omit it for every event)"
    );
}

#[test]
fn urls_are_checked_as_far_as_they_are_written() {
    let hook = |url: &str| {
        spec_with(
            &format!("webhooks:\n  - url: \"{url}\"\n    secret: ${{S}}"),
            "",
        )
    };
    for ok in [
        "${HOOK_URL}",
        "${HOOK_BASE}/tollgate",
        "https://hooks.example/x/${HOOK_TOKEN}",
        "http://localhost:8080/hook",
        "https://${HOOK_HOST}/hook",
    ] {
        parsed(&hook(ok));
    }
    for (bad, why) in [
        (
            "ftp://files.example/x",
            "the scheme of \"ftp://files.example/x\" is \"ftp\": write a URL starting with http:// or https://",
        ),
        (
            "hooks.example/x",
            "\"hooks.example/x\" is not a URL starting with http:// or https://",
        ),
        (
            "https://user:pw@hooks.example/x",
            "it carries a user name or password",
        ),
        (
            "https://${USER}@hooks.example/x",
            "it carries a user name or password",
        ),
        ("https://", "\"https://\" is not a valid URL (empty host)"),
    ] {
        let message = refused(&hook(bad));
        assert!(
            message.starts_with(
                "t.yaml:6:14: bad \"url\" in webhook 1 in approvals.notify.webhooks: "
            ),
            "{message}"
        );
        assert!(message.contains(why), "{bad}: {message}");
    }
    let message = refused(&spec_with(
        "webhooks:\n  - { url: \"${A}\", secret: \"${S}\" }\n  - { url: \"${A}\", secret: \"${T}\" }",
        "",
    ));
    assert_eq!(
        message,
        "t.yaml:7:16: approvals.notify.webhooks lists the url \"${A}\" twice: list each endpoint once"
    );
}

#[test]
fn an_smtp_url_holds_no_literal_password() {
    let mail = |url: &str| {
        spec_with(
            &format!("email:\n  smtp_url: \"{url}\"\n  from: a@example.com"),
            "",
        )
    };
    for ok in [
        "${SMTP_URL}",
        "smtp://mail.example",
        "smtp://mail.example:587?tls=opportunistic",
        "smtps://mail.example:465/",
        "smtp://apikey:${SMTP_PASSWORD}@smtp.example:587",
        "smtp://${SMTP_HOST}:25",
    ] {
        parsed(&mail(ok));
    }
    let message = refused(&mail("smtp://apikey:hunter2@smtp.example:587"));
    assert_eq!(
        message,
        "t.yaml:6:17: bad \"smtp_url\" in approvals.notify.email: it holds a literal password: the spec's text is stored with every version of it, so the password would be kept in the store; write the whole URL as a ${NAME} reference (smtp_url: ${SMTP_URL}), or the password as one (smtp://user:${SMTP_PASSWORD}@host)"
    );
    assert!(!message.contains("hunter2"));
    for (bad, why) in [
        (
            "https://mail.example",
            "the scheme of \"https://mail.example\" is \"https\": write a URL starting with smtp:// or smtps://",
        ),
        ("smtp://mail.example/inbox", "has a path (\"/inbox\")"),
        (
            "smtp://mail.example?tls=always",
            "has the query tls=always: the only one allowed is",
        ),
        ("smtp://mail.example?auth=plain", "has the query auth=plain"),
    ] {
        let message = refused(&mail(bad));
        assert!(message.contains(why), "{bad}: {message}");
    }
}

#[test]
fn addresses_and_decider_names_are_checked() {
    let mail = |from: &str, to: &str| {
        spec_with(
            &format!("email:\n  smtp_url: ${{SMTP_URL}}\n  from: \"{from}\"\n  to: {{ {to} }}"),
            "",
        )
    };
    parsed(&mail(
        "Tollgate Bot <bot@example.com>",
        "alice: alice@example.com, \"bob@example.com\": \"${BOB}\"",
    ));
    parsed(&mail("${MAIL_FROM}", ""));
    assert_eq!(
        refused(&mail("tollgate", "")),
        "t.yaml:7:13: bad \"from\" in approvals.notify.email: \"tollgate\" is not a mail address: write one such as tollgate@example.com or \"Tollgate <tollgate@example.com>\", or a ${NAME} reference"
    );
    assert_eq!(
        refused(&mail("a@example.com", "\"alice smith\": alice@example.com")),
        "t.yaml:8:13: \"alice smith\" in \"to\" in approvals.notify.email is not a decider's name: write the API-token name the decider approves with (letters, digits, '-', '_', '.', '@')"
    );
    assert_eq!(
        refused(&mail("a@example.com", "alice: alice")),
        "t.yaml:8:20: bad \"alice\" in \"to\" in approvals.notify.email: \"alice\" is not a mail address: write one such as tollgate@example.com or \"Tollgate <tollgate@example.com>\", or a ${NAME} reference"
    );
}

#[test]
fn a_gate_takes_no_slack_and_email_is_a_mapping_or_false() {
    assert_eq!(
        refused(&spec_with(HOOK, "notify:\n  slack: { channel: \"#ops\" }")),
        "t.yaml:13:9: \"slack\" is not accepted in \"notify\" in the approval of step \"check\": Slack is configured once per spec, in approvals.notify.slack (its signing secret is the server's); a gate may set its own webhooks and email"
    );
    assert_eq!(
        refused(&spec_with(HOOK, "notify:\n  email: true")),
        "t.yaml:13:16: expected a mapping (this gate's email), or false (no mail for this gate) for \"email\" in the notify of the approval of step \"check\", found a boolean"
    );
    let message = refused(&spec_with(HOOK, "notify:\n  pager: x"));
    assert!(message.contains("unknown key \"pager\""), "{message}");
    assert!(message.contains("(allowed: webhooks, email)"), "{message}");
    let message = refused(&spec_with(
        HOOK,
        "notify:\n  webhooks: [{ url: \"${U}\", secret: oops }]",
    ));
    assert!(
        message.starts_with("t.yaml:13:43: \"secret\" in webhook 1 in the webhooks of the approval of step \"check\" must be a ${NAME} reference"),
        "{message}"
    );
}
