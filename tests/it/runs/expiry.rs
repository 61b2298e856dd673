//! TTL: an expired approval is never listed, never claimable, and the sweep
//! marks it EXPIRED (and ends its run) exactly once across processes.
//!
//! Nothing here waits for a TTL to run out: pauses are made through the
//! library with a clock set hours back (so the `tollgate` processes, on the
//! system clock, see them expired at once), or in-process with a
//! `ManualClock` that the test advances.

use crate::common;
use crate::common::assert_stderr_contains;
use crate::common::server;

use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use common::*;
use tollgate_runtime::time::ManualClock;
use tollgate_runtime::{ApprovalStatus, EventKind, RunStatus};

const SHORT_TTL_SPEC: &str = r#"version: 1
agent: short-fuse
steps:
  - id: gate
    approval:
      message: "Quick, approve"
      ttl: 1h
  - id: after
    set: { done: true }
"#;

#[tokio::test(flavor = "multi_thread")]
async fn an_expired_approval_is_not_listed_not_claimable_and_swept_once() {
    let ws = Workspace::new(SHORT_TTL_SPEC);
    // Paused two hours ago with a one-hour TTL: expired an hour ago.
    let key = ws
        .pause_run_with_clock(serde_json::json!({}), hours_ago(2))
        .await
        .key;
    let store = open_store(&ws.state_db());
    let record = store.get_approval(&key).await.unwrap().unwrap();
    assert_eq!(record.status, ApprovalStatus::Pending, "not swept yet");
    assert_eq!(
        record.expires_at - record.created_at,
        chrono::Duration::hours(1)
    );
    assert!(record.expires_at < tollgate_runtime::time::now());

    // Four processes sweep at once (every approvals command sweeps first).
    let listers: Vec<_> = (0..4)
        .map(|_| {
            ws.tollgate()
                .args(["approvals", "list", "--spec", ws.spec_arg(), "--json"])
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    for lister in listers {
        let out = lister.wait_with_output().unwrap();
        assert_success(&out);
        let listed: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
        assert_eq!(
            listed["approvals"],
            serde_json::json!([]),
            "expired is never listed"
        );
    }

    let approve = ws.decide("approve", &key).output().unwrap();
    assert_exit(&approve, 3);
    assert_stderr_contains(&approve, "approval_expired");

    let record = store.get_approval(&key).await.unwrap().unwrap();
    assert_eq!(record.status, ApprovalStatus::Expired);
    let run = store.get_run(&record.run_id).await.unwrap().unwrap();
    assert_eq!(run.status, RunStatus::Expired);
    let expired_events = store
        .run_events(&run.id, 0)
        .await
        .unwrap()
        .into_iter()
        .filter(|e| matches!(e.kind, EventKind::RunExpired { .. }))
        .count();
    assert_eq!(expired_events, 1, "swept exactly once");
    assert!(!run.outputs.contains_key("after"));
}

#[tokio::test(flavor = "multi_thread")]
async fn an_expired_pending_record_is_refused_before_any_sweep() {
    // The claim itself checks expires_at: no sweep is needed to refuse it.
    let ws = Workspace::new(SHORT_TTL_SPEC);
    let clock = Arc::new(ManualClock::starting_now());
    let key = ws
        .pause_run_with_clock(serde_json::json!({}), clock.clone())
        .await
        .key;
    // Time passes on the run's clock only: a second past the one-hour TTL.
    clock.advance(Duration::from_secs(3601));
    let store = open_store(&ws.state_db());
    let spec = std::sync::Arc::new(tollgate_runtime::Spec::load(&ws.spec).unwrap());
    let agent = tollgate_runtime::AgentRun::new(spec, store.clone()).with_clock(clock.clone());
    let err = agent
        .resume_by_key(
            &key,
            tollgate_runtime::Decision::Approve { reason: None },
            "alice",
        )
        .await
        .unwrap_err();
    assert!(err.to_string().contains("expired"), "{err}");
    let record = store.get_approval(&key).await.unwrap().unwrap();
    assert_eq!(
        record.status,
        ApprovalStatus::Pending,
        "refusal changes nothing"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn an_expired_approval_never_reads_as_pending_even_before_a_sweep() {
    // The server sweeps at start and every 30 s: the reads below come
    // between two sweeps, so only the rule at read time can show EXPIRED.
    let ws = Workspace::new(SHORT_TTL_SPEC);
    let state = ws.state_db();
    let served = server::Served::start(&ws.spec, &state, &[], &[]);
    let api = server::Api::new();
    // The server answers only once its startup sweep is done: the pause
    // below comes after it.
    let (code, listed) = api.get(&served.url("/approvals")).await;
    assert_eq!(code, 200, "{listed}");
    // Paused (into the server's file) two hours ago, with a one-hour TTL.
    let pending = ws
        .pause_run_with_clock(serde_json::json!({}), hours_ago(2))
        .await;
    let (run_id, key) = (pending.run_id, pending.key);

    let (_, record) = api.get(&served.url(&format!("/approvals/{key}"))).await;
    assert_eq!(record["status"], "EXPIRED", "{record}");
    let (_, run) = api.get(&served.url(&format!("/runs/{run_id}"))).await;
    assert_eq!(run["pending_approval"], serde_json::Value::Null, "{run}");
    assert_eq!(run["status"], "expired", "{run}");
    let (_, listed) = api.get(&served.url("/approvals")).await;
    assert_eq!(listed["approvals"], serde_json::json!([]));
    let shown = ws
        .tollgate()
        .args(["approvals", "show", &key, "--spec", ws.spec_arg(), "--json"])
        .output()
        .unwrap();
    assert_success(&shown);
    let shown: serde_json::Value = serde_json::from_str(&stdout(&shown)).unwrap();
    assert_eq!(shown["status"], "EXPIRED", "{shown}");

    // No sweep has run yet: the row itself still says PENDING.
    let conn = rusqlite::Connection::open(&state).unwrap();
    let stored: String = conn
        .query_row(
            "SELECT status FROM tollgate_approvals WHERE key = ?1",
            [&key],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(stored, "PENDING");
}
