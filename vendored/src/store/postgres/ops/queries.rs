//! The read model's SQL: runs, events, pages of approvals, counts, stuck claims.

use super::*;

pub(crate) async fn get_run<C: GenericClient>(
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

/// [`get_run`] without the input (`'{}'::jsonb` in its place).
pub(crate) async fn get_run_outline<C: GenericClient>(
    client: &C,
    run_id: &str,
) -> StoreResult<Option<RunRecord>> {
    query_opt(
        client,
        &format!(
            "SELECT {} FROM tollgate_runs WHERE id = $1",
            run_outline_columns("'{}'::jsonb")
        ),
        &[&run_id],
        run_from_row,
    )
    .await
}

pub(crate) async fn run_events<C: GenericClient>(
    client: &C,
    run_id: &str,
    after_seq: u64,
) -> StoreResult<Vec<Event>> {
    // No stored seq exceeds i64::MAX, so a larger `after_seq` means "none".
    let after = i64::try_from(after_seq).unwrap_or(i64::MAX);
    let read = query_all(
        client,
        "SELECT run_id, seq, event FROM tollgate_run_events \
         WHERE run_id = $1 AND seq > $2 ORDER BY seq",
        &[&run_id, &after],
        event_from_row,
    )
    .await?;
    let input = if crate::store::columns::needs_run_input(&read) {
        let row = client
            .query_opt(
                "SELECT id, input FROM tollgate_runs WHERE id = $1",
                &[&run_id],
            )
            .await?;
        match row {
            Some(row) => Some(RowReader::new(&row, "tollgate_runs", "id")?.doc(1, "input")?),
            None => None,
        }
    } else {
        None
    };
    crate::store::columns::into_events(read, input)
}

/// One page of unexpired PENDING records, newest first. Rows that do not
/// decode take their place in the page as `unreadable`, by key.
pub(crate) async fn list_pending<C: GenericClient>(
    client: &C,
    query: &PendingQuery,
) -> StoreResult<PendingPage> {
    let after = query.cursor.as_deref().map(decode_cursor).transpose()?;
    let mut pager = PendingPager::new(query);
    let fetch = to_i64(pager.batch(), "page size")?;

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
    for row in &rows {
        let unreadable_at = || (row_key(row), row.try_get::<_, DateTime<Utc>>(16).ok());
        if !pager.offer(approval_from_row(row), unreadable_at)? {
            break;
        }
    }
    Ok(pager.finish())
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
pub(crate) async fn list_approvals<C: GenericClient>(
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
pub(crate) async fn explain_approvals<C: GenericClient>(
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
pub(crate) enum Arm {
    /// Stored PENDING rows, by `created_at`, through the pending indexes of
    /// version 1 (or, for overdue rows only, the expiry index).
    Pending,
    /// Settled rows, by `COALESCE(decided_at, created_at)`, through the
    /// settled indexes of version 6.
    Settled,
}

/// The parameters of an approvals page query, owned, from which each
/// batch's statements are made.
pub(super) struct ApprovalsStatement<'q> {
    pub(super) query: &'q ApprovalQuery,
    pub(super) pending_live: bool,
    pub(super) pending_overdue: bool,
    pub(super) settled: Vec<&'static str>,
    /// The LIKE pattern for text columns and the one for JSON strings.
    pub(super) text: Option<(String, String)>,
    /// The spec filter's bound value ([`crate::store::SpecFilter::sql_value`]).
    pub(super) spec: Option<String>,
    pub(super) fetch: i64,
}

impl<'q> ApprovalsStatement<'q> {
    pub(super) fn new(
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
            spec: query.spec.as_ref().map(crate::store::SpecFilter::sql_value),
            fetch: to_i64(batch, "page size")?,
        })
    }

    pub(super) fn arms(&self) -> Vec<Arm> {
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
    pub(super) fn sql<'a>(
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
            p.text_in_context = query.text_in_context;
        }
        if let (Some(filter), Some(value)) = (&query.spec, &self.spec) {
            p.spec = Some((filter.clone(), n(&mut params, value)));
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
pub(super) fn n<'a>(params: &mut Vec<Param<'a>>, p: Param<'a>) -> usize {
    params.push(p);
    params.len()
}

/// The parameter numbers of an [`arm_sql`] query.
#[derive(Debug, Default)]
pub(crate) struct ApprovalsSql {
    pub now: Option<usize>,
    pub agent: Option<usize>,
    pub step: Option<usize>,
    /// The LIKE pattern for text columns and the one for JSON-string columns.
    pub text: Option<(usize, usize)>,
    /// The text also searches the agent, the input and the trigger
    /// (`ApprovalQuery::text_in_context`).
    pub text_in_context: bool,
    /// The spec version filter and its value's number.
    pub spec: Option<(crate::store::SpecFilter, usize)>,
    /// The cursor's time and key.
    pub after: Option<(usize, usize)>,
    pub limit: usize,
}

/// One arm of the approvals page query, newest first, one batch long.
/// Statuses are literals from [`crate::domain::pending_approval::ApprovalStatus`];
/// everything a caller gives is a bound parameter.
pub(crate) fn arm_sql(
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
    if let Some((filter, spec)) = &p.spec {
        common.push_str(&filter.sql(&format!("${spec}")));
    }
    if let Some((t, j)) = p.text {
        common.push_str(&format!(
            " AND (message::text ILIKE ${j} ESCAPE '\\' OR decided_by::text ILIKE ${j} ESCAPE '\\' \
             OR step_id ILIKE ${t} ESCAPE '\\' OR key ILIKE ${t} ESCAPE '\\' \
             OR run_id ILIKE ${t} ESCAPE '\\'{})",
            if p.text_in_context {
                format!(
                    " OR agent_id ILIKE ${t} ESCAPE '\\' OR input::text ILIKE ${j} ESCAPE '\\' \
                     OR \"trigger\"::text ILIKE ${j} ESCAPE '\\'"
                )
            } else {
                String::new()
            }
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
pub(super) fn json_string_body(text: &str) -> String {
    let quoted = Value::String(text.to_string()).to_string();
    quoted[1..quoted.len() - 1].to_string()
}

/// Runs newest first (see [`crate::store::Queries::list_runs`]).
pub(crate) async fn list_runs<C: GenericClient>(
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
    let patterns = query.text().map(run_text_patterns);
    if let Some((plain, json)) = &patterns {
        params.push(plain);
        params.push(json);
        let (p, j) = (params.len() - 1, params.len());
        // Input, trigger and a gate's message are stored as JSON text.
        sql.push_str(&format!(
            " AND (id ILIKE ${p} ESCAPE '\\' OR agent_id ILIKE ${p} ESCAPE '\\' \
             OR input::text ILIKE ${j} ESCAPE '\\' OR \"trigger\"::text ILIKE ${j} ESCAPE '\\' \
             OR EXISTS (SELECT 1 FROM tollgate_approvals a WHERE a.run_id = tollgate_runs.id \
             AND (a.step_id ILIKE ${p} ESCAPE '\\' OR a.message::text ILIKE ${j} ESCAPE '\\')))"
        ));
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

pub(super) fn decode_cursor(text: &str) -> StoreResult<(DateTime<Utc>, String)> {
    let (at, key) = cursor::decode(text)?;
    let at = crate::support::time::parse_utc(&at)
        .ok_or_else(|| StoreError::InvalidCursor(text.into()))?;
    Ok((at, key))
}

pub(crate) async fn list_stuck<C: GenericClient>(
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

/// See [`crate::store::Queries::count_runs_by_status`].
pub(crate) async fn count_runs_by_status<C: GenericClient>(
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
pub(crate) async fn count_pending_by_step<C: GenericClient>(
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

/// See [`crate::store::Queries::count_pending_by_spec`].
pub(crate) async fn count_pending_by_spec<C: GenericClient>(
    client: &C,
    agent_id: &str,
    now: &DateTime<Utc>,
) -> StoreResult<std::collections::BTreeMap<String, u64>> {
    let stmt = client
        .prepare_cached(
            "SELECT spec_hash, COUNT(*) FROM tollgate_approvals \
             WHERE status = 'PENDING' AND expires_at > $1 AND agent_id = $2 \
               AND origin = 'pause' \
             GROUP BY spec_hash",
        )
        .await?;
    let mut counts = std::collections::BTreeMap::new();
    for row in client.query(&stmt, &[now, &agent_id]).await? {
        let hash: String = row.try_get(0)?;
        let n: i64 = row.try_get(1)?;
        counts.insert(hash, u64::try_from(n).unwrap_or(0));
    }
    Ok(counts)
}

pub(crate) async fn count_runs<C: GenericClient>(
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
