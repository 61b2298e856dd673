//! The SQLite store: the read model: runs, events, pages of approvals, counts, stuck claims.

use super::*;

#[async_trait]
impl Queries for SqliteStore {
    async fn count_runs(&self, agent_id: &str, status: RunStatus) -> StoreResult<u64> {
        let agent_id = agent_id.to_string();
        self.read("counting runs", move |conn| {
            ops::count_runs(conn, &agent_id, status.as_str())
        })
        .await
    }

    async fn count_runs_by_status(&self, agent_id: &str) -> StoreResult<Vec<(RunStatus, u64)>> {
        let agent_id = agent_id.to_string();
        self.read("counting runs by status", move |conn| {
            ops::count_runs_by_status(conn, &agent_id)
        })
        .await
    }

    async fn list_pending(&self, query: &PendingQuery) -> StoreResult<PendingPage> {
        let query = query.clone();
        let page = self
            .read("listing pending approvals", move |conn| {
                ops::list_pending(conn, &query)
            })
            .await?;
        report_skipped(&self.describe(), "approval", &page.unreadable);
        Ok(page)
    }

    async fn list_approvals(&self, query: &ApprovalQuery) -> StoreResult<ApprovalPage> {
        let query = query.clone();
        let page = self
            .read("listing approvals", move |conn| {
                ops::list_approvals(conn, &query)
            })
            .await?;
        report_skipped(&self.describe(), "approval", &page.unreadable);
        Ok(page)
    }

    async fn count_pending_by_step(
        &self,
        agent_id: &str,
        now: DateTime<Utc>,
    ) -> StoreResult<std::collections::BTreeMap<String, u64>> {
        let agent_id = agent_id.to_string();
        let now = format_utc(now);
        self.read("counting pending approvals", move |conn| {
            ops::count_pending_by_step(conn, &agent_id, &now)
        })
        .await
    }

    async fn count_pending_by_spec(
        &self,
        agent_id: &str,
        now: DateTime<Utc>,
    ) -> StoreResult<std::collections::BTreeMap<String, u64>> {
        let agent_id = agent_id.to_string();
        let now = format_utc(now);
        self.read("counting pending approvals by spec version", move |conn| {
            ops::count_pending_by_spec(conn, &agent_id, &now)
        })
        .await
    }

    async fn list_stuck(
        &self,
        agent_id: Option<&str>,
        now: DateTime<Utc>,
    ) -> StoreResult<Vec<StuckClaim>> {
        let agent_id = agent_id.map(str::to_string);
        let now = format_utc(now);
        let (stuck, unreadable) = self
            .read("listing stuck runs", move |conn| {
                ops::list_stuck(conn, agent_id.as_deref(), &now)
            })
            .await?;
        report_skipped(&self.describe(), "approval", &unreadable);
        Ok(stuck)
    }

    async fn get_run(&self, run_id: &str) -> StoreResult<Option<RunRecord>> {
        let run_id = run_id.to_string();
        self.read(format!("reading run {run_id}"), move |conn| {
            ops::get_run(conn, &run_id)
        })
        .await
    }

    async fn get_run_outline(&self, run_id: &str) -> StoreResult<Option<RunRecord>> {
        let run_id = run_id.to_string();
        self.read(format!("reading run {run_id}"), move |conn| {
            ops::get_run_outline(conn, &run_id)
        })
        .await
    }

    async fn list_runs(&self, query: &RunQuery) -> StoreResult<RunsPage> {
        let query = query.clone();
        self.read("listing runs", move |conn| ops::list_runs(conn, &query))
            .await
    }

    async fn run_events(&self, run_id: &str, after_seq: u64) -> StoreResult<Vec<Event>> {
        let run_id = run_id.to_string();
        self.read(format!("reading the events of run {run_id}"), move |conn| {
            ops::run_events(conn, &run_id, after_seq)
        })
        .await
    }
}
