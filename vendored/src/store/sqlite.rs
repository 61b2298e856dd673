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
//!   to [`SqliteOptions::busy_timeout`] and fail after that with an error
//!   that [`StoreError::is_busy`] tells from a broken store (the server
//!   answers it 503 with Retry-After). Within a process, concurrent writes share one transaction and one
//!   fsync (group commit), each in its own savepoint. Readers never wait for
//!   writers (WAL).
//! - **Durability.** `synchronous=FULL` (the default) syncs the WAL on every
//!   commit: a pause or a claim that returned survives power loss.
//!   `synchronous=NORMAL` syncs only at checkpoints: still safe against a
//!   crash of the process and never corrupt, but the last commits before a
//!   power cut or an OS crash may be lost, so a decision that was reported
//!   as taken may come back as PENDING.
//! - **A vote** ([`Votes::cast_vote`]) reads its approval and ledger and
//!   writes the vote, its event and (when it settles the gate) the claim in
//!   one write transaction, so votes of one key are counted one at a time
//!   across processes.
//! - **Every write is a durable point.** A run's creation, its pause, a
//!   claim, its end: each is reported only once its commit is durable, so a
//!   pause+resume cycle costs its commits and little else.
//!
//! The schema lives in numbered files under `migrations/sqlite/`, applied at
//! open and recorded in `tollgate_schema_history`; every table has the
//! `tollgate_` prefix so the file can be shared with other software. A file
//! written by a newer tollgate is refused (`SchemaTooNew`), not guessed at.
//!
//! - **Damage is refused, not served.** At open, `PRAGMA quick_check` reads
//!   the whole file (its cost grows with the file) when the file is at most
//!   [`SqliteOptions::quick_check_up_to`] bytes (64 MiB by default: every CLI
//!   command opens the store); `serve` runs it at start whatever the size
//!   ([`Health::verify_writable`]). A damaged file, or SQLITE_CORRUPT /
//!   SQLITE_NOTADB from any later operation, is [`StoreError::CorruptFile`],
//!   which says how to restore, and from then on this store refuses every
//!   write: writing into a damaged b-tree spreads the damage.
//! - **Read-only files are refused at open.** SQLite would open a read-only
//!   file read-only, and create its `-wal` and `-shm` with the file's
//!   permissions, so that once the file is writable again every write still
//!   fails on the read-only `-shm`. So the file is checked for writing first
//!   (by path, with `access(2)`: see `files` for why tollgate never opens a
//!   database file itself) and never opened when it is read-only; a
//!   `-wal`/`-shm` left read-only by an earlier episode gets the main file's
//!   permissions back (or, if that is not allowed, the error names it).
//!
//! SQLite calls block, so each operation runs on tokio's blocking pool with
//! the connection behind a mutex: one connection writes, a second one reads,
//! so listing and polling never queue behind a commit's fsync.

mod approvals;
mod codec;
mod damage;
mod files;
mod group_commit;
mod health;
mod keys;
mod notifications;
mod ops;
mod outbox;
mod queries;
mod runs;
mod schema;
mod specs;
mod sweep_pace;
#[cfg(test)]
mod tests;
mod votes;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use rusqlite::Connection;

use self::group_commit::GroupWriter;

use self::ops::{ApprovalRow, CastRow, ClaimRow, EndRow, FirstRow, MoveRow, RunRow, encode_events};
use super::{
    ApprovalPage, ApprovalQuery, Approvals, CancelRun, Cancelled, CastVote, Claimed, FirstWrite,
    Health, KeyClaim, Keys, Notification, NotificationStore, NotificationWrite, Pause, PendingPage,
    PendingQuery, Queries, RunEnd, RunLog, RunQuery, RunTransition, RunsPage, SharedNotifications,
    SpecVersions, StoreError, StoreResult, StuckClaim, VoteOutcome, Votes, WRITE_PROBE_KEY,
    WriterStats, check_cast, check_claim_end, check_lease_end, check_pause, check_spec_version,
    check_started, report_skipped, row_limit,
};
use crate::domain::events::Event;
use crate::domain::pending_approval::{ApprovalMove, ApprovalRecord, Claim, Moved};
use crate::domain::policy::Vote;
use crate::domain::run_state::{JournalEntry, Lease, OwnedRun, RunRecord, RunStatus};
use crate::domain::spec_version::{SpecVersion, SpecVersionUse};
use crate::support::time::format_utc;

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
    /// Run `PRAGMA quick_check` at open when the file is at most this many
    /// bytes (`None`: never at open). Its cost grows with the file, and
    /// every CLI command opens the store; `serve` checks whatever the size.
    pub quick_check_up_to: Option<u64>,
}

/// [`SqliteOptions::quick_check_up_to`] by default: a check of a file this
/// size takes well under a second.
pub const DEFAULT_QUICK_CHECK_UP_TO: u64 = 64 * 1024 * 1024;

impl Default for SqliteOptions {
    fn default() -> Self {
        SqliteOptions {
            synchronous: Synchronous::Full,
            busy_timeout: Duration::from_secs(30),
            quick_check_up_to: Some(DEFAULT_QUICK_CHECK_UP_TO),
        }
    }
}

pub struct SqliteStore {
    db: Arc<Connections>,
}

struct Connections {
    /// The file; for a database in memory, `memory:` (named in errors only).
    path: PathBuf,
    writer: GroupWriter,
    /// The second connection reads. `None` for a database in memory, which
    /// one connection holds: reads go through the writer (no fsync to wait
    /// for there, so they lose nothing by it).
    reader: Option<Mutex<Connection>>,
    /// Set when SQLite reported the file damaged: every write is refused
    /// from then on (with the detail), until the file is restored and the
    /// process restarted.
    corrupt: Mutex<Option<String>>,
    /// Set when a write failed for want of space, permission or I/O; the
    /// health check then probes with a real write until one succeeds.
    unwritable: AtomicBool,
}

/// How a database in memory is named in descriptions and errors (the
/// location that opens one).
const MEMORY: &str = "memory:";

/// The name users know for a store in memory (`tollgate run` without
/// `--persist`, tests): a [`SqliteStore`] on a private in-memory database,
/// so that one body of code decides claims, cancels, expiry and leases.
pub enum MemoryStore {}

impl MemoryStore {
    /// A new, empty store in memory, its own database.
    #[expect(
        clippy::new_ret_no_self,
        reason = "MemoryStore names a way to open a SqliteStore, kept for its users"
    )]
    pub fn new() -> SqliteStore {
        // Only an allocation failure of SQLite's or a broken migration
        // (a bug every test would show) can fail here.
        SqliteStore::in_memory().expect("an in-memory SQLite database opens")
    }
}

/// Statements each connection keeps prepared: every distinct query of the
/// store fits, so the hot path never re-parses SQL.
const STATEMENT_CACHE: usize = 64;

/// Markers in [`StoreError::Database`] messages of failures that mean "this
/// store cannot take writes now" (see `Connections::unwritable`).
const FULL: &str = "SQLITE_FULL";
const IOERR: &str = "SQLITE_IOERR";

impl From<rusqlite::Error> for StoreError {
    /// Classified by SQLite's result code; the path is filled in by the store
    /// (see `SqliteStore::located`).
    fn from(e: rusqlite::Error) -> Self {
        use rusqlite::ErrorCode as C;
        let code = match &e {
            rusqlite::Error::SqliteFailure(f, _) => Some(f.code),
            _ => None,
        };
        match code {
            Some(C::DatabaseCorrupt | C::NotADatabase) => StoreError::CorruptFile {
                path: String::new(),
                detail: e.to_string(),
            },
            Some(C::ReadOnly) => StoreError::NotWritable {
                path: String::new(),
                detail: format!(
                    "{e} (SQLITE_READONLY: the file, its -wal or -shm, or its filesystem is read-only)"
                ),
            },
            Some(C::DiskFull) => StoreError::Unavailable(format!(
                "{e} ({FULL}: no space left on the device, or the file reached its size limit)"
            )),
            Some(C::SystemIoFailure) => StoreError::Unavailable(format!(
                "{e} ({IOERR}: the operating system failed a read or write of the file)"
            )),
            Some(C::DatabaseBusy | C::DatabaseLocked) => StoreError::Unavailable(format!(
                "{e} ({}: another connection held the lock past the busy timeout)",
                super::BUSY_MARKER
            )),
            Some(C::ConstraintViolation) => StoreError::Conflict(e.to_string()),
            _ => StoreError::Database(e.to_string()),
        }
    }
}

impl SqliteStore {
    /// Open (creating if needed) the database at `path` and bring its schema
    /// up to date. Parent directories are created.
    pub fn open(path: &Path, options: SqliteOptions) -> StoreResult<SqliteStore> {
        files::create_parent_dir(path)?;
        // Before SQLite touches the file: it would create a read-only -shm.
        files::check_writable(path)?;
        let size = std::fs::metadata(path).map(|m| m.len()).unwrap_or(0);
        let open_once = || -> StoreResult<(Connection, Connection)> {
            let mut writer = connect(path, &options)?;
            enable_wal(&writer, path)?;
            if options.quick_check_up_to.is_some_and(|limit| size <= limit) {
                quick_check(&writer)?;
            }
            schema::migrate(&mut writer)?;
            let reader = connect(path, &options)?;
            Ok((writer, reader))
        };
        // While other processes open the same new file, SQLite can answer
        // SQLITE_BUSY without waiting in its busy handler (the switch to WAL
        // and the first WAL recovery are not covered by it): try again, with
        // jittered waits, for as long as the busy timeout allows.
        let started = std::time::Instant::now();
        let mut backoff = crate::support::backoff::Backoff::new(
            Duration::from_millis(5),
            Duration::from_millis(200),
        );
        let opened = loop {
            match open_once() {
                Err(e) if e.is_busy() && started.elapsed() < options.busy_timeout => {
                    std::thread::sleep(backoff.next_wait());
                }
                other => break other,
            }
        };
        let (writer, reader) = opened.map_err(|e| located(e, path))?;
        let writer = GroupWriter::new(writer).map_err(|e| located(e.into(), path))?;
        Ok(SqliteStore {
            db: Arc::new(Connections {
                path: path.to_path_buf(),
                writer,
                reader: Some(Mutex::new(reader)),
                corrupt: Mutex::new(None),
                unwritable: AtomicBool::new(false),
            }),
        })
    }

    /// A private database in memory, gone when the store is dropped: what
    /// `memory:` opens (see [`MemoryStore`]). The same schema and the same
    /// SQL as a file, so the same rules for claims, cancels, expiry and
    /// leases; one connection, so no file, no WAL and no fsync.
    pub fn in_memory() -> StoreResult<SqliteStore> {
        let mut conn = Connection::open_in_memory()?;
        conn.pragma_update(None, "foreign_keys", "ON")?;
        conn.set_prepared_statement_cache_capacity(STATEMENT_CACHE);
        schema::migrate(&mut conn)?;
        Ok(SqliteStore {
            db: Arc::new(Connections {
                path: PathBuf::from(MEMORY),
                writer: GroupWriter::new(conn)?,
                reader: None,
                corrupt: Mutex::new(None),
                unwritable: AtomicBool::new(false),
            }),
        })
    }

    fn in_memory_db(&self) -> bool {
        self.db.reader.is_none()
    }

    /// Run `op` inside a `BEGIN IMMEDIATE` transaction on the writer
    /// connection, off the async runtime; concurrent writes share one commit
    /// (see `group_commit`). `op` returning an error rolls back its own
    /// changes only.
    ///
    /// `what` names the operation in errors ("pausing run R"), together with
    /// the file: a failure in a log says what failed, where and why.
    async fn write<T, F>(&self, what: impl Into<String>, op: F) -> StoreResult<T>
    where
        T: Send + 'static,
        F: Fn(&Connection) -> StoreResult<T> + Send + Sync + 'static,
    {
        if let Some(detail) = lock(&self.db.corrupt).clone() {
            return Err(StoreError::CorruptFile {
                path: self.db.path.display().to_string(),
                detail,
            });
        }
        let op = Arc::new(op);
        let result = self
            .damage_checked(what.into(), || {
                let (db, op) = (Arc::clone(&self.db), Arc::clone(&op));
                blocking(move || db.writer.write(move |conn| op(conn)))
            })
            .await;
        if result.is_ok() {
            self.db.unwritable.store(false, Ordering::Relaxed);
        }
        result
    }

    /// Run `op` on the reader connection, off the async runtime.
    async fn read<T, F>(&self, what: impl Into<String>, op: F) -> StoreResult<T>
    where
        T: Send + 'static,
        F: Fn(&Connection) -> StoreResult<T> + Send + Sync + 'static,
    {
        let op = Arc::new(op);
        self.damage_checked(what.into(), || {
            let (db, op) = (Arc::clone(&self.db), Arc::clone(&op));
            blocking(move || match &db.reader {
                Some(reader) => op(&lock(reader)),
                None => db.writer.write(move |conn| op(conn)),
            })
        })
        .await
    }

    /// Run `attempt`; an answer that the file is damaged is taken as proof
    /// only once a fresh connection's `PRAGMA quick_check` agrees (see
    /// `damage`). Otherwise it was transient: logged, and the operation
    /// tried once more; a second such answer over a sound file is a
    /// retryable [`StoreError::Unavailable`], never the latch that stops
    /// every write until a restart.
    async fn damage_checked<T, A, Fut>(&self, what: String, attempt: A) -> StoreResult<T>
    where
        A: Fn() -> Fut,
        Fut: std::future::Future<Output = StoreResult<T>>,
    {
        let answer = match attempt().await {
            // A database in memory has no file to check again.
            Err(StoreError::CorruptFile { detail, .. }) if !self.in_memory_db() => detail,
            other => return other.map_err(|e| self.failed(e, &what)),
        };
        let path = self.db.path.clone();
        match blocking(move || Ok(damage::recheck(&path))).await? {
            damage::Verdict::Damaged(found) => Err(self.failed(
                StoreError::CorruptFile {
                    path: String::new(),
                    detail: format!("{answer}; a fresh check agrees: {found}"),
                },
                &what,
            )),
            damage::Verdict::Sound => {
                tracing::warn!(
                    store = %self.describe(),
                    operation = %what,
                    answer = %answer,
                    "SQLite answered that the file is damaged, but a fresh connection's \
                     quick_check finds it sound: a transient answer, trying once more"
                );
                match attempt().await {
                    Err(StoreError::CorruptFile { detail, .. }) => {
                        Err(self.failed(damage::unconfirmed(&answer, &detail), &what))
                    }
                    other => other.map_err(|e| self.failed(e, &what)),
                }
            }
            damage::Verdict::Unchecked(why) => {
                tracing::warn!(
                    store = %self.describe(),
                    operation = %what,
                    answer = %answer,
                    check = %why,
                    "SQLite answered that the file is damaged, and the file could not be \
                     checked now: not refusing writes on one answer"
                );
                Err(self.failed(damage::unconfirmed(&answer, &why), &what))
            }
        }
    }

    /// An error of operation `what`, with the file named and the store's
    /// state updated: damage stops all writes, a want of space or
    /// permission makes the health check probe.
    fn failed(&self, e: StoreError, what: &str) -> StoreError {
        let e = located(e, &self.db.path);
        match &e {
            StoreError::CorruptFile { detail, .. } => {
                let mut corrupt = lock(&self.db.corrupt);
                if corrupt.is_none() {
                    tracing::error!(
                        store = %self.describe(),
                        error = %detail,
                        "the SQLite file is damaged: refusing every write from now on"
                    );
                    *corrupt = Some(detail.clone());
                }
            }
            StoreError::NotWritable { .. } => self.db.unwritable.store(true, Ordering::Relaxed),
            StoreError::Unavailable(m) if m.contains(FULL) || m.contains(IOERR) => {
                self.db.unwritable.store(true, Ordering::Relaxed)
            }
            _ => {}
        }
        e.reworded(|m| format!("{what} in {}: {m}", self.describe()))
    }

    /// A committed write that leaves the data as it was: insert and delete
    /// the probe key. Fails exactly as a real write would.
    async fn probe_write(&self) -> StoreResult<()> {
        // Bookkeeping, not a decision: the probe row is deleted in the same
        // transaction, so its time is never read (no clock needed).
        let now = format_utc(crate::support::time::now());
        self.write("probing the store with a write", move |conn| {
            conn.execute(
                "INSERT INTO tollgate_claims (key, owner, expires_at) VALUES (?1, 'probe', ?2) \
                 ON CONFLICT (key) DO UPDATE SET expires_at = excluded.expires_at",
                (WRITE_PROBE_KEY, &now),
            )?;
            conn.execute(
                "DELETE FROM tollgate_claims WHERE key = ?1",
                [WRITE_PROBE_KEY],
            )?;
            Ok(())
        })
        .await
    }
}

/// Fill in the file of an error that SQLite's result code classified.
fn located(e: StoreError, path: &Path) -> StoreError {
    let here = || path.display().to_string();
    match e {
        StoreError::CorruptFile { path: p, detail } if p.is_empty() => StoreError::CorruptFile {
            path: here(),
            detail,
        },
        StoreError::NotWritable { path: p, detail } if p.is_empty() => StoreError::NotWritable {
            path: here(),
            detail,
        },
        other => other,
    }
}

/// `PRAGMA quick_check`: every page of the file is read (O(file size)), the
/// b-trees and their records checked; the first few problems are reported.
fn quick_check(conn: &Connection) -> StoreResult<()> {
    let mut stmt = conn.prepare("PRAGMA quick_check(5)")?;
    let found = stmt
        .query_map([], |row| row.get::<_, String>(0))?
        .collect::<Result<Vec<_>, _>>()?;
    if found.len() == 1 && found[0] == "ok" {
        return Ok(());
    }
    Err(StoreError::CorruptFile {
        path: String::new(),
        detail: format!("PRAGMA quick_check found: {}", found.join("; ")),
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
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
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
impl NotificationStore for SqliteStore {
    async fn record_notification(&self, key: &str, write: &NotificationWrite) -> StoreResult<()> {
        let (key, write) = (key.to_string(), write.clone());
        self.write(format!("recording the message of {key}"), move |conn| {
            notifications::record(conn, &key, &write)
        })
        .await
    }

    async fn get_notification(&self, key: &str) -> StoreResult<Option<Notification>> {
        let key = key.to_string();
        self.read(format!("reading the message of {key}"), move |conn| {
            notifications::get(conn, &key)
        })
        .await
    }
}
