//! PostgreSQL with several nodes: approvals decided per second over HTTP by
//! 3 `tollgate serve` processes on one database against 1, at the same
//! total client concurrency (16 keep-alive connections, spread round-robin
//! over the nodes), on a throwaway cluster of the machine's PostgreSQL
//! with pending approvals seeded beforehand (in bulk, see
//! benches/common/bulk_pending.rs). Samples alternate 1 node and 3 nodes;
//! all three servers run throughout (in a 1-node sample two are idle).
//!
//! Where the time goes: the CPU seconds (user + system, from
//! /proc/PID/stat) each side used during the samples: the servers, the
//! PostgreSQL processes (the postmaster and its children), and this bench
//! (the HTTP clients), per 1000 decisions, and as a share of the machine's
//! cores over the samples' wall time, so a CPU bound shows as measured.
//!
//! Run: `cargo bench --bench nodes` (TOLLGATE_BENCH_DECISIONS per sample,
//! default 2000; needs the machine's PostgreSQL, as the tests do).

#[path = "common/bulk_pending.rs"]
mod bulk_pending;
#[path = "common/cpu.rs"]
mod cpu;
#[path = "../tests/it/common/postgres.rs"]
mod pg;
#[path = "common/server.rs"]
mod server;
#[path = "common/stats.rs"]
mod stats;
#[path = "common/workload.rs"]
mod workload;

use std::sync::Arc;
use std::time::Duration;

use tollgate_runtime::store::{PostgresOptions, PostgresStore};
use tollgate_runtime::{AgentRun, Spec};

use cpu::cpu_seconds;
use server::Server;
use stats::{SAMPLES, Stats, env_usize, row};

/// The "3 nodes" of the figures' names.
const NODES: usize = 3;
const CONNECTIONS: usize = 16;
const TEMPLATES: usize = 100;

/// CPU seconds used by each side during one sample.
#[derive(Default, Clone, Copy)]
struct Cpu {
    servers: f64,
    postgres: f64,
    client: f64,
    wall: f64,
}

fn main() {
    let decisions = env_usize("TOLLGATE_BENCH_DECISIONS", 2000).max(CONNECTIONS);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    let db = pg::database();
    let dir = tempfile::tempdir().expect("temp dir");
    let spec_path = dir.path().join("agent.yaml");
    std::fs::write(&spec_path, workload::SPEC).expect("spec");

    // Twice what the samples decide, so every sample decides among as many pending.
    let pending = 2 * SAMPLES * 2 * decisions;
    runtime.block_on(async {
        let store = PostgresStore::connect(&db.url, PostgresOptions::default())
            .await
            .expect("connect");
        let spec = Arc::new(Spec::parse(workload::SPEC, "agent.yaml").expect("spec"));
        bulk_pending::make_templates(&AgentRun::new(spec, Arc::new(store)), TEMPLATES).await;
    });
    let clones = bulk_pending::clones(pending, TEMPLATES);
    bulk_pending::seed_postgres(&|sql| db.psql(sql), dir.path(), &clones);
    // Never the overdue tenth: it waits at a far expiry, nobody decides it.
    let mut keys = clones
        .iter()
        .filter(|c| !c.overdue())
        .map(|c| c.key.clone());

    let servers: Vec<Server> = (0..NODES)
        .map(|_| Server::postgres(&spec_path, &db.url))
        .collect();
    let bases: Vec<String> = servers.iter().map(|s| s.base.clone()).collect();
    let postmaster = postmaster_pid(&db);
    println!(
        "tollgate serve on one PostgreSQL database: {NODES} nodes against 1, {decisions} approvals per sample over {CONNECTIONS}\n  keep-alive connections spread over the nodes, {} pending seeded beforehand; median of {SAMPLES} samples (min..max),\n  samples alternating 1 and {NODES} nodes; {} cores\n",
        clones.len() + TEMPLATES,
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );

    let mut rates: [Vec<f64>; 2] = [Vec::new(), Vec::new()];
    let mut cpu: [Vec<Cpu>; 2] = [Vec::new(), Vec::new()];
    for _ in 0..SAMPLES {
        for (side, nodes) in [1, NODES].into_iter().enumerate() {
            let batch: Vec<String> = keys.by_ref().take(decisions).collect();
            assert_eq!(batch.len(), decisions, "seeded too few pending");
            let before = cpu_now(&servers, postmaster);
            let took = runtime.block_on(server::approve_all(&bases[..nodes], batch, CONNECTIONS));
            let after = cpu_now(&servers, postmaster);
            rates[side].push(decisions as f64 / took.as_secs_f64());
            cpu[side].push(Cpu {
                servers: after.servers - before.servers,
                postgres: after.postgres - before.postgres,
                client: after.client - before.client,
                wall: took.as_secs_f64(),
            });
        }
    }
    check_decided(&db, SAMPLES * 2 * decisions);

    let one = Stats::of(&rates[0]);
    let many = Stats::of(&rates[1]);
    println!("{}", row("figure", "median (min..max)", "target"));
    println!("{}", row("approvals decided/s, 1 node", &one.show(0), ""));
    println!(
        "{}",
        row(
            &format!("approvals decided/s, {NODES} nodes"),
            &many.show(0),
            ""
        )
    );
    for (side, nodes) in ["1 node", "3 nodes"].into_iter().enumerate() {
        let per_k = |f: fn(&Cpu) -> f64| {
            Stats::of(
                &cpu[side]
                    .iter()
                    .map(|c| 1000.0 * f(c) / decisions as f64)
                    .collect::<Vec<_>>(),
            )
            .median
        };
        let busy = Stats::of(
            &cpu[side]
                .iter()
                .map(|c| 100.0 * (c.servers + c.postgres + c.client) / c.wall)
                .collect::<Vec<_>>(),
        )
        .median;
        println!(
            "{}",
            row(
                &format!("CPU s per 1000 decisions, {nodes}"),
                &format!(
                    "servers {:.2}, postgres {:.2}, client {:.2}",
                    per_k(|c| c.servers),
                    per_k(|c| c.postgres),
                    per_k(|c| c.client)
                ),
                ""
            )
        );
        println!(
            "{}",
            row(
                &format!("CPU busy over the sample, {nodes}"),
                &format!("{busy:.0}% of one core"),
                ""
            )
        );
    }
    println!("\nratios of medians");
    println!(
        "{}",
        row(
            &format!("{NODES} nodes / 1 node"),
            &format!("{:.2}x", many.median / one.median),
            ">= 2x"
        )
    );
}

/// The CPU seconds used so far by the servers, the PostgreSQL processes
/// and this process.
fn cpu_now(servers: &[Server], postmaster: u32) -> Cpu {
    Cpu {
        servers: servers.iter().map(|s| cpu_seconds(s.pid())).sum(),
        postgres: cpu_seconds(postmaster)
            + children(postmaster)
                .into_iter()
                .map(cpu_seconds)
                .sum::<f64>(),
        client: cpu_seconds(std::process::id()),
        wall: 0.0,
    }
}

/// The postmaster's pid: the first line of its data directory's postmaster.pid.
fn postmaster_pid(db: &pg::TestDb) -> u32 {
    let data = db.psql("SHOW data_directory");
    let pid_file =
        std::fs::read_to_string(format!("{data}/postmaster.pid")).expect("postmaster.pid");
    pid_file
        .lines()
        .next()
        .and_then(|l| l.trim().parse().ok())
        .expect("a pid")
}

fn parent_of(pid: u32) -> Option<u32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat.rsplit_once(')')?
        .1
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

fn children(parent: u32) -> Vec<u32> {
    std::fs::read_dir("/proc")
        .expect("/proc")
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| parent_of(*pid) == Some(parent))
        .collect()
}

/// Every approval a sample counted was decided, once (and no other).
fn check_decided(db: &pg::TestDb, expected: usize) {
    let approved: usize = db
        .psql("SELECT count(*) FROM tollgate_approvals WHERE status = 'APPROVED'")
        .parse()
        .expect("count");
    assert_eq!(approved, expected, "approved approvals in the database");
    // Let the runs the decisions resumed finish before the servers stop.
    std::thread::sleep(Duration::from_millis(200));
}
