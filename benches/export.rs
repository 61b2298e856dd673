//! Export figures: how long `tollgate export` takes for the largest example
//! (plan in memory + write to disk), and the cold `cargo build --release`
//! time of that export and of a gate-only one (hello-approval: no optional
//! runtime feature) beside a minimal axum + tokio + rusqlite hello-world
//! server built the same way in the same run (each in an empty target dir,
//! dependencies from the local registry cache, the same lockfile versions),
//! as several rounds built one after the other: the largest export, the
//! gate-only one, then the minimal server.
//!
//! Run: `cargo bench --bench export`. Each pair of builds takes minutes;
//! TOLLGATE_BENCH_BUILD_RUNS sets the number of pairs (default 5) and
//! TOLLGATE_BENCH_SKIP_BUILDS=1 leaves the builds out (export timing alone).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use tollgate::export::{ExportOptions, command::plan_for, export};

#[path = "common/stats.rs"]
mod stats;

use stats::{SAMPLES, Stats, env_usize, row};

const EXAMPLE: &str = "examples/refund-desk.yaml";
/// A spec with no http tools, models, Slack, webhooks or email: its export
/// builds the runtime with no optional feature.
const GATE_ONLY: &str = "examples/hello-approval.yaml";
const EXPORT_SAMPLES: usize = 20;

fn main() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let spec = root.join(EXAMPLE);
    let scratch = tempfile::tempdir().expect("temp dir");

    let mut times = Vec::new();
    for n in 0..EXPORT_SAMPLES {
        let out = scratch.path().join(format!("export-{n}"));
        let started = Instant::now();
        let plan = plan_for(&spec).expect("plan");
        export(&plan, &out, &ExportOptions::default()).expect("export");
        times.push(ms(started.elapsed()));
    }
    println!("{}", row("figure", "median (min..max)", "target"));
    println!(
        "{}",
        row(
            &format!("export {EXAMPLE}, ms ({EXPORT_SAMPLES} fresh)"),
            &Stats::of(&times).show(1),
            ""
        )
    );

    if std::env::var_os("TOLLGATE_BENCH_SKIP_BUILDS").is_some() {
        println!("cold builds: skipped (TOLLGATE_BENCH_SKIP_BUILDS is set)");
        return;
    }
    let pairs = env_usize("TOLLGATE_BENCH_BUILD_RUNS", SAMPLES).max(1);
    let exported = scratch.path().join("export-0");
    let gate_only = scratch.path().join("gate-only");
    let plan = plan_for(&root.join(GATE_ONLY)).expect("plan");
    export(&plan, &gate_only, &ExportOptions::default()).expect("export");
    let minimal = scratch.path().join("minimal");
    write_minimal_server(&minimal, &root.join("Cargo.lock"));
    println!(
        "cold cargo build --release, each in an empty target dir, {pairs} round(s) of the export, the gate-only export, then a minimal axum+tokio+rusqlite server"
    );
    let mut ours = Vec::new();
    let mut gated = Vec::new();
    let mut theirs = Vec::new();
    for round in 1..=pairs {
        // Interleaved, so drift in the machine's load hits all alike.
        ours.push(cold_build(&exported, &scratch.path().join("target-export")));
        gated.push(cold_build(
            &gate_only,
            &scratch.path().join("target-gate-only"),
        ));
        theirs.push(cold_build(&minimal, &scratch.path().join("target-minimal")));
        println!(
            "  cold build round {round}/{pairs}: exported {:.0} s, gate-only {:.0} s, minimal {:.0} s",
            ours[round - 1],
            gated[round - 1],
            theirs[round - 1]
        );
    }
    let ours = Stats::of(&ours);
    let gated = Stats::of(&gated);
    let theirs = Stats::of(&theirs);
    let lines = [
        row("cold build of the exported server, s", &ours.show(0), ""),
        row("cold build of the gate-only export, s", &gated.show(0), ""),
        row("cold build of the minimal server, s", &theirs.show(0), ""),
        String::new(),
        "ratios of medians".to_string(),
        row(
            "cold build, exported / minimal",
            &format!("{:.2}x", ours.median / theirs.median),
            "<= 1.3x",
        ),
        row(
            "cold build, gate-only export / minimal",
            &format!("{:.2}x", gated.median / theirs.median),
            "<= 1.3x",
        ),
    ];
    for line in lines {
        println!("{line}");
    }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// Seconds for `cargo build --release` in `dir` with `target` empty; the
/// target dir is removed afterwards, so every build starts cold and the
/// pairs do not fill the disk.
fn cold_build(dir: &Path, target: &Path) -> f64 {
    let _ = std::fs::remove_dir_all(target);
    let started = Instant::now();
    let status = Command::new(env!("CARGO"))
        .args(["build", "--release", "--offline", "--quiet"])
        .env("CARGO_TARGET_DIR", target)
        .current_dir(dir)
        .status()
        .expect("run cargo");
    let elapsed = started.elapsed().as_secs_f64();
    assert!(status.success(), "build of {} failed", dir.display());
    std::fs::remove_dir_all(target).expect("remove the build's target dir");
    elapsed
}

/// The smallest server a user might otherwise write by hand: one route that
/// counts rows in a SQLite file. Same crate versions as ours (our lockfile),
/// and the same release profile as an export's Cargo.toml
/// (templates/Cargo.toml.in): cargo's default.
fn write_minimal_server(dir: &Path, lockfile: &Path) {
    std::fs::create_dir_all(dir.join("src")).expect("mkdir");
    std::fs::write(
        dir.join("Cargo.toml"),
        r#"[package]
name = "minimal-server"
version = "0.1.0"
edition = "2024"

[workspace]

[dependencies]
axum = { version = "0.8", default-features = false, features = ["http1", "json", "query", "tokio"] }
rusqlite = { version = "0.39", features = ["bundled"] }
tokio = { version = "1", features = ["rt-multi-thread", "macros", "net", "signal"] }
"#,
    )
    .expect("write Cargo.toml");
    std::fs::write(
        dir.join("src/main.rs"),
        r#"use std::sync::{Arc, Mutex};

use axum::{Router, extract::State, routing::get};
use rusqlite::Connection;

#[tokio::main]
async fn main() {
    let db = Connection::open("minimal.db").expect("open");
    db.execute_batch("PRAGMA journal_mode=WAL; CREATE TABLE IF NOT EXISTS hits (at TEXT)")
        .expect("schema");
    let db = Arc::new(Mutex::new(db));
    let app = Router::new().route("/", get(hit)).with_state(db);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:8080").await.expect("bind");
    axum::serve(listener, app).await.expect("serve");
}

async fn hit(State(db): State<Arc<Mutex<Connection>>>) -> String {
    let db = db.lock().expect("lock");
    db.execute("INSERT INTO hits VALUES (datetime('now'))", []).expect("insert");
    let n: i64 = db.query_row("SELECT COUNT(*) FROM hits", [], |r| r.get(0)).expect("count");
    format!("{n}\n")
}
"#,
    )
    .expect("write main.rs");
    // Our lockfile pins the same versions; cargo drops what it does not use.
    std::fs::copy(lockfile, dir.join("Cargo.lock")).expect("copy lockfile");
}
