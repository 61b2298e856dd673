//! Exactly one decision wins, and its side effect happens exactly once: 200
//! paused runs in one SQLite file, 8 `tollgate approvals` processes racing
//! for each key. The gated step is a POST to a loopback stub, and the stub,
//! not the run's own event log, is the witness: an approved run's call
//! arrives there exactly once, a rejected run's never.

use crate::common;
use crate::common::stub_server;

use std::collections::BTreeMap;
use std::process::{Child, Output, Stdio};

use common::*;
use stub_server::{Request, Response, StubServer};
use tollgate_runtime::{ApprovalStatus, RunStatus};

const RUNS: usize = 200;
const RACERS_PER_KEY: usize = 8;
/// Keys raced at the same time (each with all its racers).
const KEYS_AT_ONCE: usize = 4;

/// `ship` is a POST without `retry`, so the runtime never sends it twice on
/// its own: every arrival at the stub is one side effect, even with the same
/// Idempotency-Key.
const SPEC: &str = r#"version: 1
agent: shipping-desk
description: Ship an order once a person says so.
tools:
  ship:
    http:
      method: POST
      url: "STUB_URL"
      json: { order: "{{ args.order }}", run: "{{ run.id }}" }
    approval: required
    message: "Ship order {{ args.order }}?"
steps:
  - id: ship
    tool: ship
    with: { order: "{{ input.order_id }}" }
"#;

/// How the racers for run `i` decide: most keys see eight approvers, some
/// eight rejecters (so a rejected run is always checked), and some an even
/// mix, where either verb may win and the stub must follow the winner.
fn verb(run: usize, racer: usize) -> &'static str {
    match run % 4 {
        1 => "reject",
        2 if racer % 2 == 1 => "reject",
        _ => "approve",
    }
}

/// One decider process: which key it raced for, how and as whom.
struct Racer {
    key: String,
    verb: &'static str,
    by: String,
}

#[tokio::test(flavor = "multi_thread")]
async fn eight_processes_per_key_exactly_one_wins_and_ships_once() {
    let stub = StubServer::start(|_| Response::json(200, serde_json::json!({"shipped": true})));
    let ws = Workspace::new(&SPEC.replace("STUB_URL", &stub.url("/ship")));
    let keys: Vec<String> = (0..RUNS)
        .map(|i| ws.pause_run(&format!(r#"{{"order_id": "A{i}"}}"#)))
        .collect();
    assert_eq!(stub.count(), 0, "nothing is shipped before a decision");

    // The winner of each key: (verb, decider).
    let mut winners: BTreeMap<String, (&'static str, String)> = BTreeMap::new();
    let indexed: Vec<(usize, &String)> = keys.iter().enumerate().collect();
    for batch in indexed.chunks(KEYS_AT_ONCE) {
        let racers: Vec<(Racer, Child)> = batch
            .iter()
            .flat_map(|&(i, key)| (0..RACERS_PER_KEY).map(move |n| (i, key, n)))
            .map(|(i, key, n)| {
                let verb = verb(i, n);
                let by = format!("racer-{n}-{verb}");
                let child = ws
                    .decide(verb, key)
                    .args(["--by", &by])
                    .stdout(Stdio::piped())
                    .stderr(Stdio::piped())
                    .spawn()
                    .expect("spawn decider");
                let racer = Racer {
                    key: key.clone(),
                    verb,
                    by,
                };
                (racer, child)
            })
            .collect();
        let results: Vec<(Racer, Output)> = racers
            .into_iter()
            .map(|(r, child)| (r, child.wait_with_output().expect("wait")))
            .collect();
        for &(_, key) in batch {
            let mine: Vec<&(Racer, Output)> =
                results.iter().filter(|(r, _)| &r.key == key).collect();
            // approve wins with 0, reject wins with 5 (the run is rejected).
            let won: Vec<&(Racer, Output)> = mine
                .iter()
                .copied()
                .filter(|(r, o)| o.status.code() == Some(if r.verb == "approve" { 0 } else { 5 }))
                .collect();
            assert_eq!(won.len(), 1, "key {key}: exactly one decision must win");
            for (_, out) in mine.iter().filter(|(r, _)| r.by != won[0].0.by) {
                assert_exit(out, 4);
                assert!(
                    stderr(out).contains("already_resolved"),
                    "loser must say already_resolved: {}",
                    stderr(out)
                );
            }
            winners.insert(key.clone(), (won[0].0.verb, won[0].0.by.clone()));
        }
    }

    // What the stub saw, by run and by Idempotency-Key.
    let calls = stub.requests();
    let mut calls_by_run: BTreeMap<String, Vec<&Request>> = BTreeMap::new();
    let mut calls_by_idem: BTreeMap<String, usize> = BTreeMap::new();
    for call in &calls {
        assert_eq!(
            (call.method.as_str(), call.path()),
            ("POST", "/ship"),
            "only the gated call reaches the stub"
        );
        let idem = call
            .header("idempotency-key")
            .unwrap_or_else(|| panic!("an approved call carries an Idempotency-Key: {call:?}"));
        *calls_by_idem.entry(idem.to_string()).or_default() += 1;
        let run = call.json()["run"].as_str().unwrap_or_default().to_string();
        calls_by_run.entry(run).or_default().push(call);
    }
    for (idem, n) in &calls_by_idem {
        assert_eq!(*n, 1, "Idempotency-Key {idem} reached the stub {n} times");
    }

    let store = open_store(&ws.state_db());
    let mut approved = 0;
    let mut rejected = 0;
    for (i, key) in keys.iter().enumerate() {
        let record = store.get_approval(key).await.unwrap().expect("record kept");
        let run = store.get_run(&record.run_id).await.unwrap().expect("run");
        let (verb, by) = &winners[key];
        assert_eq!(
            record.decided_by.as_deref(),
            Some(by.as_str()),
            "the stored decision is the winner's"
        );
        let shipped = calls_by_run.remove(&run.id).unwrap_or_default();
        if *verb == "approve" {
            approved += 1;
            assert_eq!(record.status, ApprovalStatus::Approved, "run {}", run.id);
            assert_eq!(run.status, RunStatus::Completed, "run {}", run.id);
            assert_eq!(shipped.len(), 1, "approved run {} shipped once", run.id);
            let call = shipped[0];
            assert_eq!(call.json()["order"], serde_json::json!(format!("A{i}")));
            assert_ne!(
                call.header("idempotency-key"),
                Some(key.as_str()),
                "the Idempotency-Key is derived, never the approval key itself"
            );
        } else {
            rejected += 1;
            assert_eq!(record.status, ApprovalStatus::Rejected, "run {}", run.id);
            assert_eq!(run.status, RunStatus::Rejected, "run {}", run.id);
            assert!(shipped.is_empty(), "rejected run {} shipped", run.id);
        }
        let events = store.run_events(&run.id, 0).await.unwrap();
        let seqs: Vec<u64> = events.iter().map(|e| e.seq).collect();
        let expected: Vec<u64> = (1..=events.len() as u64).collect();
        assert_eq!(seqs, expected, "gap-free event sequence for run {}", run.id);
    }
    assert!(
        calls_by_run.is_empty(),
        "calls for runs that were never paused: {:?}",
        calls_by_run.keys().collect::<Vec<_>>()
    );
    assert_eq!(calls.len(), approved, "one call per approved run, no more");
    assert!(
        approved > 0 && rejected > 0,
        "{approved} approved, {rejected} rejected"
    );
}
