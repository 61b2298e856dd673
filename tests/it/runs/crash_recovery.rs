//! Nothing pending is lost: a `tollgate run --persist` process killed with
//! SIGKILL right after it printed its key leaves an intact pause that a
//! later process approves to completion.

use crate::common;

use std::io::{BufRead, BufReader};
use std::process::Stdio;

use common::*;
use tollgate_runtime::{ApprovalStatus, RunStatus};

#[tokio::test(flavor = "multi_thread")]
async fn sigkill_after_the_key_is_printed_keeps_the_pause() {
    let ws = Workspace::new(GATED_SPEC);
    let mut child = ws
        .tollgate()
        .args(["run", ws.spec_arg(), "--persist", "--json"])
        .args(["--input", r#"{"order_id": "K-1"}"#])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn run");
    let child_out = child.stdout.take().expect("stdout");
    let mut key = None;
    for line in BufReader::new(child_out).lines() {
        let line = line.expect("read line");
        if let Some(k) = awaiting_key(&line) {
            key = Some(k);
            // SIGKILL: no destructor, no graceful close of the database.
            child.kill().expect("kill");
            break;
        }
    }
    let _ = child.wait();
    let key = key.expect("the run printed its key before it was killed");

    let store = open_store(&ws.state_db());
    let record = store
        .get_approval(&key)
        .await
        .unwrap()
        .expect("pause intact");
    assert_eq!(record.status, ApprovalStatus::Pending);
    assert_eq!(record.step_id, "gate");
    assert_eq!(record.payload, serde_json::json!({"order": "K-1"}));
    drop(store);

    let listed = ws
        .tollgate()
        .args(["approvals", "list", "--spec", ws.spec_arg(), "--json"])
        .output()
        .unwrap();
    assert_success(&listed);
    assert!(stdout(&listed).contains(&key), "listed after the crash");

    let approved = ws
        .decide("approve", &key)
        .args(["--by", "alice"])
        .output()
        .unwrap();
    assert_success(&approved);

    let store = open_store(&ws.state_db());
    let run = store.get_run(&record.run_id).await.unwrap().unwrap();
    assert_eq!(run.status, RunStatus::Completed);
    assert_eq!(
        run.outputs["act"],
        serde_json::json!({"shipped": "K-1", "by": "alice"})
    );
}
