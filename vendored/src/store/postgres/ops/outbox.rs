//! The outbox's SQL: notices written by the change they tell of, in its
//! transaction; a worker's lease (`FOR UPDATE SKIP LOCKED`: two workers
//! never lease one notice, nor wait for each other's rows) and settle; the
//! operators' reads.

use super::super::codec::outbox_from_row;
use super::*;
use crate::domain::notices::NoticeChannel;
use crate::domain::notices::{Notice, NoticeRoutes, NoticeStatus};
use crate::store::columns::OUTBOX_COLUMNS;
use crate::store::outbox::{
    DisabledEndpoint, LaneLimits, LaneStats, MAX_NOTICE_PAGE, NoticeQuery, NoticeWrite,
    OutboxNotice, OutboxStats, RetryNotices, SLACK_IN_ORDER, UnlabelledNotice,
};

/// PostgreSQL text cannot hold NUL: an error text that came from a remote
/// server loses any.
fn storable_text(text: &str) -> String {
    text.replace('\0', "")
}

/// Write `notices` in one statement, however many.
pub(crate) async fn insert_notices<C: GenericClient>(
    client: &C,
    notices: &[Notice],
) -> StoreResult<()> {
    if notices.is_empty() {
        return Ok(());
    }
    let stmt = client
        .prepare_cached(
            "INSERT INTO tollgate_outbox (id, key, run_id, event, channel, target, body, status, \
             attempts, next_at, created_at, window_from) \
             SELECT id, key, run_id, event, channel, target, body, 'pending', 0, at, at, at \
             FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], \
                         $6::text[], $7::jsonb[], $8::timestamptz[]) \
                  AS n(id, key, run_id, event, channel, target, body, at)",
        )
        .await?;
    let mut columns = NoticeColumns::default();
    for notice in notices {
        columns.id.push(notice.id.as_str());
        columns.key.push(notice.key.as_str());
        columns.run_id.push(notice.run_id.as_str());
        columns.event.push(notice.event.as_str());
        columns.channel.push(notice.channel.as_str());
        columns.target.push(storable_text(&notice.target));
        columns.body.push(to_json(&notice.body, "notice body")?);
        columns.at.push(notice.created_at);
    }
    let params: [Param<'_>; 8] = [
        &columns.id,
        &columns.key,
        &columns.run_id,
        &columns.event,
        &columns.channel,
        &columns.target,
        &columns.body,
        &columns.at,
    ];
    client.execute(&stmt, &params).await?;
    Ok(())
}

/// The notices of one insert, a column at a time (`unnest`'s arrays).
#[derive(Default)]
struct NoticeColumns<'n> {
    id: Vec<&'n str>,
    key: Vec<&'n str>,
    run_id: Vec<&'n str>,
    event: Vec<&'n str>,
    channel: Vec<&'n str>,
    target: Vec<String>,
    body: Vec<Value>,
    at: Vec<DateTime<Utc>>,
}

/// The routes stored with approval `key`'s pause.
pub(crate) async fn routes_of<C: GenericClient>(
    client: &C,
    key: &str,
) -> StoreResult<Option<NoticeRoutes>> {
    Ok(query_opt(
        client,
        "SELECT notify FROM tollgate_approvals WHERE key = $1",
        &[&key],
        |row| routes_column(row, 0, key),
    )
    .await?
    .flatten())
}

/// Write the notices `event` calls for on `record` (as this transaction
/// leaves it), to the routes stored with its pause. Nothing when the gate
/// notifies nobody: one read of the record's routes by key.
pub(crate) async fn notify_change<C: GenericClient>(
    client: &C,
    record: &ApprovalRecord,
    event: &Event,
) -> StoreResult<()> {
    let routes = routes_of(client, &record.key).await?;
    notify_routes(client, record, routes.as_ref(), event).await
}

/// [`notify_change`] for a caller that read the record's routes already
/// (a claim returns them with the record, saving the read).
pub(crate) async fn notify_routes<C: GenericClient>(
    client: &C,
    record: &ApprovalRecord,
    routes: Option<&NoticeRoutes>,
    event: &Event,
) -> StoreResult<()> {
    let Some(routes) = routes else {
        return Ok(());
    };
    insert_notices(
        client,
        &crate::store::outbox::notices_of(record, routes, event),
    )
    .await
}

/// Decode the `notify` column a query selected at `idx` for approval `key`.
pub(crate) fn routes_column(row: &Row, idx: usize, key: &str) -> StoreResult<Option<NoticeRoutes>> {
    RowReader::with_id(row, "tollgate_approvals", key.to_string())
        .json_opt::<NoticeRoutes>(idx, "notify")
}

pub(crate) async fn lease_notices<C: GenericClient>(
    client: &C,
    owner: &str,
    now: &DateTime<Utc>,
    until: &DateTime<Utc>,
    limit: usize,
) -> StoreResult<Vec<OutboxNotice>> {
    let limit = to_i64(limit, "limit")?;
    let mut leased = query_all(
        client,
        &format!(
            "UPDATE tollgate_outbox SET lease_owner = $1, lease_until = $3, {OPEN_WINDOW} \
             WHERE id IN (SELECT d.id FROM tollgate_outbox d \
                          WHERE d.status IN ('pending', 'failed') AND d.next_at <= $2 \
                            AND (d.lease_until IS NULL OR d.lease_until <= $2) \
                            AND {SLACK_IN_ORDER} \
                          ORDER BY d.next_at, d.id LIMIT $4 \
                          FOR UPDATE OF d SKIP LOCKED) \
             RETURNING {OUTBOX_COLUMNS}"
        ),
        &[&owner, now, until, &limit],
        outbox_from_row,
    )
    .await?;
    leased.sort_by(|a, b| (a.next_at, &a.notice.id).cmp(&(b.next_at, &b.notice.id)));
    Ok(leased)
}

/// What a lease sets besides the lease: a pending notice (never tried
/// since its creation or an operator's retry) opens its retry window now,
/// when a worker first takes it to send, so time queued behind a busy
/// lane is not counted against it. `$2` is the lease's `now`.
const OPEN_WINDOW: &str = "window_from = CASE WHEN status = 'pending' THEN $2 ELSE window_from END";

/// The advisory lock a lane lease holds for its transaction: leases by
/// lanes count the live leases of each lane, which two concurrent
/// transactions would both count before either commits; taken in turn,
/// each sees the other's. An arbitrary constant ("tg-lanes" in ASCII).
const LANE_LEASE_LOCK: i64 = 0x7467_2d6c_616e_6573;

/// See [`crate::store::Outbox::lease_lane_notices`]: inside the store's
/// transaction, after [`LANE_LEASE_LOCK`] (READ COMMITTED: the `UPDATE`
/// that follows the lock sees every lease committed before it; without
/// the lock, two workers counting a lane at once lease past its share and
/// may lease one notice twice, which a test of three handles caught). The
/// outer conditions on the row itself are checked again on the row as a
/// concurrent writer left it (a worker of an older version leasing
/// without the lock).
pub(crate) async fn lease_lane_notices<C: GenericClient>(
    client: &C,
    owner: &str,
    now: &DateTime<Utc>,
    until: &DateTime<Utc>,
    limits: LaneLimits,
) -> StoreResult<Vec<OutboxNotice>> {
    let total = to_i64(limits.total, "limit")?;
    let per_lane = to_i64(limits.per_lane, "per_lane")?;
    execute(
        client,
        "SELECT pg_advisory_xact_lock($1)",
        &[&LANE_LEASE_LOCK],
    )
    .await?;
    let mut leased = query_all(
        client,
        &format!(
            "UPDATE tollgate_outbox SET lease_owner = $1, lease_until = $3, {OPEN_WINDOW} \
             WHERE id IN ( \
               SELECT id FROM ( \
                 SELECT d.id, d.next_at, \
                   ROW_NUMBER() OVER (PARTITION BY d.channel, d.lane \
                                      ORDER BY d.next_at, d.id) AS place, \
                   COALESCE(b.busy, 0) AS busy \
                 FROM tollgate_outbox d \
                 LEFT JOIN (SELECT channel, lane, COUNT(*) AS busy FROM tollgate_outbox \
                            WHERE status IN ('pending', 'failed') AND lane IS NOT NULL \
                              AND lease_until > $2 \
                            GROUP BY channel, lane) b \
                   ON b.channel = d.channel AND b.lane = d.lane \
                 WHERE d.status IN ('pending', 'failed') AND d.next_at <= $2 \
                   AND d.lane IS NOT NULL \
                   AND (d.lease_until IS NULL OR d.lease_until <= $2) \
                   AND {SLACK_IN_ORDER} \
               ) queue \
               WHERE place + busy <= $5 \
               ORDER BY next_at, id LIMIT $4) \
               AND status IN ('pending', 'failed') \
               AND (lease_until IS NULL OR lease_until <= $2) \
             RETURNING {OUTBOX_COLUMNS}"
        ),
        &[&owner, now, until, &total, &per_lane],
        outbox_from_row,
    )
    .await?;
    leased.sort_by(|a, b| (a.next_at, &a.notice.id).cmp(&(b.next_at, &b.notice.id)));
    Ok(leased)
}

pub(crate) async fn unlabelled_notices<C: GenericClient>(
    client: &C,
    limit: usize,
) -> StoreResult<Vec<UnlabelledNotice>> {
    let limit = to_i64(limit, "limit")?;
    query_all(
        client,
        "SELECT id, key, channel, target FROM tollgate_outbox \
         WHERE lane IS NULL AND status IN ('pending', 'failed') \
         ORDER BY created_at, id LIMIT $1",
        &[&limit],
        |row| {
            let id: String = row.try_get(0)?;
            let r = RowReader::with_id(row, "tollgate_outbox", id.clone());
            Ok(UnlabelledNotice {
                id,
                key: r.string(1, "key")?,
                channel: r.parsed(2, "channel", NoticeChannel::parse)?,
                target: r.string(3, "target")?,
            })
        },
    )
    .await
}

/// Every label in one statement.
pub(crate) async fn label_notices<C: GenericClient>(
    client: &C,
    lanes: &[(String, String)],
) -> StoreResult<()> {
    let ids: Vec<&str> = lanes.iter().map(|(id, _)| id.as_str()).collect();
    let labels: Vec<String> = lanes.iter().map(|(_, lane)| storable_text(lane)).collect();
    execute(
        client,
        "UPDATE tollgate_outbox o SET lane = l.lane \
         FROM unnest($1::text[], $2::text[]) AS l(id, lane) \
         WHERE o.id = l.id AND o.lane IS NULL",
        &[&ids, &labels],
    )
    .await?;
    Ok(())
}

pub(crate) async fn lane_stats<C: GenericClient>(
    client: &C,
    now: &DateTime<Utc>,
) -> StoreResult<Vec<LaneStats>> {
    query_all(
        client,
        "SELECT channel, lane, \
           COUNT(*) FILTER (WHERE next_at <= $1 AND (lease_until IS NULL OR lease_until <= $1)), \
           COUNT(*) FILTER (WHERE lease_until > $1), \
           COUNT(*) FILTER (WHERE status = 'failed'), \
           MAX(attempts), \
           MIN(next_at) FILTER (WHERE next_at <= $1 \
                                  AND (lease_until IS NULL OR lease_until <= $1)) \
         FROM tollgate_outbox \
         WHERE status IN ('pending', 'failed') AND lane IS NOT NULL \
         GROUP BY channel, lane ORDER BY channel, lane",
        &[now],
        |row| {
            let endpoint: String = row.try_get(1)?;
            let r = RowReader::with_id(row, "tollgate_outbox", endpoint.clone());
            let count = |idx: usize| -> StoreResult<u64> {
                let n: i64 = row.try_get(idx)?;
                Ok(u64::try_from(n).unwrap_or(0))
            };
            let most: i64 = row.try_get(5)?;
            Ok(LaneStats {
                channel: r.parsed(0, "channel", NoticeChannel::parse)?,
                endpoint,
                waiting: count(2)?,
                in_flight: count(3)?,
                failing: count(4)?,
                most_attempts: u32::try_from(most).unwrap_or(u32::MAX),
                oldest_waiting: r.time_opt(6, "next_at")?,
            })
        },
    )
    .await
}

pub(crate) async fn settle_notice<C: GenericClient>(
    client: &C,
    id: &str,
    owner: &str,
    write: &NoticeWrite,
) -> StoreResult<bool> {
    let changed = match (write, write.undelivered()) {
        (NoticeWrite::Sent { at }, _) => {
            execute(
                client,
                "UPDATE tollgate_outbox SET status = 'sent', sent_at = $3, \
                 attempts = attempts + 1, last_error = NULL, lease_owner = NULL, \
                 lease_until = NULL WHERE id = $1 AND lease_owner = $2",
                &[&id, &owner, at],
            )
            .await?
        }
        (_, Some((status, error, next_at))) => {
            let error = storable_text(error);
            execute(
                client,
                "UPDATE tollgate_outbox SET status = $5, next_at = $3, \
                 attempts = attempts + 1, last_error = $4, lease_owner = NULL, \
                 lease_until = NULL WHERE id = $1 AND lease_owner = $2",
                &[&id, &owner, &next_at, &error, &status.as_str()],
            )
            .await?
        }
        // Not tried: neither the attempts nor the error nor the status
        // change (a pending notice's window opens at a later lease).
        (NoticeWrite::Postponed { next_at }, _) => {
            execute(
                client,
                "UPDATE tollgate_outbox SET next_at = $3, lease_owner = NULL, \
                 lease_until = NULL WHERE id = $1 AND lease_owner = $2",
                &[&id, &owner, next_at],
            )
            .await?
        }
        (_, None) => 0,
    };
    Ok(changed == 1)
}

pub(crate) async fn list_notices<C: GenericClient>(
    client: &C,
    query: &NoticeQuery,
) -> StoreResult<Vec<OutboxNotice>> {
    let statuses: Vec<&str> = query.statuses.iter().map(|s| s.as_str()).collect();
    let channel = query.channel.map(|c| c.as_str());
    let (before_at, before_id) = match &query.before {
        Some((at, id)) => (Some(*at), Some(id.as_str())),
        None => (None, None),
    };
    let limit = to_i64(query.limit.clamp(1, MAX_NOTICE_PAGE), "limit")?;
    query_all(
        client,
        &format!(
            "SELECT {OUTBOX_COLUMNS} FROM tollgate_outbox \
             WHERE (cardinality($1::text[]) = 0 OR status = ANY($1)) \
               AND ($2::text IS NULL OR key = $2) \
               AND ($3::text IS NULL OR channel = $3) \
               AND ($4::timestamptz IS NULL OR (created_at, id) < ($4, $5::text)) \
             ORDER BY created_at DESC, id DESC LIMIT $6"
        ),
        &[
            &statuses, &query.key, &channel, &before_at, &before_id, &limit,
        ],
        outbox_from_row,
    )
    .await
}

pub(crate) async fn get_notice<C: GenericClient>(
    client: &C,
    id: &str,
) -> StoreResult<Option<OutboxNotice>> {
    query_opt(
        client,
        &format!("SELECT {OUTBOX_COLUMNS} FROM tollgate_outbox WHERE id = $1"),
        &[&id],
        outbox_from_row,
    )
    .await
}

pub(crate) async fn retry_notices<C: GenericClient>(
    client: &C,
    which: &RetryNotices,
    now: &DateTime<Utc>,
) -> StoreResult<u64> {
    // `$1` is the one notice (NULL: every dead one).
    let id = match which {
        RetryNotices::One(id) => Some(id.as_str()),
        RetryNotices::AllDead => None,
    };
    const WHICH: &str = "(($1::text IS NOT NULL AND id = $1 AND status IN ('failed', 'dead')) \
                         OR ($1::text IS NULL AND status = 'dead'))";
    // Enabling the webhook endpoints the notices go to comes first: the
    // retried notices would be held back again otherwise.
    execute(
        client,
        &format!(
            "DELETE FROM tollgate_outbox_disabled WHERE endpoint IN \
             (SELECT target FROM tollgate_outbox WHERE channel = 'webhook' AND {WHICH})"
        ),
        &[&id],
    )
    .await?;
    execute(
        client,
        &format!(
            "UPDATE tollgate_outbox SET status = 'pending', next_at = $2, window_from = $2, \
             lease_owner = NULL, lease_until = NULL WHERE {WHICH}"
        ),
        &[&id, now],
    )
    .await
}

pub(crate) async fn outbox_stats<C: GenericClient>(client: &C) -> StoreResult<OutboxStats> {
    let mut stats = OutboxStats::default();
    let counts = query_all(
        client,
        "SELECT status, COUNT(*) FROM tollgate_outbox GROUP BY status",
        &[],
        |row| {
            let status: String = row.try_get(0)?;
            let count: i64 = row.try_get(1)?;
            Ok((status, u64::try_from(count).unwrap_or(0)))
        },
    )
    .await?;
    for (status, count) in counts {
        match NoticeStatus::parse(&status) {
            Some(NoticeStatus::Pending) => stats.pending = count,
            Some(NoticeStatus::Failed) => stats.failed = count,
            Some(NoticeStatus::Sent) => stats.sent = count,
            Some(NoticeStatus::Dead) => stats.dead = count,
            None => {}
        }
    }
    stats.oldest_undelivered = query_opt(
        client,
        "SELECT MIN(created_at) FROM tollgate_outbox WHERE status IN ('pending', 'failed')",
        &[],
        |row| Ok(row.try_get::<_, Option<DateTime<Utc>>>(0)?),
    )
    .await?
    .flatten();
    Ok(stats)
}

pub(crate) async fn disable_endpoint<C: GenericClient>(
    client: &C,
    endpoint: &DisabledEndpoint,
) -> StoreResult<()> {
    let reason = storable_text(&endpoint.reason);
    execute(
        client,
        "INSERT INTO tollgate_outbox_disabled (endpoint, disabled_at, reason) \
         VALUES ($1, $2, $3) ON CONFLICT (endpoint) DO NOTHING",
        &[&endpoint.endpoint, &endpoint.disabled_at, &reason],
    )
    .await?;
    Ok(())
}

pub(crate) async fn disabled_endpoints<C: GenericClient>(
    client: &C,
) -> StoreResult<Vec<DisabledEndpoint>> {
    query_all(
        client,
        "SELECT endpoint, disabled_at, reason FROM tollgate_outbox_disabled ORDER BY endpoint",
        &[],
        |row| {
            let endpoint: String = row.try_get(0)?;
            let r = RowReader::with_id(row, "tollgate_outbox_disabled", endpoint.clone());
            Ok(DisabledEndpoint {
                endpoint,
                disabled_at: r.time(1, "disabled_at")?,
                reason: r.string(2, "reason")?,
            })
        },
    )
    .await
}
