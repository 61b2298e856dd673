//! Where a cycle's bytes go: the WAL frames a pause+resume cycle writes,
//! counted per table and index (b-tree), beside the JSON sizes of what the
//! cycle stores.
//!
//! Every page a commit dirties is written to the WAL as one frame (a 24-byte
//! header and the page). So after a checkpoint that empties the WAL, running
//! a number of cycles and reading the WAL's frame headers tells exactly which
//! pages the cycles wrote, and SQLite's `dbstat` table says which b-tree each
//! page belongs to. Checkpoints copy the same pages back to the database
//! file later, so the WAL is the whole story of what a cycle costs the disk
//! (the `cycles` bench counts the write calls themselves).
//!
//! Run: `cargo bench --bench writes` (TOLLGATE_BENCH_WRITE_CYCLES, default
//! 20: the WAL must hold them all before SQLite's automatic checkpoint at
//! 1000 frames).

use std::collections::{BTreeMap, HashMap};
use std::path::Path;

use rusqlite::Connection;
use serde_json::json;
use tollgate_runtime::store::Synchronous;
use tollgate_runtime::{Decision, RunStatus};

#[path = "common/stats.rs"]
mod stats;
#[path = "common/workload.rs"]
mod workload;

const WAL_HEADER: usize = 32;
const FRAME_HEADER: usize = 24;
/// Cycles run before measuring, so the b-trees have their steady shape.
const WARM_UP: usize = 10;

fn main() {
    let cycles = stats::env_usize("TOLLGATE_BENCH_WRITE_CYCLES", 20);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    let dir = tempfile::tempdir().expect("temp dir");
    let db = dir.path().join("state.db");
    let agent = workload::agent(&db, Synchronous::Full);
    runtime.block_on(run_cycles(&agent, 0, WARM_UP));
    truncate_wal(&db);
    runtime.block_on(run_cycles(&agent, WARM_UP, cycles));
    let wal = std::fs::read(db.with_extension("db-wal")).expect("read the WAL");
    let frames = frames_of(&wal);
    assert!(
        frames.commits >= cycles,
        "the WAL holds {} commits for {cycles} cycles: an automatic checkpoint ran (lower TOLLGATE_BENCH_WRITE_CYCLES)",
        frames.commits
    );
    let owners = page_owners(&db);
    if std::env::var_os("TOLLGATE_BENCH_WRITE_PAGES").is_some() {
        let mut pages: Vec<_> = frames.per_page.iter().collect();
        pages.sort();
        for (page, count) in pages {
            println!(
                "page {page} {} x{count}",
                owners.get(page).map_or("?", String::as_str)
            );
        }
    }
    report(&frames, &owners, cycles);
    runtime.block_on(sizes(&db));
    event_sizes(&db);
}

async fn run_cycles(agent: &tollgate_runtime::AgentRun, from: usize, cycles: usize) {
    for i in from..from + cycles {
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
}

/// Copy the WAL into the database and empty it, so that what follows is
/// all the measured cycles wrote.
fn truncate_wal(db: &Path) {
    let conn = Connection::open(db).expect("open");
    let (busy, _, _): (i64, i64, i64) = conn
        .query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |r| {
            Ok((r.get(0)?, r.get(1)?, r.get(2)?))
        })
        .expect("checkpoint");
    assert_eq!(busy, 0, "the checkpoint could not finish");
}

struct Frames {
    page_size: usize,
    /// Frames written per page number.
    per_page: HashMap<u32, usize>,
    total: usize,
    commits: usize,
}

/// The frames of a WAL file: each names its page; a commit frame carries the
/// database size after the commit (nonzero). Frames past the last valid salt
/// (left from before a restart) are not counted.
fn frames_of(wal: &[u8]) -> Frames {
    let be32 = |at: usize| u32::from_be_bytes(wal[at..at + 4].try_into().unwrap());
    let page_size = be32(8) as usize;
    let (salt1, salt2) = (be32(16), be32(20));
    let mut frames = Frames {
        page_size,
        per_page: HashMap::new(),
        total: 0,
        commits: 0,
    };
    let mut at = WAL_HEADER;
    while at + FRAME_HEADER + page_size <= wal.len() {
        if be32(at + 8) != salt1 || be32(at + 12) != salt2 {
            break;
        }
        *frames.per_page.entry(be32(at)).or_default() += 1;
        frames.total += 1;
        if be32(at + 4) != 0 {
            frames.commits += 1;
        }
        at += FRAME_HEADER + page_size;
    }
    frames
}

/// Page number -> the table or index it belongs to.
fn page_owners(db: &Path) -> HashMap<u32, String> {
    let conn = Connection::open(db).expect("open");
    let mut stmt = conn
        .prepare("SELECT name, pageno FROM dbstat")
        .expect("dbstat (SQLITE_ENABLE_DBSTAT_VTAB)");
    stmt.query_map([], |r| Ok((r.get::<_, u32>(1)?, r.get::<_, String>(0)?)))
        .expect("dbstat")
        .map(|r| r.expect("row"))
        .collect()
}

fn report(frames: &Frames, owners: &HashMap<u32, String>, cycles: usize) {
    let mut per_owner: BTreeMap<&str, usize> = BTreeMap::new();
    for (page, count) in &frames.per_page {
        let owner = match *page {
            1 => "(page 1: schema and file header)",
            p => owners.get(&p).map_or("(free list)", String::as_str),
        };
        *per_owner.entry(owner).or_default() += count;
    }
    let frame_bytes = (FRAME_HEADER + frames.page_size) as f64;
    let per_cycle = |n: usize| n as f64 / cycles as f64;
    println!(
        "WAL frames per cycle, by table and index ({cycles} cycles after {WARM_UP} warm-up, synchronous FULL, {} commits, page size {})",
        frames.commits, frames.page_size
    );
    println!(
        "{:<44} {:>14} {:>10}",
        "b-tree", "frames/cycle", "KiB/cycle"
    );
    let mut rows: Vec<_> = per_owner.into_iter().collect();
    rows.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
    for (owner, count) in rows {
        println!(
            "{owner:<44} {:>14.2} {:>10.1}",
            per_cycle(count),
            per_cycle(count) * frame_bytes / 1024.0
        );
    }
    println!(
        "{:<44} {:>14.2} {:>10.1}",
        "total",
        per_cycle(frames.total),
        per_cycle(frames.total) * frame_bytes / 1024.0
    );
    println!(
        "{:<44} {:>14.2}",
        "commits per cycle",
        per_cycle(frames.commits)
    );
}

/// What one cycle stores, in bytes of JSON, per table: the logical size
/// beside the pages above.
async fn sizes(db: &Path) {
    let conn = Connection::open(db).expect("open");
    let tables: Vec<String> = conn
        .prepare("SELECT name FROM sqlite_schema WHERE type = 'table' AND name LIKE 'tollgate_%'")
        .expect("tables")
        .query_map([], |r| r.get(0))
        .expect("tables")
        .map(|r| r.expect("row"))
        .collect();
    let runs: f64 = conn
        .query_row("SELECT COUNT(*) FROM tollgate_runs", [], |r| r.get(0))
        .expect("runs");
    println!("\nstored per cycle (row bytes as dbstat counts them, {runs} runs in the file)");
    println!("{:<44} {:>10} {:>14}", "table", "rows/cycle", "bytes/cycle");
    for table in tables {
        let (rows, bytes): (f64, f64) = conn
            .query_row(
                &format!(
                    "SELECT (SELECT COUNT(*) FROM \"{table}\"), COALESCE(SUM(payload), 0) FROM dbstat WHERE name = ?1"
                ),
                [&table],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .expect("size");
        if rows > 0.0 {
            println!("{table:<44} {:>10.2} {:>14.0}", rows / runs, bytes / runs);
        }
    }
}

/// The events of the last run, with their sizes: what the event log stores
/// per cycle, type by type.
fn event_sizes(db: &Path) {
    let conn = Connection::open(db).expect("open");
    let mut stmt = conn
        .prepare(
            "SELECT event FROM tollgate_run_events WHERE run_id = \
             (SELECT id FROM tollgate_runs ORDER BY created_at DESC, id DESC LIMIT 1) ORDER BY seq",
        )
        .expect("events");
    let events: Vec<String> = stmt
        .query_map([], |r| r.get(0))
        .expect("events")
        .map(|r| r.expect("row"))
        .collect();
    println!("\nthe events of one cycle (bytes of JSON)");
    for event in &events {
        let kind = serde_json::from_str::<serde_json::Value>(event)
            .ok()
            .and_then(|v| v.get("type").and_then(|t| t.as_str()).map(str::to_string))
            .unwrap_or_else(|| "?".into());
        println!("{kind:<44} {:>6}", event.len());
        if std::env::var_os("TOLLGATE_BENCH_WRITE_PAGES").is_some() {
            println!("  {event}");
        }
    }
}
