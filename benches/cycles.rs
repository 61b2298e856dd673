//! Pause+resume cycles per second, in process, on a SQLite file, beside the
//! raw SQLite commit rate with the same pragmas, measured in the same run.
//!
//! A cycle is the 3-step workflow prepare (set) -> approval gate -> act (set):
//! start the run until it pauses, then approve it by key until it completes.
//! It costs four durable commits: the run's creation, the pause, the claim
//! and the end. The "raw" figure commits the same number of small
//! transactions (an insert and an update of similar rows, `BEGIN IMMEDIATE`)
//! with the same journal mode and synchronous setting, so the ratio says how
//! much of the disk's commit rate a cycle keeps.
//!
//! Run: `cargo bench --bench cycles` (TOLLGATE_BENCH_CYCLES to change the
//! count, TOLLGATE_BENCH_SYNC=full|normal for one mode only).

use std::sync::Arc;
use std::time::Instant;

use serde_json::json;
use tollgate_runtime::store::{SqliteOptions, SqliteStore, Synchronous};

#[path = "common/raw_sqlite.rs"]
mod raw_sqlite;
#[path = "common/workload.rs"]
mod workload;

use tollgate_runtime::{AgentRun, Decision, RunStatus, Spec};
use workload::SPEC;

const COMMITS_PER_CYCLE: usize = 4;
const REPEATS: usize = 5;

fn main() {
    let cycles: usize = std::env::var("TOLLGATE_BENCH_CYCLES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(300);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    println!("pause+resume cycles, {cycles} per sample, median of {REPEATS} samples (min..max)");
    println!(
        "a cycle = {COMMITS_PER_CYCLE} commits; raw = the same commits with the same pragmas\n"
    );
    println!(
        "{:<8} {:>22} {:>26} {:>22} {:>8}",
        "sync", "tollgate cycles/s", "raw commits/s", "raw cycle-equiv/s", "ratio"
    );
    // TOLLGATE_BENCH_SYNC=full|normal measures one mode only (for profiling).
    let modes = match std::env::var("TOLLGATE_BENCH_SYNC").as_deref() {
        Ok("full") => vec![Synchronous::Full],
        Ok("normal") => vec![Synchronous::Normal],
        _ => vec![Synchronous::Full, Synchronous::Normal],
    };
    for sync in modes {
        let mut ours = Vec::new();
        let mut raw = Vec::new();
        for _ in 0..REPEATS {
            // Interleaved, so drift in the machine's load hits both alike.
            ours.push(runtime.block_on(tollgate_cycles(sync, cycles)));
            raw.push(raw_sqlite::raw_commits(
                raw_sync(sync),
                cycles * COMMITS_PER_CYCLE,
            ));
        }
        let ours = Stats::of(&ours);
        let raw = Stats::of(&raw);
        let raw_cycles = raw.median / COMMITS_PER_CYCLE as f64;
        println!(
            "{:<8} {:>22} {:>26} {:>22.0} {:>7.0}%",
            format!("{sync:?}").to_uppercase(),
            ours.show(),
            raw.show(),
            raw_cycles,
            100.0 * ours.median / raw_cycles
        );
    }
}

async fn tollgate_cycles(sync: Synchronous, cycles: usize) -> f64 {
    let dir = tempfile::tempdir().expect("temp dir");
    let store = SqliteStore::open(
        &dir.path().join("state.db"),
        SqliteOptions {
            synchronous: sync,
            ..SqliteOptions::default()
        },
    )
    .expect("open store");
    let spec = Arc::new(Spec::parse(SPEC, "bench.yaml").expect("spec"));
    let agent = AgentRun::new(spec, Arc::new(store));
    let started = Instant::now();
    for i in 0..cycles {
        let paused = agent
            .start(
                json!({"order_id": format!("A-{i}"), "amount": 120}),
                json!({"kind": "bench"}),
            )
            .await
            .expect("start");
        let key = paused.pending.expect("paused").key;
        let done = agent
            .resume_by_key(&key, Decision::Approve { reason: None }, "bench")
            .await
            .expect("resume");
        assert_eq!(done.status, RunStatus::Completed);
    }
    cycles as f64 / started.elapsed().as_secs_f64()
}

fn raw_sync(sync: Synchronous) -> raw_sqlite::Sync {
    match sync {
        Synchronous::Full => raw_sqlite::Sync::Full,
        Synchronous::Normal => raw_sqlite::Sync::Normal,
    }
}

struct Stats {
    median: f64,
    min: f64,
    max: f64,
}

impl Stats {
    fn of(samples: &[f64]) -> Stats {
        let mut s = samples.to_vec();
        s.sort_by(|a, b| a.total_cmp(b));
        Stats {
            median: s[s.len() / 2],
            min: s[0],
            max: s[s.len() - 1],
        }
    }

    fn show(&self) -> String {
        format!("{:.0} ({:.0}..{:.0})", self.median, self.min, self.max)
    }
}
