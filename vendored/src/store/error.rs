//! What can go wrong in a store, and what a caller can do about it
//! ([`StoreErrorKind`]): retry, give up, or have someone look.

use thiserror::Error;

use crate::domain::pending_approval::ApprovalError;
use crate::domain::run_state::RunStatus;

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
    /// ([`crate::support::json_depth::READABLE_DEPTH`]): refused before anything is
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
