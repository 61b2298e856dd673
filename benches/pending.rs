//! A million pending approvals: `tollgate serve` (FULL, the default) on a
//! store holding N pending approvals made in bulk (benches/common/
//! bulk_pending.rs: a few hundred real pauses cloned with SQL), on SQLite
//! and, with TOLLGATE_BENCH_PENDING_POSTGRES=1, on PostgreSQL.
//!
//! Per store, one server process:
//! - rounds of `GET /approvals?limit=50` (the first page; `?step=approve`;
//!   the next page by cursor) and of approvals decided one at a time on one
//!   keep-alive connection, each round giving a p50 and a p99, the figure
//!   being the median (min..max) over the rounds;
//! - one sweeper pass: right after the server listens, a tenth of the
//!   approvals is made due (their `expires_at` set a few seconds ahead),
//!   so the server's periodic sweep (every 30 s) expires them all in one
//!   pass; decisions go on one at a time meanwhile, and those that
//!   overlapped the pass are compared with those that did not (one at a
//!   time, so a pass that holds decisions up shows as one long decision:
//!   the longest is the figure). The pass starts 30 s after the server
//!   listens (the sweeper's interval, timed from just before it listens)
//!   and ends when no due approval reads `PENDING` in the store any more
//!   (the pass expires them in batches, each its own commit, so one due
//!   approval read `EXPIRED` is not the end of it);
//! - after the sweep, once: 50 lists filtered to a step no approval waits
//!   at (`&step=act`, a `set` step), the worst case of a filter;
//! - beside each round's decisions, the disk's own commit latency: as many
//!   raw SQLite commits at FULL, one at a time (benches/common/raw_sqlite.rs);
//! - bytes per pending approval: the SQLite file / N, or
//!   `pg_total_relation_size` of the pause tables / N.
//!
//! Run: `cargo bench --bench pending` (TOLLGATE_BENCH_PENDING_SCALE,
//! default 1000000; TOLLGATE_BENCH_PENDING_POSTGRES=1 adds PostgreSQL).

#[path = "common/bulk_pending.rs"]
mod bulk_pending;
#[path = "../tests/it/common/postgres.rs"]
mod pg;
#[path = "common/raw_sqlite.rs"]
mod raw_sqlite;
#[path = "common/server.rs"]
mod server;
#[path = "common/stats.rs"]
mod stats;
#[path = "common/workload.rs"]
mod workload;

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::json;
use tollgate_runtime::store::{PostgresOptions, PostgresStore, Synchronous};
use tollgate_runtime::{AgentRun, Spec};

use bulk_pending::Clone;
use server::{Server, encode};
use stats::{SAMPLES, Stats, env_usize, row};

/// Real pauses the clones copy.
const TEMPLATES: usize = 200;
const LISTS_PER_ROUND: usize = 200;
const CLAIMS_PER_ROUND: usize = 100;
/// Lists filtered to a step no approval waits at, once, after the sweep.
const ABSENT_LISTS: usize = 50;
/// The server's sweep interval (server::sweeper::DEFAULT_SWEEP_EVERY).
const SWEEP_EVERY: Duration = Duration::from_secs(30);
/// Rounds stop this long into the server's life, before its first sweep.
const ROUNDS_UNTIL: Duration = Duration::from_secs(24);

fn main() {
    let n = env_usize("TOLLGATE_BENCH_PENDING_SCALE", 1_000_000).max(TEMPLATES * 10);
    let postgres = std::env::var("TOLLGATE_BENCH_PENDING_POSTGRES").is_ok_and(|v| v == "1");
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    println!(
        "tollgate serve (FULL) with {n} pending approvals made in bulk ({TEMPLATES} real pauses cloned by SQL);\n  p50/p99 per round of {LISTS_PER_ROUND} requests of each list and {CLAIMS_PER_ROUND} decisions (one at a time, one\n  keep-alive connection), median (min..max) over up to {SAMPLES} rounds; a tenth of the approvals made due at start,\n  expired by the server's sweep {}s after it listens, decisions going on meanwhile\n",
        SWEEP_EVERY.as_secs()
    );
    let dir = tempfile::tempdir().expect("temp dir");
    let spec_path = dir.path().join("agent.yaml");
    std::fs::write(&spec_path, workload::SPEC).expect("spec");

    {
        let state = dir.path().join("state.db");
        let started = Instant::now();
        let agent = workload::agent(&state, Synchronous::Normal);
        runtime.block_on(bulk_pending::make_templates(&agent, TEMPLATES));
        drop(agent);
        let clones = bulk_pending::clones(n - TEMPLATES, TEMPLATES);
        bulk_pending::seed_sqlite(&state, &clones);
        let seeded = started.elapsed();
        let bytes = file_bytes(&state);
        let store = Store::Sqlite(state.clone());
        let server = Server::sqlite(&spec_path, &state);
        let figures = runtime.block_on(measure(&server, &store, &clones));
        report("SQLite", n, seeded, bytes, &figures);
        drop(server);
        // Gigabytes at a million: gone before PostgreSQL's turn.
        for suffix in ["", "-wal", "-shm"] {
            let _ = std::fs::remove_file(format!("{}{suffix}", state.display()));
        }
    }
    if postgres {
        let db = pg::database();
        let started = Instant::now();
        let store = runtime.block_on(async {
            PostgresStore::connect(&db.url, PostgresOptions::default())
                .await
                .expect("connect")
        });
        let spec = Arc::new(Spec::parse(workload::SPEC, "agent.yaml").expect("spec"));
        runtime.block_on(bulk_pending::make_templates(
            &AgentRun::new(spec, Arc::new(store)),
            TEMPLATES,
        ));
        let clones = bulk_pending::clones(n - TEMPLATES, TEMPLATES);
        bulk_pending::seed_postgres(&|sql| db.psql(sql), dir.path(), &clones);
        let seeded = started.elapsed();
        let bytes: f64 = db
            .psql(&format!(
                "SELECT {}",
                bulk_pending::PAUSE_TABLES
                    .map(|t| format!("pg_total_relation_size('{t}')"))
                    .join(" + ")
            ))
            .parse()
            .expect("sizes");
        let store = Store::Postgres(db.name.clone());
        let server = Server::postgres(&spec_path, &db.url);
        let figures = runtime.block_on(measure(&server, &store, &clones));
        report("PostgreSQL", n, seeded, bytes, &figures);
    }
}

/// The store under the server, reached directly (not through it).
#[derive(Clone)]
enum Store {
    Sqlite(std::path::PathBuf),
    /// A database of the shared throwaway cluster, by name.
    Postgres(String),
}

impl Store {
    fn sql(&self, sql: &str) -> String {
        match self {
            Store::Sqlite(state) => {
                let conn = rusqlite::Connection::open(state).expect("open");
                conn.busy_timeout(Duration::from_secs(60))
                    .expect("busy timeout");
                let mut stmt = conn.prepare(sql).expect("prepare");
                if stmt.column_count() == 0 {
                    stmt.execute([]).expect("execute");
                    return String::new();
                }
                stmt.query_row([], |r| r.get::<_, String>(0))
                    .expect("query")
            }
            Store::Postgres(name) => pg::cluster().psql(name, sql),
        }
    }

    /// Bring the overdue tenth due at `at`.
    fn make_overdue(&self, at: &str) {
        self.sql(&format!(
            "UPDATE tollgate_approvals SET expires_at = '{at}' WHERE status = 'PENDING' AND expires_at = '{}'",
            bulk_pending::OVERDUE_PLACEHOLDER
        ));
    }

    /// How many approvals due at `at` are still stored PENDING.
    fn pending_due(&self, at: &str) -> usize {
        self.sql(&format!(
            "SELECT CAST(COUNT(*) AS TEXT) FROM tollgate_approvals \
             WHERE status = 'PENDING' AND expires_at = '{at}'"
        ))
        .parse()
        .expect("a count")
    }
}

#[derive(Default)]
struct Figures {
    first_p50: Vec<f64>,
    first_p99: Vec<f64>,
    step_p50: Vec<f64>,
    step_p99: Vec<f64>,
    /// `&step=` of a step no approval waits at (after the sweep, once).
    absent_p50: f64,
    absent_p99: f64,
    next_p50: Vec<f64>,
    next_p99: Vec<f64>,
    claim_p50: Vec<f64>,
    claim_p99: Vec<f64>,
    /// The disk's own commit latency at FULL, beside the claims.
    raw_p50: Vec<f64>,
    raw_p99: Vec<f64>,
    rounds: usize,
    overdue: usize,
    sweep: Option<Duration>,
    /// Decision latencies (ms) that overlapped the sweep pass, and not.
    during: Vec<f64>,
    outside: Vec<f64>,
}

async fn measure(server: &Server, store: &Store, clones: &[Clone]) -> Figures {
    let client = reqwest::Client::builder()
        .pool_max_idle_per_host(1)
        .build()
        .expect("client");
    let base = &server.base;
    // Due a few seconds from now: after the start-up sweep, before the first periodic one.
    let due_at = bulk_pending::format_utc(chrono::Utc::now() + chrono::Duration::seconds(4));
    store.make_overdue(&due_at);
    let mut figures = Figures {
        overdue: clones.iter().filter(|c| c.overdue()).count(),
        ..Figures::default()
    };
    // Spread over the whole range: old and new approvals alike.
    let stride = (clones.len() / 40_000).max(1);
    let mut to_decide = clones
        .iter()
        .step_by(stride)
        .filter(|c| !c.overdue())
        .map(|c| c.key.as_str());

    while figures.rounds < SAMPLES && server.listening_at.elapsed() < ROUNDS_UNTIL {
        let (p50, p99) = lists(&client, &format!("{base}/approvals?limit=50"), false).await;
        figures.first_p50.push(p50);
        figures.first_p99.push(p99);
        let (p50, p99) = lists(
            &client,
            &format!("{base}/approvals?limit=50&step=approve"),
            false,
        )
        .await;
        figures.step_p50.push(p50);
        figures.step_p99.push(p99);
        let (p50, p99) = lists(&client, &format!("{base}/approvals?limit=50"), true).await;
        figures.next_p50.push(p50);
        figures.next_p99.push(p99);
        let mut latencies: Vec<f64> = Vec::with_capacity(CLAIMS_PER_ROUND);
        for _ in 0..CLAIMS_PER_ROUND {
            let key = to_decide.next().expect("keys to decide");
            latencies.push(decide(&client, base, key).await.as_secs_f64() * 1e3);
        }
        let (p50, p99) = percentiles(&mut latencies);
        figures.claim_p50.push(p50);
        figures.claim_p99.push(p99);
        let mut raw = raw_sqlite::raw_commit_latencies(raw_sqlite::Sync::Full, CLAIMS_PER_ROUND);
        let (p50, p99) = percentiles(&mut raw);
        figures.raw_p50.push(p50);
        figures.raw_p99.push(p99);
        figures.rounds += 1;
    }

    // Decide one at a time through the sweep, until its pass has ended;
    // a watcher of its own sees the end (a decision may wait on the pass).
    let sweep_starts = server.listening_at + SWEEP_EVERY;
    let watcher = tokio::task::spawn_blocking({
        let (store, due_at) = (store.clone(), due_at.clone());
        move || sweep_end(&store, &due_at, sweep_starts)
    });
    let mut decided: Vec<(Instant, Duration)> = Vec::new();
    while !watcher.is_finished() {
        // Idle until shortly before the pass: the keys are for around it.
        if Instant::now() + Duration::from_secs(3) < sweep_starts {
            tokio::time::sleep(Duration::from_millis(50)).await;
            continue;
        }
        let key = to_decide.next().expect("keys to decide");
        let started = Instant::now();
        decided.push((started, decide(&client, base, key).await));
    }
    let swept_at = watcher.await.expect("watcher");
    // Two more seconds of decisions after the pass.
    while swept_at.elapsed() < Duration::from_secs(2) {
        let key = to_decide.next().expect("keys to decide");
        let started = Instant::now();
        decided.push((started, decide(&client, base, key).await));
    }
    figures.sweep = Some(swept_at - sweep_starts);
    for (started, took) in decided {
        let ms = took.as_secs_f64() * 1e3;
        if started + took >= sweep_starts && started <= swept_at {
            figures.during.push(ms);
        } else {
            figures.outside.push(ms);
        }
    }
    // The worst case of a filter: nothing matches, so the page is empty
    // only once every pending row was looked at.
    let url = format!("{base}/approvals?limit=50&step=act");
    let mut latencies = Vec::with_capacity(ABSENT_LISTS);
    for _ in 0..ABSENT_LISTS {
        let t = Instant::now();
        let response = client.get(&url).send().await.expect("list");
        assert_eq!(response.status().as_u16(), 200, "{url}");
        let page: serde_json::Value = response.json().await.expect("json");
        latencies.push(t.elapsed().as_secs_f64() * 1e3);
        let len = page["approvals"].as_array().map_or(0, Vec::len);
        assert_eq!(len, 0, "no approval waits at step act");
    }
    (figures.absent_p50, figures.absent_p99) = percentiles(&mut latencies);
    figures
}

/// p50 and p99 (ms) of a round of list requests, each checked to be a
/// full page; `walk` follows the cursor page after page instead of asking
/// for the first page again.
async fn lists(client: &reqwest::Client, first: &str, walk: bool) -> (f64, f64) {
    let mut latencies = Vec::with_capacity(LISTS_PER_ROUND);
    let mut cursor: Option<String> = None;
    for _ in 0..LISTS_PER_ROUND {
        let url = match &cursor {
            Some(c) if walk => format!("{first}&cursor={}", encode(c)),
            _ => first.to_string(),
        };
        let t = Instant::now();
        let response = client.get(&url).send().await.expect("list");
        assert_eq!(response.status().as_u16(), 200, "{url}");
        let page: serde_json::Value = response.json().await.expect("json");
        latencies.push(t.elapsed().as_secs_f64() * 1e3);
        let len = page["approvals"].as_array().map_or(0, Vec::len);
        assert_eq!(len, 50, "a page of {len} approvals from {url}");
        cursor = page["next_cursor"].as_str().map(str::to_string);
    }
    percentiles(&mut latencies)
}

/// Approve one key; its latency (answered once the claim is durable).
async fn decide(client: &reqwest::Client, base: &str, key: &str) -> Duration {
    let t = Instant::now();
    let response = client
        .post(format!("{base}/approvals/{key}/approve"))
        .json(&json!({}))
        .send()
        .await
        .expect("approve");
    let status = response.status().as_u16();
    let body = response.text().await.unwrap_or_default();
    assert_eq!(status, 200, "approving {key}: {body}");
    t.elapsed()
}

/// When the sweep's pass was seen to end: no approval due at `due_at`
/// reads `PENDING` in the store any more (the API reads them expired as
/// soon as they are due), polled from a second before the pass. The pass
/// expires them in batches, each its own commit: one expired approval is
/// not the end of it.
fn sweep_end(store: &Store, due_at: &str, starts: Instant) -> Instant {
    std::thread::sleep(
        starts
            .saturating_duration_since(Instant::now())
            .saturating_sub(Duration::from_secs(1)),
    );
    let deadline = starts + Duration::from_secs(600);
    while Instant::now() < deadline {
        if store.pending_due(due_at) == 0 {
            return Instant::now();
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    panic!("the sweep did not end within 600 s");
}

fn percentiles(samples: &mut [f64]) -> (f64, f64) {
    if samples.is_empty() {
        return (f64::NAN, f64::NAN);
    }
    samples.sort_by(|a, b| a.total_cmp(b));
    let at = |p: usize| samples[(samples.len() * p / 100).min(samples.len() - 1)];
    (at(50), at(99))
}

fn file_bytes(state: &Path) -> f64 {
    ["", "-wal"]
        .iter()
        .filter_map(|suffix| std::fs::metadata(format!("{}{suffix}", state.display())).ok())
        .map(|m| m.len() as f64)
        .sum()
}

fn report(store: &str, n: usize, seeded: Duration, bytes: f64, f: &Figures) {
    let ms = |v: &[f64]| Stats::of(v).show(2);
    println!(
        "{store}: {n} pending, seeded in {:.0} s; {} rounds before the sweep",
        seeded.as_secs_f64(),
        f.rounds
    );
    let mut during = f.during.clone();
    let mut outside = f.outside.clone();
    let (during_p50, during_p99) = percentiles(&mut during);
    let (outside_p50, outside_p99) = percentiles(&mut outside);
    let during_max = during.last().copied().unwrap_or(f64::NAN);
    let outside_max = outside.last().copied().unwrap_or(f64::NAN);
    let sweep = f.sweep.unwrap_or_default().as_secs_f64();
    let lines = [
        row("figure", "median (min..max)", "target"),
        row(
            &format!("{store} GET /approvals?limit=50 p50 ms"),
            &ms(&f.first_p50),
            "",
        ),
        row(
            &format!("{store} GET /approvals?limit=50 p99 ms"),
            &ms(&f.first_p99),
            "<= 10",
        ),
        row(
            &format!("{store} ... &step=approve p50 ms"),
            &ms(&f.step_p50),
            "",
        ),
        row(
            &format!("{store} ... &step=approve p99 ms"),
            &ms(&f.step_p99),
            "<= 10",
        ),
        row(
            &format!("{store} ... &step=act (none there) p50/p99 ms"),
            &format!("{:.1}/{:.1}", f.absent_p50, f.absent_p99),
            "<= 10",
        ),
        row(
            &format!("{store} ... next page by cursor p50 ms"),
            &ms(&f.next_p50),
            "",
        ),
        row(
            &format!("{store} ... next page by cursor p99 ms"),
            &ms(&f.next_p99),
            "<= 10",
        ),
        row(
            &format!("{store} decision (claim) p50 ms"),
            &ms(&f.claim_p50),
            "",
        ),
        row(
            &format!("{store} decision (claim) p99 ms"),
            &ms(&f.claim_p99),
            "<= 5",
        ),
        row(
            "raw SQLite FULL commit p50 ms (same disk)",
            &ms(&f.raw_p50),
            "",
        ),
        row(
            "raw SQLite FULL commit p99 ms (same disk)",
            &ms(&f.raw_p99),
            "",
        ),
        row(
            &format!("{store} sweeper pass, {} overdue, s", f.overdue),
            &format!("{sweep:.2}"),
            "",
        ),
        row(
            &format!("{store} decisions during the pass: p50/p99/longest ms"),
            &format!(
                "{during_p50:.1}/{during_p99:.1}/{during_max:.0} ({})",
                f.during.len()
            ),
            "",
        ),
        row(
            &format!("{store} decisions around it: p50/p99/longest ms"),
            &format!(
                "{outside_p50:.1}/{outside_p99:.1}/{outside_max:.0} ({})",
                f.outside.len()
            ),
            "",
        ),
        // Decisions go one at a time, so a pass that holds them up shows
        // as one long decision, not as a high percentile.
        row(
            &format!("{store} longest decision during / around the pass"),
            &format!("{:.1}x", during_max / outside_max),
            "~1x: not blocked",
        ),
        row(
            &format!("{store} bytes per pending approval"),
            &format!("{:.0}", bytes / n as f64),
            "",
        ),
    ];
    for line in lines {
        println!("{line}");
    }
    println!();
}
