//! What every concept's SQL shares: rows encoded for writing, reading helpers, the fence and event numbering.

use super::*;

pub(super) type Param<'a> = &'a (dyn ToSql + Sync);

pub(super) fn is_unique_violation(e: &tokio_postgres::Error) -> bool {
    e.code() == Some(&SqlState::UNIQUE_VIOLATION)
}

pub(crate) async fn query_opt<C: GenericClient, T>(
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

pub(crate) async fn query_all<C: GenericClient, T>(
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
pub(crate) fn decode_skipping<T>(
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

pub(super) fn row_key(row: &Row) -> String {
    row.try_get::<_, String>(0).unwrap_or_else(|_| "?".into())
}

pub(crate) async fn execute<C: GenericClient>(
    client: &C,
    sql: &str,
    params: &[Param<'_>],
) -> StoreResult<u64> {
    let stmt = client.prepare_cached(sql).await?;
    Ok(client.execute(&stmt, params).await?)
}

/// The run's next event number. Safe without a lock of its own: every
/// caller holds the row lock of the run's approval record (the claim or the
/// sweep just updated it), and a paused run writes no events of its own.
pub(super) async fn next_seq<C: GenericClient>(client: &C, run_id: &str) -> StoreResult<u64> {
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
    Ok(seq_after(last))
}

/// The event number after `last`, a run's `MAX(seq)` (0 when it has none).
pub(super) fn seq_after(last: i64) -> u64 {
    u64::try_from(last).unwrap_or(0) + 1
}
