//! Group commit: writers that arrive while a commit is in flight share the
//! next transaction, and so its single fsync.
//!
//! At `synchronous=FULL` a commit costs one fsync, which bounds a store
//! committing one operation at a time to the disk's fsync rate (a few hundred
//! per second on ordinary disks). Here every write is queued; a writer that
//! finds no batch running becomes the "leader": it runs everything queued
//! so far inside one `BEGIN IMMEDIATE` transaction, each operation in its
//! own savepoint so that one failing operation rolls back alone, commits
//! once, and only then hands every operation its result. Nothing is
//! reported before its commit is durable. The others wait on a condition
//! variable the leader signals once per batch: they all wake at once, and
//! one whose write came too late for that batch leads the next one.
//! (Waiting on the connection's mutex woke them one at a time, each after
//! the last had let go, the writer idle meanwhile: a third as many writes
//! per commit.) A lone writer is its own leader: no thread hand-off, and no
//! savepoint either (a failure rolls back the whole transaction, which is
//! only its own), because a savepoint makes SQLite copy every page the
//! operation touches into a statement journal first.
//!
//! Transaction control goes through cached prepared statements: parsing
//! `BEGIN`/`COMMIT` on every write was a measurable share of a cycle.
//!
//! The writer keeps its temporary storage in memory (`temp_store=MEMORY`),
//! and with it the statement journals of those savepoints. Otherwise SQLite
//! spills a transaction's statement journal to a temporary file once it
//! passes 64 KiB, about one decision's worth of pages, and then writes
//! every page each later savepoint of the batch touches to that file, and
//! creates and deletes the file once per batch. The journal is emptied
//! when each operation's savepoint is released, so it holds one operation's
//! pages at a time. (BENCHMARKS.md has both measured side by side.)

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use rusqlite::Connection;

use crate::store::{StoreError, StoreResult, WriterStats};

/// Runs one queued operation (or learns that its transaction could not
/// begin); returns whether the operation succeeded and what to do once the
/// commit's outcome is known.
type Job = Box<dyn FnOnce(Result<Scope<'_>, &StoreError>) -> Ran + Send>;
type Completion = Box<dyn FnOnce(Option<&StoreError>) + Send>;

/// Where a job runs: the transaction's connection, alone or beside others.
struct Scope<'c> {
    conn: &'c Connection,
    /// True when other jobs share the transaction, so this one needs a
    /// savepoint to fail alone.
    shared: bool,
}

struct Ran {
    failed: bool,
    complete: Completion,
}

pub(super) struct GroupWriter {
    /// Held by the leader only (see [`Queue::leading`]): never waited for.
    conn: Mutex<Connection>,
    queue: Mutex<Queue>,
    /// Signalled when a leader has finished its batch: its writes have
    /// their results, and writes queued meanwhile need a leader.
    batch_done: Condvar,
    totals: Totals,
}

#[derive(Default)]
struct Queue {
    jobs: Vec<Job>,
    /// A leader is running a batch.
    leading: bool,
}

/// The leader's turn: when it ends, even by a panic in an operation, the
/// next writer may lead and every waiting writer looks at its result.
struct Leading<'w>(&'w GroupWriter);

impl Drop for Leading<'_> {
    fn drop(&mut self) {
        lock(&self.0.queue).leading = false;
        self.0.batch_done.notify_all();
    }
}

/// [`WriterStats`] as they are counted: atomics, so that reading them
/// never waits for the writer.
#[derive(Default)]
struct Totals {
    commits: AtomicU64,
    writes: AtomicU64,
    busy_nanos: AtomicU64,
    committing_nanos: AtomicU64,
}

impl Totals {
    fn count(&self, writes: usize, committed: bool, busy: Duration, committing: Duration) {
        let nanos = |d: Duration| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
        if committed {
            self.commits.fetch_add(1, Ordering::Relaxed);
        }
        self.writes.fetch_add(writes as u64, Ordering::Relaxed);
        self.busy_nanos.fetch_add(nanos(busy), Ordering::Relaxed);
        self.committing_nanos
            .fetch_add(nanos(committing), Ordering::Relaxed);
    }
}

impl GroupWriter {
    /// The writer over `conn`, whose schema is up to date: from here on its
    /// temporary storage is in memory (see the module's doc), so set after
    /// migrations, which may sort a whole table to build an index.
    pub fn new(conn: Connection) -> rusqlite::Result<GroupWriter> {
        conn.pragma_update(None, "temp_store", "MEMORY")?;
        Ok(GroupWriter {
            conn: Mutex::new(conn),
            queue: Mutex::new(Queue::default()),
            batch_done: Condvar::new(),
            totals: Totals::default(),
        })
    }

    /// What this writer did since it was made.
    pub fn stats(&self) -> WriterStats {
        let t = &self.totals;
        WriterStats {
            commits: t.commits.load(Ordering::Relaxed),
            writes: t.writes.load(Ordering::Relaxed),
            busy: Duration::from_nanos(t.busy_nanos.load(Ordering::Relaxed)),
            committing: Duration::from_nanos(t.committing_nanos.load(Ordering::Relaxed)),
        }
    }

    /// Run `op` in a write transaction, possibly shared with concurrent
    /// writers. Blocking: call it off the async runtime.
    pub fn write<T, F>(&self, op: F) -> StoreResult<T>
    where
        T: Send + 'static,
        F: FnOnce(&Connection) -> StoreResult<T> + Send + 'static,
    {
        let slot: Arc<Mutex<Option<StoreResult<T>>>> = Arc::new(Mutex::new(None));
        let filled = Arc::clone(&slot);
        let job: Job = Box::new(move |scope| {
            let result = match scope {
                Ok(Scope { conn, shared: true }) => in_savepoint(conn, op),
                Ok(Scope {
                    conn,
                    shared: false,
                }) => op(conn),
                Err(e) => Err(copy(e)),
            };
            Ran {
                failed: result.is_err(),
                complete: Box::new(move |commit_error| {
                    let outcome = match commit_error {
                        Some(e) => Err(copy(e)),
                        None => result,
                    };
                    *lock(&filled) = Some(outcome);
                }),
            }
        });
        let lost = || {
            Err(StoreError::Database(
                "a write was lost by its group commit (a previous operation panicked)".into(),
            ))
        };
        let mut queue = lock(&self.queue);
        queue.jobs.push(job);
        loop {
            // A leader completes every job it took before its turn ends,
            // so once no batch runs, a job taken has its result here.
            if let Some(result) = lock(&slot).take() {
                return result;
            }
            if !queue.leading {
                if queue.jobs.is_empty() {
                    return lost(); // taken by a batch that panicked
                }
                queue.leading = true;
                let jobs = std::mem::take(&mut queue.jobs);
                drop(queue);
                let turn = Leading(self);
                run_batch(&lock(&self.conn), jobs, &self.totals);
                drop(turn);
                return lock(&slot).take().unwrap_or_else(lost);
            }
            queue = self
                .batch_done
                .wait(queue)
                .unwrap_or_else(|p| p.into_inner());
        }
    }
}

/// One error of a batch (a failed BEGIN or COMMIT) for each of its jobs:
/// the kinds the store acts on (damage, no permission) stay what they are.
fn copy(e: &StoreError) -> StoreError {
    match e {
        StoreError::CorruptFile { path, detail } => StoreError::CorruptFile {
            path: path.clone(),
            detail: detail.clone(),
        },
        StoreError::NotWritable { path, detail } => StoreError::NotWritable {
            path: path.clone(),
            detail: detail.clone(),
        },
        StoreError::Database(m) => StoreError::Database(m.clone()),
        // Busy or full stays retryable for every job of the batch.
        StoreError::Unavailable(m) => StoreError::Unavailable(m.clone()),
        StoreError::Conflict(m) => StoreError::Conflict(m.clone()),
        other => StoreError::Database(other.to_string()),
    }
}

fn run_batch(conn: &Connection, jobs: Vec<Job>, totals: &Totals) {
    let began = Instant::now();
    if let Err(e) = begin_immediate(conn) {
        let e = StoreError::from(e);
        for job in jobs {
            (job(Err(&e)).complete)(None);
        }
        return;
    }
    let shared = jobs.len() > 1;
    let ran: Vec<Ran> = jobs
        .into_iter()
        .map(|job| job(Ok(Scope { conn, shared })))
        .collect();
    // A lone job that failed has nothing worth committing; shared jobs that
    // failed were already rolled back to their savepoints.
    let lone_failure = !shared && ran.first().is_some_and(|r| r.failed);
    let (outcome, commit_time) = if lone_failure {
        (rollback(conn), Duration::ZERO)
    } else {
        let committing = Instant::now();
        (execute_cached(conn, "COMMIT"), committing.elapsed())
    };
    let error = match outcome {
        Ok(()) => None,
        Err(e) => {
            // A failed COMMIT can leave the transaction open; close it so
            // the next batch starts clean. Its own error matters less than
            // the commit's.
            let _ = rollback(conn);
            Some(StoreError::from(e))
        }
    };
    let committed = !lone_failure && error.is_none();
    totals.count(ran.len(), committed, began.elapsed(), commit_time);
    for r in ran {
        (r.complete)(error.as_ref());
    }
}

/// `BEGIN IMMEDIATE`: take the write lock up front (waiting up to the busy
/// timeout) instead of upgrading a read later, which SQLite may refuse
/// outright with SQLITE_BUSY when another process got there first.
fn begin_immediate(conn: &Connection) -> rusqlite::Result<()> {
    if !conn.is_autocommit() {
        // A transaction left open by an operation that panicked mid-batch:
        // it never committed, so nobody was told it had.
        rollback(conn)?;
    }
    execute_cached(conn, "BEGIN IMMEDIATE")
}

fn rollback(conn: &Connection) -> rusqlite::Result<()> {
    if conn.is_autocommit() {
        return Ok(()); // SQLite already rolled back (some errors do that)
    }
    execute_cached(conn, "ROLLBACK")
}

fn execute_cached(conn: &Connection, sql: &str) -> rusqlite::Result<()> {
    conn.prepare_cached(sql)?.execute([])?;
    Ok(())
}

fn in_savepoint<T>(
    conn: &Connection,
    op: impl FnOnce(&Connection) -> StoreResult<T>,
) -> StoreResult<T> {
    execute_cached(conn, "SAVEPOINT tollgate_op")?;
    match op(conn) {
        Ok(value) => {
            execute_cached(conn, "RELEASE tollgate_op")?;
            Ok(value)
        }
        Err(e) => {
            // Undo this operation only; the others in the batch commit.
            execute_cached(conn, "ROLLBACK TO tollgate_op")?;
            execute_cached(conn, "RELEASE tollgate_op")?;
            Err(e)
        }
    }
}

/// A poisoned lock means a panic while holding it; the data behind it (a
/// connection whose transaction rolled back, a queue) is still sound.
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn writer() -> (tempfile_dir::Dir, Arc<GroupWriter>) {
        let dir = tempfile_dir::Dir::new();
        let conn = Connection::open(dir.path.join("g.db")).unwrap();
        conn.execute_batch("PRAGMA journal_mode=WAL; CREATE TABLE t (n INTEGER PRIMARY KEY);")
            .unwrap();
        (dir, Arc::new(GroupWriter::new(conn).unwrap()))
    }

    /// `op(conn, n)` for each `n` of `ns`, each write from its own thread,
    /// all at once; their results in `ns`'s order.
    fn write_at_once(
        w: &Arc<GroupWriter>,
        ns: std::ops::Range<i64>,
        op: fn(&Connection, i64) -> StoreResult<i64>,
    ) -> Vec<StoreResult<i64>> {
        let threads: Vec<_> = ns
            .map(|n| {
                let w = Arc::clone(w);
                std::thread::spawn(move || w.write(move |c| op(c, n)))
            })
            .collect();
        threads.into_iter().map(|t| t.join().unwrap()).collect()
    }

    fn refusal(n: i64) -> StoreError {
        StoreError::Database(format!("refuse {n}"))
    }

    /// Each write got its own answer: `n` itself, or its own refusal.
    fn assert_own_results(results: Vec<StoreResult<i64>>, first: i64) {
        for (n, result) in (first..).zip(results) {
            match result {
                Ok(v) => assert_eq!(v, n),
                Err(e) => assert_eq!(e.to_string(), refusal(n).to_string()),
            }
        }
    }

    fn count(w: &GroupWriter) -> i64 {
        w.write(|c| Ok(c.query_row("SELECT COUNT(*) FROM t", [], |r| r.get(0))?))
            .unwrap()
    }

    #[test]
    fn a_failing_operation_rolls_back_alone() {
        let (_dir, w) = writer();
        w.write(|c| Ok(c.execute("INSERT INTO t VALUES (1)", [])?))
            .unwrap();
        let failed: StoreResult<()> = w.write(|c| {
            c.execute("INSERT INTO t VALUES (2)", [])?;
            Err(StoreError::Database("changed my mind".into()))
        });
        assert!(failed.is_err());
        w.write(|c| Ok(c.execute("INSERT INTO t VALUES (3)", [])?))
            .unwrap();
        assert_eq!(count(&w), 2);
    }

    #[test]
    fn a_panicking_operation_commits_nothing_and_the_next_write_works() {
        let (_dir, w) = writer();
        let w2 = Arc::clone(&w);
        let panicked = std::thread::spawn(move || {
            w2.write(|c| -> StoreResult<()> {
                c.execute("INSERT INTO t VALUES (1)", [])?;
                panic!("bug in an operation");
            })
        })
        .join();
        assert!(panicked.is_err());
        w.write(|c| Ok(c.execute("INSERT INTO t VALUES (2)", [])?))
            .unwrap();
        assert_eq!(count(&w), 1, "the panicked insert never committed");
    }

    #[test]
    fn concurrent_writers_all_commit_and_each_gets_its_own_result() {
        let (_dir, w) = writer();
        let results = write_at_once(&w, 0..32, |c, n| {
            c.execute("INSERT INTO t VALUES (?1)", [n])?;
            if n % 4 == 0 {
                return Err(refusal(n));
            }
            Ok(n)
        });
        assert_own_results(results, 0);
        assert_eq!(count(&w), 24, "the 8 refused inserts rolled back alone");
    }

    #[test]
    fn stats_count_commits_writes_and_the_time_in_them() {
        let (_dir, w) = writer();
        assert_eq!(w.stats(), WriterStats::default());
        w.write(|c| Ok(c.execute("INSERT INTO t VALUES (1)", [])?))
            .unwrap();
        let one = w.stats();
        assert_eq!((one.commits, one.writes), (1, 1));
        assert!(one.committing > Duration::ZERO && one.busy >= one.committing);
        // A lone write that fails rolls back: a write, not a commit.
        let _ = w.write(|_| -> StoreResult<()> { Err(StoreError::Database("no".into())) });
        let two = w.stats();
        assert_eq!((two.commits, two.writes), (1, 2));
        assert_eq!(two.committing, one.committing, "a rollback is not a commit");
        assert!(two.busy > one.busy);
        // Concurrent writes: each counted once, however they were batched.
        let results = write_at_once(&w, 2..34, |c, n| {
            c.execute("INSERT INTO t VALUES (?1)", [n])?;
            Ok(n)
        });
        assert_own_results(results, 2);
        let all = w.stats();
        assert_eq!(all.writes, 34);
        assert!((2..=33).contains(&all.commits), "{all:?}");
        assert_eq!(count(&w), 33);
    }

    /// Savepoints whose statement journals pass SQLite's 64 KiB spill
    /// threshold (16 pages; each operation here journals about 200, and
    /// many share a batch) still roll back alone, the journal in memory.
    #[test]
    fn large_operations_sharing_a_batch_roll_back_alone_with_their_journal_in_memory() {
        let (_dir, w) = writer();
        let temp_store: i64 = w
            .write(|c| Ok(c.query_row("PRAGMA temp_store", [], |r| r.get(0))?))
            .unwrap();
        assert_eq!(temp_store, 2, "MEMORY");
        w.write(|c| {
            c.execute_batch("CREATE TABLE blobs (n INTEGER PRIMARY KEY, b BLOB)")?;
            // Pages that exist before the batch, so changing them journals them.
            for n in 0..400 {
                c.execute("INSERT INTO blobs VALUES (?1, zeroblob(2000))", [n])?;
            }
            Ok(())
        })
        .unwrap();
        let results = write_at_once(&w, 0..16, |c, n| {
            // Every row: about 200 pages, 800 KiB of journal.
            c.execute("UPDATE blobs SET b = randomblob(2000)", [])?;
            c.execute("INSERT INTO t VALUES (?1)", [n])?;
            if n % 2 == 1 {
                return Err(refusal(n));
            }
            Ok(n)
        });
        assert_own_results(results, 0);
        assert_eq!(count(&w), 8, "the 8 refused operations rolled back alone");
    }

    /// A temp dir without a dev-dependency (the runtime crate has none).
    mod tempfile_dir {
        pub struct Dir {
            pub path: std::path::PathBuf,
        }

        impl Dir {
            pub fn new() -> Dir {
                let path =
                    std::env::temp_dir().join(format!("tollgate-gc-{}", uuid::Uuid::new_v4()));
                std::fs::create_dir_all(&path).unwrap();
                Dir { path }
            }
        }

        impl Drop for Dir {
            fn drop(&mut self) {
                let _ = std::fs::remove_dir_all(&self.path);
            }
        }
    }
}
