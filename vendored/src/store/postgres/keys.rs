//! The PostgreSQL store: dedupe and schedule-tick keys.

use super::*;

#[async_trait]
impl Keys for PostgresStore {
    async fn claim_key(
        &self,
        key: &str,
        owner: &str,
        now: DateTime<Utc>,
        expires_at: DateTime<Utc>,
    ) -> StoreResult<bool> {
        check_claim_end(expires_at)?;
        let claimed =
            async { ops::claim_key(&self.client().await?, key, owner, &now, &expires_at).await }
                .await;
        self.context(&format!("claiming key {key}"), claimed)
    }

    async fn release_key(&self, key: &str, owner: &str) -> StoreResult<()> {
        let released = async { ops::release_key(&self.client().await?, key, owner).await }.await;
        self.context(&format!("releasing key {key}"), released)
    }
}
