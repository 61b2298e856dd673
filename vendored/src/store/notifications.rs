//! The chat messages (Slack) announcing approvals, as a store keeps them:
//! where each message is, and whether it shows its approval's outcome yet.
//! Sending them is the outbox's (one notice at a time per approval, in
//! order; see `store/outbox.rs`), so a message needs no lease of its own.

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
    /// When the message was edited to show the decision or the expiry;
    /// `None` while it still shows the buttons.
    pub decision_posted_at: Option<DateTime<Utc>>,
}

/// What the sender of a Slack notice records of the message. How its
/// calls went (attempts, the last error) is the notice's, in the outbox.
#[derive(Debug, Clone)]
pub enum NotificationWrite {
    /// The message was posted: remember where.
    Posted {
        channel: String,
        ts: String,
        at: DateTime<Utc>,
    },
    /// The message now shows the decision (or the expiry).
    DecisionPosted { at: DateTime<Utc> },
}

/// The chat messages (Slack) announcing each approval, kept beside the
/// approvals (schema version 2). Only the notifier needs these, so they are
/// not part of [`StateStore`](super::StateStore); a store offers them through
/// [`Health::notifications`](super::Health::notifications).
#[async_trait]
pub trait NotificationStore: Send + Sync + 'static {
    /// Record what became of approval `key`'s message (see
    /// [`NotificationWrite`]): `Posted` makes its row (`not_found` for an
    /// unknown approval), `DecisionPosted` changes it (an error when the
    /// message was never posted).
    async fn record_notification(&self, key: &str, write: &NotificationWrite) -> StoreResult<()>;

    async fn get_notification(&self, key: &str) -> StoreResult<Option<Notification>>;
}

pub type SharedNotifications = Arc<dyn NotificationStore>;
