//! The stored state of a run (`tollgate_runs`).

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

crate::named_enum! {
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
    #[serde(rename_all = "snake_case")]
    pub enum RunStatus {
        Running = "running",
        AwaitingApproval = "awaiting_approval",
        Completed = "completed",
        Rejected = "rejected",
        Failed = "failed",
        Expired = "expired",
        /// Ended by a dedupe step whose key was already claimed.
        Skipped = "skipped",
        /// A step was in flight when its process died and its `on_crash`
        /// says not to repeat it: waits for an operator (`runs retry` or
        /// `runs fail`).
        Stuck = "stuck",
        /// Ended by an operator (`runs cancel`, POST /runs/{id}/cancel).
        Cancelled = "cancelled",
    }
}

impl RunStatus {
    /// A final status never changes again (a stuck run waits for an
    /// operator, so it is not final).
    pub fn is_final(self) -> bool {
        !matches!(
            self,
            RunStatus::Running | RunStatus::AwaitingApproval | RunStatus::Stuck
        )
    }
}

/// One row of `tollgate_runs`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunRecord {
    pub id: String,
    pub agent_id: String,
    pub spec_hash: String,
    pub status: RunStatus,
    pub input: crate::support::json_doc::JsonDoc,
    /// Scrubbed trigger context.
    pub trigger: Value,
    pub outputs: Map<String, Value>,
    pub error: Option<String>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    /// The process driving the run ([`crate::domain::durable::node_id`]) while it
    /// is `running`; `None` at a pause, an end, or for a run stored before
    /// leases existed.
    #[serde(default)]
    pub owner: Option<String>,
    /// Until when `owner` holds the run. A `running` run whose lease is
    /// past (or absent) is orphaned: any serving process may recover it.
    #[serde(default)]
    pub lease_until: Option<DateTime<Utc>>,
}

/// A driver's hold on a run: who, and until when. Every write a driver
/// makes for its run is conditional on the run still being `running` and
/// owned by `owner` (fencing), so exactly one process drives a run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Lease {
    pub owner: String,
    pub until: DateTime<Utc>,
}

/// A run a process took over (an orphan it claimed, a run an operator
/// retried), with the seq its next event gets. The store is the one
/// allocator of a run's event seqs: it says where a new owner's numbering
/// continues, and the owner numbers on from there while its lease holds
/// (every write it makes is fenced on that lease, so nobody else numbers
/// events of the run meanwhile).
#[derive(Debug, Clone, PartialEq)]
pub struct OwnedRun {
    pub run: RunRecord,
    pub next_seq: u64,
}

/// One entry of a run's journal of side effects (`tollgate_run_steps`):
/// a step that calls out or claims, started or completed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JournalEntry {
    pub run_id: String,
    pub step_index: usize,
    pub step_id: String,
    /// `None` while the step is in flight (its start was recorded); its
    /// output once it completed.
    pub output: Option<Value>,
    pub at: DateTime<Utc>,
}

/// What a run looks like at its end (or when it ends for good).
#[derive(Debug, Clone, PartialEq)]
pub struct RunEnd {
    pub run_id: String,
    pub status: RunStatus,
    pub outputs: Map<String, Value>,
    pub error: Option<String>,
    pub at: DateTime<Utc>,
    /// The driver that must still own the `running` run for the write to
    /// apply (fencing, see [`Lease`]); `None` for a write made on behalf of
    /// no driver (the gate API, a run never stored before).
    pub owner: Option<String>,
}
