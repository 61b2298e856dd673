//! The change feed: how a store pushes approval changes made by any
//! process (PostgreSQL LISTEN/NOTIFY). Defined by the store, consumed by
//! [`crate::store::watch`]: the storage trait does not depend on its consumer.

use std::any::Any;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use tokio::sync::mpsc;

use crate::domain::pending_approval::ApprovalStatus;
use crate::store::StoreResult;

/// One change of one approval record.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApprovalChange {
    pub key: String,
    pub run_id: String,
    /// The status it changed to: PENDING for a new pause, else the decision
    /// or EXPIRED.
    pub status: ApprovalStatus,
}

/// What a store's push connection delivers.
#[derive(Debug, Clone)]
pub enum FeedItem {
    Change(ApprovalChange),
    /// Something changed but the message could not be read (an oversized
    /// or foreign payload): the watcher re-checks everything it waits for.
    Unreadable,
}

/// A live push connection: items until the connection is lost, then `None`.
pub struct FeedConnection {
    items: mpsc::Receiver<FeedItem>,
    /// Whatever keeps the connection open (a database client).
    _hold: Box<dyn Any + Send>,
}

impl FeedConnection {
    pub fn new(items: mpsc::Receiver<FeedItem>, hold: impl Any + Send) -> FeedConnection {
        FeedConnection {
            items,
            _hold: Box::new(hold),
        }
    }

    pub async fn next(&mut self) -> Option<FeedItem> {
        self.items.recv().await
    }
}

/// A store's way of pushing changes made by any process (PostgreSQL
/// LISTEN/NOTIFY). Stores without one are polled.
#[async_trait]
pub trait ChangeFeed: Send + Sync + 'static {
    /// Open a push connection. Returns once every change committed from now
    /// on will be delivered on it.
    async fn connect(&self) -> StoreResult<FeedConnection>;
}
