//! The gate API under SIGKILL (DESIGN §9, one code path): a request is one
//! write (its run and its PENDING record together) and so is a decision
//! (the claim, the run's end and both events). A process killed at any
//! moment leaves whole requests and whole decisions only: no run without
//! its record, no decided request whose run still looks in progress, and
//! nothing for recovery to pick up.

use crate::common;

use std::collections::HashSet;
use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;

use common::chaos::seed_from_env;
use common::rng::Rng;
use tollgate_runtime::gate::GATE_AGENT_PREFIX;
use tollgate_runtime::store::RunQuery;
use tollgate_runtime::{ApprovalStatus, Lease, RunStatus};

/// examples/gate_requests.rs, built by `cargo test --workspace` next to
/// this test binary (target/debug/deps/it-HASH).
fn gate_requests_program() -> PathBuf {
    let exe = std::env::current_exe().expect("test binary path");
    let path = exe
        .parent()
        .and_then(|deps| deps.parent())
        .map(|debug| debug.join("examples").join("gate_requests"))
        .expect("a target directory");
    assert!(
        path.is_file(),
        "{} is missing: `cargo test --workspace` builds it, or run `cargo build --example gate_requests` first",
        path.display()
    );
    path
}

#[tokio::test(flavor = "multi_thread")]
async fn a_process_killed_mid_request_or_mid_decision_leaves_only_whole_ones() {
    let seed = seed_from_env("TOLLGATE_CHAOS_SEED");
    println!("gate crash seed {seed} (replay with TOLLGATE_CHAOS_SEED={seed})");
    let mut rng = Rng::new(seed);
    let program = gate_requests_program();
    let dir = tempfile::tempdir().expect("temp dir");
    let db = dir.path().join("state.db");
    let (mut requested, mut approved) = (HashSet::new(), HashSet::new());
    for _ in 0..10 {
        let mut child = Command::new(&program)
            .arg(&db)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start gate_requests");
        let out = child.stdout.take().expect("stdout");
        let (first_tx, first_rx) = std::sync::mpsc::channel();
        let reader = std::thread::spawn(move || {
            let mut lines = Vec::new();
            for line in BufReader::new(out).lines().map_while(Result::ok) {
                if lines.is_empty() {
                    let _ = first_tx.send(());
                }
                lines.push(line);
            }
            lines
        });
        first_rx
            .recv_timeout(Duration::from_secs(60))
            .expect("the program stored its first request");
        // Somewhere in the middle of a request or a decision.
        std::thread::sleep(Duration::from_millis(20 + rng.below(300u64)));
        child.kill().expect("SIGKILL");
        let _ = child.wait();
        for line in reader.join().expect("reader") {
            match line.split_once(' ') {
                Some(("requested", key)) => requested.insert(key.to_string()),
                Some(("approved", key)) => approved.insert(key.to_string()),
                _ => panic!("unexpected output {line:?}"),
            };
        }
    }
    assert!(!approved.is_empty(), "the program got as far as deciding");

    println!(
        "{} requests and {} decisions printed before the kills",
        requested.len(),
        approved.len()
    );
    let store = common::open_store(&db);
    let agent = format!("{GATE_AGENT_PREFIX}payouts");
    let mut runs = Vec::new();
    let mut cursor = None;
    loop {
        let page = store
            .list_runs(&RunQuery {
                agent_id: Some(agent.clone()),
                status: None,
                limit: 500,
                cursor: cursor.take(),
                text: None,
            })
            .await
            .expect("list runs");
        runs.extend(page.runs);
        match page.next_cursor {
            Some(next) => cursor = Some(next),
            None => break,
        }
    }
    assert!(
        runs.len() >= requested.len(),
        "every printed request is stored"
    );
    for run in &runs {
        // A gate request's run id is its key.
        let record = store
            .get_approval(&run.id)
            .await
            .expect("read approval")
            .unwrap_or_else(|| panic!("run {} has no approval record", run.id));
        match (run.status, record.status) {
            (RunStatus::AwaitingApproval, ApprovalStatus::Pending)
            | (RunStatus::Completed, ApprovalStatus::Approved) => {}
            (run_status, status) => panic!(
                "request {} is half written: run {run_status}, approval {status}",
                run.id
            ),
        }
        assert_eq!(run.owner, None, "nobody drives a gate run");
        let events = store.run_events(&run.id, 0).await.expect("events");
        let seqs: Vec<u64> = events.iter().map(|e| e.seq).collect();
        let expected: Vec<u64> = (1..=seqs.len() as u64).collect();
        assert_eq!(
            seqs, expected,
            "events of {} are numbered without gaps",
            run.id
        );
    }
    for key in &requested {
        let record = store
            .get_approval(key)
            .await
            .expect("read")
            .expect("stored");
        if approved.contains(key) {
            assert_eq!(record.status, ApprovalStatus::Approved, "{key}");
        }
    }
    let lease = Lease {
        owner: "checker".into(),
        until: tollgate_runtime::time::now() + chrono::TimeDelta::hours(1),
    };
    let orphans = store
        .claim_orphans(&agent, &lease, tollgate_runtime::time::now(), 1000)
        .await
        .expect("claim orphans");
    assert!(
        orphans.is_empty(),
        "no gate run is left running: {orphans:?}"
    );
}
