//! What every handler shares.

use std::sync::Arc;

use tokio::sync::watch;

use super::auth::ApiTokens;
use super::tasks::Background;
use crate::links::LinkSigner;
use crate::notify::SlackNotifier;
use crate::run::AgentRun;
use crate::store::Queries;
use crate::watch::ApprovalWatcher;

#[derive(Clone)]
pub(crate) struct AppState {
    pub agent: AgentRun,
    pub tokens: Arc<ApiTokens>,
    /// Runs executing in this process (started or resumed here).
    pub background: Background,
    /// Becomes true when the server starts shutting down; long-lived
    /// responses (event streams) end on it.
    pub shutdown: watch::Receiver<bool>,
    /// Set when the spec has `approvals.notify.slack`.
    pub slack: Option<Arc<SlackNotifier>>,
    /// Signs approval links; `None` when links are off. Links are made
    /// when a response is written, never stored.
    pub links: Option<LinkSigner>,
    /// Set when the store pushes changes made by other processes
    /// (PostgreSQL NOTIFY): wakes event streams of runs decided elsewhere.
    pub watcher: Option<ApprovalWatcher>,
    /// Stores and follows gate requests (`/gates`, `/mcp`): the served
    /// agent's, with a watcher that answers waiters soon after a decision
    /// made anywhere.
    pub gates: crate::gate::Gate,
    /// Which background tasks are down (died, waiting to restart):
    /// `/readyz` is not ready while any is.
    pub tasks: Arc<super::supervisor::TaskHealth>,
}

impl AppState {
    pub fn agent_id(&self) -> &str {
        &self.agent.spec().agent
    }

    /// Whether `run` is this server's: a run of its agent, or the run of a
    /// gate request made through it (`gate:<agent>`, see `server/gates`),
    /// which no driver picks up but whose events and end are shown.
    pub fn owns_run(&self, run: &crate::run_state::RunRecord) -> bool {
        let agent = self.agent_id();
        run.agent_id == agent
            || run
                .agent_id
                .strip_prefix(crate::gate::GATE_AGENT_PREFIX)
                .is_some_and(|rest| rest == agent)
    }

    /// The store's read model: what pages, views and metrics read.
    pub fn queries(&self) -> &dyn Queries {
        self.agent.store().queries()
    }
}
