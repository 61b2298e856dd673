//! Credential-like trigger headers and query parameters never reach the
//! store: not the approval record, not the run, not its events, not the WAL.

use crate::common;

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

    assert_scrubbed(&ws, "req-visible-1", &SECRETS);
}

/// The state file (db and -wal) holds `visible`, so the check can see
/// values, and none of `secrets`.
fn assert_scrubbed(ws: &Workspace, visible: &str, secrets: &[&str]) {
    let bytes = sqlite_bytes(&ws.state_db());
    assert!(
        contains_bytes(&bytes, visible),
        "the check cannot see {visible:?}"
    );
    for secret in secrets {
        assert!(
            !contains_bytes(&bytes, secret),
            "{secret:?} reached the store"
        );
    }
}

/// Query parameters are scrubbed by the same rule as headers, widened to
/// names such as pass, bearer, private, jwt and sig: a webhook sender that
/// puts its credential in the URL (`?token=...`) does not get it stored.
#[tokio::test(flavor = "multi_thread")]
async fn credential_query_parameters_leave_no_bytes_in_the_sqlite_file() {
    const QUERY_SECRETS: [&str; 8] = [
        "qs-token-value-01",
        "qs-api-key-value-02",
        "qs-pass-value-03",
        "qs-bearer-value-04",
        "qs-private-value-05",
        "qs-jwt-value-06",
        "qs-sig-value-07",
        "qs-bearer-header-08",
    ];
    let ws = Workspace::new(GATED_SPEC);
    let spec = Arc::new(Spec::load(&ws.spec).unwrap());
    let store = open_store(&ws.state_db());
    let agent = AgentRun::new(spec, store.clone());
    let trigger = json!({
        "kind": "webhook",
        "path": "/hooks/ship",
        "headers": { "X-Bearer": QUERY_SECRETS[7], "X-Request-Id": "req-visible-2" },
        "query": {
            "access_token": QUERY_SECRETS[0],
            "apiKey": QUERY_SECRETS[1],
            "passphrase": QUERY_SECRETS[2],
            "bearer": QUERY_SECRETS[3],
            "private": QUERY_SECRETS[4],
            "jwt": QUERY_SECRETS[5],
            "sig": QUERY_SECRETS[6],
            "source": "shop-visible-3",
        }
    });
    let paused = agent
        .start(json!({"order_id": "P-2"}), trigger)
        .await
        .unwrap();
    let record = paused.pending.expect("paused");
    assert_eq!(record.trigger["query"], json!({"source": "shop-visible-3"}));
    assert_eq!(
        record.trigger["headers"],
        json!({"X-Request-Id": "req-visible-2"})
    );
    drop(agent);
    drop(store);

    assert_scrubbed(&ws, "shop-visible-3", &QUERY_SECRETS);
}
