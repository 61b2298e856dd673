//! The SQL of each store operation, run synchronously on one connection.
//!
//! Callers encode values before taking the connection's lock (see
//! [`EventRow`], [`RunRow`], [`ApprovalRow`]), so the lock is held for the
//! SQL alone. Writers are called inside a `BEGIN IMMEDIATE` transaction by
//! the store; nothing here begins or commits.

use rusqlite::{Connection, ErrorCode, Params, Row, Statement, ToSql};

use super::codec::{
    APPROVAL_COLUMN_COUNT, APPROVAL_COLUMNS, RUN_COLUMN_COUNT, RUN_COLUMNS, RowReader,
    approval_from_row, event_from_row, run_from_row, to_i64, to_json,
};
use crate::events::{Event, EventKind};
use crate::pending_approval::{ApprovalError, ApprovalRecord, Claim};
use crate::run_state::{JournalEntry, OwnedRun, RunRecord, RunStatus};
use crate::store::columns::Columns;
use crate::store::{
    ApprovalFilter, ApprovalPage, ApprovalPager, ApprovalQuery, CancelRun, Cancelled, Claimed,
    FirstWrite, Pause, PendingPage, PendingQuery, RunEnd, RunQuery, RunsPage, StoreError,
    StoreResult, StuckClaim, UnreadableRow, cursor, like_pattern, resolved_event,
};
use crate::time::format_utc;

// ---------------------------------------------------------------- encoding

/// An event ready to insert.
pub(super) struct EventRow {
    seq: i64,
    json: String,
}

pub(super) fn encode_events(events: &[Event]) -> StoreResult<Vec<EventRow>> {
    events
        .iter()
        .map(|e| {
            Ok(EventRow {
                seq: to_i64(e.seq, "event seq")?,
                json: to_json(e, "event")?,
            })
        })
        .collect()
}

/// A run ready to insert.
pub(super) struct RunRow {
    id: String,
    agent_id: String,
    spec_hash: String,
    status: &'static str,
    input: String,
    trigger: String,
    outputs: String,
    error: Option<String>,
    created_at: String,
    updated_at: String,
    owner: Option<String>,
    lease_until: Option<String>,
}

impl RunRow {
    pub fn encode(run: &RunRecord) -> StoreResult<RunRow> {
        Ok(RunRow {
            id: run.id.clone(),
            agent_id: run.agent_id.clone(),
            spec_hash: run.spec_hash.clone(),
            status: run.status.as_str(),
            input: to_json(&run.input, "run input")?,
            trigger: to_json(&run.trigger, "run trigger")?,
            outputs: to_json(&run.outputs, "run outputs")?,
            error: run.error.clone(),
            created_at: format_utc(run.created_at),
            updated_at: format_utc(run.updated_at),
            owner: run.owner.clone(),
            lease_until: run.lease_until.map(format_utc),
        })
    }
}

/// A pause ready to write: the new record and the run's state so far.
pub(super) struct ApprovalRow {
    key: String,
    run_id: String,
    agent_id: String,
    spec_hash: String,
    step_index: i64,
    step_id: String,
    phase: &'static str,
    message: Option<String>,
    payload: String,
    outputs: String,
    input: String,
    trigger: String,
    status: &'static str,
    decision_data: Option<String>,
    decided_by: Option<String>,
    decided_at: Option<String>,
    created_at: String,
    expires_at: String,
    /// When the pause happened (the run's `updated_at`).
    paused_at: String,
    /// The driver that must still own the run (see `Pause::owner`).
    owner: Option<String>,
}

impl ApprovalRow {
    pub fn encode(pause: &Pause) -> StoreResult<ApprovalRow> {
        let r = &pause.record;
        Ok(ApprovalRow {
            key: r.key.clone(),
            run_id: r.run_id.clone(),
            agent_id: r.agent_id.clone(),
            spec_hash: r.spec_hash.clone(),
            step_index: to_i64(r.step_index, "step index")?,
            step_id: r.step_id.clone(),
            phase: r.phase.as_str(),
            message: r.message.clone(),
            payload: to_json(&r.payload, "approval payload")?,
            outputs: to_json(&r.outputs, "approval outputs")?,
            input: to_json(&r.input, "approval input")?,
            trigger: to_json(&r.trigger, "approval trigger")?,
            status: r.status.as_str(),
            decision_data: r
                .decision_data
                .as_ref()
                .map(|d| to_json(d, "decision data"))
                .transpose()?,
            decided_by: r.decided_by.clone(),
            decided_at: r.decided_at.map(format_utc),
            created_at: format_utc(r.created_at),
            expires_at: format_utc(r.expires_at),
            paused_at: format_utc(pause.at),
            owner: pause.owner.clone(),
        })
    }
}

/// A run's end ready to write.
pub(super) struct EndRow {
    run_id: String,
    status: &'static str,
    outputs: String,
    error: Option<String>,
    at: String,
    owner: Option<String>,
}

impl EndRow {
    pub fn encode(end: &RunEnd) -> StoreResult<EndRow> {
        Ok(EndRow {
            run_id: end.run_id.clone(),
            status: end.status.as_str(),
            outputs: to_json(&end.outputs, "run outputs")?,
            error: end.error.clone(),
            at: format_utc(end.at),
            owner: end.owner.clone(),
        })
    }
}

/// A new run's first durable point, encoded.
pub(super) enum FirstRow {
    Pause(Box<ApprovalRow>),
    End(EndRow),
}

impl FirstRow {
    pub fn encode(first: FirstWrite<'_>) -> StoreResult<FirstRow> {
        Ok(match first {
            FirstWrite::Pause(pause) => FirstRow::Pause(Box::new(ApprovalRow::encode(pause)?)),
            FirstWrite::End(end) => FirstRow::End(EndRow::encode(end)?),
        })
    }
}

// ------------------------------------------------------------------ helpers

fn query_opt<T, P: Params>(
    stmt: &mut Statement<'_>,
    params: P,
    decode: impl Fn(&Row<'_>) -> StoreResult<T>,
) -> StoreResult<Option<T>> {
    let mut rows = stmt.query(params)?;
    rows.next()?.map(decode).transpose()
}

fn query_all<T, P: Params>(
    stmt: &mut Statement<'_>,
    params: P,
    decode: impl Fn(&Row<'_>) -> StoreResult<T>,
) -> StoreResult<Vec<T>> {
    let mut rows = stmt.query(params)?;
    let mut out = Vec::new();
    while let Some(row) = rows.next()? {
        out.push(decode(row)?);
    }
    Ok(out)
}

/// Decode every row, setting aside those that do not decode (named by the
/// text of their first column, the key) instead of failing on the first:
/// one damaged row must not hide, or stop the sweep of, all the others.
fn query_skipping<T, P: Params>(
    stmt: &mut Statement<'_>,
    params: P,
    decode: impl Fn(&Row<'_>) -> StoreResult<T>,
) -> StoreResult<(Vec<T>, Vec<UnreadableRow>)> {
    let mut rows = stmt.query(params)?;
    let (mut good, mut bad) = (Vec::new(), Vec::new());
    while let Some(row) = rows.next()? {
        match decode(row) {
            Ok(value) => good.push(value),
            Err(e @ StoreError::Corrupt(_)) => bad.push(UnreadableRow::new(&row_key(row), &e)),
            Err(e) => return Err(e),
        }
    }
    Ok((good, bad))
}

/// The key (column 0) of a row, however damaged, for a report.
fn row_key(row: &Row<'_>) -> String {
    match row.get_ref(0) {
        Ok(rusqlite::types::ValueRef::Text(t)) => String::from_utf8_lossy(t).into_owned(),
        Ok(other) => format!("{other:?}"),
        Err(_) => "?".into(),
    }
}

fn is_unique_violation(e: &rusqlite::Error) -> bool {
    matches!(e, rusqlite::Error::SqliteFailure(f, _)
        if f.code == ErrorCode::ConstraintViolation
            && (f.extended_code == rusqlite::ffi::SQLITE_CONSTRAINT_PRIMARYKEY
                || f.extended_code == rusqlite::ffi::SQLITE_CONSTRAINT_UNIQUE))
}

// ------------------------------------------------------------------- writes

pub(super) fn insert_run(conn: &Connection, run: &RunRow) -> StoreResult<()> {
    let mut stmt = conn.prepare_cached(
        "INSERT INTO tollgate_runs (id, agent_id, spec_hash, status, input, \"trigger\", \
         outputs, error, created_at, updated_at, owner, lease_until) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)",
    )?;
    stmt.execute((
        &run.id,
        &run.agent_id,
        &run.spec_hash,
        run.status,
        &run.input,
        &run.trigger,
        &run.outputs,
        &run.error,
        &run.created_at,
        &run.updated_at,
        &run.owner,
        &run.lease_until,
    ))
    .map_err(|e| {
        if is_unique_violation(&e) {
            StoreError::Conflict(format!("run {} already exists", run.id))
        } else {
            e.into()
        }
    })?;
    Ok(())
}

pub(super) fn insert_events(
    conn: &Connection,
    run_id: &str,
    events: &[EventRow],
) -> StoreResult<()> {
    if events.is_empty() {
        return Ok(());
    }
    let mut stmt = conn.prepare_cached(
        "INSERT INTO tollgate_run_events (run_id, seq, event) VALUES (?1, ?2, ?3)",
    )?;
    for event in events {
        stmt.execute((run_id, event.seq, &event.json))
            .map_err(|e| {
                if is_unique_violation(&e) {
                    StoreError::Conflict(format!("run {run_id} already has an event {}", event.seq))
                } else {
                    e.into()
                }
            })?;
    }
    Ok(())
}

pub(super) fn require_run(conn: &Connection, run_id: &str) -> StoreResult<()> {
    let mut stmt = conn.prepare_cached("SELECT 1 FROM tollgate_runs WHERE id = ?1")?;
    if stmt.exists([run_id])? {
        Ok(())
    } else {
        Err(StoreError::RunNotFound(run_id.to_string()))
    }
}

/// The fence of a driver's write: with an owner, the run must still be
/// `running` and owned by it. `?5` is the owner (NULL: no fence).
const FENCED: &str = "(?5 IS NULL OR (status = 'running' AND owner = ?5))";

pub(super) fn pause_run(conn: &Connection, row: &ApprovalRow) -> StoreResult<()> {
    // A pause is a durable point: the driver lets go of the run.
    let mut stmt = conn.prepare_cached(&format!(
        "UPDATE tollgate_runs SET status = ?2, outputs = ?3, updated_at = ?4, \
         owner = NULL, lease_until = NULL WHERE id = ?1 AND {FENCED}"
    ))?;
    let changed = stmt.execute((
        &row.run_id,
        RunStatus::AwaitingApproval.as_str(),
        &row.outputs,
        &row.paused_at,
        &row.owner,
    ))?;
    if changed == 0 {
        return Err(fence_failed(conn, &row.run_id, row.owner.as_deref()));
    }
    insert_approval(conn, row)
}

/// Why a fenced write changed nothing: no such run, or another driver (or
/// none, or another status) holds it.
fn fence_failed(conn: &Connection, run_id: &str, owner: Option<&str>) -> StoreError {
    let found = conn
        .prepare_cached("SELECT status, owner FROM tollgate_runs WHERE id = ?1")
        .and_then(|mut stmt| {
            let mut rows = stmt.query([run_id])?;
            match rows.next()? {
                Some(row) => Ok(Some((
                    row.get::<_, String>(0)?,
                    row.get::<_, Option<String>>(1)?,
                ))),
                None => Ok(None),
            }
        });
    match (found, owner) {
        (Ok(Some((status, holder))), Some(owner)) => {
            crate::store::not_owner(run_id, owner, &status, holder.as_deref())
        }
        (Ok(_), _) => StoreError::RunNotFound(run_id.to_string()),
        (Err(e), _) => e.into(),
    }
}

fn insert_approval(conn: &Connection, row: &ApprovalRow) -> StoreResult<()> {
    let mut stmt = conn.prepare_cached(&format!(
        "INSERT INTO tollgate_approvals ({APPROVAL_COLUMNS}) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18)"
    ))?;
    let params: [&dyn ToSql; APPROVAL_COLUMN_COUNT] = [
        &row.key,
        &row.run_id,
        &row.agent_id,
        &row.spec_hash,
        &row.step_index,
        &row.step_id,
        &row.phase,
        &row.message,
        &row.payload,
        &row.outputs,
        &row.input,
        &row.trigger,
        &row.status,
        &row.decision_data,
        &row.decided_by,
        &row.decided_at,
        &row.created_at,
        &row.expires_at,
    ];
    stmt.execute(params.as_slice()).map_err(|e| {
        if is_unique_violation(&e) {
            StoreError::Conflict(format!("an approval with key {} already exists", row.key))
        } else {
            e.into()
        }
    })?;
    Ok(())
}

pub(super) fn end_run(conn: &Connection, end: &EndRow) -> StoreResult<()> {
    // An end is a durable point: the driver lets go of the run.
    let mut stmt = conn.prepare_cached(
        "UPDATE tollgate_runs SET status = ?2, outputs = ?3, error = ?4, updated_at = ?6, \
         owner = NULL, lease_until = NULL \
         WHERE id = ?1 AND (?5 IS NULL OR (status = 'running' AND owner = ?5))",
    )?;
    let changed = stmt.execute((
        &end.run_id,
        end.status,
        &end.outputs,
        &end.error,
        &end.owner,
        &end.at,
    ))?;
    if changed == 0 {
        return Err(fence_failed(conn, &end.run_id, end.owner.as_deref()));
    }
    Ok(())
}

/// A run's final status (expired, cancelled): nobody drives it any more,
/// so its owner and lease go too.
fn set_run_status(conn: &Connection, run_id: &str, status: RunStatus, at: &str) -> StoreResult<()> {
    let mut stmt = conn.prepare_cached(
        "UPDATE tollgate_runs SET status = ?2, updated_at = ?3, owner = NULL, lease_until = NULL \
         WHERE id = ?1",
    )?;
    stmt.execute((run_id, status.as_str(), at))?;
    Ok(())
}

/// The last seq of the run on the row being returned, as a column: a run's
/// events are numbered by the store (see [`OwnedRun`]).
const NEXT_SEQ: &str = "(SELECT COALESCE(MAX(e.seq), 0) FROM tollgate_run_events e \
     WHERE e.run_id = tollgate_runs.id)";

fn next_seq(conn: &Connection, run_id: &str) -> StoreResult<u64> {
    let mut stmt = conn.prepare_cached(
        "SELECT COALESCE(MAX(seq), 0) FROM tollgate_run_events WHERE run_id = ?1",
    )?;
    let last: i64 = stmt.query_row([run_id], |row| row.get(0))?;
    Ok(u64::try_from(last).unwrap_or(0) + 1)
}

fn append_one(conn: &Connection, event: &Event) -> StoreResult<()> {
    insert_events(
        conn,
        &event.run_id,
        &encode_events(std::slice::from_ref(event))?,
    )
}

/// The claim's conditional write. Approve and modify also require the spec
/// the run paused with; a reject is allowed under any spec.
const CLAIM_SAME_SPEC: &str = "UPDATE tollgate_approvals \
     SET status = ?1, decision_data = ?2, decided_by = ?3, decided_at = ?4 \
     WHERE key = ?5 AND status = 'PENDING' AND expires_at > ?6 AND spec_hash = ?7 \
     RETURNING ";
const CLAIM_ANY_SPEC: &str = "UPDATE tollgate_approvals \
     SET status = ?1, decision_data = ?2, decided_by = ?3, decided_at = ?4 \
     WHERE key = ?5 AND status = 'PENDING' AND expires_at > ?6 \
     RETURNING ";

/// The claim's parameters, encoded.
pub(super) struct ClaimRow {
    status: &'static str,
    decision_data: Option<String>,
    now: String,
    owner: Option<String>,
    lease_until: Option<String>,
}

impl ClaimRow {
    pub fn encode(claim: &Claim) -> StoreResult<ClaimRow> {
        Ok(ClaimRow {
            status: claim.decision.status().as_str(),
            decision_data: claim
                .decision
                .data()
                .map(|d| to_json(&d, "decision data"))
                .transpose()?,
            now: format_utc(claim.now),
            owner: claim.lease().map(|l| l.owner.clone()),
            lease_until: claim.lease().map(|l| format_utc(l.until)),
        })
    }
}

pub(super) fn claim(conn: &Connection, claim: &Claim, row: &ClaimRow) -> StoreResult<Claimed> {
    let Some(record) = claim_write(conn, claim, row)? else {
        let current = get_approval(conn, &claim.key)?;
        return Err(
            ApprovalError::explain_failed_claim(&claim.key, current.as_ref(), claim).into(),
        );
    };
    let event = resolved_event(&record, claim, next_seq(conn, &record.run_id)?);
    append_one(conn, &event)?;
    if let Some((end, ended)) = claim.run_end(&record, event.seq + 1) {
        end_run(conn, &EndRow::encode(&end)?)?;
        for event in &ended {
            append_one(conn, event)?;
        }
    } else {
        // The claimer (if any) drives the run on from this commit: it owns it.
        let mut stmt = conn.prepare_cached(
            "UPDATE tollgate_runs SET status = 'running', updated_at = ?2, owner = ?3, \
             lease_until = ?4 WHERE id = ?1",
        )?;
        stmt.execute((&record.run_id, &row.now, &row.owner, &row.lease_until))?;
    }
    Ok(Claimed { record, event })
}

fn claim_write(
    conn: &Connection,
    claim: &Claim,
    row: &ClaimRow,
) -> StoreResult<Option<ApprovalRecord>> {
    let same_spec = claim.decision.requires_same_spec();
    let head = if same_spec {
        CLAIM_SAME_SPEC
    } else {
        CLAIM_ANY_SPEC
    };
    let mut stmt = conn.prepare_cached(&format!("{head}{APPROVAL_COLUMNS}"))?;
    let common: [&dyn ToSql; 6] = [
        &row.status,
        &row.decision_data,
        &claim.decided_by,
        &row.now,
        &claim.key,
        &row.now,
    ];
    if same_spec {
        let mut params = common.to_vec();
        params.push(&claim.spec_hash);
        query_opt(&mut stmt, params.as_slice(), approval_from_row)
    } else {
        query_opt(&mut stmt, common.as_slice(), approval_from_row)
    }
}

/// True when some PENDING record is overdue (a cheap read before a sweep).
pub(super) fn any_due(conn: &Connection, now: &str) -> StoreResult<bool> {
    let mut stmt = conn.prepare_cached(
        "SELECT EXISTS (SELECT 1 FROM tollgate_approvals \
         WHERE status = 'PENDING' AND expires_at <= ?1)",
    )?;
    Ok(stmt.query_row([now], |row| row.get(0))?)
}

/// Every overdue PENDING record becomes EXPIRED, its run `expired`. A row
/// that does not decode is left as it is and returned apart, so that the
/// sweep goes on for all the others.
pub(super) fn expire_due(
    conn: &Connection,
    now: &str,
) -> StoreResult<(Vec<ApprovalRecord>, Vec<UnreadableRow>)> {
    let mut select = conn.prepare_cached(&format!(
        "SELECT {APPROVAL_COLUMNS} FROM tollgate_approvals \
         WHERE status = 'PENDING' AND expires_at <= ?1"
    ))?;
    let (due, unreadable) = query_skipping(&mut select, [now], approval_from_row)?;
    let mut update = conn.prepare_cached(
        "UPDATE tollgate_approvals SET status = 'EXPIRED' WHERE key = ?1 AND status = 'PENDING'",
    )?;
    let mut expired = Vec::with_capacity(due.len());
    for mut record in due {
        if update.execute([&record.key])? == 1 {
            record.status = crate::pending_approval::ApprovalStatus::Expired;
            expired.push(record);
        }
    }
    // The sweep reports oldest first.
    expired.sort_by(|a, b| (a.created_at, &a.key).cmp(&(b.created_at, &b.key)));
    for record in &expired {
        end_expired_run(conn, record, now)?;
    }
    Ok((expired, unreadable))
}

fn end_expired_run(conn: &Connection, record: &ApprovalRecord, now: &str) -> StoreResult<()> {
    let at = crate::time::parse_utc(now)
        .ok_or_else(|| StoreError::Database(format!("bad sweep time {now:?}")))?;
    let event = Event {
        run_id: record.run_id.clone(),
        seq: next_seq(conn, &record.run_id)?,
        at,
        kind: EventKind::RunExpired {
            key: record.key.clone(),
        },
    };
    set_run_status(conn, &record.run_id, RunStatus::Expired, now)?;
    append_one(conn, &event)
}

pub(super) fn claim_key(
    conn: &Connection,
    key: &str,
    owner: &str,
    now: &str,
    expires_at: &str,
) -> StoreResult<bool> {
    // Insert, or take over a claim whose time is up; a live claim makes the
    // upsert's WHERE false and changes nothing.
    let mut stmt = conn.prepare_cached(
        "INSERT INTO tollgate_claims (key, owner, expires_at) VALUES (?1, ?2, ?4) \
         ON CONFLICT (key) DO UPDATE SET owner = excluded.owner, expires_at = excluded.expires_at \
         WHERE tollgate_claims.expires_at <= ?3",
    )?;
    Ok(stmt.execute((key, owner, now, expires_at))? == 1)
}

pub(super) fn release_key(conn: &Connection, key: &str, owner: &str) -> StoreResult<()> {
    // Only the owner's own claim: one that expired and was taken over by
    // another run belongs to that run now.
    let mut stmt =
        conn.prepare_cached("DELETE FROM tollgate_claims WHERE key = ?1 AND owner = ?2")?;
    stmt.execute([key, owner])?;
    Ok(())
}

// -------------------------------------------------------------------- reads

pub(super) fn get_approval(conn: &Connection, key: &str) -> StoreResult<Option<ApprovalRecord>> {
    let mut stmt = conn.prepare_cached(&format!(
        "SELECT {APPROVAL_COLUMNS} FROM tollgate_approvals WHERE key = ?1"
    ))?;
    query_opt(&mut stmt, [key], approval_from_row)
}

pub(super) fn get_run(conn: &Connection, run_id: &str) -> StoreResult<Option<RunRecord>> {
    let mut stmt = conn.prepare_cached(&format!(
        "SELECT {RUN_COLUMNS} FROM tollgate_runs WHERE id = ?1"
    ))?;
    query_opt(&mut stmt, [run_id], run_from_row)
}

/// Runs newest first. Parameters, in order: [agent_id], [status], [cursor
/// time, cursor id], limit. (No index serves this order yet: each page
/// scans the runs table; see the report of issue 14.)
pub(super) fn list_runs(conn: &Connection, query: &RunQuery) -> StoreResult<RunsPage> {
    let after = query.cursor.as_deref().map(decode_cursor).transpose()?;
    let limit = query.limit.max(1);
    let fetch = to_i64(limit.saturating_add(1), "page size")?;
    let status = query.status.map(|s| s.as_str());
    let mut sql = format!("SELECT {RUN_COLUMNS} FROM tollgate_runs WHERE 1 = 1");
    let mut params: Vec<&dyn ToSql> = Vec::new();
    if let Some(agent) = &query.agent_id {
        sql.push_str(" AND agent_id = ?");
        params.push(agent);
    }
    if let Some(status) = &status {
        sql.push_str(" AND status = ?");
        params.push(status);
    }
    if let Some((at, id)) = &after {
        sql.push_str(" AND (created_at, id) < (?, ?)");
        params.push(at);
        params.push(id);
    }
    sql.push_str(" ORDER BY created_at DESC, id DESC LIMIT ?");
    params.push(&fetch);
    let mut stmt = conn.prepare_cached(&sql)?;
    let mut runs = query_all(&mut stmt, params.as_slice(), run_from_row)?;
    let next_cursor = (runs.len() > limit).then(|| {
        runs.truncate(limit);
        let last = &runs[limit - 1];
        cursor::encode(last.created_at, &last.id)
    });
    Ok(RunsPage { runs, next_cursor })
}

/// See [`crate::store::Approvals::cancel_run`]. Runs in the writer's
/// `BEGIN IMMEDIATE` transaction, so it and a claim of the same approval
/// are serialised: whichever comes second finds nothing PENDING.
pub(super) fn cancel_run(conn: &Connection, cancel: &CancelRun) -> StoreResult<Cancelled> {
    let now = format_utc(cancel.now);
    let run = get_run(conn, &cancel.run_id)?
        .ok_or_else(|| StoreError::RunNotFound(cancel.run_id.clone()))?;
    let approval = match run.status {
        RunStatus::AwaitingApproval => {
            let data = cancel
                .decision_data()
                .map(|d| to_json(&d, "cancel reason"))
                .transpose()?;
            let mut stmt = conn.prepare_cached(&format!(
                "UPDATE tollgate_approvals                  SET status = 'CANCELLED', decision_data = ?1, decided_by = ?2, decided_at = ?3                  WHERE run_id = ?4 AND status = 'PENDING' AND expires_at > ?3                  RETURNING {APPROVAL_COLUMNS}"
            ))?;
            let cancelled = query_all(
                &mut stmt,
                (&data, &cancel.by, &now, &cancel.run_id),
                approval_from_row,
            )?;
            // An awaiting run whose approval is overdue has expired (the
            // sweep will say so): nothing left to cancel.
            let Some(first) = cancelled.into_iter().next() else {
                return Err(StoreError::RunNotCancellable {
                    run_id: cancel.run_id.clone(),
                    status: RunStatus::Expired,
                });
            };
            Some(first)
        }
        RunStatus::Running => None,
        status => {
            return Err(StoreError::RunNotCancellable {
                run_id: cancel.run_id.clone(),
                status,
            });
        }
    };
    let event = cancel.event(next_seq(conn, &cancel.run_id)?);
    set_run_status(conn, &cancel.run_id, RunStatus::Cancelled, &now)?;
    append_one(conn, &event)?;
    Ok(Cancelled {
        was: run.status,
        approval,
        event,
    })
}

pub(super) fn run_events(
    conn: &Connection,
    run_id: &str,
    after_seq: u64,
) -> StoreResult<Vec<Event>> {
    let mut stmt = conn.prepare_cached(
        "SELECT run_id, seq, event FROM tollgate_run_events \
         WHERE run_id = ?1 AND seq > ?2 ORDER BY seq",
    )?;
    // No stored seq exceeds i64::MAX, so a larger `after_seq` means "none".
    let after = i64::try_from(after_seq).unwrap_or(i64::MAX);
    query_all(&mut stmt, (run_id, after), event_from_row)
}

pub(super) fn pending_for_run(
    conn: &Connection,
    run_id: &str,
    now: &str,
) -> StoreResult<Option<ApprovalRecord>> {
    let mut stmt = conn.prepare_cached(&format!(
        "SELECT {APPROVAL_COLUMNS} FROM tollgate_approvals \
         WHERE run_id = ?1 AND status = 'PENDING' AND expires_at > ?2 \
         ORDER BY created_at DESC, key DESC LIMIT 1"
    ))?;
    query_opt(&mut stmt, (run_id, now), approval_from_row)
}

/// The key of the run's latest approval, whatever its status (see
/// `Approvals::latest_approval_key`): `tollgate_approvals_run_idx` finds
/// the run's few rows.
pub(super) fn latest_approval_key(conn: &Connection, run_id: &str) -> StoreResult<Option<String>> {
    let mut stmt = conn.prepare_cached(
        "SELECT key FROM tollgate_approvals WHERE run_id = ?1 \
         ORDER BY created_at DESC, step_index DESC, key DESC LIMIT 1",
    )?;
    query_opt(&mut stmt, [run_id], |row| Ok(row.get(0)?))
}

/// One page of unexpired PENDING records, newest first. Rows that do not
/// decode take their place in the page as `unreadable`, by key.
pub(super) fn list_pending(conn: &Connection, query: &PendingQuery) -> StoreResult<PendingPage> {
    let after = query.cursor.as_deref().map(decode_cursor).transpose()?;
    let now = format_utc(query.now);
    let limit = query.limit.max(1);
    // One row more than asked tells whether another page exists.
    let fetch = to_i64(limit.saturating_add(1), "page size")?;

    let sql = list_pending_sql(query.agent_id.is_some(), after.is_some());
    let mut params: Vec<&dyn ToSql> = vec![&now];
    if let Some(agent) = &query.agent_id {
        params.push(agent);
    }
    if let Some((at, key)) = &after {
        params.push(at);
        params.push(key);
    }
    params.push(&fetch);

    let mut stmt = conn.prepare_cached(&sql)?;
    let mut rows = stmt.query(params.as_slice())?;
    let mut page = PendingPage {
        approvals: Vec::new(),
        next_cursor: None,
        unreadable: Vec::new(),
    };
    let (mut taken, mut last) = (0, None);
    while let Some(row) = rows.next()? {
        if taken == limit {
            page.next_cursor = last.take();
            break;
        }
        taken += 1;
        match approval_from_row(row) {
            Ok(record) => {
                last = Some(cursor::encode(record.created_at, &record.key));
                page.approvals.push(record);
            }
            Err(e @ StoreError::Corrupt(_)) => {
                let key = row_key(row);
                // Its own position when its time reads, so the next page
                // starts after it; otherwise the last good one's.
                let created = row
                    .get::<_, String>(16)
                    .ok()
                    .and_then(|t| crate::time::parse_utc(&t));
                if let Some(at) = created {
                    last = Some(cursor::encode(at, &key));
                }
                page.unreadable.push(UnreadableRow::new(&key, &e));
            }
            Err(e) => return Err(e),
        }
    }
    Ok(page)
}

/// The page query. Parameters, in order: now, [agent_id], [cursor time,
/// cursor key], limit.
pub(super) fn list_pending_sql(by_agent: bool, after_cursor: bool) -> String {
    // `status = 'PENDING'` stays a literal: only then can SQLite use the
    // partial indexes on pending rows. `+expires_at` keeps the planner off
    // the expiry index: nearly every pending row is unexpired, so that index
    // filters nothing and would leave a sort of every pending row per page.
    // A row whose expires_at is not in the stored form (it would compare
    // wrongly as text) is listed too, so that it is reported, not hidden.
    let mut sql = format!(
        "SELECT {APPROVAL_COLUMNS} FROM tollgate_approvals \
         WHERE status = 'PENDING' \
           AND (+expires_at > ? OR expires_at NOT GLOB '[0-9][0-9][0-9][0-9]-*')"
    );
    if by_agent {
        sql.push_str(" AND agent_id = ?");
    }
    if after_cursor {
        sql.push_str(" AND (created_at, key) < (?, ?)");
    }
    sql.push_str(" ORDER BY created_at DESC, key DESC LIMIT ?");
    sql
}

/// What a [`list_approvals_sql`] query filters on: which arms it has and
/// which parameters each uses.
#[derive(Debug, Clone, Default)]
pub(super) struct ApprovalsShape {
    pub by_agent: bool,
    /// Stored PENDING rows not yet due.
    pub pending_live: bool,
    /// Stored PENDING rows past `expires_at` (listed as EXPIRED).
    pub pending_overdue: bool,
    /// Stored statuses other than PENDING.
    pub settled: Vec<&'static str>,
    pub by_step: bool,
    pub by_text: bool,
    pub after_cursor: bool,
}

impl ApprovalsShape {
    fn of(filter: &ApprovalFilter<'_>, query: &ApprovalQuery) -> ApprovalsShape {
        // The cursor (`after_cursor`) is the caller's to set: it moves on
        // from batch to batch.
        ApprovalsShape {
            by_agent: query.agent_id.is_some(),
            pending_live: filter.pending_live,
            pending_overdue: filter.pending_overdue,
            settled: filter.settled.iter().map(|s| s.as_str()).collect(),
            by_step: query.step_id.is_some(),
            by_text: filter.text().is_some(),
            after_cursor: false,
        }
    }
}

/// One page of approval records of any status (see
/// [`crate::store::Queries::list_approvals`]). Rows that do not decode
/// take their place in the page as `unreadable`, by key. Should the SQL's
/// text filter let a row through that [`ApprovalPager`] then drops (a
/// needle holding a NUL: LIKE sees the pattern only up to it), this reads
/// on until the page is full.
pub(super) fn list_approvals(
    conn: &Connection,
    query: &ApprovalQuery,
) -> StoreResult<ApprovalPage> {
    let filter = ApprovalFilter::new(query);
    let mut pager = ApprovalPager::new(&filter)?;
    let now = format_utc(query.now);
    let fetch = to_i64(pager.batch(), "page size")?;
    let text = filter.text().map(like_pattern);
    let folded = filter.text().map(str::to_ascii_lowercase);
    loop {
        let after = pager
            .after
            .as_ref()
            .map(|(at, key)| (format_utc(*at), key.clone()));
        let shape = ApprovalsShape {
            after_cursor: after.is_some(),
            ..ApprovalsShape::of(&filter, query)
        };
        let sql = list_approvals_sql(&shape);
        let mut params: Vec<(&str, &dyn ToSql)> = vec![(":limit", &fetch)];
        if shape.pending_live != shape.pending_overdue {
            params.push((":now", &now));
        }
        if let Some(agent) = &query.agent_id {
            params.push((":agent", agent));
        }
        if let Some(step) = &query.step_id {
            params.push((":step", step));
        }
        if let (Some(text), Some(folded)) = (&text, &folded) {
            params.push((":text", text));
            params.push((":folded", folded));
        }
        if let Some((at, key)) = &after {
            params.push((":at", at));
            params.push((":key", key));
        }
        let mut stmt = conn.prepare_cached(&sql)?;
        let mut rows = stmt.query(params.as_slice())?;
        let mut read = 0;
        while let Some(row) = rows.next()? {
            read += 1;
            let at = row
                .get::<_, String>(APPROVAL_COLUMN_COUNT)
                .ok()
                .and_then(|t| crate::time::parse_utc(&t));
            if !pager.offer(row_key(row), at, approval_from_row(row))? {
                break;
            }
        }
        if !pager.wants_more(read) {
            return Ok(pager.finish());
        }
    }
}

/// The approvals page query: at most two arms, merged newest first. Stored
/// PENDING rows walk the partial pending indexes by `created_at` (their
/// order time: a pending row has no `decided_at`); settled rows walk the
/// partial settled indexes by `COALESCE(decided_at, created_at)` (schema
/// version 5). Each arm delivers its rows in order, so SQLite merges the
/// two and stops at the page's end instead of sorting the matches.
/// Overdue PENDING rows alone (the history) are few and found by their
/// expiry, then sorted. Statuses are literals from
/// [`crate::pending_approval::ApprovalStatus`]; everything a caller gives
/// is a named parameter (`:now`, `:agent`, `:step`, `:text`, `:folded`,
/// `:at`, `:key`, `:limit`).
pub(super) fn list_approvals_sql(shape: &ApprovalsShape) -> String {
    // Filters both arms share. The text is a LIKE pattern (ASCII
    // case-insensitive, as SQLite's LIKE is) with `\` escaping its
    // metacharacters.
    let mut common = String::new();
    if shape.by_agent {
        common.push_str(" AND agent_id = :agent");
    }
    if shape.by_step {
        common.push_str(" AND step_id = :step");
    }
    if shape.by_text {
        // LIKE reads text only up to a NUL, so a value holding one is
        // also searched with instr (which reads it whole) and lower()
        // (ASCII, as LIKE folds): `:folded` is the needle ASCII-lowercased.
        let free = |column: &str| {
            format!(
                "{column} LIKE :text ESCAPE '\\' OR (instr({column}, char(0)) > 0 \
                 AND instr(lower({column}), :folded) > 0)"
            )
        };
        common.push_str(&format!(
            " AND ({} OR step_id LIKE :text ESCAPE '\\' OR key LIKE :text ESCAPE '\\' \
             OR run_id LIKE :text ESCAPE '\\' OR {})",
            free("message"),
            free("decided_by")
        ));
    }
    let mut arms = Vec::new();
    if shape.pending_live || shape.pending_overdue {
        // `status = 'PENDING'` stays a literal and `+expires_at` keeps the
        // planner off the expiry index, as in `list_pending_sql`.
        let due = match (shape.pending_live, shape.pending_overdue) {
            (true, false) => {
                " AND (+expires_at > :now OR expires_at NOT GLOB '[0-9][0-9][0-9][0-9]-*')"
            }
            (false, true) => " AND expires_at <= :now",
            _ => "",
        };
        let after = if shape.after_cursor {
            " AND (created_at, key) < (:at, :key)"
        } else {
            ""
        };
        // Overdue rows only (the history): few, as the sweep expires them
        // every 30 s, so they are found through the expiry index and
        // sorted, never by a walk past every unexpired pending row (which
        // the planner would otherwise pick, for its order).
        let index = if shape.pending_live {
            ""
        } else {
            " INDEXED BY tollgate_approvals_expiry_idx"
        };
        arms.push(format!(
            "SELECT {APPROVAL_COLUMNS}, created_at AS order_at FROM tollgate_approvals{index} \
             WHERE status = 'PENDING'{due}{common}{after}"
        ));
    }
    if !shape.settled.is_empty() {
        // `status <> 'PENDING'` spelled as the settled indexes' WHERE is,
        // so that SQLite may use them.
        let some = crate::store::settled_statuses_sql(&shape.settled);
        // The cursor spelled as a range on the indexed expression plus a
        // tie-break: SQLite searches an expression index by a plain range,
        // not by a row value, and would otherwise walk every row before it.
        let after = if shape.after_cursor {
            " AND COALESCE(decided_at, created_at) <= :at \
             AND (COALESCE(decided_at, created_at) < :at OR key < :key)"
        } else {
            ""
        };
        arms.push(format!(
            "SELECT {APPROVAL_COLUMNS}, COALESCE(decided_at, created_at) AS order_at \
             FROM tollgate_approvals \
             WHERE status <> 'PENDING'{some}{common}{after}"
        ));
    }
    format!(
        "{} ORDER BY order_at DESC, key DESC LIMIT :limit",
        arms.join(" UNION ALL ")
    )
}

/// The cursor's position, with its time in the stored text form so the
/// comparison is exact even if a client rewrote the timestamp.
fn decode_cursor(text: &str) -> StoreResult<(String, String)> {
    let (at, key) = cursor::decode(text)?;
    let at = crate::time::parse_utc(&at)
        .map(format_utc)
        .ok_or_else(|| StoreError::InvalidCursor(text.to_string()))?;
    Ok((at, key))
}

pub(super) fn list_stuck(
    conn: &Connection,
    agent_id: Option<&str>,
    now: &str,
) -> StoreResult<(Vec<StuckClaim>, Vec<UnreadableRow>)> {
    // Decided (not expired) records whose run is still `running` and that are
    // the run's latest record: the claim happened, the run never finished.
    let mut stmt = conn.prepare_cached(&format!(
        "SELECT {cols}, r.status, r.updated_at \
         FROM tollgate_runs r JOIN tollgate_approvals a ON a.run_id = r.id \
         WHERE (r.status = 'stuck' OR (r.status = 'running' \
                AND (r.lease_until IS NULL OR r.lease_until <= ?2))) \
           AND a.decided_at IS NOT NULL AND a.status <> 'EXPIRED' \
           AND (?1 IS NULL OR a.agent_id = ?1) \
           AND a.key = (SELECT l.key FROM tollgate_approvals l WHERE l.run_id = r.id \
                        ORDER BY l.created_at DESC, l.key DESC LIMIT 1) \
         ORDER BY a.decided_at DESC, a.key DESC",
        cols = prefixed_approval_columns("a"),
    ))?;
    query_skipping(&mut stmt, (agent_id, now), stuck_from_row)
}

fn prefixed_approval_columns(alias: &str) -> String {
    APPROVAL_COLUMNS
        .split(", ")
        .map(|c| format!("{alias}.{c}"))
        .collect::<Vec<_>>()
        .join(", ")
}

fn stuck_from_row(row: &Row<'_>) -> StoreResult<StuckClaim> {
    let record = approval_from_row(row)?;
    let run = RowReader::with_id(row, "tollgate_runs", record.run_id.clone());
    Ok(StuckClaim {
        run_status: run.parsed(APPROVAL_COLUMN_COUNT, "status", RunStatus::parse)?,
        run_updated_at: run.time(APPROVAL_COLUMN_COUNT + 1, "updated_at")?,
        record,
    })
}

// ------------------------------------------------------------ durable runs

/// A journal entry ready to write.
pub(super) struct StepRow {
    run_id: String,
    step_index: i64,
    step_id: String,
    status: &'static str,
    output: Option<String>,
    at: String,
}

impl StepRow {
    pub fn encode(entry: &JournalEntry) -> StoreResult<StepRow> {
        Ok(StepRow {
            run_id: entry.run_id.clone(),
            step_index: to_i64(entry.step_index, "step index")?,
            step_id: entry.step_id.clone(),
            status: crate::store::journal_status(entry),
            output: entry
                .output
                .as_ref()
                .map(|o| to_json(o, "step output"))
                .transpose()?,
            at: format_utc(entry.at),
        })
    }
}

/// The fence and the journal write of [`crate::store::RunLog::record_step`].
pub(super) fn record_step(conn: &Connection, owner: &str, row: &StepRow) -> StoreResult<()> {
    let mut fence = conn.prepare_cached(
        "UPDATE tollgate_runs SET updated_at = ?2 \
         WHERE id = ?1 AND status = 'running' AND owner = ?3",
    )?;
    if fence.execute((&row.run_id, &row.at, owner))? == 0 {
        return Err(fence_failed(conn, &row.run_id, Some(owner)));
    }
    let mut stmt = conn.prepare_cached(
        "INSERT INTO tollgate_run_steps (run_id, step_index, step_id, status, output, at) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6) \
         ON CONFLICT (run_id, step_index) DO UPDATE SET step_id = excluded.step_id, \
         status = excluded.status, output = excluded.output, at = excluded.at",
    )?;
    stmt.execute((
        &row.run_id,
        row.step_index,
        &row.step_id,
        row.status,
        &row.output,
        &row.at,
    ))?;
    Ok(())
}

pub(super) fn run_journal(conn: &Connection, run_id: &str) -> StoreResult<Vec<JournalEntry>> {
    let mut stmt = conn.prepare_cached(
        "SELECT run_id, step_index, step_id, status, output, at FROM tollgate_run_steps \
         WHERE run_id = ?1 ORDER BY step_index",
    )?;
    query_all(&mut stmt, [run_id], |row| {
        let r = RowReader::new(row, "tollgate_run_steps", "run_id")?;
        let status: String = r.get(3, "status")?;
        Ok(JournalEntry {
            run_id: r.id().to_string(),
            step_index: r.index(1, "step_index")?,
            step_id: r.get(2, "step_id")?,
            output: match status.as_str() {
                "completed" => Some(r.json(4, "output")?),
                _ => None,
            },
            at: r.time(5, "at")?,
        })
    })
}

pub(super) fn renew_lease(
    conn: &Connection,
    run_id: &str,
    owner: &str,
    until: &str,
) -> StoreResult<bool> {
    let mut stmt = conn.prepare_cached(
        "UPDATE tollgate_runs SET lease_until = ?3 \
         WHERE id = ?1 AND status = 'running' AND owner = ?2",
    )?;
    Ok(stmt.execute((run_id, owner, until))? == 1)
}

/// One conditional write: orphaned runs (running, lease past or absent)
/// become this owner's, each returned with the seq its next event gets.
/// Under `BEGIN IMMEDIATE` no other writer, in any process, runs between
/// the choice and the update.
pub(super) fn claim_orphans(
    conn: &Connection,
    agent_id: &str,
    owner: &str,
    until: &str,
    now: &str,
    limit: i64,
) -> StoreResult<Vec<OwnedRun>> {
    let mut stmt = conn.prepare_cached(&format!(
        "UPDATE tollgate_runs SET owner = ?2, lease_until = ?3 \
         WHERE id IN (SELECT id FROM tollgate_runs \
                      WHERE agent_id = ?1 AND status = 'running' \
                        AND (lease_until IS NULL OR lease_until <= ?4) \
                      ORDER BY created_at LIMIT ?5) \
         RETURNING {RUN_COLUMNS}, {NEXT_SEQ}"
    ))?;
    query_all(&mut stmt, (agent_id, owner, until, now, limit), |row| {
        let run = run_from_row(row)?;
        let last: i64 = row.get(RUN_COLUMN_COUNT)?;
        let next_seq = u64::try_from(last).unwrap_or(0) + 1;
        Ok(OwnedRun { run, next_seq })
    })
}

/// See [`crate::store::RunLog::leased_owners`].
pub(super) fn leased_owners(
    conn: &Connection,
    agent_id: &str,
    now: &str,
) -> StoreResult<Vec<String>> {
    let mut stmt = conn.prepare_cached(
        "SELECT DISTINCT owner FROM tollgate_runs \
         WHERE agent_id = ?1 AND status = 'running' AND owner IS NOT NULL \
           AND lease_until > ?2",
    )?;
    query_all(&mut stmt, (agent_id, now), |row| Ok(row.get(0)?))
}

/// One conditional write: the running runs of a dead owner become this
/// owner's, matched on the exact old owner string, so a second process
/// taking them over (after this one committed) changes nothing.
pub(super) fn take_over_runs(
    conn: &Connection,
    agent_id: &str,
    from: &str,
    owner: &str,
    until: &str,
    limit: i64,
) -> StoreResult<Vec<OwnedRun>> {
    let mut stmt = conn.prepare_cached(&format!(
        "UPDATE tollgate_runs SET owner = ?3, lease_until = ?4 \
         WHERE id IN (SELECT id FROM tollgate_runs \
                      WHERE agent_id = ?1 AND status = 'running' AND owner = ?2 \
                      ORDER BY created_at LIMIT ?5) \
           AND status = 'running' AND owner = ?2 \
         RETURNING {RUN_COLUMNS}, {NEXT_SEQ}"
    ))?;
    query_all(&mut stmt, (agent_id, from, owner, until, limit), |row| {
        let run = run_from_row(row)?;
        let last: i64 = row.get(RUN_COLUMN_COUNT)?;
        let next_seq = u64::try_from(last).unwrap_or(0) + 1;
        Ok(OwnedRun { run, next_seq })
    })
}

/// See [`crate::store::Queries::count_runs_by_status`]: one pass over
/// the agent's runs, whatever the number of statuses.
pub(super) fn count_runs_by_status(
    conn: &Connection,
    agent_id: &str,
) -> StoreResult<Vec<(RunStatus, u64)>> {
    let mut stmt = conn.prepare_cached(
        "SELECT status, COUNT(*) FROM tollgate_runs WHERE agent_id = ?1 GROUP BY status",
    )?;
    let mut rows = stmt.query([agent_id])?;
    let mut counts: Vec<(RunStatus, u64)> = RunStatus::ALL.iter().map(|s| (*s, 0)).collect();
    while let Some(row) = rows.next()? {
        let status: String = row.get(0)?;
        let n: i64 = row.get(1)?;
        // A status this build does not know (a newer writer's) is left out.
        if let Some(slot) = counts.iter_mut().find(|(s, _)| s.as_str() == status) {
            slot.1 = u64::try_from(n).unwrap_or(0);
        }
    }
    Ok(counts)
}

/// See [`crate::store::Queries::count_pending_by_step`]: the same rows
/// `list_pending` lists, through the same partial index, grouped.
pub(super) fn count_pending_by_step(
    conn: &Connection,
    agent_id: &str,
    now: &str,
) -> StoreResult<std::collections::BTreeMap<String, u64>> {
    let mut stmt = conn.prepare_cached(
        "SELECT step_id, COUNT(*) FROM tollgate_approvals \
         WHERE status = 'PENDING' AND agent_id = ?2 \
           AND (+expires_at > ?1 OR expires_at NOT GLOB '[0-9][0-9][0-9][0-9]-*') \
         GROUP BY step_id",
    )?;
    let mut rows = stmt.query((now, agent_id))?;
    let mut counts = std::collections::BTreeMap::new();
    while let Some(row) = rows.next()? {
        let step: String = row.get(0)?;
        let n: i64 = row.get(1)?;
        counts.insert(step, u64::try_from(n).unwrap_or(0));
    }
    Ok(counts)
}

pub(super) fn count_runs(conn: &Connection, agent_id: &str, status: &str) -> StoreResult<u64> {
    let mut stmt = conn
        .prepare_cached("SELECT COUNT(*) FROM tollgate_runs WHERE agent_id = ?1 AND status = ?2")?;
    let n: i64 = stmt.query_row((agent_id, status), |row| row.get(0))?;
    Ok(u64::try_from(n).unwrap_or(0))
}

/// See [`crate::store::RunLog::transition_run`]; under `BEGIN
/// IMMEDIATE`, the read and the write see the same row.
pub(super) fn transition_run(
    conn: &Connection,
    change: &crate::store::RunTransition,
) -> StoreResult<(RunRecord, Event)> {
    let run = get_run(conn, &change.run_id)?
        .ok_or_else(|| StoreError::RunNotFound(change.run_id.clone()))?;
    if !change.from.contains(&run.status) {
        return Err(crate::store::wrong_status(change, run.status));
    }
    let seq = next_seq(conn, &change.run_id)?;
    if !crate::store::unchanged(change, seq) {
        return Err(crate::store::changed_since(change, run.status));
    }
    let at = format_utc(change.at);
    let mut stmt = conn.prepare_cached(
        "UPDATE tollgate_runs SET status = ?2, error = ?3, owner = ?4, lease_until = ?5, \
         updated_at = ?6 WHERE id = ?1",
    )?;
    stmt.execute((
        &change.run_id,
        change.to.as_str(),
        &change.error,
        change.lease.as_ref().map(|l| l.owner.as_str()),
        change.lease.as_ref().map(|l| format_utc(l.until)),
        &at,
    ))?;
    let event = Event {
        run_id: change.run_id.clone(),
        seq,
        at: change.at,
        kind: change.event.clone(),
    };
    append_one(conn, &event)?;
    let run = get_run(conn, &change.run_id)?
        .ok_or_else(|| StoreError::RunNotFound(change.run_id.clone()))?;
    Ok((run, event))
}
