//! StateStore: where runs, their events and pending approvals live.
//!
//! Every pause, decision and resume goes through a store, so there is one
//! code path and one set of guarantees whether a run resumes in the process
//! that paused it or in another one after a restart.
//!
//! Writes happen at durable points only: a run's creation, its pause, the
//! claim of a decision, and its end. Each is one transaction.

mod columns;
pub mod feed;
#[cfg(feature = "postgres")]
mod postgres;
mod sqlite;

use std::sync::Arc;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use serde::Serialize;
use serde_json::{Map, Value};
use thiserror::Error;

use crate::events::{Event, EventKind};
use crate::pending_approval::{ApprovalError, ApprovalRecord, ApprovalStatus, Claim};
use crate::run_state::{JournalEntry, Lease, OwnedRun, RunRecord, RunStatus};

#[cfg(feature = "postgres")]
pub use postgres::{DEFAULT_POOL_SIZE, PostgresOptions, PostgresStore};
pub use sqlite::{MemoryStore, SqliteOptions, SqliteStore, Synchronous};

#[derive(Debug, Error)]
pub enum StoreError {
    /// A decision was refused (not found, expired, already resolved, spec changed).
    #[error(transparent)]
    Approval(#[from] ApprovalError),

    #[error("no run with id {0}")]
    RunNotFound(String),

    /// A driver's write for a run it no longer drives: the run was
    /// recovered by another process, or is no longer `running` (cancelled,
    /// failed by an operator). The write changed nothing; the driver stops.
    #[error("run {run_id} is no longer driven by {owner}: {detail}")]
    NotOwner {
        run_id: String,
        owner: String,
        detail: String,
    },

    #[error("database error: {0}")]
    Database(String),

    /// The database cannot serve this now but may soon: a lock held past
    /// the busy timeout, no connection, no space, a failed I/O, a
    /// serialization failure. Worth retrying with backoff.
    #[error("database error: {0}")]
    Unavailable(String),

    /// The write contradicts what is stored (a unique or other constraint:
    /// the run or approval already exists). Retrying the same write fails
    /// the same way.
    #[error("database error: {0}")]
    Conflict(String),

    #[error("stored data is unreadable: {0}")]
    Corrupt(String),

    /// The SQLite file itself is damaged (a failed quick check at open, or
    /// SQLITE_CORRUPT / SQLITE_NOTADB at run time). The store refuses every
    /// write from then on: writing to a damaged b-tree can spread the damage.
    #[error(
        "the SQLite file {path} is damaged ({detail}); tollgate will not write to it. \
         Stop every process using it, then restore your last backup of the file \
         (tollgate makes none itself: take them with `sqlite3 {path} \".backup COPY.db\"`), \
         or salvage what is readable: `sqlite3 {path} .recover | sqlite3 RECOVERED.db`, \
         check it with `sqlite3 RECOVERED.db \"PRAGMA integrity_check\"`, and move it into \
         place of {path} (removing {path}-wal and {path}-shm)"
    )]
    CorruptFile { path: String, detail: String },

    /// The store cannot be written (a read-only file or filesystem, a
    /// read-only `-shm`, a read-only PostgreSQL server). Says which file or
    /// setting to fix.
    #[error("the store {path} is not writable: {detail}")]
    NotWritable { path: String, detail: String },

    /// An operator's change of a run that is not in a status that allows
    /// it (`runs retry` of a run that is not stuck or failed).
    #[error("run {run_id} is {status}; {expected}")]
    WrongRunStatus {
        run_id: String,
        status: RunStatus,
        expected: String,
    },

    /// A value no store can hold and read back (a timestamp past the year
    /// 9999): refused before anything is written.
    #[error("cannot store {0}")]
    OutOfRange(String),

    /// JSON nested deeper than the store's JSON reader takes back
    /// ([`crate::json_depth::READABLE_DEPTH`]): refused before anything is
    /// written, so no row is ever unreadable.
    #[error(
        "cannot store {what}: it nests deeper than {limit} levels, the most a store can read back"
    )]
    TooDeep { what: String, limit: usize },

    #[error("invalid store location {location:?}: {reason}")]
    InvalidLocation { location: String, reason: String },

    #[error("malformed cursor {0:?}")]
    InvalidCursor(String),

    /// A cancel of a run that has already ended (or is stuck, which only
    /// `runs retry` or `runs fail` handle).
    #[error("run {run_id} is {} and cannot be cancelled", .status.as_str())]
    RunNotCancellable { run_id: String, status: RunStatus },

    #[error(
        "the database schema is version {found}, newer than this build of tollgate understands (up to {supported}); upgrade tollgate"
    )]
    SchemaTooNew { found: i64, supported: i64 },

    /// A `postgres://` URL, in a build without the runtime's `postgres`
    /// feature (an exported server leaves it out unless asked). The URL is
    /// not repeated: it may hold a password.
    #[error(
        "a postgres:// store needs PostgreSQL support, and this build leaves it out: \
         add `features = [\"postgres\"]` to the tollgate-runtime dependency in Cargo.toml \
         (`tollgate-runtime = {{ path = \"vendored\", default-features = false, features = [\"postgres\"] }}`), \
         then build again"
    )]
    PostgresNotBuilt,
}

/// The marker a [`StoreError::Database`] message carries when SQLite gave
/// up waiting for another connection's lock (SQLITE_BUSY / SQLITE_LOCKED,
/// "database is locked"); set where the SQLite error is classified.
pub(crate) const BUSY_MARKER: &str = "SQLITE_BUSY";

/// The marker of an [`StoreError::Unavailable`] message for an answer that
/// a check found to be transient (SQLite said "damaged", a fresh look at the
/// file said sound): like busy, worth trying again soon.
pub(crate) const TRANSIENT_MARKER: &str = "transient answer";

/// What a caller can do about a [`StoreError`] (see [`StoreError::kind`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StoreErrorKind {
    /// The store cannot serve this now but may later (busy, no connection,
    /// no space, read-only for now): retry with backoff.
    Unavailable,
    /// The request contradicts what is stored (a constraint violation, a
    /// decision on an approval already decided, expired or under another
    /// spec): retrying the same request cannot succeed.
    Conflict,
    /// Stored data or the store's file is damaged: retrying cannot help and
    /// someone has to look.
    Corrupt,
    /// Anything else (a bad argument, a missing run, an unknown schema, a
    /// failure of no known cause): not retried.
    Other,
}

impl StoreError {
    /// How this error should be handled: only [`StoreErrorKind::Unavailable`]
    /// is worth retrying. Watchers and sweeps retry those and report the
    /// others instead of retrying them forever.
    pub fn kind(&self) -> StoreErrorKind {
        match self {
            // NotWritable may pass (a PostgreSQL failover, space or
            // permission restored): the health check probes for it too.
            StoreError::Unavailable(_) | StoreError::NotWritable { .. } => {
                StoreErrorKind::Unavailable
            }
            StoreError::Conflict(_)
            | StoreError::NotOwner { .. }
            | StoreError::WrongRunStatus { .. }
            | StoreError::Approval(
                ApprovalError::AlreadyResolved { .. }
                | ApprovalError::Expired { .. }
                | ApprovalError::SpecChanged { .. },
            ) => StoreErrorKind::Conflict,
            StoreError::Corrupt(_) | StoreError::CorruptFile { .. } => StoreErrorKind::Corrupt,
            _ => StoreErrorKind::Other,
        }
    }

    /// Whether retrying later can succeed ([`StoreErrorKind::Unavailable`]).
    pub fn is_retryable(&self) -> bool {
        self.kind() == StoreErrorKind::Unavailable
    }

    /// The same error with its database message rewritten by `f` (to say
    /// which operation failed where); its kind is kept.
    pub(crate) fn reworded(self, f: impl FnOnce(&str) -> String) -> StoreError {
        match self {
            StoreError::Database(m) => StoreError::Database(f(&m)),
            StoreError::Unavailable(m) => StoreError::Unavailable(f(&m)),
            StoreError::Conflict(m) => StoreError::Conflict(f(&m)),
            other => other,
        }
    }

    /// True when the store is busy rather than broken: another connection
    /// held the write lock past the busy timeout, or SQLite gave an answer
    /// that a check found transient. Retrying later can succeed, so an edge
    /// answers "try again" (HTTP 503 with Retry-After), not "internal error".
    pub fn is_busy(&self) -> bool {
        matches!(self, StoreError::Unavailable(m) if m.contains(BUSY_MARKER) || m.contains(TRANSIENT_MARKER))
    }
}

pub type StoreResult<T> = Result<T, StoreError>;

/// The outcome of a successful claim.
#[derive(Debug, Clone)]
pub struct Claimed {
    /// The record as decided (status, decided_by, decided_at, decision_data set).
    pub record: ApprovalRecord,
    /// The `approval_resolved` event the claim appended to the run.
    pub event: Event,
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

/// An operator's change of a stopped run (`runs retry`, `runs fail`): one
/// conditional write, so of two operators acting at once one wins.
#[derive(Debug, Clone)]
pub struct RunTransition {
    pub run_id: String,
    /// The statuses the run may have for the change to apply.
    pub from: Vec<RunStatus>,
    pub to: RunStatus,
    /// The run's new `error` (`None` clears it).
    pub error: Option<String>,
    /// The new owner (a retry drives the run on); `None`: nobody.
    pub lease: Option<Lease>,
    /// The event recording the change; the store numbers it after the
    /// run's last.
    pub event: EventKind,
    pub at: DateTime<Utc>,
    /// Apply only if the run's last event is still this seq: the change
    /// is conditional on the run being as the operator saw it, so a retry
    /// and a fail racing on one run cannot both land (the later one finds
    /// the earlier one's event, answers [`StoreError::WrongRunStatus`] and
    /// changes nothing). `None`: whatever happened since.
    pub if_last_seq: Option<u64>,
}

/// Where a new run first becomes durable when it is stored only then
/// ([`StateStore::create_run_at`]): its first pause, or its end.
#[derive(Debug, Clone, Copy)]
pub enum FirstWrite<'a> {
    Pause(&'a Pause),
    End(&'a RunEnd),
}

/// A pause: the record to insert plus the run's state so far.
#[derive(Debug, Clone)]
pub struct Pause {
    pub record: ApprovalRecord,
    pub at: DateTime<Utc>,
    /// As [`RunEnd::owner`]: the driver that must still own the run.
    pub owner: Option<String>,
}

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

/// Which approval records to list (the inbox and the history pages).
#[derive(Debug, Clone)]
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

/// [`ApprovalQuery`] taken apart into what a store's query needs: which
/// stored rows each status asks for, and the text check a store applies to
/// a decoded record (where SQL can only approximate it).
pub(crate) struct ApprovalFilter<'a> {
    query: &'a ApprovalQuery,
    /// Stored PENDING rows that are not yet due (listed as PENDING).
    pub pending_live: bool,
    /// Stored PENDING rows that are overdue (listed as EXPIRED).
    pub pending_overdue: bool,
    /// Stored statuses other than PENDING to list.
    pub settled: Vec<ApprovalStatus>,
    /// The text filter, lowercased; `None` when absent or empty.
    needle: Option<String>,
}

impl<'a> ApprovalFilter<'a> {
    pub fn new(query: &'a ApprovalQuery) -> ApprovalFilter<'a> {
        let wants = |s: ApprovalStatus| query.statuses.is_empty() || query.statuses.contains(&s);
        ApprovalFilter {
            query,
            pending_live: wants(ApprovalStatus::Pending),
            pending_overdue: wants(ApprovalStatus::Expired),
            settled: ApprovalStatus::ALL
                .iter()
                .copied()
                .filter(|s| *s != ApprovalStatus::Pending && wants(*s))
                .collect(),
            needle: query
                .text
                .as_deref()
                .filter(|t| !t.is_empty())
                .map(str::to_lowercase),
        }
    }

    /// The text to search for, as given (for a store's LIKE pattern).
    pub fn text(&self) -> Option<&'a str> {
        self.query.text.as_deref().filter(|t| !t.is_empty())
    }

    /// The text filter alone: a case-insensitive substring of any of the
    /// searched fields.
    pub fn text_matches(&self, record: &ApprovalRecord) -> bool {
        let Some(needle) = &self.needle else {
            return true;
        };
        [
            record.message.as_deref(),
            Some(record.step_id.as_str()),
            Some(record.key.as_str()),
            Some(record.run_id.as_str()),
            record.decided_by.as_deref(),
        ]
        .into_iter()
        .flatten()
        .any(|field| field.to_lowercase().contains(needle.as_str()))
    }
}

/// Builds one [`ApprovalPage`] from rows a SQL store reads in order, batch
/// by batch. A store's SQL filters on everything but can only approximate
/// the text filter (it cannot compare PostgreSQL's JSON-string columns or
/// SQLite text past a NUL exactly), so it may return a few rows too many:
/// each is checked here, and a store reads another batch, from
/// [`ApprovalPager::after`], while the page is not full.
pub(crate) struct ApprovalPager<'a> {
    filter: &'a ApprovalFilter<'a>,
    now: DateTime<Utc>,
    limit: usize,
    page: ApprovalPage,
    /// The position of the page's last row: the next page's cursor.
    last: Option<String>,
    /// Where the next batch starts: the position of the last row offered.
    pub after: Option<(DateTime<Utc>, String)>,
    /// Whether the last batch moved `after` on.
    advanced: bool,
    done: bool,
}

impl<'a> ApprovalPager<'a> {
    pub fn new(filter: &'a ApprovalFilter<'a>) -> StoreResult<ApprovalPager<'a>> {
        let query = filter.query;
        let after = match query.cursor.as_deref() {
            Some(text) => {
                let (at, key) = cursor::decode(text)?;
                let at = crate::time::parse_utc(&at)
                    .ok_or_else(|| StoreError::InvalidCursor(text.to_string()))?;
                Some((at, key))
            }
            None => None,
        };
        Ok(ApprovalPager {
            filter,
            now: query.now,
            limit: query.limit.max(1),
            page: ApprovalPage {
                approvals: Vec::new(),
                next_cursor: None,
                unreadable: Vec::new(),
            },
            last: None,
            after,
            advanced: false,
            done: false,
        })
    }

    /// How many rows a batch reads: one more than the page holds tells
    /// whether another page exists.
    pub fn batch(&self) -> usize {
        self.limit.saturating_add(1)
    }

    /// Offer the next row in order: its key, its order time (`None` when
    /// that does not read) and the record as decoded. False once the page
    /// is complete.
    pub fn offer(
        &mut self,
        key: String,
        at: Option<DateTime<Utc>>,
        record: StoreResult<ApprovalRecord>,
    ) -> StoreResult<bool> {
        if self.done {
            return Ok(false);
        }
        let entry = match record {
            Ok(record) => {
                let record = expired_as_of(record, self.now);
                self.filter.text_matches(&record).then_some(Ok(record))
            }
            Err(e @ StoreError::Corrupt(_)) => Some(Err(UnreadableRow::new(&key, &e))),
            Err(e) => return Err(e),
        };
        if let Some(entry) = entry {
            if self.page.approvals.len() + self.page.unreadable.len() == self.limit {
                // One more row belongs to the listing: there is a next page.
                self.page.next_cursor = self.last.take();
                self.done = true;
                return Ok(false);
            }
            match entry {
                Ok(record) => self.page.approvals.push(record),
                Err(unreadable) => self.page.unreadable.push(unreadable),
            }
            if let Some(at) = at {
                self.last = Some(cursor::encode(at, &key));
            }
        }
        if let Some(at) = at {
            self.after = Some((at, key));
            self.advanced = true;
        }
        Ok(true)
    }

    /// After a batch of `read` rows: whether to read another. Not when the
    /// page is complete, the rows ran out, or the batch did not move on (its
    /// rows' times did not read: reading again would loop).
    pub fn wants_more(&mut self, read: usize) -> bool {
        let more = !self.done && read == self.batch() && self.advanced;
        if !self.done && read == self.batch() && !self.advanced {
            self.page.next_cursor = self.last.take();
        }
        self.advanced = false;
        more
    }

    pub fn finish(self) -> ApprovalPage {
        self.page
    }
}

/// The SQL condition narrowing settled rows (`status <> 'PENDING'`) to
/// `statuses`: none when they are all of them, so that the query's
/// condition is exactly its partial index's and the planner walks that
/// index in order (PostgreSQL otherwise guesses the IN list selective and
/// sorts). A status this build does not know (a newer writer's) is then
/// listed, as unreadable, rather than hidden. The statuses are
/// [`ApprovalStatus`] names, never a caller's text.
pub(crate) fn settled_statuses_sql(statuses: &[&str]) -> String {
    let every = ApprovalStatus::ALL
        .iter()
        .filter(|s| **s != ApprovalStatus::Pending)
        .all(|s| statuses.contains(&s.as_str()));
    if every {
        return String::new();
    }
    let quoted: Vec<String> = statuses.iter().map(|s| format!("'{s}'")).collect();
    format!(" AND status IN ({})", quoted.join(", "))
}

/// A `LIKE` pattern matching `text` anywhere, its `%`, `_` and `\`
/// matched literally (with `ESCAPE '\'`): the text is untrusted and is
/// bound as a parameter, never spliced into SQL.
pub(crate) fn like_pattern(text: &str) -> String {
    let mut pattern = String::with_capacity(text.len() + 2);
    pattern.push('%');
    for c in text.chars() {
        if matches!(c, '%' | '_' | '\\') {
            pattern.push('\\');
        }
        pattern.push(c);
    }
    pattern.push('%');
    pattern
}

/// A key claimed at most once at a time (a schedule tick, a signed
/// webhook request): see [`StateStore::claim_key`] and
/// [`StateStore::create_run_once`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyClaim {
    pub key: String,
    pub owner: String,
    pub now: DateTime<Utc>,
    pub expires_at: DateTime<Utc>,
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
}

/// One page of runs, newest first (by `created_at`, then id).
#[derive(Debug, Clone, Serialize)]
pub struct RunsPage {
    pub runs: Vec<RunRecord>,
    pub next_cursor: Option<String>,
}

/// An operator cancelling a run.
#[derive(Debug, Clone)]
pub struct CancelRun {
    pub run_id: String,
    /// Who cancels: `by` of the `run_cancelled` event, and `decided_by` of
    /// the approval it cancels.
    pub by: String,
    pub reason: Option<String>,
    pub now: DateTime<Utc>,
}

impl CancelRun {
    /// `decision_data` of a cancelled approval: `{"reason": ...}`.
    pub fn decision_data(&self) -> Option<Value> {
        self.reason
            .as_ref()
            .map(|r| serde_json::json!({ "reason": r }))
    }

    pub(crate) fn event(&self, seq: u64) -> Event {
        Event {
            run_id: self.run_id.clone(),
            seq,
            at: self.now,
            kind: EventKind::RunCancelled {
                by: self.by.clone(),
                reason: self.reason.clone(),
            },
        }
    }
}

/// What a cancel did.
#[derive(Debug, Clone)]
pub struct Cancelled {
    /// The status the run had: `awaiting_approval` or `running`.
    pub was: RunStatus,
    /// The approval it waited on, now CANCELLED (a waiting run only).
    pub approval: Option<ApprovalRecord>,
    /// The `run_cancelled` event appended.
    pub event: Event,
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

/// Report rows that a listing or a sweep skipped: one warning each, naming
/// it, so one bad row never stops the others and is never silently lost.
pub(crate) fn report_skipped(store: &str, what: &str, rows: &[UnreadableRow]) {
    for row in rows {
        tracing::warn!(store, key = %row.key, error = %row.error, "skipped an unreadable {what}");
    }
}

/// The error of a fenced write that found the run held otherwise.
pub(crate) fn not_owner(
    run_id: &str,
    owner: &str,
    status: &str,
    holder: Option<&str>,
) -> StoreError {
    let detail = match (status, holder) {
        ("running", Some(holder)) => format!("process {holder} recovered it"),
        ("running", None) => "its lease was given up".to_string(),
        (status, _) => format!("it is {status} now"),
    };
    StoreError::NotOwner {
        run_id: run_id.to_string(),
        owner: owner.to_string(),
        detail,
    }
}

/// The error of a transition whose run has another status.
pub(crate) fn wrong_status(change: &RunTransition, status: RunStatus) -> StoreError {
    let expected: Vec<&str> = change.from.iter().map(|s| s.as_str()).collect();
    StoreError::WrongRunStatus {
        run_id: change.run_id.clone(),
        status,
        expected: format!(
            "this applies only to a run that is {}",
            expected.join(" or ")
        ),
    }
}

/// The error of a transition whose run changed since the caller read it
/// ([`RunTransition::if_last_seq`]): another operator's change won.
pub(crate) fn changed_since(change: &RunTransition, status: RunStatus) -> StoreError {
    StoreError::WrongRunStatus {
        run_id: change.run_id.clone(),
        status,
        expected: "it changed while this was being done (another operator's retry or fail \
                   won); look at it again"
            .into(),
    }
}

/// Whether `next_seq`, the seq the transition's event would get, is what
/// [`RunTransition::if_last_seq`] asks for.
pub(crate) fn unchanged(change: &RunTransition, next_seq: u64) -> bool {
    change.if_last_seq.is_none_or(|last| last + 1 == next_seq)
}

/// How a journal entry's state is stored (`tollgate_run_steps.status`).
pub(crate) fn journal_status(entry: &JournalEntry) -> &'static str {
    if entry.output.is_some() {
        "completed"
    } else {
        "started"
    }
}

/// Refuse a timestamp a store could not read back (see
/// [`crate::time::is_storable`]), before any write.
pub(crate) fn check_storable(what: &str, t: DateTime<Utc>) -> StoreResult<()> {
    if crate::time::is_storable(t) {
        Ok(())
    } else {
        Err(StoreError::OutOfRange(format!(
            "{what} {t}: it lies past 9999-12-31T23:59:59Z, the latest time a store can hold"
        )))
    }
}

/// Refuse JSON text nested deeper than a store can read back (see
/// [`crate::json_depth`]), before any write. A scan of the text, not a parse.
pub(crate) fn check_json_text(what: &str, text: &str) -> StoreResult<()> {
    let limit = crate::json_depth::READABLE_DEPTH;
    if crate::json_depth::text_depth(text.as_bytes()) > limit {
        return Err(StoreError::TooDeep {
            what: what.to_string(),
            limit,
        });
    }
    Ok(())
}

/// [`check_json_text`] for a value that is stored as it is (PostgreSQL's
/// json and jsonb parameters), without serialising it.
#[cfg(feature = "postgres")]
pub(crate) fn check_json_value(what: &str, value: &Value) -> StoreResult<()> {
    let limit = crate::json_depth::READABLE_DEPTH;
    if crate::json_depth::value_depth(value, limit) > limit {
        return Err(StoreError::TooDeep {
            what: what.to_string(),
            limit,
        });
    }
    Ok(())
}

/// The timestamps of a pause, checked (see [`check_storable`]).
pub(crate) fn check_pause(pause: &Pause) -> StoreResult<()> {
    check_storable("expires_at", pause.record.expires_at)?;
    check_storable("created_at", pause.record.created_at)
}

/// The chat message (Slack) announcing one approval, as stored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Notification {
    pub key: String,
    /// Where the message is (Slack's channel id); `None` until posted.
    pub channel: Option<String>,
    /// The message's id in its channel (Slack's `ts`); `None` until posted.
    pub ts: Option<String>,
    pub posted_at: Option<DateTime<Utc>>,
    /// Calls made for this message so far (posts and edits).
    pub attempts: u32,
    /// The last failure, for operators. Never a credential.
    pub last_error: Option<String>,
    /// When the message was edited to show the decision or the expiry;
    /// `None` while it still shows the buttons.
    pub decision_posted_at: Option<DateTime<Utc>>,
    /// Until when one worker holds the message (or, after a failure, until
    /// when nobody retries).
    pub lease_until: Option<DateTime<Utc>>,
}

/// What a worker holding a notification's lease records.
#[derive(Debug, Clone)]
pub enum NotificationWrite {
    /// The message was posted: remember where; releases the lease.
    Posted {
        channel: String,
        ts: String,
        at: DateTime<Utc>,
    },
    /// The message now shows the decision (or the expiry); releases the lease.
    DecisionPosted { at: DateTime<Utc> },
    /// A call failed: count it, keep the error, and hold the lease until
    /// `hold_until` (the next retry of this worker, or the backoff before
    /// anyone tries again).
    Failed {
        error: String,
        hold_until: DateTime<Utc>,
    },
    /// Nothing to do after all: release the lease.
    Release,
}

/// Work for the notifier's repair sweep (messages a crash, an outage or
/// another process left behind).
#[derive(Debug, Clone, Default)]
pub struct NotificationsDue {
    /// PENDING, unexpired approvals with no message yet.
    pub to_post: Vec<ApprovalRecord>,
    /// Settled approvals (decided or expired) whose message still shows
    /// the buttons.
    pub to_settle: Vec<(ApprovalRecord, Notification)>,
}

/// A decided approval whose run never reached a final state: the process
/// that claimed it stopped mid-step. Shown, never silently re-run.
#[derive(Debug, Clone, Serialize)]
pub struct StuckClaim {
    pub record: ApprovalRecord,
    pub run_status: RunStatus,
    pub run_updated_at: DateTime<Utc>,
}

#[async_trait]
pub trait StateStore: Send + Sync + 'static {
    /// A short description for logs and errors (never contains credentials).
    fn describe(&self) -> String;

    /// Insert a new run with its first events.
    async fn create_run(&self, run: &RunRecord, events: &[Event]) -> StoreResult<()>;

    /// [`StateStore::create_run`] if `once` can be claimed (as
    /// [`StateStore::claim_key`] would), in one write: a trigger that must
    /// start at most one run (a schedule tick, a signed webhook request)
    /// claims its key and stores its run, or does neither, so a crash
    /// between the two can neither lose the run nor let it start twice.
    /// False, with nothing written, when the key is taken.
    async fn create_run_once(
        &self,
        once: &KeyClaim,
        run: &RunRecord,
        events: &[Event],
    ) -> StoreResult<bool>;

    /// Append events to a run that is executing.
    async fn append_events(&self, run_id: &str, events: &[Event]) -> StoreResult<()>;

    /// Atomically, if the run is still `running` and owned by `owner`
    /// (else [`StoreError::NotOwner`], and nothing changes): record a
    /// journal entry (a step's start, or its output once it completed;
    /// the entry for that step is replaced) and append `events`.
    async fn record_step(
        &self,
        owner: &str,
        entry: &JournalEntry,
        events: &[Event],
    ) -> StoreResult<()>;

    /// The run's journal, by step index.
    async fn run_journal(&self, run_id: &str) -> StoreResult<Vec<JournalEntry>>;

    /// Extend the lease of a run its owner still drives (`running`, owned
    /// by `lease.owner`). False when it does not own it any more.
    async fn renew_lease(&self, run_id: &str, lease: &Lease) -> StoreResult<bool>;

    /// Claim up to `limit` orphaned runs of `agent_id` (`running`, with a
    /// lease past at `now` or none) for `lease`, oldest first: one
    /// conditional write per run, so each orphan has one winner across
    /// every process. Returns the runs as claimed, each with the seq its
    /// next event gets.
    async fn claim_orphans(
        &self,
        agent_id: &str,
        lease: &Lease,
        now: DateTime<Utc>,
        limit: usize,
    ) -> StoreResult<Vec<OwnedRun>>;

    /// Whether every process that can share this store runs on one
    /// kernel: a SQLite file (its locks and shared memory work on one host
    /// only) or memory. Then a run owner with this host's name and another
    /// boot id ran before a reboot and is dead; on a store shared across
    /// machines it may be another machine of the same name. The default
    /// assumes the store is shared across machines.
    fn one_kernel(&self) -> bool {
        false
    }

    /// The owners of `agent_id`'s `running` runs whose lease still holds
    /// at `now`, each once: the candidates for a same-host take-over of a
    /// dead owner's runs ([`crate::durable::owner`]). The default lists
    /// none, and those runs wait for their lease.
    async fn leased_owners(&self, agent_id: &str, now: DateTime<Utc>) -> StoreResult<Vec<String>> {
        let _ = (agent_id, now);
        Ok(Vec::new())
    }

    /// Take over up to `limit` of `agent_id`'s `running` runs owned by
    /// exactly `from` (an owner found dead) for `lease`, oldest first,
    /// whatever their lease: one conditional write on each run's id and
    /// that exact owner, so of two processes taking over one dead owner's
    /// run one wins. Returns the runs as taken, each with the seq its next
    /// event gets.
    async fn take_over_runs(
        &self,
        agent_id: &str,
        from: &str,
        lease: &Lease,
        limit: usize,
    ) -> StoreResult<Vec<OwnedRun>> {
        let _ = (agent_id, from, lease, limit);
        Ok(Vec::new())
    }

    /// Apply `change` if the run's status is one of `change.from` (else
    /// [`StoreError::WrongRunStatus`] or `RunNotFound`, and nothing
    /// changes), appending its event. Returns the run as changed and the
    /// event as stored.
    async fn transition_run(&self, change: &RunTransition) -> StoreResult<(RunRecord, Event)>;

    /// How many of `agent_id`'s runs have `status` (for the start-up log).
    async fn count_runs(&self, agent_id: &str, status: RunStatus) -> StoreResult<u64>;

    /// `agent_id`'s runs counted by status: every status, in
    /// [`RunStatus::ALL`] order, zero or not (`GET /metrics`). This default
    /// counts one status at a time; SQLite and PostgreSQL read the runs
    /// once, grouped.
    async fn count_runs_by_status(&self, agent_id: &str) -> StoreResult<Vec<(RunStatus, u64)>> {
        let mut counts = Vec::with_capacity(RunStatus::ALL.len());
        for &status in RunStatus::ALL {
            counts.push((status, self.count_runs(agent_id, status).await?));
        }
        Ok(counts)
    }

    /// Atomically: insert the pending record, set the run to
    /// `awaiting_approval` with its outputs so far, append `events`.
    async fn pause_run(&self, pause: &Pause, events: &[Event]) -> StoreResult<()>;

    /// Atomically: set the run's final (or running) state, append `events`.
    async fn end_run(&self, end: &RunEnd, events: &[Event]) -> StoreResult<()>;

    /// Atomically: insert a run that was never stored, apply its first
    /// durable point (`first`: a pause or its end) and append `events` (all
    /// of them, from `run_started`). A run that reaches its first gate, or
    /// its end, without calling out so costs one commit instead of two.
    async fn create_run_at(
        &self,
        run: &RunRecord,
        first: FirstWrite<'_>,
        events: &[Event],
    ) -> StoreResult<()>;

    /// The claim: one conditional write, `PENDING` and unexpired (and, for
    /// approve/modify, the same spec hash) -> decided. On success the run is
    /// set back to `running` and an `approval_resolved` event is appended, in
    /// the same transaction. Exactly one caller in any process wins; the
    /// others get [`ApprovalError`] explaining why.
    async fn claim(&self, claim: &Claim) -> StoreResult<Claimed>;

    async fn get_approval(&self, key: &str) -> StoreResult<Option<ApprovalRecord>>;

    /// The run's unexpired PENDING record, if it is paused.
    async fn pending_for_run(
        &self,
        run_id: &str,
        now: DateTime<Utc>,
    ) -> StoreResult<Option<ApprovalRecord>>;

    /// The key of the run's latest approval, whatever its status: what a
    /// decision addressed by run id decides. A run pauses at one gate at a
    /// time, so its latest record is the pending one while it waits, and
    /// otherwise the one that explains why nothing is pending (decided,
    /// expired). Latest by `created_at`, then `step_index`, then key; one
    /// read through the approvals-by-run index. `None` when the run never
    /// paused (or does not exist).
    async fn latest_approval_key(&self, run_id: &str) -> StoreResult<Option<String>>;

    async fn list_pending(&self, query: &PendingQuery) -> StoreResult<PendingPage>;

    /// Approval records of any status, filtered (see [`ApprovalQuery`]),
    /// newest first by [`approval_order_at`] then key, one page at a time:
    /// the inbox (PENDING) and the history (every other status). Overdue
    /// PENDING records are listed, and filtered, as EXPIRED.
    async fn list_approvals(&self, query: &ApprovalQuery) -> StoreResult<ApprovalPage>;

    /// `agent_id`'s unexpired PENDING approvals at `now`, counted by step
    /// id (`GET /metrics`). This default pages through
    /// [`StateStore::list_pending`]; SQLite and PostgreSQL count in one
    /// grouped query instead.
    async fn count_pending_by_step(
        &self,
        agent_id: &str,
        now: DateTime<Utc>,
    ) -> StoreResult<std::collections::BTreeMap<String, u64>> {
        let mut counts = std::collections::BTreeMap::new();
        let mut query = PendingQuery {
            agent_id: Some(agent_id.to_string()),
            now,
            limit: 500,
            cursor: None,
        };
        loop {
            let page = self.list_pending(&query).await?;
            for record in page.approvals {
                *counts.entry(record.step_id).or_insert(0) += 1;
            }
            match page.next_cursor {
                Some(cursor) => query.cursor = Some(cursor),
                None => return Ok(counts),
            }
        }
    }

    /// Decided approvals whose run never reached a final state: `stuck` (a
    /// step was in flight when its process died), or still `running` after
    /// the claim with no live lease at `now` (its driver stopped and no
    /// process recovered it yet; one with a live lease is running, never
    /// stuck), newest decision first.
    async fn list_stuck(
        &self,
        agent_id: Option<&str>,
        now: DateTime<Utc>,
    ) -> StoreResult<Vec<StuckClaim>>;

    /// Mark every overdue PENDING record EXPIRED and end its run `expired`
    /// (with a `run_expired` event). At most once across processes: returns
    /// only the records this call expired.
    async fn expire_due(&self, now: DateTime<Utc>) -> StoreResult<Vec<ApprovalRecord>>;

    async fn get_run(&self, run_id: &str) -> StoreResult<Option<RunRecord>>;

    /// Runs newest first (`created_at`, then id), one page at a time.
    async fn list_runs(&self, query: &RunQuery) -> StoreResult<RunsPage>;

    /// End a waiting or running run `cancelled`, with a `run_cancelled`
    /// event, in one transaction. A waiting run's PENDING, unexpired
    /// approval becomes CANCELLED (`decided_by` the canceller) in the same
    /// conditional write that a decision's claim races: exactly one of
    /// them wins. A run in any other state is
    /// [`StoreError::RunNotCancellable`].
    async fn cancel_run(&self, cancel: &CancelRun) -> StoreResult<Cancelled>;

    /// The run's events with `seq > after_seq`, in order.
    async fn run_events(&self, run_id: &str, after_seq: u64) -> StoreResult<Vec<Event>>;

    /// Claim a dedupe (or scheduler tick) key for `owner` until
    /// `expires_at`. True when this caller got it: the key was free or its
    /// previous claim expired.
    async fn claim_key(
        &self,
        key: &str,
        owner: &str,
        now: DateTime<Utc>,
        expires_at: DateTime<Utc>,
    ) -> StoreResult<bool>;

    /// Release a key `owner` claimed (a failed run lets a retry through). A
    /// claim that expired and was taken over by someone else is left alone.
    async fn release_key(&self, key: &str, owner: &str) -> StoreResult<()>;

    /// The records of `keys` that exist, in any order: what a watcher
    /// re-reads for the keys it waits on. One query where the store can.
    async fn approvals_by_key(&self, keys: &[String]) -> StoreResult<Vec<ApprovalRecord>> {
        let mut found = Vec::with_capacity(keys.len());
        for key in keys {
            if let Some(record) = self.get_approval(key).await? {
                found.push(record);
            }
        }
        Ok(found)
    }

    /// The record of `key` as a reader at `now` must see it: a PENDING
    /// record past its `expires_at` reads EXPIRED even before a sweep
    /// marked it so (the claim refuses it either way).
    async fn approval_as_of(
        &self,
        key: &str,
        now: DateTime<Utc>,
    ) -> StoreResult<Option<ApprovalRecord>> {
        Ok(self.get_approval(key).await?.map(|r| expired_as_of(r, now)))
    }

    /// Whether the store can take writes now, for a health check. Changes
    /// nothing when all is well (GET never changes state): a store writes
    /// a probe only after a write failed, to find out whether it recovered.
    async fn check_writable(&self) -> StoreResult<()> {
        Ok(())
    }

    /// One real committed write that leaves no trace in the data: what a
    /// server does before it starts, so that it never serves a store it
    /// cannot write. Also runs the store's full integrity check where it has
    /// one (SQLite's quick check, however large the file).
    async fn verify_writable(&self) -> StoreResult<()> {
        Ok(())
    }

    /// How this store pushes approval changes made by any process, if it
    /// can (PostgreSQL LISTEN/NOTIFY). `None`: watchers poll it.
    fn change_feed(&self) -> Option<Arc<dyn feed::ChangeFeed>> {
        None
    }

    /// Where this store keeps the chat messages announcing approvals
    /// ([`NotificationStore`]); `None` for a store that keeps none, which
    /// then cannot serve a spec with Slack notifications.
    fn notifications(self: Arc<Self>) -> Option<SharedNotifications> {
        None
    }
}

/// The chat messages (Slack) announcing each approval, kept beside the
/// approvals (schema version 2). Only the notifier needs these, so they are
/// not part of [`StateStore`]; a store offers them through
/// [`StateStore::notifications`].
#[async_trait]
pub trait NotificationStore: Send + Sync + 'static {
    /// Take the lease on the message of approval `key` until `until`,
    /// creating its row if needed. `None` when another worker holds it
    /// (`lease_until > now`); otherwise the row as it is now leased. One
    /// conditional write: at most one worker in any process wins.
    async fn lease_notification(
        &self,
        key: &str,
        now: DateTime<Utc>,
        until: DateTime<Utc>,
    ) -> StoreResult<Option<Notification>>;

    /// Record what the lease holder did (see [`NotificationWrite`]).
    async fn record_notification(&self, key: &str, write: &NotificationWrite) -> StoreResult<()>;

    async fn get_notification(&self, key: &str) -> StoreResult<Option<Notification>>;

    /// Up to `limit` of each kind of unfinished message work for `agent_id`
    /// whose lease is free at `now`, oldest first.
    async fn notifications_due(
        &self,
        agent_id: &str,
        now: DateTime<Utc>,
        limit: usize,
    ) -> StoreResult<NotificationsDue>;
}

pub type SharedNotifications = Arc<dyn NotificationStore>;

pub type SharedStore = Arc<dyn StateStore>;

/// The expiry rule at read time: PENDING past `expires_at` is EXPIRED.
pub fn expired_as_of(mut record: ApprovalRecord, now: DateTime<Utc>) -> ApprovalRecord {
    if record.status == crate::pending_approval::ApprovalStatus::Pending
        && record.is_expired_at(now)
    {
        record.status = crate::pending_approval::ApprovalStatus::Expired;
    }
    record
}

/// The key the write probes use in `tollgate_claims` (no dedupe or tick key
/// has this form); the probe deletes it in the same transaction.
pub(crate) const WRITE_PROBE_KEY: &str = "tollgate:write-probe";

fn is_postgres_url(location: &str) -> bool {
    location.starts_with("postgres://") || location.starts_with("postgresql://")
}

/// Open a store from a location: `memory:`, `sqlite://PATH`, a plain path
/// to a SQLite file, or `postgres://` / `postgresql://` URL (pool size from
/// `TOLLGATE_DB_POOL_SIZE`; without the `postgres` feature such a URL is
/// [`StoreError::PostgresNotBuilt`]).
///
/// Connecting to PostgreSQL is async: prefer [`open_async`]. This blocking
/// form serves callers on a multi-thread tokio runtime (the CLI) by blocking
/// the current worker in place; elsewhere it refuses a PostgreSQL URL.
pub fn open(location: &str, sqlite: SqliteOptions) -> StoreResult<SharedStore> {
    #[cfg(feature = "postgres")]
    if is_postgres_url(location) {
        use tokio::runtime::{Handle, RuntimeFlavor};
        let handle = Handle::try_current()
            .ok()
            .filter(|h| h.runtime_flavor() == RuntimeFlavor::MultiThread)
            .ok_or_else(|| StoreError::InvalidLocation {
                location: "postgres://…".into(),
                reason: "a PostgreSQL store must be opened inside a multi-thread tokio \
                         runtime (use store::open_async)"
                    .into(),
            })?;
        return tokio::task::block_in_place(|| handle.block_on(open_postgres(location)));
    }
    open_local(location, sqlite)
}

/// [`open`] for async callers: the same locations, without blocking.
pub async fn open_async(location: &str, sqlite: SqliteOptions) -> StoreResult<SharedStore> {
    #[cfg(feature = "postgres")]
    if is_postgres_url(location) {
        return open_postgres(location).await;
    }
    open_local(location, sqlite)
}

#[cfg(feature = "postgres")]
async fn open_postgres(url: &str) -> StoreResult<SharedStore> {
    let options = PostgresOptions::from_env()?;
    Ok(Arc::new(PostgresStore::connect(url, options).await?))
}

/// Memory and SQLite locations. A PostgreSQL URL gets here only in a build
/// without the `postgres` feature.
fn open_local(location: &str, sqlite: SqliteOptions) -> StoreResult<SharedStore> {
    if is_postgres_url(location) {
        return Err(StoreError::PostgresNotBuilt);
    }
    if location == "memory:" || location == "memory://" {
        return Ok(Arc::new(SqliteStore::in_memory()?));
    }
    let path = location.strip_prefix("sqlite://").unwrap_or(location);
    if path.is_empty() {
        return Err(StoreError::InvalidLocation {
            location: location.into(),
            reason: "empty path".into(),
        });
    }
    Ok(Arc::new(SqliteStore::open(
        std::path::Path::new(path),
        sqlite,
    )?))
}

/// The `approval_resolved` event a successful claim appends.
pub(crate) fn resolved_event(record: &ApprovalRecord, claim: &Claim, seq: u64) -> Event {
    Event {
        run_id: record.run_id.clone(),
        seq,
        at: claim.now,
        kind: EventKind::ApprovalResolved {
            key: record.key.clone(),
            decision: claim.decision.name().to_string(),
            decided_by: claim.decided_by.clone(),
            reason: claim.decision.reason().map(str::to_string),
        },
    }
}

/// One numbered schema change of a SQL store: its version and SQL never
/// change once released (a fix is a new migration). Each store keeps its own
/// list, in its own dialect, and records what it applied in
/// `tollgate_schema_history`.
pub(crate) struct Migration {
    pub version: i64,
    pub name: &'static str,
    pub sql: &'static str,
}

impl Migration {
    /// The newest version in a store's list.
    pub fn latest(all: &[Migration]) -> i64 {
        all.last().map_or(0, |m| m.version)
    }

    /// A database migrated by a newer build is refused, never written.
    pub fn check_not_newer(all: &[Migration], found: i64) -> StoreResult<()> {
        let supported = Migration::latest(all);
        if found > supported {
            return Err(StoreError::SchemaTooNew { found, supported });
        }
        Ok(())
    }

    /// This migration could not be applied.
    pub fn failed(&self, cause: &dyn std::fmt::Display) -> StoreError {
        StoreError::Database(format!(
            "migration {:04}_{} failed: {cause}",
            self.version, self.name
        ))
    }

    /// The rule every store's list keeps: numbered from 1 without gaps, in
    /// order (for each store's unit test).
    #[cfg(test)]
    pub fn assert_numbered(all: &[Migration]) {
        for (i, m) in all.iter().enumerate() {
            assert_eq!(
                m.version,
                i as i64 + 1,
                "migration {} is out of order",
                m.name
            );
        }
    }
}

/// Cursor encoding shared by the stores: `created_at|key` of the last row.
pub(crate) mod cursor {
    use chrono::{DateTime, Utc};

    use super::StoreError;

    pub fn encode(created_at: DateTime<Utc>, key: &str) -> String {
        format!("{}|{}", crate::time::format_utc(created_at), key)
    }

    pub fn decode(cursor: &str) -> Result<(String, String), StoreError> {
        match cursor.split_once('|') {
            Some((at, key)) if crate::time::parse_utc(at).is_some() && !key.is_empty() => {
                Ok((at.to_string(), key.to_string()))
            }
            _ => Err(StoreError::InvalidCursor(cursor.to_string())),
        }
    }
}

#[cfg(test)]
mod listing_tests {
    use super::*;
    use crate::pending_approval::sample_record;

    #[test]
    fn a_cursor_round_trips_its_time_and_key() {
        let at = crate::time::parse_utc("2026-03-01T09:00:00.123456Z").expect("time");
        let text = cursor::encode(at, "key|with|bars");
        assert_eq!(text, "2026-03-01T09:00:00.123456Z|key|with|bars");
        let (time, key) = cursor::decode(&text).expect("decode");
        assert_eq!(crate::time::parse_utc(&time), Some(at));
        // The time never holds a bar: the first one ends it, the key keeps
        // the rest.
        assert_eq!(key, "key|with|bars");
    }

    #[test]
    fn a_malformed_cursor_is_refused_naming_it() {
        for bad in [
            "",
            "no-bar",
            "|key",
            "2026-03-01T09:00:00Z|",
            "yesterday|key",
            "2026-13-01T09:00:00Z|key",
        ] {
            match cursor::decode(bad) {
                Err(e @ StoreError::InvalidCursor(_)) => {
                    assert_eq!(e.to_string(), format!("malformed cursor {bad:?}"));
                }
                other => panic!("{bad:?}: {other:?}"),
            }
        }
    }

    #[test]
    fn like_metacharacters_are_escaped() {
        assert_eq!(like_pattern("50%"), "%50\\%%");
        assert_eq!(like_pattern("a_b"), "%a\\_b%");
        assert_eq!(like_pattern("c:\\x"), "%c:\\\\x%");
        assert_eq!(like_pattern("plain"), "%plain%");
        assert_eq!(like_pattern("' OR 1=1"), "%' OR 1=1%");
    }

    #[test]
    fn the_settled_condition_names_statuses_only_when_not_all() {
        assert_eq!(
            settled_statuses_sql(&["APPROVED", "REJECTED", "MODIFIED", "EXPIRED", "CANCELLED"]),
            ""
        );
        assert_eq!(
            settled_statuses_sql(&["APPROVED", "EXPIRED"]),
            " AND status IN ('APPROVED', 'EXPIRED')"
        );
    }

    fn query(statuses: Vec<ApprovalStatus>) -> ApprovalQuery {
        ApprovalQuery {
            agent_id: None,
            statuses,
            step_id: None,
            text: None,
            now: crate::time::now(),
            limit: 10,
            cursor: None,
        }
    }

    #[test]
    fn statuses_map_to_the_rows_each_arm_reads() {
        use ApprovalStatus::*;
        let all = query(vec![]);
        let f = ApprovalFilter::new(&all);
        assert!(f.pending_live && f.pending_overdue);
        assert_eq!(
            f.settled,
            vec![Approved, Rejected, Modified, Expired, Cancelled]
        );

        let inbox = query(vec![Pending]);
        let f = ApprovalFilter::new(&inbox);
        assert!(f.pending_live && !f.pending_overdue && f.settled.is_empty());

        // EXPIRED reads overdue PENDING rows too.
        let expired = query(vec![Expired]);
        let f = ApprovalFilter::new(&expired);
        assert!(!f.pending_live && f.pending_overdue);
        assert_eq!(f.settled, vec![Expired]);
    }

    #[test]
    fn the_text_filter_is_a_case_insensitive_substring_of_the_searched_fields() {
        let mut record = sample_record("3f0a2b9e-key", "7c1d-run");
        record.message = Some("Refund ÉCU to Ada".into());
        record.decided_by = Some("Grace".into());
        let matches = |text: &str| {
            let q = ApprovalQuery {
                text: Some(text.into()),
                ..query(vec![])
            };
            ApprovalFilter::new(&q).text_matches(&record)
        };
        assert!(matches("refund"));
        assert!(matches("écu"), "the check folds beyond ASCII");
        assert!(matches("GRACE"));
        assert!(matches(&record.step_id.to_uppercase()));
        assert!(matches(&record.key[..8]));
        assert!(matches(&record.run_id));
        assert!(matches(""), "an empty text filters nothing");
        assert!(!matches("refund ada"));
    }
}

#[cfg(all(test, not(feature = "postgres")))]
mod tests {
    use super::*;

    #[test]
    fn a_postgres_url_without_the_feature_says_how_to_turn_it_on() {
        for url in ["postgres://u:s3cret@db/x", "postgresql://db/x"] {
            let err = open(url, SqliteOptions::default()).err().unwrap();
            assert!(matches!(err, StoreError::PostgresNotBuilt), "{err}");
            let message = err.to_string();
            assert!(message.contains(r#"features = ["postgres"]"#), "{message}");
            assert!(!message.contains("s3cret"), "{message}");
        }
    }
}
