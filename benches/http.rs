//! The HTTP server under load: approvals decided per second over 16
//! keep-alive connections (each approving its own keys), beside the raw
//! SQLite commit rate measured in the same run; `GET /approvals?limit=50`
//! latency with many pending; the server's RSS with that many pending.
//!
//! The pending approvals are seeded in this process through the runtime
//! (synchronous NORMAL, for speed), then the real `tollgate serve` binary
//! serves the file with the default (FULL) durability. Every figure is the
//! median of several samples; each sample starts a fresh server, lists,
//! measures the raw commit rate, decides its own batch of keys, stops the
//! server and seeds as many new pending approvals, so every sample lists at
//! the same number pending. The server's own `/metrics` says how busy its
//! one SQLite writer was while deciding and how many writes shared each
//! commit: a writer busy nearly all the time is what bounds the rate.
//!
//! Run: `cargo bench --bench http` (TOLLGATE_BENCH_PENDING, default 100000;
//! TOLLGATE_BENCH_DECISIONS per sample, default 5000).

use std::collections::VecDeque;
use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::json;
use tollgate_runtime::store::Synchronous;

#[path = "common/raw_sqlite.rs"]
mod raw_sqlite;
#[path = "common/server.rs"]
mod server;
#[path = "common/stats.rs"]
mod stats;
#[path = "common/workload.rs"]
mod workload;

use server::{Server, encode};
use stats::{SAMPLES, Stats, env_usize, row};
use workload::SPEC;

const CONNECTIONS: usize = 16;
const LIST_REQUESTS: usize = 1000;
/// A decision costs two commits: the claim and the run's end.
const COMMITS_PER_DECISION: usize = 2;

#[derive(Default)]
struct Samples {
    decided: Vec<f64>,
    completed: Vec<f64>,
    raw: Vec<f64>,
    p50_ms: Vec<f64>,
    p99_ms: Vec<f64>,
    rss_start: Vec<f64>,
    rss_listed: Vec<f64>,
    rss_peak: Vec<f64>,
    /// The server's SQLite writer while deciding (from its `/metrics`).
    writer_busy_pct: Vec<f64>,
    writes_per_commit: Vec<f64>,
    writer_us_per_write: Vec<f64>,
    commit_us_per_write: Vec<f64>,
}

fn main() {
    let pending = env_usize("TOLLGATE_BENCH_PENDING", 100_000);
    let decisions = env_usize("TOLLGATE_BENCH_DECISIONS", 5_000).clamp(1, pending);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    let dir = tempfile::tempdir().expect("temp dir");
    let spec_path = dir.path().join("agent.yaml");
    std::fs::write(&spec_path, SPEC).expect("spec");
    let state = dir.path().join("state.db");

    let started = Instant::now();
    let mut keys: VecDeque<String> = runtime.block_on(seed(&state, 0, pending)).into();
    let mut seeded = pending;
    println!(
        "tollgate serve on a SQLite file (synchronous FULL, the default) with {pending} pending approvals (seeded in {:.1}s)",
        started.elapsed().as_secs_f64()
    );
    println!(
        "median of {SAMPLES} samples (min..max); each sample: a fresh server, {LIST_REQUESTS} GET /approvals?limit=50 on one\n  connection (first and deeper pages), the raw commit rate, {decisions} approvals over {CONNECTIONS} keep-alive connections;\n  then {decisions} new pending are seeded so the next sample lists at {pending} again\n"
    );

    let mut samples = Samples::default();
    for sample in 0..SAMPLES {
        let mut server = Server::sqlite(&spec_path, &state);
        samples.rss_start.push(server.rss_mib("VmRSS:"));
        let (p50, p99) = runtime.block_on(list_latency(&server.base));
        samples.p50_ms.push(p50.as_secs_f64() * 1e3);
        samples.p99_ms.push(p99.as_secs_f64() * 1e3);
        samples.rss_listed.push(server.rss_mib("VmRSS:"));
        // Right before the decisions, so drift in the disk's fsync cost
        // (writeback of the seeded file) hits both alike.
        samples.raw.push(raw_sqlite::raw_commits(
            raw_sqlite::Sync::Full,
            (decisions * COMMITS_PER_DECISION).max(1000),
        ));
        let batch: VecDeque<String> = keys.drain(..decisions).collect();
        let writer_before = runtime.block_on(server::writer_totals(&server.base));
        let (decided, completed) = runtime.block_on(decide_all(&server.base, batch, &state));
        let writer = runtime
            .block_on(server::writer_totals(&server.base))
            .since(&writer_before);
        samples
            .writer_busy_pct
            .push(100.0 * writer.busy_s / completed.as_secs_f64());
        samples
            .writes_per_commit
            .push(writer.writes / writer.commits.max(1.0));
        let per_write = |seconds: f64| 1e6 * seconds / writer.writes.max(1.0);
        samples.writer_us_per_write.push(per_write(writer.busy_s));
        samples
            .commit_us_per_write
            .push(per_write(writer.committing_s));
        samples
            .decided
            .push(decisions as f64 / decided.as_secs_f64());
        samples
            .completed
            .push(decisions as f64 / completed.as_secs_f64());
        samples.rss_peak.push(server.rss_mib("VmHWM:"));
        server.stop();
        if sample + 1 < SAMPLES {
            keys.extend(runtime.block_on(seed(&state, seeded, decisions)));
            seeded += decisions;
        }
    }

    let decided = Stats::of(&samples.decided);
    let raw = Stats::of(&samples.raw);
    let raw_decisions = raw.median / COMMITS_PER_DECISION as f64;
    let list = format!("GET /approvals?limit=50 at {pending} pending");
    let lines = [
        row("figure", "median (min..max)", "target"),
        row(
            "approvals decided/s (answered at the claim)",
            &decided.show(0),
            ">= 1000",
        ),
        row(
            "runs completed/s (decided and finished)",
            &Stats::of(&samples.completed).show(0),
            "",
        ),
        row("raw FULL commits/s (WAL, one connection)", &raw.show(0), ""),
        row(
            &format!("raw FULL decision-equivalents/s (commits / {COMMITS_PER_DECISION})"),
            &format!("{raw_decisions:.0}"),
            "",
        ),
        row(
            &format!("{list}: p50 ms"),
            &Stats::of(&samples.p50_ms).show(2),
            "",
        ),
        row(
            &format!("{list}: p99 ms"),
            &Stats::of(&samples.p99_ms).show(2),
            "<= 20",
        ),
        row(
            "server RSS after start, MiB",
            &Stats::of(&samples.rss_start).show(0),
            "",
        ),
        row(
            "server RSS after listing, MiB",
            &Stats::of(&samples.rss_listed).show(0),
            "",
        ),
        row(
            "server peak RSS (VmHWM) by the end, MiB",
            &Stats::of(&samples.rss_peak).show(0),
            "<= 64",
        ),
        row(
            "server's SQLite writer busy while deciding, % of the time",
            &Stats::of(&samples.writer_busy_pct).show(0),
            "",
        ),
        row(
            "  writes per commit (writes that shared one fsync)",
            &Stats::of(&samples.writes_per_commit).show(1),
            "",
        ),
        row(
            "  writer time per write, us",
            &Stats::of(&samples.writer_us_per_write).show(0),
            "",
        ),
        row(
            "  of which in COMMIT (WAL writes, fsync, checkpoints), us",
            &Stats::of(&samples.commit_us_per_write).show(0),
            "",
        ),
        String::new(),
        "ratios of medians".to_string(),
        row(
            "approvals decided/s / raw decision-equivalents/s",
            &format!("{:.0}%", 100.0 * decided.median / raw_decisions),
            "",
        ),
    ];
    for line in lines {
        println!("{line}");
    }
}

/// `count` new pending approvals, order ids from `first` on; their keys.
async fn seed(state: &Path, first: usize, count: usize) -> Vec<String> {
    let agent = workload::agent(state, Synchronous::Normal);
    let mut keys = Vec::with_capacity(count);
    for i in first..first + count {
        let outcome = agent
            .start(
                json!({"order_id": format!("A-{i}"), "amount": 120}),
                json!({"kind": "bench"}),
            )
            .await
            .expect("start");
        keys.push(outcome.pending.expect("paused").key);
    }
    keys
}

async fn list_latency(base: &str) -> (Duration, Duration) {
    let client = reqwest::Client::new();
    let mut samples = Vec::with_capacity(LIST_REQUESTS);
    let mut cursor: Option<String> = None;
    for i in 0..LIST_REQUESTS {
        // Alternate the first page with walking deeper, page by page.
        let url = match (&cursor, i % 2) {
            (Some(c), 1) => format!("{base}/approvals?limit=50&cursor={}", encode(c)),
            _ => format!("{base}/approvals?limit=50"),
        };
        let t = Instant::now();
        let response = client.get(&url).send().await.expect("list");
        assert_eq!(response.status().as_u16(), 200);
        let page: serde_json::Value = response.json().await.expect("json");
        samples.push(t.elapsed());
        let next = page["next_cursor"].as_str().map(str::to_string);
        // Full pages but the last; a walk that reaches the end (a small
        // TOLLGATE_BENCH_PENDING) starts over from the first page.
        let len = page["approvals"].as_array().map_or(0, Vec::len);
        assert!(len == 50 || next.is_none(), "a page of {len} approvals");
        if i % 2 == 1 || cursor.is_none() {
            cursor = next;
        }
    }
    samples.sort();
    (
        samples[samples.len() / 2],
        samples[samples.len() * 99 / 100],
    )
}

async fn decide_all(base: &str, keys: VecDeque<String>, state: &Path) -> (Duration, Duration) {
    let count = keys.len();
    let conn = rusqlite::Connection::open(state).expect("open");
    let completed = || -> usize {
        let done: i64 = conn
            .query_row(
                "SELECT count(*) FROM tollgate_runs WHERE status = 'completed'",
                [],
                |r| r.get(0),
            )
            .expect("count");
        done as usize
    };
    let completed_before = completed();
    let started = Instant::now();
    server::approve_all(&[base.to_string()], keys.into(), CONNECTIONS).await;
    let decided = started.elapsed();
    // Every decided run completes in the server's background; wait for it.
    while completed() < completed_before + count {
        std::thread::sleep(Duration::from_millis(5));
    }
    (decided, started.elapsed())
}
