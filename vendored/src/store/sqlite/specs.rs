//! The SQLite store: the spec versions runs started under.

use super::*;

#[async_trait]
impl SpecVersions for SqliteStore {
    async fn record_spec_version(&self, version: &SpecVersion) -> StoreResult<()> {
        check_spec_version(version)?;
        let version = version.clone();
        let short = crate::domain::spec::SpecHash::short_of(&version.hash).to_string();
        self.write(format!("recording spec version {short}"), move |conn| {
            ops::record_spec_version(conn, &version)
        })
        .await
    }

    async fn get_spec_version(&self, hash: &str) -> StoreResult<Option<SpecVersion>> {
        let hash = hash.to_string();
        self.read("reading a spec version", move |conn| {
            ops::get_spec_version(conn, &hash)
        })
        .await
    }

    async fn list_spec_versions(
        &self,
        agent_id: Option<&str>,
        now: DateTime<Utc>,
    ) -> StoreResult<Vec<SpecVersionUse>> {
        let agent_id = agent_id.map(str::to_string);
        let now = format_utc(now);
        self.read("listing spec versions", move |conn| {
            ops::list_spec_versions(conn, agent_id.as_deref(), &now)
        })
        .await
    }
}
