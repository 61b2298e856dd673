//! PostgreSQL figures, on a throwaway cluster of the machine's PostgreSQL
//! (the same one the tests start): decision-to-waiter latency across two
//! nodes with NOTIFY versus polling, and approvals decided per second through
//! the store beside pgbench's rate for a bare `UPDATE ... RETURNING` on the
//! same cluster in the same run.
//!
//! Run: `cargo bench --bench postgres`. Each store instance pools
//! `TOLLGATE_DB_POOL_SIZE` connections (the store's own setting, default 5),
//! e.g. `TOLLGATE_DB_POOL_SIZE=2 cargo bench --bench postgres` to measure
//! another size.

#[path = "../tests/it/common/postgres.rs"]
mod pg;
#[allow(unused_macros)]
#[path = "../tests/it/common/store_cases/mod.rs"]
mod store_cases;

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::json;
use store_cases::{approve, paused_run};
use tollgate_runtime::gate::Gate;
use tollgate_runtime::pending_approval::Decision;
use tollgate_runtime::store::{PostgresOptions, PostgresStore, SharedStore};
use tollgate_runtime::watch::{FeedState, WatchOptions};

const HOUR: Duration = Duration::from_secs(3600);

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(4)
        .enable_all()
        .build()
        .expect("tokio runtime");
    runtime.block_on(decision_to_waiter_latency());
    runtime.block_on(claims_per_second_beside_raw_update_returning());
}

async fn pg_store(url: &str) -> SharedStore {
    Arc::new(
        PostgresStore::connect(url, PostgresOptions::from_env().expect("pool size"))
            .await
            .expect("connect"),
    )
}

/// Wait until the gate's watcher holds its LISTEN connection.
async fn listening(gate: &Gate) {
    let mut state = gate.watcher().state();
    tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            if matches!(*state.borrow_and_update(), FeedState::Listening { .. }) {
                return;
            }
            state.changed().await.expect("watcher alive");
        }
    })
    .await
    .expect("the watcher never started listening");
}

/// Decision-to-waiter latency across two nodes, NOTIFY versus polling.
async fn decision_to_waiter_latency() {
    let db = pg::database();
    let push = WatchOptions::default();
    let poll = WatchOptions {
        push: false,
        ..WatchOptions::default()
    };
    for (name, options, rounds) in [("NOTIFY", push, 200), ("polling every 1 s", poll, 40)] {
        let waiting = Gate::with_options(pg_store(&db.url).await, options.clone());
        let deciding = pg_store(&db.url).await;
        if options.push {
            listening(&waiting).await;
        }
        let mut latencies = Vec::with_capacity(rounds);
        for round in 0..rounds {
            let key = waiting
                .request("bench", "act", &json!({"n": 1}), HOUR)
                .await
                .expect("request");
            let waiter = {
                let gate = waiting.clone();
                let key = key.clone();
                tokio::spawn(async move {
                    gate.wait(&key).await.expect("decided");
                    Instant::now()
                })
            };
            // Decide at a different point of the poll cycle each round (a
            // fixed delay would phase-lock with the 1 s ticks).
            let spread = if options.push {
                0
            } else {
                (round as u64 * 617) % 1000
            };
            tokio::time::sleep(Duration::from_millis(20 + spread)).await;
            // The gate API's claim, its request's end planned from the
            // record before the claim (as `Gate::decide` does).
            let record = deciding
                .get_approval(&key)
                .await
                .expect("read")
                .expect("requested");
            let mut claim = tollgate_runtime::pending_approval::Claim {
                input: None,
                key,
                decision: Decision::Approve { reason: None },
                decided_by: "bench".into(),
                now: tollgate_runtime::time::now(),
                // A request belongs to no spec: claimed as it is stored,
                // as `decide_approval` claims it.
                spec_hash: record.spec_hash.clone(),
                pinned: false,
                timeout: None,
                then: tollgate_runtime::pending_approval::AfterClaim::Release,
            };
            let finish =
                tollgate_runtime::gate::request_finish(&record.decided_by_claim(&claim), claim.now);
            claim.then = tollgate_runtime::pending_approval::AfterClaim::Finish(Box::new(finish));
            let started = Instant::now();
            // One transaction on the other node: the claim (NOTIFY at commit).
            deciding.claim(&claim).await.expect("claim");
            let resolved = waiter.await.expect("waiter");
            latencies.push(resolved.duration_since(started));
        }
        latencies.sort();
        let pct = |p: usize| latencies[(latencies.len() * p / 100).min(latencies.len() - 1)];
        println!(
            "decision-to-waiter latency, {name}: p50 {:?}, p99 {:?} over {rounds} decisions",
            pct(50),
            pct(99)
        );
    }
}

/// Approvals decided per second through the store (claim: conditional
/// UPDATE ... RETURNING + run update + event + NOTIFY, one transaction),
/// beside pgbench's rate for a bare `UPDATE ... RETURNING` of one row by key
/// on the same cluster, at the same concurrency.
async fn claims_per_second_beside_raw_update_returning() {
    const KEYS: usize = 4000;
    const CLIENTS: usize = 8;
    let db = pg::database();
    let stores: Vec<SharedStore> = vec![pg_store(&db.url).await, pg_store(&db.url).await];
    for i in 0..KEYS {
        paused_run(stores[0].as_ref(), &format!("k{i}"), "bench", 0).await;
    }
    let started = Instant::now();
    let workers: Vec<_> = (0..CLIENTS)
        .map(|w| {
            let store = Arc::clone(&stores[w % stores.len()]);
            tokio::spawn(async move {
                for i in (w..KEYS).step_by(CLIENTS) {
                    store
                        .claim(&approve(&format!("k{i}"), "bench", 10))
                        .await
                        .expect("claim");
                }
            })
        })
        .collect();
    for worker in workers {
        worker.await.expect("worker");
    }
    let elapsed = started.elapsed();
    println!(
        "store claims: {:.0} approvals decided/s ({KEYS} claims, {CLIENTS} clients over 2 store instances, {elapsed:?})",
        KEYS as f64 / elapsed.as_secs_f64()
    );

    db.psql(&format!(
        "CREATE TABLE bench_raw (key text PRIMARY KEY, status text NOT NULL, n bigint NOT NULL);
         INSERT INTO bench_raw SELECT 'k' || i, 'PENDING', 0 FROM generate_series(0, {}) i;",
        KEYS - 1
    ));
    let dir = tempfile::tempdir().expect("temp dir");
    let script = dir.path().join("update.sql");
    std::fs::write(
        &script,
        format!(
            "\\set i random(0, {})\nUPDATE bench_raw SET status = 'APPROVED', n = n + 1 \
             WHERE key = 'k' || :i RETURNING key, status;\n",
            KEYS - 1
        ),
    )
    .expect("script");
    let cluster = pg::cluster();
    let out = std::process::Command::new(cluster.bin("pgbench"))
        .args(["-n", "-h", "127.0.0.1", "-U", "postgres"])
        .args(["-p", &cluster.port().to_string()])
        .args(["-c", &CLIENTS.to_string(), "-j", "2", "-T", "5", "-f"])
        .arg(&script)
        .arg(&db.name)
        .output()
        .expect("run pgbench");
    let text = String::from_utf8_lossy(&out.stdout);
    let tps = text
        .lines()
        .find(|l| l.starts_with("tps"))
        .unwrap_or("pgbench printed no tps line");
    println!("pgbench raw UPDATE ... RETURNING, {CLIENTS} clients: {tps}");
}
