//! A stored spec version: each spec a run starts under, kept once per hash
//! (`tollgate_specs`), so an approval that waits across a deploy can still
//! name, show and (later) resume the version it paused under.

use chrono::{DateTime, Utc};
use serde::Serialize;

use crate::domain::run_state::RunStatus;
use crate::domain::spec::Spec;

/// One version of an agent's spec as stored: its hash, its canonical JSON
/// (what the hash is of) and the YAML source it was parsed from. The
/// source holds `${NAME}` references, never secret values.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SpecVersion {
    pub hash: String,
    pub agent_id: String,
    /// The canonical JSON text of the document ([`Spec::canonical_json`]).
    pub canonical: String,
    pub source: String,
    /// When a process first recorded it.
    pub first_seen: DateTime<Utc>,
    /// When a process last recorded it (a start-up, or its first run).
    pub last_seen: DateTime<Utc>,
}

impl SpecVersion {
    /// `spec` as a version seen at `now`.
    pub fn of(spec: &Spec, now: DateTime<Utc>) -> SpecVersion {
        SpecVersion {
            hash: spec.hash.to_string(),
            agent_id: spec.agent.clone(),
            canonical: spec.canonical_json(),
            source: spec.source.to_string(),
            first_seen: now,
            last_seen: now,
        }
    }
}

/// A stored version as listed, with what still uses it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SpecVersionUse {
    pub hash: String,
    pub agent_id: String,
    pub first_seen: DateTime<Utc>,
    pub last_seen: DateTime<Utc>,
    /// Its PENDING approvals that have not expired.
    pub pending_approvals: u64,
    /// Its runs that are not over ([`LIVE_RUN_STATUSES`]).
    pub live_runs: u64,
}

/// The statuses of a run that is not over: it may still run steps of its
/// version (running, waiting for a decision, or stuck for an operator).
pub const LIVE_RUN_STATUSES: [RunStatus; 3] = [
    RunStatus::Running,
    RunStatus::AwaitingApproval,
    RunStatus::Stuck,
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_version_keeps_the_source_and_the_canonical_text_of_its_hash() {
        let yaml =
            "version: 1\nagent: a\n# a comment\nsteps:\n  - id: s\n    set: {x: '${TOKEN}'}\n";
        let spec = Spec::parse(yaml, "a.yaml").expect("spec");
        let now = crate::support::time::now();
        let version = SpecVersion::of(&spec, now);
        assert_eq!(version.source, yaml);
        assert!(version.canonical.contains("${TOKEN}"));
        assert_eq!(
            crate::domain::spec::SpecHash::of_document(
                &serde_json::from_str(&version.canonical).expect("json")
            ),
            spec.hash
        );
        assert_eq!((version.first_seen, version.last_seen), (now, now));
    }

    #[test]
    fn live_runs_are_exactly_the_statuses_that_are_not_final() {
        for status in RunStatus::ALL {
            assert_eq!(
                LIVE_RUN_STATUSES.contains(status),
                !status.is_final(),
                "{status}"
            );
        }
    }
}
