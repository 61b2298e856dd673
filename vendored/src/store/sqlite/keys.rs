//! The SQLite store: dedupe and schedule-tick keys.

use super::*;

#[async_trait]
impl Keys for SqliteStore {
    async fn claim_key(
        &self,
        key: &str,
        owner: &str,
        now: DateTime<Utc>,
        expires_at: DateTime<Utc>,
    ) -> StoreResult<bool> {
        check_claim_end(expires_at)?;
        let (key, owner) = (key.to_string(), owner.to_string());
        let (now, expires_at) = (format_utc(now), format_utc(expires_at));
        self.write(format!("claiming key {key}"), move |conn| {
            ops::claim_key(conn, &key, &owner, &now, &expires_at)
        })
        .await
    }

    async fn release_key(&self, key: &str, owner: &str) -> StoreResult<()> {
        let (key, owner) = (key.to_string(), owner.to_string());
        self.write(format!("releasing key {key}"), move |conn| {
            ops::release_key(conn, &key, &owner)
        })
        .await
    }
}
