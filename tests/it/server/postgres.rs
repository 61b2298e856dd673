//! Several servers, one PostgreSQL database: any node lists every pending
//! approval, any node decides, the run resumes exactly once, and a watcher on
//! another node sees it finish.

use crate::common;
use crate::common::postgres;
use crate::common::server;
use crate::common::stub_server;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use common::Workspace;
use serde_json::{Value, json};
use server::{Api, Served, SseStream};
use stub_server::{Response, StubServer};

fn spec(stub_url: &str) -> String {
    format!(
        r#"version: 1
agent: shared-desk
tools:
  ship:
    http:
      method: POST
      url: "{stub_url}"
      json: {{ run: "{{{{ run.id }}}}" }}
steps:
  - id: gate
    approval:
      message: "Ship {{{{ input.n }}}}?"
  - id: ship
    tool: ship
    with: {{}}
  - id: done
    set: {{ by: "{{{{ steps.gate.output.decided_by }}}}" }}
"#
    )
}

/// Calls the stub received, per run id.
fn calls_per_run(stub: &StubServer) -> BTreeMap<String, usize> {
    let mut calls = BTreeMap::new();
    for request in stub.requests() {
        let run = request.json()["run"].as_str().unwrap_or("?").to_string();
        *calls.entry(run).or_insert(0) += 1;
    }
    calls
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_pause_on_one_node_is_decided_on_another_and_seen_finishing_on_a_third() {
    let db = postgres::database();
    let stub = StubServer::start(|_| Response::json(200, json!({"ok": true})));
    let ws = Workspace::new(&spec(&stub.url("/ship")));
    let nodes: Vec<Served> = (0..3)
        .map(|_| Served::start_on_database(&ws.spec, &db.url, &[], &[]))
        .collect();
    let (a, b, c) = (&nodes[0], &nodes[1], &nodes[2]);
    let api = Api::new();

    let (status, run) = api
        .post(&a.url("/runs?wait=true"), json!({"input": {"n": 1}}))
        .await;
    assert_eq!(status, 200, "{run}");
    assert_eq!(run["status"], "awaiting_approval");
    let run_id = run["id"].as_str().unwrap().to_string();
    let key = run["pending_approval"]["key"].as_str().unwrap().to_string();

    for node in [b, c] {
        let (status, page) = api.get(&node.url("/approvals")).await;
        assert_eq!(status, 200, "{page}");
        let keys: Vec<&str> = page["approvals"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|r| r["key"].as_str())
            .collect();
        assert_eq!(keys, vec![key.as_str()], "every node lists the pause");
    }

    // A watches the run while C decides it.
    let mut stream = SseStream::open(&api, &a.url(&format!("/runs/{run_id}/events")), None).await;
    let (status, answer) = api
        .post(
            &c.url(&format!("/approvals/{key}/approve")),
            json!({"reason": "ship it"}),
        )
        .await;
    assert_eq!(status, 200, "{answer}");
    let seen = stream.collect_until_end(Duration::from_secs(20)).await;
    let kinds: Vec<&str> = seen.iter().map(|e| e.kind()).collect();
    assert_eq!(kinds.first(), Some(&"run_started"), "{kinds:?}");
    assert!(kinds.contains(&"approval_resolved"), "{kinds:?}");
    assert_eq!(kinds.last(), Some(&"run_completed"), "{kinds:?}");

    let done = api.wait_for_status(b, &run_id, "completed").await;
    assert_eq!(done["outputs"]["done"]["by"], "local");
    assert_eq!(
        calls_per_run(&stub).get(&run_id),
        Some(&1),
        "shipped exactly once"
    );
}

const KEYS: usize = 50;
const RACERS_PER_KEY: usize = 64;
const KEYS_AT_ONCE: usize = 5;

#[tokio::test(flavor = "multi_thread", worker_threads = 8)]
async fn sixty_four_requests_per_key_over_three_nodes_one_wins() {
    let db = postgres::database();
    let stub = StubServer::start(|_| Response::json(200, json!({"ok": true})));
    let ws = Workspace::new(&spec(&stub.url("/ship")));
    let nodes: Arc<Vec<Served>> = Arc::new(
        (0..3)
            .map(|_| Served::start_on_database(&ws.spec, &db.url, &[], &[]))
            .collect(),
    );
    let api = Api::new();

    let mut paused = Vec::new();
    for n in 0..KEYS {
        let node = &nodes[n % 3];
        let (status, run) = api
            .post(&node.url("/runs?wait=true"), json!({"input": {"n": n}}))
            .await;
        assert_eq!(status, 200, "{run}");
        paused.push((
            run["pending_approval"]["key"].as_str().unwrap().to_string(),
            run["id"].as_str().unwrap().to_string(),
        ));
    }

    for batch in paused.chunks(KEYS_AT_ONCE) {
        let mut racers = Vec::new();
        for (key, _) in batch {
            for n in 0..RACERS_PER_KEY {
                let url = nodes[n % 3].url(&format!("/approvals/{key}/approve"));
                let (api, key) = (api.clone(), key.clone());
                racers.push(tokio::spawn(async move {
                    let (status, body) = api.post(&url, json!({})).await;
                    (key, status, body)
                }));
            }
        }
        let mut by_key: BTreeMap<String, Vec<(u16, Value)>> = BTreeMap::new();
        for racer in racers {
            let (key, status, body) = racer.await.expect("racer");
            by_key.entry(key).or_default().push((status, body));
        }
        for (key, answers) in by_key {
            // One caller decides every request the same way: one decision,
            // the rest answered as its repeats (DESIGN §5).
            let winners = answers
                .iter()
                .filter(|(s, b)| *s == 200 && b.get("repeated").is_none())
                .count();
            assert_eq!(winners, 1, "key {key}: exactly one decision");
            for (status, body) in answers.iter().filter(|(_, b)| b.get("repeated").is_some()) {
                assert_eq!(*status, 200, "{body}");
                assert_eq!(body["repeated"], true, "{body}");
            }
            assert!(
                answers.iter().all(|(s, _)| *s == 200),
                "key {key}: {answers:?}"
            );
        }
    }

    for (_, run_id) in &paused {
        api.wait_for_status(&nodes[0], run_id, "completed").await;
    }
    let calls = calls_per_run(&stub);
    assert_eq!(calls.len(), KEYS, "every run shipped");
    assert!(
        calls.values().all(|&n| n == 1),
        "each exactly once: {calls:?}"
    );
}
