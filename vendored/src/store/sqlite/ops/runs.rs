//! The run log's SQL: runs, events, the journal, pauses, ends, leases.

use super::*;

pub(crate) fn insert_run(conn: &Connection, run: &RunRow) -> StoreResult<()> {
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
        run.input.as_str(),
        &run.trigger,
        &run.outputs,
        &run.error,
        &run.created_at,
        &run.updated_at,
        &run.owner,
        &run.lease_until,
    ))
    .map_err(|e| already_exists(is_unique_violation(&e), e, || format!("run {}", run.id)))?;
    Ok(())
}

pub(crate) fn insert_events(
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

pub(crate) fn require_run(conn: &Connection, run_id: &str) -> StoreResult<()> {
    let mut stmt = conn.prepare_cached("SELECT 1 FROM tollgate_runs WHERE id = ?1")?;
    if stmt.exists([run_id])? {
        Ok(())
    } else {
        Err(StoreError::RunNotFound(run_id.to_string()))
    }
}

/// The fence of a driver's write: with an owner, the run must still be
/// `running` and owned by it. `?5` is the owner (NULL: no fence).
pub(super) const FENCED: &str = "(?5 IS NULL OR (status = 'running' AND owner = ?5))";

pub(crate) fn pause_run(conn: &Connection, row: &ApprovalRow) -> StoreResult<()> {
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
pub(super) fn fence_failed(conn: &Connection, run_id: &str, owner: Option<&str>) -> StoreError {
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

pub(super) fn insert_approval(conn: &Connection, row: &ApprovalRow) -> StoreResult<()> {
    let mut stmt = conn.prepare_cached(&format!(
        "INSERT INTO tollgate_approvals ({APPROVAL_COLUMNS}, on_timeout, next_nudge_at, notify) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19, ?20, ?21, ?22, ?23)"
    ))?;
    let params: [&dyn ToSql; APPROVAL_COLUMN_COUNT + 3] = [
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
        &row.input.as_str(),
        &row.trigger,
        &row.status,
        &row.decision_data,
        &row.decided_by,
        &row.decided_at,
        &row.created_at,
        &row.expires_at,
        &row.roster,
        &row.origin,
        &row.on_timeout,
        &row.next_nudge_at,
        &row.notify,
    ];
    stmt.execute(params.as_slice()).map_err(|e| {
        already_exists(is_unique_violation(&e), e, || {
            format!("an approval with key {}", row.key)
        })
    })?;
    insert_notices(conn, &row.notices)
}

pub(crate) fn end_run(conn: &Connection, end: &EndRow) -> StoreResult<()> {
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

/// The last seq of the run on the row being returned, as a column: a run's
/// events are numbered by the store (see [`OwnedRun`]).
pub(super) const NEXT_SEQ: &str = "(SELECT COALESCE(MAX(e.seq), 0) FROM tollgate_run_events e \
     WHERE e.run_id = tollgate_runs.id)";

/// A journal entry ready to write.
pub(crate) struct StepRow {
    pub(super) run_id: String,
    pub(super) step_index: i64,
    pub(super) step_id: String,
    pub(super) status: &'static str,
    pub(super) output: Option<String>,
    pub(super) at: String,
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
pub(crate) fn record_step(conn: &Connection, owner: &str, row: &StepRow) -> StoreResult<()> {
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

pub(crate) fn run_journal(conn: &Connection, run_id: &str) -> StoreResult<Vec<JournalEntry>> {
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

pub(crate) fn renew_lease(
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
pub(crate) fn claim_orphans(
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
pub(crate) fn leased_owners(
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
pub(crate) fn take_over_runs(
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

/// See [`crate::store::RunLog::transition_run`]; under `BEGIN
/// IMMEDIATE`, the read and the write see the same row.
pub(crate) fn transition_run(
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
