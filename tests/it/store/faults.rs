//! Storage faults on real SQLite files and the real binary: one row that
//! cannot be decoded, a damaged file, a read-only file, a full disk. Each is
//! refused or reported clearly and by name, and none lets one bad part stop
//! or corrupt the rest.

use crate::common;
use crate::common::assert_stderr_contains;
use crate::common::server;
use crate::common::stub_server;

use std::io::{Seek, SeekFrom, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, SystemTime};

use common::*;
use rusqlite::Connection;
use serde_json::{Value, json};
use server::{Api, Served};
use tollgate_runtime::store::{
    ApprovalQuery, PendingQuery, SqliteOptions, SqliteStore, StoreError, prelude::*,
};
use tollgate_runtime::{ApprovalStatus, RunStatus};

fn companion(db: &Path, suffix: &str) -> PathBuf {
    let mut name = db.as_os_str().to_owned();
    name.push(suffix);
    PathBuf::from(name)
}

fn set_mode(path: &Path, mode: u32) {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).expect("chmod");
}

fn sh(program: &str, args: &[&str]) {
    let status = Command::new(program)
        .args(args)
        .status()
        .unwrap_or_else(|e| panic!("{program}: {e}"));
    assert!(status.success(), "{program} {args:?} failed");
}

// ------------------------------------------------------- an unreadable row

#[tokio::test(flavor = "multi_thread")]
async fn an_unreadable_row_is_skipped_and_named_and_never_stops_the_others() {
    let ws = Workspace::new(GATED_SPEC);
    let keys: Vec<String> = (0..4)
        .map(|i| ws.pause_run(&format!(r#"{{"order_id": "o{i}"}}"#)))
        .collect();
    let (bad_time, bad_json, good, overdue) = (&keys[0], &keys[1], &keys[2], &keys[3]);
    {
        // Written behind the store's back, as a bug or another program
        // could: a timestamp no RFC 3339 parser reads (what a saturated
        // `now + ttl` used to write), JSON that does not parse, and one
        // ordinary overdue record for the sweep to do.
        let conn = Connection::open(ws.state_db()).expect("open");
        conn.execute(
            "UPDATE tollgate_approvals SET expires_at = '+262143-12-31T23:59:59.999999Z' \
             WHERE key = ?1",
            [bad_time],
        )
        .expect("poison expires_at");
        conn.execute(
            "UPDATE tollgate_approvals SET payload = '{not json' WHERE key = ?1",
            [bad_json],
        )
        .expect("poison payload");
        conn.execute(
            "UPDATE tollgate_approvals SET expires_at = '2001-01-01T00:00:00.000000Z' \
             WHERE key = ?1",
            [overdue],
        )
        .expect("make one overdue");
    }

    // The CLI sweeps (the overdue one), lists the good one and names the
    // two it could not read.
    let out = ws
        .tollgate()
        .args(["approvals", "list", "--spec", ws.spec_arg()])
        .output()
        .expect("run tollgate");
    assert_success(&out);
    assert!(stdout(&out).contains(good.as_str()), "{}", stdout(&out));
    assert!(!stdout(&out).contains(overdue.as_str()), "{}", stdout(&out));
    for bad in [bad_time, bad_json] {
        assert!(stderr(&out).contains(bad.as_str()), "{}", stderr(&out));
        assert!(!stdout(&out).contains(bad.as_str()), "{}", stdout(&out));
    }
    let listed = ws.list_json();
    assert_eq!(listed["approvals"].as_array().map(Vec::len), Some(1));
    let mut unreadable: Vec<&str> = listed["unreadable"]
        .as_array()
        .expect("unreadable rows in the JSON listing")
        .iter()
        .filter_map(|row| row["key"].as_str())
        .collect();
    unreadable.sort();
    let mut expected = vec![bad_time.as_str(), bad_json.as_str()];
    expected.sort();
    assert_eq!(unreadable, expected);

    // Deciding the others works; deciding a bad one is refused, naming it.
    let approve = ws
        .decide("approve", good)
        .args(["--by", "alice"])
        .output()
        .expect("run tollgate");
    assert_success(&approve);
    let refused = ws
        .decide("approve", bad_json)
        .output()
        .expect("run tollgate");
    assert!(!refused.status.success());
    assert_stderr_contains(&refused, bad_json.as_str());

    // The store API: a sweep, and a page walk one row at a time, go past
    // them (the cursor moves on) and name them.
    let store = open_store(&ws.state_db());
    store
        .expire_due(SystemTime::now().into())
        .await
        .expect("the sweep goes past unreadable rows");
    let mut seen = Vec::new();
    let mut cursor = None;
    for _ in 0..10 {
        let page = store
            .list_pending(&PendingQuery {
                agent_id: None,
                now: SystemTime::now().into(),
                limit: 1,
                cursor: cursor.take(),
            })
            .await
            .expect("list");
        assert!(page.approvals.is_empty(), "{:?}", page.approvals);
        seen.extend(page.unreadable.into_iter().map(|row| row.key));
        match page.next_cursor {
            Some(next) => cursor = Some(next),
            None => break,
        }
    }
    seen.sort();
    assert_eq!(seen, expected);

    let decided = store
        .get_approval(good)
        .await
        .expect("get")
        .expect("record");
    assert_eq!(decided.status, ApprovalStatus::Approved);
    let expired = store
        .get_approval(overdue)
        .await
        .expect("get")
        .expect("record");
    assert_eq!(expired.status, ApprovalStatus::Expired);
    let run = store
        .get_run(&expired.run_id)
        .await
        .expect("get")
        .expect("run");
    assert_eq!(run.status, RunStatus::Expired);

    // The listing of every status too: a walk one row at a time lists the
    // decided and the expired records and names the two unreadable ones.
    let (mut listed, mut named) = (Vec::new(), Vec::new());
    let mut cursor = None;
    for _ in 0..10 {
        let page = store
            .list_approvals(&ApprovalQuery {
                agent_id: None,
                statuses: Vec::new(),
                step_id: None,
                text: None,
                now: SystemTime::now().into(),
                limit: 1,
                cursor: cursor.take(),
                ..Default::default()
            })
            .await
            .expect("list approvals");
        listed.extend(
            page.approvals
                .into_iter()
                .map(|r| (r.key, r.status.as_str())),
        );
        named.extend(page.unreadable.into_iter().map(|row| row.key));
        match page.next_cursor {
            Some(next) => cursor = Some(next),
            None => break,
        }
    }
    listed.sort();
    let mut want = vec![(good.clone(), "APPROVED"), (overdue.clone(), "EXPIRED")];
    want.sort();
    assert_eq!(listed, want);
    named.sort();
    assert_eq!(named, expected);
}

// ------------------------------------------------------------ a damaged file

/// Three paused runs, then garbage over the root page of the events table
/// (with the WAL folded into the file first, so the page is where it lies).
fn damaged_workspace() -> (Workspace, String) {
    let ws = Workspace::new(GATED_SPEC);
    for i in 0..3 {
        ws.pause_run(&format!(r#"{{"order_id": "o{i}"}}"#));
    }
    let db = ws.state_db();
    let (page_size, root, run_id) = {
        let conn = Connection::open(&db).expect("open");
        conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))
            .expect("checkpoint");
        let page_size: i64 = conn
            .query_row("PRAGMA page_size", [], |r| r.get(0))
            .expect("page size");
        let root: i64 = conn
            .query_row(
                "SELECT rootpage FROM sqlite_master WHERE name = 'tollgate_run_events'",
                [],
                |r| r.get(0),
            )
            .expect("root page");
        let run_id: String = conn
            .query_row("SELECT id FROM tollgate_runs LIMIT 1", [], |r| r.get(0))
            .expect("a run");
        (page_size, root, run_id)
    };
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .open(&db)
        .expect("open the file");
    file.seek(SeekFrom::Start(((root - 1) * page_size) as u64))
        .expect("seek");
    file.write_all(&vec![0xA5; page_size as usize])
        .expect("garbage");
    file.sync_all().expect("sync");
    (ws, run_id)
}

#[tokio::test(flavor = "multi_thread")]
async fn a_damaged_file_is_refused_by_list_and_serve_with_how_to_restore() {
    let (ws, _) = damaged_workspace();
    let out = ws
        .tollgate()
        .args(["approvals", "list", "--spec", ws.spec_arg()])
        .output()
        .expect("run tollgate");
    assert!(!out.status.success(), "a damaged file listed as if fine");
    let said = stderr(&out);
    assert!(said.contains("damaged"), "{said}");
    assert!(said.contains(".recover"), "how to salvage it: {said}");
    assert!(said.contains("backup"), "how to restore it: {said}");

    let started = Served::try_start(&ws.spec, &ws.state_db(), &[], &[]);
    let failure = match started {
        Ok(_) => panic!("serve started on a damaged file"),
        Err(failure) => failure,
    };
    assert_ne!(failure.code, Some(0));
    assert!(failure.stderr.contains("damaged"), "{}", failure.stderr);
}

#[tokio::test(flavor = "multi_thread")]
async fn damage_found_at_run_time_stops_every_write() {
    // Opened without the check at open (as a file larger than the limit
    // is), the damage is met by the first read of the events table.
    let (ws, run_id) = damaged_workspace();
    let options = SqliteOptions {
        quick_check_up_to: None,
        ..SqliteOptions::default()
    };
    let store = SqliteStore::open(&ws.state_db(), options).expect("opens unchecked");
    let err = store
        .run_events(&run_id, 0)
        .await
        .expect_err("damaged page");
    assert!(matches!(err, StoreError::CorruptFile { .. }), "{err}");
    assert!(err.to_string().contains(".recover"), "{err}");
    // From now on no write goes in, not even to a healthy table.
    let refused = store.release_key("dedupe:x", "someone").await;
    assert!(
        matches!(refused, Err(StoreError::CorruptFile { .. })),
        "{refused:?}"
    );
    assert!(store.check_writable().await.is_err());
}

// ----------------------------------------------------------- a read-only file

/// `tollgate ARGS` as the `postgres` user. Root ignores permission bits, so
/// a read-only file is only read-only to another user: the tests run as
/// root, and `postgres` exists wherever the PostgreSQL tests run.
fn as_postgres(ws: &Workspace, args: &[&str]) -> Output {
    Command::new("runuser")
        .args(["-u", "postgres", "--", tollgate_bin()])
        .args(args)
        .current_dir(ws.path())
        .env_remove("TOLLGATE_DATABASE_URL")
        .stdin(Stdio::null())
        .output()
        .expect("runuser")
}

#[test]
fn a_read_only_file_is_refused_and_a_read_only_shm_left_behind_is_repaired() {
    let ws = Workspace::new(GATED_SPEC);
    let key = ws.pause_run(r#"{"order_id": "before"}"#);
    let db = ws.state_db();
    let dir = ws.path().display().to_string();
    sh("chown", &["-R", "postgres:postgres", &dir]);
    set_mode(ws.path(), 0o755);
    set_mode(&db, 0o444);
    let (wal, shm) = (companion(&db, "-wal"), companion(&db, "-shm"));
    assert!(!wal.exists() && !shm.exists(), "closed cleanly");

    let out = as_postgres(&ws, &["serve", ws.spec_arg(), "--listen", "127.0.0.1:0"]);
    assert!(!out.status.success(), "serve started on a read-only file");
    let said = stderr(&out);
    assert!(said.contains("not writable"), "{said}");
    assert!(
        said.contains(&db.display().to_string()),
        "names the file: {said}"
    );
    let out = as_postgres(&ws, &["approvals", "list", "--spec", ws.spec_arg()]);
    assert!(!out.status.success(), "{}", stdout(&out));
    assert!(stderr(&out).contains("not writable"), "{}", stderr(&out));
    assert!(
        !wal.exists() && !shm.exists(),
        "nothing was created read-only beside it"
    );

    // What an earlier open of the read-only file left behind: -wal and
    // -shm with its read-only permissions. Once the file is writable again,
    // everything works with no further step.
    set_mode(&db, 0o644);
    for file in [&wal, &shm] {
        std::fs::write(file, b"").expect("companion");
        sh("chown", &["postgres:postgres", &file.display().to_string()]);
        set_mode(file, 0o444);
    }
    let out = as_postgres(
        &ws,
        &[
            "run",
            ws.spec_arg(),
            "--persist",
            "--json",
            "--input",
            r#"{"order_id": "after"}"#,
        ],
    );
    assert_success(&out);
    let out = as_postgres(
        &ws,
        &[
            "approvals",
            "approve",
            &key,
            "--spec",
            ws.spec_arg(),
            "--by",
            "alice",
        ],
    );
    assert_success(&out);
}

// -------------------------------------------------------------- a full disk

/// A tmpfs of its own (root may mount one), unmounted on drop.
struct SmallDisk {
    path: PathBuf,
}

impl SmallDisk {
    fn mount(path: PathBuf, size: &str) -> SmallDisk {
        std::fs::create_dir_all(&path).expect("mount point");
        let target = path.display().to_string();
        sh(
            "mount",
            &[
                "-t",
                "tmpfs",
                "-o",
                &format!("size={size}"),
                "tmpfs",
                &target,
            ],
        );
        SmallDisk { path }
    }

    /// Take every free byte: write until the disk says no.
    fn fill(&self) -> PathBuf {
        let filler = self.path.join("filler");
        let mut file = std::fs::File::create(&filler).expect("filler");
        let chunk = vec![0u8; 4096];
        while file.write_all(&chunk).is_ok() {}
        let _ = file.sync_all();
        filler
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.path).status();
    }
}

async fn status_of(api: &Api, url: &str) -> (u16, Value) {
    api.get(url).await
}

#[tokio::test(flavor = "multi_thread")]
async fn a_full_disk_fails_writes_clearly_and_recovers_once_space_is_back() {
    let ws = Workspace::new(GATED_SPEC);
    let disk = SmallDisk::mount(ws.path().join("small"), "3m");
    let state = disk.path.join("state.db");
    let served = Served::start(&ws.spec, &state, &[], &[]);
    let api = Api::new();
    let (code, run) = api
        .post(
            &served.url("/runs?wait=true"),
            json!({"input": {"order_id": "A"}}),
        )
        .await;
    assert_eq!(code, 200, "{run}");
    let run_id = run["id"].as_str().expect("run id").to_string();
    let key = run["pending_approval"]["key"]
        .as_str()
        .expect("paused")
        .to_string();
    assert_eq!(status_of(&api, &served.url("/healthz")).await.0, 200);

    let filler = disk.fill();
    let (code, body) = api
        .post(
            &served.url(&format!("/approvals/{key}/approve?wait=true")),
            json!({}),
        )
        .await;
    assert_eq!(code, 500, "{body}");
    // The log says which operation, which store, and why.
    let line = served
        .log_line(&format!("deciding approval {key}"), Duration::from_secs(30))
        .await;
    assert!(line.contains(&state.display().to_string()), "{line}");
    assert!(line.contains("SQLITE_FULL"), "{line}");
    let (code, health) = status_of(&api, &served.url("/healthz")).await;
    assert_eq!(code, 503, "{health}");
    assert_eq!(health["error"]["code"], "store_unavailable");
    let (_, record) = api.get(&served.url(&format!("/approvals/{key}"))).await;
    assert_eq!(
        record["status"], "PENDING",
        "the failed decision changed nothing"
    );

    std::fs::remove_file(filler).expect("free the space");
    let (code, health) = status_of(&api, &served.url("/healthz")).await;
    assert_eq!(code, 200, "healthy again with no manual step: {health}");
    let (code, done) = api
        .post(
            &served.url(&format!("/approvals/{key}/approve?wait=true")),
            json!({}),
        )
        .await;
    assert_eq!(code, 200, "{done}");
    let (_, run) = api.get(&served.url(&format!("/runs/{run_id}"))).await;
    assert_eq!(run["status"], "completed", "{run}");
    drop(served);

    let conn = Connection::open(&state).expect("open");
    let check: String = conn
        .query_row("PRAGMA integrity_check", [], |r| r.get(0))
        .expect("integrity check");
    assert_eq!(check, "ok", "nothing was corrupted");
}

/// Six approved POSTs at the downstream when the disk fills up: each call
/// was made, and its result cannot be journaled. The drivers keep their
/// runs and write again until the space is back; then every run
/// completes, none `stuck` or `failed`, and the downstream saw each call
/// once.
#[tokio::test(flavor = "multi_thread")]
async fn runs_deciding_while_the_disk_is_full_complete_once_space_is_back() {
    const RUNS: usize = 6;
    let full = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let answer = full.clone();
    // The downstream answers only once the disk is full: every result then
    // has to be journaled on a full disk.
    let stub = stub_server::StubServer::start(move |_| {
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        while !answer.load(std::sync::atomic::Ordering::SeqCst)
            && std::time::Instant::now() < deadline
        {
            std::thread::sleep(Duration::from_millis(20));
        }
        stub_server::Response::json(200, json!({"shipped": true}))
    });
    let spec = format!(
        r#"version: 1
agent: full-desk
tools:
  ship:
    http:
      method: POST
      url: "{}"
      json: {{ n: "{{{{ input.n }}}}" }}
steps:
  - id: gate
    approval:
      message: "Ship {{{{ input.n }}}}?"
  - id: ship
    tool: ship
    with: {{}}
"#,
        stub.url("/ship")
    );
    let ws = Workspace::new(&spec);
    let disk = SmallDisk::mount(ws.path().join("small"), "3m");
    let state = disk.path.join("state.db");
    let served = Served::start(&ws.spec, &state, &[], &[]);
    let api = Api::new();
    let mut runs = Vec::new();
    for n in 0..RUNS {
        let (code, run) = api
            .post(&served.url("/runs?wait=true"), json!({"input": {"n": n}}))
            .await;
        assert_eq!(code, 200, "{run}");
        let key = run["pending_approval"]["key"].as_str().unwrap().to_string();
        let (code, body) = api
            .post(&served.url(&format!("/approvals/{key}/approve")), json!({}))
            .await;
        assert_eq!(code, 200, "{body}");
        runs.push(run["id"].as_str().unwrap().to_string());
    }
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while stub.count() < RUNS {
        assert!(std::time::Instant::now() < deadline, "calls never arrived");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let filler = disk.fill();
    full.store(true, std::sync::atomic::Ordering::SeqCst);
    // The full disk refused a result, and the driver holds on.
    let line = served
        .log_line("the store did not take the run's", Duration::from_secs(30))
        .await;
    assert!(line.contains("SQLITE_FULL"), "{line}");
    std::fs::remove_file(filler).expect("free the space");
    for run_id in &runs {
        let run = api.wait_for_status(&served, run_id, "completed").await;
        assert_eq!(run["error"], Value::Null, "{run}");
    }
    served
        .log_line("the store answers again", Duration::from_secs(30))
        .await;
    assert_eq!(stub.count(), RUNS, "each call made once");
    let mut seen: Vec<String> = stub
        .requests_to("/ship")
        .iter()
        .map(|r| r.json()["n"].to_string())
        .collect();
    seen.sort();
    seen.dedup();
    assert_eq!(seen.len(), RUNS, "one call per run: {seen:?}");
    let (_, stuck) = api.get(&served.url("/runs?status=stuck")).await;
    assert_eq!(stuck["runs"], json!([]), "{stuck}");
    let (_, failed) = api.get(&served.url("/runs?status=failed")).await;
    assert_eq!(failed["runs"], json!([]), "{failed}");
    drop(served);
    let conn = Connection::open(&state).expect("open");
    let check: String = conn
        .query_row("PRAGMA integrity_check", [], |r| r.get(0))
        .expect("integrity check");
    assert_eq!(check, "ok");
}
