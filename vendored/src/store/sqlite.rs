//! The SQLite store: runs, events and pending approvals in one local file.
//!
//! Limits, stated up front:
//!
//! - **One file, one machine.** The database is a single file (plus its
//!   `-wal` and `-shm` companions). Any number of processes on the same host
//!   may open it, and the claim is correct across all of them, but do not
//!   put it on a network filesystem (NFS, SMB, most container volume
//!   drivers): WAL mode needs shared memory and POSIX locks that those do not
//!   provide, and a claim could then be won twice. Use PostgreSQL to share
//!   approvals between machines.
//! - **One writer at a time.** Every write is a `BEGIN IMMEDIATE`
//!   transaction; writers in other processes queue on SQLite's lock for up
//!   to [`SqliteOptions::busy_timeout`] and fail with a database error after
//!   that. Within a process, concurrent writes share one transaction and one
//!   fsync (group commit), each in its own savepoint. Readers never wait for
//!   writers (WAL).
//! - **Durability.** `synchronous=FULL` (the default) syncs the WAL on every
//!   commit: a pause or a claim that returned survives power loss.
//!   `synchronous=NORMAL` syncs only at checkpoints: still safe against a
//!   crash of the process and never corrupt, but the last commits before a
//!   power cut or an OS crash may be lost, so a decision that was reported
//!   as taken may come back as PENDING.
//! - **Every write is a durable point.** A run's creation, its pause, a
//!   claim, its end: each is reported only once its commit is durable, so a
//!   pause+resume cycle costs its commits and little else.
//!
//! The schema lives in numbered files under `migrations/sqlite/`, applied at
//! open and recorded in `tollgate_schema_history`; every table has the
//! `tollgate_` prefix so the file can be shared with other software. A file
//! written by a newer tollgate is refused (`SchemaTooNew`), not guessed at.
//!
//! SQLite calls block, so each operation runs on tokio's blocking pool with
//! the connection behind a mutex: one connection writes, a second one reads,
//! so listing and polling never queue behind a commit's fsync.

mod codec;
mod group_commit;
mod notifications;
mod ops;
mod schema;
#[cfg(test)]
mod tests;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use rusqlite::Connection;

use self::group_commit::GroupWriter;

use self::ops::{ApprovalRow, ClaimRow, EndRow, FirstRow, RunRow, encode_events};
use super::{
    Claimed, FirstWrite, Notification, NotificationWrite, NotificationsDue, Pause, PendingPage,
    PendingQuery, RunEnd, StateStore, StoreError, StoreResult, StuckClaim,
};
use crate::events::Event;
use crate::pending_approval::{ApprovalRecord, Claim};
use crate::run_state::RunRecord;
use crate::time::format_utc;

/// How hard SQLite works to make a commit survive power loss.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Synchronous {
    /// Sync the WAL on every commit: a returned write survives power loss.
    #[default]
    Full,
    /// Sync at checkpoints only: survives a process crash, but the last
    /// commits may be lost on power loss or an OS crash.
    Normal,
}

impl Synchronous {
    fn pragma_value(self) -> &'static str {
        match self {
            Synchronous::Full => "FULL",
            Synchronous::Normal => "NORMAL",
        }
    }
}

#[derive(Debug, Clone)]
pub struct SqliteOptions {
    pub synchronous: Synchronous,
    /// How long a write waits for another connection's write lock before it
    /// fails. Generous by default: many CLI processes may decide at once.
    pub busy_timeout: Duration,
}

impl Default for SqliteOptions {
    fn default() -> Self {
        SqliteOptions {
            synchronous: Synchronous::Full,
            busy_timeout: Duration::from_secs(30),
        }
    }
}

pub struct SqliteStore {
    db: Arc<Connections>,
}

struct Connections {
    path: PathBuf,
    writer: GroupWriter,
    reader: Mutex<Connection>,
}

/// Statements each connection keeps prepared: every distinct query of the
/// store fits, so the hot path never re-parses SQL.
const STATEMENT_CACHE: usize = 64;

impl From<rusqlite::Error> for StoreError {
    fn from(e: rusqlite::Error) -> Self {
        StoreError::Database(e.to_string())
    }
}

impl SqliteStore {
    /// Open (creating if needed) the database at `path` and bring its schema
    /// up to date. Parent directories are created.
    pub fn open(path: &Path, options: SqliteOptions) -> StoreResult<SqliteStore> {
        create_parent_dir(path)?;
        let mut writer = connect(path, &options)?;
        enable_wal(&writer, path)?;
        schema::migrate(&mut writer)?;
        let reader = connect(path, &options)?;
        Ok(SqliteStore {
            db: Arc::new(Connections {
                path: path.to_path_buf(),
                writer: GroupWriter::new(writer),
                reader: Mutex::new(reader),
            }),
        })
    }

    /// Run `op` inside a `BEGIN IMMEDIATE` transaction on the writer
    /// connection, off the async runtime; concurrent writes share one commit
    /// (see `group_commit`). `op` returning an error rolls back its own
    /// changes only.
    async fn write<T, F>(&self, op: F) -> StoreResult<T>
    where
        T: Send + 'static,
        F: FnOnce(&Connection) -> StoreResult<T> + Send + 'static,
    {
        let db = Arc::clone(&self.db);
        blocking(move || db.writer.write(op)).await
    }

    /// Run `op` on the reader connection, off the async runtime.
    async fn read<T, F>(&self, op: F) -> StoreResult<T>
    where
        T: Send + 'static,
        F: FnOnce(&Connection) -> StoreResult<T> + Send + 'static,
    {
        let db = Arc::clone(&self.db);
        blocking(move || op(&lock(&db.reader))).await
    }
}

fn create_parent_dir(path: &Path) -> StoreResult<()> {
    let Some(parent) = path.parent() else {
        return Ok(());
    };
    if parent.as_os_str().is_empty() {
        return Ok(());
    }
    std::fs::create_dir_all(parent).map_err(|e| StoreError::InvalidLocation {
        location: path.display().to_string(),
        reason: format!("cannot create directory {}: {e}", parent.display()),
    })
}

/// One configured connection. Per-connection pragmas only: the journal mode
/// is a property of the file, set once by [`enable_wal`].
fn connect(path: &Path, options: &SqliteOptions) -> StoreResult<Connection> {
    let conn = Connection::open(path).map_err(|e| StoreError::InvalidLocation {
        location: path.display().to_string(),
        reason: e.to_string(),
    })?;
    // First, so that everything after it (WAL switch, migrations) waits for
    // other processes opening the same file instead of failing.
    conn.busy_timeout(options.busy_timeout)?;
    conn.pragma_update(None, "synchronous", options.synchronous.pragma_value())?;
    conn.pragma_update(None, "foreign_keys", "ON")?;
    conn.set_prepared_statement_cache_capacity(STATEMENT_CACHE);
    Ok(conn)
}

fn enable_wal(conn: &Connection, path: &Path) -> StoreResult<()> {
    let mode: String = conn.query_row("PRAGMA journal_mode = WAL", [], |row| row.get(0))?;
    if !mode.eq_ignore_ascii_case("wal") {
        return Err(StoreError::InvalidLocation {
            location: path.display().to_string(),
            reason: format!(
                "SQLite could not switch the file to WAL mode (it stayed {mode:?}); \
                 is it on a network or read-only filesystem?"
            ),
        });
    }
    Ok(())
}

/// A panic while holding a connection unwinds through its transaction,
/// which rolls back: the connection is still sound, so keep serving.
fn lock(conn: &Mutex<Connection>) -> MutexGuard<'_, Connection> {
    conn.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Run blocking SQLite work without stalling other tasks.
///
/// On a multi-thread runtime the work runs in place and the runtime moves
/// this worker's other tasks elsewhere (`block_in_place`): no hand-off to a
/// pool thread, whose wake-up latency cost more than the SQLite work itself
/// at synchronous=NORMAL (measured by `cargo bench --bench cycles`). A
/// current-thread runtime cannot do that, so there the work goes to the
/// blocking pool.
async fn blocking<T, F>(op: F) -> StoreResult<T>
where
    T: Send + 'static,
    F: FnOnce() -> StoreResult<T> + Send + 'static,
{
    use tokio::runtime::{Handle, RuntimeFlavor};
    let in_place = Handle::try_current()
        .map(|h| h.runtime_flavor() == RuntimeFlavor::MultiThread)
        .unwrap_or(false);
    if in_place {
        return tokio::task::block_in_place(op);
    }
    tokio::task::spawn_blocking(op)
        .await
        .map_err(|e| StoreError::Database(format!("store task failed: {e}")))?
}

#[async_trait]
impl StateStore for SqliteStore {
    fn describe(&self) -> String {
        format!("sqlite://{}", self.db.path.display())
    }

    async fn create_run(&self, run: &RunRecord, events: &[Event]) -> StoreResult<()> {
        let row = RunRow::encode(run)?;
        let run_id = run.id.clone();
        let events = encode_events(events)?;
        self.write(move |conn| {
            ops::insert_run(conn, &row)?;
            ops::insert_events(conn, &run_id, &events)
        })
        .await
    }

    async fn append_events(&self, run_id: &str, events: &[Event]) -> StoreResult<()> {
        let run_id = run_id.to_string();
        let events = encode_events(events)?;
        self.write(move |conn| {
            ops::require_run(conn, &run_id)?;
            ops::insert_events(conn, &run_id, &events)
        })
        .await
    }

    async fn pause_run(&self, pause: &Pause, events: &[Event]) -> StoreResult<()> {
        let row = ApprovalRow::encode(pause)?;
        let run_id = pause.record.run_id.clone();
        let events = encode_events(events)?;
        self.write(move |conn| {
            ops::pause_run(conn, &row)?;
            ops::insert_events(conn, &run_id, &events)
        })
        .await
    }

    async fn end_run(&self, end: &RunEnd, events: &[Event]) -> StoreResult<()> {
        let row = EndRow::encode(end)?;
        let run_id = end.run_id.clone();
        let events = encode_events(events)?;
        self.write(move |conn| {
            ops::end_run(conn, &row)?;
            ops::insert_events(conn, &run_id, &events)
        })
        .await
    }

    async fn create_run_at(
        &self,
        run: &RunRecord,
        first: FirstWrite<'_>,
        events: &[Event],
    ) -> StoreResult<()> {
        let run_row = RunRow::encode(run)?;
        let run_id = run.id.clone();
        let first = FirstRow::encode(first)?;
        let events = encode_events(events)?;
        self.write(move |conn| {
            // The run row is inserted and then updated in one transaction:
            // the page is written to the WAL once, at the commit.
            ops::insert_run(conn, &run_row)?;
            match &first {
                FirstRow::Pause(row) => ops::pause_run(conn, row)?,
                FirstRow::End(row) => ops::end_run(conn, row)?,
            }
            ops::insert_events(conn, &run_id, &events)
        })
        .await
    }

    async fn claim(&self, claim: &Claim) -> StoreResult<Claimed> {
        let row = ClaimRow::encode(claim)?;
        let claim = claim.clone();
        self.write(move |conn| ops::claim(conn, &claim, &row)).await
    }

    async fn get_approval(&self, key: &str) -> StoreResult<Option<ApprovalRecord>> {
        let key = key.to_string();
        self.read(move |conn| ops::get_approval(conn, &key)).await
    }

    async fn pending_for_run(
        &self,
        run_id: &str,
        now: DateTime<Utc>,
    ) -> StoreResult<Option<ApprovalRecord>> {
        let run_id = run_id.to_string();
        let now = format_utc(now);
        self.read(move |conn| ops::pending_for_run(conn, &run_id, &now))
            .await
    }

    async fn list_pending(&self, query: &PendingQuery) -> StoreResult<PendingPage> {
        let query = query.clone();
        let (approvals, next_cursor) = self
            .read(move |conn| ops::list_pending(conn, &query))
            .await?;
        Ok(PendingPage {
            approvals,
            next_cursor,
        })
    }

    async fn list_stuck(&self, agent_id: Option<&str>) -> StoreResult<Vec<StuckClaim>> {
        let agent_id = agent_id.map(str::to_string);
        self.read(move |conn| ops::list_stuck(conn, agent_id.as_deref()))
            .await
    }

    async fn expire_due(&self, now: DateTime<Utc>) -> StoreResult<Vec<ApprovalRecord>> {
        let now = format_utc(now);
        // Every CLI command sweeps first; a read on the reader connection
        // spares them the write lock (and a commit) when nothing is due.
        let probe = now.clone();
        if !self.read(move |conn| ops::any_due(conn, &probe)).await? {
            return Ok(Vec::new());
        }
        self.write(move |conn| ops::expire_due(conn, &now)).await
    }

    async fn get_run(&self, run_id: &str) -> StoreResult<Option<RunRecord>> {
        let run_id = run_id.to_string();
        self.read(move |conn| ops::get_run(conn, &run_id)).await
    }

    async fn run_events(&self, run_id: &str, after_seq: u64) -> StoreResult<Vec<Event>> {
        let run_id = run_id.to_string();
        self.read(move |conn| ops::run_events(conn, &run_id, after_seq))
            .await
    }

    async fn claim_key(
        &self,
        key: &str,
        owner: &str,
        now: DateTime<Utc>,
        expires_at: DateTime<Utc>,
    ) -> StoreResult<bool> {
        let (key, owner) = (key.to_string(), owner.to_string());
        let (now, expires_at) = (format_utc(now), format_utc(expires_at));
        self.write(move |conn| ops::claim_key(conn, &key, &owner, &now, &expires_at))
            .await
    }

    async fn release_key(&self, key: &str, owner: &str) -> StoreResult<()> {
        let (key, owner) = (key.to_string(), owner.to_string());
        self.write(move |conn| ops::release_key(conn, &key, &owner))
            .await
    }

    async fn lease_notification(
        &self,
        key: &str,
        now: DateTime<Utc>,
        until: DateTime<Utc>,
    ) -> StoreResult<Option<Notification>> {
        let key = key.to_string();
        let (now, until) = (format_utc(now), format_utc(until));
        self.write(move |conn| notifications::lease(conn, &key, &now, &until))
            .await
    }

    async fn record_notification(&self, key: &str, write: &NotificationWrite) -> StoreResult<()> {
        let (key, write) = (key.to_string(), write.clone());
        self.write(move |conn| notifications::record(conn, &key, &write))
            .await
    }

    async fn get_notification(&self, key: &str) -> StoreResult<Option<Notification>> {
        let key = key.to_string();
        self.read(move |conn| notifications::get(conn, &key)).await
    }

    async fn notifications_due(
        &self,
        agent_id: &str,
        now: DateTime<Utc>,
        limit: usize,
    ) -> StoreResult<NotificationsDue> {
        let agent_id = agent_id.to_string();
        let now = format_utc(now);
        let limit = i64::try_from(limit.max(1)).unwrap_or(i64::MAX);
        self.read(move |conn| {
            Ok(NotificationsDue {
                to_post: notifications::due_to_post(conn, &agent_id, &now, limit)?,
                to_settle: notifications::due_to_settle(conn, &agent_id, &now, limit)?,
            })
        })
        .await
    }
}
