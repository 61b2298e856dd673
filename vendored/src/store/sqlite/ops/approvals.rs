//! The approvals' SQL: the claim, the cancel, the expiry sweep, reading records.

use super::*;
use chrono::{DateTime, Utc};

/// A run's final status (expired, cancelled): nobody drives it any more,
/// so its owner and lease go too.
pub(super) fn set_run_status(
    conn: &Connection,
    run_id: &str,
    status: RunStatus,
    at: &str,
) -> StoreResult<()> {
    let mut stmt = conn.prepare_cached(
        "UPDATE tollgate_runs SET status = ?2, updated_at = ?3, owner = NULL, lease_until = NULL \
         WHERE id = ?1",
    )?;
    stmt.execute((run_id, status.as_str(), at))?;
    Ok(())
}

/// The claim's conditional write: PENDING and unexpired, or for a
/// timeout's claim PENDING and overdue. Approve and modify also require
/// the spec the run paused with; a reject is allowed under any spec.
pub(super) fn claim_sql(claim: &Claim) -> String {
    let due = if claim.timeout.is_some() {
        "expires_at <= ?6"
    } else {
        "expires_at > ?6"
    };
    let spec = if claim.decision.requires_same_spec() {
        " AND spec_hash = ?7"
    } else {
        ""
    };
    format!(
        "UPDATE tollgate_approvals \
         SET status = ?1, decision_data = ?2, decided_by = ?3, decided_at = ?4 \
         WHERE key = ?5 AND status = 'PENDING' AND {due}{spec} \
         RETURNING {APPROVAL_COLUMNS}"
    )
}

pub(crate) fn claim(conn: &Connection, claim: &Claim, row: &ClaimRow) -> StoreResult<Claimed> {
    let Some(record) = claim_write(conn, claim, row)? else {
        let current = get_approval(conn, &claim.key)?;
        return Err(
            ApprovalError::explain_failed_claim(&claim.key, current.as_ref(), claim).into(),
        );
    };
    let event = resolved_event(&record, claim, next_seq(conn, &record.run_id)?);
    append_one(conn, &event)?;
    notify_change(conn, &record, &event)?;
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

pub(super) fn claim_write(
    conn: &Connection,
    claim: &Claim,
    row: &ClaimRow,
) -> StoreResult<Option<ApprovalRecord>> {
    let same_spec = claim.decision.requires_same_spec();
    let mut stmt = conn.prepare_cached(&claim_sql(claim))?;
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

/// The move's conditional write (see [`ApprovalMove`]): the record, then
/// its run, then the `approval_migrated` event, in the caller's
/// transaction. The run's hash is only moved from `from`: a run is on the
/// version of its pending approval.
pub(crate) fn move_approval(
    conn: &Connection,
    to_move: &ApprovalMove,
    row: &MoveRow,
) -> StoreResult<Moved> {
    let mut stmt = conn.prepare_cached(&format!(
        "UPDATE tollgate_approvals \
         SET spec_hash = ?1, step_id = ?2, step_index = ?3, message = ?4, payload = ?5 \
         WHERE key = ?6 AND status = 'PENDING' AND expires_at > ?7 AND spec_hash = ?8 \
         RETURNING {APPROVAL_COLUMNS}"
    ))?;
    let params: [&dyn ToSql; 8] = [
        &to_move.to,
        &to_move.step_id,
        &row.step_index,
        &to_move.message,
        &row.payload,
        &to_move.key,
        &row.now,
        &to_move.from,
    ];
    let Some(record) = query_opt(&mut stmt, params.as_slice(), approval_from_row)? else {
        let current = get_approval(conn, &to_move.key)?;
        return Err(to_move.explain_failure(current.as_ref()).into());
    };
    let mut run = conn.prepare_cached(
        "UPDATE tollgate_runs SET spec_hash = ?2, updated_at = ?3 WHERE id = ?1 AND spec_hash = ?4",
    )?;
    run.execute((&record.run_id, &to_move.to, &row.now, &to_move.from))?;
    let event = to_move.event(&record.run_id, next_seq(conn, &record.run_id)?);
    append_one(conn, &event)?;
    Ok(Moved { record, event })
}

/// True when some PENDING record that expires (rather than settling by
/// its `on_timeout`) is overdue (a cheap read before a sweep).
pub(crate) fn any_due(conn: &Connection, now: &str) -> StoreResult<bool> {
    let mut stmt = conn.prepare_cached(
        "SELECT EXISTS (SELECT 1 FROM tollgate_approvals \
         WHERE status = 'PENDING' AND expires_at <= ?1 AND on_timeout IS NULL)",
    )?;
    Ok(stmt.query_row([now], |row| row.get(0))?)
}

/// What one batch of an expiry pass did (see [`expire_batch`]).
pub(crate) struct ExpiredBatch {
    pub expired: Vec<ApprovalRecord>,
    pub unreadable: Vec<UnreadableRow>,
    /// It read as many rows as it asked for: the pass goes on.
    pub full: bool,
}

/// A batch's rows: `?1` now, `?2` the limit, `?3` the keys to pass over
/// (a JSON array: the rows earlier batches could not read). `ORDER BY
/// expires_at` walks `tollgate_approvals_expiry_idx` from its start and
/// stops at the limit; each batch takes its rows out of that index (they
/// are no longer PENDING), so the next one starts where it stopped, ties on
/// the due time included, without a cursor.
pub(crate) fn expire_batch_sql() -> String {
    format!(
        "SELECT {APPROVAL_COLUMNS} FROM tollgate_approvals \
         WHERE status = 'PENDING' AND expires_at <= ?1 AND on_timeout IS NULL \
         AND key NOT IN (SELECT value FROM json_each(?3)) \
         ORDER BY expires_at LIMIT ?2"
    )
}

/// Up to `limit` overdue PENDING records of gates that expire (a gate with
/// another `on_timeout` is settled by it instead: [`due_timeouts`]), the
/// earliest due first, become EXPIRED, each with its run ended `expired`,
/// its `run_expired` event and its notices in this transaction. A row that
/// does not decode is left as it is and returned apart; the caller passes
/// its key in `skip` to the next batches, so it neither stops the pass nor
/// is read again by it. Expired records come oldest first.
pub(crate) fn expire_batch(
    conn: &Connection,
    now: &str,
    skip: &str,
    limit: usize,
) -> StoreResult<ExpiredBatch> {
    let mut select = conn.prepare_cached(&expire_batch_sql())?;
    let (due, unreadable) = query_skipping(
        &mut select,
        (now, to_i64(limit, "limit")?, skip),
        approval_from_row,
    )?;
    let full = due.len() + unreadable.len() >= limit;
    let mut update = conn.prepare_cached(
        "UPDATE tollgate_approvals SET status = 'EXPIRED' WHERE key = ?1 AND status = 'PENDING'",
    )?;
    let mut expired = Vec::with_capacity(due.len());
    for mut record in due {
        if update.execute([&record.key])? == 1 {
            record.status = crate::domain::pending_approval::ApprovalStatus::Expired;
            expired.push(record);
        }
    }
    // The sweep reports oldest first.
    expired.sort_by(|a, b| (a.created_at, &a.key).cmp(&(b.created_at, &b.key)));
    for record in &expired {
        end_expired_run(conn, record, now)?;
    }
    Ok(ExpiredBatch {
        expired,
        unreadable,
        full,
    })
}

/// See [`crate::store::Approvals::due_timeouts`].
pub(crate) fn due_timeouts(
    conn: &Connection,
    now: &str,
    limit: usize,
) -> StoreResult<(Vec<ApprovalRecord>, Vec<UnreadableRow>)> {
    let mut select = conn.prepare_cached(&format!(
        "SELECT {APPROVAL_COLUMNS} FROM tollgate_approvals \
         WHERE status = 'PENDING' AND expires_at <= ?1 AND on_timeout IS NOT NULL \
         ORDER BY expires_at, key LIMIT ?2"
    ))?;
    query_skipping(
        &mut select,
        (now, to_i64(limit, "limit")?),
        approval_from_row,
    )
}

/// See [`crate::store::Approvals::nudge_due`]. Runs in the writer's
/// transaction, so a vote's write of the same roster comes wholly before
/// or after it.
pub(crate) fn nudge_due(
    conn: &Connection,
    now: DateTime<Utc>,
    limit: usize,
) -> StoreResult<(Vec<Nudged>, Vec<UnreadableRow>)> {
    let at = format_utc(now);
    let mut select = conn.prepare_cached(&format!(
        "SELECT {APPROVAL_COLUMNS}, next_nudge_at FROM tollgate_approvals \
         WHERE status = 'PENDING' AND next_nudge_at <= ?1 AND expires_at > ?1 \
         ORDER BY next_nudge_at, key LIMIT ?2"
    ))?;
    let (due, unreadable) = query_skipping(&mut select, (&at, to_i64(limit, "limit")?), |row| {
        let record = approval_from_row(row)?;
        let due: String = row.get(APPROVAL_COLUMN_COUNT)?;
        Ok((record, due))
    })?;
    let mut update = conn.prepare_cached(
        "UPDATE tollgate_approvals SET roster = ?2, next_nudge_at = ?3 \
         WHERE key = ?1 AND status = 'PENDING' AND next_nudge_at = ?4",
    )?;
    let mut nudged = Vec::with_capacity(due.len());
    for (mut record, due) in due {
        let taken = match record.roster.as_mut() {
            Some(roster) => roster.take_due(now),
            None => Vec::new(),
        };
        let roster = record
            .roster
            .as_ref()
            .map(|r| to_json(r, "approval roster"))
            .transpose()?;
        let next = record
            .roster
            .as_ref()
            .and_then(|r| r.next_nudge_at())
            .map(format_utc);
        if update.execute((&record.key, &roster, &next, &due))? != 1 {
            continue;
        }
        let first = next_seq(conn, &record.run_id)?;
        let events: Vec<Event> = taken
            .iter()
            .zip(first..)
            .map(|(nudge, seq)| Event {
                run_id: record.run_id.clone(),
                seq,
                at: now,
                kind: nudge.event(&record.key, &record.step_id, record.expires_at),
            })
            .collect();
        for event in &events {
            append_one(conn, event)?;
            notify_change(conn, &record, event)?;
        }
        nudged.push(Nudged { record, events });
    }
    Ok((nudged, unreadable))
}

pub(super) fn end_expired_run(
    conn: &Connection,
    record: &ApprovalRecord,
    now: &str,
) -> StoreResult<()> {
    let at = crate::support::time::parse_utc(now)
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
    append_one(conn, &event)?;
    notify_change(conn, record, &event)
}

pub(crate) fn get_approval(conn: &Connection, key: &str) -> StoreResult<Option<ApprovalRecord>> {
    let mut stmt = conn.prepare_cached(&format!(
        "SELECT {APPROVAL_COLUMNS} FROM tollgate_approvals WHERE key = ?1"
    ))?;
    query_opt(&mut stmt, [key], approval_from_row)
}

/// See [`crate::store::Approvals::cancel_run`]. Runs in the writer's
/// `BEGIN IMMEDIATE` transaction, so it and a claim of the same approval
/// are serialised: whichever comes second finds nothing PENDING.
pub(crate) fn cancel_run(conn: &Connection, cancel: &CancelRun) -> StoreResult<Cancelled> {
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
    if let Some(approval) = &approval {
        notify_change(conn, approval, &event)?;
    }
    Ok(Cancelled {
        was: run.status,
        approval,
        event,
    })
}

pub(crate) fn pending_for_run(
    conn: &Connection,
    run_id: &str,
    now: &str,
) -> StoreResult<Option<ApprovalRecord>> {
    let mut stmt = conn.prepare_cached(&pending_for_run_sql())?;
    query_opt(&mut stmt, (run_id, now), approval_from_row)
}

/// [`pending_for_run`]'s query. The key is found first and the record read
/// by it: ordering whole rows put each in a sorter, which copies every
/// column of a wide one (an input of 1 MiB cost 3 MiB more at once: issue
/// 41's bench).
pub(crate) fn pending_for_run_sql() -> String {
    format!(
        "SELECT {APPROVAL_COLUMNS} FROM tollgate_approvals WHERE key = \
         (SELECT key FROM tollgate_approvals \
          WHERE run_id = ?1 AND status = 'PENDING' AND expires_at > ?2 \
          ORDER BY created_at DESC, key DESC LIMIT 1)"
    )
}

/// The key of the run's latest approval, whatever its status (see
/// `Approvals::latest_approval_key`): `tollgate_approvals_run_idx` finds
/// the run's few rows.
pub(crate) fn latest_approval_key(conn: &Connection, run_id: &str) -> StoreResult<Option<String>> {
    let mut stmt = conn.prepare_cached(
        "SELECT key FROM tollgate_approvals WHERE run_id = ?1 \
         ORDER BY created_at DESC, step_index DESC, key DESC LIMIT 1",
    )?;
    query_opt(&mut stmt, [run_id], |row| Ok(row.get(0)?))
}
