//! `tollgate_notifications` (schema version 2): the chat message announcing
//! each approval and its lease (one call per message at a time).
//!
//! Like `ops`, everything here runs synchronously on one connection; the
//! store wraps writers in `BEGIN IMMEDIATE`.

use rusqlite::{Connection, Row};

use super::codec::RowReader;
use crate::pending_approval::ApprovalError;
use crate::store::columns::Columns;
use crate::store::{Notification, NotificationWrite, StoreError, StoreResult};
use crate::time::format_utc;

/// The columns of `tollgate_notifications`, in the order
/// [`notification_at`] reads them.
const NOTIFICATION_COLUMNS: &str =
    "key, channel, ts, posted_at, attempts, last_error, decision_posted_at, lease_until";

/// Decode the notification columns starting at column `from`.
fn notification_at(row: &Row<'_>, from: usize) -> StoreResult<Notification> {
    let key: String = row
        .get(from)
        .map_err(|e| super::codec::corrupt("tollgate_notifications", "key", "?", &e))?;
    let r = RowReader::with_id(row, "tollgate_notifications", key.clone());
    let attempts: i64 = r.get(from + 4, "attempts")?;
    Ok(Notification {
        key,
        channel: r.get(from + 1, "channel")?,
        ts: r.get(from + 2, "ts")?,
        posted_at: r.time_opt(from + 3, "posted_at")?,
        attempts: u32::try_from(attempts).unwrap_or(u32::MAX),
        last_error: r.get(from + 5, "last_error")?,
        decision_posted_at: r.time_opt(from + 6, "decision_posted_at")?,
        lease_until: r.time_opt(from + 7, "lease_until")?,
    })
}

fn notification_from_row(row: &Row<'_>) -> StoreResult<Notification> {
    notification_at(row, 0)
}

pub(super) fn lease(
    conn: &Connection,
    key: &str,
    now: &str,
    until: &str,
) -> StoreResult<Option<Notification>> {
    let mut exists = conn.prepare_cached("SELECT 1 FROM tollgate_approvals WHERE key = ?1")?;
    if !exists.exists([key])? {
        return Err(ApprovalError::NotFound { key: key.into() }.into());
    }
    // Insert, or take a lease that is free or whose time is up; a held
    // lease makes the upsert's WHERE false, and RETURNING yields nothing.
    let mut stmt = conn.prepare_cached(&format!(
        "INSERT INTO tollgate_notifications (key, attempts, lease_until) VALUES (?1, 0, ?3) \
         ON CONFLICT (key) DO UPDATE SET lease_until = excluded.lease_until \
         WHERE tollgate_notifications.lease_until IS NULL \
            OR tollgate_notifications.lease_until <= ?2 \
         RETURNING {NOTIFICATION_COLUMNS}"
    ))?;
    let mut rows = stmt.query((key, now, until))?;
    rows.next()?.map(notification_from_row).transpose()
}

pub(super) fn record(conn: &Connection, key: &str, write: &NotificationWrite) -> StoreResult<()> {
    let changed = match write {
        NotificationWrite::Posted { channel, ts, at } => conn
            .prepare_cached(
                "UPDATE tollgate_notifications SET channel = ?2, ts = ?3, posted_at = ?4, \
                 attempts = attempts + 1, last_error = NULL, lease_until = NULL WHERE key = ?1",
            )?
            .execute((key, channel, ts, format_utc(*at)))?,
        NotificationWrite::DecisionPosted { at } => conn
            .prepare_cached(
                "UPDATE tollgate_notifications SET decision_posted_at = ?2, \
                 attempts = attempts + 1, last_error = NULL, lease_until = NULL WHERE key = ?1",
            )?
            .execute((key, format_utc(*at)))?,
        NotificationWrite::Failed { error, hold_until } => conn
            .prepare_cached(
                "UPDATE tollgate_notifications SET attempts = attempts + 1, last_error = ?2, \
                 lease_until = ?3 WHERE key = ?1",
            )?
            .execute((key, error, format_utc(*hold_until)))?,
        NotificationWrite::Release => conn
            .prepare_cached("UPDATE tollgate_notifications SET lease_until = NULL WHERE key = ?1")?
            .execute([key])?,
    };
    if changed == 0 {
        return Err(StoreError::Database(format!(
            "no notification for approval {key}"
        )));
    }
    Ok(())
}

pub(super) fn get(conn: &Connection, key: &str) -> StoreResult<Option<Notification>> {
    let mut stmt = conn.prepare_cached(&format!(
        "SELECT {NOTIFICATION_COLUMNS} FROM tollgate_notifications WHERE key = ?1"
    ))?;
    let mut rows = stmt.query([key])?;
    rows.next()?.map(notification_from_row).transpose()
}
