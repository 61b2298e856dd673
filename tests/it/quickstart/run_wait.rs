//! `POST /runs?wait=true` (DESIGN §5) over HTTP: the answer holds the run
//! id, and at a pause the pending approval's key, as the Quick start
//! takes them; at a run's end it holds the final run and no approval.

use crate::common::server::{Api, Served};
use crate::common::{GATED_SPEC, Workspace};

use serde_json::json;

fn serve(spec: &str) -> (Workspace, Served) {
    let ws = Workspace::new(spec);
    let served = Served::start(&ws.spec, &ws.state_db(), &[], &[]);
    (ws, served)
}

#[tokio::test(flavor = "multi_thread")]
async fn a_waited_start_answers_with_the_run_id_and_the_pending_key() {
    let (_ws, served) = serve(GATED_SPEC);
    let api = Api::new();
    let (status, run) = api
        .post(
            &served.url("/runs?wait=true"),
            json!({"input": {"order_id": "W-1"}}),
        )
        .await;
    assert_eq!(status, 200, "{run}");
    assert_eq!(run["status"], "awaiting_approval", "{run}");
    let run_id = run["id"].as_str().expect("the run id");
    let key = run["pending_approval"]["key"]
        .as_str()
        .expect("the pending approval's key");
    assert_eq!(run["pending_approval"]["run_id"], run_id, "{run}");

    // The key is the one the inbox lists, and it decides that run.
    let (status, listed) = api.get(&served.url("/approvals")).await;
    assert_eq!(status, 200, "{listed}");
    assert_eq!(listed["approvals"][0]["key"], key, "{listed}");
    let (status, decided) = api
        .post(
            &served.url(&format!("/approvals/{key}/approve?wait=true")),
            json!({"reason": "fine"}),
        )
        .await;
    assert_eq!(status, 200, "{decided}");
    let (status, done) = api.get(&served.url(&format!("/runs/{run_id}"))).await;
    assert_eq!(status, 200, "{done}");
    assert_eq!(done["status"], "completed", "{done}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_waited_start_of_a_run_without_a_gate_answers_at_its_end() {
    let spec = "version: 1\nagent: no-gate\nsteps:\n  - id: only\n    set: { done: true }\n";
    let (_ws, served) = serve(spec);
    let api = Api::new();
    let (status, run) = api
        .post(&served.url("/runs?wait=true"), json!({"input": {}}))
        .await;
    assert_eq!(status, 200, "{run}");
    assert!(run["id"].is_string(), "{run}");
    assert_eq!(run["status"], "completed", "{run}");
    assert_eq!(run["pending_approval"], serde_json::Value::Null, "{run}");

    // Without the wait: 202 and the run id at once.
    let (status, started) = api.post(&served.url("/runs"), json!({})).await;
    assert_eq!(status, 202, "{started}");
    assert!(started["run_id"].is_string(), "{started}");
}
