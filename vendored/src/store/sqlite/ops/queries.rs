//! The read model's SQL: runs, events, pages of approvals, counts, stuck claims.

use super::*;

pub(crate) fn get_run(conn: &Connection, run_id: &str) -> StoreResult<Option<RunRecord>> {
    let mut stmt = conn.prepare_cached(&format!(
        "SELECT {RUN_COLUMNS} FROM tollgate_runs WHERE id = ?1"
    ))?;
    query_opt(&mut stmt, [run_id], run_from_row)
}

/// [`get_run`] without the input (`'{}'` in its place).
pub(crate) fn get_run_outline(conn: &Connection, run_id: &str) -> StoreResult<Option<RunRecord>> {
    let mut stmt = conn.prepare_cached(&format!(
        "SELECT {} FROM tollgate_runs WHERE id = ?1",
        run_outline_columns("'{}'")
    ))?;
    query_opt(&mut stmt, [run_id], run_from_row)
}

/// Runs newest first. Parameters, in order: [agent_id], [status], [the
/// text's patterns], [cursor time, cursor id], limit. (No index serves this order yet: each page
/// scans the runs table; see the report of issue 14.)
pub(crate) fn list_runs(conn: &Connection, query: &RunQuery) -> StoreResult<RunsPage> {
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
    let patterns = query.text().map(run_text_patterns);
    if let Some((plain, json)) = &patterns {
        sql.push_str(RUN_TEXT_SQL);
        for pattern in [plain, plain, json, json, plain, plain] {
            params.push(pattern);
        }
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

/// A runs search ([`RunQuery::text`]): the plain pattern for the id, the
/// agent and a gate's step id and message, the JSON one for the input and
/// the trigger (both stored as JSON text). A gate's fields are found
/// through the approvals-by-run index.
const RUN_TEXT_SQL: &str = " AND (id LIKE ? ESCAPE '\\' OR agent_id LIKE ? ESCAPE '\\' \
     OR input LIKE ? ESCAPE '\\' OR \"trigger\" LIKE ? ESCAPE '\\' \
     OR EXISTS (SELECT 1 FROM tollgate_approvals a WHERE a.run_id = tollgate_runs.id \
     AND (a.step_id LIKE ? ESCAPE '\\' OR a.message LIKE ? ESCAPE '\\')))";

pub(crate) fn run_events(
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
    let read = query_all(&mut stmt, (run_id, after), event_from_row)?;
    let input = if crate::store::columns::needs_run_input(&read) {
        let mut stmt = conn.prepare_cached("SELECT id, input FROM tollgate_runs WHERE id = ?1")?;
        let mut rows = stmt.query([run_id])?;
        match rows.next()? {
            Some(row) => Some(RowReader::new(row, "tollgate_runs", "id")?.doc(1, "input")?),
            None => None,
        }
    } else {
        None
    };
    crate::store::columns::into_events(read, input)
}

/// One page of unexpired PENDING records, newest first. Rows that do not
/// decode take their place in the page as `unreadable`, by key.
pub(crate) fn list_pending(conn: &Connection, query: &PendingQuery) -> StoreResult<PendingPage> {
    let after = query.cursor.as_deref().map(decode_cursor).transpose()?;
    let now = format_utc(query.now);
    let mut pager = PendingPager::new(query);
    let fetch = to_i64(pager.batch(), "page size")?;

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
    while let Some(row) = rows.next()? {
        let unreadable_at = || {
            let created = row.get::<_, String>(16).ok();
            (
                row_key(row),
                created.and_then(|t| crate::support::time::parse_utc(&t)),
            )
        };
        if !pager.offer(approval_from_row(row), unreadable_at)? {
            break;
        }
    }
    Ok(pager.finish())
}

/// The page query. Parameters, in order: now, [agent_id], [cursor time,
/// cursor key], limit.
pub(crate) fn list_pending_sql(by_agent: bool, after_cursor: bool) -> String {
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
pub(crate) struct ApprovalsShape {
    pub by_agent: bool,
    /// Stored PENDING rows not yet due.
    pub pending_live: bool,
    /// Stored PENDING rows past `expires_at` (listed as EXPIRED).
    pub pending_overdue: bool,
    /// Stored statuses other than PENDING.
    pub settled: Vec<&'static str>,
    pub by_step: bool,
    pub by_text: bool,
    /// The text also searches the agent, the input and the trigger
    /// (`ApprovalQuery::text_in_context`; the JSON pattern is `:json`).
    pub text_in_context: bool,
    /// The spec version filter (its value is `:spec`).
    pub by_spec: Option<crate::store::SpecFilter>,
    pub after_cursor: bool,
}

impl ApprovalsShape {
    pub(super) fn of(filter: &ApprovalFilter<'_>, query: &ApprovalQuery) -> ApprovalsShape {
        // The cursor (`after_cursor`) is the caller's to set: it moves on
        // from batch to batch.
        ApprovalsShape {
            by_agent: query.agent_id.is_some(),
            pending_live: filter.pending_live,
            pending_overdue: filter.pending_overdue,
            settled: filter.settled.iter().map(|s| s.as_str()).collect(),
            by_step: query.step_id.is_some(),
            by_text: filter.text().is_some(),
            text_in_context: filter.in_context(),
            by_spec: query.spec.clone(),
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
pub(crate) fn list_approvals(
    conn: &Connection,
    query: &ApprovalQuery,
) -> StoreResult<ApprovalPage> {
    let filter = ApprovalFilter::new(query);
    let mut pager = ApprovalPager::new(&filter)?;
    let now = format_utc(query.now);
    let fetch = to_i64(pager.batch(), "page size")?;
    let text = filter.text().map(like_pattern);
    let folded = filter.text().map(str::to_ascii_lowercase);
    // The input and the trigger (who started the run) hold JSON text.
    let json = filter
        .text()
        .filter(|_| filter.in_context())
        .map(|t| run_text_patterns(t).1);
    let spec = query.spec.as_ref().map(crate::store::SpecFilter::sql_value);
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
        if let Some(json) = &json {
            params.push((":json", json));
        }
        if let Some(spec) = &spec {
            params.push((":spec", spec));
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
                .and_then(|t| crate::support::time::parse_utc(&t));
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
/// [`crate::domain::pending_approval::ApprovalStatus`]; everything a caller gives
/// is a named parameter (`:now`, `:agent`, `:step`, `:text`, `:folded`, `:json`,
/// `:spec`, `:at`, `:key`, `:limit`).
pub(crate) fn list_approvals_sql(shape: &ApprovalsShape) -> String {
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
    if let Some(spec) = &shape.by_spec {
        common.push_str(&spec.sql(":spec"));
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
             OR run_id LIKE :text ESCAPE '\\' OR {}{})",
            free("message"),
            free("decided_by"),
            if shape.text_in_context {
                " OR agent_id LIKE :text ESCAPE '\\' OR input LIKE :json ESCAPE '\\' \
                 OR \"trigger\" LIKE :json ESCAPE '\\'"
            } else {
                ""
            }
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
pub(super) fn decode_cursor(text: &str) -> StoreResult<(String, String)> {
    let (at, key) = cursor::decode(text)?;
    let at = crate::support::time::parse_utc(&at)
        .map(format_utc)
        .ok_or_else(|| StoreError::InvalidCursor(text.to_string()))?;
    Ok((at, key))
}

pub(crate) fn list_stuck(
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

pub(super) fn prefixed_approval_columns(alias: &str) -> String {
    APPROVAL_COLUMNS
        .split(", ")
        .map(|c| format!("{alias}.{c}"))
        .collect::<Vec<_>>()
        .join(", ")
}

pub(super) fn stuck_from_row(row: &Row<'_>) -> StoreResult<StuckClaim> {
    let record = approval_from_row(row)?;
    let run = RowReader::with_id(row, "tollgate_runs", record.run_id.clone());
    Ok(StuckClaim {
        run_status: run.parsed(APPROVAL_COLUMN_COUNT, "status", RunStatus::parse)?,
        run_updated_at: run.time(APPROVAL_COLUMN_COUNT + 1, "updated_at")?,
        record,
    })
}

/// See [`crate::store::Queries::count_runs_by_status`]: one pass over
/// the agent's runs, whatever the number of statuses.
pub(crate) fn count_runs_by_status(
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
pub(crate) fn count_pending_by_step(
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

/// See [`crate::store::Queries::count_pending_by_spec`]: the rows of
/// [`count_pending_by_step`], grouped by version.
pub(crate) fn count_pending_by_spec(
    conn: &Connection,
    agent_id: &str,
    now: &str,
) -> StoreResult<std::collections::BTreeMap<String, u64>> {
    let mut stmt = conn.prepare_cached(
        "SELECT spec_hash, COUNT(*) FROM tollgate_approvals \
         WHERE status = 'PENDING' AND agent_id = ?2 AND origin = 'pause' \
           AND (+expires_at > ?1 OR expires_at NOT GLOB '[0-9][0-9][0-9][0-9]-*') \
         GROUP BY spec_hash",
    )?;
    let mut rows = stmt.query((now, agent_id))?;
    let mut counts = std::collections::BTreeMap::new();
    while let Some(row) = rows.next()? {
        let hash: String = row.get(0)?;
        let n: i64 = row.get(1)?;
        counts.insert(hash, u64::try_from(n).unwrap_or(0));
    }
    Ok(counts)
}

pub(crate) fn count_runs(conn: &Connection, agent_id: &str, status: &str) -> StoreResult<u64> {
    let mut stmt = conn
        .prepare_cached("SELECT COUNT(*) FROM tollgate_runs WHERE agent_id = ?1 AND status = ?2")?;
    let n: i64 = stmt.query_row((agent_id, status), |row| row.get(0))?;
    Ok(u64::try_from(n).unwrap_or(0))
}
