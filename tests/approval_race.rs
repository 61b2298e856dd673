//! Exactly one decision wins: 200 paused runs in one SQLite file, 8
//! `tollgate approvals approve` processes racing for each key.

mod common;

use std::process::{Child, Stdio};

use common::*;
use tollgate_runtime::{EventKind, RunStatus};

const RUNS: usize = 200;
const RACERS_PER_KEY: usize = 8;
/// Keys raced at the same time (each with all its racers).
const KEYS_AT_ONCE: usize = 4;

#[tokio::test(flavor = "multi_thread")]
async fn eight_processes_per_key_exactly_one_wins() {
    let ws = Workspace::new(GATED_SPEC);
    let keys: Vec<String> = (0..RUNS)
        .map(|i| ws.pause_run(&format!(r#"{{"order_id": "A{i}"}}"#)))
        .collect();

    for batch in keys.chunks(KEYS_AT_ONCE) {
        let racers: Vec<(String, Child)> = batch
            .iter()
            .flat_map(|key| (0..RACERS_PER_KEY).map(move |n| (key.clone(), n)))
            .map(|(key, n)| {
                let child = ws
                    .decide("approve", &key)
                    .args(["--by", &format!("racer-{n}")])
                    .stdout(Stdio::piped())
                    .stderr(Stdio::piped())
                    .spawn()
                    .expect("spawn approve");
                (key, child)
            })
            .collect();
        let mut results: Vec<(String, std::process::Output)> = racers
            .into_iter()
            .map(|(key, child)| (key, child.wait_with_output().expect("wait")))
            .collect();
        for key in batch {
            let mine: Vec<_> = results.iter_mut().filter(|(k, _)| k == key).collect();
            let winners = mine
                .iter()
                .filter(|(_, o)| o.status.code() == Some(0))
                .count();
            assert_eq!(winners, 1, "key {key}: exactly one approve must win");
            for (_, out) in mine.iter().filter(|(_, o)| o.status.code() != Some(0)) {
                assert_exit(out, 4);
                assert!(
                    stderr(out).contains("already_resolved"),
                    "loser must say already_resolved: {}",
                    stderr(out)
                );
            }
        }
    }

    // Every run completed exactly once: one final status, one `act` step.
    let store = open_store(&ws.state_db());
    for key in &keys {
        let record = store.get_approval(key).await.unwrap().expect("record kept");
        let run = store.get_run(&record.run_id).await.unwrap().expect("run");
        assert_eq!(run.status, RunStatus::Completed, "run {}", run.id);
        let events = store.run_events(&run.id, 0).await.unwrap();
        let acted = events
            .iter()
            .filter(|e| matches!(&e.kind, EventKind::StepCompleted { step, replayed: false, .. } if step == "act"))
            .count();
        let completed = events
            .iter()
            .filter(|e| matches!(e.kind, EventKind::RunCompleted { .. }))
            .count();
        let resolved = events
            .iter()
            .filter(|e| matches!(e.kind, EventKind::ApprovalResolved { .. }))
            .count();
        assert_eq!((acted, completed, resolved), (1, 1, 1), "run {}", run.id);
        let seqs: Vec<u64> = events.iter().map(|e| e.seq).collect();
        let expected: Vec<u64> = (1..=events.len() as u64).collect();
        assert_eq!(seqs, expected, "gap-free event sequence for run {}", run.id);
        assert_eq!(
            run.outputs["act"]["by"],
            serde_json::json!(record.decided_by.unwrap()),
            "the step after the gate saw the winner"
        );
    }
}
