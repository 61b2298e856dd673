//! The raw SQLite commit rate: the physical limit the benches compare with.
#![allow(dead_code)] // each bench uses part of it

use std::time::Instant;

/// How hard SQLite syncs, as the pragma's value.
#[derive(Debug, Clone, Copy)]
pub enum Sync {
    Full,
    Normal,
}

/// `commits` small write transactions, alternating an insert and an update
/// of a row shaped like an approval record.
pub fn raw_commits(sync: Sync, commits: usize) -> f64 {
    let dir = tempfile::tempdir().expect("temp dir");
    let mut conn = rusqlite::Connection::open(dir.path().join("raw.db")).expect("open raw");
    let sync = match sync {
        Sync::Full => "FULL",
        Sync::Normal => "NORMAL",
    };
    conn.execute_batch(&format!(
        "PRAGMA journal_mode=WAL; PRAGMA synchronous={sync};
         CREATE TABLE t (key TEXT PRIMARY KEY, status TEXT, body TEXT);"
    ))
    .expect("raw schema");
    let body = "x".repeat(400);
    let started = Instant::now();
    for i in 0..commits {
        let tx = conn
            .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
            .expect("begin");
        if i % 2 == 0 {
            tx.execute(
                "INSERT INTO t (key, status, body) VALUES (?1, 'PENDING', ?2)",
                (i.to_string(), &body),
            )
            .expect("insert");
        } else {
            tx.execute(
                "UPDATE t SET status = 'APPROVED' WHERE key = ?1 AND status = 'PENDING'",
                ((i - 1).to_string(),),
            )
            .expect("update");
        }
        tx.commit().expect("commit");
    }
    commits as f64 / started.elapsed().as_secs_f64()
}
