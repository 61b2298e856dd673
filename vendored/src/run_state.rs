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
        /// A step was in flight when its process died and its spec says
        /// not to repeat it: waits for an operator (DESIGN §9).
        Stuck = "stuck",
        /// Ended by an operator (`runs cancel`, POST /runs/{id}/cancel).
        Cancelled = "cancelled",
    }
}

impl RunStatus {
    /// A final status never changes again.
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
    pub input: Value,
    /// Scrubbed trigger context.
    pub trigger: Value,
    pub outputs: Map<String, Value>,
    pub error: Option<String>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}
