//! AgentRun: starts runs, resumes them by approval key, and drives steps in
//! order, writing to the store at durable points only (creation, pause,
//! claim, end).
//!
//! A paused run holds nothing in memory: pausing writes the record and the
//! task returns. Every resume, in this process or another after a restart,
//! goes through the same path: load, check, claim, re-enter.
//!
//! One file per use case: `start` (new runs), `decide` (the one decision
//! path, for every decider), `claim` (a workflow's claim of a decision),
//! `decider` (a workflow's checks of a decision), `outcome` (what a
//! decision came to), `resume` (continuing after a claim or from a
//! durable point), `operate` (cancel, expiry, recovery, retry, fail), `drive` (the step
//! loop), `durable_point` (the driver's writes), `event_log` (events
//! between writes) and `outage` (waiting out an unavailable store). This
//! file holds what they share: the handle, its errors and outcomes.

mod claim;
mod decide;
mod decider;
mod drive;
mod durable_point;
mod event_log;
mod migrate;
mod operate;
mod outage;
#[cfg(test)]
mod outage_tests;
mod outcome;
mod resume;
mod start;
mod versions;

use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;
use serde_json::{Map, Value};
use thiserror::Error;
use tokio::sync::broadcast;

use crate::domain::events::Event;
use crate::domain::pending_approval::{ApprovalError, ApprovalRecord};
use crate::domain::run_state::{Lease, RunRecord, RunStatus};
use crate::domain::spec::{Spec, StepKind};
use crate::engine::tools::{ToolInvoker, Unavailable};
use crate::engine::workflow::RunContext;
use crate::store::{SharedStore, StoreError};
use crate::support::time::SharedClock;

pub use crate::domain::spec::OnCrash;
pub use decide::Ballot;
pub(crate) use decide::{Decider, Ruling, approver_input, decide_approval};
pub use migrate::{
    MigrateOutcome, MigrateReport, MigrateRequest, MigrateResult, MigrateSelection,
    check_from_prefix,
};
pub use operate::OperatorFail;
pub use outage::DEFAULT_PATIENCE as DEFAULT_STORE_PATIENCE;
pub use outcome::{DecisionOutcome, Resumption, VoteRecorded};
pub use start::CreatedRun;
pub use versions::VersionMissingEnv;

/// Why a start or a decision could not be carried out. A run that fails on
/// its own (a step error) is not an error here: it is an outcome.
#[derive(Debug, Error)]
pub enum RunError {
    #[error(transparent)]
    Approval(#[from] ApprovalError),
    #[error(transparent)]
    Store(StoreError),
    #[error("approval {key} belongs to agent {found:?}, not {expected:?}")]
    WrongAgent {
        key: String,
        found: String,
        expected: String,
    },
    #[error("run {0} has no pending approval")]
    NoPendingApproval(String),
    #[error("{by} may not cancel run {run_id}: not in approvals.approvers")]
    CancelForbidden { run_id: String, by: String },
    /// This process stopped driving the run: another one recovered it, or
    /// it was ended from outside (cancelled, failed by an operator). Its
    /// last write changed nothing.
    #[error("run {run_id} is no longer driven here: {detail}")]
    NotDriven { run_id: String, detail: String },
    /// `approvals.approvers` is set and does not name who asked for an
    /// operator's action (`runs retry`, `runs fail`).
    #[error("{by} may not retry or fail run {run_id}: not in approvals.approvers")]
    Forbidden { run_id: String, by: String },
    /// `approvals.approvers` is set and does not name who asked to move
    /// approvals onto another spec version (`approvals migrate`).
    #[error("{by} may not migrate approvals: not in approvals.approvers")]
    MigrateForbidden { by: String },
    /// A background task doing the work of a request (creating a run,
    /// claiming a decision) ended before it answered: it panicked or its
    /// runtime is shutting down. The store said nothing wrong; what the
    /// task did, if anything, is as the store holds it.
    #[error("the task {task} stopped before it answered")]
    TaskDropped { task: &'static str },
    /// The spec version a pause was made under cannot run in this process
    /// (`on_spec_change: pin`): it is not in the store, no longer parses,
    /// names a `rust:` tool this binary lacks, or needs a variable that is
    /// not set. Nothing was written: the approval stays PENDING.
    #[error(
        "approval {key} waits on spec version {version}, which cannot run in this process: {reason}; \
         nothing was decided (reject is still possible)"
    )]
    SpecUnavailable {
        key: String,
        /// The version's short hash.
        version: String,
        reason: String,
    },
}

impl From<StoreError> for RunError {
    fn from(e: StoreError) -> Self {
        match e {
            StoreError::Approval(a) => RunError::Approval(a),
            StoreError::NotOwner {
                run_id,
                owner,
                detail,
            } => RunError::NotDriven {
                run_id,
                detail: format!("{detail} (this process is {owner})"),
            },
            other => RunError::Store(other),
        }
    }
}

/// Where a run stands after `start` or a decision returned.
#[derive(Debug, Clone, Serialize)]
pub struct RunOutcome {
    pub run_id: String,
    pub status: RunStatus,
    pub outputs: Map<String, Value>,
    pub error: Option<String>,
    /// The new pending record when the run paused.
    pub pending: Option<ApprovalRecord>,
}

/// One agent (a spec) bound to a store and its tools.
#[derive(Clone)]
pub struct AgentRun {
    spec: Arc<Spec>,
    store: SharedStore,
    tools: Arc<dyn ToolInvoker>,
    events: broadcast::Sender<Event>,
    /// What every timestamp, expiry and claim of these runs is read from.
    clock: SharedClock,
    /// How long this process holds a run it drives (see [`crate::domain::durable`]).
    lease: Duration,
    /// What this process counted of these runs (`GET /metrics`).
    metrics: Arc<crate::engine::metrics::Metrics>,
    /// The longest a driver waits for an unavailable store to take one
    /// write (see [`outage`]).
    patience: Duration,
    /// The spec this process serves: its approval settings say who may
    /// decide, and its `on_spec_change` policies route a pause made under
    /// another version. The same as `spec`, except on a handle that runs
    /// an older version for a pinned pause (see `versions`).
    serving: Arc<Spec>,
    /// Older versions loaded from the store (shared by clones).
    versions: Arc<versions::Versions>,
    /// Set once this spec's version is in the store (shared by clones), so
    /// that only the first run of a process writes it (see
    /// [`AgentRun::record_spec`]). Empty again never: a failed record
    /// leaves it unset, and the next run tries again.
    spec_recorded: Arc<tokio::sync::OnceCell<()>>,
}

impl std::fmt::Debug for AgentRun {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AgentRun")
            .field("agent", &self.spec.agent)
            .field("spec", &self.spec.hash.short())
            .field("serving", &self.serving.hash.short())
            .finish_non_exhaustive()
    }
}

impl AgentRun {
    pub fn new(spec: Arc<Spec>, store: SharedStore) -> AgentRun {
        // Redaction knows the spec's secrets before any call resolves one: a
        // reply to one call may echo a secret only another call uses.
        crate::support::secrets::remember_env(spec.secret_names());
        let (events, _) = broadcast::channel(1024);
        AgentRun {
            metrics: Arc::new(crate::engine::metrics::Metrics::for_spec(&spec)),
            serving: spec.clone(),
            versions: Arc::default(),
            spec,
            store,
            tools: Arc::new(Unavailable),
            events,
            clock: crate::support::time::system(),
            lease: crate::domain::durable::DEFAULT_LEASE,
            patience: DEFAULT_STORE_PATIENCE,
            spec_recorded: Arc::new(tokio::sync::OnceCell::new()),
        }
    }

    /// Store this spec's version (`tollgate_specs`) unless this handle, or
    /// a clone of it, already did: the first run a process starts writes
    /// it, every later one costs an atomic read. Concurrent first runs wait
    /// for one write. Every path that starts a run calls this before the
    /// run can be stored, so a stored run's version is always stored too,
    /// and a pause can be shown (and resumed) under the version it paused
    /// under, by any process. `serve` calls it at start-up, so a version's
    /// `last_seen` is when it was last served or run.
    ///
    /// A store that refuses the write refuses the run: nothing was written
    /// or run yet, the caller gets the store's error, and the next start
    /// tries the write again.
    pub async fn record_spec(&self) -> Result<(), RunError> {
        let recorded = self
            .spec_recorded
            .get_or_try_init(|| async {
                let version =
                    crate::domain::spec_version::SpecVersion::of(&self.spec, self.clock.now());
                self.store.record_spec_version(&version).await
            })
            .await;
        match recorded {
            Ok(()) => Ok(()),
            Err(e) => {
                tracing::error!(
                    spec_hash = %self.spec.hash.short(),
                    store = %self.store.describe(),
                    error = %e,
                    "could not store the spec version; no run is started under it until it is"
                );
                Err(RunError::Store(e))
            }
        }
    }

    /// Wait at most `patience` for an unavailable store (down, disk full)
    /// to take a driver's write before giving the run up; the run's lease
    /// bounds the wait too.
    pub fn with_store_patience(mut self, patience: Duration) -> AgentRun {
        self.patience = patience;
        self
    }

    /// Hold the runs this process drives for `lease` at a time (renewed
    /// while a step is in flight); another process may recover a run whose
    /// lease ran out.
    pub fn with_lease(mut self, lease: Duration) -> AgentRun {
        self.lease = lease.max(crate::domain::durable::MIN_LEASE);
        self
    }

    pub fn lease(&self) -> Duration {
        self.lease
    }

    /// A lease on a run for this process, from now.
    pub(super) fn new_lease(&self) -> Lease {
        Lease {
            owner: crate::domain::durable::node_id().to_string(),
            until: crate::support::time::add(self.clock.now(), self.lease),
        }
    }

    /// Read the time from `clock` instead of the system clock (tests make
    /// approvals expire with a [`crate::support::time::ManualClock`]).
    pub fn with_clock(mut self, clock: SharedClock) -> AgentRun {
        self.clock = clock;
        self
    }

    pub fn clock(&self) -> &SharedClock {
        &self.clock
    }

    pub fn with_tools(mut self, tools: Arc<dyn ToolInvoker>) -> AgentRun {
        self.tools = tools;
        self
    }

    pub fn spec(&self) -> &Arc<Spec> {
        &self.spec
    }

    pub fn store(&self) -> &SharedStore {
        &self.store
    }

    /// What this process counted of this agent's runs (shared by clones).
    pub fn metrics(&self) -> &Arc<crate::engine::metrics::Metrics> {
        &self.metrics
    }

    /// Live events of every run this handle drives, as they happen.
    pub fn subscribe(&self) -> broadcast::Receiver<Event> {
        self.events.subscribe()
    }
}

/// The context of a run that has not executed any step yet.
fn fresh_context(run: RunRecord) -> RunContext {
    RunContext {
        run_id: run.id,
        agent: run.agent_id,
        input: run.input,
        trigger: run.trigger,
        outputs: Map::new(),
        gate_key: None,
    }
}

/// Tool and model steps call out of the process.
fn calls_out(step: &crate::domain::spec::Step) -> bool {
    matches!(step.kind, StepKind::Tool { .. } | StepKind::Model(_))
}

/// Steps whose start and output the journal records: those that call out
/// or claim. Pure steps are re-evaluated on recovery and write nothing.
fn journaled(step: &crate::domain::spec::Step) -> bool {
    calls_out(step) || claims_key(step)
}

/// Dedupe steps claim a key in the store.
fn claims_key(step: &crate::domain::spec::Step) -> bool {
    matches!(step.kind, StepKind::Dedupe(_))
}
