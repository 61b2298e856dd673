//! The raw SQLite commit rate: the physical limit the benches compare with.
#![allow(dead_code)] // each bench uses part of it

use std::time::{Duration, Instant};

/// How hard SQLite syncs, as the pragma's value.
#[derive(Debug, Clone, Copy)]
pub enum Sync {
    Full,
    Normal,
}

/// `commits` small write transactions, alternating an insert and an update
/// of a row shaped like an approval record; commits per second.
pub fn raw_commits(sync: Sync, commits: usize) -> f64 {
    let started = Instant::now();
    commit_each(sync, commits, |_| {});
    commits as f64 / started.elapsed().as_secs_f64()
}

/// The same commits, one at a time: how long each took, in ms.
pub fn raw_commit_latencies(sync: Sync, commits: usize) -> Vec<f64> {
    let mut latencies = Vec::with_capacity(commits);
    commit_each(sync, commits, |took| {
        latencies.push(took.as_secs_f64() * 1e3)
    });
    latencies
}

fn commit_each(sync: Sync, commits: usize, mut each: impl FnMut(Duration)) {
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
    for i in 0..commits {
        let started = Instant::now();
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
        each(started.elapsed());
    }
}
