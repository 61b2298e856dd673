//! Pause+resume cycles per second with many runs at once: the cycle of
//! benches/cycles.rs (the 3-step workload, one SQLite file at synchronous
//! FULL, the runtime API in process) run by 16 concurrent tasks on a
//! multi-thread tokio runtime, each running its own cycles back to back,
//! beside one stream measured in the same run with the samples interleaved.
//! Concurrent pauses, claims and run ends share one transaction and one
//! fsync (group commit, vendored/src/store/sqlite/group_commit.rs), so the
//! concurrent rate is the figure group commit is for.
//!
//! With a python that has LangGraph, the peer runs at the same concurrency
//! the way LangGraph documents for it (bench/peer_langgraph.py
//! `--concurrency`: one AsyncSqliteSaver shared by asyncio tasks; the
//! synchronous SqliteSaver "does not scale to multiple threads").
//!
//! Beside them: the raw SQLite commit rate of one writer at FULL on the
//! same disk (benches/common/raw_sqlite.rs), how busy the process kept
//! the CPU during the concurrent runs, and how busy the store's one writer
//! connection was and how many writes shared each of its commits
//! (`Health::writer_stats`): together they say whether a figure is bound by
//! the disk's fsyncs, by the CPU, or by the one writer.
//!
//! Every cycle's outcome is checked: each start must pause, each resume
//! must complete its run, and after each sample the store must hold exactly
//! as many completed runs as cycles were counted.
//!
//! Run: `cargo bench --bench concurrent` (TOLLGATE_BENCH_CYCLES per stream,
//! default 300; TOLLGATE_BENCH_CONCURRENCY, default 16;
//! TOLLGATE_BENCH_PYTHON=$(bench/langgraph-venv) for the LangGraph peer).

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::json;
use tollgate_runtime::store::{Synchronous, WriterStats};
use tollgate_runtime::{AgentRun, Decision, RunStatus};

#[path = "common/cpu.rs"]
mod cpu;
#[path = "common/peer.rs"]
mod peer;
#[path = "common/raw_sqlite.rs"]
mod raw_sqlite;
#[path = "common/stats.rs"]
mod stats;
#[path = "common/workload.rs"]
mod workload;

use stats::{SAMPLES, Stats, env_usize, row};

/// The run stored with its pause; the claim with the run's end.
const COMMITS_PER_CYCLE: usize = 2;

fn main() {
    let cycles = env_usize("TOLLGATE_BENCH_CYCLES", 300).max(1);
    let concurrency = env_usize("TOLLGATE_BENCH_CONCURRENCY", 16).max(2);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    let python = std::env::var_os("TOLLGATE_BENCH_PYTHON")
        .filter(|p| !p.is_empty())
        .map(PathBuf::from);

    println!(
        "pause+resume cycles at synchronous FULL, one SQLite file, in process; median of {SAMPLES} samples (min..max)"
    );
    println!(
        "each sample, interleaved: one stream of {cycles} cycles; {concurrency} concurrent runs of {cycles} cycles each\n  ({} tokio worker threads){}",
        runtime.metrics().num_workers(),
        if python.is_some() {
            format!(
                "; LangGraph at {concurrency} concurrent, {cycles} cycles in all (AsyncSqliteSaver shared by asyncio tasks)"
            )
        } else {
            String::new()
        }
    );
    if python.is_none() {
        println!(
            "LangGraph peer: skipped (TOLLGATE_BENCH_PYTHON is unset); enable it with\n  TOLLGATE_BENCH_PYTHON=\"$(bench/langgraph-venv)\" cargo bench --bench concurrent   (or bench/run)"
        );
    }
    println!();

    let mut one = Vec::new();
    let mut many = Vec::new();
    let mut busy = Vec::new();
    let mut writer_busy = Vec::new();
    let mut writes_per_commit = Vec::new();
    let mut writer_us = Vec::new();
    let mut raw = Vec::new();
    let mut theirs = Vec::new();
    for _ in 0..SAMPLES {
        one.push(runtime.block_on(cycles_per_s(1, cycles)).rate);
        // The disk's commit rate for one writer, between the two.
        raw.push(raw_sqlite::raw_commits(
            raw_sqlite::Sync::Full,
            cycles * COMMITS_PER_CYCLE,
        ));
        // How busy this process kept the cores: a rate bound by the CPU
        // shows near 100% per core, one bound by fsyncs far below.
        let cpu_before = cpu::cpu_seconds(std::process::id());
        let started = Instant::now();
        let concurrent = runtime.block_on(cycles_per_s(concurrency, cycles));
        busy.push(
            100.0 * (cpu::cpu_seconds(std::process::id()) - cpu_before)
                / started.elapsed().as_secs_f64(),
        );
        many.push(concurrent.rate);
        let writer = concurrent.writer;
        writer_busy.push(100.0 * writer.busy.as_secs_f64() / concurrent.elapsed.as_secs_f64());
        writes_per_commit.push(writer.writes as f64 / writer.commits.max(1) as f64);
        writer_us.push(1e6 * writer.busy.as_secs_f64() / writer.writes.max(1) as f64);
        if let Some(python) = &python {
            theirs.push(peer::langgraph_cycles(python, cycles, concurrency));
        }
    }
    let one = Stats::of(&one);
    let many = Stats::of(&many);
    println!("{}", row("figure", "median (min..max)", "target"));
    println!(
        "{}",
        row("tollgate FULL cycles/s, one stream", &one.show(0), "")
    );
    println!(
        "{}",
        row(
            &format!("tollgate FULL cycles/s, {concurrency} concurrent"),
            &many.show(0),
            ""
        )
    );
    println!(
        "{}",
        row(
            &format!("CPU of this process, {concurrency} concurrent, % of one core"),
            &Stats::of(&busy).show(0),
            ""
        )
    );
    println!(
        "{}",
        row(
            &format!("  the store's one writer, {concurrency} concurrent: busy, % of the time"),
            &Stats::of(&writer_busy).show(0),
            ""
        )
    );
    println!(
        "{}",
        row(
            "  writes per commit",
            &Stats::of(&writes_per_commit).show(1),
            ""
        )
    );
    println!(
        "{}",
        row(
            "  writer time per write (committing included), us",
            &Stats::of(&writer_us).show(0),
            ""
        )
    );
    let raw = Stats::of(&raw);
    println!(
        "{}",
        row("raw FULL commits/s, one writer", &raw.show(0), "")
    );
    let mut ratios = vec![row(
        &format!("tollgate {concurrency} concurrent / one stream"),
        &format!("{:.1}x", many.median / one.median),
        ">= 4x",
    )];
    // Above 1, concurrent cycles commit more often than one writer can
    // fsync: their commits share fsyncs (group commit).
    ratios.push(row(
        &format!("tollgate {concurrency} concurrent commits/s / raw commits/s"),
        &format!("{:.2}", many.median * COMMITS_PER_CYCLE as f64 / raw.median),
        "",
    ));
    if let Some(first) = theirs.first() {
        let settings = format!(
            "langgraph {}, SQLite {}, {}, journal_mode={} synchronous={}",
            first.field("langgraph"),
            first.field("sqlite"),
            first.field("saver"),
            first.field("journal_mode"),
            first.field("synchronous")
        );
        let theirs = Stats::of(
            &theirs
                .iter()
                .map(peer::PeerSample::cycles_per_s)
                .collect::<Vec<_>>(),
        );
        println!(
            "{}",
            row(
                &format!("LangGraph cycles/s, {concurrency} concurrent"),
                &theirs.show(1),
                ""
            )
        );
        println!("  ({settings})");
        ratios.push(row(
            &format!("tollgate {concurrency} / LangGraph {concurrency} concurrent"),
            &format!("{:.1}x", many.median / theirs.median),
            ">= 20x",
        ));
    }
    println!("\nratios of medians");
    for ratio in ratios {
        println!("{ratio}");
    }
}

/// What `streams` concurrent tasks on one agent did.
struct Measured {
    /// Cycles per second.
    rate: f64,
    elapsed: Duration,
    /// What the store's one writer connection did meanwhile.
    writer: WriterStats,
}

/// Cycles per second of `streams` concurrent tasks on one agent (one store,
/// one file), each running `per_stream` cycles back to back.
async fn cycles_per_s(streams: usize, per_stream: usize) -> Measured {
    let dir = tempfile::tempdir().expect("temp dir");
    let state = dir.path().join("state.db");
    let agent = workload::agent(&state, Synchronous::Full);
    let started = Instant::now();
    let tasks: Vec<_> = (0..streams)
        .map(|stream| {
            let agent = agent.clone();
            tokio::spawn(async move { run_cycles(&agent, stream, per_stream).await })
        })
        .collect();
    let mut completed = 0;
    for task in tasks {
        completed += task.await.expect("a stream panicked");
    }
    let elapsed = started.elapsed();
    let total = streams * per_stream;
    assert_eq!(completed, total, "cycles that completed");
    assert_eq!(completed_runs(&state), total, "completed runs in the store");
    Measured {
        rate: total as f64 / elapsed.as_secs_f64(),
        elapsed,
        writer: agent.store().writer_stats().expect("a SQLite store"),
    }
}

/// `count` cycles of one stream; how many completed (each is checked).
async fn run_cycles(agent: &AgentRun, stream: usize, count: usize) -> usize {
    let mut completed = 0;
    for i in 0..count {
        let paused = agent
            .start(
                json!({"order_id": format!("A-{stream}-{i}"), "amount": 120}),
                json!({"kind": "bench"}),
            )
            .await
            .expect("start");
        let key = paused.pending.expect("the run paused at its gate").key;
        let done = agent
            .resume_by_key(&key, Decision::Approve { reason: None }, "bench")
            .await
            .expect("resume");
        assert_eq!(done.status, RunStatus::Completed, "run {}", done.run_id);
        completed += 1;
    }
    completed
}

/// Completed runs in the file, read on a connection of its own.
fn completed_runs(state: &Path) -> usize {
    let conn = rusqlite::Connection::open(state).expect("open");
    let n: i64 = conn
        .query_row(
            "SELECT count(*) FROM tollgate_runs WHERE status = 'completed'",
            [],
            |r| r.get(0),
        )
        .expect("count completed runs");
    n as usize
}
