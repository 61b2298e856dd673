//! At start, before anyone waits on a gate nobody can decide: which of the
//! served spec's deciders can act on this server, and which cannot.
//!
//! A decider is a name (DESIGN §5, §13): an API token's name (a full token:
//! a `requester` token never decides), `slack:<user id>` when the spec
//! posts to Slack, a mail address when the gate mails its deciders and
//! signed links are on (the mail carries a link bound to the address),
//! `link` when unbound links are on, and `local` on a server without
//! tokens (every caller is `local` there). A name nothing carries is a
//! decider in name only; a gate whose deciders all are (or whose rules
//! cannot be met by those who can act) waits until it expires. Each such
//! gate is named in a warning at start: a warning, not a refusal, because
//! tokens, Slack and links are configured outside the spec and may be
//! meant to follow.

use crate::domain::links::{LINK_CALLER, LinkSigner};
use crate::domain::policy::{GatePolicy, Groups, LOCAL_DECIDER};
use crate::domain::spec::Spec;
use crate::server::http::auth::{ApiTokens, Scope};

/// What carries a decider's name to a decision on this server.
pub(crate) struct Channels<'a> {
    pub tokens: &'a ApiTokens,
    pub links: Option<&'a LinkSigner>,
}

impl Channels<'_> {
    /// Whether `name` can decide a gate of `spec` that mails its deciders
    /// when `mails` is true.
    fn carries(&self, spec: &Spec, mails: bool, name: &str) -> bool {
        if self.tokens.is_empty() {
            // Loopback only: every caller is `local`, and links are shown
            // to `local` alone.
            return name == LOCAL_DECIDER;
        }
        if self.tokens.names().any(|t| t == name) {
            return self.tokens.scope_of(name) == Scope::Full;
        }
        if name.starts_with("slack:") {
            return spec.approvals.notify.slack.is_some();
        }
        if name == LINK_CALLER {
            return self.links.is_some_and(LinkSigner::unbound);
        }
        mails && self.links.is_some() && crate::domain::notices::is_address(name)
    }
}

/// One warning per gate (and for the spec's `approvals.approvers`) whose
/// deciders cannot all act here, naming the gate and the names nothing
/// carries, and saying when nobody at all can decide it.
pub(crate) fn unreachable_deciders(
    spec: &Spec,
    groups: &Groups,
    channels: &Channels<'_>,
) -> Vec<String> {
    let mut warnings = Vec::new();
    let spec_mails = spec.approvals.notify.email.is_some();
    if let Some(approvers) = &spec.approvals.approvers {
        let stranded: Vec<&str> = approvers
            .iter()
            .map(String::as_str)
            .filter(|name| !channels.carries(spec, spec_mails, name))
            .collect();
        let gates = plain_gates(spec);
        if !stranded.is_empty() && !gates.is_empty() {
            let whom = if stranded.len() == approvers.len() {
                "nobody can decide them"
            } else {
                "they can be decided by the others only"
            };
            warnings.push(format!(
                "gates {} (and gate requests): approvals.approvers {} cannot decide on this server ({}): {whom}{}",
                gates.join(", "),
                quoted(&stranded),
                no_channel_said(channels),
                no_tokens_hint(channels),
            ));
        }
    }
    // No list: anyone with a full token decides. With tokens that may only
    // ask, nobody may (Slack and links decide as approvers, of whom there
    // are none to name).
    let full_tokens = channels
        .tokens
        .names()
        .any(|name| channels.tokens.scope_of(name) == Scope::Full);
    if spec.approvals.approvers.is_none()
        && !channels.tokens.is_empty()
        && !full_tokens
        && spec.approvals.notify.slack.is_none()
    {
        let gates = plain_gates(spec);
        if !gates.is_empty() {
            warnings.push(format!(
                "gates {} (and gate requests): every API token is a requester token, which may ask but never decide: nobody can decide them; add a full token for each person who decides",
                gates.join(", ")
            ));
        }
    }
    for (index, step) in spec.steps.iter().enumerate() {
        let Some(policy) = spec.policy_of(step).filter(|p| p.has_rules()) else {
            continue;
        };
        let mails = spec.notice_routes(index).email.is_some();
        if let Some(problem) = unmeetable_rules(spec, policy, groups, mails, channels) {
            warnings.push(format!(
                "gate {:?}: {problem} ({}){}",
                step.id,
                no_channel_said(channels),
                no_tokens_hint(channels)
            ));
        }
    }
    warnings
}

/// The ids of the steps whose gates take `approvals.approvers` (no rules).
fn plain_gates(spec: &Spec) -> Vec<String> {
    spec.steps
        .iter()
        .filter(|step| spec.policy_of(step).is_some_and(|p| !p.has_rules()))
        .map(|step| format!("{:?}", step.id))
        .collect()
}

/// Why `policy`'s rules cannot be met by the members who can act (a rule
/// with fewer such members than its `min`), or `None` when they can.
fn unmeetable_rules(
    spec: &Spec,
    policy: &GatePolicy,
    groups: &Groups,
    mails: bool,
    channels: &Channels<'_>,
) -> Option<String> {
    for rule in &policy.rules {
        let members = groups.get(&rule.group)?;
        let stranded: Vec<&str> = members
            .iter()
            .map(String::as_str)
            .filter(|name| !channels.carries(spec, mails, name))
            .collect();
        let able = members.len() - stranded.len();
        if (able as u64) < u64::from(rule.min) {
            return Some(format!(
                "rule {} of {} can never be met: {} of its members can decide on this server, {} cannot",
                rule.group,
                rule.min,
                able,
                quoted(&stranded)
            ));
        }
    }
    None
}

fn quoted(names: &[&str]) -> String {
    names
        .iter()
        .map(|n| format!("{n:?}"))
        .collect::<Vec<_>>()
        .join(", ")
}

fn no_channel_said(channels: &Channels<'_>) -> &'static str {
    if channels.tokens.is_empty() {
        "no API tokens: every caller is \"local\""
    } else {
        "no full API token, Slack id or signed link carries the name"
    }
}

fn no_tokens_hint(channels: &Channels<'_>) -> &'static str {
    if channels.tokens.is_empty() {
        "; set TOLLGATE_API_TOKENS with a token for each decider"
    } else {
        ""
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(yaml: &str) -> Spec {
        Spec::parse(yaml, "agent.yaml").unwrap()
    }

    const WITH_APPROVERS: &str = r#"
version: 1
agent: a
approvals:
  approvers: [alice, carol]
  groups: { ops: [mallory, alice] }
steps:
  - id: confirm
    approval: { message: "ok?" }
  - id: two
    approval: { message: "ok?", rules: [{ group: ops, min: 2 }] }
"#;

    fn warnings(spec: &Spec, tokens: &str) -> Vec<String> {
        let tokens = if tokens.is_empty() {
            ApiTokens::none()
        } else {
            ApiTokens::parse(tokens).unwrap()
        };
        let groups = spec.approvals.groups.clone();
        unreachable_deciders(
            spec,
            &groups,
            &Channels {
                tokens: &tokens,
                links: None,
            },
        )
    }

    #[test]
    fn approvers_without_tokens_are_named_with_their_gates() {
        let spec = spec(WITH_APPROVERS);
        let said = warnings(&spec, "");
        assert_eq!(said.len(), 2, "{said:?}");
        assert!(
            said[0].contains("gates \"confirm\"")
                && said[0].contains("\"alice\", \"carol\"")
                && said[0].contains("nobody can decide them")
                && said[0].contains("TOLLGATE_API_TOKENS"),
            "{}",
            said[0]
        );
        assert!(
            said[1].contains("gate \"two\": rule ops of 2 can never be met"),
            "{}",
            said[1]
        );
    }

    #[test]
    fn a_name_no_token_carries_is_named_and_a_full_set_says_nothing() {
        let spec = spec(WITH_APPROVERS);
        // carol has no token; mallory's is a requester token: neither decides.
        let said = warnings(&spec, "alice:a1,mallory/requester:m1");
        assert!(
            said[0].contains("\"carol\"") && said[0].contains("by the others only"),
            "{said:?}"
        );
        assert!(said[1].contains("1 of its members can decide"), "{said:?}");
        assert!(warnings(&spec, "alice:a1,carol:c1,mallory:m1").is_empty());
    }

    #[test]
    fn requester_tokens_alone_leave_an_open_gate_without_a_decider() {
        let spec = spec("version: 1\nagent: a\nsteps:\n  - id: go\n    approval: {}\n");
        let said = warnings(&spec, "bot/requester:b1");
        assert_eq!(said.len(), 1, "{said:?}");
        assert!(
            said[0].contains("gates \"go\"") && said[0].contains("nobody can decide"),
            "{}",
            said[0]
        );
        assert!(warnings(&spec, "bot/requester:b1,alice:a1").is_empty());
        assert!(warnings(&spec, "").is_empty(), "local decides");
    }
}
