//! What only the SQLite store can get wrong, checked with raw SQL beside the
//! store: bad data in the file, foreign tables, schema versions, query plans.
//! The behaviour shared by every store is in `tests/it/store/conformance.rs`.

use std::path::{Path, PathBuf};

use rusqlite::Connection;
use serde_json::{Map, json};

use super::{SqliteOptions, SqliteStore, ops, schema};
use crate::domain::events::{Event, EventKind};
use crate::domain::pending_approval::{ApprovalRecord, sample_record};
use crate::domain::run_state::{RunRecord, RunStatus};
use crate::store::{Pause, StoreError, StoreErrorKind, prelude::*};
use crate::support::time::now;

/// A fresh directory under the system temp dir, removed on drop (the
/// runtime crate has no dev-dependencies: it is copied into every export).
struct TempDir(PathBuf);

impl TempDir {
    fn new() -> TempDir {
        let dir = std::env::temp_dir().join(format!("tollgate-sqlite-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(&dir).expect("create temp dir");
        TempDir(dir)
    }

    fn db(&self) -> PathBuf {
        self.0.join("state.db")
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn open(path: &Path) -> SqliteStore {
    SqliteStore::open(path, SqliteOptions::default()).expect("open store")
}

fn run_record(id: &str) -> RunRecord {
    let t = now();
    RunRecord {
        id: id.into(),
        agent_id: "agent".into(),
        spec_hash: "a".repeat(64),
        status: RunStatus::Running,
        input: json!({}).into(),
        trigger: json!({}),
        outputs: Map::new(),
        error: None,
        created_at: t,
        updated_at: t,
        owner: None,
        lease_until: None,
    }
}

fn pending(key: &str, run_id: &str) -> ApprovalRecord {
    let mut record = sample_record(key, run_id);
    record.payload = json!({"amount": 1});
    record
}

async fn paused(store: &SqliteStore, key: &str) {
    let run_id = format!("run-{key}");
    store
        .create_run(&run_record(&run_id), &[])
        .await
        .expect("create run");
    let pause = Pause {
        record: pending(key, &run_id),
        at: now(),
        owner: None,
        routes: Default::default(),
    };
    store.pause_run(&pause, &[]).await.expect("pause run");
}

/// A file as a build that knew migrations 1 to `version` only left it.
fn file_of_schema(path: &Path, version: i64) -> Connection {
    let conn = raw(path);
    conn.execute_batch(
        "CREATE TABLE tollgate_schema_history (version INTEGER PRIMARY KEY NOT NULL, \
         name TEXT NOT NULL, applied_at TEXT NOT NULL)",
    )
    .expect("history");
    for m in schema::MIGRATIONS.iter().filter(|m| m.version <= version) {
        conn.execute_batch(m.sql).expect("old migration");
        conn.execute(
            "INSERT INTO tollgate_schema_history VALUES (?1, ?2, 'then')",
            (m.version, m.name),
        )
        .expect("record it");
    }
    conn
}

fn raw(path: &Path) -> Connection {
    let conn = Connection::open(path).expect("raw connection");
    conn.busy_timeout(std::time::Duration::from_secs(5))
        .expect("busy timeout");
    conn
}

#[tokio::test]
async fn a_file_counts_its_writers_work_and_memory_reports_none() {
    let dir = TempDir::new();
    let store = open(&dir.db());
    let before = store.writer_stats().expect("a file has one writer");
    paused(&store, "k1").await;
    store.get_approval("k1").await.expect("read");
    let after = store.writer_stats().expect("a file has one writer");
    // The run's and the pause's writes, one after the other; not the read
    // (reads have a connection of their own).
    assert_eq!(after.writes - before.writes, 2, "{before:?} -> {after:?}");
    assert_eq!(after.commits - before.commits, 2, "{before:?} -> {after:?}");
    assert!(after.busy > before.busy && after.committing > before.committing);

    // In memory, reads go through the writer: its counts would not be writes.
    let memory = SqliteStore::in_memory().expect("in memory");
    assert_eq!(memory.writer_stats(), None);
}

#[tokio::test]
async fn unparseable_json_is_reported_as_corrupt_naming_the_row() {
    let dir = TempDir::new();
    let store = open(&dir.db());
    paused(&store, "k1").await;
    raw(&dir.db())
        .execute(
            "UPDATE tollgate_approvals SET payload = '{not json' WHERE key = 'k1'",
            [],
        )
        .expect("corrupt the row");

    let err = store
        .get_approval("k1")
        .await
        .expect_err("corrupt row must not decode");
    let StoreError::Corrupt(msg) = err else {
        panic!("expected Corrupt, got {err:?}");
    };
    assert!(msg.contains("tollgate_approvals.payload"), "{msg}");
    assert!(msg.contains("k1"), "{msg}");
}

#[tokio::test]
async fn unknown_status_is_reported_as_corrupt() {
    let dir = TempDir::new();
    let store = open(&dir.db());
    paused(&store, "k1").await;
    raw(&dir.db())
        .execute(
            "UPDATE tollgate_runs SET status = 'paused?' WHERE id = 'run-k1'",
            [],
        )
        .expect("corrupt the run");

    let err = store.get_run("run-k1").await.expect_err("unknown status");
    assert!(
        matches!(&err, StoreError::Corrupt(m) if m.contains("tollgate_runs.status") && m.contains("paused?")),
        "{err:?}"
    );
}

#[tokio::test]
async fn corrupt_event_json_is_reported_not_panicked_on() {
    let dir = TempDir::new();
    let store = open(&dir.db());
    paused(&store, "k1").await;
    raw(&dir.db())
        .execute(
            "INSERT INTO tollgate_run_events (run_id, seq, event) VALUES ('run-k1', 1, '[]')",
            [],
        )
        .expect("insert a bad event");

    let err = store.run_events("run-k1", 0).await.expect_err("bad event");
    assert!(
        matches!(&err, StoreError::Corrupt(m) if m.contains("tollgate_run_events.event")),
        "{err:?}"
    );
}

/// The bytes of `column` in every row of `table`.
fn stored_bytes(path: &Path, table: &str, column: &str) -> i64 {
    raw(path)
        .query_row(
            &format!("SELECT COALESCE(SUM(length(CAST({column} AS BLOB))), 0) FROM {table}"),
            [],
            |row| row.get(0),
        )
        .expect("sum of lengths")
}

#[tokio::test]
async fn a_run_started_event_is_stored_without_the_input_its_run_holds() {
    let dir = TempDir::new();
    let store = open(&dir.db());
    let mut run = run_record("run-w");
    run.input = json!({"note": "w".repeat(100_000)}).into();
    let started = Event {
        run_id: "run-w".into(),
        seq: 1,
        at: now(),
        kind: EventKind::RunStarted {
            agent: "agent".into(),
            spec_hash: run.spec_hash.clone(),
            input: run.input.clone(),
        },
    };
    store
        .create_run(&run, std::slice::from_ref(&started))
        .await
        .expect("create run");
    assert!(stored_bytes(&dir.db(), "tollgate_runs", "input") > 100_000);
    assert!(stored_bytes(&dir.db(), "tollgate_run_events", "event") < 1_000);
    assert_eq!(
        store.run_events("run-w", 0).await.expect("events"),
        vec![started.clone()]
    );

    // Written later, or with another input, it would read back otherwise:
    // refused before any write.
    let again = store
        .append_events("run-w", std::slice::from_ref(&started))
        .await;
    assert!(matches!(&again, Err(StoreError::Conflict(_))), "{again:?}");
    let mut other = run_record("run-o");
    other.input = json!({"note": "other"}).into();
    let foreign = Event {
        run_id: "run-o".into(),
        ..started.clone()
    };
    let refused = store.create_run(&other, &[foreign]).await;
    assert!(
        matches!(&refused, Err(StoreError::Conflict(_))),
        "{refused:?}"
    );
    assert_eq!(store.get_run("run-o").await.expect("get"), None);

    // An earlier build's event holds a copy, equal to the run's: it reads
    // the same.
    let mut older = serde_json::to_value(&started).expect("event JSON");
    older["seq"] = json!(2);
    raw(&dir.db())
        .execute(
            "INSERT INTO tollgate_run_events (run_id, seq, event) VALUES ('run-w', 2, ?1)",
            [older.to_string()],
        )
        .expect("an event as an earlier build stored it");
    let second = Event {
        seq: 2,
        ..started.clone()
    };
    assert_eq!(
        store.run_events("run-w", 0).await.expect("events"),
        vec![started, second]
    );

    // Without its run's row (a damaged file), the event is named, not
    // given an empty input.
    raw(&dir.db())
        .execute_batch("PRAGMA foreign_keys = OFF; DELETE FROM tollgate_runs WHERE id = 'run-w'")
        .expect("remove the run's row");
    let err = store.run_events("run-w", 0).await.expect_err("no run row");
    assert!(
        matches!(&err, StoreError::Corrupt(m) if m.contains("tollgate_run_events") && m.contains("run-w")),
        "{err:?}"
    );
}

#[tokio::test]
async fn events_are_stored_without_the_run_id_and_seq_their_row_holds() {
    let dir = TempDir::new();
    let store = open(&dir.db());
    let started = Event {
        run_id: "run-e".into(),
        seq: 1,
        at: now(),
        kind: EventKind::StepStarted {
            step: "prepare".into(),
            index: 0,
        },
    };
    store
        .create_run(&run_record("run-e"), std::slice::from_ref(&started))
        .await
        .expect("create run");
    let stored: String = raw(&dir.db())
        .query_row(
            "SELECT event FROM tollgate_run_events WHERE run_id = 'run-e' AND seq = 1",
            [],
            |row| row.get(0),
        )
        .expect("the stored event");
    let stored: serde_json::Value = serde_json::from_str(&stored).expect("JSON");
    assert_eq!(stored.get("run_id"), None, "{stored}");
    assert_eq!(stored.get("seq"), None, "{stored}");
    assert_eq!(stored["type"], "step_started", "{stored}");

    // A row written by an earlier build repeats run_id and seq in its JSON;
    // it reads the same, and the row's columns say where it sits.
    let mut older = serde_json::to_value(&started).expect("event JSON");
    older["seq"] = json!(7);
    older["run_id"] = json!("somewhere-else");
    raw(&dir.db())
        .execute(
            "INSERT INTO tollgate_run_events (run_id, seq, event) VALUES ('run-e', 2, ?1)",
            [older.to_string()],
        )
        .expect("insert an event as an earlier build stored it");

    let events = store.run_events("run-e", 0).await.expect("events");
    let second = Event {
        seq: 2,
        ..started.clone()
    };
    assert_eq!(events, vec![started, second]);
}

#[tokio::test]
async fn tables_of_other_software_in_the_same_file_are_left_alone() {
    let dir = TempDir::new();
    {
        let conn = raw(&dir.db());
        conn.execute_batch(
            "CREATE TABLE app_users (id INTEGER PRIMARY KEY, name TEXT);
             INSERT INTO app_users (name) VALUES ('ada'), ('grace');",
        )
        .expect("foreign table");
    }
    let store = open(&dir.db());
    paused(&store, "k1").await;
    drop(store);
    let _reopened = open(&dir.db());

    let conn = raw(&dir.db());
    let names: Vec<String> = conn
        .prepare("SELECT name FROM app_users ORDER BY id")
        .and_then(|mut s| s.query_map([], |r| r.get(0))?.collect())
        .expect("read foreign table");
    assert_eq!(names, ["ada", "grace"]);
    let ours: i64 = conn
        .query_row("SELECT COUNT(*) FROM tollgate_approvals", [], |r| r.get(0))
        .expect("count");
    assert_eq!(ours, 1);
}

#[test]
fn a_schema_newer_than_this_build_is_refused() {
    let dir = TempDir::new();
    drop(open(&dir.db()));
    let newer = schema::latest_version() + 1;
    raw(&dir.db())
        .execute(
            "INSERT INTO tollgate_schema_history (version, name, applied_at) VALUES (?1, 'future', 'x')",
            [newer],
        )
        .expect("record a future migration");

    match SqliteStore::open(&dir.db(), SqliteOptions::default()) {
        Err(StoreError::SchemaTooNew { found, supported }) => {
            assert_eq!((found, supported), (newer, schema::latest_version()));
        }
        Err(other) => panic!("expected SchemaTooNew, got {other:?}"),
        Ok(_) => panic!("expected SchemaTooNew, the store opened"),
    }
}

#[tokio::test]
async fn a_file_of_the_previous_schema_gains_the_spec_versions_keeping_its_runs() {
    // A file written by a build that knew migrations 1-5 only.
    let dir = TempDir::new();
    {
        let conn = file_of_schema(&dir.db(), 5);
        conn.execute_batch(
            "INSERT INTO tollgate_runs (id, agent_id, spec_hash, status, input, \"trigger\", \
             outputs, created_at, updated_at) VALUES ('run-old', 'agent', 'h', 'completed', \
             '{}', '{}', '{}', '2026-01-01T00:00:00.000000Z', '2026-01-01T00:00:00.000000Z')",
        )
        .expect("an old run");
    }
    drop(open(&dir.db()));
    let conn = raw(&dir.db());
    let names: Vec<String> = conn
        .prepare("SELECT name FROM tollgate_schema_history ORDER BY version")
        .and_then(|mut s| s.query_map([], |r| r.get(0))?.collect())
        .expect("history");
    assert_eq!(
        names[5..],
        [
            "spec_versions",
            "votes",
            "gate_timers",
            "vote_input",
            "outbox",
            "pending_by_step",
            "outbox_lanes",
            "started_without_input",
            "approval_origin",
            "slack_through_outbox",
            "slack_message_only"
        ],
        "every later migration applied"
    );
    drop(conn);

    let store = open(&dir.db());
    paused(&store, "k-old").await;
    let spec = crate::domain::spec::Spec::parse(
        "version: 1\nagent: agent\nsteps:\n  - id: s\n    set: {x: 1}\n",
        "a.yaml",
    )
    .expect("spec");
    let version = crate::domain::spec_version::SpecVersion::of(&spec, now());
    store.record_spec_version(&version).await.expect("record");
    assert_eq!(
        store.get_spec_version(&version.hash).await.expect("get"),
        Some(version)
    );
    assert!(store.get_approval("k-old").await.expect("get").is_some());
    let old_run = store.get_run("run-old").await.expect("get").expect("kept");
    assert_eq!(old_run.status, RunStatus::Completed);
}

#[tokio::test]
async fn a_file_of_schema_13_gains_origins_from_the_old_gate_marker() {
    use crate::domain::pending_approval::ApprovalOrigin;
    // Rows as version 13 wrote them: a gate request made through a server
    // (its spec hash, and its run's, 64 zeros), a program's own request,
    // and a workflow run's pause.
    let dir = TempDir::new();
    {
        let conn = file_of_schema(&dir.db(), 13);
        let zeros = "0".repeat(64);
        for (id, agent, hash) in [
            ("k-req", "gate:agent", zeros.as_str()),
            ("k-prog", "gate:payouts", zeros.as_str()),
            ("run-p", "agent", "h"),
        ] {
            conn.execute(
                "INSERT INTO tollgate_runs (id, agent_id, spec_hash, status, input, \"trigger\", \
                 outputs, created_at, updated_at) VALUES (?1, ?2, ?3, 'running', '{}', '{}', \
                 '{}', '2026-01-01T00:00:00.000000Z', '2026-01-01T00:00:00.000000Z')",
                (id, agent, hash),
            )
            .expect("an old run");
        }
        for (key, run, agent, hash, trigger) in [
            (
                "k-req",
                "k-req",
                "agent",
                zeros.as_str(),
                r#"{"kind":"gate","requested_by":"bot","requester":null,"idempotency_key":"i-1","fingerprint":"f-1"}"#,
            ),
            (
                "k-prog",
                "k-prog",
                "gate:payouts",
                zeros.as_str(),
                r#"{"kind":"gate"}"#,
            ),
            ("k-pause", "run-p", "agent", "h", r#"{"kind":"cli"}"#),
        ] {
            conn.execute(
                "INSERT INTO tollgate_approvals (key, run_id, agent_id, spec_hash, step_index, \
                 step_id, phase, payload, outputs, input, \"trigger\", status, created_at, \
                 expires_at) VALUES (?1, ?2, ?3, ?4, 0, 'ship', 'before', '{}', '{}', '{}', ?5, \
                 'PENDING', '2026-01-01T00:00:00.000000Z', '2099-01-01T00:00:00.000000Z')",
                (key, run, agent, hash, trigger),
            )
            .expect("an old approval");
        }
    }
    let store = open(&dir.db());
    let get = |key: &'static str| {
        let store = &store;
        async move { store.get_approval(key).await.expect("get").expect("kept") }
    };
    let request = get("k-req").await;
    assert_eq!(
        request.origin,
        ApprovalOrigin::Request {
            requested_by: Some("bot".into()),
            fingerprint: Some("f-1".into())
        }
    );
    assert_eq!(request.paused_under(), None);
    assert_eq!(
        get("k-prog").await.origin,
        ApprovalOrigin::Request {
            requested_by: None,
            fingerprint: None
        }
    );
    let pause = get("k-pause").await;
    assert_eq!(pause.origin, ApprovalOrigin::Pause);
    assert_eq!(pause.paused_under(), Some("h"));

    // The old marker is gone from both tables; a pause keeps its hash.
    let conn = raw(&dir.db());
    let rows = |sql: &str| -> Vec<(String, String)> {
        conn.prepare(sql)
            .and_then(|mut s| s.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?.collect())
            .expect("rows")
    };
    let pair = |a: &str, b: &str| (a.to_string(), b.to_string());
    assert_eq!(
        rows("SELECT key, origin || ':' || spec_hash FROM tollgate_approvals ORDER BY key"),
        [
            pair("k-pause", "pause:h"),
            pair("k-prog", "request:"),
            pair("k-req", "request:")
        ]
    );
    assert_eq!(
        rows("SELECT id, spec_hash FROM tollgate_runs ORDER BY id"),
        [pair("k-prog", ""), pair("k-req", ""), pair("run-p", "h")]
    );
    // A request is on no version: the pending-by-spec count skips it.
    let by_spec = store
        .count_pending_by_spec("agent", now())
        .await
        .expect("count");
    assert_eq!(
        by_spec.into_iter().collect::<Vec<_>>(),
        [("h".to_string(), 1)]
    );
    // An origin this build does not know is corrupt, named, never a panic.
    conn.execute_batch("PRAGMA ignore_check_constraints = ON; UPDATE tollgate_approvals SET origin = 'other' WHERE key = 'k-pause'")
        .expect("write an unknown origin");
    let error = store
        .get_approval("k-pause")
        .await
        .expect_err("unknown origin");
    assert!(error.to_string().contains("origin"), "{error}");
}

#[test]
fn migrations_are_recorded_once_however_often_the_file_is_opened() {
    let dir = TempDir::new();
    for _ in 0..3 {
        drop(open(&dir.db()));
    }
    let conn = raw(&dir.db());
    let rows: Vec<(i64, String)> = conn
        .prepare("SELECT version, name FROM tollgate_schema_history ORDER BY version")
        .and_then(|mut s| s.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?.collect())
        .expect("history");
    let expected: Vec<(i64, String)> = schema::MIGRATIONS
        .iter()
        .map(|m| (m.version, m.name.to_string()))
        .collect();
    assert_eq!(rows, expected);
    let mode: String = conn
        .query_row("PRAGMA journal_mode", [], |r| r.get(0))
        .expect("journal mode");
    assert_eq!(mode, "wal");
}

/// The plan SQLite picks for the page query: with 100,000 pending rows it
/// must walk the partial index, never sort or scan the table.
fn page_plan(conn: &Connection, by_agent: bool) -> String {
    let sql = format!(
        "EXPLAIN QUERY PLAN {}",
        ops::list_pending_sql(by_agent, true)
    );
    let params: &[&str] = if by_agent {
        &["2026", "agent", "2027", "k", "11"]
    } else {
        &["2026", "2027", "k", "11"]
    };
    conn.prepare(&sql)
        .and_then(|mut s| {
            s.query_map(rusqlite::params_from_iter(params), |r| {
                r.get::<_, String>(3)
            })?
            .collect::<Result<Vec<_>, _>>()
        })
        .expect("query plan")
        .join("; ")
}

#[test]
fn listing_pending_walks_the_partial_index() {
    let dir = TempDir::new();
    drop(open(&dir.db()));
    let conn = raw(&dir.db());

    let plan = page_plan(&conn, false);
    assert!(plan.contains("tollgate_approvals_pending_idx"), "{plan}");
    assert!(!plan.contains("TEMP B-TREE"), "{plan}");

    let plan = page_plan(&conn, true);
    assert!(
        plan.contains("tollgate_approvals_pending_agent_idx"),
        "{plan}"
    );
    assert!(!plan.contains("TEMP B-TREE"), "{plan}");
}

/// A run's pending approval is found by its key: only keys are sorted,
/// never whole (possibly wide) rows.
#[test]
fn a_runs_pending_approval_is_read_by_key_after_sorting_keys_alone() {
    let dir = TempDir::new();
    drop(open(&dir.db()));
    let conn = raw(&dir.db());
    let sql = format!("EXPLAIN QUERY PLAN {}", ops::pending_for_run_sql());
    let plan = conn
        .prepare(&sql)
        .and_then(|mut s| {
            s.query_map(["run", "2026"], |r| r.get::<_, String>(3))?
                .collect::<Result<Vec<_>, _>>()
        })
        .expect("query plan");
    // The outer read is one row by its primary key; the sort, if any, is
    // in the subquery that selects the key.
    assert!(plan[0].contains("(key=?)"), "{plan:?}");
    assert!(
        plan.iter().any(|step| step.contains("SUBQUERY")),
        "{plan:?}"
    );
}

// ------------------------------------------------- what kind of error it is

#[tokio::test]
async fn a_constraint_violation_is_a_conflict() {
    let dir = TempDir::new();
    let store = open(&dir.db());
    store
        .create_run(&run_record("run-c"), &[])
        .await
        .expect("create");
    // Through the store: a second run with the same id.
    let again = store
        .create_run(&run_record("run-c"), &[])
        .await
        .expect_err("the id is taken");
    assert_eq!(again.kind(), StoreErrorKind::Conflict, "{again}");
    assert!(!again.is_retryable());
    // Straight from SQLite: any constraint (here NOT NULL) classifies so.
    let raw_error = raw(&dir.db())
        .execute("INSERT INTO tollgate_claims (key) VALUES ('k')", [])
        .expect_err("owner and expires_at are NOT NULL");
    let e = StoreError::from(raw_error);
    assert_eq!(e.kind(), StoreErrorKind::Conflict, "{e}");
}

#[tokio::test]
async fn a_lock_held_past_the_busy_timeout_is_unavailable() {
    let dir = TempDir::new();
    let store = SqliteStore::open(
        &dir.db(),
        SqliteOptions {
            busy_timeout: std::time::Duration::from_millis(50),
            ..SqliteOptions::default()
        },
    )
    .expect("open");
    let holder = raw(&dir.db());
    holder
        .execute_batch("BEGIN IMMEDIATE")
        .expect("take the lock");
    let busy = store
        .release_key("dedupe:x", "me")
        .await
        .expect_err("the write lock is held");
    assert!(busy.is_busy(), "{busy}");
    assert_eq!(busy.kind(), StoreErrorKind::Unavailable, "{busy}");
    assert!(busy.is_retryable());
    holder.execute_batch("ROLLBACK").expect("release the lock");
    store
        .release_key("dedupe:x", "me")
        .await
        .expect("the retry succeeds once the lock is free");
}

#[test]
#[expect(
    clippy::disallowed_methods,
    reason = "writes the junk file before any connection to it exists"
)]
fn a_damaged_file_is_corrupt() {
    let dir = TempDir::new();
    std::fs::write(dir.db(), vec![0x5a; 8192]).expect("write junk");
    let err = SqliteStore::open(&dir.db(), SqliteOptions::default())
        .err()
        .expect("not a database");
    assert_eq!(err.kind(), StoreErrorKind::Corrupt, "{err}");
    assert!(!err.is_retryable());
}

#[tokio::test]
async fn a_waiter_returns_an_error_retrying_cannot_fix() {
    // Before errors had kinds, a waiter retried every database error
    // forever. A missing table (someone dropped it) is no passing outage:
    // the waiter must say so instead of spinning. The bound is generous; a
    // waiter that loops never returns at all.
    let dir = TempDir::new();
    let store = open(&dir.db());
    paused(&store, "k-wait").await;
    raw(&dir.db())
        .execute_batch("DROP TABLE tollgate_notifications; DROP TABLE tollgate_approvals")
        .expect("drop the table");
    let shared: crate::store::SharedStore = std::sync::Arc::new(store);
    let watcher = crate::store::watch::ApprovalWatcher::start(shared, Default::default());
    let waited = tokio::time::timeout(
        std::time::Duration::from_secs(120),
        watcher.wait_for_decision("k-wait"),
    )
    .await
    .expect("the waiter gave up instead of retrying forever");
    let err = waited.expect_err("the table is gone");
    assert_eq!(err.kind(), StoreErrorKind::Other, "{err}");
    assert!(err.to_string().contains("tollgate_approvals"), "{err}");
}

/// The plan SQLite picks for an approvals page of `shape`, every named
/// parameter bound to a placeholder value.
fn approvals_plan(conn: &Connection, shape: &ops::ApprovalsShape) -> String {
    let sql = format!("EXPLAIN QUERY PLAN {}", ops::list_approvals_sql(shape));
    let mut stmt = conn.prepare(&sql).expect("prepare the plan");
    for i in 1..=stmt.parameter_count() {
        let name = stmt.parameter_name(i).unwrap_or_default().to_string();
        match name.as_str() {
            ":limit" => stmt.raw_bind_parameter(i, 51),
            ":agent" => stmt.raw_bind_parameter(i, "agent"),
            _ => stmt.raw_bind_parameter(i, "2026"),
        }
        .expect("bind");
    }
    let mut rows = stmt.raw_query();
    let mut plan = Vec::new();
    while let Some(row) = rows.next().expect("plan row") {
        plan.push(row.get::<_, String>(3).expect("detail"));
    }
    plan.join("; ")
}

/// 10,000 PENDING records of one agent and 2,000 settled ones, written
/// with raw SQL in one transaction.
fn fill(conn: &mut Connection) {
    let tx = conn.transaction().expect("begin");
    for i in 0..12_000 {
        let (run, key) = (format!("run-{i:05}"), format!("key-{i:05}"));
        let created = format!(
            "2026-01-01T{:02}:{:02}:{:02}.000000Z",
            i / 3600,
            i / 60 % 60,
            i % 60
        );
        tx.execute(
            "INSERT INTO tollgate_runs (id, agent_id, spec_hash, status, input, \"trigger\", \
             outputs, created_at, updated_at) \
             VALUES (?1, 'agent', 'h', 'awaiting_approval', '{}', '{}', '{}', ?2, ?2)",
            (&run, &created),
        )
        .expect("insert run");
        let (status, decided_at) = if i % 6 == 0 {
            (
                "APPROVED",
                Some(created.replace("2026-01-01", "2026-01-02")),
            )
        } else {
            ("PENDING", None)
        };
        tx.execute(
            "INSERT INTO tollgate_approvals (key, run_id, agent_id, spec_hash, step_index, \
             step_id, phase, message, payload, outputs, input, \"trigger\", status, \
             decided_by, decided_at, created_at, expires_at) \
             VALUES (?1, ?2, 'agent', 'h', 0, 'refund', 'before', 'Refund?', '{}', '{}', \
             '{}', '{}', ?3, ?4, ?4, ?5, '2027-01-01T00:00:00.000000Z')",
            (
                &key,
                &run,
                status,
                decided_at.as_ref().map(|_| "alice"),
                &created,
            ),
        )
        .expect("insert approval");
        if let Some(decided_at) = decided_at {
            tx.execute(
                "UPDATE tollgate_approvals SET decided_at = ?2 WHERE key = ?1",
                (&key, &decided_at),
            )
            .expect("decide");
        }
    }
    tx.commit().expect("commit");
}

#[tokio::test]
async fn listing_approvals_walks_the_pending_and_settled_indexes() {
    use crate::domain::pending_approval::ApprovalStatus;
    use crate::store::ApprovalQuery;

    let dir = TempDir::new();
    let store = open(&dir.db());
    let mut conn = raw(&dir.db());
    fill(&mut conn);

    let inbox = ops::ApprovalsShape {
        by_agent: true,
        pending_live: true,
        ..Default::default()
    };
    let history = ops::ApprovalsShape {
        by_agent: true,
        pending_overdue: true,
        settled: vec!["APPROVED", "REJECTED", "MODIFIED", "EXPIRED", "CANCELLED"],
        ..Default::default()
    };
    for (shape, uses) in [
        (inbox.clone(), vec!["tollgate_approvals_pending_agent_idx"]),
        // A step's rows have an index of their own (version 11): a step
        // few approvals wait at is found without a walk past the others.
        (
            ops::ApprovalsShape {
                by_step: true,
                ..inbox.clone()
            },
            vec!["tollgate_approvals_pending_step_idx (agent_id=? AND step_id=?)"],
        ),
        (
            ops::ApprovalsShape {
                after_cursor: true,
                by_step: true,
                by_text: true,
                ..inbox.clone()
            },
            vec!["tollgate_approvals_pending_step_idx (agent_id=? AND step_id=?"],
        ),
        // The stale ones (`?spec=stale`): the same walk, the hash checked
        // on each pending row (no index on it: pending rows are few).
        (
            ops::ApprovalsShape {
                by_spec: Some(crate::store::SpecFilter::IsNot("h".into())),
                ..inbox
            },
            vec!["tollgate_approvals_pending_agent_idx"],
        ),
        (
            history.clone(),
            vec!["tollgate_approvals_settled_agent_idx"],
        ),
        (
            ops::ApprovalsShape {
                pending_overdue: false,
                after_cursor: true,
                ..history.clone()
            },
            vec!["tollgate_approvals_settled_agent_idx"],
        ),
        (
            ops::ApprovalsShape {
                by_agent: false,
                ..history
            },
            vec!["tollgate_approvals_settled_idx"],
        ),
    ] {
        let plan = approvals_plan(&conn, &shape);
        for index in uses {
            assert!(plan.contains(index), "{shape:?}: {plan}");
        }
        // Each arm walks its index in order: no sort of the matches, but
        // for the few overdue pending rows, found by their expiry.
        if shape.pending_overdue && !shape.pending_live {
            assert!(
                plan.contains("tollgate_approvals_expiry_idx (expires_at<?)"),
                "{plan}"
            );
            assert_eq!(plan.matches("TEMP B-TREE").count(), 1, "{shape:?}: {plan}");
        } else {
            assert!(!plan.contains("TEMP B-TREE"), "{shape:?}: {plan}");
        }
        if shape.after_cursor && !shape.settled.is_empty() {
            assert!(plan.contains("<expr><?"), "the cursor is searched: {plan}");
        }
        // Never the table itself: every step reads an index.
        for step in plan
            .split("; ")
            .filter(|s| s.contains("tollgate_approvals"))
        {
            assert!(step.contains("USING INDEX"), "{shape:?}: {plan}");
        }
        eprintln!("{shape:?}: {plan}");
    }

    // And the store reads the pages those plans describe.
    let query = ApprovalQuery {
        agent_id: Some("agent".into()),
        statuses: vec![ApprovalStatus::Pending],
        step_id: None,
        text: None,
        now: crate::support::time::parse_utc("2026-06-01T00:00:00Z").expect("time"),
        limit: 50,
        cursor: None,
        ..Default::default()
    };
    let started = std::time::Instant::now();
    let page = store.list_approvals(&query).await.expect("inbox page");
    let took = started.elapsed();
    assert_eq!(page.approvals.len(), 50);
    assert_eq!(page.approvals[0].key, "key-11999");
    assert!(page.next_cursor.is_some());
    let started = std::time::Instant::now();
    let history = store
        .list_approvals(&ApprovalQuery {
            statuses: vec![ApprovalStatus::Approved, ApprovalStatus::Expired],
            ..query
        })
        .await
        .expect("history page");
    eprintln!(
        "first history page beside 10,000 pending: {:?}",
        started.elapsed()
    );
    assert_eq!(history.approvals[0].key, "key-11994");
    assert!(
        history
            .approvals
            .iter()
            .all(|r| r.status == ApprovalStatus::Approved)
    );
    eprintln!("first inbox page of 10,000 pending: {took:?}");
}

#[tokio::test]
async fn a_file_of_the_previous_schema_gains_the_votes_and_its_pauses_take_them() {
    // A file written by a build that knew migrations 1-6 only, with a run
    // waiting at a gate: it pauses without a roster (a plain gate).
    let dir = TempDir::new();
    {
        let conn = file_of_schema(&dir.db(), 6);
        conn.execute_batch(
            "INSERT INTO tollgate_runs (id, agent_id, spec_hash, status, input, \"trigger\", \
             outputs, created_at, updated_at) VALUES ('run-old', 'agent', 'h', \
             'awaiting_approval', '{}', '{}', '{}', '2026-01-01T00:00:00.000000Z', \
             '2026-01-01T00:00:00.000000Z'); \
             INSERT INTO tollgate_approvals (key, run_id, agent_id, spec_hash, step_index, \
             step_id, phase, message, payload, outputs, input, \"trigger\", status, \
             created_at, expires_at) VALUES ('k-old', 'run-old', 'agent', 'h', 0, 'gate', \
             'before', 'Ship?', '{\"order\": 1}', '{}', '{}', '{}', 'PENDING', \
             '2026-01-01T00:00:00.000000Z', '2999-01-01T00:00:00.000000Z')",
        )
        .expect("an old pause");
    }
    let store = open(&dir.db());
    let record = store
        .get_approval("k-old")
        .await
        .expect("get")
        .expect("kept");
    assert_eq!(
        record.roster, None,
        "a pause from before rosters is a plain gate"
    );

    let choice = crate::domain::policy::VoteChoice {
        decision: crate::domain::policy::VoteDecision::Approve,
        reason: None,
        payload: None,
        channel: crate::domain::policy::Channel::Cli,
        payload_digest: record.payload_digest(),
    };
    let claim = crate::domain::pending_approval::Claim {
        input: None,
        key: "k-old".into(),
        decision: crate::domain::pending_approval::Decision::Approve { reason: None },
        decided_by: "alice".into(),
        now: now(),
        spec_hash: "h".into(),
        pinned: false,
        timeout: None,
        then: crate::domain::pending_approval::AfterClaim::Release,
    };
    let outcome = store
        .cast_vote(&crate::store::CastVote { claim, choice })
        .await
        .expect("vote");
    assert!(
        matches!(outcome, crate::store::VoteOutcome::Settled { .. }),
        "{outcome:?}"
    );
    // A plain gate's ledger is its decision, read from its record.
    let ledger = store.votes("k-old").await.expect("votes");
    assert_eq!(ledger.len(), 1);
    assert_eq!(ledger[0].voter, "alice");
    assert_eq!(ledger[0].channel, crate::domain::policy::Channel::Cli);
    assert_eq!(ledger[0].payload_digest, record.payload_digest());

    // A channel this build cannot read is reported, naming the row.
    raw(&dir.db())
        .execute(
            "UPDATE tollgate_approvals SET decided_via = 'carrier-pigeon'",
            [],
        )
        .expect("damage the row");
    let err = store.votes("k-old").await.expect_err("an unknown channel");
    let message = err.to_string();
    assert!(
        message.contains("tollgate_approvals.decided_via") && message.contains("k-old"),
        "{message}"
    );
}

#[tokio::test]
async fn a_file_of_the_previous_schema_gains_gate_timers_and_its_overdue_pauses_still_expire() {
    // A file written by a build that knew migrations 1-7 only, with two
    // runs waiting: one overdue, one not. Neither has an `on_timeout` or a
    // nudge: the overdue one expires as it always did.
    let dir = TempDir::new();
    {
        let conn = file_of_schema(&dir.db(), 7);
        for (run, key, expires) in [
            ("run-late", "k-late", "2026-01-01T01:00:00.000000Z"),
            ("run-open", "k-open", "2999-01-01T00:00:00.000000Z"),
        ] {
            raw_pause(&conn, run, key, expires);
        }
    }
    let store = open(&dir.db());
    assert!(store.due_timeouts(now(), 10).await.expect("due").is_empty());
    assert!(store.nudge_due(now(), 10).await.expect("nudges").is_empty());
    let expired = store.expire_due(now()).await.expect("sweep");
    let keys: Vec<&str> = expired.iter().map(|r| r.key.as_str()).collect();
    assert_eq!(keys, ["k-late"]);
    let open_one = store
        .get_approval("k-open")
        .await
        .expect("get")
        .expect("kept");
    assert_eq!(
        open_one.status,
        crate::domain::pending_approval::ApprovalStatus::Pending
    );
}

// ------------------------------------------------- the expiry sweep's batches

/// `n` runs waiting at approvals `due-0000`, ... (step `gate`, spec `h`),
/// created on 2026-01-01 and run out a second apart from 01:00 that day,
/// written with raw SQL in one transaction.
fn overdue(conn: &mut Connection, n: usize) {
    let tx = conn.transaction().expect("begin");
    for i in 0..n {
        let (run, key) = (format!("run-{i:04}"), format!("due-{i:04}"));
        let expires = format!(
            "2026-01-01T{:02}:{:02}:{:02}.000000Z",
            1 + i / 3600,
            i / 60 % 60,
            i % 60
        );
        raw_pause(&tx, &run, &key, &expires);
    }
    tx.commit().expect("commit");
}

/// Run `run` waiting at approval `key` (agent `agent`, step `gate`, spec
/// `h`), created on 2026-01-01 and running out at `expires`, written with
/// raw SQL in the columns every schema from version 1 has.
fn raw_pause(conn: &Connection, run: &str, key: &str, expires: &str) {
    conn.execute(
        "INSERT INTO tollgate_runs (id, agent_id, spec_hash, status, input, \"trigger\", \
         outputs, created_at, updated_at) VALUES (?1, 'agent', 'h', \
         'awaiting_approval', '{}', '{}', '{}', '2026-01-01T00:00:00.000000Z', \
         '2026-01-01T00:00:00.000000Z')",
        [run],
    )
    .expect("a run");
    conn.execute(
        "INSERT INTO tollgate_approvals (key, run_id, agent_id, spec_hash, step_index, \
         step_id, phase, message, payload, outputs, input, \"trigger\", status, \
         created_at, expires_at) VALUES (?1, ?2, 'agent', 'h', 0, 'gate', \
         'before', 'Ship?', '{}', '{}', '{}', '{}', 'PENDING', \
         '2026-01-01T00:00:00.000000Z', ?3)",
        (key, run, expires),
    )
    .expect("a pause");
}

fn stored_status(conn: &Connection, table: &str, id: &str) -> String {
    let column = if table == "tollgate_runs" {
        "id"
    } else {
        "key"
    };
    conn.query_row(
        &format!("SELECT status FROM {table} WHERE {column} = ?1"),
        [id],
        |r| r.get(0),
    )
    .expect("status")
}

#[tokio::test]
async fn a_decision_between_two_batches_of_a_sweep_commits_and_the_next_batch_leaves_it() {
    use crate::domain::pending_approval::{AfterClaim, Claim, Decision};
    use crate::store::EXPIRE_BATCH;

    let dir = TempDir::new();
    let store = open(&dir.db());
    let n = EXPIRE_BATCH + 7;
    overdue(&mut raw(&dir.db()), n);
    let sweep_at = crate::support::time::format_utc(now());

    // The sweep's first batch: the earliest due, one write of its own.
    let at = sweep_at.clone();
    let first = store
        .write("a first batch", move |conn| {
            ops::expire_batch(conn, &at, "[]", EXPIRE_BATCH)
        })
        .await
        .expect("first batch");
    assert_eq!(first.expired.len(), EXPIRE_BATCH);
    assert!(first.full, "a full batch: the pass goes on");

    // Between the batches, a decision taken before its record ran out
    // (the latest due, so the next batch's) commits.
    let last = format!("due-{:04}", n - 1);
    let decided_at = crate::support::time::parse_utc("2026-01-01T00:30:00Z").expect("time");
    let claimed = store
        .claim(&Claim {
            key: last.clone(),
            decision: Decision::Approve { reason: None },
            input: None,
            decided_by: "alice".into(),
            now: decided_at,
            spec_hash: "h".into(),
            pinned: false,
            timeout: None,
            then: AfterClaim::Release,
        })
        .await
        .expect("the decision commits while the pass is under way");
    assert_eq!(claimed.record.key, last);

    // The next batch expires the rest and leaves the decided one alone.
    let second = store
        .write("a second batch", move |conn| {
            ops::expire_batch(conn, &sweep_at, "[]", EXPIRE_BATCH)
        })
        .await
        .expect("second batch");
    assert_eq!(second.expired.len(), 6);
    assert!(second.expired.iter().all(|r| r.key != last));
    assert!(!second.full, "a short batch ends the pass");

    let conn = raw(&dir.db());
    assert_eq!(
        stored_status(&conn, "tollgate_approvals", &last),
        "APPROVED"
    );
    let run_id = format!("run-{:04}", n - 1);
    assert_eq!(stored_status(&conn, "tollgate_runs", &run_id), "running");
    let left: i64 = conn
        .query_row(
            "SELECT COUNT(*) FROM tollgate_approvals WHERE status = 'PENDING'",
            [],
            |r| r.get(0),
        )
        .expect("count");
    assert_eq!(left, 0);
}

#[tokio::test]
async fn an_unreadable_overdue_row_neither_stops_a_sweep_of_many_batches_nor_is_read_twice() {
    use crate::store::EXPIRE_BATCH;

    let dir = TempDir::new();
    let store = open(&dir.db());
    let n = 2 * EXPIRE_BATCH + 7;
    overdue(&mut raw(&dir.db()), n);
    let conn = raw(&dir.db());
    conn.execute(
        "UPDATE tollgate_approvals SET payload = '{not json' WHERE key = 'due-0003'",
        [],
    )
    .expect("damage one row");

    let expired = store.expire_due(now()).await.expect("sweep");
    assert_eq!(expired.len(), n - 1, "every readable one, in one call");
    assert!(expired.iter().all(|r| r.key != "due-0003"));
    assert_eq!(
        stored_status(&conn, "tollgate_approvals", "due-0003"),
        "PENDING",
        "left as it is"
    );
    assert_eq!(
        stored_status(&conn, "tollgate_runs", "run-0003"),
        "awaiting_approval"
    );
    // The next sweep reads it once more, reports it and ends.
    assert!(store.expire_due(now()).await.expect("sweep").is_empty());

    // The sweep's query walks the expiry index in its order: no sort of
    // the overdue rows, however many.
    let plan: Vec<String> = conn
        .prepare(&format!("EXPLAIN QUERY PLAN {}", ops::expire_batch_sql()))
        .and_then(|mut s| {
            s.query_map(("2027", 500, "[]"), |r| r.get::<_, String>(3))?
                .collect()
        })
        .expect("plan");
    let plan = plan.join("; ");
    assert!(
        plan.contains("tollgate_approvals_expiry_idx (expires_at<?)"),
        "{plan}"
    );
    assert!(!plan.contains("TEMP B-TREE"), "{plan}");
}

/// A message row as the notifier of the previous schema left it: posted
/// (`ts`) or not, and showing the outcome (`decision_posted_at`) or not.
fn raw_message(conn: &Connection, key: &str, ts: Option<&str>, outcome_shown: bool) {
    conn.execute(
        "INSERT INTO tollgate_notifications (key, channel, ts, posted_at, attempts, \
         decision_posted_at) VALUES (?1, CASE WHEN ?2 IS NULL THEN NULL ELSE 'C0POSTED' END, \
         ?2, ?2, 1, CASE WHEN ?3 THEN '2026-01-02T00:00:00.000000Z' END)",
        (key, ts, outcome_shown),
    )
    .expect("a message row");
}

#[tokio::test]
async fn approvals_paused_before_the_outbox_get_the_slack_notices_their_messages_need() {
    use crate::store::outbox::Outbox;
    let dir = TempDir::new();
    {
        let conn = file_of_schema(&dir.db(), 14);
        let far = "2999-01-01T00:00:00.000000Z";
        for key in [
            "k-unseen",
            "k-unposted",
            "k-posted",
            "k-voting",
            "k-settled",
            "k-done",
            "k-quiet",
        ] {
            raw_pause(&conn, &format!("run-{key}"), key, far);
        }
        // An agent no Slack notifier ever worked for: left alone.
        conn.execute(
            "UPDATE tollgate_approvals SET agent_id = 'quiet' WHERE key = 'k-quiet'",
            [],
        )
        .expect("another agent");
        conn.execute(
            "UPDATE tollgate_approvals SET roster = '{\"rules\":[]}' WHERE key = 'k-voting'",
            [],
        )
        .expect("a gate counting votes");
        conn.execute(
            "UPDATE tollgate_approvals SET status = 'APPROVED', decided_by = 'ana' \
             WHERE key IN ('k-settled', 'k-done')",
            [],
        )
        .expect("decided");
        raw_message(&conn, "k-unposted", None, false);
        raw_message(&conn, "k-posted", Some("1700000000.000001"), false);
        raw_message(&conn, "k-voting", Some("1700000000.000002"), false);
        raw_message(&conn, "k-settled", Some("1700000000.000003"), false);
        raw_message(&conn, "k-done", Some("1700000000.000004"), true);
    }
    let store = open(&dir.db());
    let all = store
        .list_notices(&crate::store::NoticeQuery {
            limit: 100,
            ..Default::default()
        })
        .await
        .expect("the migrated notices read back");
    let mut written: Vec<(String, &str, &str, &str)> = all
        .iter()
        .map(|n| {
            (
                n.notice.key.clone(),
                n.notice.event.as_str(),
                n.notice.channel.as_str(),
                n.status.as_str(),
            )
        })
        .collect();
    written.sort();
    assert_eq!(
        written,
        vec![
            ("k-settled".into(), "approval.approved", "slack", "pending"),
            (
                "k-unposted".into(),
                "approval.requested",
                "slack",
                "pending"
            ),
            ("k-unseen".into(), "approval.requested", "slack", "pending"),
            ("k-voting".into(), "approval.voted", "slack", "pending"),
        ],
        "a notice for each message with work left, none for the others"
    );
    for notice in &all {
        let n = &notice.notice;
        assert_eq!(n.body.event, n.event);
        assert_eq!(n.body.data.key, n.key);
        assert_eq!(n.body.data.run_id, format!("run-{}", n.key));
        assert_eq!(n.body.data.agent, "agent");
        assert_eq!(n.body.data.message.as_deref(), Some("Ship?"));
        assert!(uuid::Uuid::parse_str(&n.id).is_ok(), "a UUID: {}", n.id);
        assert!(notice.next_at <= now(), "due at once");
        let routes = store
            .routes_of(&n.key)
            .await
            .expect("routes")
            .expect("stored");
        let posted_in = if n.key == "k-unseen" || n.key == "k-unposted" {
            ""
        } else {
            "C0POSTED"
        };
        assert_eq!(n.target, posted_in);
        assert_eq!(routes.slack.as_deref(), Some(posted_in), "{}", n.key);
        assert!(routes.webhooks.is_empty() && routes.email.is_none());
    }
    for key in ["k-posted", "k-done", "k-quiet"] {
        assert_eq!(
            store.routes_of(key).await.expect("routes"),
            None,
            "{key} is left as it was"
        );
    }
    // Due notices are what a worker leases next: labelled, then sent.
    assert_eq!(
        store
            .unlabelled_notices(10)
            .await
            .expect("unlabelled")
            .len(),
        4
    );
}
