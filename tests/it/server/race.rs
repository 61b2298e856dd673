//! Exactly one decision wins over HTTP: two `tollgate serve` processes on
//! one SQLite file, 32 concurrent approve requests per key spread over
//! both, for 100 keys, half from alice and half from bob. One decision per
//! key: the winner's 200, its decider's other requests 200 `repeated`
//! (the same decision, DESIGN §5), the other decider's 409
//! already_resolved; and the step after the gate ran once per run.

use crate::common;
use crate::common::server;
use crate::common::stub_server;

use std::collections::BTreeMap;
use std::time::Duration;

use common::{Workspace, open_store};
use serde_json::json;
use server::{Api, Served, code};
use stub_server::{Response, StubServer};
use tollgate_runtime::{EventKind, RunStatus};

const KEYS: usize = 100;
const RACERS_PER_KEY: usize = 32;
/// Keys raced at the same time, each with all its racers.
const KEYS_AT_ONCE: usize = 10;
/// The agent starts the runs that alice and bob race to decide: whoever
/// starts a run may not decide its gates.
const TOKENS: &str = "agent:token-for-agent,alice:token-for-alice,bob:token-for-bob";

fn spec(stub_url: &str) -> String {
    format!(
        r#"version: 1
agent: race-desk
tools:
  record:
    http:
      method: POST
      url: "{stub_url}"
      json: {{ run: "{{{{ run.id }}}}" }}
steps:
  - id: gate
    approval:
      message: "Go?"
  - id: record
    tool: record
    with: {{}}
  - id: after
    set: {{ by: "{{{{ steps.gate.output.decided_by }}}}" }}
"#
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 8)]
async fn thirty_two_requests_per_key_over_two_servers_one_wins() {
    let stub = StubServer::start(|_| Response::json(200, json!({"ok": true})));
    let ws = Workspace::new(&spec(&stub.url("/record")));
    let state = ws.path().join("state.db");
    let env = [("TOLLGATE_API_TOKENS", TOKENS)];
    let a = Served::start(&ws.spec, &state, &env, &[]);
    let b = Served::start(&ws.spec, &state, &env, &[]);
    let alice = Api::with_token("token-for-alice");
    let bob = Api::with_token("token-for-bob");
    let agent = Api::with_token("token-for-agent");

    // 100 paused runs, started on either server.
    let mut keys = Vec::new();
    for i in 0..KEYS {
        let served = if i % 2 == 0 { &a } else { &b };
        let (status, run) = agent
            .post(
                &served.url("/runs?wait=true"),
                json!({ "input": { "n": i } }),
            )
            .await;
        assert_eq!(status, 200, "{run}");
        assert_eq!(run["status"], "awaiting_approval", "{run}");
        keys.push((
            run["pending_approval"]["key"].as_str().unwrap().to_string(),
            run["id"].as_str().unwrap().to_string(),
        ));
    }

    for batch in keys.chunks(KEYS_AT_ONCE) {
        let mut racers = Vec::new();
        for (key, _) in batch {
            for n in 0..RACERS_PER_KEY {
                let (url, api, who) = if n % 2 == 0 {
                    (
                        a.url(&format!("/approvals/{key}/approve")),
                        alice.clone(),
                        "alice",
                    )
                } else {
                    (
                        b.url(&format!("/approvals/{key}/approve")),
                        bob.clone(),
                        "bob",
                    )
                };
                let key = key.clone();
                racers.push(tokio::spawn(async move {
                    let (status, body) = api.post(&url, json!({})).await;
                    (key, who, status, body)
                }));
            }
        }
        type Answer = (&'static str, u16, serde_json::Value);
        let mut by_key: BTreeMap<String, Vec<Answer>> = BTreeMap::new();
        for racer in racers {
            let (key, who, status, body) = racer.await.expect("racer");
            by_key.entry(key).or_default().push((who, status, body));
        }
        for (key, answers) in by_key {
            assert_eq!(answers.len(), RACERS_PER_KEY);
            let winners: Vec<_> = answers
                .iter()
                .filter(|(_, s, b)| *s == 200 && b.get("repeated").is_none())
                .collect();
            assert_eq!(
                winners.len(),
                1,
                "key {key}: exactly one decision: {answers:?}"
            );
            let (winner, _, won) = winners[0];
            assert_eq!(won["approval"]["status"], "APPROVED");
            for (who, status, body) in &answers {
                if *who == *winner {
                    assert_eq!(*status, 200, "{body}");
                    assert_eq!(body["approval"]["decided_by"], *winner, "{body}");
                } else {
                    assert_eq!(*status, 409, "{body}");
                    assert_eq!(code(body), "already_resolved", "{body}");
                }
            }
        }
    }

    // Every run completes, and its side effect ran once.
    let store = open_store(&state);
    for (key, run_id) in &keys {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
        let run = loop {
            let run = store.get_run(run_id).await.unwrap().expect("run");
            if run.status.is_final() {
                break run;
            }
            assert!(tokio::time::Instant::now() < deadline, "run {run_id} stuck");
            tokio::time::sleep(Duration::from_millis(50)).await;
        };
        assert_eq!(
            run.status,
            RunStatus::Completed,
            "run {run_id}: {:?}",
            run.error
        );
        let record = store.get_approval(key).await.unwrap().expect("record");
        let decided_by = record.decided_by.expect("decided_by");
        assert!(decided_by == "alice" || decided_by == "bob", "{decided_by}");
        assert_eq!(run.outputs["after"]["by"], json!(decided_by));
        let events = store.run_events(run_id, 0).await.unwrap();
        let recorded = events
            .iter()
            .filter(|e| matches!(&e.kind, EventKind::StepCompleted { step, replayed: false, .. } if step == "record"))
            .count();
        let resolved = events
            .iter()
            .filter(|e| matches!(e.kind, EventKind::ApprovalResolved { .. }))
            .count();
        assert_eq!((recorded, resolved), (1, 1), "run {run_id}");
    }
    let mut calls: BTreeMap<String, usize> = BTreeMap::new();
    for request in stub.requests_to("/record") {
        *calls
            .entry(request.json()["run"].as_str().unwrap_or("").to_string())
            .or_default() += 1;
    }
    assert_eq!(calls.len(), KEYS);
    assert!(calls.values().all(|&n| n == 1), "{calls:?}");
}
