//! The PostgreSQL store: the read model: runs, events, pages of approvals, counts, stuck claims.

use super::*;

#[async_trait]
impl Queries for PostgresStore {
    async fn count_runs(&self, agent_id: &str, status: RunStatus) -> StoreResult<u64> {
        let counted =
            async { ops::count_runs(&self.client().await?, agent_id, status).await }.await;
        self.context("counting runs", counted)
    }

    async fn count_runs_by_status(&self, agent_id: &str) -> StoreResult<Vec<(RunStatus, u64)>> {
        let counted =
            async { ops::count_runs_by_status(&self.client().await?, agent_id).await }.await;
        self.context("counting runs by status", counted)
    }

    async fn list_pending(&self, query: &PendingQuery) -> StoreResult<PendingPage> {
        let page = async { ops::list_pending(&self.client().await?, query).await }.await;
        let page = self.context("listing pending approvals", page)?;
        report_skipped(&self.description, "approval", &page.unreadable);
        Ok(page)
    }

    async fn list_approvals(&self, query: &ApprovalQuery) -> StoreResult<ApprovalPage> {
        let page = async { ops::list_approvals(&self.client().await?, query).await }.await;
        let page = self.context("listing approvals", page)?;
        report_skipped(&self.description, "approval", &page.unreadable);
        Ok(page)
    }

    async fn count_pending_by_step(
        &self,
        agent_id: &str,
        now: DateTime<Utc>,
    ) -> StoreResult<std::collections::BTreeMap<String, u64>> {
        let counted =
            async { ops::count_pending_by_step(&self.client().await?, agent_id, &now).await }.await;
        self.context("counting pending approvals", counted)
    }

    async fn count_pending_by_spec(
        &self,
        agent_id: &str,
        now: DateTime<Utc>,
    ) -> StoreResult<std::collections::BTreeMap<String, u64>> {
        let counted =
            async { ops::count_pending_by_spec(&self.client().await?, agent_id, &now).await }.await;
        self.context("counting pending approvals by spec version", counted)
    }

    async fn list_stuck(
        &self,
        agent_id: Option<&str>,
        now: DateTime<Utc>,
    ) -> StoreResult<Vec<StuckClaim>> {
        let listed = async { ops::list_stuck(&self.client().await?, agent_id, &now).await }.await;
        let (stuck, unreadable) = self.context("listing stuck runs", listed)?;
        report_skipped(&self.description, "approval", &unreadable);
        Ok(stuck)
    }

    async fn get_run(&self, run_id: &str) -> StoreResult<Option<RunRecord>> {
        let read = async { ops::get_run(&self.client().await?, run_id).await }.await;
        self.context(&format!("reading run {run_id}"), read)
    }

    async fn get_run_outline(&self, run_id: &str) -> StoreResult<Option<RunRecord>> {
        let read = async { ops::get_run_outline(&self.client().await?, run_id).await }.await;
        self.context(&format!("reading run {run_id}"), read)
    }

    async fn list_runs(&self, query: &RunQuery) -> StoreResult<RunsPage> {
        let read = async { ops::list_runs(&self.client().await?, query).await }.await;
        self.context("listing runs", read)
    }

    async fn run_events(&self, run_id: &str, after_seq: u64) -> StoreResult<Vec<Event>> {
        let read = async { ops::run_events(&self.client().await?, run_id, after_seq).await }.await;
        self.context(&format!("reading the events of run {run_id}"), read)
    }
}
