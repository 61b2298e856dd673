//! Whether an approval paused under another version of the spec than the
//! one served (DESIGN §12), and what Approve does with it under the served
//! spec's `on_spec_change` policy: what the approval page and the inbox
//! rows say of a stale approval.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use serde::Serialize;

use crate::domain::pending_approval::{ApprovalRecord, ApprovalStatus};
use crate::domain::spec::{OnSpecChange, Outcome, Spec, SpecHash, plan_pause, policy_for_pause};
use crate::server::http::state::AppState;

/// A stale approval, as the pages show it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct Stale {
    /// The version it paused under, short.
    pub spec: String,
    /// What Approve does now, in a sentence; `None` once it is decided.
    pub approve: Option<String>,
    /// Whether Approve and Modify are offered: not under `refuse`, which
    /// answers `spec_changed` to both (Reject always is).
    pub approvable: bool,
}

impl Stale {
    /// A stale record that is no longer pending: marked, nothing to offer.
    fn settled(spec: String) -> Stale {
        Stale {
            spec,
            approve: None,
            approvable: false,
        }
    }
}

/// What Approve does with a pending approval paused under another version.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Effect {
    /// The policy in force and what it does ([`plan_pause`]).
    Planned(OnSpecChange, Outcome),
    /// `pin`/`auto`, but the version it paused under is not stored (or
    /// does not read): approve answers `spec_unavailable`.
    VersionMissing(OnSpecChange),
}

impl Effect {
    pub fn sentence(self) -> String {
        match self {
            Effect::Planned(_, Outcome::Refused) => {
                "Under on_spec_change: refuse, approve is not possible until the spec is restored; reject is."
                    .to_string()
            }
            Effect::Planned(policy, Outcome::Pinned) => format!(
                "Under on_spec_change: {policy}, approve resumes the run on the version it paused under."
            ),
            Effect::Planned(policy, Outcome::MovesToNew) => format!(
                "Under on_spec_change: {policy}, approve moves the run to the current version (its gate is unchanged)."
            ),
            // Not stale after all (one hash): approve works as always.
            Effect::Planned(_, Outcome::Current) => "Approve works as always.".to_string(),
            Effect::VersionMissing(policy) => format!(
                "Under on_spec_change: {policy}, approve resumes the run on the version it paused under, \
                 but that version is not stored here, so approve cannot resume it (spec_unavailable); reject works."
            ),
        }
    }

    pub fn approvable(self) -> bool {
        !matches!(self, Effect::Planned(_, Outcome::Refused))
    }
}

/// What Approve does with a pending `record` of `old` (`None`: not stored)
/// once `served` is served.
pub(crate) fn effect(record: &ApprovalRecord, old: Option<&Spec>, served: &Spec) -> Effect {
    let map = BTreeMap::new();
    let policy = policy_for_pause(served, &record.step_id, &map);
    if policy == OnSpecChange::Refuse {
        // Refused whatever the old version holds: no need to read it.
        return Effect::Planned(policy, Outcome::Refused);
    }
    match old {
        Some(old) => {
            let plan = plan_pause(old, served, &record.step_id, record.phase, &map);
            Effect::Planned(plan.policy, plan.outcome)
        }
        None => Effect::VersionMissing(policy),
    }
}

/// Reads the stale approvals of one page, each old version once.
pub(crate) struct Staleness<'s> {
    state: &'s AppState,
    /// Old versions read so far, by hash; `None`: not stored, or unreadable.
    old: HashMap<String, Option<Arc<Spec>>>,
}

impl<'s> Staleness<'s> {
    pub fn new(state: &'s AppState) -> Staleness<'s> {
        Staleness {
            state,
            old: HashMap::new(),
        }
    }

    /// `None` for a record of the served version.
    pub async fn of(&mut self, record: &ApprovalRecord) -> Option<Stale> {
        let served = self.state.agent.spec();
        if record.is_current_for(served.hash.as_str()) {
            return None;
        }
        let short = SpecHash::short_of(&record.spec_hash).to_string();
        if record.status != ApprovalStatus::Pending {
            return Some(Stale::settled(short));
        }
        let old = if policy_for_pause(served, &record.step_id, &BTreeMap::new())
            == OnSpecChange::Refuse
        {
            // `refuse` never reads the old version: spare the store.
            None
        } else {
            self.old_version(&record.spec_hash).await
        };
        let effect = effect(record, old.as_deref(), served);
        Some(Stale {
            spec: short,
            approve: Some(effect.sentence()),
            approvable: effect.approvable(),
        })
    }

    async fn old_version(&mut self, hash: &str) -> Option<Arc<Spec>> {
        if let Some(known) = self.old.get(hash) {
            return known.clone();
        }
        let read = match self.state.agent.store().get_spec_version(hash).await {
            Ok(Some(version)) => {
                let origin = format!("spec version {}", SpecHash::short_of(hash));
                match Spec::parse(&version.source, &origin) {
                    // The engine resumes only a source that hashes to its
                    // version (the spec language may have changed since).
                    Ok(spec) if spec.hash.as_str() == hash => Some(Arc::new(spec)),
                    Ok(spec) => {
                        tracing::warn!(spec_hash = %SpecHash::short_of(hash), hashes_to = %spec.hash.short(), "a stored spec version hashes differently now");
                        None
                    }
                    Err(e) => {
                        tracing::warn!(spec_hash = %SpecHash::short_of(hash), error = %e, "a stored spec version does not parse");
                        None
                    }
                }
            }
            Ok(None) => None,
            Err(e) => {
                tracing::warn!(spec_hash = %SpecHash::short_of(hash), error = %e, "cannot read a stored spec version");
                None
            }
        };
        self.old.insert(hash.to_string(), read.clone());
        read
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::pending_approval::Phase;

    fn spec(policy: &str, message: &str) -> Spec {
        let yaml = format!(
            "version: 1\nagent: desk\napprovals:\n  on_spec_change: {policy}\nsteps:\n  - id: check\n    approval:\n      message: \"{message}\"\n"
        );
        Spec::parse(&yaml, "desk.yaml").expect("spec")
    }

    fn pending_at_check(old: &Spec) -> ApprovalRecord {
        serde_json::from_value(serde_json::json!({
            "key": "k", "run_id": "r", "agent_id": "desk",
            "spec_hash": old.hash.as_str(), "step_index": 0, "step_id": "check",
            "phase": Phase::Before.as_str(), "message": null, "payload": null,
            "outputs": {}, "input": {}, "trigger": {}, "status": "PENDING",
            "decision_data": null, "decided_by": null, "decided_at": null,
            "created_at": "2026-12-01T10:00:00Z", "expires_at": "2026-12-01T12:00:00Z"
        }))
        .expect("record")
    }

    #[test]
    fn refuse_offers_reject_only_whatever_the_old_version() {
        let old = spec("refuse", "Check?");
        let new = spec("refuse", "Check now?");
        for stored in [Some(&old), None] {
            let effect = effect(&pending_at_check(&old), stored, &new);
            assert_eq!(
                effect,
                Effect::Planned(OnSpecChange::Refuse, Outcome::Refused)
            );
            assert!(!effect.approvable());
            assert!(
                effect
                    .sentence()
                    .contains("not possible until the spec is restored; reject is")
            );
        }
    }

    #[test]
    fn pin_resumes_on_the_old_version_and_auto_moves_an_unchanged_gate() {
        let old = spec("pin", "Check?");
        let pinned = effect(
            &pending_at_check(&old),
            Some(&old),
            &spec("pin", "Check now?"),
        );
        assert_eq!(pinned, Effect::Planned(OnSpecChange::Pin, Outcome::Pinned));
        assert!(pinned.approvable());
        assert!(
            pinned
                .sentence()
                .contains("resumes the run on the version it paused under")
        );

        // Only the policy differs: the gate is unchanged, the run moves.
        let moved = effect(&pending_at_check(&old), Some(&old), &spec("auto", "Check?"));
        assert_eq!(
            moved,
            Effect::Planned(OnSpecChange::Auto, Outcome::MovesToNew)
        );
        assert!(
            moved
                .sentence()
                .contains("moves the run to the current version")
        );
        // A changed message: auto keeps it on its version.
        let kept = effect(
            &pending_at_check(&old),
            Some(&old),
            &spec("auto", "Check now?"),
        );
        assert_eq!(kept, Effect::Planned(OnSpecChange::Auto, Outcome::Pinned));
    }

    #[test]
    fn a_missing_old_version_is_said() {
        let old = spec("pin", "Check?");
        let effect = effect(&pending_at_check(&old), None, &spec("pin", "Check now?"));
        assert_eq!(effect, Effect::VersionMissing(OnSpecChange::Pin));
        assert!(effect.sentence().contains("not stored here"));
    }
}
