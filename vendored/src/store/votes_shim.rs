//! TEMPORARY (lead's local shim, never committed): plain gates only.
use async_trait::async_trait;

use super::{CastVote, StoreResult, VoteOutcome};
use crate::policy::Vote;
use crate::store::traits::{Approvals, Votes};

macro_rules! shim {
    ($t:ty) => {
        #[async_trait]
        impl Votes for $t {
            async fn cast_vote(&self, cast: &CastVote) -> StoreResult<VoteOutcome> {
                let claimed = self.claim(&cast.claim).await?;
                Ok(VoteOutcome::Settled {
                    vote: cast.ballot.to_vote(1, None),
                    vote_event: None,
                    claimed: Box::new(claimed),
                })
            }
            async fn votes(&self, _key: &str) -> StoreResult<Vec<Vote>> {
                Ok(Vec::new())
            }
        }
    };
}
shim!(super::SqliteStore);
#[cfg(feature = "postgres")]
shim!(super::PostgresStore);
