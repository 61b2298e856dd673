//! The notification contract every store keeps (schema versions 2 and 16):
//! where an approval's Slack message is, and whether it shows the outcome.
//! Each case takes a fresh store; `slack/store.rs` runs them against
//! memory, SQLite and PostgreSQL.
//! Include after `store_cases.rs` (it uses its helpers).
#![allow(dead_code)]

use tollgate_runtime::store::{Notification, NotificationWrite, SharedNotifications, SharedStore};
use tollgate_runtime::{ApprovalError, StoreError};

use crate::common::store_cases::{at, paused_run};

/// The store's notification side: every store under test keeps one.
fn notes(store: &SharedStore) -> SharedNotifications {
    std::sync::Arc::clone(store)
        .notifications()
        .expect("the store keeps notifications")
}

/// The stored notification of `key`, which must exist.
async fn stored(store: &SharedStore, key: &str) -> Notification {
    notes(store)
        .get_notification(key)
        .await
        .expect("get")
        .expect("row")
}

/// Whether no message of `key` is stored.
async fn absent(store: &SharedStore, key: &str) -> bool {
    notes(store)
        .get_notification(key)
        .await
        .expect("get")
        .is_none()
}

fn posted(ts: &str, second: u64) -> NotificationWrite {
    NotificationWrite::Posted {
        channel: "C1".into(),
        ts: ts.into(),
        at: at(second),
    }
}

pub async fn a_posted_message_is_kept_then_shows_its_outcome(store: SharedStore) {
    paused_run(store.as_ref(), "k1", "agent", 0).await;
    assert!(absent(&store, "k1").await, "no row before the post");
    notes(&store)
        .record_notification("k1", &posted("1700000000.000100", 101))
        .await
        .expect("posted");
    assert_eq!(
        stored(&store, "k1").await,
        Notification {
            key: "k1".into(),
            channel: Some("C1".into()),
            ts: Some("1700000000.000100".into()),
            posted_at: Some(at(101)),
            decision_posted_at: None,
        }
    );

    notes(&store)
        .record_notification("k1", &NotificationWrite::DecisionPosted { at: at(201) })
        .await
        .expect("decision posted");
    let row = stored(&store, "k1").await;
    assert_eq!(row.decision_posted_at, Some(at(201)));
    assert_eq!(
        row.ts.as_deref(),
        Some("1700000000.000100"),
        "where it is stays"
    );
    assert!(absent(&store, "other").await);
}

pub async fn a_post_of_an_unknown_approval_is_not_found(store: SharedStore) {
    match notes(&store)
        .record_notification("nope", &posted("1700000000.000001", 1))
        .await
    {
        Err(StoreError::Approval(ApprovalError::NotFound { key })) => assert_eq!(key, "nope"),
        other => panic!("expected approval_not_found, got {other:?}"),
    }
    assert!(absent(&store, "nope").await);
}

pub async fn an_outcome_needs_a_posted_message(store: SharedStore) {
    paused_run(store.as_ref(), "k1", "agent", 0).await;
    let refused = notes(&store)
        .record_notification("k1", &NotificationWrite::DecisionPosted { at: at(5) })
        .await;
    assert!(
        matches!(refused, Err(StoreError::Database(ref m)) if m.contains("k1")),
        "{refused:?}"
    );
    assert!(absent(&store, "k1").await, "nothing written");
}
