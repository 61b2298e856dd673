//! The SQL of spec versions (`tollgate_specs`).

use super::*;

/// Insert the version, or move the stored one's `last_seen` forward: one
/// statement, so concurrent records of a hash never conflict.
pub(crate) fn record_spec_version(conn: &Connection, version: &SpecVersion) -> StoreResult<()> {
    let mut stmt = conn.prepare_cached(
        "INSERT INTO tollgate_specs (hash, agent_id, canonical, source, first_seen, last_seen) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6) \
         ON CONFLICT (hash) DO UPDATE SET last_seen = excluded.last_seen \
         WHERE excluded.last_seen > tollgate_specs.last_seen",
    )?;
    stmt.execute((
        &version.hash,
        &version.agent_id,
        &version.canonical,
        &version.source,
        format_utc(version.first_seen),
        format_utc(version.last_seen),
    ))?;
    Ok(())
}

pub(crate) fn get_spec_version(conn: &Connection, hash: &str) -> StoreResult<Option<SpecVersion>> {
    let mut stmt = conn.prepare_cached(&format!(
        "SELECT {SPEC_VERSION_COLUMNS} FROM tollgate_specs WHERE hash = ?1"
    ))?;
    query_opt(&mut stmt, [hash], spec_version_from_row)
}

pub(crate) fn list_spec_versions(
    conn: &Connection,
    agent_id: Option<&str>,
    now: &str,
) -> StoreResult<Vec<SpecVersionUse>> {
    let mut stmt = conn.prepare_cached(&spec_versions_sql("?1", "?2"))?;
    query_all(&mut stmt, (now, agent_id), spec_version_use_from_row)
}
