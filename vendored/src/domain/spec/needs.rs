//! What a spec needs from the environment to run: every `${NAME}` it
//! references without a default. Checked before a server binds (and by
//! `tollgate validate --env`), so a missing variable stops a deploy at
//! start-up instead of failing the first run that reaches the call, hours
//! later, maybe after a person approved it.

use std::collections::BTreeMap;

use serde_json::Value;

use super::Spec;
use crate::support::secrets;

/// A variable the spec cannot run without, and the first place (a path
/// into the document, such as `steps[2].call.headers.Authorization`) that
/// references it without a default.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequiredSecret {
    pub name: String,
    pub at: String,
}

/// A required variable that is not set: its name and where the spec needs
/// it. Never holds a value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MissingSecret {
    pub name: String,
    pub at: String,
}

impl std::fmt::Display for MissingSecret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "environment variable {} is not set (the spec needs it at {})",
            self.name, self.at
        )
    }
}

/// One `${NAME}` reference in the spec: the variable, where it is (a
/// dotted path into the document such as
/// `tools.lookup_order.http.headers.Authorization`, a key quoted when it
/// would be ambiguous), and its `${NAME:-default}` fallback.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SecretUse {
    pub name: String,
    pub at: String,
    pub default: Option<String>,
}

impl Spec {
    /// Every `${NAME}` reference, in document order.
    pub fn secret_uses(&self) -> Vec<SecretUse> {
        let mut uses = Vec::new();
        collect_uses(&self.document, &mut String::new(), &mut uses);
        uses
    }

    /// Every variable referenced without a default (`${NAME}`, not
    /// `${NAME:-default}`), sorted by name, each with the first place that
    /// needs it. A name with a default in one place and none in another is
    /// required.
    pub fn required_secrets(&self) -> Vec<RequiredSecret> {
        let mut found = BTreeMap::new();
        for SecretUse { name, at, default } in self.secret_uses() {
            if default.is_none() {
                found.entry(name).or_insert(at);
            }
        }
        found
            .into_iter()
            .map(|(name, at)| RequiredSecret { name, at })
            .collect()
    }

    /// [`Spec::missing_secrets`] of what running its steps needs: every
    /// variable but those only the trigger (`trigger.*`: checking a
    /// webhook's signature) and the notifiers (`approvals.*`: Slack, mail,
    /// webhooks, which the server's worker sends) reference. What a
    /// process that resumes a run after a decision must have before it
    /// claims (`AgentRun`'s decision check).
    pub fn missing_secrets_to_run(&self, is_set: impl Fn(&str) -> bool) -> Vec<MissingSecret> {
        let mut missing: BTreeMap<String, String> = BTreeMap::new();
        for SecretUse { name, at, default } in self.secret_uses() {
            let runs_steps = !(at.starts_with("trigger") || at.starts_with("approvals"));
            if default.is_none() && runs_steps && !is_set(&name) {
                missing.entry(name).or_insert(at);
            }
        }
        missing
            .into_iter()
            .map(|(name, at)| MissingSecret { name, at })
            .collect()
    }

    /// The required variables `is_set` does not know (normally the
    /// process environment: `|name| std::env::var_os(name).is_some()`).
    /// A variable set to the empty string is set, as it is when a call
    /// resolves it.
    pub fn missing_secrets(&self, is_set: impl Fn(&str) -> bool) -> Vec<MissingSecret> {
        self.required_secrets()
            .into_iter()
            .filter(|required| !is_set(&required.name))
            .map(|RequiredSecret { name, at }| MissingSecret { name, at })
            .collect()
    }
}

/// Walk the document, keeping the path to the current value in `path`.
fn collect_uses(value: &Value, path: &mut String, uses: &mut Vec<SecretUse>) {
    match value {
        Value::String(text) => {
            for reference in secrets::references(text) {
                uses.push(SecretUse {
                    name: reference.name.to_string(),
                    at: if path.is_empty() {
                        "(top)".into()
                    } else {
                        path.clone()
                    },
                    default: reference.default.map(str::to_string),
                });
            }
        }
        Value::Array(items) => {
            for (index, item) in items.iter().enumerate() {
                let len = path.len();
                path.push_str(&format!("[{index}]"));
                collect_uses(item, path, uses);
                path.truncate(len);
            }
        }
        Value::Object(map) => {
            for (key, item) in map {
                let len = path.len();
                if !path.is_empty() {
                    path.push('.');
                }
                path.push_str(&path_key(key));
                collect_uses(item, path, uses);
                path.truncate(len);
            }
        }
        _ => {}
    }
}

/// A key as it reads in a dotted path; quoted when it would be ambiguous.
fn path_key(key: &str) -> String {
    let plain = !key.is_empty()
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    if plain {
        key.to_string()
    } else {
        format!("{key:?}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(yaml: &str) -> Spec {
        Spec::parse(yaml, "needs.yaml").expect("valid spec")
    }

    const SPEC: &str = r#"
version: 1
agent: needs
trigger:
  webhook:
    path: /hooks/x
    secret: ${HOOK_SECRET}
tools:
  charge:
    http:
      method: POST
      url: ${PAYMENTS_URL:-https://payments.example}/charge
      headers:
        Authorization: Bearer ${PAYMENTS_TOKEN}
steps:
  - id: pay
    tool: charge
    with:
      note: "${PAYMENTS_URL} and $${NOT_A_REF}"
"#;

    #[test]
    fn a_reference_without_a_default_anywhere_is_required() {
        let required = spec(SPEC).required_secrets();
        let names: Vec<(&str, &str)> = required
            .iter()
            .map(|r| (r.name.as_str(), r.at.as_str()))
            .collect();
        assert_eq!(
            names,
            [
                ("HOOK_SECRET", "trigger.webhook.secret"),
                ("PAYMENTS_TOKEN", "tools.charge.http.headers.Authorization"),
                ("PAYMENTS_URL", "steps[0].with.note"),
            ]
        );
    }

    #[test]
    fn missing_names_only_the_unset_ones_and_never_a_value() {
        let spec = spec(SPEC);
        let set = ["HOOK_SECRET", "PAYMENTS_URL"];
        let missing = spec.missing_secrets(|name| set.contains(&name));
        assert_eq!(
            missing,
            [MissingSecret {
                name: "PAYMENTS_TOKEN".into(),
                at: "tools.charge.http.headers.Authorization".into(),
            }]
        );
        assert_eq!(
            missing[0].to_string(),
            "environment variable PAYMENTS_TOKEN is not set (the spec needs it at \
             tools.charge.http.headers.Authorization)"
        );
        assert!(spec.missing_secrets(|_| true).is_empty());
    }

    /// Where notices go needs its variables as Slack's tokens do: an
    /// exported server's TOLLGATE.md lists them, and `serve` stops on an unset
    /// one before it binds, not at the first notice.
    #[test]
    fn notification_references_are_required_like_slacks() {
        let spec = spec(
            r##"
version: 1
agent: needs
approvals:
  notify:
    slack: { bot_token: "${SLACK_BOT_TOKEN}", channel: "#ops", signing_secret: "${SLACK_SIGNING_SECRET}" }
    webhooks:
      - { url: "${HOOK_URL}", secret: "${HOOK_SECRET}" }
    email:
      smtp_url: "${SMTP_URL}"
      from: "${MAIL_FROM:-tollgate@example.com}"
      to: { alice: "${ALICE_MAIL}" }
steps:
  - id: check
    approval:
      notify:
        webhooks: [{ url: "https://ops.example/hook", secret: "${OPS_HOOK_SECRET}" }]
"##,
        );
        let required: Vec<(String, String)> = spec
            .required_secrets()
            .into_iter()
            .map(|r| (r.name, r.at))
            .collect();
        let expected = [
            ("ALICE_MAIL", "approvals.notify.email.to.alice"),
            ("HOOK_SECRET", "approvals.notify.webhooks[0].secret"),
            ("HOOK_URL", "approvals.notify.webhooks[0].url"),
            (
                "OPS_HOOK_SECRET",
                "steps[0].approval.notify.webhooks[0].secret",
            ),
            ("SLACK_BOT_TOKEN", "approvals.notify.slack.bot_token"),
            (
                "SLACK_SIGNING_SECRET",
                "approvals.notify.slack.signing_secret",
            ),
            ("SMTP_URL", "approvals.notify.email.smtp_url"),
        ]
        .map(|(name, at)| (name.to_string(), at.to_string()));
        assert_eq!(required, expected);
        let missing = spec.missing_secrets(|name| name != "HOOK_SECRET");
        assert_eq!(
            missing.iter().map(ToString::to_string).collect::<Vec<_>>(),
            [
                "environment variable HOOK_SECRET is not set (the spec needs it at approvals.notify.webhooks[0].secret)"
            ]
        );
    }
}
