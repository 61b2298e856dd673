//! Where the notices of a gate go: the spec's `approvals.notify` with the
//! gate's own `notify:` over it (DESIGN §14), resolved when a run pauses
//! and stored with the pause, values as written.

use super::Spec;
use crate::domain::notices::{EmailRoute, NoticeRoutes, WebhookRoute};

impl Spec {
    /// The routes of the spec's `approvals.notify` alone: where the
    /// notices of a gate request (`POST /gates`, MCP) go.
    pub fn approvals_notice_routes(&self) -> NoticeRoutes {
        // No step has this index, so no gate's own `notify:` applies.
        self.notice_routes(usize::MAX)
    }

    /// The routes of the gate at `step_index`: each key of the gate's
    /// `notify:` that is written replaces the spec's (`webhooks: []` and
    /// `email: false` turn that channel off for the gate), each left out
    /// inherits `approvals.notify`. Mail carries `approvals.approvers`
    /// (who may decide a gate without rules), and Slack its channel when
    /// `approvals.notify.slack` is set: Slack is per spec, never per gate.
    /// A step without a gate gets the spec's routes.
    pub fn notice_routes(&self, step_index: usize) -> NoticeRoutes {
        let spec = &self.approvals.notify;
        let own = self.gate_policy(step_index).map(|p| &p.notify);
        let webhooks = own
            .and_then(|n| n.webhooks.as_ref())
            .unwrap_or(&spec.webhooks);
        let email = match own.and_then(|n| n.email.as_ref()) {
            Some(own) => own.as_ref(),
            None => spec.email.as_ref(),
        };
        NoticeRoutes {
            webhooks: webhooks
                .iter()
                .map(|hook| WebhookRoute {
                    url: hook.url.clone(),
                    secret: hook.secret.clone(),
                    events: hook.events.clone(),
                })
                .collect(),
            email: email.map(|email| EmailRoute {
                smtp_url: email.smtp_url.clone(),
                from: email.from.clone(),
                to: email.to.clone(),
                approvers: self.approvals.approvers.clone(),
                events: email.events.clone(),
            }),
            slack: spec.slack.as_ref().map(|slack| slack.channel.clone()),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::domain::notices::NoticeEvent;

    /// A spec whose `approvals.notify` has a webhook, mail and Slack, and
    /// one gate of each kind: `plain` inherits, `quiet` turns webhooks and
    /// mail off, `own` has its own of both, `tool` (a tool's gate) its own
    /// webhooks only, `guard` (a guardrail) no mail; `note` is no gate.
    const SPEC: &str = r##"
version: 1
agent: desk
approvals:
  approvers: [alice, carol@example.com]
  notify:
    slack: { bot_token: "${SLACK_BOT_TOKEN}", channel: "#approvals", signing_secret: "${SLACK_SIGNING_SECRET}" }
    webhooks:
      - { url: "${HOOK_URL}", secret: "${HOOK_SECRET}" }
    email:
      smtp_url: "${SMTP_URL}"
      from: tollgate@example.com
      to: { alice: alice@example.com }
      events: [approval.requested]
model: { name: small }
tools:
  pay:
    http: { url: "https://pay.example" }
    approval:
      notify:
        webhooks: [{ url: "${PAY_HOOK}", secret: "${PAY_SECRET}", events: [approval.approved] }]
steps:
  - id: plain
    approval: { message: hi }
  - id: quiet
    approval: { notify: { webhooks: [], email: false } }
  - id: own
    if: "{{ input.big }}"
    then: request_human_approval
    notify:
      webhooks: [{ url: "https://ops.example/hook", secret: "${OPS_SECRET}" }]
      email: { smtp_url: "smtp://relay.example:25", from: ops@example.com, to: { bob: "${BOB_MAIL}" } }
  - id: tool
    tool: pay
  - id: guard
    model: { prompt: hi, output: json }
    guardrail: { min_confidence: 0.5, notify: { email: false } }
  - id: note
    set: { x: 1 }
"##;

    fn spec() -> Spec {
        Spec::parse(SPEC, "routes.yaml").unwrap_or_else(|e| panic!("{e}"))
    }

    fn hook(url: &str, secret: &str, events: Option<Vec<NoticeEvent>>) -> WebhookRoute {
        WebhookRoute {
            url: url.into(),
            secret: secret.into(),
            events,
        }
    }

    fn approvers() -> Option<Vec<String>> {
        Some(vec!["alice".into(), "carol@example.com".into()])
    }

    fn spec_email() -> EmailRoute {
        EmailRoute {
            smtp_url: "${SMTP_URL}".into(),
            from: "tollgate@example.com".into(),
            to: BTreeMap::from([("alice".into(), "alice@example.com".into())]),
            approvers: approvers(),
            events: Some(vec![NoticeEvent::Requested]),
        }
    }

    fn slack() -> Option<String> {
        Some("#approvals".into())
    }

    #[test]
    fn a_gate_without_notify_inherits_the_spec_and_slack_is_always_the_specs() {
        let spec = spec();
        let inherited = NoticeRoutes {
            webhooks: vec![hook("${HOOK_URL}", "${HOOK_SECRET}", None)],
            email: Some(spec_email()),
            slack: slack(),
        };
        assert_eq!(spec.notice_routes(0), inherited);
        // A step without a gate, or past the end: the spec's.
        assert_eq!(spec.notice_routes(5), inherited);
        assert_eq!(spec.notice_routes(99), inherited);
    }

    #[test]
    fn a_key_written_replaces_the_specs_and_one_left_out_inherits() {
        let spec = spec();
        assert_eq!(
            spec.notice_routes(1),
            NoticeRoutes {
                webhooks: vec![],
                email: None,
                slack: slack(),
            }
        );
        assert_eq!(
            spec.notice_routes(2),
            NoticeRoutes {
                webhooks: vec![hook("https://ops.example/hook", "${OPS_SECRET}", None)],
                email: Some(EmailRoute {
                    smtp_url: "smtp://relay.example:25".into(),
                    from: "ops@example.com".into(),
                    to: BTreeMap::from([("bob".into(), "${BOB_MAIL}".into())]),
                    approvers: approvers(),
                    events: None,
                }),
                slack: slack(),
            }
        );
        assert_eq!(
            spec.notice_routes(3),
            NoticeRoutes {
                webhooks: vec![hook(
                    "${PAY_HOOK}",
                    "${PAY_SECRET}",
                    Some(vec![NoticeEvent::Approved])
                )],
                email: Some(spec_email()),
                slack: slack(),
            }
        );
        assert_eq!(
            spec.notice_routes(4),
            NoticeRoutes {
                webhooks: vec![hook("${HOOK_URL}", "${HOOK_SECRET}", None)],
                email: None,
                slack: slack(),
            }
        );
    }

    #[test]
    fn a_spec_without_notify_has_no_routes() {
        let spec = Spec::parse(
            "version: 1\nagent: desk\nsteps:\n  - id: a\n    approval: { message: hi }\n",
            "t.yaml",
        )
        .unwrap_or_else(|e| panic!("{e}"));
        assert!(spec.notice_routes(0).is_empty());
        // A gate may add what the spec does not have.
        let spec = Spec::parse(
            "version: 1\nagent: desk\nsteps:\n  - id: a\n    approval: { notify: { webhooks: [{ url: \"${U}\", secret: \"${S}\" }] } }\n",
            "t.yaml",
        )
        .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            spec.notice_routes(0),
            NoticeRoutes {
                webhooks: vec![hook("${U}", "${S}", None)],
                ..NoticeRoutes::default()
            }
        );
    }
}
