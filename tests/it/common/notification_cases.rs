//! The notification contract every store keeps (schema version 2): the
//! lease on a message, what its holder records, and what the repair sweep
//! finds. Each case takes a fresh store; `slack/store.rs` runs them
//! against memory and SQLite (and a PostgreSQL store can run them too).
//! Include after `store_cases.rs` (it uses its helpers).
#![allow(dead_code)]

use tollgate_runtime::store::{Notification, NotificationWrite, SharedNotifications, SharedStore};
use tollgate_runtime::{ApprovalError, ApprovalStatus, StoreError};

use crate::common::store_cases::{TTL, approve, at, paused_run};

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

pub async fn the_repair_sweep_finds_unposted_pauses_and_settled_messages_with_buttons(
    store: SharedStore,
) {
    // k1: pending, never posted. k2: pending, posted. k3: decided, posted,
    // still shows buttons. k4: decided, message already settled. k5:
    // another agent's. k6: pending, posting held after a failure.
    for (i, key) in ["k1", "k2", "k3", "k4", "k6"].iter().enumerate() {
        paused_run(store.as_ref(), key, "agent", i as u64).await;
    }
    paused_run(store.as_ref(), "k5", "other", 5).await;
    for key in ["k2", "k3", "k4", "k5"] {
        lease(&store, key, at(10), at(40)).await.expect("free");
        let posted = NotificationWrite::Posted {
            channel: "C1".into(),
            ts: format!("ts-{key}"),
            at: at(10),
        };
        notes(&store)
            .record_notification(key, &posted)
            .await
            .expect("posted");
    }
    for key in ["k3", "k4", "k5"] {
        store
            .claim(&approve(key, "slack:U1", 20))
            .await
            .expect("claim");
    }
    lease(&store, "k4", at(21), at(50)).await.expect("free");
    notes(&store)
        .record_notification("k4", &NotificationWrite::DecisionPosted { at: at(22) })
        .await
        .expect("decision posted");
    lease(&store, "k6", at(21), at(50)).await.expect("free");
    let failed = NotificationWrite::Failed {
        error: "boom".into(),
        hold_until: at(300),
    };
    notes(&store)
        .record_notification("k6", &failed)
        .await
        .expect("failed");

    let due = notes(&store)
        .notifications_due("agent", at(30), 10)
        .await
        .expect("due");
    let to_post: Vec<&str> = due.to_post.iter().map(|r| r.key.as_str()).collect();
    assert_eq!(to_post, ["k1"]);
    let to_settle: Vec<(&str, &str)> = due
        .to_settle
        .iter()
        .map(|(r, n)| (r.key.as_str(), n.ts.as_deref().unwrap_or("")))
        .collect();
    assert_eq!(to_settle, [("k3", "ts-k3")]);
    assert_eq!(due.to_settle[0].0.status, ApprovalStatus::Approved);

    // Once the hold is over, k6 is due again; expired records are not.
    let due = notes(&store)
        .notifications_due("agent", at(301), 10)
        .await
        .expect("due");
    let to_post: Vec<&str> = due.to_post.iter().map(|r| r.key.as_str()).collect();
    assert_eq!(to_post, ["k1", "k6"]);
    let due = notes(&store)
        .notifications_due("agent", at(TTL + 10), 10)
        .await
        .expect("due");
    assert!(
        due.to_post.is_empty(),
        "expired approvals are not announced"
    );

    // A held settle is left alone; the limit applies.
    lease(&store, "k3", at(30), at(60)).await.expect("free");
    let due = notes(&store)
        .notifications_due("agent", at(31), 1)
        .await
        .expect("due");
    assert!(due.to_settle.is_empty());
    assert_eq!(due.to_post.len(), 1);
}

/// The repair sweep's list of open messages of gates with rules, each with
/// its ledger's length: a plain gate's, a settled gate's, another agent's
/// and a held message are not in it.
pub async fn open_team_messages_are_listed_with_their_vote_counts(store: SharedStore) {
    use crate::common::store_cases::votes::{paused_team_gate, vote_recorded};
    // t1, t2: team gates, posted. t3: a team gate, never posted. p1: a
    // plain gate, posted.
    for key in ["t1", "t2", "t3"] {
        paused_team_gate(store.as_ref(), key).await;
    }
    paused_run(store.as_ref(), "p1", "agent", 0).await;
    for key in ["t1", "t2", "p1"] {
        lease(&store, key, at(10), at(40)).await.expect("free");
        let posted = NotificationWrite::Posted {
            channel: "C1".into(),
            ts: format!("ts-{key}"),
            at: at(10),
        };
        notes(&store)
            .record_notification(key, &posted)
            .await
            .expect("posted");
    }
    let open = |now| {
        let store = store.clone();
        async move {
            notes(&store)
                .open_vote_counts("agent", at(now), 10)
                .await
                .expect("open")
        }
    };
    let listed = |pairs: &[(&str, u64)]| -> Vec<(String, u64)> {
        pairs.iter().map(|(k, n)| (k.to_string(), *n)).collect()
    };
    assert_eq!(open(20).await, listed(&[("t1", 0), ("t2", 0)]));
    vote_recorded(store.as_ref(), "t1", "alice", 21).await;
    vote_recorded(store.as_ref(), "t1", "dave", 22).await;
    vote_recorded(store.as_ref(), "t2", "bob", 23).await;
    assert_eq!(open(30).await, listed(&[("t1", 2), ("t2", 1)]));
    // Held by a worker: left out until the lease is over.
    lease(&store, "t2", at(30), at(60)).await.expect("free");
    assert_eq!(open(31).await, listed(&[("t1", 2)]));
    assert_eq!(open(61).await, listed(&[("t1", 2), ("t2", 1)]));
    assert!(
        notes(&store)
            .open_vote_counts("other", at(61), 10)
            .await
            .expect("open")
            .is_empty(),
        "another agent's are not listed"
    );
    // Settled: its message is the settle sweep's, not this list's.
    store
        .claim(&approve("t2", "slack:U1", 62))
        .await
        .expect("claim");
    assert_eq!(open(63).await, listed(&[("t1", 2)]));
}
