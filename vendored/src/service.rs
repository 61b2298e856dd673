//! The use cases every adapter shares (DESIGN §8): deciding, operating on
//! runs, gate requests, batches, votes, notices and staleness, with the
//! views they answer with and the error they refuse with.
//!
//! The HTTP routes, the inbox, MCP and the CLI each turn their input into
//! a call here and its answer into their own output; they never call one
//! another (`tests/it/layers.rs` refuses it). Below this layer are the
//! engine and notify; above it, the server and the application.

pub(crate) mod batch;
mod caller;
pub(crate) mod decide;
mod error;
pub(crate) mod gates;
pub(crate) mod notices;
pub(crate) mod operate;
pub(crate) mod runs;
pub(crate) mod schema;
pub(crate) mod stale;
pub(crate) mod tasks;
pub(crate) mod views;
pub(crate) mod votes;

use tokio::sync::watch;

pub use caller::{Caller, Scope};
pub use error::{ApiError, BUSY_RETRY_AFTER_SECS, CODES, ErrorCode, NOT_READY};

use crate::engine::run::AgentRun;
use crate::store::Queries;
use tasks::Background;

/// What the use cases act on: the served agent, the runs this process
/// drives, the gate requests it stores and follows, and the shutdown
/// signal that ends long waits.
#[derive(Clone)]
pub(crate) struct Services {
    pub agent: AgentRun,
    /// Runs executing in this process (started or resumed here).
    pub background: Background,
    /// Stores and follows gate requests (`/gates`, `/mcp`): the served
    /// agent's, with a watcher that answers waiters soon after a decision
    /// made anywhere.
    pub gates: crate::engine::gate::Gate,
    /// Becomes true when the server starts shutting down; long waits and
    /// event streams end on it.
    pub shutdown: watch::Receiver<bool>,
}

impl Services {
    pub fn agent_id(&self) -> &str {
        &self.agent.spec().agent
    }

    /// Whether `run` is this server's: a run of its agent, or the run of a
    /// gate request made through it (`gate:<agent>`, see `service/gates`),
    /// which no driver picks up but whose events and end are shown.
    pub fn owns_run(&self, run: &crate::domain::run_state::RunRecord) -> bool {
        let agent = self.agent_id();
        run.agent_id == agent
            || run
                .agent_id
                .strip_prefix(crate::engine::gate::GATE_AGENT_PREFIX)
                .is_some_and(|rest| rest == agent)
    }

    /// The store's read model: what pages, views and metrics read.
    pub fn queries(&self) -> &dyn Queries {
        self.agent.store().queries()
    }
}
