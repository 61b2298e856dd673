//! The read model's questions and answers: which runs or approvals to
//! list, one page of them, the rows that could not be read, stuck claims.

use chrono::{DateTime, Utc};
use serde::Serialize;

use super::{SpecFilter, StoreError};
use crate::domain::pending_approval::{ApprovalRecord, ApprovalStatus};
use crate::domain::run_state::{RunRecord, RunStatus};

/// Which pending approvals to list.
#[derive(Debug, Clone)]
pub struct PendingQuery {
    /// Only this agent's records; `None` lists every agent sharing the store.
    pub agent_id: Option<String>,
    /// Records with `expires_at <= now` are never listed.
    pub now: DateTime<Utc>,
    pub limit: usize,
    /// Opaque cursor from a previous page.
    pub cursor: Option<String>,
}

/// One page of pending approvals, newest first.
#[derive(Debug, Clone, Serialize)]
pub struct PendingPage {
    pub approvals: Vec<ApprovalRecord>,
    pub next_cursor: Option<String>,
    /// Rows of this page that could not be decoded (a damaged or foreign
    /// row): skipped so that they cannot hide the others, and named here so
    /// that someone can look at them.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub unreadable: Vec<UnreadableRow>,
}

/// Which approval records to list (the inbox and the history pages).
/// `..ApprovalQuery::default()` leaves out the filters a caller does not
/// use (the default `now`, the epoch, is never meant: set it).
#[derive(Debug, Clone, Default)]
pub struct ApprovalQuery {
    /// Only this agent's records; `None` lists every agent sharing the store.
    pub agent_id: Option<String>,
    /// Statuses to list; empty lists every status. A PENDING record whose
    /// `expires_at <= now` counts as EXPIRED (it is returned as EXPIRED,
    /// via [`expired_as_of`]), never as PENDING.
    pub statuses: Vec<ApprovalStatus>,
    /// Only this step id.
    pub step_id: Option<String>,
    /// Case-insensitive substring of the message, step id, key, run id or
    /// decided_by. An empty text filters nothing.
    pub text: Option<String>,
    /// The text also searches the run's context: the agent, the run's
    /// input and its trigger (who started it), the last two as JSON text
    /// (the inbox's search; the API's `q` keeps to the fields above).
    pub text_in_context: bool,
    /// Only records paused under these spec versions.
    pub spec: Option<SpecFilter>,
    pub now: DateTime<Utc>,
    pub limit: usize,
    /// Opaque cursor from a previous page.
    pub cursor: Option<String>,
}

/// One page of approval records, newest first: by `decided_at` when set,
/// else `created_at` (the time the record last changed), ties by key.
#[derive(Debug, Clone, Serialize)]
pub struct ApprovalPage {
    pub approvals: Vec<ApprovalRecord>,
    pub next_cursor: Option<String>,
    /// Rows of this page that could not be decoded, as in
    /// [`PendingPage::unreadable`]: skipped and named.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub unreadable: Vec<UnreadableRow>,
}

/// The time an approval is listed by ([`ApprovalPage`]'s order): when it
/// was decided, else when it was created. An EXPIRED record keeps its
/// `created_at` (the sweep sets no `decided_at`).
pub fn approval_order_at(record: &ApprovalRecord) -> DateTime<Utc> {
    record.decided_at.unwrap_or(record.created_at)
}

/// Which runs to list (GET /runs, `tollgate runs list`).
#[derive(Debug, Clone)]
pub struct RunQuery {
    /// Only this agent's runs; `None` lists every agent sharing the store.
    pub agent_id: Option<String>,
    /// Only runs with this stored status.
    pub status: Option<RunStatus>,
    pub limit: usize,
    /// Opaque cursor from a previous page.
    pub cursor: Option<String>,
    /// Case-insensitive (ASCII) substring of the run id, its agent, its
    /// input, its trigger (who started it), or the step id or message of
    /// any of its gates; blank filters nothing. A `LIKE` over stored text:
    /// each page reads on until it is full (the inbox's runs search).
    pub text: Option<String>,
}

impl RunQuery {
    /// The text filter, trimmed; `None` when blank.
    pub fn text(&self) -> Option<&str> {
        self.text
            .as_deref()
            .map(str::trim)
            .filter(|t| !t.is_empty())
    }
}

/// One page of runs, newest first (by `created_at`, then id).
#[derive(Debug, Clone, Serialize)]
pub struct RunsPage {
    pub runs: Vec<RunRecord>,
    pub next_cursor: Option<String>,
}

/// A stored approval this build could not decode, by its key.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct UnreadableRow {
    pub key: String,
    pub error: String,
}

impl UnreadableRow {
    pub(crate) fn new(key: &str, error: &StoreError) -> UnreadableRow {
        UnreadableRow {
            key: key.to_string(),
            error: error.to_string(),
        }
    }
}

/// The keys of rows an expiry pass on SQLite could not read: its later
/// batches pass over them (see [`crate::store::Approvals::expire_due`]),
/// so a damaged row is reported once a pass and never holds up the rows
/// behind it.
#[derive(Debug, Default)]
pub(crate) struct UnreadableKeys(std::collections::BTreeSet<String>);

impl UnreadableKeys {
    /// Add the keys of `rows`; true when one of them was new.
    pub fn add(&mut self, rows: &[UnreadableRow]) -> bool {
        let mut added = false;
        for row in rows {
            added |= self.0.insert(row.key.clone());
        }
        added
    }

    /// As a JSON array of strings (SQLite reads it with `json_each`).
    pub fn json(&self) -> String {
        serde_json::to_string(&self.0).unwrap_or_else(|_| "[]".into())
    }
}

/// Report rows that a listing or a sweep skipped: one warning each, naming
/// it, so one bad row never stops the others and is never silently lost.
pub(crate) fn report_skipped(store: &str, what: &str, rows: &[UnreadableRow]) {
    for row in rows {
        tracing::warn!(store, key = %row.key, error = %row.error, "skipped an unreadable {what}");
    }
}

/// A decided approval whose run never reached a final state: the process
/// that claimed it stopped mid-step. Shown, never silently re-run.
#[derive(Debug, Clone, Serialize)]
pub struct StuckClaim {
    pub record: ApprovalRecord,
    pub run_status: RunStatus,
    pub run_updated_at: DateTime<Utc>,
}

/// The expiry rule at read time: PENDING past `expires_at` is EXPIRED.
pub fn expired_as_of(mut record: ApprovalRecord, now: DateTime<Utc>) -> ApprovalRecord {
    if record.status == crate::domain::pending_approval::ApprovalStatus::Pending
        && record.is_expired_at(now)
    {
        record.status = crate::domain::pending_approval::ApprovalStatus::Expired;
    }
    record
}
