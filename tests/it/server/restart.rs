//! Pauses survive a SIGKILL of the server: 50 runs paused through the
//! webhook, the server killed, a new one started on the same state lists
//! all 50, and approving each over HTTP completes it exactly once under its
//! original run id, with its whole trace on its event stream.

use crate::common;
use crate::common::server;
use crate::common::stub_server;

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use common::Workspace;
use serde_json::{Value, json};
use server::{Api, Served, SseStream};
use stub_server::{Response, StubServer};

const RUNS: usize = 50;

fn spec(stub_url: &str) -> String {
    format!(
        r#"version: 1
agent: ship-desk
trigger:
  webhook:
    path: /hooks/order
tools:
  ship:
    http:
      method: POST
      url: "{stub_url}"
      json: {{ order: "{{{{ args.order }}}}", run: "{{{{ run.id }}}}" }}
    approval: required
    message: "Ship {{{{ args.order }}}}?"
steps:
  - id: ship
    tool: ship
    with: {{ order: "{{{{ input.order_id }}}}" }}
  - id: done
    set: {{ status: "{{{{ steps.ship.output.status }}}}" }}
"#
    )
}

/// Every pending record, following next_cursor in pages of `limit`.
async fn all_pending(api: &Api, served: &Served, limit: usize) -> Vec<Value> {
    let mut records = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let mut url = served.url(&format!("/approvals?limit={limit}"));
        if let Some(c) = &cursor {
            url.push_str(&format!("&cursor={}", urlencode(c)));
        }
        let (status, page) = api.get(&url).await;
        assert_eq!(status, 200, "{page}");
        let approvals = page["approvals"].as_array().expect("approvals").clone();
        assert!(approvals.len() <= limit);
        records.extend(approvals);
        match page["next_cursor"].as_str() {
            Some(next) => cursor = Some(next.to_string()),
            None => return records,
        }
    }
}

fn urlencode(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn fifty_pauses_survive_sigkill_and_each_completes_once() {
    let stub = StubServer::start(|_| Response::json(200, json!({"shipped": true})));
    let ws = Workspace::new(&spec(&stub.url("/ship")));
    let state = ws.path().join("state.db");
    let api = Api::new();

    // 1. Fifty runs through the webhook; each pauses at the tool's gate.
    let mut first = Served::start(&ws.spec, &state, &[], &[]);
    let mut run_ids = BTreeSet::new();
    for i in 0..RUNS {
        let (status, body) = api
            .post(
                &first.url("/hooks/order"),
                json!({ "order_id": format!("O{i}") }),
            )
            .await;
        assert_eq!(status, 202, "{body}");
        run_ids.insert(body["run_id"].as_str().expect("run_id").to_string());
    }
    assert_eq!(run_ids.len(), RUNS);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while all_pending(&api, &first, 500).await.len() < RUNS {
        assert!(
            tokio::time::Instant::now() < deadline,
            "runs did not all pause"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(stub.count(), 0, "nothing ran past the gate");

    // 2. SIGKILL: no shutdown, nothing flushed.
    first.kill();

    // 3. A new server on the same state lists all fifty, page by page.
    let second = Served::start(&ws.spec, &state, &[], &[]);
    let pending = all_pending(&api, &second, 7).await;
    assert_eq!(pending.len(), RUNS);
    let keys: BTreeMap<String, String> = pending
        .iter()
        .map(|r| {
            (
                r["key"].as_str().unwrap().to_string(),
                r["run_id"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert_eq!(keys.len(), RUNS, "no record listed twice");
    assert_eq!(
        keys.values().cloned().collect::<BTreeSet<_>>(),
        run_ids,
        "the same runs, by id"
    );
    let created: Vec<&str> = pending
        .iter()
        .map(|r| r["created_at"].as_str().unwrap())
        .collect();
    assert!(created.windows(2).all(|w| w[0] >= w[1]), "newest first");

    // 4. Approve each over HTTP, all at once.
    let approvals = keys.keys().map(|key| {
        let api = api.clone();
        let url = second.url(&format!("/approvals/{key}/approve"));
        async move { api.post(&url, json!({ "reason": "ship it" })).await }
    });
    for (status, body) in common::join_all(approvals).await {
        assert_eq!(status, 200, "{body}");
        assert_eq!(body["approval"]["status"], "APPROVED");
        assert_eq!(body["approval"]["decided_by"], "local");
    }

    // 5. Each run completes under its own id.
    for run_id in &run_ids {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
        loop {
            let (status, run) = api.get(&second.url(&format!("/runs/{run_id}"))).await;
            assert_eq!(status, 200, "{run}");
            assert_eq!(run["id"], json!(run_id));
            if run["status"] == "completed" {
                assert_eq!(run["pending_approval"], Value::Null);
                assert_eq!(run["outputs"]["done"]["status"], 200);
                break;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "run {run_id} did not complete: {run}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    // 6. The side effect happened exactly once per run.
    let mut calls: BTreeMap<String, usize> = BTreeMap::new();
    for request in stub.requests_to("/ship") {
        let run = request.json()["run"].as_str().unwrap_or("").to_string();
        assert!(
            request.header("idempotency-key").is_some(),
            "an approved call carries an Idempotency-Key"
        );
        *calls.entry(run).or_default() += 1;
    }
    assert_eq!(calls.len(), RUNS, "{calls:?}");
    assert!(calls.values().all(|&n| n == 1), "{calls:?}");
    assert_eq!(
        calls.keys().cloned().collect::<BTreeSet<_>>(),
        run_ids,
        "the calls belong to the original runs"
    );

    // 7. Each run's stream shows the whole trace, then closes.
    for run_id in &run_ids {
        let mut stream =
            SseStream::open(&api, &second.url(&format!("/runs/{run_id}/events")), None).await;
        let events = stream.collect_until_end(Duration::from_secs(10)).await;
        let kinds: Vec<&str> = events.iter().map(|e| e.kind()).collect();
        assert_eq!(kinds.first(), Some(&"run_started"), "{kinds:?}");
        assert_eq!(kinds.last(), Some(&"run_completed"), "{kinds:?}");
        for expected in ["awaiting_approval", "approval_resolved", "step_completed"] {
            assert!(kinds.contains(&expected), "{expected} missing: {kinds:?}");
        }
        let at = |k: &str| kinds.iter().position(|x| *x == k).unwrap();
        assert!(at("awaiting_approval") < at("approval_resolved"));
        for (i, event) in events.iter().enumerate() {
            let seq = (i + 1) as u64;
            assert_eq!(event.data["seq"], json!(seq), "gap-free seqs");
            assert_eq!(event.id.as_deref(), Some(seq.to_string().as_str()));
            assert_eq!(event.event.as_deref(), Some(event.kind()));
            assert_eq!(event.data["run_id"], json!(run_id));
        }
    }
}
