//! Durable runs between pauses (DESIGN §9), with real `tollgate serve`
//! processes, real SIGKILL and a counting stub downstream: a run whose
//! server dies mid-step is recovered by the next server (or by another one
//! on the same store) once its lease runs out, and resumed from its last
//! durable point. A call that completed is never repeated; one in flight
//! when the server died is re-sent with the same Idempotency-Key when its
//! tool says `on_crash: retry` (or is a GET), and otherwise ends the run
//! `stuck` with the call made at most once.

use crate::common;
use crate::common::postgres;
use crate::common::server;
use crate::common::stub_server;
use crate::common::stuck::{LEASE, approve_until_called, eventually, holding_stub, ship_spec};

use std::path::Path;
use std::time::Duration;

use common::Workspace;
use serde_json::{Value, json};
use server::{Api, Served};
use stub_server::StubServer;

fn start(spec: &Path, state: &Path) -> Served {
    Served::start(spec, state, &[("TOLLGATE_RUN_LEASE", LEASE)], &[])
}

fn start_pg(spec: &Path, url: &str) -> Served {
    Served::start_on_database(spec, url, &[("TOLLGATE_RUN_LEASE", LEASE)], &[])
}

async fn run_status(api: &Api, served: &Served, run_id: &str) -> Value {
    let (code, run) = api.get(&served.url(&format!("/runs/{run_id}"))).await;
    assert_eq!(code, 200, "{run}");
    run
}

async fn events(api: &Api, served: &Served, run_id: &str) -> Vec<Value> {
    let mut stream =
        server::SseStream::open(api, &served.url(&format!("/runs/{run_id}/events")), None).await;
    let mut events = Vec::new();
    while let server::SseNext::Event(e) = stream.next(Duration::from_millis(500)).await {
        events.push(e.data);
    }
    events
}

fn kinds(events: &[Value]) -> Vec<&str> {
    events.iter().filter_map(|e| e["type"].as_str()).collect()
}

/// A lookup (GET) before the first gate.
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

/// Start a run over HTTP and wait until the stub holds its call.
async fn start_until_called(api: &Api, served: &Served, stub: &StubServer) -> String {
    let (code, body) = api.post(&served.url("/runs"), json!({"input": {}})).await;
    assert_eq!(code, 202, "{body}");
    let run_id = body["run_id"].as_str().expect("run_id").to_string();
    eventually("the call reaches the stub", async || stub.count() >= 1).await;
    run_id
}

#[tokio::test(flavor = "multi_thread")]
async fn a_run_killed_between_its_202_and_its_first_pause_reaches_its_pause_once_after_restart() {
    let stub = holding_stub(1);
    let ws = Workspace::new(&lookup_spec(&stub.url("/orders/1")));
    let state = ws.path().join("state.db");
    let api = Api::new();
    let mut first = start(&ws.spec, &state);
    let run_id = start_until_called(&api, &first, &stub).await;
    // SIGKILL with the GET in flight: 202 answered, no pause yet.
    first.kill();

    let second = start(&ws.spec, &state);
    let run = api
        .wait_for_status(&second, &run_id, "awaiting_approval")
        .await;
    assert_eq!(run["pending_approval"]["step_id"], "review", "{run}");
    // A GET in doubt is re-sent (its default on_crash is retry).
    assert_eq!(stub.count(), 2, "the lookup was called again, once");
    let log = second
        .log_line(
            "recovered orphaned runs at start-up",
            Duration::from_secs(10),
        )
        .await;
    assert!(log.contains("stuck=\"0\""), "{log}");
    let all = events(&api, &second, &run_id).await;
    let kinds = kinds(&all);
    assert_eq!(
        kinds.iter().filter(|k| **k == "awaiting_approval").count(),
        1,
        "one pause: {kinds:?}"
    );
    let recovered = all
        .iter()
        .find(|e| e["type"] == "run_recovered")
        .unwrap_or_else(|| panic!("no run_recovered: {kinds:?}"));
    assert_eq!(recovered["from_step"], "order", "{recovered}");
    assert!(recovered["by"].as_str().is_some_and(|b| !b.is_empty()));
    let seqs: Vec<u64> = all.iter().filter_map(|e| e["seq"].as_u64()).collect();
    assert_eq!(
        seqs,
        (1..=seqs.len() as u64).collect::<Vec<_>>(),
        "gap-free"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn an_approved_post_in_flight_at_a_kill_is_resent_with_the_same_key_when_on_crash_is_retry() {
    let stub = holding_stub(1);
    let ws = Workspace::new(&ship_spec(&stub.url("/ship"), Some("retry")));
    let state = ws.path().join("state.db");
    let api = Api::new();
    let mut first = start(&ws.spec, &state);
    let (run_id, _key) = approve_until_called(&api, &first, &stub).await;
    first.kill();

    let second = start(&ws.spec, &state);
    let run = api.wait_for_status(&second, &run_id, "completed").await;
    assert_eq!(run["outputs"]["done"]["shipped"], "call-1", "{run}");
    let calls = stub.requests_to("/ship");
    assert_eq!(calls.len(), 2, "sent again once");
    let keys: Vec<Option<&str>> = calls.iter().map(|c| c.header("idempotency-key")).collect();
    assert!(keys[0].is_some(), "{keys:?}");
    assert_eq!(keys[0], keys[1], "the same Idempotency-Key on the re-send");
}

#[tokio::test(flavor = "multi_thread")]
async fn an_approved_post_in_flight_at_a_kill_ends_the_run_stuck_with_one_call_by_default_and_an_operator_retries_or_fails_it()
 {
    let stub = holding_stub(2);
    let ws = Workspace::new(&ship_spec(&stub.url("/ship"), None));
    let state = ws.path().join("state.db");
    let api = Api::new();
    let mut first = start(&ws.spec, &state);
    let (retried, _) = approve_until_called(&api, &first, &stub).await;
    let (failed, _) = approve_until_called(&api, &first, &stub).await;
    eventually("both approved calls are in flight", async || {
        stub.count() == 2
    })
    .await;
    first.kill();

    let second = start(&ws.spec, &state);
    for run_id in [&retried, &failed] {
        let run = api.wait_for_status(&second, run_id, "stuck").await;
        assert!(
            run["error"].as_str().unwrap_or("").contains("in flight"),
            "{run}"
        );
        let all = events(&api, &second, run_id).await;
        let stuck = all
            .iter()
            .find(|e| e["type"] == "run_stuck")
            .unwrap_or_else(|| panic!("no run_stuck: {:?}", kinds(&all)));
        assert_eq!(stuck["step"], "ship");
    }
    assert_eq!(
        stub.count(),
        2,
        "a POST without a promise is not sent twice"
    );
    // Visible: a restart's log counts them.
    drop(second);
    let third = start(&ws.spec, &state);
    let log = third
        .log_line(
            "recovered orphaned runs at start-up",
            Duration::from_secs(10),
        )
        .await;
    assert!(log.contains("stuck=\"2\""), "{log}");

    // Not on the allow-list: refused, nothing changes.
    let spec = ws.spec.to_str().unwrap();
    let state_arg = state.to_str().unwrap();
    let refused = ws
        .tollgate()
        .args([
            "runs", "retry", &retried, "--spec", spec, "--state", state_arg,
        ])
        .args(["--by", "mallory"])
        .output()
        .unwrap();
    assert_eq!(
        refused.status.code(),
        Some(6),
        "{}",
        common::stderr(&refused)
    );
    assert!(common::stderr(&refused).contains("approvals.approvers"));

    // `runs retry` sends the call again, with the same Idempotency-Key.
    let retry = ws
        .tollgate()
        .args([
            "runs", "retry", &retried, "--spec", spec, "--state", state_arg,
        ])
        .args(["--by", "alice"])
        .output()
        .unwrap();
    common::assert_success(&retry);
    assert!(
        common::stdout(&retry).contains("completed"),
        "{}",
        common::stdout(&retry)
    );
    let run = run_status(&api, &third, &retried).await;
    assert_eq!(run["status"], "completed", "{run}");
    let calls: Vec<_> = stub
        .requests_to("/ship")
        .into_iter()
        .filter(|c| c.json()["run"] == retried.as_str())
        .collect();
    assert_eq!(calls.len(), 2, "sent once more by the retry");
    assert_eq!(
        calls[0].header("idempotency-key"),
        calls[1].header("idempotency-key"),
        "the same Idempotency-Key"
    );
    let all = events(&api, &third, &retried).await;
    assert!(
        all.iter()
            .any(|e| e["type"] == "run_recovered" && e["by"] == "alice"),
        "who retried is recorded: {:?}",
        kinds(&all)
    );
    // A completed run is not retried.
    let (code, body) = api
        .post(&third.url(&format!("/runs/{retried}/retry")), json!({}))
        .await;
    assert_eq!((code, server::code(&body)), (409, "run_conflict"), "{body}");

    // `POST /runs/{id}/fail` ends the other one failed, saying who and why.
    let (code, run) = api
        .post(
            &third.url(&format!("/runs/{failed}/fail")),
            json!({"reason": "shipped by hand"}),
        )
        .await;
    assert_eq!(code, 200, "{run}");
    assert_eq!(run["status"], "failed", "{run}");
    assert_eq!(run["error"], "failed by local: shipped by hand", "{run}");
    let (code, body) = api
        .post(
            &third.url(&format!("/runs/{failed}/fail")),
            json!({"reason": "again"}),
        )
        .await;
    assert_eq!((code, server::code(&body)), (409, "run_conflict"), "{body}");
    assert_eq!(stub.count(), 3, "failing calls nothing");
}

#[tokio::test(flavor = "multi_thread")]
async fn runs_fail_from_the_command_line_and_retry_over_http() {
    let stub = holding_stub(2);
    let ws = Workspace::new(&ship_spec(&stub.url("/ship"), None));
    let state = ws.path().join("state.db");
    let api = Api::new();
    let mut first = start(&ws.spec, &state);
    let (by_cli, _) = approve_until_called(&api, &first, &stub).await;
    let (by_http, _) = approve_until_called(&api, &first, &stub).await;
    eventually("both approved calls are in flight", async || {
        stub.count() == 2
    })
    .await;
    first.kill();
    let second = start(&ws.spec, &state);
    for run_id in [&by_cli, &by_http] {
        api.wait_for_status(&second, run_id, "stuck").await;
    }
    let failed = ws
        .tollgate()
        .args(["runs", "fail", &by_cli, "--spec", ws.spec.to_str().unwrap()])
        .args(["--state", state.to_str().unwrap(), "--by", "alice"])
        .args(["--reason", "refunded instead"])
        .output()
        .unwrap();
    common::assert_success(&failed);
    let run = run_status(&api, &second, &by_cli).await;
    assert_eq!(run["status"], "failed", "{run}");
    assert_eq!(run["error"], "failed by alice: refunded instead");

    let (code, run) = api
        .post(
            &second.url(&format!("/runs/{by_http}/retry?wait=true")),
            json!({}),
        )
        .await;
    assert_eq!(code, 200, "{run}");
    assert_eq!(run["status"], "completed", "{run}");
    assert_eq!(stub.count(), 3, "the retried call only");
}

#[tokio::test(flavor = "multi_thread")]
async fn two_servers_on_one_sqlite_file_recover_each_others_orphans() {
    let stub = holding_stub(1);
    let ws = Workspace::new(&lookup_spec(&stub.url("/orders/1")));
    let state = ws.path().join("state.db");
    let api = Api::new();
    let mut a = start(&ws.spec, &state);
    let b = start(&ws.spec, &state);
    let run_id = start_until_called(&api, &a, &stub).await;
    a.kill();
    // B was up all along: its periodic recovery takes the run over.
    let run = api.wait_for_status(&b, &run_id, "awaiting_approval").await;
    assert_eq!(run["pending_approval"]["step_id"], "review", "{run}");
    assert_eq!(stub.count(), 2);
    b.log_line("run recovered", Duration::from_secs(10)).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn three_servers_on_postgresql_recover_each_others_orphans_once() {
    let db = postgres::database();
    let stub = holding_stub(2);
    let ws = Workspace::new(&lookup_spec(&stub.url("/orders/1")));
    let api = Api::new();
    let mut a = start_pg(&ws.spec, &db.url);
    let b = start_pg(&ws.spec, &db.url);
    let c = start_pg(&ws.spec, &db.url);
    let first = start_until_called(&api, &a, &stub).await;
    let (code, body) = api.post(&a.url("/runs"), json!({"input": {}})).await;
    assert_eq!(code, 202, "{body}");
    let second = body["run_id"].as_str().unwrap().to_string();
    eventually("both calls reach the stub", async || stub.count() >= 2).await;
    a.kill();
    for run_id in [&first, &second] {
        api.wait_for_status(&b, run_id, "awaiting_approval").await;
    }
    // Each orphan was taken over by exactly one of B and C.
    assert_eq!(stub.count(), 4, "each lookup re-sent once");
    for run_id in [&first, &second] {
        let all = events(&api, &c, run_id).await;
        let kinds = kinds(&all);
        assert_eq!(
            kinds.iter().filter(|k| **k == "run_recovered").count(),
            1,
            "{kinds:?}"
        );
        assert_eq!(
            kinds.iter().filter(|k| **k == "awaiting_approval").count(),
            1,
            "{kinds:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_gated_tool_journals_its_call_only_once_decided_and_its_result_once_done() {
    let stub = holding_stub(0);
    let ws = Workspace::new(&ship_spec(&stub.url("/ship"), None));
    let state = ws.path().join("state.db");
    let api = Api::new();
    let served = start(&ws.spec, &state);
    let (code, run) = api
        .post(&served.url("/runs?wait=true"), json!({"input": {}}))
        .await;
    assert_eq!(code, 200, "{run}");
    let run_id = run["id"].as_str().unwrap().to_string();
    let key = run["pending_approval"]["key"].as_str().unwrap().to_string();
    let store = common::open_store(&state);
    // Paused at the gate: nothing was called, so nothing is in doubt.
    assert!(store.run_journal(&run_id).await.unwrap().is_empty());
    let (code, body) = api
        .post(
            &served.url(&format!("/approvals/{key}/approve?wait=true")),
            json!({}),
        )
        .await;
    assert_eq!(code, 200, "{body}");
    assert_eq!(body["status"], "completed", "{body}");
    let journal = store.run_journal(&run_id).await.unwrap();
    assert_eq!(journal.len(), 1, "{journal:?}");
    assert_eq!(journal[0].step_id, "ship");
    assert_eq!(
        journal[0].output.as_ref().map(|o| o["body"]["id"].clone()),
        Some(json!("call-0"))
    );

    // Rejected, the gated tool calls nothing and journals nothing: a start
    // recorded here read as a call in doubt to a recovery after a crash
    // before the run's end, and left a rejected run stuck (found by the
    // SIGKILL chaos test).
    let (code, run) = api
        .post(&served.url("/runs?wait=true"), json!({"input": {}}))
        .await;
    assert_eq!(code, 200, "{run}");
    let rejected_id = run["id"].as_str().unwrap().to_string();
    let key = run["pending_approval"]["key"].as_str().unwrap().to_string();
    let (code, body) = api
        .post(
            &served.url(&format!("/approvals/{key}/reject?wait=true")),
            json!({"reason": "no"}),
        )
        .await;
    assert_eq!(code, 200, "{body}");
    assert_eq!(body["status"], "rejected", "{body}");
    let journal = store.run_journal(&rejected_id).await.unwrap();
    assert!(
        journal.is_empty(),
        "a rejected call is not journaled: {journal:?}"
    );
    assert_eq!(stub.count(), 1, "only the approved call was made");
}

/// `tollgate run --persist` stores its run before the first step, leased
/// to itself, as `serve` does: killed while its first call is in flight, the
/// run is recovered by the next server on the state file once the lease
/// runs out, and reaches its pause once.
#[tokio::test(flavor = "multi_thread")]
async fn a_persisted_cli_run_killed_mid_call_is_recovered_by_a_server() {
    let stub = holding_stub(1);
    let ws = Workspace::new(&lookup_spec(&stub.url("/orders/1")));
    let mut cli = ws
        .tollgate()
        .args(["run", ws.spec_arg(), "--persist", "--input", "{}"])
        .env("TOLLGATE_RUN_LEASE", LEASE)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("run tollgate");
    eventually("the lookup is in flight", async || stub.count() == 1).await;
    cli.kill().expect("SIGKILL");
    cli.wait().expect("reaped");

    let api = Api::new();
    let served = start(&ws.spec, &ws.state_db());
    let mut paused = Vec::new();
    eventually("the run is recovered to its pause", async || {
        let (code, page) = api.get(&served.url("/runs?status=awaiting_approval")).await;
        assert_eq!(code, 200, "{page}");
        paused = page["runs"].as_array().cloned().unwrap_or_default();
        !paused.is_empty()
    })
    .await;
    assert_eq!(paused.len(), 1, "{paused:?}");
    let run_id = paused[0]["id"].as_str().expect("run id");
    assert_eq!(stub.count(), 2, "the lookup was sent again, once");
    let all = events(&api, &served, run_id).await;
    let kinds = kinds(&all);
    assert_eq!(
        kinds.iter().filter(|k| **k == "run_recovered").count(),
        1,
        "{kinds:?}"
    );
    let (code, all_runs) = api.get(&served.url("/runs")).await;
    assert_eq!(code, 200);
    assert_eq!(
        all_runs["runs"].as_array().map(Vec::len),
        Some(1),
        "{all_runs}"
    );
}

/// What a SIGKILL between a dedupe step's claim and its journaled output
/// leaves (the claim committed, the step in doubt): the next server
/// recovers the run, finds the key its own, and runs on; the key stays
/// claimed, so a second run with it is still skipped.
#[tokio::test(flavor = "multi_thread")]
async fn a_dedupe_claim_in_flight_at_a_crash_stays_the_runs_own_on_recovery() {
    use tollgate_runtime::events::{Event, EventKind};
    use tollgate_runtime::{JournalEntry, RunRecord, RunStatus, Spec};

    let stub = holding_stub(0);
    let spec_text = format!(
        r#"version: 1
agent: once-only
tools:
  ship:
    http: {{ method: POST, url: "{}" }}
steps:
  - id: once
    dedupe: {{ key: "order-{{{{ input.order_id }}}}", ttl: 1h }}
  - id: send
    tool: ship
    with: {{ order: "{{{{ input.order_id }}}}" }}
"#,
        stub.url("/ship")
    );
    let ws = Workspace::new(&spec_text);
    let spec = Spec::load(&ws.spec).expect("spec");
    let now = tollgate_runtime::time::now();
    let run = RunRecord {
        id: "run-crashed-in-dedupe".into(),
        agent_id: "once-only".into(),
        spec_hash: spec.hash.to_string(),
        status: RunStatus::Running,
        input: json!({"order_id": "D-1"}).into(),
        trigger: json!({"kind": "api"}),
        outputs: Default::default(),
        error: None,
        created_at: now,
        updated_at: now,
        owner: Some("dead-node:1:0".into()),
        lease_until: Some(now - chrono::TimeDelta::seconds(5)),
    };
    let event = |seq, kind| Event {
        run_id: run.id.clone(),
        seq,
        at: now,
        kind,
    };
    let store = common::open_store(&ws.state_db());
    store
        .create_run(
            &run,
            &[
                event(
                    1,
                    EventKind::RunStarted {
                        agent: run.agent_id.clone(),
                        spec_hash: run.spec_hash.clone(),
                        input: run.input.clone(),
                    },
                ),
                event(
                    2,
                    EventKind::StepStarted {
                        step: "once".into(),
                        index: 0,
                    },
                ),
            ],
        )
        .await
        .expect("create run");
    let started = JournalEntry {
        run_id: run.id.clone(),
        step_index: 0,
        step_id: "once".into(),
        output: None,
        at: now,
    };
    store
        .record_step("dead-node:1:0", &started, &[])
        .await
        .expect("journal the step's start");
    let claim_key = tollgate_runtime::workflow::dedupe_claim_key("once-only", "order-D-1");
    assert!(
        store
            .claim_key(&claim_key, &run.id, now, now + chrono::TimeDelta::hours(1))
            .await
            .expect("claim the key"),
        "the crashed run held the key"
    );
    drop(store);

    let served = start(&ws.spec, &ws.state_db());
    let api = Api::new();
    let done = api.wait_for_status(&served, &run.id, "completed").await;
    assert_eq!(
        done["outputs"]["once"]["key"], "order-D-1",
        "claimed, not skipped: {done}"
    );
    assert_eq!(stub.count(), 1, "the step after the dedupe ran once");

    // The key is still the recovered run's: the same order again is skipped.
    let (code, second) = api
        .post(
            &served.url("/runs?wait=true"),
            json!({"input": {"order_id": "D-1"}}),
        )
        .await;
    assert_eq!(code, 200, "{second}");
    assert_eq!(second["status"], "skipped", "{second}");
    assert_eq!(stub.count(), 1, "a skipped run calls nothing");
}
