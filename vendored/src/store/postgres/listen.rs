//! The LISTEN side: one dedicated connection per watcher, outside the pool
//! (a pooled connection is handed to other work between checkouts, and
//! LISTEN belongs to the session that issued it).

use async_trait::async_trait;
use futures_util::StreamExt;
use tokio::sync::mpsc;
use tokio_postgres::AsyncMessage;

use super::notify::{self, CHANNEL};
use super::tls::RustlsConnect;
use crate::store::feed::{ChangeFeed, FeedConnection, FeedItem};
use crate::store::{StoreError, StoreResult};

/// `application_name` of the LISTEN connection, so an operator (or a test)
/// can find it in `pg_stat_activity`.
pub const LISTEN_APPLICATION_NAME: &str = "tollgate-listen";

/// Notifications buffered between the connection and the watcher.
const BUFFER: usize = 1024;

pub(super) struct Listener {
    config: tokio_postgres::Config,
    /// The store's TLS set-up: this connection is encrypted like the pool's.
    tls: RustlsConnect,
}

impl Listener {
    pub fn new(mut config: tokio_postgres::Config, tls: RustlsConnect) -> Listener {
        config.application_name(LISTEN_APPLICATION_NAME);
        Listener { config, tls }
    }
}

#[async_trait]
impl ChangeFeed for Listener {
    async fn connect(&self) -> StoreResult<FeedConnection> {
        // Classified as any driver error: a refused or lost connection is
        // retried by the watcher, anything else is reported. One more is
        // passing here: a database that takes no connections for now
        // (`ALLOW_CONNECTIONS false` during maintenance, SQLSTATE 55000 at
        // connect) opens again, so the watcher retries rather than polling
        // for good.
        let (client, mut connection) =
            self.config.connect(self.tls.clone()).await.map_err(|e| {
                let closed_for_now = e.code()
                    == Some(&tokio_postgres::error::SqlState::OBJECT_NOT_IN_PREREQUISITE_STATE);
                let error = StoreError::from(e);
                let error = if closed_for_now {
                    StoreError::Unavailable(error.to_string())
                } else {
                    error
                };
                error.reworded(|m| format!("cannot open the LISTEN connection: {m}"))
            })?;
        let (tx, rx) = mpsc::channel(BUFFER);
        // Drive the connection: its messages carry the notifications. Ends
        // when the server closes it or the watcher drops its receiver.
        tokio::spawn(async move {
            let mut messages = futures_util::stream::poll_fn(|cx| connection.poll_message(cx));
            loop {
                tokio::select! {
                    _ = tx.closed() => break,
                    message = messages.next() => match message {
                        Some(Ok(AsyncMessage::Notification(n))) if n.channel() == CHANNEL => {
                            let item = notify::parse(n.payload())
                                .map_or(FeedItem::Unreadable, FeedItem::Change);
                            if tx.send(item).await.is_err() {
                                break;
                            }
                        }
                        Some(Ok(_)) => {}
                        Some(Err(_)) | None => break,
                    },
                }
            }
        });
        // Only once LISTEN has returned is every later commit heard; the
        // watcher's catch-up runs after this returns.
        client
            .batch_execute(&format!("LISTEN {CHANNEL}"))
            .await
            .map_err(StoreError::from)?;
        Ok(FeedConnection::new(rx, client))
    }
}
