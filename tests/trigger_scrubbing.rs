//! Credential-like trigger headers never reach the store: not the approval
//! record, not the run, not its events, not the WAL.

mod common;

use std::sync::Arc;

use common::*;
use serde_json::json;
use tollgate_runtime::{AgentRun, Decision, RunStatus, Spec};

const SECRETS: [&str; 5] = [
    "Bearer sk-live-authorization-5f1e",
    "session=cookie-value-77aa",
    "api-key-value-9c0d",
    "v0=slack-signature-3b2a",
    "x-token-value-1d4c",
];

#[tokio::test(flavor = "multi_thread")]
async fn credential_headers_leave_no_bytes_in_the_sqlite_file() {
    let ws = Workspace::new(GATED_SPEC);
    let spec = Arc::new(Spec::load(&ws.spec).unwrap());
    let store = open_store(&ws.state_db());
    let agent = AgentRun::new(spec, store.clone());
    let trigger = json!({
        "kind": "webhook",
        "path": "/hooks/ship",
        "headers": {
            "Authorization": SECRETS[0],
            "Cookie": SECRETS[1],
            "X-Api-Key": SECRETS[2],
            "X-Slack-Signature": SECRETS[3],
            "X-Upstream-Token": SECRETS[4],
            "Content-Type": "application/json",
            "X-Request-Id": "req-visible-1",
        }
    });
    let paused = agent
        .start(json!({"order_id": "P-1"}), trigger)
        .await
        .unwrap();
    let record = paused.pending.expect("paused");
    assert_eq!(
        record.trigger["headers"],
        json!({"Content-Type": "application/json", "X-Request-Id": "req-visible-1"})
    );
    let done = agent
        .resume_by_key(&record.key, Decision::Approve { reason: None }, "alice")
        .await
        .unwrap();
    assert_eq!(done.status, RunStatus::Completed);
    drop(agent);
    drop(store);

    let bytes = sqlite_bytes(&ws.state_db());
    assert!(
        contains_bytes(&bytes, "req-visible-1"),
        "the check can see header values"
    );
    for secret in SECRETS {
        assert!(
            !contains_bytes(&bytes, secret),
            "{secret:?} reached the store"
        );
    }
}
