//! The SQL of dedupe and schedule-tick keys.

use super::*;

pub(crate) async fn claim_key<C: GenericClient>(
    client: &C,
    key: &str,
    owner: &str,
    now: &DateTime<Utc>,
    expires_at: &DateTime<Utc>,
) -> StoreResult<bool> {
    // Insert, or take over a claim whose time is up; a live claim makes the
    // upsert's WHERE false and changes nothing. Two racers on a new key: the
    // second waits for the first's commit, then takes the conflict path.
    let changed = execute(
        client,
        "INSERT INTO tollgate_claims (key, owner, expires_at) VALUES ($1, $2, $4) \
         ON CONFLICT (key) DO UPDATE SET owner = excluded.owner, expires_at = excluded.expires_at \
         WHERE tollgate_claims.expires_at <= $3",
        &[&key, &owner, now, expires_at],
    )
    .await?;
    Ok(changed == 1)
}

pub(crate) async fn release_key<C: GenericClient>(
    client: &C,
    key: &str,
    owner: &str,
) -> StoreResult<()> {
    // Only the owner's own claim: one that expired and was taken over by
    // another run belongs to that run now.
    execute(
        client,
        "DELETE FROM tollgate_claims WHERE key = $1 AND owner = $2",
        &[&key, &owner],
    )
    .await?;
    Ok(())
}
