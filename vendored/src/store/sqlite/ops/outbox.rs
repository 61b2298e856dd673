//! The outbox's SQL: notices written by the change they tell of, in its
//! transaction; a worker's lease and settle; the operators' reads.

use super::*;
use crate::notices::{Notice, NoticeRoutes, NoticeStatus};
use crate::store::outbox::{
    DisabledEndpoint, MAX_NOTICE_PAGE, NoticeQuery, NoticeWrite, OutboxNotice, OutboxStats,
    RetryNotices,
};

/// A notice ready to insert.
pub(crate) struct NoticeRow {
    id: String,
    key: String,
    run_id: String,
    event: &'static str,
    channel: &'static str,
    target: String,
    body: String,
    created_at: String,
}

impl NoticeRow {
    pub fn encode(notice: &Notice) -> StoreResult<NoticeRow> {
        Ok(NoticeRow {
            id: notice.id.clone(),
            key: notice.key.clone(),
            run_id: notice.run_id.clone(),
            event: notice.event.as_str(),
            channel: notice.channel.as_str(),
            target: notice.target.clone(),
            body: to_json(&notice.body, "notice body")?,
            created_at: format_utc(notice.created_at),
        })
    }

    pub fn encode_all(notices: &[Notice]) -> StoreResult<Vec<NoticeRow>> {
        notices.iter().map(NoticeRow::encode).collect()
    }
}

pub(crate) fn insert_notices(conn: &Connection, rows: &[NoticeRow]) -> StoreResult<()> {
    if rows.is_empty() {
        return Ok(());
    }
    let mut stmt = conn.prepare_cached(
        "INSERT INTO tollgate_outbox (id, key, run_id, event, channel, target, body, status, \
         attempts, next_at, created_at, window_from) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, 'pending', 0, ?8, ?8, ?8)",
    )?;
    for row in rows {
        stmt.execute((
            &row.id,
            &row.key,
            &row.run_id,
            row.event,
            row.channel,
            &row.target,
            &row.body,
            &row.created_at,
        ))?;
    }
    Ok(())
}

/// The routes stored with approval `key`'s pause.
pub(crate) fn routes_of(conn: &Connection, key: &str) -> StoreResult<Option<NoticeRoutes>> {
    let mut stmt = conn.prepare_cached("SELECT notify FROM tollgate_approvals WHERE key = ?1")?;
    let routes: Option<String> = stmt
        .query_row([key], |row| row.get(0))
        .optional()?
        .flatten();
    routes
        .map(|text| {
            serde_json::from_str(&text)
                .map_err(|e| super::super::codec::corrupt("tollgate_approvals", "notify", key, &e))
        })
        .transpose()
}

/// Write the notices `event` calls for on `record` (as this transaction
/// leaves it), to the routes stored with its pause. Nothing when the gate
/// notifies nobody: one read of the record's routes by key.
pub(crate) fn notify_change(
    conn: &Connection,
    record: &ApprovalRecord,
    event: &Event,
) -> StoreResult<()> {
    let Some(routes) = routes_of(conn, &record.key)? else {
        return Ok(());
    };
    let notices = crate::store::outbox::notices_of(record, &routes, event);
    insert_notices(conn, &NoticeRow::encode_all(&notices)?)
}

/// Whether some notice is due at `now` and not leased (a cheap read on
/// the reader connection before a lease takes the write lock: an idle
/// worker polls every second).
pub(crate) fn any_due_notice(conn: &Connection, now: &str) -> StoreResult<bool> {
    let mut stmt = conn.prepare_cached(
        "SELECT EXISTS (SELECT 1 FROM tollgate_outbox \
         WHERE status IN ('pending', 'failed') AND next_at <= ?1 \
           AND (lease_until IS NULL OR lease_until <= ?1))",
    )?;
    Ok(stmt.query_row([now], |row| row.get(0))?)
}

/// See [`crate::store::Outbox::lease_notices`]: one `UPDATE ... RETURNING`
/// in the writer's transaction, so two workers never lease one notice.
pub(crate) fn lease_notices(
    conn: &Connection,
    owner: &str,
    now: &str,
    until: &str,
    limit: usize,
) -> StoreResult<Vec<OutboxNotice>> {
    let mut stmt = conn.prepare_cached(&format!(
        "UPDATE tollgate_outbox SET lease_owner = ?1, lease_until = ?3 \
         WHERE id IN (SELECT id FROM tollgate_outbox \
                      WHERE status IN ('pending', 'failed') AND next_at <= ?2 \
                        AND (lease_until IS NULL OR lease_until <= ?2) \
                      ORDER BY next_at, id LIMIT ?4) \
         RETURNING {OUTBOX_COLUMNS}"
    ))?;
    let mut leased = query_all(
        &mut stmt,
        (owner, now, until, to_i64(limit, "limit")?),
        outbox_from_row,
    )?;
    leased.sort_by(|a, b| (a.next_at, &a.notice.id).cmp(&(b.next_at, &b.notice.id)));
    Ok(leased)
}

pub(crate) fn settle_notice(
    conn: &Connection,
    id: &str,
    owner: &str,
    write: &NoticeWrite,
) -> StoreResult<bool> {
    let changed = match (write, write.undelivered()) {
        (NoticeWrite::Sent { at }, _) => conn
            .prepare_cached(
                "UPDATE tollgate_outbox SET status = 'sent', sent_at = ?3, attempts = attempts + 1, \
                 last_error = NULL, lease_owner = NULL, lease_until = NULL \
                 WHERE id = ?1 AND lease_owner = ?2",
            )?
            .execute((id, owner, format_utc(*at)))?,
        (_, Some((status, error, next_at))) => conn
            .prepare_cached(
                "UPDATE tollgate_outbox SET status = ?5, next_at = ?3, \
                 attempts = attempts + 1, last_error = ?4, lease_owner = NULL, lease_until = NULL \
                 WHERE id = ?1 AND lease_owner = ?2",
            )?
            .execute((id, owner, format_utc(next_at), error, status.as_str()))?,
        (_, None) => 0,
    };
    Ok(changed == 1)
}

pub(crate) fn list_notices(
    conn: &Connection,
    query: &NoticeQuery,
) -> StoreResult<Vec<OutboxNotice>> {
    let mut sql = format!("SELECT {OUTBOX_COLUMNS} FROM tollgate_outbox WHERE 1 = 1");
    let mut params: Vec<Box<dyn ToSql>> = Vec::new();
    if !query.statuses.is_empty() {
        let marks: Vec<String> = query
            .statuses
            .iter()
            .map(|status| {
                params.push(Box::new(status.as_str()));
                format!("?{}", params.len())
            })
            .collect();
        sql.push_str(&format!(" AND status IN ({})", marks.join(", ")));
    }
    if let Some(key) = &query.key {
        params.push(Box::new(key.clone()));
        sql.push_str(&format!(" AND key = ?{}", params.len()));
    }
    if let Some(channel) = query.channel {
        params.push(Box::new(channel.as_str()));
        sql.push_str(&format!(" AND channel = ?{}", params.len()));
    }
    if let Some((created_at, id)) = &query.before {
        params.push(Box::new(format_utc(*created_at)));
        params.push(Box::new(id.clone()));
        let (at, id) = (params.len() - 1, params.len());
        sql.push_str(&format!(" AND (created_at, id) < (?{at}, ?{id})"));
    }
    params.push(Box::new(to_i64(
        query.limit.clamp(1, MAX_NOTICE_PAGE),
        "limit",
    )?));
    sql.push_str(&format!(
        " ORDER BY created_at DESC, id DESC LIMIT ?{}",
        params.len()
    ));
    let mut stmt = conn.prepare(&sql)?;
    let refs: Vec<&dyn ToSql> = params.iter().map(|p| p.as_ref()).collect();
    query_all(&mut stmt, refs.as_slice(), outbox_from_row)
}

pub(crate) fn get_notice(conn: &Connection, id: &str) -> StoreResult<Option<OutboxNotice>> {
    let mut stmt = conn.prepare_cached(&format!(
        "SELECT {OUTBOX_COLUMNS} FROM tollgate_outbox WHERE id = ?1"
    ))?;
    query_opt(&mut stmt, [id], outbox_from_row)
}

pub(crate) fn retry_notices(
    conn: &Connection,
    which: &RetryNotices,
    now: &str,
) -> StoreResult<u64> {
    // Enabling the webhook endpoints the notices go to comes first: the
    // retried notices would be held back again otherwise.
    const ENABLE: &str = "DELETE FROM tollgate_outbox_disabled WHERE endpoint IN \
         (SELECT target FROM tollgate_outbox WHERE channel = 'webhook' AND ";
    const RETRY: &str = "UPDATE tollgate_outbox SET status = 'pending', next_at = :now, \
         window_from = :now, lease_owner = NULL, lease_until = NULL WHERE ";
    let retried = match which {
        RetryNotices::One(id) => {
            let filter = "id = :id AND status IN ('failed', 'dead')";
            conn.prepare_cached(&format!("{ENABLE}{filter})"))?
                .execute(rusqlite::named_params! {":id": id})?;
            conn.prepare_cached(&format!("{RETRY}{filter}"))?
                .execute(rusqlite::named_params! {":id": id, ":now": now})?
        }
        RetryNotices::AllDead => {
            let filter = "status = 'dead'";
            conn.prepare_cached(&format!("{ENABLE}{filter})"))?
                .execute([])?;
            conn.prepare_cached(&format!("{RETRY}{filter}"))?
                .execute(rusqlite::named_params! {":now": now})?
        }
    };
    Ok(retried as u64)
}

pub(crate) fn outbox_stats(conn: &Connection) -> StoreResult<OutboxStats> {
    let mut stats = OutboxStats::default();
    let mut stmt =
        conn.prepare_cached("SELECT status, COUNT(*) FROM tollgate_outbox GROUP BY status")?;
    let counts = query_all(&mut stmt, [], |row| {
        let status: String = row.get(0)?;
        let count: i64 = row.get(1)?;
        Ok((status, u64::try_from(count).unwrap_or(0)))
    })?;
    for (status, count) in counts {
        match NoticeStatus::parse(&status) {
            Some(NoticeStatus::Pending) => stats.pending = count,
            Some(NoticeStatus::Failed) => stats.failed = count,
            Some(NoticeStatus::Sent) => stats.sent = count,
            Some(NoticeStatus::Dead) => stats.dead = count,
            None => {}
        }
    }
    let mut oldest = conn.prepare_cached(
        "SELECT MIN(created_at) FROM tollgate_outbox WHERE status IN ('pending', 'failed')",
    )?;
    let oldest: Option<String> = oldest.query_row([], |row| row.get(0))?;
    stats.oldest_undelivered = oldest.as_deref().and_then(crate::time::parse_utc);
    Ok(stats)
}

pub(crate) fn disable_endpoint(conn: &Connection, endpoint: &DisabledEndpoint) -> StoreResult<()> {
    let mut stmt = conn.prepare_cached(
        "INSERT INTO tollgate_outbox_disabled (endpoint, disabled_at, reason) VALUES (?1, ?2, ?3) \
         ON CONFLICT (endpoint) DO NOTHING",
    )?;
    stmt.execute((
        &endpoint.endpoint,
        format_utc(endpoint.disabled_at),
        &endpoint.reason,
    ))?;
    Ok(())
}

pub(crate) fn disabled_endpoints(conn: &Connection) -> StoreResult<Vec<DisabledEndpoint>> {
    let mut stmt = conn.prepare_cached(
        "SELECT endpoint, disabled_at, reason FROM tollgate_outbox_disabled ORDER BY endpoint",
    )?;
    query_all(&mut stmt, [], |row| {
        let endpoint: String = row.get(0)?;
        let r = RowReader::with_id(row, "tollgate_outbox_disabled", endpoint.clone());
        Ok(DisabledEndpoint {
            endpoint,
            disabled_at: r.time(1, "disabled_at")?,
            reason: r.string(2, "reason")?,
        })
    })
}
