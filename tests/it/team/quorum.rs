//! 2 of finance and 1 of security, the deciding votes cast at once on
//! three `tollgate serve` processes sharing one store: exactly one vote
//! settles the gate, the run ends once, and a vote after it is
//! `already_resolved`. On a SQLite file and on PostgreSQL.

use serde_json::{Value, json};
use tollgate_runtime::SharedStore;

use super::{approve, as_person, paused, reject, spec, tokens};
use crate::common::postgres;
use crate::common::server::{Served, code};
use crate::common::{Workspace, open_store};

/// Rounds of the race per store: each a fresh run whose three deciding
/// votes go out at the same time.
const ROUNDS: usize = 4;

#[tokio::test(flavor = "multi_thread", worker_threads = 6)]
async fn three_servers_on_sqlite_settle_each_gate_exactly_once() {
    let ws = Workspace::new(&spec(""));
    let state = ws.path().join("state.db");
    let tokens = tokens();
    let env = [("TOLLGATE_API_TOKENS", tokens.as_str())];
    let nodes: Vec<Served> = (0..3)
        .map(|_| Served::start(&ws.spec, &state, &env, &[]))
        .collect();
    race_rounds(&nodes, &open_store(&state)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 6)]
async fn three_servers_on_postgresql_settle_each_gate_exactly_once() {
    let db = postgres::database();
    let ws = Workspace::new(&spec(""));
    let tokens = tokens();
    let env = [("TOLLGATE_API_TOKENS", tokens.as_str())];
    let nodes: Vec<Served> = (0..3)
        .map(|_| Served::start_on_database(&ws.spec, &db.url, &env, &[]))
        .collect();
    let store = tollgate_runtime::store::open(&db.url, Default::default()).expect("store");
    race_rounds(&nodes, &store).await;
}

async fn race_rounds(nodes: &[Served], store: &SharedStore) {
    for round in 0..ROUNDS {
        let (run_id, key, approval) = paused(&nodes[0], 100 + round as u64).await;
        assert_eq!(
            approval["roster"]["rules"][0]["members"],
            json!(["alice", "bob", "carol"]),
            "the roster is stored with the pause: {approval}"
        );
        assert_eq!(approval["roster"]["requesters"], json!(["bot"]));

        // alice's vote counts for finance; the gate still waits.
        let (status, first) = approve(&nodes[1], &key, "alice", json!({})).await;
        assert_eq!(status, 200, "{first}");
        assert_eq!(first["approval"]["status"], "PENDING", "{first}");
        assert_eq!(first["vote"]["rule"], "finance");
        assert_eq!(first["vote"]["progress"], "finance 1 of 2; security 0 of 1");
        assert_eq!(first["status"], "awaiting_approval");

        // bob, carol and dave at once, each on another server.
        let voters = ["bob", "carol", "dave"];
        let answers = futures_join(nodes, &key, &voters).await;
        let settled: Vec<&(String, u16, Value)> = answers
            .iter()
            .filter(|(_, status, body)| *status == 200 && body["vote"].is_null())
            .collect();
        assert_eq!(settled.len(), 1, "exactly one settlement: {answers:#?}");
        let (winner, _, body) = settled[0];
        assert_eq!(body["approval"]["status"], "APPROVED", "{body}");
        assert_eq!(body["approval"]["decided_by"], winner.as_str());
        for (voter, status, body) in &answers {
            if voter == winner {
                continue;
            }
            // Recorded before the settlement (carol's extra finance vote
            // counts toward nothing), or too late.
            let recorded = *status == 200 && !body["vote"].is_null();
            let too_late = *status == 409 && code(body) == "already_resolved";
            assert!(recorded || too_late, "{voter}: {status} {body}");
        }

        // A vote after the settlement.
        let late = ["bob", "carol", "dave"]
            .into_iter()
            .find(|v| v != winner)
            .unwrap();
        let (status, body) = approve(&nodes[2], &key, late, json!({})).await;
        assert_eq!(status, 409, "{body}");
        assert_eq!(code(&body), "already_resolved");

        let run = finished(&nodes[0], &run_id).await;
        assert_eq!(run["status"], "completed", "{run}");
        assert_eq!(run["outputs"]["done"]["paid"], json!(100 + round as u64));
        let events = store.run_events(&run_id, 0).await.expect("events");
        let named = |name: &str| events.iter().filter(|e| e.kind.name() == name).count();
        assert_eq!(
            named("approval_resolved"),
            1,
            "one settlement in the run's events"
        );
        let votes = named("approval_vote");
        let (_, ledger) = as_person("erin")
            .get(&nodes[1].url(&format!("/approvals/{key}/votes")))
            .await;
        assert_eq!(
            ledger["votes"].as_array().unwrap().len(),
            votes,
            "each vote in the ledger is an event: {ledger}"
        );
        assert_eq!(ledger["status"], "APPROVED");
        assert_eq!(ledger["progress"], "finance 2 of 2; security 1 of 1");
    }
}

async fn futures_join(nodes: &[Served], key: &str, voters: &[&str]) -> Vec<(String, u16, Value)> {
    let mut tasks = Vec::new();
    for (i, voter) in voters.iter().enumerate() {
        let url = nodes[i % nodes.len()].url(&format!("/approvals/{key}/approve"));
        let voter = voter.to_string();
        tasks.push(tokio::spawn(async move {
            let (status, body) = as_person(&voter).post(&url, json!({})).await;
            (voter, status, body)
        }));
    }
    let mut answers = Vec::new();
    for task in tasks {
        answers.push(task.await.expect("vote task"));
    }
    answers
}

/// The run once it has ended (its claim wrote `running`; the resume
/// finishes it in the background).
pub(super) async fn finished(served: &Served, run_id: &str) -> Value {
    let api = as_person("erin");
    for _ in 0..200 {
        let (status, run) = api.get(&served.url(&format!("/runs/{run_id}"))).await;
        assert_eq!(status, 200, "{run}");
        if !matches!(
            run["status"].as_str(),
            Some("running" | "awaiting_approval")
        ) {
            return run;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    panic!("run {run_id} never ended");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_requester_and_strangers_may_not_vote_and_one_reject_ends_it() {
    let ws = Workspace::new(&spec(""));
    let state = ws.path().join("state.db");
    let tokens = tokens();
    let served = Served::start(&ws.spec, &state, &[("TOLLGATE_API_TOKENS", &tokens)], &[]);
    // alice, of finance, starts the run: she may not vote on it, and bob
    // and carol can still make finance's 2.
    let (status, run) = as_person("alice")
        .post(
            &served.url("/runs?wait=true"),
            json!({ "input": { "amount": 40 } }),
        )
        .await;
    assert_eq!(status, 200, "{run}");
    let run_id = run["id"].as_str().unwrap().to_string();
    let key = run["pending_approval"]["key"].as_str().unwrap().to_string();

    let (status, body) = approve(&served, &key, "alice", json!({})).await;
    assert_eq!(status, 403, "{body}");
    assert_eq!(code(&body), "forbidden");
    let message = body["error"]["message"].as_str().unwrap();
    assert!(message.contains("separation of duties"), "{message}");
    let (status, body) = approve(&served, &key, "erin", json!({})).await;
    assert_eq!(status, 403, "{body}");
    let message = body["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("not a member of finance or security"),
        "{message}"
    );

    let (status, body) = approve(&served, &key, "bob", json!({})).await;
    assert_eq!(status, 200, "{body}");
    let (status, body) = reject(&served, &key, "bob", "changed my mind").await;
    assert_eq!(status, 409, "a vote stands: {body}");
    assert_eq!(code(&body), "already_voted");

    let (status, body) = reject(&served, &key, "carol", "too much").await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["approval"]["status"], "REJECTED", "one reject ends it");
    assert_eq!(finished(&served, &run_id).await["status"], "rejected");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn when_unreachable_waits_until_the_rejects_leave_too_few_voters() {
    let ws = Workspace::new(&spec("      reject: when_unreachable"));
    let state = ws.path().join("state.db");
    let tokens = tokens();
    let served = Served::start(&ws.spec, &state, &[("TOLLGATE_API_TOKENS", &tokens)], &[]);
    let (run_id, key, _) = paused(&served, 7).await;

    let (status, body) = reject(&served, &key, "alice", "no").await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        body["approval"]["status"], "PENDING",
        "bob and carol can still make 2"
    );
    assert_eq!(body["vote"]["decision"], "reject");
    let (status, body) = reject(&served, &key, "bob", "no either").await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["approval"]["status"], "REJECTED", "{body}");
    assert_eq!(finished(&served, &run_id).await["status"], "rejected");
}
