//! What every concept's SQL shares: rows encoded for writing, reading helpers, the fence and event numbering.

use super::*;

/// An event ready to insert.
pub(crate) struct EventRow {
    pub(super) seq: i64,
    pub(super) json: String,
}

pub(crate) fn encode_events(events: &[Event]) -> StoreResult<Vec<EventRow>> {
    events
        .iter()
        .map(|e| {
            Ok(EventRow {
                seq: to_i64(e.seq, "event seq")?,
                json: to_json(&StoredEvent::of(e), "event")?,
            })
        })
        .collect()
}

/// A run ready to insert.
pub(crate) struct RunRow {
    pub(super) id: String,
    pub(super) agent_id: String,
    pub(super) spec_hash: String,
    pub(super) status: &'static str,
    /// The text itself, shared: a wide input is not copied to be written.
    pub(super) input: crate::support::json_doc::JsonDoc,
    pub(super) trigger: String,
    pub(super) outputs: String,
    pub(super) error: Option<String>,
    pub(super) created_at: String,
    pub(super) updated_at: String,
    pub(super) owner: Option<String>,
    pub(super) lease_until: Option<String>,
}

impl RunRow {
    pub fn encode(run: &RunRecord) -> StoreResult<RunRow> {
        Ok(RunRow {
            id: run.id.clone(),
            agent_id: run.agent_id.clone(),
            spec_hash: run.spec_hash.clone(),
            status: run.status.as_str(),
            input: checked_doc(&run.input, "run input")?,
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
pub(crate) struct ApprovalRow {
    pub(super) key: String,
    pub(super) run_id: String,
    pub(super) agent_id: String,
    pub(super) spec_hash: String,
    pub(super) step_index: i64,
    pub(super) step_id: String,
    pub(super) phase: &'static str,
    pub(super) message: Option<String>,
    pub(super) payload: String,
    pub(super) outputs: String,
    /// The run's input, shared as in [`RunRow`].
    pub(super) input: crate::support::json_doc::JsonDoc,
    pub(super) trigger: String,
    pub(super) status: &'static str,
    pub(super) decision_data: Option<String>,
    pub(super) decided_by: Option<String>,
    pub(super) decided_at: Option<String>,
    pub(super) created_at: String,
    pub(super) expires_at: String,
    pub(super) roster: Option<String>,
    /// The record's origin kind (`pause`, `request`).
    pub(super) origin: &'static str,
    /// The roster's `on_timeout` when it is not `expire`.
    pub(super) on_timeout: Option<&'static str>,
    /// The roster's first reminder or escalation.
    pub(super) next_nudge_at: Option<String>,
    /// Where the gate's notices go (`None`: nowhere).
    pub(super) notify: Option<String>,
    /// The pause's own notices (`approval.requested`).
    pub(super) notices: Vec<NoticeRow>,
    /// When the pause happened (the run's `updated_at`).
    pub(super) paused_at: String,
    /// The driver that must still own the run (see `Pause::owner`).
    pub(super) owner: Option<String>,
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
            input: checked_doc(&r.input, "approval input")?,
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
            roster: r
                .roster
                .as_ref()
                .map(|roster| to_json(roster, "approval roster"))
                .transpose()?,
            origin: r.origin.kind(),
            on_timeout: r
                .on_timeout()
                .ne(&crate::domain::policy::OnTimeout::Expire)
                .then(|| r.on_timeout().as_str()),
            next_nudge_at: r
                .roster
                .as_ref()
                .and_then(|roster| roster.next_nudge_at())
                .map(format_utc),
            notify: (!pause.routes.is_empty())
                .then(|| to_json(&pause.routes, "notice routes"))
                .transpose()?,
            notices: NoticeRow::encode_all(&pause.notices())?,
            paused_at: format_utc(pause.at),
            owner: pause.owner.clone(),
        })
    }
}

/// A run's end ready to write.
pub(crate) struct EndRow {
    pub(super) run_id: String,
    pub(super) status: &'static str,
    pub(super) outputs: String,
    pub(super) error: Option<String>,
    pub(super) at: String,
    pub(super) owner: Option<String>,
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
pub(crate) enum FirstRow {
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

pub(super) fn query_opt<T, P: Params>(
    stmt: &mut Statement<'_>,
    params: P,
    decode: impl Fn(&Row<'_>) -> StoreResult<T>,
) -> StoreResult<Option<T>> {
    let mut rows = stmt.query(params)?;
    rows.next()?.map(decode).transpose()
}

pub(super) fn query_all<T, P: Params>(
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
pub(super) fn query_skipping<T, P: Params>(
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
pub(super) fn row_key(row: &Row<'_>) -> String {
    match row.get_ref(0) {
        Ok(rusqlite::types::ValueRef::Text(t)) => String::from_utf8_lossy(t).into_owned(),
        Ok(other) => format!("{other:?}"),
        Err(_) => "?".into(),
    }
}

pub(super) fn is_unique_violation(e: &rusqlite::Error) -> bool {
    matches!(e, rusqlite::Error::SqliteFailure(f, _)
        if f.code == ErrorCode::ConstraintViolation
            && (f.extended_code == rusqlite::ffi::SQLITE_CONSTRAINT_PRIMARYKEY
                || f.extended_code == rusqlite::ffi::SQLITE_CONSTRAINT_UNIQUE))
}

pub(super) fn next_seq(conn: &Connection, run_id: &str) -> StoreResult<u64> {
    let mut stmt = conn.prepare_cached(
        "SELECT COALESCE(MAX(seq), 0) FROM tollgate_run_events WHERE run_id = ?1",
    )?;
    let last: i64 = stmt.query_row([run_id], |row| row.get(0))?;
    Ok(u64::try_from(last).unwrap_or(0) + 1)
}

pub(super) fn append_one(conn: &Connection, event: &Event) -> StoreResult<()> {
    insert_events(
        conn,
        &event.run_id,
        &encode_events(std::slice::from_ref(event))?,
    )
}

/// A move's parameters, encoded (see [`ApprovalMove`]).
pub(crate) struct MoveRow {
    pub(super) step_index: i64,
    pub(super) payload: String,
    pub(super) now: String,
}

impl MoveRow {
    pub fn encode(to_move: &ApprovalMove) -> StoreResult<MoveRow> {
        Ok(MoveRow {
            step_index: to_i64(to_move.step_index, "step index")?,
            payload: to_json(&to_move.payload, "approval payload")?,
            now: format_utc(to_move.now),
        })
    }
}

/// The claim's parameters, encoded.
pub(crate) struct ClaimRow {
    pub(super) status: &'static str,
    pub(super) decision_data: Option<String>,
    pub(super) now: String,
    pub(super) owner: Option<String>,
    pub(super) lease_until: Option<String>,
}

impl ClaimRow {
    pub fn encode(claim: &Claim) -> StoreResult<ClaimRow> {
        Ok(ClaimRow {
            status: claim.decision.status().as_str(),
            decision_data: claim
                .decision_data()
                .map(|d| to_json(&d, "decision data"))
                .transpose()?,
            now: format_utc(claim.now),
            owner: claim.lease().map(|l| l.owner.clone()),
            lease_until: claim.lease().map(|l| format_utc(l.until)),
        })
    }
}

/// A JSON document to bind as it is: its text shared, not copied (a wide
/// input is as large as a request may be), after the depth check
/// [`to_json`] makes.
fn checked_doc(
    doc: &crate::support::json_doc::JsonDoc,
    what: &str,
) -> StoreResult<crate::support::json_doc::JsonDoc> {
    crate::store::check_json_text(what, doc.as_str())?;
    Ok(doc.clone())
}
