//! What a spec needs from the build: the runtime's optional cargo features
//! its steps and notices use. `tollgate export` turns on exactly these in
//! the exported Cargo.toml, from the same spec it embeds, so an export has
//! what its spec needs by construction; a server checks again at start
//! (a hand-edited Cargo.toml, another version of the spec) and refuses
//! with the feature's name rather than failing the first call, maybe
//! after a person approved it.

use super::{Spec, StepKind};
use crate::domain::policy::GatePolicy;

/// An optional part of the runtime, by its cargo feature.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Feature {
    /// reqwest over rustls: `http:` tools, `model:` steps, Slack, webhooks.
    HttpClient,
    /// lettre: email notices.
    Email,
}

impl Feature {
    pub const ALL: [Feature; 2] = [Feature::HttpClient, Feature::Email];

    /// The cargo feature's name, as written in Cargo.toml.
    pub fn name(self) -> &'static str {
        match self {
            Feature::HttpClient => "http-client",
            Feature::Email => "email",
        }
    }

    /// Whether this build of the runtime has it.
    pub fn enabled(self) -> bool {
        match self {
            Feature::HttpClient => cfg!(feature = "http-client"),
            Feature::Email => cfg!(feature = "email"),
        }
    }
}

/// A feature the spec needs and the first place that needs it (such as
/// `tools.lookup (an http tool)`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NeededFeature {
    pub feature: Feature,
    pub at: String,
}

/// A feature the spec needs that this build was compiled without.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "{at} needs the runtime's `{feature}` feature, which this server was built without \
     (`tollgate export` chooses features from the spec it exports): add \"{feature}\" to \
     the `features` of tollgate-runtime in Cargo.toml, or re-export, and rebuild",
    feature = .feature.name()
)]
pub struct MissingFeature {
    pub feature: Feature,
    pub at: String,
}

impl Spec {
    /// The optional features this spec uses, each once, in [`Feature::ALL`]
    /// order, with the first place that needs it.
    pub fn needed_features(&self) -> Vec<NeededFeature> {
        let mut needs: Vec<NeededFeature> = Vec::new();
        let mut need = |feature: Feature, at: String| {
            if !needs.iter().any(|n| n.feature == feature) {
                needs.push(NeededFeature { feature, at });
            }
        };
        for (name, tool) in &self.tools {
            if matches!(tool.kind, super::ToolKind::Http(_)) {
                need(Feature::HttpClient, format!("tools.{name} (an http tool)"));
            }
            gate_needs(&tool.policy, &format!("tools.{name}.approval"), &mut need);
        }
        let notify = &self.approvals.notify;
        if notify.slack.is_some() {
            need(Feature::HttpClient, "approvals.notify.slack".into());
        }
        if !notify.webhooks.is_empty() {
            need(Feature::HttpClient, "approvals.notify.webhooks".into());
        }
        if notify.email.is_some() {
            need(Feature::Email, "approvals.notify.email".into());
        }
        for step in &self.steps {
            let policy = match &step.kind {
                StepKind::Model(_) => {
                    need(
                        Feature::HttpClient,
                        format!("steps.{} (a model step)", step.id),
                    );
                    continue;
                }
                StepKind::Approval(approval) => &approval.policy,
                StepKind::Gate(gate) => &gate.policy,
                _ => continue,
            };
            gate_needs(policy, &format!("steps.{}", step.id), &mut need);
        }
        needs.sort_by_key(|n| n.feature);
        needs
    }

    /// `Err` naming the first feature the spec needs that this build lacks.
    pub fn check_features(&self) -> Result<(), MissingFeature> {
        match self
            .needed_features()
            .into_iter()
            .find(|n| !n.feature.enabled())
        {
            Some(NeededFeature { feature, at }) => Err(MissingFeature { feature, at }),
            None => Ok(()),
        }
    }
}

/// A gate's own `notify:` (it replaces the spec's for that gate).
fn gate_needs(policy: &GatePolicy, at: &str, need: &mut impl FnMut(Feature, String)) {
    if policy
        .notify
        .webhooks
        .as_ref()
        .is_some_and(|w| !w.is_empty())
    {
        need(Feature::HttpClient, format!("{at}.notify.webhooks"));
    }
    if matches!(policy.notify.email, Some(Some(_))) {
        need(Feature::Email, format!("{at}.notify.email"));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(yaml: &str) -> Spec {
        Spec::parse(yaml, "test.yaml").unwrap()
    }

    fn needed(yaml: &str) -> Vec<(&'static str, String)> {
        spec(yaml)
            .needed_features()
            .into_iter()
            .map(|n| (n.feature.name(), n.at))
            .collect()
    }

    #[test]
    fn a_gate_only_spec_needs_no_optional_feature() {
        let yaml = "version: 1\nagent: a\nsteps:\n  - id: draft\n    set: { x: 1 }\n  - id: confirm\n    approval: { message: ok? }\n";
        assert_eq!(needed(yaml), vec![]);
        assert_eq!(spec(yaml).check_features(), Ok(()));
    }

    #[test]
    fn http_tools_models_and_notices_name_their_feature_and_first_use() {
        let yaml = r#"version: 1
agent: a
tools:
  lookup:
    http: { method: GET, url: "https://example.com/x" }
steps:
  - id: ask
    model: { prompt: hi }
  - id: call
    tool: lookup
  - id: confirm
    approval:
      message: ok?
      notify:
        email:
          smtp_url: "${SMTP_URL}"
          from: "a@example.com"
          to: { alice: "alice@example.com" }
"#;
        assert_eq!(
            needed(yaml),
            vec![
                ("http-client", "tools.lookup (an http tool)".to_string()),
                ("email", "steps.confirm.notify.email".to_string()),
            ]
        );
    }

    #[test]
    fn a_spec_is_refused_exactly_when_this_build_lacks_what_it_needs() {
        let slack = spec(
            r##"version: 1
agent: a
approvals:
  notify:
    slack: { bot_token: "${SLACK_BOT_TOKEN}", channel: "#ops", signing_secret: "${SLACK_SIGNING_SECRET}" }
steps:
  - id: confirm
    approval: { message: ok? }
"##,
        );
        let checked = slack.check_features();
        if Feature::HttpClient.enabled() {
            assert_eq!(checked, Ok(()));
        } else {
            assert_eq!(
                checked,
                Err(MissingFeature {
                    feature: Feature::HttpClient,
                    at: "approvals.notify.slack".into()
                })
            );
        }
    }

    #[test]
    fn a_missing_feature_says_what_needs_it_and_how_to_turn_it_on() {
        let err = MissingFeature {
            feature: Feature::HttpClient,
            at: "approvals.notify.slack".into(),
        };
        let text = err.to_string();
        assert!(
            text.starts_with("approvals.notify.slack needs the runtime's `http-client` feature"),
            "{text}"
        );
        assert!(
            text.contains(
                "add \"http-client\" to the `features` of tollgate-runtime in Cargo.toml"
            ),
            "{text}"
        );
    }
}
