//! The PostgreSQL store: the spec versions runs started under.

use super::*;

#[async_trait]
impl SpecVersions for PostgresStore {
    async fn record_spec_version(&self, version: &SpecVersion) -> StoreResult<()> {
        check_spec_version(version)?;
        let recorded =
            async { ops::record_spec_version(&self.client().await?, version).await }.await;
        let short = crate::domain::spec::SpecHash::short_of(&version.hash);
        self.context(&format!("recording spec version {short}"), recorded)
    }

    async fn get_spec_version(&self, hash: &str) -> StoreResult<Option<SpecVersion>> {
        let read = async { ops::get_spec_version(&self.client().await?, hash).await }.await;
        self.context("reading a spec version", read)
    }

    async fn list_spec_versions(
        &self,
        agent_id: Option<&str>,
        now: DateTime<Utc>,
    ) -> StoreResult<Vec<SpecVersionUse>> {
        let listed =
            async { ops::list_spec_versions(&self.client().await?, agent_id, &now).await }.await;
        self.context("listing spec versions", listed)
    }
}
