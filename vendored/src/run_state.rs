//! The stored state of a run (`tollgate_runs`).

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunStatus {
    Running,
    AwaitingApproval,
    Completed,
    Rejected,
    Failed,
    Expired,
    /// Ended by a dedupe step whose key was already claimed.
    Skipped,
}

impl RunStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            RunStatus::Running => "running",
            RunStatus::AwaitingApproval => "awaiting_approval",
            RunStatus::Completed => "completed",
            RunStatus::Rejected => "rejected",
            RunStatus::Failed => "failed",
            RunStatus::Expired => "expired",
            RunStatus::Skipped => "skipped",
        }
    }

    pub fn parse(s: &str) -> Option<RunStatus> {
        Some(match s {
            "running" => RunStatus::Running,
            "awaiting_approval" => RunStatus::AwaitingApproval,
            "completed" => RunStatus::Completed,
            "rejected" => RunStatus::Rejected,
            "failed" => RunStatus::Failed,
            "expired" => RunStatus::Expired,
            "skipped" => RunStatus::Skipped,
            _ => return None,
        })
    }

    /// A final status never changes again.
    pub fn is_final(self) -> bool {
        !matches!(self, RunStatus::Running | RunStatus::AwaitingApproval)
    }
}

impl std::fmt::Display for RunStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
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
