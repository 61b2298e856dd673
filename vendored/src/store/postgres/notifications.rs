//! `tollgate_notifications` (schema version 2): the chat message announcing
//! each approval and its lease (one call per message at a time). The same
//! statements as the SQLite store's, in PostgreSQL's dialect.

use chrono::{DateTime, Utc};
use deadpool_postgres::GenericClient;
use tokio_postgres::Row;

use super::codec::RowReader;
use super::ops::{execute, query_opt};
use crate::pending_approval::ApprovalError;
use crate::store::columns::Columns;
use crate::store::{Notification, NotificationWrite, StoreError, StoreResult};

/// The columns of `tollgate_notifications`, in the order [`notification_at`]
/// reads them.
const NOTIFICATION_COLUMNS: &str =
    "key, channel, ts, posted_at, attempts, last_error, decision_posted_at, lease_until";

fn notification_at(row: &Row, from: usize) -> StoreResult<Notification> {
    let key: String = row
        .try_get(from)
        .map_err(|e| super::codec::corrupt("tollgate_notifications", "key", "?", &e))?;
    let r = RowReader::with_id(row, "tollgate_notifications", key.clone());
    let attempts: i32 = r.get(from + 4, "attempts")?;
    Ok(Notification {
        key,
        channel: r.get(from + 1, "channel")?,
        ts: r.get(from + 2, "ts")?,
        posted_at: r.get(from + 3, "posted_at")?,
        attempts: u32::try_from(attempts).unwrap_or(0),
        last_error: r.text_opt(from + 5, "last_error")?,
        decision_posted_at: r.get(from + 6, "decision_posted_at")?,
        lease_until: r.get(from + 7, "lease_until")?,
    })
}

fn notification_from_row(row: &Row) -> StoreResult<Notification> {
    notification_at(row, 0)
}

pub(super) async fn lease<C: GenericClient>(
    client: &C,
    key: &str,
    now: &DateTime<Utc>,
    until: &DateTime<Utc>,
) -> StoreResult<Option<Notification>> {
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
    // Insert, or take a lease that is free or whose time is up; a held lease
    // makes the upsert's WHERE false, and RETURNING yields nothing.
    query_opt(
        client,
        &format!(
            "INSERT INTO tollgate_notifications (key, attempts, lease_until) VALUES ($1, 0, $3) \
             ON CONFLICT (key) DO UPDATE SET lease_until = excluded.lease_until \
             WHERE tollgate_notifications.lease_until IS NULL \
                OR tollgate_notifications.lease_until <= $2 \
             RETURNING {NOTIFICATION_COLUMNS}"
        ),
        &[&key, now, until],
        notification_from_row,
    )
    .await
}

pub(super) async fn record<C: GenericClient>(
    client: &C,
    key: &str,
    write: &NotificationWrite,
) -> StoreResult<()> {
    let changed = match write {
        NotificationWrite::Posted { channel, ts, at } => {
            execute(
                client,
                "UPDATE tollgate_notifications SET channel = $2, ts = $3, posted_at = $4, \
                 attempts = attempts + 1, last_error = NULL, lease_until = NULL WHERE key = $1",
                &[&key, channel, ts, at],
            )
            .await?
        }
        NotificationWrite::DecisionPosted { at } => {
            execute(
                client,
                "UPDATE tollgate_notifications SET decision_posted_at = $2, \
                 attempts = attempts + 1, last_error = NULL, lease_until = NULL WHERE key = $1",
                &[&key, at],
            )
            .await?
        }
        NotificationWrite::Failed { error, hold_until } => {
            execute(
                client,
                "UPDATE tollgate_notifications SET attempts = attempts + 1, last_error = $2, \
                 lease_until = $3 WHERE key = $1",
                &[
                    &key,
                    &super::codec::text_json(Some(error.as_str())),
                    hold_until,
                ],
            )
            .await?
        }
        NotificationWrite::Release => {
            execute(
                client,
                "UPDATE tollgate_notifications SET lease_until = NULL WHERE key = $1",
                &[&key],
            )
            .await?
        }
    };
    if changed == 0 {
        return Err(StoreError::Database(format!(
            "no notification for approval {key}"
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
