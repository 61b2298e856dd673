//! The outbox's SQL: notices written by the change they tell of, in its
//! transaction; a worker's lease and settle; the operators' reads.

use super::*;
use crate::domain::notices::NoticeChannel;
use crate::domain::notices::{Notice, NoticeRoutes, NoticeStatus};
use crate::store::outbox::{
    DisabledEndpoint, LaneLimits, LaneStats, MAX_NOTICE_PAGE, NoticeQuery, NoticeWrite,
    OutboxNotice, OutboxStats, RetryNotices, SLACK_IN_ORDER, UnlabelledNotice,
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
    let mut stmt = conn.prepare_cached(&format!(
        "SELECT EXISTS (SELECT 1 FROM tollgate_outbox d \
             WHERE d.status IN ('pending', 'failed') AND d.next_at <= ?1 \
               AND (d.lease_until IS NULL OR d.lease_until <= ?1) AND {SLACK_IN_ORDER})"
    ))?;
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
        "UPDATE tollgate_outbox SET lease_owner = ?1, lease_until = ?3, {OPEN_WINDOW} \
         WHERE id IN (SELECT d.id FROM tollgate_outbox d \
                      WHERE d.status IN ('pending', 'failed') AND d.next_at <= ?2 \
                        AND (d.lease_until IS NULL OR d.lease_until <= ?2) \
                        AND {SLACK_IN_ORDER} \
                      ORDER BY d.next_at, d.id LIMIT ?4) \
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

/// What a lease sets besides the lease: a pending notice (never tried
/// since its creation or an operator's retry) opens its retry window now,
/// when a worker first takes it to send, so time queued behind a busy
/// lane is not counted against it. `?2` is the lease's `now`.
const OPEN_WINDOW: &str = "window_from = CASE WHEN status = 'pending' THEN ?2 ELSE window_from END";

/// Whether some labelled notice is due at `now`, not leased, in a lane
/// with a free slot: the cheap read before a lease takes the write lock.
pub(crate) fn any_leasable_notice(
    conn: &Connection,
    now: &str,
    per_lane: usize,
) -> StoreResult<bool> {
    let mut stmt = conn.prepare_cached(&format!(
        "SELECT EXISTS (SELECT 1 FROM ({LANE_QUEUE} AND {SLACK_IN_ORDER}) \
         WHERE place + busy <= ?3)"
    ))?;
    Ok(stmt.query_row((now, now, to_i64(per_lane, "per_lane")?), |row| row.get(0))?)
}

/// The due, unleased, labelled notices, each with its place in its lane's
/// queue (1 for the oldest due) and how many of its lane's notices are
/// leased now by any worker. `?2` is now. It ends in its `WHERE`, so a
/// user adds conditions on `d` (`AND {SLACK_IN_ORDER}`).
const LANE_QUEUE: &str = "SELECT d.id, d.next_at, \
       ROW_NUMBER() OVER (PARTITION BY d.channel, d.lane ORDER BY d.next_at, d.id) AS place, \
       COALESCE(b.busy, 0) AS busy \
     FROM tollgate_outbox d \
     LEFT JOIN (SELECT channel, lane, COUNT(*) AS busy FROM tollgate_outbox \
                WHERE status IN ('pending', 'failed') AND lane IS NOT NULL \
                  AND lease_until > ?2 \
                GROUP BY channel, lane) b \
       ON b.channel = d.channel AND b.lane = d.lane \
     WHERE d.status IN ('pending', 'failed') AND d.next_at <= ?2 AND d.lane IS NOT NULL \
       AND (d.lease_until IS NULL OR d.lease_until <= ?2)";

/// See [`crate::store::Outbox::lease_lane_notices`]: one `UPDATE ...
/// RETURNING` in the writer's transaction, which every process sharing
/// the file takes in turn, so the lanes' counts of live leases hold
/// across processes.
pub(crate) fn lease_lane_notices(
    conn: &Connection,
    owner: &str,
    now: &str,
    until: &str,
    limits: LaneLimits,
) -> StoreResult<Vec<OutboxNotice>> {
    let mut stmt = conn.prepare_cached(&format!(
        "UPDATE tollgate_outbox SET lease_owner = ?1, lease_until = ?3, {OPEN_WINDOW} \
         WHERE id IN (SELECT id FROM ({LANE_QUEUE} AND {SLACK_IN_ORDER}) \
                      WHERE place + busy <= ?5 \
                      ORDER BY next_at, id LIMIT ?4) \
         RETURNING {OUTBOX_COLUMNS}"
    ))?;
    let mut leased = query_all(
        &mut stmt,
        (
            owner,
            now,
            until,
            to_i64(limits.total, "limit")?,
            to_i64(limits.per_lane, "per_lane")?,
        ),
        outbox_from_row,
    )?;
    leased.sort_by(|a, b| (a.next_at, &a.notice.id).cmp(&(b.next_at, &b.notice.id)));
    Ok(leased)
}

pub(crate) fn unlabelled_notices(
    conn: &Connection,
    limit: usize,
) -> StoreResult<Vec<UnlabelledNotice>> {
    let mut stmt = conn.prepare_cached(
        "SELECT id, key, channel, target FROM tollgate_outbox \
         WHERE lane IS NULL AND status IN ('pending', 'failed') \
         ORDER BY created_at, id LIMIT ?1",
    )?;
    query_all(&mut stmt, [to_i64(limit, "limit")?], |row| {
        let id: String = row.get(0)?;
        let r = RowReader::with_id(row, "tollgate_outbox", id.clone());
        Ok(UnlabelledNotice {
            id,
            key: r.string(1, "key")?,
            channel: r.parsed(2, "channel", NoticeChannel::parse)?,
            target: r.string(3, "target")?,
        })
    })
}

pub(crate) fn label_notices(conn: &Connection, lanes: &[(String, String)]) -> StoreResult<()> {
    let mut stmt =
        conn.prepare_cached("UPDATE tollgate_outbox SET lane = ?2 WHERE id = ?1 AND lane IS NULL")?;
    for (id, lane) in lanes {
        stmt.execute((id, lane))?;
    }
    Ok(())
}

pub(crate) fn lane_stats(conn: &Connection, now: &str) -> StoreResult<Vec<LaneStats>> {
    let mut stmt = conn.prepare_cached(
        "SELECT channel, lane, \
           SUM(CASE WHEN next_at <= ?1 AND (lease_until IS NULL OR lease_until <= ?1) \
               THEN 1 ELSE 0 END), \
           SUM(CASE WHEN lease_until > ?1 THEN 1 ELSE 0 END), \
           SUM(CASE WHEN status = 'failed' THEN 1 ELSE 0 END), \
           MAX(attempts), \
           MIN(CASE WHEN next_at <= ?1 AND (lease_until IS NULL OR lease_until <= ?1) \
               THEN next_at END) \
         FROM tollgate_outbox \
         WHERE status IN ('pending', 'failed') AND lane IS NOT NULL \
         GROUP BY channel, lane ORDER BY channel, lane",
    )?;
    query_all(&mut stmt, [now], |row| {
        let endpoint: String = row.get(1)?;
        let r = RowReader::with_id(row, "tollgate_outbox", endpoint.clone());
        let count = |idx: usize| -> StoreResult<u64> {
            let n: i64 = row.get(idx)?;
            Ok(u64::try_from(n).unwrap_or(0))
        };
        let most: i64 = row.get(5)?;
        Ok(LaneStats {
            channel: r.parsed(0, "channel", NoticeChannel::parse)?,
            endpoint,
            waiting: count(2)?,
            in_flight: count(3)?,
            failing: count(4)?,
            most_attempts: u32::try_from(most).unwrap_or(u32::MAX),
            oldest_waiting: r.time_opt(6, "next_at")?,
        })
    })
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
        // Not tried: neither the attempts nor the error nor the status
        // change (a pending notice's window opens at a later lease).
        (NoticeWrite::Postponed { next_at }, _) => conn
            .prepare_cached(
                "UPDATE tollgate_outbox SET next_at = ?3, lease_owner = NULL, lease_until = NULL \
                 WHERE id = ?1 AND lease_owner = ?2",
            )?
            .execute((id, owner, format_utc(*next_at)))?,
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
    stats.oldest_undelivered = oldest.as_deref().and_then(crate::support::time::parse_utc);
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
