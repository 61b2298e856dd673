//! Fast recovery on the same host (DESIGN §9): a run's owner records its
//! host, pid, process start time, boot id and pid namespace, so a server
//! restarted on the same host after a SIGKILL takes the dead process's
//! runs over at start-up, with the default 30 s lease, instead of waiting
//! for it to run out. A live owner on the same host keeps its runs, and an
//! owner on another host (or an old-format owner) still waits for its
//! lease. Real `tollgate serve` and `tollgate run --persist` processes,
//! real SIGKILL, real SQLite files and PostgreSQL databases.
//!
//! "Before the lease ran out" is read from the store, not from a clock:
//! the `run_recovered` event's time against the dead owner's stored
//! `lease_until`.

use crate::common;
use crate::common::postgres;
use crate::common::server;
use crate::common::stub_server;
use crate::common::stuck::{eventually, holding_stub};

use std::path::Path;
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use common::Workspace;
use serde_json::json;
use server::{Api, Served};
use stub_server::StubServer;
use tollgate_runtime::{EventKind, RunRecord, RunStatus, SharedStore};

/// A lookup (GET, so re-sent on recovery) before the first gate.
fn lookup_spec(stub_url: &str) -> String {
    format!(
        r#"version: 1
agent: lookup-desk
tools:
  lookup:
    http:
      method: GET
      url: "{stub_url}"
steps:
  - id: order
    tool: lookup
    with: {{}}
  - id: review
    approval:
      message: "Order {{{{ steps.order.output.body.id }}}}?"
"#
    )
}

/// No `TOLLGATE_RUN_LEASE`: the default 30 s lease.
fn start(spec: &Path, state: &Path) -> Served {
    Served::start(spec, state, &[], &[])
}

/// Start a run over HTTP and wait until the stub holds its call.
async fn start_until_called(api: &Api, served: &Served, stub: &StubServer) -> String {
    let (code, body) = api.post(&served.url("/runs"), json!({"input": {}})).await;
    assert_eq!(code, 202, "{body}");
    let run_id = body["run_id"].as_str().expect("run_id").to_string();
    eventually("the call reaches the stub", async || stub.count() >= 1).await;
    run_id
}

async fn stored_run(store: &SharedStore, run_id: &str) -> RunRecord {
    store
        .get_run(run_id)
        .await
        .expect("read the run")
        .expect("the run is stored")
}

/// The run a killed process left: still `running`, owned by that process
/// (its pid in the owner string), under a lease that has not run out.
/// Returns the owner and the lease's end.
async fn left_running(store: &SharedStore, run_id: &str, pid: u32) -> (String, DateTime<Utc>) {
    let run = stored_run(store, run_id).await;
    assert_eq!(run.status, RunStatus::Running, "{run:?}");
    let owner = run.owner.expect("an owner");
    assert!(owner.contains(&format!(":{pid}:")), "{owner}");
    // host:pid:random:start:boot_id:pid_ns[.time_ns]
    assert_eq!(owner.split(':').count(), 6, "a stamped owner: {owner}");
    let until = run.lease_until.expect("a lease");
    (owner, until)
}

/// Every `run_recovered` of a run: when, and by whom.
async fn recoveries(store: &SharedStore, run_id: &str) -> Vec<(DateTime<Utc>, String)> {
    store
        .run_events(run_id, 0)
        .await
        .expect("events")
        .into_iter()
        .filter_map(|e| match e.kind {
            EventKind::RunRecovered { by, .. } => Some((e.at, by)),
            _ => None,
        })
        .collect()
}

/// The start-up recovery ran before the server listened: its log line is
/// there once the server answers.
async fn startup_line(served: &Served) -> String {
    served
        .log_line(
            "recovered orphaned runs at start-up",
            Duration::from_secs(10),
        )
        .await
}

/// Replace one `:`-separated field of an owner string, counted from the
/// end (0 = the namespaces, 1 = the boot id, ...).
fn with_field_from_end(owner: &str, from_end: usize, value: &str) -> String {
    let mut fields: Vec<&str> = owner.split(':').collect();
    let at = fields.len() - 1 - from_end;
    fields[at] = value;
    fields.join(":")
}

const OTHER_BOOT: &str = "00000000-0000-4000-8000-000000000001";

fn set_owner(state: &Path, run_id: &str, owner: &str, lease_until: Option<DateTime<Utc>>) {
    let conn = rusqlite::Connection::open(state).expect("open the state file");
    let changed = match lease_until {
        Some(until) => conn.execute(
            "UPDATE tollgate_runs SET owner = ?1, lease_until = ?2 WHERE id = ?3",
            (
                owner,
                tollgate_runtime::time::format_utc(until).as_str(),
                run_id,
            ),
        ),
        None => conn.execute(
            "UPDATE tollgate_runs SET owner = ?1 WHERE id = ?2",
            (owner, run_id),
        ),
    }
    .expect("rewrite the owner");
    assert_eq!(changed, 1);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_server_killed_mid_run_is_recovered_by_its_successor_at_start_up_before_the_lease_ends() {
    let stub = holding_stub(1);
    let ws = Workspace::new(&lookup_spec(&stub.url("/orders/1")));
    let state = ws.path().join("state.db");
    let api = Api::new();
    let mut first = start(&ws.spec, &state);
    let run_id = start_until_called(&api, &first, &stub).await;
    let pid = first.pid();
    first.kill();
    let store = common::open_store(&state);
    let (dead, lease_until) = left_running(&store, &run_id, pid).await;

    let second = start(&ws.spec, &state);
    let line = startup_line(&second).await;
    assert!(line.contains("recovered=1"), "{line}");
    let taking = second
        .log_line(
            "taking over the runs of a dead driver",
            Duration::from_secs(10),
        )
        .await;
    assert!(
        taking.contains(&format!("process {pid} is gone")),
        "{taking}"
    );
    let run = api
        .wait_for_status(&second, &run_id, "awaiting_approval")
        .await;
    assert_eq!(run["pending_approval"]["step_id"], "review", "{run}");
    assert_eq!(stub.count(), 2, "the lookup was re-sent once");
    let recovered = recoveries(&store, &run_id).await;
    assert_eq!(recovered.len(), 1, "{recovered:?}");
    let (at, by) = &recovered[0];
    assert_ne!(by, &dead);
    assert!(
        *at < lease_until,
        "recovered at {at}, the dead owner's lease ran until {lease_until}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_run_of_the_same_host_before_a_reboot_is_recovered_at_start_up() {
    let stub = holding_stub(1);
    let ws = Workspace::new(&lookup_spec(&stub.url("/orders/1")));
    let state = ws.path().join("state.db");
    let api = Api::new();
    let mut first = start(&ws.spec, &state);
    let run_id = start_until_called(&api, &first, &stub).await;
    let pid = first.pid();
    first.kill();
    let store = common::open_store(&state);
    let (dead, lease_until) = left_running(&store, &run_id, pid).await;
    // The same host name with another boot id: written before a reboot.
    set_owner(
        &state,
        &run_id,
        &with_field_from_end(&dead, 1, OTHER_BOOT),
        None,
    );

    let second = start(&ws.spec, &state);
    let line = startup_line(&second).await;
    assert!(line.contains("recovered=1"), "{line}");
    let taking = second
        .log_line(
            "taking over the runs of a dead driver",
            Duration::from_secs(10),
        )
        .await;
    assert!(taking.contains("booted again"), "{taking}");
    api.wait_for_status(&second, &run_id, "awaiting_approval")
        .await;
    let recovered = recoveries(&store, &run_id).await;
    assert_eq!(recovered.len(), 1, "{recovered:?}");
    assert!(recovered[0].0 < lease_until, "{recovered:?} {lease_until}");
}

/// A server that was up all along takes the run over in its periodic
/// recovery round, not after the dead one's lease. (Its own lease is short
/// only so that its rounds come every half second; the dead server's is
/// the default 30 s.)
#[tokio::test(flavor = "multi_thread")]
async fn a_server_up_all_along_takes_a_dead_neighbours_run_over_in_its_next_round() {
    let stub = holding_stub(1);
    let ws = Workspace::new(&lookup_spec(&stub.url("/orders/1")));
    let state = ws.path().join("state.db");
    let api = Api::new();
    let mut first = start(&ws.spec, &state);
    let neighbour = Served::start(&ws.spec, &state, &[("TOLLGATE_RUN_LEASE", "1s")], &[]);
    let run_id = start_until_called(&api, &first, &stub).await;
    let pid = first.pid();
    first.kill();
    let store = common::open_store(&state);
    let (_, lease_until) = left_running(&store, &run_id, pid).await;

    api.wait_for_status(&neighbour, &run_id, "awaiting_approval")
        .await;
    neighbour
        .log_line(
            "taking over the runs of a dead driver",
            Duration::from_secs(10),
        )
        .await;
    let recovered = recoveries(&store, &run_id).await;
    assert_eq!(recovered.len(), 1, "{recovered:?}");
    assert!(recovered[0].0 < lease_until, "{recovered:?} {lease_until}");
}

#[tokio::test(flavor = "multi_thread")]
async fn two_servers_restarted_together_take_a_dead_servers_run_over_once() {
    let stub = holding_stub(1);
    let ws = Workspace::new(&lookup_spec(&stub.url("/orders/1")));
    let state = ws.path().join("state.db");
    let api = Api::new();
    let mut first = start(&ws.spec, &state);
    let run_id = start_until_called(&api, &first, &stub).await;
    let pid = first.pid();
    first.kill();
    let store = common::open_store(&state);
    let (_, lease_until) = left_running(&store, &run_id, pid).await;

    // Started side by side: both start-up recoveries find the owner dead.
    let starts: Vec<_> = (0..2)
        .map(|_| {
            let (spec, state) = (ws.spec.clone(), state.clone());
            std::thread::spawn(move || start(&spec, &state))
        })
        .collect();
    let servers: Vec<Served> = starts
        .into_iter()
        .map(|s| s.join().expect("a server started"))
        .collect();
    let mut took = 0;
    for served in &servers {
        let line = startup_line(served).await;
        if line.contains("recovered=1") {
            took += 1;
        } else {
            assert!(line.contains("recovered=0"), "{line}");
        }
    }
    assert_eq!(took, 1, "one winner");
    api.wait_for_status(&servers[0], &run_id, "awaiting_approval")
        .await;
    assert_eq!(stub.count(), 2, "the lookup was re-sent once");
    let recovered = recoveries(&store, &run_id).await;
    assert_eq!(recovered.len(), 1, "{recovered:?}");
    assert!(recovered[0].0 < lease_until, "{recovered:?} {lease_until}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_run_whose_driver_still_runs_on_this_host_is_not_taken_over() {
    // The stub holds the call for 20 s: the first server is mid-step,
    // alive, all that time.
    let stub = holding_stub(1);
    let ws = Workspace::new(&lookup_spec(&stub.url("/orders/1")));
    let state = ws.path().join("state.db");
    let api = Api::new();
    let first = start(&ws.spec, &state);
    let run_id = start_until_called(&api, &first, &stub).await;
    let store = common::open_store(&state);
    let (owner, _) = left_running(&store, &run_id, first.pid()).await;

    let second = start(&ws.spec, &state);
    let line = startup_line(&second).await;
    assert!(line.contains("recovered=0"), "{line}");
    assert!(
        !second
            .logs()
            .contains("taking over the runs of a dead driver"),
        "{}",
        second.logs()
    );
    let run = stored_run(&store, &run_id).await;
    assert_eq!(run.status, RunStatus::Running);
    assert_eq!(
        run.owner.as_deref(),
        Some(owner.as_str()),
        "still the first's"
    );
    assert!(recoveries(&store, &run_id).await.is_empty());
    assert_eq!(stub.count(), 1, "nobody re-sent the call");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_run_owned_on_another_host_waits_for_its_lease() {
    let stub = holding_stub(1);
    let ws = Workspace::new(&lookup_spec(&stub.url("/orders/1")));
    let state = ws.path().join("state.db");
    let api = Api::new();
    let mut first = start(&ws.spec, &state);
    let run_id = start_until_called(&api, &first, &stub).await;
    let pid = first.pid();
    first.kill();
    let store = common::open_store(&state);
    let (dead, _) = left_running(&store, &run_id, pid).await;
    // Another host: another name and another boot id (the pid is the dead
    // one's, gone here, and proves nothing about that host). Its lease
    // is made to end soon, so the test waits seconds, not 30.
    let elsewhere = with_field_from_end(&dead, 1, OTHER_BOOT);
    let elsewhere = with_field_from_end(&elsewhere, 5, "elsewhere.example");
    let lease_until = Utc::now() + chrono::Duration::seconds(10);
    set_owner(&state, &run_id, &elsewhere, Some(lease_until));

    // A short lease for this server: its recovery rounds come every half
    // second or so, and take the run soon after the other host's lease.
    let second = Served::start(&ws.spec, &state, &[("TOLLGATE_RUN_LEASE", "1s")], &[]);
    let line = startup_line(&second).await;
    assert!(line.contains("recovered=0"), "{line}");
    api.wait_for_status(&second, &run_id, "awaiting_approval")
        .await;
    let recovered = recoveries(&store, &run_id).await;
    assert_eq!(recovered.len(), 1, "{recovered:?}");
    assert!(
        recovered[0].0 >= lease_until,
        "recovered at {}, before the other host's lease ended at {lease_until}",
        recovered[0].0
    );
    assert!(
        !second
            .logs()
            .contains("taking over the runs of a dead driver"),
        "{}",
        second.logs()
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn an_old_format_owner_waits_for_its_lease() {
    let stub = holding_stub(1);
    let ws = Workspace::new(&lookup_spec(&stub.url("/orders/1")));
    let state = ws.path().join("state.db");
    let api = Api::new();
    let mut first = start(&ws.spec, &state);
    let run_id = start_until_called(&api, &first, &stub).await;
    let pid = first.pid();
    first.kill();
    let store = common::open_store(&state);
    let (dead, _) = left_running(&store, &run_id, pid).await;
    // host:pid:random, as written before owners had a start time: the
    // pid is gone, but without a start time that proves nothing.
    let old: String = dead.split(':').take(3).collect::<Vec<_>>().join(":");
    let lease_until = Utc::now() + chrono::Duration::seconds(10);
    set_owner(&state, &run_id, &old, Some(lease_until));

    let second = Served::start(&ws.spec, &state, &[("TOLLGATE_RUN_LEASE", "1s")], &[]);
    let line = startup_line(&second).await;
    assert!(line.contains("recovered=0"), "{line}");
    api.wait_for_status(&second, &run_id, "awaiting_approval")
        .await;
    let recovered = recoveries(&store, &run_id).await;
    assert_eq!(recovered.len(), 1, "{recovered:?}");
    assert!(recovered[0].0 >= lease_until, "{recovered:?} {lease_until}");
}

/// `tollgate run --persist` drives its run under the same identity: killed
/// mid-call, its run is recovered by a server starting on the state file,
/// before the CLI's lease would have ended.
#[tokio::test(flavor = "multi_thread")]
async fn a_persisted_cli_run_killed_mid_call_is_recovered_at_server_start_up() {
    let stub = holding_stub(1);
    let ws = Workspace::new(&lookup_spec(&stub.url("/orders/1")));
    let mut cli = ws
        .tollgate()
        .args(["run", ws.spec_arg(), "--persist", "--input", "{}"])
        .env_remove("TOLLGATE_RUN_LEASE")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("run tollgate");
    eventually("the lookup is in flight", async || stub.count() == 1).await;
    let pid = cli.id();
    cli.kill().expect("SIGKILL");
    cli.wait().expect("reaped");
    let store = common::open_store(&ws.state_db());
    let runs = store
        .list_runs(&tollgate_runtime::store::RunQuery {
            agent_id: None,
            status: None,
            limit: 10,
            cursor: None,
            text: None,
        })
        .await
        .expect("list runs");
    assert_eq!(runs.runs.len(), 1, "{runs:?}");
    let run_id = runs.runs[0].id.clone();
    let (_, lease_until) = left_running(&store, &run_id, pid).await;

    let api = Api::new();
    let served = start(&ws.spec, &ws.state_db());
    let line = startup_line(&served).await;
    assert!(line.contains("recovered=1"), "{line}");
    api.wait_for_status(&served, &run_id, "awaiting_approval")
        .await;
    assert_eq!(stub.count(), 2, "the lookup was sent again, once");
    let recovered = recoveries(&store, &run_id).await;
    assert_eq!(recovered.len(), 1, "{recovered:?}");
    assert!(recovered[0].0 < lease_until, "{recovered:?} {lease_until}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_server_killed_mid_run_on_postgresql_is_recovered_by_its_successor_at_start_up() {
    let db = postgres::database();
    let stub = holding_stub(1);
    let ws = Workspace::new(&lookup_spec(&stub.url("/orders/1")));
    let api = Api::new();
    let mut first = Served::start_on_database(&ws.spec, &db.url, &[], &[]);
    let run_id = start_until_called(&api, &first, &stub).await;
    let pid = first.pid();
    first.kill();
    let store = tollgate_runtime::store::open_async(&db.url, Default::default())
        .await
        .expect("open the database");
    let (dead, lease_until) = left_running(&store, &run_id, pid).await;

    let second = Served::start_on_database(&ws.spec, &db.url, &[], &[]);
    let line = startup_line(&second).await;
    assert!(line.contains("recovered=1"), "{line}");
    api.wait_for_status(&second, &run_id, "awaiting_approval")
        .await;
    assert_eq!(stub.count(), 2, "the lookup was re-sent once");
    let recovered = recoveries(&store, &run_id).await;
    assert_eq!(recovered.len(), 1, "{recovered:?}");
    assert_ne!(recovered[0].1, dead);
    assert!(recovered[0].0 < lease_until, "{recovered:?} {lease_until}");
}

/// The figures for BENCHMARKS.md: SIGKILL a server mid-step, start the
/// next one on the same state file at once, default lease; how long until
/// the run was recovered (its `run_recovered` event) and until it reached
/// its pause. Run with `--nocapture` to read them;
/// `TOLLGATE_RECOVERY_SAMPLES` sets the number of samples (3).
#[tokio::test(flavor = "multi_thread")]
async fn recovery_time_after_a_sigkill_with_the_default_lease() {
    let samples: usize = std::env::var("TOLLGATE_RECOVERY_SAMPLES")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(3);
    let mut figures = Vec::new();
    for _ in 0..samples {
        let stub = holding_stub(1);
        let ws = Workspace::new(&lookup_spec(&stub.url("/orders/1")));
        let state = ws.path().join("state.db");
        let api = Api::new();
        let mut first = start(&ws.spec, &state);
        let run_id = start_until_called(&api, &first, &stub).await;
        let killed_at = Utc::now();
        let killed = Instant::now();
        first.kill();
        let second = start(&ws.spec, &state);
        api.wait_for_status(&second, &run_id, "awaiting_approval")
            .await;
        let paused = killed.elapsed();
        let store = common::open_store(&state);
        let recovered = recoveries(&store, &run_id).await;
        assert_eq!(recovered.len(), 1, "{recovered:?}");
        let to_recovered = (recovered[0].0 - killed_at)
            .to_std()
            .unwrap_or(Duration::ZERO);
        figures.push((to_recovered, paused));
    }
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    for (i, (recovered, paused)) in figures.iter().enumerate() {
        println!(
            "recovery sample {}: SIGKILL -> run_recovered {:.0} ms, -> paused again {:.0} ms",
            i + 1,
            ms(*recovered),
            ms(*paused)
        );
    }
    let mut recovered: Vec<Duration> = figures.iter().map(|f| f.0).collect();
    recovered.sort();
    println!(
        "recovery with the default lease, {samples} samples: median {:.0} ms (min {:.0}, max {:.0})",
        ms(recovered[recovered.len() / 2]),
        ms(recovered[0]),
        ms(recovered[recovered.len() - 1])
    );
}
