//! The SQLite store: the ledger of votes on gates, and the cast that may
//! settle one.

use super::*;

#[async_trait]
impl Votes for SqliteStore {
    async fn cast_vote(&self, cast: &CastVote) -> StoreResult<VoteOutcome> {
        check_cast(cast)?;
        let row = CastRow::encode(cast)?;
        let cast = cast.clone();
        // The writer's BEGIN IMMEDIATE serialises the cast with every
        // claim, cancel, move and other cast, in any process.
        self.write(
            format!("deciding approval {}", cast.claim.key),
            move |conn| ops::cast_vote(conn, &cast, &row),
        )
        .await
    }

    async fn votes(&self, key: &str) -> StoreResult<Vec<Vote>> {
        let key = key.to_string();
        self.read(
            format!("reading the votes on approval {key}"),
            move |conn| ops::votes(conn, &key),
        )
        .await
    }

    async fn ledgers(
        &self,
        keys: &[String],
    ) -> StoreResult<std::collections::BTreeMap<String, Vec<Vote>>> {
        if keys.is_empty() {
            return Ok(Default::default());
        }
        let keys = keys.to_vec();
        self.read(
            format!("reading the votes on {} approvals", keys.len()),
            move |conn| ops::ledgers(conn, &keys),
        )
        .await
    }
}
