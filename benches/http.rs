//! The HTTP server under load: approvals decided per second over 16
//! keep-alive connections (each approving its own keys), beside the raw
//! SQLite commit rate measured in the same run; `GET /approvals?limit=50`
//! latency with many pending; the server's RSS with that many pending.
//!
//! The pending approvals are seeded in this process through the runtime
//! (synchronous NORMAL, for speed), then the real `tollgate serve` binary
//! serves the file with the default (FULL) durability.
//!
//! Run: `cargo bench --bench http` (TOLLGATE_BENCH_PENDING, default 100000;
//! TOLLGATE_BENCH_DECISIONS, default 5000).

use std::collections::VecDeque;
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::json;
use tollgate_runtime::store::{SqliteOptions, SqliteStore, Synchronous};
use tollgate_runtime::{AgentRun, Spec};

#[path = "common/raw_sqlite.rs"]
mod raw_sqlite;
#[path = "common/workload.rs"]
mod workload;

use workload::SPEC;

const CONNECTIONS: usize = 16;
const LIST_REQUESTS: usize = 1000;

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn main() {
    let pending = env_usize("TOLLGATE_BENCH_PENDING", 100_000);
    let decisions = env_usize("TOLLGATE_BENCH_DECISIONS", 5_000).min(pending);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    let dir = tempfile::tempdir().expect("temp dir");
    let spec_path = dir.path().join("agent.yaml");
    std::fs::write(&spec_path, SPEC).expect("spec");
    let state = dir.path().join("state.db");

    let started = Instant::now();
    let keys = runtime.block_on(seed(&state, pending));
    println!(
        "seeded {pending} pending approvals in {:.1}s",
        started.elapsed().as_secs_f64()
    );

    // Raw commit rate before and after the HTTP run: the disk's fsync cost
    // drifts (writeback of the seeded file), so both are shown.
    let raw_before = raw_sqlite::raw_commits(raw_sqlite::Sync::Full, decisions.max(500));
    let mut server = Server::start(&spec_path, &state);
    println!("server RSS after start: {} MiB", server.rss_mib());

    // GET /approvals?limit=50: first pages and deep pages.
    let (p50, p99) = runtime.block_on(list_latency(&server.base));
    println!(
        "GET /approvals?limit=50 with {pending} pending: p50 {:.2} ms, p99 {:.2} ms ({LIST_REQUESTS} requests, one connection)",
        p50.as_secs_f64() * 1e3,
        p99.as_secs_f64() * 1e3
    );
    println!(
        "server RSS with {pending} pending: {} MiB",
        server.rss_mib()
    );

    // Decisions: 16 keep-alive connections, each approving distinct keys.
    let queue: VecDeque<String> = keys.into_iter().take(decisions).collect();
    let (elapsed, completed_after) = runtime.block_on(decide_all(&server.base, queue, &state));
    let raw_after = raw_sqlite::raw_commits(raw_sqlite::Sync::Full, decisions.max(500));
    println!(
        "approvals decided: {decisions} in {:.2}s = {:.0}/s over {CONNECTIONS} connections (answered at the claim); all runs completed after {:.2}s = {:.0} runs/s",
        elapsed.as_secs_f64(),
        decisions as f64 / elapsed.as_secs_f64(),
        completed_after.as_secs_f64(),
        decisions as f64 / completed_after.as_secs_f64()
    );
    println!(
        "raw SQLite (WAL, synchronous FULL, one connection): {raw_before:.0} commits/s before, {raw_after:.0} after; a decision costs 2 commits (claim, end) = {:.0}..{:.0} decisions/s",
        raw_before.min(raw_after) / 2.0,
        raw_before.max(raw_after) / 2.0
    );
    println!("server RSS at the end: {} MiB", server.rss_mib());
    server.stop();
}

async fn seed(state: &std::path::Path, count: usize) -> Vec<String> {
    let store = SqliteStore::open(
        state,
        SqliteOptions {
            synchronous: Synchronous::Normal,
            ..SqliteOptions::default()
        },
    )
    .expect("open store");
    let spec = Arc::new(Spec::parse(SPEC, "agent.yaml").expect("spec"));
    let agent = AgentRun::new(spec, Arc::new(store));
    let mut keys = Vec::with_capacity(count);
    for i in 0..count {
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
        assert_eq!(page["approvals"].as_array().map(Vec::len), Some(50));
        if i % 2 == 1 || cursor.is_none() {
            cursor = page["next_cursor"].as_str().map(str::to_string);
        }
    }
    samples.sort();
    (
        samples[samples.len() / 2],
        samples[samples.len() * 99 / 100],
    )
}

fn encode(text: &str) -> String {
    text.replace(':', "%3A")
        .replace('|', "%7C")
        .replace('+', "%2B")
}

async fn decide_all(
    base: &str,
    keys: VecDeque<String>,
    state: &std::path::Path,
) -> (Duration, Duration) {
    let count = keys.len();
    let queue = Arc::new(Mutex::new(keys));
    let started = Instant::now();
    let mut workers = Vec::new();
    for _ in 0..CONNECTIONS {
        let queue = queue.clone();
        let base = base.to_string();
        workers.push(tokio::spawn(async move {
            // One client each, one idle connection: a keep-alive connection per worker.
            let client = reqwest::Client::builder()
                .pool_max_idle_per_host(1)
                .build()
                .expect("client");
            loop {
                let Some(key) = queue.lock().unwrap().pop_front() else {
                    return;
                };
                let response = client
                    .post(format!("{base}/approvals/{key}/approve"))
                    .json(&json!({}))
                    .send()
                    .await
                    .expect("approve");
                assert_eq!(response.status().as_u16(), 200);
                let _ = response.bytes().await;
            }
        }));
    }
    for worker in workers {
        worker.await.expect("worker");
    }
    let decided = started.elapsed();
    // Every decided run completes in the server's background; wait for it.
    let conn = rusqlite::Connection::open(state).expect("open");
    loop {
        let done: i64 = conn
            .query_row(
                "SELECT count(*) FROM tollgate_runs WHERE status = 'completed'",
                [],
                |r| r.get(0),
            )
            .expect("count");
        if done as usize >= count {
            break;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    (decided, started.elapsed())
}

struct Server {
    child: Child,
    base: String,
}

impl Server {
    fn start(spec: &std::path::Path, state: &std::path::Path) -> Server {
        let mut child = Command::new(env!("CARGO_BIN_EXE_tollgate"))
            .arg("serve")
            .arg(spec)
            .arg("--state")
            .arg(state)
            .args(["--listen", "127.0.0.1:0"])
            .env_remove("TOLLGATE_API_TOKENS")
            .env_remove("TOLLGATE_SQLITE_SYNCHRONOUS")
            .env("RUST_LOG", "warn")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn tollgate serve");
        let mut line = String::new();
        BufReader::new(child.stdout.take().expect("stdout"))
            .read_line(&mut line)
            .expect("read address");
        let base = line
            .trim()
            .strip_prefix("listening on ")
            .expect("address line")
            .to_string();
        Server { child, base }
    }

    fn rss_mib(&self) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id()))
            .unwrap_or_default();
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.split_whitespace().next()?.parse::<u64>().ok())
            .map_or(0, |kib| kib / 1024)
    }

    fn stop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
