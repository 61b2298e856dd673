//! Pending approvals on another version of the spec than the one served
//! (DESIGN §12): what `serve` says of them at start-up, and the words for
//! what the served spec's `on_spec_change` policy does with them.

use std::collections::BTreeMap;

use crate::domain::spec::{OnSpecChange, Spec, SpecHash};
use crate::engine::run::AgentRun;

/// What approving a stale approval does under `policy`, for a log line.
pub(crate) fn policy_effect(policy: OnSpecChange) -> &'static str {
    match policy {
        OnSpecChange::Refuse => {
            "approve answers spec_changed for them until the spec is restored; reject works"
        }
        OnSpecChange::Pin => "approve resumes each run on the version it paused under",
        OnSpecChange::Auto => {
            "approve moves a run to this version when its gate is unchanged, else resumes it on the version it paused under"
        }
    }
}

/// The start-up line: how many of this agent's pending approvals wait on
/// other versions (by short hash), and the policy that decides what
/// approving them does. `None` when there are none.
pub(crate) fn start_up_line(spec: &Spec, by_spec: &BTreeMap<String, u64>) -> Option<String> {
    let served = spec.hash.as_str();
    let mut other: Vec<(&str, u64)> = by_spec
        .iter()
        // Gate requests belong to no version: they are not counted here.
        .filter(|(hash, n)| hash.as_str() != served && **n > 0)
        .map(|(hash, n)| (hash.as_str(), *n))
        .collect();
    if other.is_empty() {
        return None;
    }
    // Most waiting first, then by hash: the version that matters most leads.
    other.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
    let total: u64 = other.iter().map(|(_, n)| n).sum();
    let versions: Vec<String> = other
        .iter()
        .map(|(hash, n)| format!("{}: {n}", SpecHash::short_of(hash)))
        .collect();
    let policy = spec.approvals.on_spec_change;
    let mut line = format!(
        "{total} pending approval{s} wait{verb} on other spec versions ({versions}); on_spec_change: {policy}, {effect}",
        s = if total == 1 { "" } else { "s" },
        verb = if total == 1 { "s" } else { "" },
        versions = versions.join(", "),
        effect = policy_effect(policy),
    );
    let overrides: Vec<String> = spec
        .steps
        .iter()
        .filter(|step| spec.step_can_pause(step))
        .filter_map(|step| {
            let own = spec.on_spec_change(step);
            (own != policy).then(|| format!("{}: {own}", step.id))
        })
        .collect();
    if !overrides.is_empty() {
        line.push_str(&format!(
            " (gates that set their own: {})",
            overrides.join(", ")
        ));
    }
    Some(line)
}

/// Log [`start_up_line`] at info, read from the store now. A store that
/// does not answer is a warning: the server starts anyway.
pub(crate) async fn log_at_start(agent: &AgentRun) {
    let spec = agent.spec();
    let counted = agent
        .store()
        .count_pending_by_spec(&spec.agent, agent.clock().now())
        .await;
    match counted {
        Ok(by_spec) => {
            if let Some(line) = start_up_line(spec, &by_spec) {
                tracing::info!("{line}");
            }
        }
        Err(e) => tracing::warn!(
            error = %e,
            "cannot count the pending approvals on other spec versions"
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SPEC: &str = r#"version: 1
agent: desk
approvals:
  on_spec_change: refuse
steps:
  - id: check
    approval:
      message: "Check?"
  - id: ship
    approval:
      message: "Ship?"
      on_spec_change: pin
"#;

    fn counts(pairs: &[(&str, u64)]) -> BTreeMap<String, u64> {
        pairs.iter().map(|(h, n)| (h.to_string(), *n)).collect()
    }

    #[test]
    fn nothing_is_said_when_every_pending_approval_is_on_the_served_version() {
        let spec = Spec::parse(SPEC, "desk.yaml").expect("spec");
        assert_eq!(start_up_line(&spec, &counts(&[])), None);
        assert_eq!(
            start_up_line(&spec, &counts(&[(spec.hash.as_str(), 4)])),
            None
        );
    }

    #[test]
    fn other_versions_are_counted_by_short_hash_with_the_policy_and_its_overrides() {
        let spec = Spec::parse(SPEC, "desk.yaml").expect("spec");
        let (a, b) = ("a".repeat(64), "b".repeat(64));
        let line = start_up_line(&spec, &counts(&[(&a, 1), (&b, 2), (spec.hash.as_str(), 7)]))
            .expect("a line");
        assert_eq!(
            line,
            "3 pending approvals wait on other spec versions (bbbbbbbbbbbb: 2, aaaaaaaaaaaa: 1); \
             on_spec_change: refuse, approve answers spec_changed for them until the spec is \
             restored; reject works (gates that set their own: ship: pin)"
        );
        let one = start_up_line(&spec, &counts(&[(&a, 1)])).expect("a line");
        assert!(
            one.starts_with("1 pending approval waits on other spec versions (aaaaaaaaaaaa: 1)"),
            "{one}"
        );
    }
}
