//! Waking the outbox's worker right after a commit that wrote notices
//! (issue 43), so a pause reaches Slack, a webhook or a mailbox in
//! milliseconds rather than at the worker's next poll.
//!
//! Two sources, each forwarded into one [`Notify`] the worker waits on:
//!
//! - this process's run events ([`on_events`]): an event is published
//!   after the transaction that wrote it, and with it its notices, commits;
//! - the store's change feed ([`on_changes`], PostgreSQL's LISTEN/NOTIFY):
//!   a change another process committed (the CLI, another node).
//!
//! A wake is a hint, never a promise: the worker still polls every
//! [`POLL_EVERY`](super::outbox::POLL_EVERY), so a missed or lagged wake
//! (a store without a change feed, a dropped connection) costs at most that
//! long. A [`Notify`] keeps one permit, so a wake that comes while the
//! worker is busy is not lost: it leases again as soon as it waits.

use std::sync::Arc;

use tokio::sync::{Notify, broadcast, watch};

use crate::domain::events::{Event, EventKind};

/// Whether an event of this kind may have written notices (see
/// `notices::NoticeEvent::of`).
pub fn writes_notices(kind: &EventKind) -> bool {
    matches!(
        kind,
        EventKind::AwaitingApproval { .. }
            | EventKind::ApprovalVote { .. }
            | EventKind::ApprovalResolved { .. }
            | EventKind::RunExpired { .. }
            | EventKind::RunCancelled { .. }
            | EventKind::ApprovalReminded { .. }
            | EventKind::ApprovalEscalated { .. }
    )
}

/// Wake `wake` after every event of this process that wrote notices,
/// until `stop`.
pub async fn on_events(
    events: broadcast::Receiver<Event>,
    wake: Arc<Notify>,
    stop: watch::Receiver<bool>,
) {
    forward(events, wake, stop, |event: &Event| {
        writes_notices(&event.kind)
    })
    .await;
}

/// Wake `wake` after every change the store's feed reports (another
/// process's commit), until `stop`.
pub async fn on_changes<T: Clone>(
    changes: broadcast::Receiver<T>,
    wake: Arc<Notify>,
    stop: watch::Receiver<bool>,
) {
    forward(changes, wake, stop, |_: &T| true).await;
}

async fn forward<T: Clone>(
    mut from: broadcast::Receiver<T>,
    wake: Arc<Notify>,
    mut stop: watch::Receiver<bool>,
    wanted: impl Fn(&T) -> bool,
) {
    loop {
        let next = tokio::select! {
            next = from.recv() => next,
            _ = stop.changed() => return,
        };
        match next {
            Ok(item) if wanted(&item) => wake.notify_one(),
            Ok(_) => {}
            // Missed some: one of them may have written notices.
            Err(broadcast::error::RecvError::Lagged(_)) => wake.notify_one(),
            Err(broadcast::error::RecvError::Closed) => return,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test]
    async fn a_wake_sent_while_nobody_waits_is_kept_for_the_next_wait() {
        let (tx, rx) = broadcast::channel(4);
        let (_stop_tx, stop) = watch::channel(false);
        let wake = Arc::new(Notify::new());
        let forwarding = tokio::spawn(on_changes(rx, Arc::clone(&wake), stop));
        tx.send(1u8).expect("send");
        // The forwarder has run once the send is taken: give it the turn.
        tokio::time::timeout(Duration::from_secs(5), wake.notified())
            .await
            .expect("woken by the change");
        assert!(
            tokio::time::timeout(Duration::from_millis(50), wake.notified())
                .await
                .is_err(),
            "one change, one wake"
        );
        drop(tx);
        tokio::time::timeout(Duration::from_secs(5), forwarding)
            .await
            .expect("the forwarder ends with its feed")
            .expect("no panic");
    }

    #[tokio::test]
    async fn events_that_write_no_notice_do_not_wake() {
        let (tx, rx) = broadcast::channel(4);
        let (stop_tx, stop) = watch::channel(false);
        let wake = Arc::new(Notify::new());
        let forwarding = tokio::spawn(on_events(rx, Arc::clone(&wake), stop));
        let at = crate::support::time::now();
        tx.send(Event {
            run_id: "r".into(),
            seq: 1,
            at,
            kind: EventKind::RunCompleted {
                outputs: Default::default(),
            },
        })
        .expect("send");
        assert!(
            tokio::time::timeout(Duration::from_millis(100), wake.notified())
                .await
                .is_err(),
            "a completed run writes no notice"
        );
        tx.send(Event {
            run_id: "r".into(),
            seq: 2,
            at,
            kind: EventKind::RunExpired { key: "k".into() },
        })
        .expect("send");
        tokio::time::timeout(Duration::from_secs(5), wake.notified())
            .await
            .expect("an expiry wakes");
        stop_tx.send(true).expect("stop");
        tokio::time::timeout(Duration::from_secs(5), forwarding)
            .await
            .expect("the forwarder stops")
            .expect("no panic");
    }
}
