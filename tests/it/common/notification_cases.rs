//! The notification contract every store keeps (schema version 2): the
//! lease on a message and what its holder records. Each case takes a fresh
//! store; `slack/store.rs` runs them against memory, SQLite and
//! PostgreSQL.
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

/// Lease `key`'s message at `now` until `until`: the notification when
/// this caller got it, `None` while another holds it.
async fn lease(
    store: &SharedStore,
    key: &str,
    now: chrono::DateTime<chrono::Utc>,
    until: chrono::DateTime<chrono::Utc>,
) -> Option<Notification> {
    notes(store)
        .lease_notification(key, now, until)
        .await
        .expect("lease")
}

/// The stored notification of `key`, which must exist.
async fn stored(store: &SharedStore, key: &str) -> Notification {
    notes(store)
        .get_notification(key)
        .await
        .expect("get")
        .expect("row")
}

pub async fn lease_is_exclusive_until_released_or_expired(store: SharedStore) {
    paused_run(store.as_ref(), "k1", "agent", 0).await;
    let first = lease(&store, "k1", at(10), at(40))
        .await
        .expect("a free message is leased");
    assert_eq!(first.key, "k1");
    assert_eq!(
        (first.channel.as_deref(), first.ts.as_deref()),
        (None, None)
    );
    assert_eq!(first.attempts, 0);
    assert_eq!(first.lease_until, Some(at(40)));
    assert!(
        lease(&store, "k1", at(20), at(50)).await.is_none(),
        "held until 40"
    );
    // Released: free at once.
    notes(&store)
        .record_notification("k1", &NotificationWrite::Release)
        .await
        .expect("release");
    assert!(lease(&store, "k1", at(21), at(51)).await.is_some());
    // Not released, but its time is up: free.
    assert!(lease(&store, "k1", at(51), at(81)).await.is_some());
}

pub async fn lease_of_an_unknown_key_is_not_found(store: SharedStore) {
    match notes(&store)
        .lease_notification("nope", at(0), at(30))
        .await
    {
        Err(StoreError::Approval(ApprovalError::NotFound { key })) => assert_eq!(key, "nope"),
        other => panic!("expected approval_not_found, got {other:?}"),
    }
}

pub async fn the_holder_records_failures_the_message_and_the_decision(store: SharedStore) {
    paused_run(store.as_ref(), "k1", "agent", 0).await;
    lease(&store, "k1", at(1), at(31)).await.expect("free");
    notes(&store)
        .record_notification(
            "k1",
            &NotificationWrite::Failed {
                error: "cannot reach Slack".into(),
                hold_until: at(100),
            },
        )
        .await
        .expect("failed");
    let row = stored(&store, "k1").await;
    assert_eq!(row.attempts, 1);
    assert_eq!(row.last_error.as_deref(), Some("cannot reach Slack"));
    assert_eq!(
        row.lease_until,
        Some(at(100)),
        "nobody retries before the hold"
    );
    assert!(lease(&store, "k1", at(99), at(130)).await.is_none());

    lease(&store, "k1", at(100), at(130)).await.expect("free");
    notes(&store)
        .record_notification(
            "k1",
            &NotificationWrite::Posted {
                channel: "C1".into(),
                ts: "1700000000.000100".into(),
                at: at(101),
            },
        )
        .await
        .expect("posted");
    let row = stored(&store, "k1").await;
    assert_eq!(row.channel.as_deref(), Some("C1"));
    assert_eq!(row.ts.as_deref(), Some("1700000000.000100"));
    assert_eq!(row.posted_at, Some(at(101)));
    assert_eq!(row.attempts, 2);
    assert_eq!(row.last_error, None);
    assert_eq!(row.lease_until, None);
    assert_eq!(row.decision_posted_at, None);

    lease(&store, "k1", at(200), at(230)).await.expect("free");
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
    assert_eq!(row.lease_until, None);
    assert!(
        notes(&store)
            .get_notification("other")
            .await
            .expect("get")
            .is_none()
    );
}
