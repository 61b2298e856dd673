//! `tollgate_notifications` (schema versions 2 and 16): where the chat
//! message announcing each approval is, and whether it shows the outcome.
//!
//! Like `ops`, everything here runs synchronously on one connection; the
//! store wraps writers in `BEGIN IMMEDIATE`.

use rusqlite::{Connection, Row};

use super::codec::RowReader;
use crate::domain::pending_approval::ApprovalError;
use crate::store::columns::Columns;
use crate::store::{Notification, NotificationWrite, StoreError, StoreResult};
use crate::support::time::format_utc;

/// The columns of `tollgate_notifications`, in the order
/// [`notification_at`] reads them.
const NOTIFICATION_COLUMNS: &str = "key, channel, ts, posted_at, decision_posted_at";

/// Decode the notification columns starting at column `from`.
fn notification_at(row: &Row<'_>, from: usize) -> StoreResult<Notification> {
    let key: String = row
        .get(from)
        .map_err(|e| super::codec::corrupt("tollgate_notifications", "key", "?", &e))?;
    let r = RowReader::with_id(row, "tollgate_notifications", key.clone());
    Ok(Notification {
        key,
        channel: r.get(from + 1, "channel")?,
        ts: r.get(from + 2, "ts")?,
        posted_at: r.time_opt(from + 3, "posted_at")?,
        decision_posted_at: r.time_opt(from + 4, "decision_posted_at")?,
    })
}

fn notification_from_row(row: &Row<'_>) -> StoreResult<Notification> {
    notification_at(row, 0)
}

pub(super) fn record(conn: &Connection, key: &str, write: &NotificationWrite) -> StoreResult<()> {
    let changed = match write {
        NotificationWrite::Posted { channel, ts, at } => {
            let mut exists =
                conn.prepare_cached("SELECT 1 FROM tollgate_approvals WHERE key = ?1")?;
            if !exists.exists([key])? {
                return Err(ApprovalError::NotFound { key: key.into() }.into());
            }
            conn.prepare_cached(
                "INSERT INTO tollgate_notifications (key, channel, ts, posted_at) \
                 VALUES (?1, ?2, ?3, ?4) \
                 ON CONFLICT (key) DO UPDATE SET channel = excluded.channel, ts = excluded.ts, \
                 posted_at = excluded.posted_at",
            )?
            .execute((key, channel, ts, format_utc(*at)))?
        }
        NotificationWrite::DecisionPosted { at } => conn
            .prepare_cached(
                "UPDATE tollgate_notifications SET decision_posted_at = ?2 \
                 WHERE key = ?1 AND ts IS NOT NULL",
            )?
            .execute((key, format_utc(*at)))?,
    };
    if changed == 0 {
        return Err(StoreError::Database(format!(
            "no Slack message is stored for approval {key}"
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
