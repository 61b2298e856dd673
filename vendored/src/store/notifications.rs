//! The chat messages (Slack) announcing approvals, as a store keeps them.

use std::sync::Arc;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use serde::Serialize;

use super::StoreResult;

/// The chat message (Slack) announcing one approval, as stored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Notification {
    pub key: String,
    /// Where the message is (Slack's channel id); `None` until posted.
    pub channel: Option<String>,
    /// The message's id in its channel (Slack's `ts`); `None` until posted.
    pub ts: Option<String>,
    pub posted_at: Option<DateTime<Utc>>,
    /// Calls made for this message so far (posts and edits).
    pub attempts: u32,
    /// The last failure, for operators. Never a credential.
    pub last_error: Option<String>,
    /// When the message was edited to show the decision or the expiry;
    /// `None` while it still shows the buttons.
    pub decision_posted_at: Option<DateTime<Utc>>,
    /// Until when one worker holds the message (or, after a failure, until
    /// when nobody retries).
    pub lease_until: Option<DateTime<Utc>>,
}

/// What a worker holding a notification's lease records.
#[derive(Debug, Clone)]
pub enum NotificationWrite {
    /// The message was posted: remember where; releases the lease.
    Posted {
        channel: String,
        ts: String,
        at: DateTime<Utc>,
    },
    /// The message now shows the decision (or the expiry); releases the lease.
    DecisionPosted { at: DateTime<Utc> },
    /// A call failed: count it, keep the error, and hold the lease until
    /// `hold_until` (the next retry of this worker, or the backoff before
    /// anyone tries again).
    Failed {
        error: String,
        hold_until: DateTime<Utc>,
    },
    /// Nothing to do after all: release the lease.
    Release,
}

/// The chat messages (Slack) announcing each approval, kept beside the
/// approvals (schema version 2). Only the notifier needs these, so they are
/// not part of [`StateStore`](super::StateStore); a store offers them through
/// [`Health::notifications`](super::Health::notifications).
#[async_trait]
pub trait NotificationStore: Send + Sync + 'static {
    /// Take the lease on the message of approval `key` until `until`,
    /// creating its row if needed. `None` when another worker holds it
    /// (`lease_until > now`); otherwise the row as it is now leased. One
    /// conditional write: at most one worker in any process wins.
    async fn lease_notification(
        &self,
        key: &str,
        now: DateTime<Utc>,
        until: DateTime<Utc>,
    ) -> StoreResult<Option<Notification>>;

    /// Record what the lease holder did (see [`NotificationWrite`]).
    async fn record_notification(&self, key: &str, write: &NotificationWrite) -> StoreResult<()>;

    async fn get_notification(&self, key: &str) -> StoreResult<Option<Notification>>;
}

pub type SharedNotifications = Arc<dyn NotificationStore>;
