//! `tollgate_notifications` (schema version 2): the chat message announcing
//! each approval, its lease, and the repair sweep's queries. The same
//! statements as the SQLite store's, in PostgreSQL's dialect.

use chrono::{DateTime, Utc};
use deadpool_postgres::GenericClient;
use tokio_postgres::Row;

use super::codec::{APPROVAL_COLUMN_COUNT, APPROVAL_COLUMNS, RowReader, approval_from_row};
use super::ops::{decode_skipping, execute, query_opt};
use crate::pending_approval::{ApprovalError, ApprovalRecord};
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

/// PENDING, unexpired approvals of `agent_id` with no message and no held
/// lease, oldest first.
pub(super) async fn due_to_post<C: GenericClient>(
    client: &C,
    agent_id: &str,
    now: &DateTime<Utc>,
    limit: i64,
) -> StoreResult<Vec<ApprovalRecord>> {
    let rows = client
        .query(
        &format!(
            "SELECT {cols} FROM tollgate_approvals a \
             LEFT JOIN tollgate_notifications n ON n.key = a.key \
             WHERE a.status = 'PENDING' AND a.agent_id = $1 AND a.expires_at > $2 \
               AND (n.key IS NULL OR (n.ts IS NULL AND (n.lease_until IS NULL OR n.lease_until <= $2))) \
             ORDER BY a.created_at, a.key LIMIT $3",
            cols = prefixed("a", APPROVAL_COLUMNS)
        ),
        &[&agent_id, now, &limit],
    )
    .await?;
    readable(decode_skipping(&rows, approval_from_row)?)
}

/// What the repair sweep can work on; rows that do not decode are logged
/// and left out: one bad row must not stop every message's repair.
fn readable<T>((good, bad): (Vec<T>, Vec<crate::store::UnreadableRow>)) -> StoreResult<Vec<T>> {
    crate::store::report_skipped("postgres", "approval (notifications)", &bad);
    Ok(good)
}

/// Settled (decided or expired) approvals of `agent_id` whose posted
/// message still shows the buttons and whose lease is free.
pub(super) async fn due_to_settle<C: GenericClient>(
    client: &C,
    agent_id: &str,
    now: &DateTime<Utc>,
    limit: i64,
) -> StoreResult<Vec<(ApprovalRecord, Notification)>> {
    let rows = client
        .query(
            &format!(
                "SELECT {a}, {n} FROM tollgate_notifications n \
             JOIN tollgate_approvals a ON a.key = n.key \
             WHERE n.ts IS NOT NULL AND n.decision_posted_at IS NULL \
               AND (n.lease_until IS NULL OR n.lease_until <= $2) \
               AND a.status <> 'PENDING' AND a.agent_id = $1 \
             ORDER BY a.created_at, a.key LIMIT $3",
                a = prefixed("a", APPROVAL_COLUMNS),
                n = prefixed("n", NOTIFICATION_COLUMNS),
            ),
            &[&agent_id, now, &limit],
        )
        .await?;
    readable(decode_skipping(&rows, |row| {
        Ok((
            approval_from_row(row)?,
            notification_at(row, APPROVAL_COLUMN_COUNT)?,
        ))
    })?)
}

/// See [`NotificationStore::open_vote_counts`](crate::store::NotificationStore::open_vote_counts).
pub(super) async fn open_vote_counts<C: GenericClient>(
    client: &C,
    agent_id: &str,
    now: &DateTime<Utc>,
    limit: i64,
) -> StoreResult<Vec<(String, u64)>> {
    let rows = client
        .query(
            "SELECT n.key, (SELECT COUNT(*) FROM tollgate_votes v WHERE v.key = n.key) \
             FROM tollgate_notifications n \
             JOIN tollgate_approvals a ON a.key = n.key \
             WHERE n.ts IS NOT NULL AND n.decision_posted_at IS NULL \
               AND (n.lease_until IS NULL OR n.lease_until <= $2) \
               AND a.status = 'PENDING' AND a.roster IS NOT NULL AND a.agent_id = $1 \
             ORDER BY a.created_at, a.key LIMIT $3",
            &[&agent_id, now, &limit],
        )
        .await?;
    let mut out = Vec::with_capacity(rows.len());
    for row in &rows {
        let votes: i64 = row.try_get(1)?;
        out.push((row.try_get(0)?, u64::try_from(votes).unwrap_or(0)));
    }
    Ok(out)
}

fn prefixed(alias: &str, columns: &str) -> String {
    columns
        .split(", ")
        .map(|c| format!("{alias}.{}", c.trim()))
        .collect::<Vec<_>>()
        .join(", ")
}
