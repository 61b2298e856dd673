//! `tollgate_notifications` (schema versions 2 and 17): where the chat
//! message announcing each approval is, and whether it shows the outcome.
//! The same statements as the SQLite store's, in PostgreSQL's dialect.

use deadpool_postgres::GenericClient;
use tokio_postgres::Row;

use super::codec::RowReader;
use super::ops::{execute, query_opt};
use crate::domain::pending_approval::ApprovalError;
use crate::store::{Notification, NotificationWrite, StoreError, StoreResult};

/// The columns of `tollgate_notifications`, in the order [`notification_at`]
/// reads them.
const NOTIFICATION_COLUMNS: &str = "key, channel, ts, posted_at, decision_posted_at";

fn notification_at(row: &Row, from: usize) -> StoreResult<Notification> {
    let key: String = row
        .try_get(from)
        .map_err(|e| super::codec::corrupt("tollgate_notifications", "key", "?", &e))?;
    let r = RowReader::with_id(row, "tollgate_notifications", key.clone());
    Ok(Notification {
        key,
        channel: r.get(from + 1, "channel")?,
        ts: r.get(from + 2, "ts")?,
        posted_at: r.get(from + 3, "posted_at")?,
        decision_posted_at: r.get(from + 4, "decision_posted_at")?,
    })
}

fn notification_from_row(row: &Row) -> StoreResult<Notification> {
    notification_at(row, 0)
}

pub(super) async fn record<C: GenericClient>(
    client: &C,
    key: &str,
    write: &NotificationWrite,
) -> StoreResult<()> {
    let changed = match write {
        NotificationWrite::Posted { channel, ts, at } => {
            let exists = query_opt(
                client,
                "SELECT 1 FROM tollgate_approvals WHERE key = $1",
                &[&key],
                |_| Ok(()),
            )
            .await?;
            if exists.is_none() {
                return Err(ApprovalError::NotFound { key: key.into() }.into());
            }
            execute(
                client,
                "INSERT INTO tollgate_notifications (key, channel, ts, posted_at) \
                 VALUES ($1, $2, $3, $4) \
                 ON CONFLICT (key) DO UPDATE SET channel = excluded.channel, ts = excluded.ts, \
                 posted_at = excluded.posted_at",
                &[&key, channel, ts, at],
            )
            .await?
        }
        NotificationWrite::DecisionPosted { at } => {
            execute(
                client,
                "UPDATE tollgate_notifications SET decision_posted_at = $2 \
                 WHERE key = $1 AND ts IS NOT NULL",
                &[&key, at],
            )
            .await?
        }
    };
    if changed == 0 {
        return Err(StoreError::Database(format!(
            "no Slack message is stored for approval {key}"
        )));
    }
    Ok(())
}

pub(super) async fn get<C: GenericClient>(
    client: &C,
    key: &str,
) -> StoreResult<Option<Notification>> {
    query_opt(
        client,
        &format!("SELECT {NOTIFICATION_COLUMNS} FROM tollgate_notifications WHERE key = $1"),
        &[&key],
        notification_from_row,
    )
    .await
}
