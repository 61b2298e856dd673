//! The SQL of each store operation. Writers run inside the transaction the
//! store opened (READ COMMITTED, the PostgreSQL default); nothing here
//! begins or commits. Statements are prepared once per pooled connection.

use chrono::{DateTime, Utc};
use deadpool_postgres::GenericClient;
use serde_json::Value;
use tokio_postgres::Row;
use tokio_postgres::error::SqlState;
use tokio_postgres::types::ToSql;

use super::codec::{
    APPROVAL_COLUMN_COUNT, APPROVAL_COLUMNS, RUN_COLUMN_COUNT, RUN_COLUMNS, RowReader,
    approval_from_row, checked, event_from_row, run_from_row, text_json, to_i64, to_json,
};
use super::notify;
use crate::events::{Event, EventKind};
use crate::pending_approval::{ApprovalError, ApprovalRecord, ApprovalStatus, Claim};
use crate::run_state::{JournalEntry, Lease, OwnedRun, RunRecord, RunStatus};
use crate::store::columns::Columns;
use crate::store::{
    ApprovalFilter, ApprovalPage, ApprovalPager, ApprovalQuery, CancelRun, Cancelled, Claimed,
    Pause, PendingPage, PendingQuery, RunEnd, RunQuery, RunsPage, StoreError, StoreResult,
    StuckClaim, UnreadableRow, cursor, like_pattern, resolved_event,
};

type Param<'a> = &'a (dyn ToSql + Sync);

fn is_unique_violation(e: &tokio_postgres::Error) -> bool {
    e.code() == Some(&SqlState::UNIQUE_VIOLATION)
}

pub(super) async fn query_opt<C: GenericClient, T>(
    client: &C,
    sql: &str,
    params: &[Param<'_>],
    decode: impl Fn(&Row) -> StoreResult<T>,
) -> StoreResult<Option<T>> {
    let stmt = client.prepare_cached(sql).await?;
    client
        .query_opt(&stmt, params)
        .await?
        .as_ref()
        .map(decode)
        .transpose()
}

pub(super) async fn query_all<C: GenericClient, T>(
    client: &C,
    sql: &str,
    params: &[Param<'_>],
    decode: impl Fn(&Row) -> StoreResult<T>,
) -> StoreResult<Vec<T>> {
    let stmt = client.prepare_cached(sql).await?;
    client
        .query(&stmt, params)
        .await?
        .iter()
        .map(decode)
        .collect()
}

/// Decode every row, setting aside those that do not decode (by their key,
/// column 0) instead of failing on the first: one damaged row must not hide,
/// or stop the sweep of, all the others.
pub(super) fn decode_skipping<T>(
    rows: &[Row],
    decode: impl Fn(&Row) -> StoreResult<T>,
) -> StoreResult<(Vec<T>, Vec<UnreadableRow>)> {
    let (mut good, mut bad) = (Vec::new(), Vec::new());
    for row in rows {
        match decode(row) {
            Ok(value) => good.push(value),
            Err(e @ StoreError::Corrupt(_)) => bad.push(UnreadableRow::new(&row_key(row), &e)),
            Err(e) => return Err(e),
        }
    }
    Ok((good, bad))
}

fn row_key(row: &Row) -> String {
    row.try_get::<_, String>(0).unwrap_or_else(|_| "?".into())
}

pub(super) async fn execute<C: GenericClient>(
    client: &C,
    sql: &str,
    params: &[Param<'_>],
) -> StoreResult<u64> {
    let stmt = client.prepare_cached(sql).await?;
    Ok(client.execute(&stmt, params).await?)
}

// ------------------------------------------------------------------- writes

pub(super) async fn insert_run<C: GenericClient>(client: &C, run: &RunRecord) -> StoreResult<()> {
    let input = checked(&run.input, "run input")?;
    let trigger = checked(&run.trigger, "run trigger")?;
    let outputs = to_json(&run.outputs, "run outputs")?;
    let error = text_json(run.error.as_deref());
    let stmt = client
        .prepare_cached(
            "INSERT INTO tollgate_runs (id, agent_id, spec_hash, status, input, \"trigger\", \
             outputs, error, created_at, updated_at, owner, lease_until) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)",
        )
        .await?;
    let params: [Param<'_>; 12] = [
        &run.id,
        &run.agent_id,
        &run.spec_hash,
        &run.status.as_str(),
        input,
        trigger,
        &outputs,
        &error,
        &run.created_at,
        &run.updated_at,
        &run.owner,
        &run.lease_until,
    ];
    client.execute(&stmt, &params).await.map_err(|e| {
        if is_unique_violation(&e) {
            StoreError::Conflict(format!("run {} already exists", run.id))
        } else {
            e.into()
        }
    })?;
    Ok(())
}

pub(super) async fn insert_events<C: GenericClient>(
    client: &C,
    run_id: &str,
    events: &[Event],
) -> StoreResult<()> {
    if events.is_empty() {
        return Ok(());
    }
    let stmt = client
        .prepare_cached("INSERT INTO tollgate_run_events (run_id, seq, event) VALUES ($1, $2, $3)")
        .await?;
    for event in events {
        let seq = to_i64(event.seq, "event seq")?;
        let json = to_json(event, "event")?;
        client
            .execute(&stmt, &[&run_id, &seq, &json])
            .await
            .map_err(|e| {
                if is_unique_violation(&e) {
                    StoreError::Conflict(format!("run {run_id} already has an event {seq}"))
                } else {
                    e.into()
                }
            })?;
    }
    Ok(())
}

pub(super) async fn require_run<C: GenericClient>(client: &C, run_id: &str) -> StoreResult<()> {
    let found = query_opt(
        client,
        "SELECT 1 FROM tollgate_runs WHERE id = $1",
        &[&run_id],
        |_| Ok(()),
    )
    .await?;
    found.ok_or_else(|| StoreError::RunNotFound(run_id.to_string()))
}

pub(super) async fn pause_run<C: GenericClient>(client: &C, pause: &Pause) -> StoreResult<()> {
    let record = &pause.record;
    let outputs = to_json(&record.outputs, "approval outputs")?;
    // A pause is a durable point: the driver lets go of the run.
    let changed = execute(
        client,
        "UPDATE tollgate_runs SET status = $2, outputs = $3, updated_at = $4, \
         owner = NULL, lease_until = NULL \
         WHERE id = $1 AND ($5::text IS NULL OR (status = 'running' AND owner = $5))",
        &[
            &record.run_id,
            &RunStatus::AwaitingApproval.as_str(),
            &outputs,
            &pause.at,
            &pause.owner,
        ],
    )
    .await?;
    if changed == 0 {
        return Err(fence_failed(client, &record.run_id, pause.owner.as_deref()).await);
    }
    insert_approval(client, record, &outputs).await?;
    notify::send(client, &record.key, &record.run_id, record.status).await
}

async fn insert_approval<C: GenericClient>(
    client: &C,
    r: &ApprovalRecord,
    outputs: &Value,
) -> StoreResult<()> {
    let step_index = to_i64(r.step_index, "step index")?;
    let payload = checked(&r.payload, "approval payload")?;
    let input = checked(&r.input, "approval input")?;
    let trigger = checked(&r.trigger, "approval trigger")?;
    if let Some(data) = &r.decision_data {
        checked(data, "decision data")?;
    }
    let (message, decided_by) = (
        text_json(r.message.as_deref()),
        text_json(r.decided_by.as_deref()),
    );
    let stmt = client
        .prepare_cached(&format!(
            "INSERT INTO tollgate_approvals ({APPROVAL_COLUMNS}) VALUES \
             ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18)"
        ))
        .await?;
    let params: [Param<'_>; APPROVAL_COLUMN_COUNT] = [
        &r.key,
        &r.run_id,
        &r.agent_id,
        &r.spec_hash,
        &step_index,
        &r.step_id,
        &r.phase.as_str(),
        &message,
        payload,
        outputs,
        input,
        trigger,
        &r.status.as_str(),
        &r.decision_data,
        &decided_by,
        &r.decided_at,
        &r.created_at,
        &r.expires_at,
    ];
    client.execute(&stmt, &params).await.map_err(|e| {
        if is_unique_violation(&e) {
            StoreError::Conflict(format!("an approval with key {} already exists", r.key))
        } else {
            e.into()
        }
    })?;
    Ok(())
}

pub(super) async fn end_run<C: GenericClient>(client: &C, end: &RunEnd) -> StoreResult<()> {
    let outputs = to_json(&end.outputs, "run outputs")?;
    let error = text_json(end.error.as_deref());
    // An end is a durable point: the driver lets go of the run.
    let changed = execute(
        client,
        "UPDATE tollgate_runs SET status = $2, outputs = $3, error = $4, updated_at = $5, \
         owner = NULL, lease_until = NULL \
         WHERE id = $1 AND ($6::text IS NULL OR (status = 'running' AND owner = $6))",
        &[
            &end.run_id,
            &end.status.as_str(),
            &outputs,
            &error,
            &end.at,
            &end.owner,
        ],
    )
    .await?;
    if changed == 0 {
        return Err(fence_failed(client, &end.run_id, end.owner.as_deref()).await);
    }
    Ok(())
}

/// Why a fenced write changed nothing: no such run, or another driver (or
/// none, or another status) holds it.
async fn fence_failed<C: GenericClient>(
    client: &C,
    run_id: &str,
    owner: Option<&str>,
) -> StoreError {
    let found = query_opt(
        client,
        "SELECT status, owner FROM tollgate_runs WHERE id = $1",
        &[&run_id],
        |row| {
            Ok((
                row.try_get::<_, String>(0)?,
                row.try_get::<_, Option<String>>(1)?,
            ))
        },
    )
    .await;
    match (found, owner) {
        (Ok(Some((status, holder))), Some(owner)) => {
            crate::store::not_owner(run_id, owner, &status, holder.as_deref())
        }
        (Ok(_), _) => StoreError::RunNotFound(run_id.to_string()),
        (Err(e), _) => e,
    }
}

/// A run's final status (expired, cancelled): nobody drives it any more,
/// so its owner and lease go too.
async fn set_run_status<C: GenericClient>(
    client: &C,
    run_id: &str,
    status: RunStatus,
    at: &DateTime<Utc>,
) -> StoreResult<()> {
    execute(
        client,
        "UPDATE tollgate_runs SET status = $2, updated_at = $3, owner = NULL, lease_until = NULL \
         WHERE id = $1",
        &[&run_id, &status.as_str(), at],
    )
    .await?;
    Ok(())
}

/// The run's next event number. Safe without a lock of its own: every
/// caller holds the row lock of the run's approval record (the claim or the
/// sweep just updated it), and a paused run writes no events of its own.
async fn next_seq<C: GenericClient>(client: &C, run_id: &str) -> StoreResult<u64> {
    let last: i64 = query_opt(
        client,
        "SELECT COALESCE(MAX(seq), 0) FROM tollgate_run_events WHERE run_id = $1",
        &[&run_id],
        |row| {
            row.try_get(0)
                .map_err(|e| StoreError::Database(e.to_string()))
        },
    )
    .await?
    .unwrap_or(0);
    Ok(u64::try_from(last).unwrap_or(0) + 1)
}

/// The claim's conditional write. Approve and modify also require the spec
/// the run paused with; a reject is allowed under any spec.
const CLAIM_SAME_SPEC: &str = "UPDATE tollgate_approvals \
     SET status = $1, decision_data = $2, decided_by = $3, decided_at = $4 \
     WHERE key = $5 AND status = 'PENDING' AND expires_at > $4 AND spec_hash = $6 \
     RETURNING ";
const CLAIM_ANY_SPEC: &str = "UPDATE tollgate_approvals \
     SET status = $1, decision_data = $2, decided_by = $3, decided_at = $4 \
     WHERE key = $5 AND status = 'PENDING' AND expires_at > $4 \
     RETURNING ";

/// One conditional UPDATE decides; under READ COMMITTED a concurrent
/// claimer of the same key blocks on the row lock, then re-checks the WHERE
/// against the committed row and matches nothing. Claims of different keys
/// lock different rows and never wait for each other.
pub(super) async fn claim<C: GenericClient>(client: &C, claim: &Claim) -> StoreResult<Claimed> {
    let status = claim.decision.status().as_str();
    let data = claim.decision.data();
    if let Some(data) = &data {
        checked(data, "decision data")?;
    }
    let same_spec = claim.decision.requires_same_spec();
    let head = if same_spec {
        CLAIM_SAME_SPEC
    } else {
        CLAIM_ANY_SPEC
    };
    let sql = format!("{head}{APPROVAL_COLUMNS}");
    let decided_by = Value::String(claim.decided_by.clone());
    let common: [Param<'_>; 5] = [&status, &data, &decided_by, &claim.now, &claim.key];
    let mut params = common.to_vec();
    if same_spec {
        params.push(&claim.spec_hash);
    }
    let Some(record) = query_opt(client, &sql, &params, approval_from_row).await? else {
        let current = get_approval(client, &claim.key).await?;
        return Err(
            ApprovalError::explain_failed_claim(&claim.key, current.as_ref(), claim).into(),
        );
    };
    let event = resolved_event(&record, claim, next_seq(client, &record.run_id).await?);
    if let Some((end, ended)) = claim.run_end(&record, event.seq + 1) {
        end_run(client, &end).await?;
        let mut events = Vec::with_capacity(ended.len() + 1);
        events.push(event.clone());
        events.extend(ended);
        insert_events(client, &record.run_id, &events).await?;
    } else {
        // The claimer (if any) drives the run on from this commit: it owns it.
        let (owner, until) = match claim.lease() {
            Some(lease) => (Some(lease.owner.as_str()), Some(lease.until)),
            None => (None, None),
        };
        execute(
            client,
            "UPDATE tollgate_runs SET status = 'running', updated_at = $2, owner = $3, \
             lease_until = $4 WHERE id = $1",
            &[&record.run_id, &claim.now, &owner, &until],
        )
        .await?;
        insert_events(client, &record.run_id, std::slice::from_ref(&event)).await?;
    }
    notify::send(client, &record.key, &record.run_id, record.status).await?;
    Ok(Claimed { record, event })
}

/// Every overdue PENDING record becomes EXPIRED, its run `expired`. Rows
/// another transaction holds (a claim in flight, another node's sweep) are
/// skipped, not waited for: each record is expired by exactly one sweep,
/// and two sweeps never deadlock on each other's rows.
pub(super) async fn expire_due<C: GenericClient>(
    client: &C,
    now: &DateTime<Utc>,
) -> StoreResult<(Vec<ApprovalRecord>, Vec<UnreadableRow>)> {
    // Lock the due rows first and decode them: a row that does not decode
    // is left as it is (and reported), so the others are still expired.
    let select = client
        .prepare_cached(&format!(
            "SELECT {APPROVAL_COLUMNS} FROM tollgate_approvals \
             WHERE status = 'PENDING' AND expires_at <= $1 \
             FOR UPDATE SKIP LOCKED"
        ))
        .await?;
    let rows = client.query(&select, &[now]).await?;
    let (due, unreadable) = decode_skipping(&rows, approval_from_row)?;
    let mut expired = Vec::with_capacity(due.len());
    for mut record in due {
        let changed = execute(
            client,
            "UPDATE tollgate_approvals SET status = 'EXPIRED' \
             WHERE key = $1 AND status = 'PENDING'",
            &[&record.key],
        )
        .await?;
        if changed == 1 {
            record.status = ApprovalStatus::Expired;
            expired.push(record);
        }
    }
    // The sweep reports oldest first.
    expired.sort_by(|a, b| (a.created_at, &a.key).cmp(&(b.created_at, &b.key)));
    for record in &expired {
        let event = Event {
            run_id: record.run_id.clone(),
            seq: next_seq(client, &record.run_id).await?,
            at: *now,
            kind: EventKind::RunExpired {
                key: record.key.clone(),
            },
        };
        set_run_status(client, &record.run_id, RunStatus::Expired, now).await?;
        insert_events(client, &record.run_id, std::slice::from_ref(&event)).await?;
        notify::send(client, &record.key, &record.run_id, ApprovalStatus::Expired).await?;
    }
    Ok((expired, unreadable))
}

/// True when some PENDING record is overdue (a cheap read before a sweep).
pub(super) async fn any_due<C: GenericClient>(
    client: &C,
    now: &DateTime<Utc>,
) -> StoreResult<bool> {
    let found = query_opt(
        client,
        "SELECT 1 FROM tollgate_approvals WHERE status = 'PENDING' AND expires_at <= $1 LIMIT 1",
        &[now],
        |_| Ok(()),
    )
    .await?;
    Ok(found.is_some())
}

pub(super) async fn claim_key<C: GenericClient>(
    client: &C,
    key: &str,
    owner: &str,
    now: &DateTime<Utc>,
    expires_at: &DateTime<Utc>,
) -> StoreResult<bool> {
    // Insert, or take over a claim whose time is up; a live claim makes the
    // upsert's WHERE false and changes nothing. Two racers on a new key: the
    // second waits for the first's commit, then takes the conflict path.
    let changed = execute(
        client,
        "INSERT INTO tollgate_claims (key, owner, expires_at) VALUES ($1, $2, $4) \
         ON CONFLICT (key) DO UPDATE SET owner = excluded.owner, expires_at = excluded.expires_at \
         WHERE tollgate_claims.expires_at <= $3",
        &[&key, &owner, now, expires_at],
    )
    .await?;
    Ok(changed == 1)
}

pub(super) async fn release_key<C: GenericClient>(
    client: &C,
    key: &str,
    owner: &str,
) -> StoreResult<()> {
    // Only the owner's own claim: one that expired and was taken over by
    // another run belongs to that run now.
    execute(
        client,
        "DELETE FROM tollgate_claims WHERE key = $1 AND owner = $2",
        &[&key, &owner],
    )
    .await?;
    Ok(())
}

// -------------------------------------------------------------------- reads

pub(super) async fn get_approval<C: GenericClient>(
    client: &C,
    key: &str,
) -> StoreResult<Option<ApprovalRecord>> {
    query_opt(
        client,
        &format!("SELECT {APPROVAL_COLUMNS} FROM tollgate_approvals WHERE key = $1"),
        &[&key],
        approval_from_row,
    )
    .await
}

/// The records of `keys` that exist (the watcher's catch-up), in one query.
pub(super) async fn approvals_by_key<C: GenericClient>(
    client: &C,
    keys: &[String],
) -> StoreResult<Vec<ApprovalRecord>> {
    query_all(
        client,
        &format!("SELECT {APPROVAL_COLUMNS} FROM tollgate_approvals WHERE key = ANY($1)"),
        &[&keys],
        approval_from_row,
    )
    .await
}

pub(super) async fn get_run<C: GenericClient>(
    client: &C,
    run_id: &str,
) -> StoreResult<Option<RunRecord>> {
    query_opt(
        client,
        &format!("SELECT {RUN_COLUMNS} FROM tollgate_runs WHERE id = $1"),
        &[&run_id],
        run_from_row,
    )
    .await
}

pub(super) async fn run_events<C: GenericClient>(
    client: &C,
    run_id: &str,
    after_seq: u64,
) -> StoreResult<Vec<Event>> {
    // No stored seq exceeds i64::MAX, so a larger `after_seq` means "none".
    let after = i64::try_from(after_seq).unwrap_or(i64::MAX);
    query_all(
        client,
        "SELECT run_id, seq, event FROM tollgate_run_events \
         WHERE run_id = $1 AND seq > $2 ORDER BY seq",
        &[&run_id, &after],
        event_from_row,
    )
    .await
}

pub(super) async fn pending_for_run<C: GenericClient>(
    client: &C,
    run_id: &str,
    now: &DateTime<Utc>,
) -> StoreResult<Option<ApprovalRecord>> {
    query_opt(
        client,
        &format!(
            "SELECT {APPROVAL_COLUMNS} FROM tollgate_approvals \
             WHERE run_id = $1 AND status = 'PENDING' AND expires_at > $2 \
             ORDER BY created_at DESC, key DESC LIMIT 1"
        ),
        &[&run_id, now],
        approval_from_row,
    )
    .await
}

/// The key of the run's latest approval, whatever its status (see
/// `Approvals::latest_approval_key`): `tollgate_approvals_run_idx` finds
/// the run's few rows.
pub(super) async fn latest_approval_key<C: GenericClient>(
    client: &C,
    run_id: &str,
) -> StoreResult<Option<String>> {
    query_opt(
        client,
        "SELECT key FROM tollgate_approvals WHERE run_id = $1 \
         ORDER BY created_at DESC, step_index DESC, key DESC LIMIT 1",
        &[&run_id],
        |row| Ok(row.try_get(0)?),
    )
    .await
}

/// One page of unexpired PENDING records, newest first. Rows that do not
/// decode take their place in the page as `unreadable`, by key.
pub(super) async fn list_pending<C: GenericClient>(
    client: &C,
    query: &PendingQuery,
) -> StoreResult<PendingPage> {
    let after = query.cursor.as_deref().map(decode_cursor).transpose()?;
    let limit = query.limit.max(1);
    // One row more than asked tells whether another page exists.
    let fetch = to_i64(limit.saturating_add(1), "page size")?;

    let mut sql = format!(
        "SELECT {APPROVAL_COLUMNS} FROM tollgate_approvals \
         WHERE status = 'PENDING' AND expires_at > $1"
    );
    let mut params: Vec<Param<'_>> = vec![&query.now];
    if let Some(agent) = &query.agent_id {
        params.push(agent);
        sql.push_str(&format!(" AND agent_id = ${}", params.len()));
    }
    if let Some((at, key)) = &after {
        params.push(at);
        params.push(key);
        let n = params.len();
        sql.push_str(&format!(" AND (created_at, key) < (${}, ${n})", n - 1));
    }
    params.push(&fetch);
    sql.push_str(&format!(
        " ORDER BY created_at DESC, key DESC LIMIT ${}",
        params.len()
    ));

    let stmt = client.prepare_cached(&sql).await?;
    let rows = client.query(&stmt, &params).await?;
    let mut page = PendingPage {
        approvals: Vec::new(),
        next_cursor: None,
        unreadable: Vec::new(),
    };
    let mut last = None;
    for (i, row) in rows.iter().enumerate() {
        if i == limit {
            page.next_cursor = last.take();
            break;
        }
        match approval_from_row(row) {
            Ok(record) => {
                last = Some(cursor::encode(record.created_at, &record.key));
                page.approvals.push(record);
            }
            Err(e @ StoreError::Corrupt(_)) => {
                let key = row_key(row);
                if let Ok(at) = row.try_get::<_, DateTime<Utc>>(16) {
                    last = Some(cursor::encode(at, &key));
                }
                page.unreadable.push(UnreadableRow::new(&key, &e));
            }
            Err(e) => return Err(e),
        }
    }
    Ok(page)
}

/// One page of approval records of any status (see
/// [`crate::store::Queries::list_approvals`]). Rows that do not decode
/// take their place in the page as `unreadable`, by key.
///
/// The message and decided_by columns hold JSON strings (schema version 3:
/// a NUL cannot be text here), so SQL cannot decode them to compare; it
/// matches the needle, JSON-escaped as the stored text is, against their
/// JSON text instead. That finds every match and, rarely, more (a needle
/// `n` inside the escape `\\n`): [`ApprovalPager`] checks each row again,
/// and this reads on past the rows it drops until the page is full.
pub(super) async fn list_approvals<C: GenericClient>(
    client: &C,
    query: &ApprovalQuery,
) -> StoreResult<ApprovalPage> {
    let filter = ApprovalFilter::new(query);
    let mut pager = ApprovalPager::new(&filter)?;
    let statement = ApprovalsStatement::new(&filter, query, pager.batch())?;
    loop {
        let after = pager.after.clone();
        // Each arm walks its index newest first and stops at a batch; the
        // batch is the newest `batch` rows of both together.
        let mut rows = Vec::new();
        for arm in statement.arms() {
            let (sql, params) = statement.sql(arm, after.as_ref());
            let stmt = client.prepare_cached(&sql).await?;
            rows.extend(client.query(&stmt, &params).await?);
        }
        let position = |row: &Row| {
            (
                row.try_get::<_, DateTime<Utc>>(APPROVAL_COLUMN_COUNT).ok(),
                row_key(row),
            )
        };
        rows.sort_by_cached_key(|row| std::cmp::Reverse(position(row)));
        rows.truncate(pager.batch());
        for row in &rows {
            let (at, key) = position(row);
            if !pager.offer(key, at, approval_from_row(row))? {
                break;
            }
        }
        if !pager.wants_more(rows.len()) {
            return Ok(pager.finish());
        }
    }
}

/// The plans PostgreSQL picks (`EXPLAIN`, one line per row, each arm's
/// after the other's) for the first batch of `query`'s page: which
/// indexes a listing reads.
pub(super) async fn explain_approvals<C: GenericClient>(
    client: &C,
    query: &ApprovalQuery,
) -> StoreResult<Vec<String>> {
    let filter = ApprovalFilter::new(query);
    let pager = ApprovalPager::new(&filter)?;
    let statement = ApprovalsStatement::new(&filter, query, pager.batch())?;
    let mut plan = Vec::new();
    for arm in statement.arms() {
        let (sql, params) = statement.sql(arm, pager.after.as_ref());
        for row in client.query(&format!("EXPLAIN {sql}"), &params).await? {
            plan.push(row.try_get::<_, String>(0)?);
        }
    }
    Ok(plan)
}

/// The two halves of an approvals page, each read through its own indexes
/// in the page's order. PostgreSQL (15) plans a UNION ALL of them as an
/// Append and a sort of every match, never as a merge of the two index
/// walks, so the store runs them apart and merges the two short lists.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Arm {
    /// Stored PENDING rows, by `created_at`, through the pending indexes of
    /// version 1 (or, for overdue rows only, the expiry index).
    Pending,
    /// Settled rows, by `COALESCE(decided_at, created_at)`, through the
    /// settled indexes of version 6.
    Settled,
}

/// The parameters of an approvals page query, owned, from which each
/// batch's statements are made.
struct ApprovalsStatement<'q> {
    query: &'q ApprovalQuery,
    pending_live: bool,
    pending_overdue: bool,
    settled: Vec<&'static str>,
    /// The LIKE pattern for text columns and the one for JSON strings.
    text: Option<(String, String)>,
    fetch: i64,
}

impl<'q> ApprovalsStatement<'q> {
    fn new(
        filter: &ApprovalFilter<'q>,
        query: &'q ApprovalQuery,
        batch: usize,
    ) -> StoreResult<ApprovalsStatement<'q>> {
        Ok(ApprovalsStatement {
            query,
            pending_live: filter.pending_live,
            pending_overdue: filter.pending_overdue,
            settled: filter.settled.iter().map(|s| s.as_str()).collect(),
            // A text parameter cannot hold a NUL, and no text column does:
            // the plain columns are searched without the needle's.
            text: filter.text().map(|t| {
                (
                    like_pattern(&t.replace('\0', "")),
                    like_pattern(&json_string_body(t)),
                )
            }),
            fetch: to_i64(batch, "page size")?,
        })
    }

    fn arms(&self) -> Vec<Arm> {
        let mut arms = Vec::with_capacity(2);
        if self.pending_live || self.pending_overdue {
            arms.push(Arm::Pending);
        }
        if !self.settled.is_empty() {
            arms.push(Arm::Settled);
        }
        arms
    }

    /// The SQL and parameters of `arm`'s batch after `after`.
    fn sql<'a>(
        &'a self,
        arm: Arm,
        after: Option<&'a (DateTime<Utc>, String)>,
    ) -> (String, Vec<Param<'a>>) {
        let query = self.query;
        let mut params: Vec<Param<'a>> = Vec::new();
        let mut p = ApprovalsSql::default();
        if arm == Arm::Pending && self.pending_live != self.pending_overdue {
            p.now = Some(n(&mut params, &query.now));
        }
        if let Some(agent) = &query.agent_id {
            p.agent = Some(n(&mut params, agent));
        }
        if let Some(step) = &query.step_id {
            p.step = Some(n(&mut params, step));
        }
        if let Some((text, json_text)) = &self.text {
            p.text = Some((n(&mut params, text), n(&mut params, json_text)));
        }
        if let Some((at, key)) = after {
            p.after = Some((n(&mut params, at), n(&mut params, key)));
        }
        p.limit = n(&mut params, &self.fetch);
        let sql = arm_sql(
            arm,
            &p,
            self.pending_live,
            self.pending_overdue,
            &self.settled,
        );
        (sql, params)
    }
}

/// Add a parameter; its number in the SQL (`$n`).
fn n<'a>(params: &mut Vec<Param<'a>>, p: Param<'a>) -> usize {
    params.push(p);
    params.len()
}

/// The parameter numbers of an [`arm_sql`] query.
#[derive(Debug, Default)]
pub(super) struct ApprovalsSql {
    pub now: Option<usize>,
    pub agent: Option<usize>,
    pub step: Option<usize>,
    /// The LIKE pattern for text columns and the one for JSON-string columns.
    pub text: Option<(usize, usize)>,
    /// The cursor's time and key.
    pub after: Option<(usize, usize)>,
    pub limit: usize,
}

/// One arm of the approvals page query, newest first, one batch long.
/// Statuses are literals from [`crate::pending_approval::ApprovalStatus`];
/// everything a caller gives is a bound parameter.
pub(super) fn arm_sql(
    arm: Arm,
    p: &ApprovalsSql,
    pending_live: bool,
    pending_overdue: bool,
    settled: &[&str],
) -> String {
    let mut common = String::new();
    if let Some(agent) = p.agent {
        common.push_str(&format!(" AND agent_id = ${agent}"));
    }
    if let Some(step) = p.step {
        common.push_str(&format!(" AND step_id = ${step}"));
    }
    if let Some((t, j)) = p.text {
        common.push_str(&format!(
            " AND (message::text ILIKE ${j} ESCAPE '\\' OR decided_by::text ILIKE ${j} ESCAPE '\\' \
             OR step_id ILIKE ${t} ESCAPE '\\' OR key ILIKE ${t} ESCAPE '\\' \
             OR run_id ILIKE ${t} ESCAPE '\\')"
        ));
    }
    let (order, filter) = match arm {
        Arm::Pending => {
            let due = match (pending_live, pending_overdue, p.now) {
                (true, false, Some(now)) => format!(" AND expires_at > ${now}"),
                (false, true, Some(now)) => format!(" AND expires_at <= ${now}"),
                _ => String::new(),
            };
            ("created_at", format!("status = 'PENDING'{due}"))
        }
        Arm::Settled => (
            "COALESCE(decided_at, created_at)",
            format!(
                "status <> 'PENDING'{}",
                crate::store::settled_statuses_sql(settled)
            ),
        ),
    };
    let after = p
        .after
        .map(|(at, key)| format!(" AND ({order}, key) < (${at}, ${key})"))
        .unwrap_or_default();
    format!(
        "SELECT {APPROVAL_COLUMNS}, {order} AS order_at FROM tollgate_approvals \
         WHERE {filter}{common}{after} ORDER BY {order} DESC, key DESC LIMIT ${}",
        p.limit
    )
}

/// `text` as it appears inside a stored JSON string: escaped as serde_json
/// (and PostgreSQL's `to_json`) escape it, without the quotes.
fn json_string_body(text: &str) -> String {
    let quoted = Value::String(text.to_string()).to_string();
    quoted[1..quoted.len() - 1].to_string()
}

/// Runs newest first (see [`crate::store::Queries::list_runs`]).
pub(super) async fn list_runs<C: GenericClient>(
    client: &C,
    query: &RunQuery,
) -> StoreResult<RunsPage> {
    let after = query.cursor.as_deref().map(decode_cursor).transpose()?;
    let limit = query.limit.max(1);
    let fetch = to_i64(limit.saturating_add(1), "page size")?;
    let status = query.status.map(|s| s.as_str());
    let mut sql = format!("SELECT {RUN_COLUMNS} FROM tollgate_runs WHERE true");
    let mut params: Vec<Param<'_>> = Vec::new();
    if let Some(agent) = &query.agent_id {
        params.push(agent);
        sql.push_str(&format!(" AND agent_id = ${}", params.len()));
    }
    if let Some(status) = &status {
        params.push(status);
        sql.push_str(&format!(" AND status = ${}", params.len()));
    }
    if let Some((at, id)) = &after {
        params.push(at);
        params.push(id);
        let n = params.len();
        sql.push_str(&format!(" AND (created_at, id) < (${}, ${n})", n - 1));
    }
    params.push(&fetch);
    sql.push_str(&format!(
        " ORDER BY created_at DESC, id DESC LIMIT ${}",
        params.len()
    ));
    let mut runs = query_all(client, &sql, &params, run_from_row).await?;
    let next_cursor = (runs.len() > limit).then(|| {
        runs.truncate(limit);
        let last = &runs[limit - 1];
        cursor::encode(last.created_at, &last.id)
    });
    Ok(RunsPage { runs, next_cursor })
}

/// See [`crate::store::Approvals::cancel_run`]. Under READ COMMITTED the
/// approval's conditional UPDATE races a claim's on the same row lock: the
/// second re-checks `status = 'PENDING'` against the committed row and
/// matches nothing. Locks are taken in the claim's order (the approval,
/// then the run), so the two never deadlock. A run that changed state
/// between the read and the write (decided, paused) is looked at again.
pub(super) async fn cancel_run<C: GenericClient>(
    client: &C,
    cancel: &CancelRun,
) -> StoreResult<Cancelled> {
    let data = cancel.decision_data();
    if let Some(data) = &data {
        checked(data, "cancel reason")?;
    }
    let by = Value::String(cancel.by.clone());
    for _ in 0..3 {
        let run = get_run(client, &cancel.run_id)
            .await?
            .ok_or_else(|| StoreError::RunNotFound(cancel.run_id.clone()))?;
        let approval = match run.status {
            RunStatus::AwaitingApproval => {
                let sql = format!(
                    "UPDATE tollgate_approvals                      SET status = 'CANCELLED', decision_data = $1, decided_by = $2, decided_at = $3                      WHERE run_id = $4 AND status = 'PENDING' AND expires_at > $3                      RETURNING {APPROVAL_COLUMNS}"
                );
                let params: [Param<'_>; 4] = [&data, &by, &cancel.now, &cancel.run_id];
                let cancelled = query_all(client, &sql, &params, approval_from_row).await?;
                let Some(record) = cancelled.into_iter().next() else {
                    // Decided since the read (look again), or overdue.
                    match get_run(client, &cancel.run_id).await?.map(|r| r.status) {
                        Some(RunStatus::AwaitingApproval) => {
                            return Err(StoreError::RunNotCancellable {
                                run_id: cancel.run_id.clone(),
                                status: RunStatus::Expired,
                            });
                        }
                        _ => continue,
                    }
                };
                set_run_status(client, &cancel.run_id, RunStatus::Cancelled, &cancel.now).await?;
                Some(record)
            }
            RunStatus::Running => {
                let changed = execute(
                    client,
                    "UPDATE tollgate_runs SET status = 'cancelled', updated_at = $2, \
                     owner = NULL, lease_until = NULL \
                     WHERE id = $1 AND status = 'running'",
                    &[&cancel.run_id, &cancel.now],
                )
                .await?;
                if changed == 0 {
                    continue;
                }
                None
            }
            status => {
                return Err(StoreError::RunNotCancellable {
                    run_id: cancel.run_id.clone(),
                    status,
                });
            }
        };
        let event = cancel.event(next_seq(client, &cancel.run_id).await?);
        insert_events(client, &cancel.run_id, std::slice::from_ref(&event)).await?;
        if let Some(record) = &approval {
            notify::send(client, &record.key, &record.run_id, record.status).await?;
        }
        return Ok(Cancelled {
            was: run.status,
            approval,
            event,
        });
    }
    Err(StoreError::Unavailable(format!(
        "run {} kept changing state while it was being cancelled; try again",
        cancel.run_id
    )))
}

fn decode_cursor(text: &str) -> StoreResult<(DateTime<Utc>, String)> {
    let (at, key) = cursor::decode(text)?;
    let at = crate::time::parse_utc(&at).ok_or_else(|| StoreError::InvalidCursor(text.into()))?;
    Ok((at, key))
}

pub(super) async fn list_stuck<C: GenericClient>(
    client: &C,
    agent_id: Option<&str>,
    now: &DateTime<Utc>,
) -> StoreResult<(Vec<StuckClaim>, Vec<UnreadableRow>)> {
    // Decided (not expired) records whose run is still `running` and that are
    // the run's latest record: the claim happened, the run never finished.
    let sql = format!(
        "SELECT {cols}, r.status, r.updated_at \
         FROM tollgate_runs r JOIN tollgate_approvals a ON a.run_id = r.id \
         WHERE (r.status = 'stuck' OR (r.status = 'running' \
                AND (r.lease_until IS NULL OR r.lease_until <= $2))) \
           AND a.decided_at IS NOT NULL AND a.status <> 'EXPIRED' \
           AND ($1::text IS NULL OR a.agent_id = $1) \
           AND a.key = (SELECT l.key FROM tollgate_approvals l WHERE l.run_id = r.id \
                        ORDER BY l.created_at DESC, l.key DESC LIMIT 1) \
         ORDER BY a.decided_at DESC, a.key DESC",
        cols = APPROVAL_COLUMNS
            .split(", ")
            .map(|c| format!("a.{c}"))
            .collect::<Vec<_>>()
            .join(", "),
    );
    let stmt = client.prepare_cached(&sql).await?;
    let rows = client.query(&stmt, &[&agent_id, now]).await?;
    decode_skipping(&rows, |row| {
        let record = approval_from_row(row)?;
        let run = RowReader::with_id(row, "tollgate_runs", record.run_id.clone());
        Ok(StuckClaim {
            run_status: run.parsed(APPROVAL_COLUMN_COUNT, "status", RunStatus::parse)?,
            run_updated_at: run.time(APPROVAL_COLUMN_COUNT + 1, "updated_at")?,
            record,
        })
    })
}

// ------------------------------------------------------------ durable runs

/// The fence and the journal write of [`crate::store::RunLog::record_step`].
/// The fence's UPDATE takes the run's row lock, so a recovery claiming the
/// run waits for this transaction and then finds the lease renewed or not.
pub(super) async fn record_step<C: GenericClient>(
    client: &C,
    owner: &str,
    entry: &JournalEntry,
) -> StoreResult<()> {
    let changed = execute(
        client,
        "UPDATE tollgate_runs SET updated_at = $2 \
         WHERE id = $1 AND status = 'running' AND owner = $3",
        &[&entry.run_id, &entry.at, &owner],
    )
    .await?;
    if changed == 0 {
        return Err(fence_failed(client, &entry.run_id, Some(owner)).await);
    }
    let step_index = to_i64(entry.step_index, "step index")?;
    let output = match &entry.output {
        Some(output) => Some(checked(output, "step output")?),
        None => None,
    };
    execute(
        client,
        "INSERT INTO tollgate_run_steps (run_id, step_index, step_id, status, output, at) \
         VALUES ($1, $2, $3, $4, $5, $6) \
         ON CONFLICT (run_id, step_index) DO UPDATE SET step_id = excluded.step_id, \
         status = excluded.status, output = excluded.output, at = excluded.at",
        &[
            &entry.run_id,
            &step_index,
            &entry.step_id,
            &crate::store::journal_status(entry),
            &output,
            &entry.at,
        ],
    )
    .await?;
    Ok(())
}

pub(super) async fn run_journal<C: GenericClient>(
    client: &C,
    run_id: &str,
) -> StoreResult<Vec<JournalEntry>> {
    query_all(
        client,
        "SELECT run_id, step_index, step_id, status, output, at FROM tollgate_run_steps \
         WHERE run_id = $1 ORDER BY step_index",
        &[&run_id],
        |row| {
            let r = RowReader::new(row, "tollgate_run_steps", "run_id")?;
            let status: String = r.get(3, "status")?;
            Ok(JournalEntry {
                run_id: r.id().to_string(),
                step_index: r.index(1, "step_index")?,
                step_id: r.get(2, "step_id")?,
                output: match status.as_str() {
                    "completed" => Some(r.get::<Value>(4, "output")?),
                    _ => None,
                },
                at: r.time(5, "at")?,
            })
        },
    )
    .await
}

pub(super) async fn renew_lease<C: GenericClient>(
    client: &C,
    run_id: &str,
    lease: &Lease,
) -> StoreResult<bool> {
    let changed = execute(
        client,
        "UPDATE tollgate_runs SET lease_until = $3 \
         WHERE id = $1 AND status = 'running' AND owner = $2",
        &[&run_id, &lease.owner, &lease.until],
    )
    .await?;
    Ok(changed == 1)
}

/// One conditional write: orphaned runs become this owner's. Rows another
/// transaction holds (a driver journaling, another node claiming) are
/// skipped; the outer WHERE re-checks each chosen row after its lock, so
/// under READ COMMITTED every orphan has one winner. Each comes with the
/// seq its next event gets (a run's events are numbered by the store, see
/// [`OwnedRun`]).
pub(super) async fn claim_orphans<C: GenericClient>(
    client: &C,
    agent_id: &str,
    lease: &Lease,
    now: &DateTime<Utc>,
    limit: i64,
) -> StoreResult<Vec<OwnedRun>> {
    query_all(
        client,
        &format!(
            "UPDATE tollgate_runs SET owner = $2, lease_until = $3 \
             WHERE id IN (SELECT id FROM tollgate_runs \
                          WHERE agent_id = $1 AND status = 'running' \
                            AND (lease_until IS NULL OR lease_until <= $4) \
                          ORDER BY created_at LIMIT $5 FOR UPDATE SKIP LOCKED) \
               AND status = 'running' AND (lease_until IS NULL OR lease_until <= $4) \
             RETURNING {RUN_COLUMNS}, \
               (SELECT COALESCE(MAX(e.seq), 0) FROM tollgate_run_events e \
                WHERE e.run_id = tollgate_runs.id)"
        ),
        &[&agent_id, &lease.owner, &lease.until, now, &limit],
        |row| {
            let run = run_from_row(row)?;
            let last: i64 = row.try_get(RUN_COLUMN_COUNT)?;
            let next_seq = u64::try_from(last).unwrap_or(0) + 1;
            Ok(OwnedRun { run, next_seq })
        },
    )
    .await
}

/// See [`crate::store::RunLog::leased_owners`].
pub(super) async fn leased_owners<C: GenericClient>(
    client: &C,
    agent_id: &str,
    now: &DateTime<Utc>,
) -> StoreResult<Vec<String>> {
    let stmt = client
        .prepare_cached(
            "SELECT DISTINCT owner FROM tollgate_runs \
             WHERE agent_id = $1 AND status = 'running' AND owner IS NOT NULL \
               AND lease_until > $2",
        )
        .await?;
    let mut owners = Vec::new();
    for row in client.query(&stmt, &[&agent_id, now]).await? {
        owners.push(row.try_get(0)?);
    }
    Ok(owners)
}

/// One conditional write: the running runs of a dead owner become this
/// owner's. The outer WHERE re-checks each chosen row on the exact old
/// owner after its lock, so under READ COMMITTED a second process taking
/// them over at the same time finds them changed and takes nothing.
pub(super) async fn take_over_runs<C: GenericClient>(
    client: &C,
    agent_id: &str,
    from: &str,
    lease: &Lease,
    limit: i64,
) -> StoreResult<Vec<OwnedRun>> {
    query_all(
        client,
        &format!(
            "UPDATE tollgate_runs SET owner = $3, lease_until = $4 \
             WHERE id IN (SELECT id FROM tollgate_runs \
                          WHERE agent_id = $1 AND status = 'running' AND owner = $2 \
                          ORDER BY created_at LIMIT $5 FOR UPDATE SKIP LOCKED) \
               AND status = 'running' AND owner = $2 \
             RETURNING {RUN_COLUMNS}, \
               (SELECT COALESCE(MAX(e.seq), 0) FROM tollgate_run_events e \
                WHERE e.run_id = tollgate_runs.id)"
        ),
        &[&agent_id, &from, &lease.owner, &lease.until, &limit],
        |row| {
            let run = run_from_row(row)?;
            let last: i64 = row.try_get(RUN_COLUMN_COUNT)?;
            let next_seq = u64::try_from(last).unwrap_or(0) + 1;
            Ok(OwnedRun { run, next_seq })
        },
    )
    .await
}

/// See [`crate::store::Queries::count_runs_by_status`].
pub(super) async fn count_runs_by_status<C: GenericClient>(
    client: &C,
    agent_id: &str,
) -> StoreResult<Vec<(RunStatus, u64)>> {
    let stmt = client
        .prepare_cached(
            "SELECT status, COUNT(*) FROM tollgate_runs WHERE agent_id = $1 GROUP BY status",
        )
        .await?;
    let mut counts: Vec<(RunStatus, u64)> = RunStatus::ALL.iter().map(|s| (*s, 0)).collect();
    for row in client.query(&stmt, &[&agent_id]).await? {
        let status: String = row.try_get(0)?;
        let n: i64 = row.try_get(1)?;
        // A status this build does not know (a newer writer's) is left out.
        if let Some(slot) = counts.iter_mut().find(|(s, _)| s.as_str() == status) {
            slot.1 = u64::try_from(n).unwrap_or(0);
        }
    }
    Ok(counts)
}

/// See [`crate::store::Queries::count_pending_by_step`].
pub(super) async fn count_pending_by_step<C: GenericClient>(
    client: &C,
    agent_id: &str,
    now: &DateTime<Utc>,
) -> StoreResult<std::collections::BTreeMap<String, u64>> {
    let stmt = client
        .prepare_cached(
            "SELECT step_id, COUNT(*) FROM tollgate_approvals \
             WHERE status = 'PENDING' AND expires_at > $1 AND agent_id = $2 \
             GROUP BY step_id",
        )
        .await?;
    let mut counts = std::collections::BTreeMap::new();
    for row in client.query(&stmt, &[now, &agent_id]).await? {
        let step: String = row.try_get(0)?;
        let n: i64 = row.try_get(1)?;
        counts.insert(step, u64::try_from(n).unwrap_or(0));
    }
    Ok(counts)
}

pub(super) async fn count_runs<C: GenericClient>(
    client: &C,
    agent_id: &str,
    status: RunStatus,
) -> StoreResult<u64> {
    let n: i64 = query_opt(
        client,
        "SELECT COUNT(*) FROM tollgate_runs WHERE agent_id = $1 AND status = $2",
        &[&agent_id, &status.as_str()],
        |row| Ok(row.try_get(0)?),
    )
    .await?
    .unwrap_or(0);
    Ok(u64::try_from(n).unwrap_or(0))
}

/// See [`crate::store::RunLog::transition_run`]; the row is locked
/// first, so two operators acting at once take turns and the second sees
/// the first's change.
pub(super) async fn transition_run<C: GenericClient>(
    client: &C,
    change: &crate::store::RunTransition,
) -> StoreResult<(RunRecord, Event)> {
    let run = query_opt(
        client,
        &format!("SELECT {RUN_COLUMNS} FROM tollgate_runs WHERE id = $1 FOR UPDATE"),
        &[&change.run_id],
        run_from_row,
    )
    .await?
    .ok_or_else(|| StoreError::RunNotFound(change.run_id.clone()))?;
    if !change.from.contains(&run.status) {
        return Err(crate::store::wrong_status(change, run.status));
    }
    // The row lock above holds every other transition and driver write of
    // this run off until commit, so the seq read here stays the last.
    let seq = next_seq(client, &change.run_id).await?;
    if !crate::store::unchanged(change, seq) {
        return Err(crate::store::changed_since(change, run.status));
    }
    let error = text_json(change.error.as_deref());
    let (owner, until) = match &change.lease {
        Some(lease) => (Some(lease.owner.as_str()), Some(lease.until)),
        None => (None, None),
    };
    execute(
        client,
        "UPDATE tollgate_runs SET status = $2, error = $3, owner = $4, lease_until = $5, \
         updated_at = $6 WHERE id = $1",
        &[
            &change.run_id,
            &change.to.as_str(),
            &error,
            &owner,
            &until,
            &change.at,
        ],
    )
    .await?;
    let event = Event {
        run_id: change.run_id.clone(),
        seq,
        at: change.at,
        kind: change.event.clone(),
    };
    insert_events(client, &change.run_id, std::slice::from_ref(&event)).await?;
    let run = get_run(client, &change.run_id)
        .await?
        .ok_or_else(|| StoreError::RunNotFound(change.run_id.clone()))?;
    Ok((run, event))
}
