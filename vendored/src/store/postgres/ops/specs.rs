//! The SQL of spec versions (`tollgate_specs`).

use super::*;

/// Insert the version, or move the stored one's `last_seen` forward: one
/// statement, so concurrent records of a hash never conflict (the second
/// waits for the first's commit, then takes the conflict path).
pub(crate) async fn record_spec_version<C: GenericClient>(
    client: &C,
    version: &SpecVersion,
) -> StoreResult<()> {
    execute(
        client,
        "INSERT INTO tollgate_specs (hash, agent_id, canonical, source, first_seen, last_seen) \
         VALUES ($1, $2, $3, $4, $5, $6) \
         ON CONFLICT (hash) DO UPDATE SET last_seen = excluded.last_seen \
         WHERE excluded.last_seen > tollgate_specs.last_seen",
        &[
            &version.hash,
            &version.agent_id,
            &version.canonical,
            &version.source,
            &version.first_seen,
            &version.last_seen,
        ],
    )
    .await?;
    Ok(())
}

pub(crate) async fn get_spec_version<C: GenericClient>(
    client: &C,
    hash: &str,
) -> StoreResult<Option<SpecVersion>> {
    query_opt(
        client,
        &format!("SELECT {SPEC_VERSION_COLUMNS} FROM tollgate_specs WHERE hash = $1"),
        &[&hash],
        spec_version_from_row,
    )
    .await
}

pub(crate) async fn list_spec_versions<C: GenericClient>(
    client: &C,
    agent_id: Option<&str>,
    now: &DateTime<Utc>,
) -> StoreResult<Vec<SpecVersionUse>> {
    query_all(
        client,
        &spec_versions_sql("$1", "$2::text"),
        &[now, &agent_id],
        spec_version_use_from_row,
    )
    .await
}
