//! The webhook trigger: the JSON body is the input, the trigger context
//! keeps non-credential headers, the query and the time, and a run that
//! pauses is decidable like any other.

mod common;
#[path = "common/server.rs"]
mod server;

use common::{GATED_SPEC, Workspace};
use serde_json::json;
use server::{Api, Served};

#[tokio::test(flavor = "multi_thread")]
async fn a_webhook_starts_a_run_with_a_scrubbed_trigger() {
    let ws = Workspace::new(&GATED_SPEC.replace(
        "steps:",
        "trigger:\n  webhook:\n    path: /hooks/ship\nsteps:",
    ));
    let served = Served::start(&ws.spec, &ws.path().join("state.db"), &[], &[]);
    let api = Api::new();
    let (status, body) = api
        .post_raw(
            &served.url("/hooks/ship?source=shop&batch=7"),
            br#"{"order_id": "W1"}"#.to_vec(),
            &[
                ("Content-Type", "application/json"),
                ("Authorization", "Bearer leaked"),
                ("X-Api-Key", "leaked"),
                ("Cookie", "leaked"),
                ("X-Request-Id", "req-1"),
            ],
        )
        .await;
    assert_eq!(status, 202, "{body}");
    let run_id = body["run_id"].as_str().unwrap();
    let (_, run) = loop {
        let (s, run) = api.get(&served.url(&format!("/runs/{run_id}"))).await;
        if run["status"] == "awaiting_approval" {
            break (s, run);
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    };
    let record = &run["pending_approval"];
    assert_eq!(record["input"], json!({"order_id": "W1"}));
    let trigger = &record["trigger"];
    assert_eq!(trigger["kind"], "webhook");
    assert_eq!(trigger["path"], "/hooks/ship");
    assert_eq!(trigger["query"], json!({"source": "shop", "batch": "7"}));
    assert_eq!(trigger["headers"]["x-request-id"], "req-1");
    assert!(trigger["received_at"].is_string());
    let headers = trigger["headers"].as_object().unwrap();
    for name in ["authorization", "x-api-key", "cookie"] {
        assert!(
            !headers.contains_key(name),
            "{name} must be scrubbed: {trigger}"
        );
    }
    assert!(!trigger.to_string().contains("leaked"));

    // An empty body is `{}`.
    let (status, body) = api
        .post_raw(&served.url("/hooks/ship"), Vec::new(), &[])
        .await;
    assert_eq!(status, 202, "{body}");

    // Decide it by run id through /runs/{id}/approve.
    let (status, decided) = api
        .post(
            &served.url(&format!("/runs/{run_id}/approve?wait=true")),
            json!({"approved": true, "payload": {"order": "W1-edited"}}),
        )
        .await;
    assert_eq!(status, 200, "{decided}");
    assert_eq!(decided["approval"]["status"], "MODIFIED");
    assert_eq!(decided["status"], "completed");
    assert_eq!(decided["run"]["outputs"]["act"]["shipped"], "W1-edited");
}
