//! A PostgreSQL outage in the middle of a run: the database goes away while
//! an approved call is at the downstream. The failure is named in the log
//! (which operation, which store, the driver's and the OS's error), the
//! health check says so, nothing is corrupted or done twice, and once the
//! database is back the server serves again with no manual step. The
//! interrupted run's call was made and its result could not be journaled;
//! its driver writes again while its lease holds, but with a 1 s lease the
//! outage outlasts it: the driver gives the run up, the server recovers it,
//! finds the POST in doubt and ends the run `stuck` (listed by `approvals
//! list --stuck`), never calling again. With the default lease a restart
//! of the database loses no run (the second test).
//!
//! It stops its database, so it runs on a PostgreSQL cluster of its own.

use crate::common;
use crate::common::postgres;
use crate::common::server;
use crate::common::stub_server;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use common::{Workspace, assert_success, stdout};
use serde_json::json;
use server::{Api, Served};
use stub_server::{Response, StubServer};

fn spec(stub_url: &str) -> String {
    format!(
        r#"version: 1
agent: outage-desk
tools:
  ship:
    http:
      method: POST
      url: "{stub_url}"
      json: {{ n: "{{{{ input.n }}}}" }}
steps:
  - id: gate
    approval:
      message: "Ship {{{{ input.n }}}}?"
  - id: ship
    tool: ship
    with: {{}}
"#
    )
}

/// The tests here stop and start one private cluster: one at a time.
static CLUSTER: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Poll `check` every 100 ms for up to 60 s.
async fn eventually(what: &str, mut check: impl AsyncFnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    while !check().await {
        assert!(tokio::time::Instant::now() < deadline, "never: {what}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn an_outage_mid_run_is_named_in_the_log_and_the_server_recovers() {
    let _alone = CLUSTER.lock().await;
    let cluster = postgres::private_cluster();
    let db = cluster.database();
    // The downstream answers only once the database is down.
    let outage = Arc::new(AtomicBool::new(false));
    let down = outage.clone();
    let stub = StubServer::start(move |_| {
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        while !down.load(Ordering::SeqCst) && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        Response::json(200, json!({"shipped": true}))
    });
    let ws = Workspace::new(&spec(&stub.url("/ship")));
    let served = Served::start_on_database(&ws.spec, &db.url, &[("TOLLGATE_RUN_LEASE", "1s")], &[]);
    let api = Api::new();
    let (code, run) = api
        .post(&served.url("/runs?wait=true"), json!({"input": {"n": 1}}))
        .await;
    assert_eq!(code, 200, "{run}");
    let run_id = run["id"].as_str().unwrap().to_string();
    let key = run["pending_approval"]["key"].as_str().unwrap().to_string();

    // Decided (stored), then the call starts; the database goes down.
    let (code, body) = api
        .post(&served.url(&format!("/approvals/{key}/approve")), json!({}))
        .await;
    assert_eq!(code, 200, "{body}");
    eventually("the call reaches the downstream", async || {
        stub.count() == 1
    })
    .await;
    cluster.stop();
    outage.store(true, Ordering::SeqCst);

    let store = format!(
        "postgres://postgres@127.0.0.1:{}/{}",
        cluster.port(),
        db.name
    );
    let failed_write = "could not store the run's result of step \"ship\"";
    eventually("the failed write is in the log", async || {
        served.logs().contains(failed_write)
    })
    .await;
    let logs = served.logs();
    let line = logs.lines().find(|l| l.contains(failed_write)).unwrap();
    assert!(line.contains(&run_id), "{line}");
    assert!(line.contains(&store), "names the store: {line}");
    assert!(
        line.contains(&format!("journaling step ship of run {run_id}")),
        "names the operation: {line}"
    );
    assert!(
        line.contains("onnection refused") || line.contains("error connecting"),
        "the OS's or the driver's reason: {line}"
    );
    let (code, health) = api.get(&served.url("/healthz")).await;
    assert_eq!(code, 503, "{health}");
    // The push connection's loss is said too (before, it was silent).
    eventually("the LISTEN loss is in the log", async || {
        served
            .logs()
            .contains("the LISTEN connection for approval changes was lost")
    })
    .await;

    cluster.start_again();
    eventually("healthy again", async || {
        api.get(&served.url("/healthz")).await.0 == 200
    })
    .await;
    eventually("the LISTEN reconnect is in the log", async || {
        served.logs().contains("LISTEN reconnected")
    })
    .await;
    // The decision held; the call was made once; the run is recovered,
    // found with its POST in doubt, and stuck for a person to look at.
    let (_, record) = api.get(&served.url(&format!("/approvals/{key}"))).await;
    assert_eq!(record["status"], "APPROVED");
    eventually("the run is recovered and stuck", async || {
        let (_, run) = api.get(&served.url(&format!("/runs/{run_id}"))).await;
        run["status"] == "stuck"
    })
    .await;
    assert_eq!(stub.count(), 1, "called exactly once");
    let stuck = ws
        .tollgate()
        .args([
            "approvals",
            "list",
            "--stuck",
            "--json",
            "--database-url",
            &db.url,
        ])
        .output()
        .unwrap();
    assert_success(&stuck);
    assert!(stdout(&stuck).contains(&key), "{}", stdout(&stuck));

    // New work goes through.
    let (code, run) = api
        .post(&served.url("/runs?wait=true"), json!({"input": {"n": 2}}))
        .await;
    assert_eq!(code, 200, "{run}");
    assert_eq!(run["status"], "awaiting_approval");
}

/// A PostgreSQL restart while six approved POSTs are at the downstream,
/// with the default lease: each call was made and its result cannot be
/// journaled while the database is away. The drivers keep their runs and
/// write again until it is back; every run completes (none `stuck`, none
/// `failed`) and each call was made once.
#[tokio::test(flavor = "multi_thread")]
async fn runs_deciding_across_a_restart_of_the_database_all_complete() {
    const RUNS: usize = 6;
    let _alone = CLUSTER.lock().await;
    let cluster = postgres::private_cluster();
    let db = cluster.database();
    let outage = Arc::new(AtomicBool::new(false));
    let down = outage.clone();
    let stub = StubServer::start(move |_| {
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        while !down.load(Ordering::SeqCst) && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        Response::json(200, json!({"shipped": true}))
    });
    let ws = Workspace::new(&spec(&stub.url("/ship")));
    let served = Served::start_on_database(&ws.spec, &db.url, &[], &[]);
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
    eventually("every call reaches the downstream", async || {
        stub.count() == RUNS
    })
    .await;
    cluster.stop();
    outage.store(true, Ordering::SeqCst);
    eventually("a driver holds on through the outage", async || {
        served.logs().contains("the store did not take the run's")
    })
    .await;
    cluster.start_again();
    eventually("healthy again", async || {
        api.get(&served.url("/healthz")).await.0 == 200
    })
    .await;
    for run_id in &runs {
        let run = api.wait_for_status(&served, run_id, "completed").await;
        assert_eq!(run["error"], serde_json::Value::Null, "{run}");
    }
    assert!(
        served.logs().contains("the store answers again"),
        "the recovery is logged"
    );
    assert_eq!(stub.count(), RUNS, "each call made once");
    let (_, stuck) = api.get(&served.url("/runs?status=stuck")).await;
    assert_eq!(stuck["runs"], json!([]), "{stuck}");
    let (_, failed) = api.get(&served.url("/runs?status=failed")).await;
    assert_eq!(failed["runs"], json!([]), "{failed}");
}
