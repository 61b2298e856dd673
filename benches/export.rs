//! Export figures: how long `tollgate export` takes for the largest example
//! (plan in memory + write to disk), and the cold `cargo build --release`
//! time of that export beside a minimal axum + tokio + rusqlite hello-world
//! server built the same way in the same run (each in an empty target dir,
//! dependencies from the local registry cache, the same lockfile versions).
//!
//! Run: `cargo bench --bench export`. The builds take minutes; set
//! TOLLGATE_BENCH_SKIP_BUILDS=1 for the export timing alone.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use tollgate::export::{ExportOptions, command::plan_for, export};

const EXAMPLE: &str = "examples/refund-desk.yaml";
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
        times.push(started.elapsed());
    }
    times.sort();
    println!(
        "export {EXAMPLE}: median {:.1} ms (min {:.1}, max {:.1}) over {EXPORT_SAMPLES} fresh exports",
        ms(times[times.len() / 2]),
        ms(times[0]),
        ms(times[times.len() - 1])
    );

    if std::env::var_os("TOLLGATE_BENCH_SKIP_BUILDS").is_some() {
        return;
    }
    let exported = scratch.path().join("export-0");
    let minimal = scratch.path().join("minimal");
    write_minimal_server(&minimal, &root.join("Cargo.lock"));
    let ours = cold_build(&exported, &scratch.path().join("target-export"));
    let theirs = cold_build(&minimal, &scratch.path().join("target-minimal"));
    println!(
        "cold cargo build --release: exported server {:.0} s, minimal axum+tokio+rusqlite {:.0} s, ratio {:.2}",
        ours.as_secs_f64(),
        theirs.as_secs_f64(),
        ours.as_secs_f64() / theirs.as_secs_f64()
    );
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn cold_build(dir: &Path, target: &Path) -> Duration {
    let started = Instant::now();
    let status = Command::new(env!("CARGO"))
        .args(["build", "--release", "--offline", "--quiet"])
        .env("CARGO_TARGET_DIR", target)
        .current_dir(dir)
        .status()
        .expect("run cargo");
    assert!(status.success(), "build of {} failed", dir.display());
    started.elapsed()
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
