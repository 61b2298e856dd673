//! The approvals' SQL: the claim, the cancel, the expiry sweep, reading records.

use std::collections::{HashMap, HashSet};

use super::*;

/// A run's final status (expired, cancelled): nobody drives it any more,
/// so its owner and lease go too.
pub(super) async fn set_run_status<C: GenericClient>(
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

/// The claim's conditional write: PENDING and unexpired, or for a
/// timeout's claim PENDING and overdue. Approve and modify also require
/// the spec the run paused with; a reject is allowed under any spec.
fn claim_sql(claim: &Claim) -> String {
    let due = if claim.timeout.is_some() {
        "expires_at <= $4"
    } else {
        "expires_at > $4"
    };
    let spec = if claim.decision.requires_same_spec() {
        " AND spec_hash = $6"
    } else {
        ""
    };
    format!(
        "UPDATE tollgate_approvals \
         SET status = $1, decision_data = $2, decided_by = $3, decided_at = $4 \
         WHERE key = $5 AND status = 'PENDING' AND {due}{spec} \
         RETURNING {APPROVAL_COLUMNS}, notify"
    )
}

/// The last event number of the run of approval `key` (0 for none).
const LAST_SEQ_OF_KEY: &str = "SELECT COALESCE(MAX(seq), 0) FROM tollgate_run_events \
     WHERE run_id = (SELECT run_id FROM tollgate_approvals WHERE key = $1)";

/// One conditional UPDATE decides; under READ COMMITTED a concurrent
/// claimer of the same key blocks on the row lock, then re-checks the WHERE
/// against the committed row and matches nothing. Claims of different keys
/// lock different rows and never wait for each other.
pub(crate) async fn claim<C: GenericClient>(client: &C, claim: &Claim) -> StoreResult<Claimed> {
    let status = claim.decision.status().as_str();
    let data = claim.decision_data();
    if let Some(data) = &data {
        checked(data, "decision data")?;
    }
    let same_spec = claim.decision.requires_same_spec();
    let sql = claim_sql(claim);
    let decided_by = Value::String(claim.decided_by.clone());
    let common: [Param<'_>; 5] = [&status, &data, &decided_by, &claim.now, &claim.key];
    let mut params = common.to_vec();
    if same_spec {
        params.push(&claim.spec_hash);
    }
    // The record's notice routes come back with it: no second read by key.
    let decode = |row: &Row| -> StoreResult<_> {
        let record = approval_from_row(row)?;
        let routes = routes_column(row, APPROVAL_COLUMN_COUNT, &record.key)?;
        Ok((record, routes))
    };
    // The UPDATE and the run's next event number are sent together (and,
    // first in a transaction, with its BEGIN): one round trip. The number
    // comes from a statement of its own, which the server runs after the
    // UPDATE: its snapshot sees an event a concurrent vote committed while
    // this claim waited for the row lock, which a subquery of the UPDATE's
    // RETURNING would not. It finds the run by the key, as the UPDATE does.
    let update = client.prepare_cached(&sql).await?;
    let numbering = client.prepare_cached(LAST_SEQ_OF_KEY).await?;
    let updated = sent(client.query_opt(&update, &params));
    let by_key: [Param<'_>; 1] = [&claim.key];
    let numbered = sent(client.query_one(&numbering, &by_key));
    let Some((record, routes)) = updated.await?.as_ref().map(decode).transpose()? else {
        let current = get_approval(client, &claim.key).await?;
        return Err(
            ApprovalError::explain_failed_claim(&claim.key, current.as_ref(), claim).into(),
        );
    };
    let last: i64 = numbered.await?.try_get(0)?;
    let event = resolved_event(&record, claim, seq_after(last));
    let mut events = vec![event.clone()];
    let end = claim.run_end(&record, event.seq + 1).map(|(end, ended)| {
        events.extend(ended);
        end
    });
    let run_write = async {
        if let Some(end) = &end {
            end_run(client, end).await
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
            .await
            .map(drop)
        }
    };
    // The rest of the transaction's writes depend on nothing they return:
    // sent together, they share round trips (tokio-postgres pipelines
    // requests polled at once on one connection). Any failure fails the
    // claim, whose transaction then rolls back whole.
    tokio::try_join!(
        run_write,
        insert_events(client, &record.run_id, &events),
        notify_routes(client, &record, routes.as_ref(), &event),
        notify::send(client, &record.key, &record.run_id, record.status),
    )?;
    Ok(Claimed { record, event })
}

/// The move's conditional write (see [`ApprovalMove`]): the record, its
/// run and the `approval_migrated` event in the caller's transaction. A
/// claim of the same key blocks on the row lock and re-checks its WHERE
/// (the spec hash) against the moved row, as two claims do.
pub(crate) async fn move_approval<C: GenericClient>(
    client: &C,
    to_move: &ApprovalMove,
) -> StoreResult<Moved> {
    let payload = checked(&to_move.payload, "approval payload")?;
    let message = text_json(to_move.message.as_deref());
    let step_index = to_i64(to_move.step_index, "step index")?;
    let sql = format!(
        "UPDATE tollgate_approvals \
         SET spec_hash = $1, step_id = $2, step_index = $3, message = $4, payload = $5 \
         WHERE key = $6 AND status = 'PENDING' AND expires_at > $7 AND spec_hash = $8 \
         RETURNING {APPROVAL_COLUMNS}"
    );
    let params: [Param<'_>; 8] = [
        &to_move.to,
        &to_move.step_id,
        &step_index,
        &message,
        payload,
        &to_move.key,
        &to_move.now,
        &to_move.from,
    ];
    let Some(record) = query_opt(client, &sql, &params, approval_from_row).await? else {
        let current = get_approval(client, &to_move.key).await?;
        return Err(to_move.explain_failure(current.as_ref()).into());
    };
    execute(
        client,
        "UPDATE tollgate_runs SET spec_hash = $2, updated_at = $3 WHERE id = $1 AND spec_hash = $4",
        &[&record.run_id, &to_move.to, &to_move.now, &to_move.from],
    )
    .await?;
    let event = to_move.event(&record.run_id, next_seq(client, &record.run_id).await?);
    insert_events(client, &record.run_id, std::slice::from_ref(&event)).await?;
    notify::send(client, &record.key, &record.run_id, record.status).await?;
    Ok(Moved { record, event })
}

/// What one batch of an expiry pass did (see [`expire_batch`]).
pub(crate) struct ExpiredBatch {
    pub expired: Vec<ApprovalRecord>,
    pub unreadable: Vec<UnreadableRow>,
}

/// The keys of every overdue PENDING record of a gate that expires, the
/// earliest due first: what one pass expires, [`expire_batch`] by batch.
/// Read once, by the expiry index, because each batch leaves its rows'
/// old versions in that index until a vacuum: a batch that found its rows
/// by walking the index again would step over (and visit) every row the
/// batches before it expired, which with many rows due at one instant
/// (one posting list) is quadratic.
pub(crate) async fn due_keys<C: GenericClient>(
    client: &C,
    now: &DateTime<Utc>,
) -> StoreResult<Vec<String>> {
    query_all(
        client,
        "SELECT key FROM tollgate_approvals \
         WHERE status = 'PENDING' AND expires_at <= $1 AND on_timeout IS NULL \
         ORDER BY expires_at",
        &[now],
        |row| Ok(row.try_get::<_, String>(0)?),
    )
    .await
}

/// Those of `keys` still overdue and PENDING become EXPIRED, each with its
/// run ended `expired`, its `run_expired` event, its notices and its
/// `NOTIFY` in this transaction: a few statements for the whole batch, not
/// a few per record. Rows another transaction holds (a claim in flight,
/// another node's sweep) are skipped, not waited for: each record is
/// expired by exactly one sweep, and two sweeps never deadlock on each
/// other's rows. A row that does not decode is left as it is and returned
/// apart. Expired records come oldest first.
pub(crate) async fn expire_batch<C: GenericClient>(
    client: &C,
    now: &DateTime<Utc>,
    keys: &[String],
) -> StoreResult<ExpiredBatch> {
    // Lock the due rows first and decode them: a row that does not decode
    // is left as it is (and reported), so the others are still expired.
    // The routes of each come along (`notify`, last), for its notices.
    let select = client
        .prepare_cached(&format!(
            "SELECT {APPROVAL_COLUMNS}, notify FROM tollgate_approvals \
             WHERE key = ANY($2) AND status = 'PENDING' AND expires_at <= $1 \
             AND on_timeout IS NULL \
             FOR UPDATE SKIP LOCKED"
        ))
        .await?;
    let rows = client.query(&select, &[now, &keys]).await?;
    let (due, unreadable) = decode_skipping(&rows, |row| {
        let record = approval_from_row(row)?;
        let routes =
            RowReader::with_id(row, "tollgate_approvals", record.key.clone())
                .json_opt::<crate::domain::notices::NoticeRoutes>(APPROVAL_COLUMN_COUNT, "notify")?;
        Ok((record, routes))
    })?;
    if due.is_empty() {
        return Ok(ExpiredBatch {
            expired: Vec::new(),
            unreadable,
        });
    }
    let keys: Vec<&str> = due.iter().map(|(r, _)| r.key.as_str()).collect();
    let changed: HashSet<String> = query_all(
        client,
        "UPDATE tollgate_approvals SET status = 'EXPIRED' \
         WHERE key = ANY($1) AND status = 'PENDING' RETURNING key",
        &[&keys],
        |row| Ok(row.try_get::<_, String>(0)?),
    )
    .await?
    .into_iter()
    .collect();
    let mut expired: Vec<(ApprovalRecord, Option<crate::domain::notices::NoticeRoutes>)> = due
        .into_iter()
        .filter(|(r, _)| changed.contains(&r.key))
        .map(|(mut r, routes)| {
            r.status = ApprovalStatus::Expired;
            (r, routes)
        })
        .collect();
    // The sweep reports (and numbers events) oldest first.
    expired.sort_by(|(a, _), (b, _)| (a.created_at, &a.key).cmp(&(b.created_at, &b.key)));
    end_expired_runs(client, &expired, now).await?;
    Ok(ExpiredBatch {
        expired: expired.into_iter().map(|(r, _)| r).collect(),
        unreadable,
    })
}

/// The runs of `expired` (records this transaction just expired, oldest
/// first) end `expired`, each with its `run_expired` event, the notices
/// its routes call for and its `NOTIFY`: one statement for each, whatever
/// the number of records.
async fn end_expired_runs<C: GenericClient>(
    client: &C,
    expired: &[(ApprovalRecord, Option<crate::domain::notices::NoticeRoutes>)],
    now: &DateTime<Utc>,
) -> StoreResult<()> {
    if expired.is_empty() {
        return Ok(());
    }
    let run_ids: Vec<&str> = expired.iter().map(|(r, _)| r.run_id.as_str()).collect();
    // Each run's next event number. Safe without a lock of its own, as
    // `next_seq` is: this transaction holds the row lock of each run's
    // approval record.
    let mut last_seq: HashMap<String, i64> = query_all(
        client,
        "SELECT run_id, MAX(seq) FROM tollgate_run_events WHERE run_id = ANY($1) GROUP BY run_id",
        &[&run_ids],
        |row| Ok((row.try_get::<_, String>(0)?, row.try_get::<_, i64>(1)?)),
    )
    .await?
    .into_iter()
    .collect();
    execute(
        client,
        "UPDATE tollgate_runs SET status = $2, updated_at = $3, owner = NULL, lease_until = NULL \
         WHERE id = ANY($1)",
        &[&run_ids, &RunStatus::Expired.as_str(), now],
    )
    .await?;
    let mut events = Vec::with_capacity(expired.len());
    let mut notices = Vec::new();
    for (record, routes) in expired {
        let last = last_seq.entry(record.run_id.clone()).or_insert(0);
        *last += 1;
        let event = Event {
            run_id: record.run_id.clone(),
            seq: u64::try_from(*last).unwrap_or(1),
            at: *now,
            kind: EventKind::RunExpired {
                key: record.key.clone(),
            },
        };
        if let Some(routes) = routes {
            notices.extend(crate::store::outbox::notices_of(record, routes, &event));
        }
        events.push(event);
    }
    let (mut ids, mut seqs, mut json) = (Vec::new(), Vec::new(), Vec::new());
    for event in &events {
        ids.push(event.run_id.as_str());
        seqs.push(to_i64(event.seq, "event seq")?);
        json.push(to_json(event, "event")?);
    }
    let stmt = client
        .prepare_cached(
            "INSERT INTO tollgate_run_events (run_id, seq, event) \
             SELECT * FROM unnest($1::text[], $2::bigint[], $3::json[])",
        )
        .await?;
    client
        .execute(&stmt, &[&ids, &seqs, &json])
        .await
        .map_err(|e| {
            if is_unique_violation(&e) {
                StoreError::Conflict(format!(
                    "a run whose approval expired already has the event numbered for it: {e}"
                ))
            } else {
                e.into()
            }
        })?;
    insert_notices(client, &notices).await?;
    let changes: Vec<(&str, &str, ApprovalStatus)> = expired
        .iter()
        .map(|(r, _)| (r.key.as_str(), r.run_id.as_str(), ApprovalStatus::Expired))
        .collect();
    notify::send_all(client, &changes).await
}

/// See [`crate::store::Approvals::due_timeouts`].
pub(crate) async fn due_timeouts<C: GenericClient>(
    client: &C,
    now: &DateTime<Utc>,
    limit: usize,
) -> StoreResult<(Vec<ApprovalRecord>, Vec<UnreadableRow>)> {
    let select = client
        .prepare_cached(&format!(
            "SELECT {APPROVAL_COLUMNS} FROM tollgate_approvals \
             WHERE status = 'PENDING' AND expires_at <= $1 AND on_timeout IS NOT NULL \
             ORDER BY expires_at, key LIMIT $2"
        ))
        .await?;
    let limit = to_i64(limit, "limit")?;
    let rows = client.query(&select, &[now, &limit]).await?;
    decode_skipping(&rows, approval_from_row)
}

/// See [`crate::store::Approvals::nudge_due`]. The due rows are locked
/// first (rows another transaction holds, a vote or another node's sweep,
/// are skipped, not waited for); each write is conditional on the due time
/// read, so a nudge is done once.
pub(crate) async fn nudge_due<C: GenericClient>(
    client: &C,
    now: &DateTime<Utc>,
    limit: usize,
) -> StoreResult<(Vec<Nudged>, Vec<UnreadableRow>)> {
    let select = client
        .prepare_cached(&format!(
            "SELECT {APPROVAL_COLUMNS}, next_nudge_at FROM tollgate_approvals \
             WHERE status = 'PENDING' AND next_nudge_at <= $1 AND expires_at > $1 \
             ORDER BY next_nudge_at, key LIMIT $2 \
             FOR UPDATE SKIP LOCKED"
        ))
        .await?;
    let limit = to_i64(limit, "limit")?;
    let rows = client.query(&select, &[now, &limit]).await?;
    let (due, unreadable) = decode_skipping(&rows, |row| {
        let record = approval_from_row(row)?;
        let due: DateTime<Utc> = row.try_get(APPROVAL_COLUMN_COUNT)?;
        Ok((record, due))
    })?;
    let mut nudged = Vec::with_capacity(due.len());
    for (mut record, due) in due {
        let taken = match record.roster.as_mut() {
            Some(roster) => roster.take_due(*now),
            None => Vec::new(),
        };
        let roster = record
            .roster
            .as_ref()
            .map(|r| to_json(r, "approval roster"))
            .transpose()?;
        let next = record.roster.as_ref().and_then(|r| r.next_nudge_at());
        let changed = execute(
            client,
            "UPDATE tollgate_approvals SET roster = $2, next_nudge_at = $3 \
             WHERE key = $1 AND status = 'PENDING' AND next_nudge_at = $4",
            &[&record.key, &roster, &next, &due],
        )
        .await?;
        if changed != 1 {
            continue;
        }
        let first = next_seq(client, &record.run_id).await?;
        let events: Vec<Event> = taken
            .iter()
            .zip(first..)
            .map(|(nudge, seq)| Event {
                run_id: record.run_id.clone(),
                seq,
                at: *now,
                kind: nudge.event(&record.key, &record.step_id, record.expires_at),
            })
            .collect();
        insert_events(client, &record.run_id, &events).await?;
        for event in &events {
            notify_change(client, &record, event).await?;
        }
        notify::send(client, &record.key, &record.run_id, record.status).await?;
        nudged.push(Nudged { record, events });
    }
    Ok((nudged, unreadable))
}

/// True when some PENDING record is overdue (a cheap read before a sweep).
pub(crate) async fn any_due<C: GenericClient>(
    client: &C,
    now: &DateTime<Utc>,
) -> StoreResult<bool> {
    let found = query_opt(
        client,
        "SELECT 1 FROM tollgate_approvals \
         WHERE status = 'PENDING' AND expires_at <= $1 AND on_timeout IS NULL LIMIT 1",
        &[now],
        |_| Ok(()),
    )
    .await?;
    Ok(found.is_some())
}

pub(crate) async fn get_approval<C: GenericClient>(
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
pub(crate) async fn approvals_by_key<C: GenericClient>(
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

pub(crate) async fn pending_for_run<C: GenericClient>(
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
pub(crate) async fn latest_approval_key<C: GenericClient>(
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

/// See [`crate::store::Approvals::cancel_run`]. Under READ COMMITTED the
/// approval's conditional UPDATE races a claim's on the same row lock: the
/// second re-checks `status = 'PENDING'` against the committed row and
/// matches nothing. Locks are taken in the claim's order (the approval,
/// then the run), so the two never deadlock. A run that changed state
/// between the read and the write (decided, paused) is looked at again.
pub(crate) async fn cancel_run<C: GenericClient>(
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
            notify_change(client, record, &event).await?;
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
