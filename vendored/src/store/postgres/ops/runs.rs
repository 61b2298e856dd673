//! The run log's SQL: runs, events, the journal, pauses, ends, leases.

use super::*;

pub(crate) async fn insert_run<C: GenericClient>(client: &C, run: &RunRecord) -> StoreResult<()> {
    let input = checked_doc(&run.input, "run input")?;
    let input = &input;
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
    client
        .execute(&stmt, &params)
        .await
        .map_err(|e| already_exists(is_unique_violation(&e), e, || format!("run {}", run.id)))?;
    Ok(())
}

pub(crate) async fn insert_events<C: GenericClient>(
    client: &C,
    run_id: &str,
    events: &[Event],
) -> StoreResult<()> {
    if events.is_empty() {
        return Ok(());
    }
    // One statement for all of them: a round trip per event was a
    // measurable share of a decision (issue 28).
    let stmt = client
        .prepare_cached(
            "INSERT INTO tollgate_run_events (run_id, seq, event) \
             SELECT $1, seq, event FROM unnest($2::bigint[], $3::json[]) AS e (seq, event)",
        )
        .await?;
    let seqs = events
        .iter()
        .map(|e| to_i64(e.seq, "event seq"))
        .collect::<StoreResult<Vec<i64>>>()?;
    let stored = events
        .iter()
        .map(|e| to_json(&StoredEvent::of(e), "event"))
        .collect::<StoreResult<Vec<Value>>>()?;
    client
        .execute(&stmt, &[&run_id, &seqs, &stored])
        .await
        .map_err(|e| {
            if is_unique_violation(&e) {
                let numbers = match (seqs.first(), seqs.last()) {
                    (Some(first), Some(last)) if first != last => format!("{first} to {last}"),
                    (Some(first), _) => first.to_string(),
                    _ => String::new(),
                };
                StoreError::Conflict(format!("run {run_id} already has an event {numbers}"))
            } else {
                e.into()
            }
        })?;
    Ok(())
}

pub(crate) async fn require_run<C: GenericClient>(client: &C, run_id: &str) -> StoreResult<()> {
    let found = query_opt(
        client,
        "SELECT 1 FROM tollgate_runs WHERE id = $1",
        &[&run_id],
        |_| Ok(()),
    )
    .await?;
    found.ok_or_else(|| StoreError::RunNotFound(run_id.to_string()))
}

pub(crate) async fn pause_run<C: GenericClient>(client: &C, pause: &Pause) -> StoreResult<()> {
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
    insert_approval(client, record, &outputs, &pause.routes).await?;
    insert_notices(client, &pause.notices()).await?;
    notify::send(client, &record.key, &record.run_id, record.status).await
}

pub(super) async fn insert_approval<C: GenericClient>(
    client: &C,
    r: &ApprovalRecord,
    outputs: &Value,
    routes: &crate::domain::notices::NoticeRoutes,
) -> StoreResult<()> {
    let step_index = to_i64(r.step_index, "step index")?;
    let payload = checked(&r.payload, "approval payload")?;
    let input = checked_doc(&r.input, "approval input")?;
    let input = &input;
    let trigger = checked(&r.trigger, "approval trigger")?;
    if let Some(data) = &r.decision_data {
        checked(data, "decision data")?;
    }
    let roster = r
        .roster
        .as_ref()
        .map(|roster| to_json(roster, "approval roster"))
        .transpose()?;
    let (message, decided_by) = (
        text_json(r.message.as_deref()),
        text_json(r.decided_by.as_deref()),
    );
    let stmt = client
        .prepare_cached(&format!(
            "INSERT INTO tollgate_approvals ({APPROVAL_COLUMNS}, on_timeout, next_nudge_at, notify) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, \
              $18, $19, $20, $21, $22, $23)"
        ))
        .await?;
    // What the gate does by itself, findable without reading the roster.
    let on_timeout = (r.on_timeout() != crate::domain::policy::OnTimeout::Expire)
        .then(|| r.on_timeout().as_str());
    let next_nudge_at = r.roster.as_ref().and_then(|roster| roster.next_nudge_at());
    let notify = (!routes.is_empty())
        .then(|| to_json(routes, "notice routes"))
        .transpose()?;
    let params: [Param<'_>; APPROVAL_COLUMN_COUNT + 3] = [
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
        &roster,
        &r.origin.kind(),
        &on_timeout,
        &next_nudge_at,
        &notify,
    ];
    client.execute(&stmt, &params).await.map_err(|e| {
        already_exists(is_unique_violation(&e), e, || {
            format!("an approval with key {}", r.key)
        })
    })?;
    Ok(())
}

pub(crate) async fn end_run<C: GenericClient>(client: &C, end: &RunEnd) -> StoreResult<()> {
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
pub(super) async fn fence_failed<C: GenericClient>(
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

/// The fence and the journal write of [`crate::store::RunLog::record_step`].
/// The fence's UPDATE takes the run's row lock, so a recovery claiming the
/// run waits for this transaction and then finds the lease renewed or not.
pub(crate) async fn record_step<C: GenericClient>(
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

pub(crate) async fn run_journal<C: GenericClient>(
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

pub(crate) async fn renew_lease<C: GenericClient>(
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
pub(crate) async fn claim_orphans<C: GenericClient>(
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
pub(crate) async fn leased_owners<C: GenericClient>(
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
pub(crate) async fn take_over_runs<C: GenericClient>(
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

/// See [`crate::store::RunLog::transition_run`]; the row is locked
/// first, so two operators acting at once take turns and the second sees
/// the first's change.
pub(crate) async fn transition_run<C: GenericClient>(
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
