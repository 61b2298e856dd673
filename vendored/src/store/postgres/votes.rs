//! The PostgreSQL store: the ledger of votes on gates, and the cast that
//! may settle one.

use super::*;

#[async_trait]
impl Votes for PostgresStore {
    async fn cast_vote(&self, cast: &CastVote) -> StoreResult<VoteOutcome> {
        check_cast(cast)?;
        let result: StoreResult<_> =
            async { in_transaction!(self, |tx| ops::cast_vote(&tx, cast).await) }.await;
        self.context(&format!("deciding approval {}", cast.claim.key), result)
    }

    async fn votes(&self, key: &str) -> StoreResult<Vec<Vote>> {
        let read = async { ops::votes(&self.client().await?, key).await }.await;
        self.context(&format!("reading the votes on approval {key}"), read)
    }

    async fn ledgers(
        &self,
        keys: &[String],
    ) -> StoreResult<std::collections::BTreeMap<String, Vec<Vote>>> {
        if keys.is_empty() {
            return Ok(Default::default());
        }
        let read = async { ops::ledgers(&self.client().await?, keys).await }.await;
        self.context(
            &format!("reading the votes on {} approvals", keys.len()),
            read,
        )
    }
}
