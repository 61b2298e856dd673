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
    APPROVAL_COLUMN_COUNT, APPROVAL_COLUMNS, RUN_COLUMNS, RowReader, approval_from_row, checked,
    event_from_row, run_from_row, text_json, to_i64, to_json,
};
use super::notify;
use crate::events::{Event, EventKind};
use crate::pending_approval::{ApprovalError, ApprovalRecord, ApprovalStatus, Claim};
use crate::run_state::{RunRecord, RunStatus};
use crate::store::columns::Columns;
use crate::store::{
    CancelRun, Cancelled, Claimed, Pause, PendingPage, PendingQuery, RunEnd, RunQuery, RunsPage,
    StoreError, StoreResult, StuckClaim, UnreadableRow, cursor, resolved_event,
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
             outputs, error, created_at, updated_at) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)",
        )
        .await?;
    let params: [Param<'_>; 10] = [
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
    let changed = execute(
        client,
        "UPDATE tollgate_runs SET status = $2, outputs = $3, updated_at = $4 WHERE id = $1",
        &[
            &record.run_id,
            &RunStatus::AwaitingApproval.as_str(),
            &outputs,
            &pause.at,
        ],
    )
    .await?;
    if changed == 0 {
        return Err(StoreError::RunNotFound(record.run_id.clone()));
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
    let changed = execute(
        client,
        "UPDATE tollgate_runs SET status = $2, outputs = $3, error = $4, updated_at = $5 \
         WHERE id = $1",
        &[&end.run_id, &end.status.as_str(), &outputs, &error, &end.at],
    )
    .await?;
    if changed == 0 {
        return Err(StoreError::RunNotFound(end.run_id.clone()));
    }
    Ok(())
}

async fn set_run_status<C: GenericClient>(
    client: &C,
    run_id: &str,
    status: RunStatus,
    at: &DateTime<Utc>,
) -> StoreResult<()> {
    execute(
        client,
        "UPDATE tollgate_runs SET status = $2, updated_at = $3 WHERE id = $1",
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
    set_run_status(client, &record.run_id, RunStatus::Running, &claim.now).await?;
    insert_events(client, &record.run_id, std::slice::from_ref(&event)).await?;
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
/// `StateStore::latest_approval_key`): `tollgate_approvals_run_idx` finds
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

/// Runs newest first (see [`crate::store::StateStore::list_runs`]).
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

/// See [`crate::store::StateStore::cancel_run`]. Under READ COMMITTED the
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
                    "UPDATE tollgate_runs SET status = 'cancelled', updated_at = $2                      WHERE id = $1 AND status = 'running'",
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
) -> StoreResult<(Vec<StuckClaim>, Vec<UnreadableRow>)> {
    // Decided (not expired) records whose run is still `running` and that are
    // the run's latest record: the claim happened, the run never finished.
    let sql = format!(
        "SELECT {cols}, r.status, r.updated_at \
         FROM tollgate_runs r JOIN tollgate_approvals a ON a.run_id = r.id \
         WHERE r.status = 'running' \
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
    let rows = client.query(&stmt, &[&agent_id]).await?;
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
