//! The SQL of dedupe and schedule-tick keys.

use super::*;

pub(crate) fn claim_key(
    conn: &Connection,
    key: &str,
    owner: &str,
    now: &str,
    expires_at: &str,
) -> StoreResult<bool> {
    // Insert, or take over a claim whose time is up; a live claim makes the
    // upsert's WHERE false and changes nothing.
    let mut stmt = conn.prepare_cached(
        "INSERT INTO tollgate_claims (key, owner, expires_at) VALUES (?1, ?2, ?4) \
         ON CONFLICT (key) DO UPDATE SET owner = excluded.owner, expires_at = excluded.expires_at \
         WHERE tollgate_claims.expires_at <= ?3",
    )?;
    Ok(stmt.execute((key, owner, now, expires_at))? == 1)
}

pub(crate) fn release_key(conn: &Connection, key: &str, owner: &str) -> StoreResult<()> {
    // Only the owner's own claim: one that expired and was taken over by
    // another run belongs to that run now.
    let mut stmt =
        conn.prepare_cached("DELETE FROM tollgate_claims WHERE key = ?1 AND owner = ?2")?;
    stmt.execute([key, owner])?;
    Ok(())
}
