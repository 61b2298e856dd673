//! A spec edited after the pause: approve refuses with `spec_changed` and
//! both short hashes, the record stays PENDING, restoring the spec makes it
//! approvable, and a reject is accepted under any spec.

use crate::common;

use common::*;
use tollgate_runtime::{ApprovalStatus, RunStatus, Spec};

fn short_hash(text: &str) -> String {
    Spec::parse(text, "spec").unwrap().hash.short().to_string()
}

fn changed_spec() -> String {
    GATED_SPEC.replace("Ship order", "Really ship order")
}

#[tokio::test(flavor = "multi_thread")]
async fn approve_under_a_changed_spec_is_refused_until_it_is_restored() {
    let ws = Workspace::new(GATED_SPEC);
    let key = ws.pause_run(r#"{"order_id": "S-1"}"#);
    ws.write_spec(&changed_spec());

    let refused = ws.decide("approve", &key).output().unwrap();
    assert_exit(&refused, 4);
    let err = stderr(&refused);
    assert!(err.contains("spec_changed"), "{err}");
    assert!(
        err.contains(&short_hash(GATED_SPEC)),
        "names the paused-with hash: {err}"
    );
    assert!(
        err.contains(&short_hash(&changed_spec())),
        "names the current hash: {err}"
    );

    let store = open_store(&ws.state_db());
    let record = store.get_approval(&key).await.unwrap().unwrap();
    assert_eq!(record.status, ApprovalStatus::Pending, "record untouched");
    assert_eq!(record.decided_by, None);

    ws.write_spec(GATED_SPEC);
    let approved = ws.decide("approve", &key).output().unwrap();
    assert_success(&approved);
    let run = store.get_run(&record.run_id).await.unwrap().unwrap();
    assert_eq!(run.status, RunStatus::Completed);
}

#[tokio::test(flavor = "multi_thread")]
async fn reject_is_accepted_under_a_changed_spec() {
    let ws = Workspace::new(GATED_SPEC);
    let key = ws.pause_run(r#"{"order_id": "S-2"}"#);
    ws.write_spec(&changed_spec());

    let rejected = ws
        .decide("reject", &key)
        .args(["--reason", "not today", "--by", "bob"])
        .output()
        .unwrap();
    // A winning reject that ends the run exits 5 (rejected).
    assert_exit(&rejected, 5);

    let store = open_store(&ws.state_db());
    let record = store.get_approval(&key).await.unwrap().unwrap();
    assert_eq!(record.status, ApprovalStatus::Rejected);
    assert_eq!(record.decided_by.as_deref(), Some("bob"));
    assert_eq!(record.reason(), Some("not today"));
    let run = store.get_run(&record.run_id).await.unwrap().unwrap();
    assert_eq!(run.status, RunStatus::Rejected);
    assert!(
        !run.outputs.contains_key("act"),
        "nothing after the gate ran"
    );
}
