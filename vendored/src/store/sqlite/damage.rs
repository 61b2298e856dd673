//! Telling a damaged file from one strange answer.
//!
//! SQLite answers SQLITE_CORRUPT or SQLITE_NOTADB when a page it reads does
//! not look like a page of this database. On a damaged file that is
//! permanent, and writing on would spread the damage, so the store refuses
//! every write from then on. But the same answer can be transient: a read
//! that met the `-shm` index while another process rebuilt it, or a page
//! read through a connection whose cache a foreign writer invalidated. One
//! such answer latched a healthy file as damaged until a restart. So an
//! answer is confirmed first, on a fresh connection (its own page cache,
//! its own look at the WAL index) with `PRAGMA quick_check`, which reads
//! every page and checks every b-tree.

use std::path::Path;
use std::time::Duration;

use rusqlite::{Connection, OpenFlags};

use crate::store::{StoreError, TRANSIENT_MARKER};

/// What a fresh look at the file found.
#[derive(Debug)]
pub(super) enum Verdict {
    /// The check found damage (or the file cannot be opened as a database).
    Damaged(String),
    /// The check passed: the answer was transient.
    Sound,
    /// The check could not run (the file is locked, or gone): nothing is
    /// proven either way.
    Unchecked(String),
}

/// How long the check waits for another process's lock before giving up
/// (it then proves nothing, and the caller's operation is retryable).
const CHECK_BUSY_TIMEOUT: Duration = Duration::from_secs(5);

/// Check the file at `path` on a connection of its own. Blocking. The
/// connection is SQLite's (its VFS shares this process's locks on the file
/// between connections), so opening and closing it drops no lock.
pub(super) fn recheck(path: &Path) -> Verdict {
    let conn = match Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    ) {
        Ok(conn) => conn,
        Err(e) => return classify(e),
    };
    if let Err(e) = conn.busy_timeout(CHECK_BUSY_TIMEOUT) {
        return classify(e);
    }
    let found = conn.prepare("PRAGMA quick_check(5)").and_then(|mut stmt| {
        stmt.query_map([], |row| row.get::<_, String>(0))?
            .collect::<Result<Vec<_>, _>>()
    });
    match found {
        Ok(lines) if lines.len() == 1 && lines[0] == "ok" => Verdict::Sound,
        Ok(lines) => Verdict::Damaged(format!("PRAGMA quick_check found: {}", lines.join("; "))),
        Err(e) => classify(e),
    }
}

fn classify(e: rusqlite::Error) -> Verdict {
    use rusqlite::ErrorCode as C;
    match e.sqlite_error_code() {
        Some(C::DatabaseCorrupt | C::NotADatabase) => Verdict::Damaged(e.to_string()),
        _ => Verdict::Unchecked(e.to_string()),
    }
}

/// The error for an answer of damage that the check did not confirm:
/// retryable (the server answers 503 with Retry-After, a driver tries
/// again), and nothing is latched.
pub(super) fn unconfirmed(answer: &str, check: &str) -> StoreError {
    StoreError::Unavailable(format!(
        "SQLite answered that the file is damaged ({answer}), which a fresh check did not \
         confirm ({check}): writes go on; try again (a {TRANSIENT_MARKER})"
    ))
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;
    use crate::store::prelude::*;
    use crate::store::sqlite::{SqliteOptions, SqliteStore};

    struct Dir(std::path::PathBuf);

    impl Dir {
        fn new() -> Dir {
            let dir =
                std::env::temp_dir().join(format!("tollgate-damage-{}", uuid::Uuid::new_v4()));
            std::fs::create_dir_all(&dir).expect("temp dir");
            Dir(dir)
        }
    }

    impl Drop for Dir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    fn answered_damaged() -> StoreError {
        StoreError::CorruptFile {
            path: String::new(),
            detail: "file is not a database".into(),
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn one_answer_of_damage_over_a_sound_file_is_retried_not_latched() {
        let dir = Dir::new();
        let store =
            SqliteStore::open(&dir.0.join("state.db"), SqliteOptions::default()).expect("open");
        let calls = AtomicUsize::new(0);
        let answer = store
            .damage_checked("reading a page".into(), || async {
                match calls.fetch_add(1, Ordering::SeqCst) {
                    0 => Err(answered_damaged()),
                    _ => Ok(7),
                }
            })
            .await;
        assert_eq!(answer.expect("the retry answers"), 7);
        assert_eq!(calls.load(Ordering::SeqCst), 2, "tried once more");
        store.check_writable().await.expect("nothing latched");
        store.verify_writable().await.expect("writes go on");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn two_answers_over_a_sound_file_are_retryable_and_latch_nothing() {
        let dir = Dir::new();
        let store =
            SqliteStore::open(&dir.0.join("state.db"), SqliteOptions::default()).expect("open");
        let err = store
            .damage_checked("reading a page".into(), || async {
                Err::<(), _>(answered_damaged())
            })
            .await
            .expect_err("the answer stands");
        assert!(err.is_retryable() && err.is_busy(), "{err:?}");
        assert!(err.to_string().contains("did not confirm"), "{err}");
        store.verify_writable().await.expect("writes go on");
    }

    #[test]
    #[expect(
        clippy::disallowed_methods,
        reason = "writes the junk file before any connection to it exists"
    )]
    fn the_check_tells_a_sound_file_from_a_damaged_one() {
        let dir = Dir::new();
        let good = dir.0.join("good.db");
        Connection::open(&good)
            .and_then(|c| c.execute_batch("CREATE TABLE t (x); INSERT INTO t VALUES (1);"))
            .expect("a database");
        assert!(matches!(recheck(&good), Verdict::Sound));
        let junk = dir.0.join("junk.db");
        std::fs::write(&junk, vec![0x5a; 8192]).expect("junk");
        assert!(
            matches!(recheck(&junk), Verdict::Damaged(_)),
            "{:?}",
            recheck(&junk)
        );
        assert!(matches!(
            recheck(&dir.0.join("gone.db")),
            Verdict::Unchecked(_)
        ));
    }
}
