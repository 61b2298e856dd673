//! Pause+resume cycles per second, in process, on a SQLite file, beside the
//! raw SQLite commit rate with the same pragmas and, when a python with
//! LangGraph is given, beside LangGraph doing the same workload, all measured
//! in the same run with the samples interleaved.
//!
//! A cycle is the 3-step workflow prepare (set) -> approval gate -> act (set):
//! start the run until it pauses, then approve it by key until it completes.
//! It costs two durable commits: the run stored with its pause (a run that
//! reaches its gate through pure steps is stored at the gate, see
//! `AgentRun::start`), and the decision with the run's end (only `set:`
//! follows the gate, so the claim writes the end too, see `AgentRun::claim`).
//! The "raw" figure commits the same number of small
//! transactions (an insert and an update of similar rows, `BEGIN IMMEDIATE`)
//! with the same journal mode and synchronous setting, so the ratio says how
//! much of the disk's commit rate a cycle keeps.
//!
//! The LangGraph peer (bench/peer_langgraph.py) runs the same three steps as a
//! StateGraph with `interrupt()` at the gate and a `SqliteSaver` on a file:
//! start until the interrupt, then resume with `Command(resume=...)`. It keeps
//! the settings its users get by default (SqliteSaver switches the file to
//! WAL; python's sqlite3 leaves synchronous at FULL), so it is compared with
//! tollgate at FULL, tollgate's default.
//!
//! Run: `cargo bench --bench cycles` (TOLLGATE_BENCH_CYCLES to change the
//! count, TOLLGATE_BENCH_SYNC=full|normal for one mode only,
//! TOLLGATE_BENCH_PYTHON=$(bench/langgraph-venv) for the LangGraph peer,
//! TOLLGATE_BENCH_OUTBOX_NOTICES=N for N delivered notices already in the
//! outbox of the webhook's samples, as a long-lived server keeps them).

use std::path::PathBuf;
use std::time::Instant;

use serde_json::json;
use tollgate_runtime::store::Synchronous;

#[path = "common/io_counters.rs"]
mod io_counters;
#[path = "common/peer.rs"]
mod peer;
#[path = "common/raw_sqlite.rs"]
mod raw_sqlite;
#[path = "common/stats.rs"]
mod stats;
#[path = "common/workload.rs"]
mod workload;

use io_counters::PerUnit;
use peer::{PeerSample, langgraph_cycles};
use stats::{SAMPLES, Stats, env_usize, row};
use tollgate_runtime::{AgentRun, Decision, RunStatus};

/// The run stored with its pause; the claim with the run's end.
const COMMITS_PER_CYCLE: usize = 2;

fn main() {
    let cycles = env_usize("TOLLGATE_BENCH_CYCLES", 300);
    // Delivered notices already in the outbox of the webhook's samples.
    let kept_notices = env_usize("TOLLGATE_BENCH_OUTBOX_NOTICES", 0);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    // TOLLGATE_BENCH_SYNC=full|normal measures one mode only (for profiling).
    let modes = match std::env::var("TOLLGATE_BENCH_SYNC").as_deref() {
        Ok("full") => vec![Synchronous::Full],
        Ok("normal") => vec![Synchronous::Normal],
        _ => vec![Synchronous::Full, Synchronous::Normal],
    };
    let python = std::env::var_os("TOLLGATE_BENCH_PYTHON")
        .filter(|p| !p.is_empty())
        .map(PathBuf::from);

    println!("pause+resume cycles, {cycles} per sample, median of {SAMPLES} samples (min..max)");
    if kept_notices > 0 {
        println!(
            "the webhook's samples start with {kept_notices} delivered notices in the outbox (TOLLGATE_BENCH_OUTBOX_NOTICES)"
        );
    }
    println!(
        "a cycle = {COMMITS_PER_CYCLE} commits; raw = the same commits with the same pragmas (WAL, one connection)"
    );
    match &python {
        Some(python) => println!(
            "LangGraph peer: the same workload and count (bench/peer_langgraph.py), SqliteSaver on a file at the settings\n  its users get by default: SqliteSaver sets journal_mode=WAL, python's sqlite3 leaves synchronous=FULL (what the\n  peer reports it ran with is below); compared with tollgate FULL; each sample runs tollgate, raw, LangGraph back\n  to back; python: {}",
            python.display()
        ),
        None => println!(
            "LangGraph peer: skipped (TOLLGATE_BENCH_PYTHON is unset); enable it with\n  TOLLGATE_BENCH_PYTHON=\"$(bench/langgraph-venv)\" cargo bench --bench cycles   (or bench/run)"
        ),
    }
    println!();
    println!("{}", row("figure", "median (min..max)", "target"));

    let mut ratios = Vec::new();
    for sync in modes {
        let name = format!("{sync:?}").to_uppercase();
        // LangGraph runs at its own defaults, so it is measured once, beside FULL.
        let peer = python
            .as_deref()
            .filter(|_| matches!(sync, Synchronous::Full));
        let mut ours = Vec::new();
        let mut raw = Vec::new();
        let mut theirs = Vec::new();
        let mut hooked = Vec::new();
        let hook_spec = workload::spec_with_webhook();
        let mut our_writes = Vec::new();
        let mut hooked_writes = Vec::new();
        let mut raw_writes = Vec::new();
        for _ in 0..SAMPLES {
            // Interleaved, so drift in the machine's load hits all alike.
            let (rate, writes) =
                runtime.block_on(tollgate_cycles_of(workload::SPEC, sync, cycles, 0));
            ours.push(rate);
            our_writes.extend(writes);
            let (rate, writes) =
                runtime.block_on(tollgate_cycles_of(&hook_spec, sync, cycles, kept_notices));
            hooked.push(rate);
            hooked_writes.extend(writes);
            let (rate, writes) = io_counters::measure(cycles, || {
                raw_sqlite::raw_commits(raw_sync(sync), cycles * COMMITS_PER_CYCLE)
            });
            raw.push(rate);
            raw_writes.extend(writes);
            if let Some(python) = peer {
                theirs.push(langgraph_cycles(python, cycles, 1));
            }
        }
        let ours = Stats::of(&ours);
        let hooked = Stats::of(&hooked);
        let raw = Stats::of(&raw);
        let raw_cycles = raw.median / COMMITS_PER_CYCLE as f64;
        println!(
            "{}",
            row(&format!("tollgate {name} cycles/s"), &ours.show(0), "")
        );
        println!(
            "{}",
            row(
                &format!("tollgate {name} cycles/s, one webhook"),
                &hooked.show(0),
                ""
            )
        );
        println!(
            "{}",
            row(&format!("raw {name} commits/s"), &raw.show(0), "")
        );
        println!(
            "{}",
            row(
                &format!("raw {name} cycle-equivalents/s (commits / {COMMITS_PER_CYCLE})"),
                &format!("{raw_cycles:.0}"),
                ""
            )
        );
        if let (Some(ours), Some(raw)) = (writes_of(&our_writes), writes_of(&raw_writes)) {
            println!(
                "{}",
                row(
                    &format!("written per cycle, tollgate {name}"),
                    &ours.show(),
                    ""
                )
            );
            if let Some(hooked) = writes_of(&hooked_writes) {
                println!(
                    "{}",
                    row(
                        &format!("written per cycle, tollgate {name}, one webhook"),
                        &hooked.show(),
                        ""
                    )
                );
            }
            println!(
                "{}",
                row(
                    &format!("written per {COMMITS_PER_CYCLE} raw commits, {name}"),
                    &raw.show(),
                    ""
                )
            );
        }
        ratios.push(row(
            &format!("tollgate {name} with one webhook / without"),
            &format!("{:.0}%", 100.0 * hooked.median / ours.median),
            ">= 85%",
        ));
        ratios.push(row(
            &format!("tollgate {name} / raw {name} cycle-equivalents"),
            &format!("{:.0}%", 100.0 * ours.median / raw_cycles),
            ">= 40%",
        ));
        if let Some(first) = theirs.first() {
            let settings = format!(
                "langgraph {}, SQLite {}, journal_mode={} synchronous={}",
                first.field("langgraph"),
                first.field("sqlite"),
                first.field("journal_mode"),
                first.field("synchronous")
            );
            let theirs = Stats::of(
                &theirs
                    .iter()
                    .map(PeerSample::cycles_per_s)
                    .collect::<Vec<_>>(),
            );
            println!("{}", row("LangGraph cycles/s", &theirs.show(1), ""));
            println!("  ({settings})");
            ratios.push(row(
                &format!("tollgate {name} / LangGraph"),
                &format!("{:.1}x", ours.median / theirs.median),
                ">= 10x",
            ));
        }
    }
    println!("\nratios of medians");
    for ratio in ratios {
        println!("{ratio}");
    }
}

/// Cycles per second of `spec`'s workload (the notices a webhook adds are
/// written; nothing sends them here), on a store whose outbox already
/// holds `kept_notices` delivered notices, and what the cycles handed the
/// kernel (not the file's creation or the notices put in before).
async fn tollgate_cycles_of(
    spec: &str,
    sync: Synchronous,
    cycles: usize,
    kept_notices: usize,
) -> (f64, Option<PerUnit>) {
    let dir = tempfile::tempdir().expect("temp dir");
    let state = dir.path().join("state.db");
    let agent = workload::agent_of(spec, &state, sync);
    workload::prefill_outbox(&state, kept_notices);
    let before = io_counters::IoCounters::now();
    let rate = run_cycles(&agent, cycles).await;
    let writes = before
        .zip(io_counters::IoCounters::now())
        .map(|(b, a)| a.per(b, cycles));
    (rate, writes)
}

async fn run_cycles(agent: &AgentRun, cycles: usize) -> f64 {
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

/// Bytes and write calls handed to the kernel per cycle (medians): the WAL
/// frames of every page a cycle's commits dirty, plus checkpoint copies.
struct Writes {
    kib: f64,
    calls: f64,
}

impl Writes {
    fn show(&self) -> String {
        format!("{:.1} KiB in {:.0} writes", self.kib, self.calls)
    }
}

fn writes_of(samples: &[PerUnit]) -> Option<Writes> {
    if samples.is_empty() {
        return None;
    }
    let bytes: Vec<f64> = samples.iter().map(|w| w.bytes).collect();
    let calls: Vec<f64> = samples.iter().map(|w| w.calls).collect();
    Some(Writes {
        kib: Stats::of(&bytes).median / 1024.0,
        calls: Stats::of(&calls).median,
    })
}

fn raw_sync(sync: Synchronous) -> raw_sqlite::Sync {
    match sync {
        Synchronous::Full => raw_sqlite::Sync::Full,
        Synchronous::Normal => raw_sqlite::Sync::Normal,
    }
}
