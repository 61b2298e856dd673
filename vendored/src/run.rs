//! AgentRun: starts runs, resumes them by approval key, and drives steps in
//! order, writing to the store at durable points only (creation, pause,
//! claim, end).
//!
//! A paused run holds nothing in memory: pausing writes the record and the
//! task returns. Every resume, in this process or another after a restart,
//! goes through the same path: load, check, claim, re-enter.

mod outage;
#[cfg(test)]
mod outage_tests;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use serde::Serialize;
use serde_json::{Map, Value};
use thiserror::Error;
use tokio::sync::broadcast;

use crate::events::{Event, EventKind};
use crate::pending_approval::{
    self, AfterClaim, ApprovalError, ApprovalRecord, ApprovalStatus, Claim, Decision, Phase,
};
use crate::run_state::{JournalEntry, Lease, OwnedRun, RunRecord, RunStatus};
use crate::spec::{Spec, StepKind};
use crate::store::{
    CancelRun, Cancelled, FirstWrite, Pause, RunEnd, RunTransition, SharedStore, StoreError,
};
use crate::time::{Clock, SharedClock};
use crate::tools::{ToolInvoker, Unavailable};
use crate::workflow::{self, GateRequest, RunContext, StepEnv, StepFailure, StepOutcome};
use outage::{LeaseWatch, Outage, Probe, Renewer};

pub use outage::DEFAULT_PATIENCE as DEFAULT_STORE_PATIENCE;

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

/// A decision that won its claim; the run waits for [`AgentRun::resume_claimed`].
#[derive(Debug, Clone)]
pub struct ClaimedDecision {
    /// The record as decided.
    pub record: ApprovalRecord,
    next_seq: u64,
    /// Set when the claim's write also ended the run (see
    /// [`AgentRun::claim`]): resuming only answers with it.
    finished: Option<RunOutcome>,
    /// The same decider repeated the decision that had already won (see
    /// [`ApprovalRecord::was_decided_as`]): nothing was written, and
    /// resuming does not drive the run again (its first claim did).
    repeated: bool,
}

impl ClaimedDecision {
    /// Whether this is a repeat of a decision that won earlier.
    pub fn is_repeat(&self) -> bool {
        self.repeated
    }
}

impl ClaimedDecision {
    fn repeat(record: ApprovalRecord) -> ClaimedDecision {
        ClaimedDecision {
            record,
            next_seq: 0,
            finished: None,
            repeated: true,
        }
    }
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
    /// How long this process holds a run it drives (see [`crate::durable`]).
    lease: Duration,
    /// What this process counted of these runs (`GET /metrics`).
    metrics: Arc<crate::metrics::Metrics>,
    /// The longest a driver waits for an unavailable store to take one
    /// write (see [`outage`]).
    patience: Duration,
}

/// A run stored by [`AgentRun::create`] and not executed yet: hand it to
/// [`AgentRun::drive_created`]. It carries what the creation wrote, so the
/// driver never reads back what this process just stored.
pub struct CreatedRun {
    run: RunRecord,
    log: EventLog,
}

impl CreatedRun {
    pub fn run_id(&self) -> &str {
        &self.run.id
    }

    /// The run was written with its first events: announce them.
    fn stored(run: RunRecord, mut log: EventLog) -> CreatedRun {
        log.published();
        CreatedRun { run, log }
    }
}

impl AgentRun {
    pub fn new(spec: Arc<Spec>, store: SharedStore) -> AgentRun {
        // Redaction knows the spec's secrets before any call resolves one: a
        // reply to one call may echo a secret only another call uses.
        crate::secrets::remember_env(spec.secret_names());
        let (events, _) = broadcast::channel(1024);
        AgentRun {
            metrics: Arc::new(crate::metrics::Metrics::for_spec(&spec)),
            spec,
            store,
            tools: Arc::new(Unavailable),
            events,
            clock: crate::time::system(),
            lease: crate::durable::DEFAULT_LEASE,
            patience: DEFAULT_STORE_PATIENCE,
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
        self.lease = lease.max(crate::durable::MIN_LEASE);
        self
    }

    pub fn lease(&self) -> Duration {
        self.lease
    }

    /// A lease on a run for this process, from now.
    fn new_lease(&self) -> Lease {
        Lease {
            owner: crate::durable::node_id().to_string(),
            until: crate::time::add(self.clock.now(), self.lease),
        }
    }

    /// Read the time from `clock` instead of the system clock (tests make
    /// approvals expire with a [`crate::time::ManualClock`]).
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
    pub fn metrics(&self) -> &Arc<crate::metrics::Metrics> {
        &self.metrics
    }

    /// Live events of every run this handle drives, as they happen.
    pub fn subscribe(&self) -> broadcast::Receiver<Event> {
        self.events.subscribe()
    }

    /// Start a run and drive it to its first pause or its end.
    ///
    /// The run is stored with its first durable point: its first pause, its
    /// end, or the first step that calls out or claims a dedupe key,
    /// whichever comes first. Nothing outside this call can see the run
    /// before that (the caller learns its id from the outcome), so a run
    /// that reaches its gate through pure steps costs one commit, not two.
    pub async fn start(&self, input: Value, trigger: Value) -> Result<RunOutcome, RunError> {
        let (run, mut log) = self.new_run(input, trigger);
        log.unstored = Some(run.clone());
        self.drive(fresh_context(run), 0, None, log).await
    }

    /// Record a new run (durably, owned by this process) without executing
    /// it; [`AgentRun::drive_created`] executes it. Lets a server answer
    /// with the run id before the steps run: should this process die in
    /// between, the run's lease runs out and a serving process recovers it.
    pub async fn create(&self, input: Value, trigger: Value) -> Result<CreatedRun, RunError> {
        let (run, log) = self.new_owned_run(input, trigger);
        self.store.create_run(&run, log.pending()).await?;
        Ok(CreatedRun::stored(run, log))
    }

    /// [`AgentRun::create`] if `once` can be claimed, in one write (see
    /// [`crate::store::StateStore::create_run_once`]): how a schedule tick
    /// or a signed webhook request starts at most one run, and never none
    /// once claimed. `None` when the key is taken: no run was created.
    pub async fn create_once(
        &self,
        input: Value,
        trigger: Value,
        once: &crate::store::KeyClaim,
    ) -> Result<Option<CreatedRun>, RunError> {
        let (run, log) = self.new_owned_run(input, trigger);
        if !self
            .store
            .create_run_once(once, &run, log.pending())
            .await?
        {
            return Ok(None);
        }
        Ok(Some(CreatedRun::stored(run, log)))
    }

    /// A new run owned by this process under a fresh lease, not stored yet.
    fn new_owned_run(&self, input: Value, trigger: Value) -> (RunRecord, EventLog) {
        let (mut run, mut log) = self.new_run(input, trigger);
        let lease = self.new_lease();
        run.owner = Some(lease.owner.clone());
        run.lease_until = Some(lease.until);
        log.owner = Some(lease.owner);
        log.lease.set(Some(lease.until));
        (run, log)
    }

    /// A new run and its `run_started` event, not stored yet.
    fn new_run(&self, input: Value, mut trigger: Value) -> (RunRecord, EventLog) {
        pending_approval::scrub_trigger(&mut trigger);
        let now = self.clock.now();
        let run = RunRecord {
            id: new_run_id(),
            agent_id: self.spec.agent.clone(),
            spec_hash: self.spec.hash.to_string(),
            status: RunStatus::Running,
            input: input.clone(),
            trigger,
            outputs: Map::new(),
            error: None,
            created_at: now,
            updated_at: now,
            owner: None,
            lease_until: None,
        };
        let mut log = EventLog::new(&run.id, 1, self.events.clone(), &self.clock);
        log.emit(EventKind::RunStarted {
            agent: run.agent_id.clone(),
            spec_hash: run.spec_hash.clone(),
            input,
        });
        (run, log)
    }

    /// Execute a run created with [`AgentRun::create`] from its first step.
    pub async fn drive_created(&self, created: CreatedRun) -> Result<RunOutcome, RunError> {
        let CreatedRun { run, log } = created;
        self.drive(fresh_context(run), 0, None, log).await
    }

    /// Decide a pending approval by its key and resume the run in this
    /// process. Exactly one decision per key wins, across processes.
    pub async fn resume_by_key(
        &self,
        key: &str,
        decision: Decision,
        decided_by: &str,
    ) -> Result<RunOutcome, RunError> {
        let claimed = self.claim(key, decision, decided_by).await?;
        self.resume_claimed(claimed).await
    }

    /// The first half of a resume: check and claim the decision (one
    /// conditional write). Once this returns, the decision is final and the
    /// caller owns the run's continuation: pass the result to
    /// [`AgentRun::resume_claimed`] (a server answers in between).
    ///
    /// When nothing after the gate calls out, claims a key or can pause
    /// (only `set:` steps follow), the run is worked out to its end first,
    /// in memory, and the claim's write stores the decision and the run's
    /// end together: one commit instead of two, and no window in which a
    /// crash leaves the decided run to recovery. If the claim loses,
    /// nothing of that end is written or announced.
    pub async fn claim(
        &self,
        key: &str,
        decision: Decision,
        decided_by: &str,
    ) -> Result<ClaimedDecision, RunError> {
        let claimed = self.try_claim(key, decision, decided_by).await;
        self.count_claim(&claimed);
        claimed
    }

    /// A decision that won counts by its outcome; one that found the
    /// approval already decided by someone else, as a conflict.
    fn count_claim(&self, claimed: &Result<ClaimedDecision, RunError>) {
        match claimed {
            Ok(won) if !won.repeated => {
                if let Some(outcome) = crate::metrics::DecisionOutcome::of(won.record.status) {
                    self.metrics.decided(outcome, 1);
                }
            }
            Err(RunError::Approval(ApprovalError::AlreadyResolved { .. })) => {
                self.metrics.claim_conflict()
            }
            _ => {}
        }
    }

    async fn try_claim(
        &self,
        key: &str,
        decision: Decision,
        decided_by: &str,
    ) -> Result<ClaimedDecision, RunError> {
        let record = self
            .store
            .get_approval(key)
            .await?
            .ok_or_else(|| ApprovalError::NotFound { key: key.into() })?;
        self.check_decider(key, decided_by)?;
        if record.agent_id != self.spec.agent {
            return Err(RunError::WrongAgent {
                key: key.into(),
                found: record.agent_id,
                expected: self.spec.agent.clone(),
            });
        }
        let claim = Claim {
            key: key.to_string(),
            decision,
            decided_by: decided_by.to_string(),
            now: self.clock.now(),
            spec_hash: self.spec.hash.to_string(),
            then: AfterClaim::Drive(self.new_lease()),
        };
        // The decider repeating the decision that won (a retry after a
        // lost answer) gets that decision back, not `already_resolved`.
        if record.was_decided_as(&claim.decision, decided_by) {
            return Ok(ClaimedDecision::repeat(record));
        }
        // A record that is no longer pending answers for its state
        // (`already_resolved`, `approval_expired`) whatever the decision
        // looks like: a payload that would not fit is beside the point then.
        if record.status != ApprovalStatus::Pending || record.is_expired_at(claim.now) {
            return Err(ApprovalError::explain_failed_claim(key, Some(&record), &claim).into());
        }
        self.check_payload(&record, &claim.decision)?;
        if self.ends_without_io(&record, &claim.decision) {
            return self.claim_and_finish(record, claim).await;
        }
        let claimed = match self.store.claim(&claim).await {
            Ok(claimed) => claimed,
            Err(StoreError::Approval(ApprovalError::AlreadyResolved { .. })) => {
                return self.lost_claim(&claim).await;
            }
            Err(e) => return Err(e.into()),
        };
        // The claim stored this event; announce it.
        let _ = self.events.send(claimed.event.clone());
        Ok(ClaimedDecision {
            next_seq: claimed.event.seq + 1,
            record: claimed.record,
            finished: None,
            repeated: false,
        })
    }

    /// The claim lost the race since the record was read: to this decider's
    /// own earlier request (a retry sent while the first was in flight) it
    /// is a repeat; to anyone else, a conflict.
    async fn lost_claim(&self, claim: &Claim) -> Result<ClaimedDecision, RunError> {
        let now = self.store.get_approval(&claim.key).await?;
        match now {
            Some(won) if won.was_decided_as(&claim.decision, &claim.decided_by) => {
                Ok(ClaimedDecision::repeat(won))
            }
            other => {
                Err(ApprovalError::explain_failed_claim(&claim.key, other.as_ref(), claim).into())
            }
        }
    }

    /// True when deciding `record` this way ends its run with no call, key
    /// claim or pause on the way: the gate step itself calls nothing with
    /// this decision, only `set:` steps follow it, and the spec has no
    /// dedupe step (a failing run releases its keys, a write that must not
    /// come before the claim). The spec must be the one the run paused
    /// under, whose steps line up with the record.
    fn ends_without_io(&self, record: &ApprovalRecord, decision: &Decision) -> bool {
        let Some(gate) = self.spec.steps.get(record.step_index) else {
            return false;
        };
        let gate_calls = record.phase == Phase::Before
            && journaled(gate)
            && !matches!(decision, Decision::Reject { .. });
        record.spec_hash == self.spec.hash.as_str()
            && !gate_calls
            && self.spec.steps[record.step_index + 1..]
                .iter()
                .all(|step| matches!(step.kind, StepKind::Set { .. }))
            && !self.spec.steps.iter().any(claims_key)
    }

    /// See [`AgentRun::claim`]: drive the decided run to its end with the
    /// claim deferred to that end's write ([`AfterClaim::Finish`]).
    async fn claim_and_finish(
        &self,
        record: ApprovalRecord,
        claim: Claim,
    ) -> Result<ClaimedDecision, RunError> {
        let decided = record.decided_by_claim(&claim);
        // Numbered from 1 here: the store numbers them after the decision.
        let (ctx, mut log) = self.context_after_claim(&decided, 1);
        log.owner = None;
        log.unclaimed = Some(claim.clone());
        self.replay(&ctx, decided.step_index, &mut log);
        let step_index = decided.step_index;
        match self
            .drive(ctx, step_index, Some(decided.clone()), log)
            .await
        {
            Ok(outcome) => Ok(ClaimedDecision {
                next_seq: 0,
                record: decided,
                finished: Some(outcome),
                repeated: false,
            }),
            Err(RunError::Approval(ApprovalError::AlreadyResolved { .. })) => {
                self.lost_claim(&claim).await
            }
            Err(e) => Err(e),
        }
    }

    /// The second half of a resume: re-enter the run at its gate with the
    /// claimed decision and drive it to its next pause or its end.
    ///
    /// A repeated decision drives nothing (the claim that won did, or does):
    /// it answers with the run as the store holds it now.
    pub async fn resume_claimed(&self, claimed: ClaimedDecision) -> Result<RunOutcome, RunError> {
        if claimed.repeated {
            return self.stored_outcome(&claimed.record.run_id).await;
        }
        if let Some(outcome) = claimed.finished {
            return Ok(outcome);
        }
        self.continue_after_claim(claimed.record, claimed.next_seq)
            .await
    }

    /// The run as stored: its status, outputs and error, and the approval
    /// it waits on, if any.
    pub async fn stored_outcome(&self, run_id: &str) -> Result<RunOutcome, RunError> {
        let run = self
            .store
            .get_run(run_id)
            .await?
            .ok_or_else(|| RunError::Store(StoreError::RunNotFound(run_id.to_string())))?;
        let pending = match run.status {
            RunStatus::AwaitingApproval => {
                self.store.pending_for_run(run_id, self.clock.now()).await?
            }
            _ => None,
        };
        Ok(RunOutcome {
            run_id: run.id,
            status: run.status,
            outputs: run.outputs,
            error: run.error,
            pending,
        })
    }

    /// Decide the pending approval of a run, by run id.
    pub async fn resume(
        &self,
        run_id: &str,
        decision: Decision,
        decided_by: &str,
    ) -> Result<RunOutcome, RunError> {
        let record = self
            .store
            .pending_for_run(run_id, self.clock.now())
            .await?
            .ok_or_else(|| RunError::NoPendingApproval(run_id.to_string()))?;
        self.resume_by_key(&record.key, decision, decided_by).await
    }

    /// Cancel a waiting or running run of this agent (see
    /// [`crate::store::StateStore::cancel_run`]): `by` must be allowed to
    /// decide (`approvals.approvers`), as for a decision.
    ///
    /// A running run's driver is not stopped by this: until its writes are
    /// fenced (DESIGN §9), its current step finishes. Its next durable
    /// write then carries an event number the cancel's `run_cancelled`
    /// took, which SQLite and PostgreSQL refuse (the run stays
    /// `cancelled`); the memory store does not check.
    pub async fn cancel(
        &self,
        run_id: &str,
        by: &str,
        reason: Option<String>,
    ) -> Result<Cancelled, RunError> {
        if let Some(allowed) = &self.spec.approvals.approvers {
            if !allowed.iter().any(|a| a == by) {
                return Err(RunError::CancelForbidden {
                    run_id: run_id.into(),
                    by: by.into(),
                });
            }
        }
        // Another agent's run is not this agent's to cancel: not found here.
        match self.store.get_run(run_id).await? {
            Some(run) if run.agent_id == self.spec.agent => {}
            _ => return Err(StoreError::RunNotFound(run_id.to_string()).into()),
        }
        let cancelled = self
            .store
            .cancel_run(&CancelRun {
                run_id: run_id.to_string(),
                by: by.to_string(),
                reason,
                now: self.clock.now(),
            })
            .await?;
        let ended = u64::from(cancelled.approval.is_some());
        self.metrics
            .decided(crate::metrics::DecisionOutcome::Cancelled, ended);
        let _ = self.events.send(cancelled.event.clone());
        Ok(cancelled)
    }

    /// Mark overdue approvals EXPIRED and end their runs (at most once
    /// across processes). Returns what this call expired.
    pub async fn sweep_expired(&self) -> Result<Vec<ApprovalRecord>, RunError> {
        let expired = self.store.expire_due(self.clock.now()).await?;
        self.metrics.decided(
            crate::metrics::DecisionOutcome::Expired,
            expired.len() as u64,
        );
        Ok(expired)
    }

    /// Claim this agent's orphaned runs for this process (`running`, and
    /// their driver's lease ran out or never existed, or their driver is
    /// a process on this host that is seen to be dead): one conditional
    /// write, so each orphan has one winner across every process sharing
    /// the store. Resume each with [`AgentRun::resume_recovered`].
    pub async fn claim_orphans(&self) -> Result<Vec<OwnedRun>, RunError> {
        let batch = crate::durable::RECOVER_BATCH;
        let lease = self.new_lease();
        let now = self.clock.now();
        let agent = &self.spec.agent;
        let mut claimed = self.store.claim_orphans(agent, &lease, now, batch).await?;
        if claimed.len() >= batch {
            return Ok(claimed);
        }
        // Leases still running, but maybe of a process that died on this
        // host: those runs need not wait for the lease to run out.
        let one_kernel = self.store.one_kernel();
        for owner in self.store.leased_owners(agent, now).await? {
            let crate::durable::owner::Liveness::Dead(why) =
                crate::durable::owner_liveness(&owner, one_kernel)
            else {
                continue;
            };
            let taken = self
                .store
                .take_over_runs(agent, &owner, &lease, batch - claimed.len())
                .await?;
            if !taken.is_empty() {
                tracing::info!(
                    owner = %owner,
                    runs = taken.len(),
                    "taking over the runs of a dead driver without waiting for its lease: {why}"
                );
            }
            claimed.extend(taken);
            if claimed.len() >= batch {
                break;
            }
        }
        Ok(claimed)
    }

    /// Resume a run this process claimed with [`AgentRun::claim_orphans`]
    /// from its last durable point: its latest decided gate (or its first
    /// step), re-evaluating pure steps, taking journaled outputs of steps
    /// that completed, and handling a step found in flight by its
    /// `on_crash`. Emits `run_recovered`.
    pub async fn resume_recovered(&self, owned: OwnedRun) -> Result<RunOutcome, RunError> {
        let by = crate::durable::node_id().to_string();
        self.redrive(owned, Some(by), false).await
    }

    /// `runs retry`, first half: take a `stuck` or `failed` run over for
    /// this process and record `run_recovered` with `by`. Pass the result
    /// to [`AgentRun::resume_retried`] (a server answers in between).
    ///
    /// A run an operator failed (`runs fail`) stays failed: its retry is
    /// refused, naming who failed it, when and why, unless `force` says the
    /// operator means it (the `run_recovered` then says `forced`). A run
    /// that failed by itself is retried as ever. The change is one write
    /// conditional on the run's last event being the one read here, so of
    /// a retry and a fail racing (or two retries) exactly one lands.
    pub async fn claim_retry(
        &self,
        run_id: &str,
        by: &str,
        force: bool,
    ) -> Result<OwnedRun, RunError> {
        let run = self.operated_run(run_id, by).await?;
        let events = self.store.run_events(&run.id, 0).await?;
        let failed_by = (run.status == RunStatus::Failed)
            .then(|| OperatorFail::of(&events))
            .flatten();
        if let (Some(failed), false) = (&failed_by, force) {
            return Err(failed.refusal(&run.id).into());
        }
        let (_, index) = self.resume_point(&run.id).await?;
        let change = RunTransition {
            run_id: run.id.clone(),
            from: vec![RunStatus::Stuck, RunStatus::Failed],
            to: RunStatus::Running,
            error: None,
            lease: Some(self.new_lease()),
            event: EventKind::RunRecovered {
                by: by.to_string(),
                from_step: self.spec.steps.get(index).map(|s| s.id.clone()),
                forced: failed_by.is_some(),
            },
            at: self.clock.now(),
            if_last_seq: Some(events.last().map_or(0, |e| e.seq)),
        };
        let (run, event) = match self.store.transition_run(&change).await {
            Ok(changed) => changed,
            Err(e @ StoreError::WrongRunStatus { .. }) => {
                return Err(self
                    .lost_to_operator(run_id, force)
                    .await
                    .unwrap_or(e)
                    .into());
            }
            Err(e) => return Err(e.into()),
        };
        let next_seq = event.seq + 1;
        let _ = self.events.send(event);
        Ok(OwnedRun { run, next_seq })
    }

    /// A retry's write lost: when an operator's fail won meanwhile, the
    /// refusal names it (as for a retry that came after it).
    async fn lost_to_operator(&self, run_id: &str, force: bool) -> Option<StoreError> {
        if force {
            return None;
        }
        let run = self.store.get_run(run_id).await.ok()??;
        if run.status != RunStatus::Failed {
            return None;
        }
        let events = self.store.run_events(run_id, 0).await.ok()?;
        Some(OperatorFail::of(&events)?.refusal(run_id))
    }

    /// `runs retry`, second half: drive the run from its last durable
    /// point, re-sending a step found in flight with the same idempotency
    /// key whatever its `on_crash` (the operator asked for it).
    pub async fn resume_retried(&self, owned: OwnedRun) -> Result<RunOutcome, RunError> {
        self.redrive(owned, None, true).await
    }

    /// `runs fail`: end a `stuck` run `failed` with `reason`, recording
    /// who did it (`run_failed` with `by` and `reason`). One write
    /// conditional on the run's last event being the one read here: of a
    /// fail and a retry racing, one lands.
    pub async fn fail_stuck(
        &self,
        run_id: &str,
        reason: &str,
        by: &str,
    ) -> Result<RunRecord, RunError> {
        let run = self.operated_run(run_id, by).await?;
        let last = self
            .store
            .run_events(&run.id, 0)
            .await?
            .last()
            .map(|e| e.seq);
        let error = format!("failed by {by}: {reason}");
        let change = RunTransition {
            run_id: run.id,
            from: vec![RunStatus::Stuck],
            to: RunStatus::Failed,
            error: Some(error.clone()),
            lease: None,
            event: EventKind::RunFailed {
                error,
                by: Some(by.to_string()),
                reason: Some(reason.to_string()),
            },
            at: self.clock.now(),
            if_last_seq: Some(last.unwrap_or(0)),
        };
        let (run, event) = self.store.transition_run(&change).await?;
        let _ = self.events.send(event);
        Ok(run)
    }

    /// The run an operator acts on: this agent's, and `by` allowed by
    /// `approvals.approvers` as for a decision.
    async fn operated_run(&self, run_id: &str, by: &str) -> Result<RunRecord, RunError> {
        if let Some(allowed) = &self.spec.approvals.approvers
            && !allowed.iter().any(|a| a == by)
        {
            return Err(RunError::Forbidden {
                run_id: run_id.to_string(),
                by: by.to_string(),
            });
        }
        match self.store.get_run(run_id).await? {
            Some(run) if run.agent_id == self.spec.agent => Ok(run),
            // Another agent's run is not this one's business.
            _ => Err(RunError::Store(StoreError::RunNotFound(run_id.to_string()))),
        }
    }

    /// Where a run resumes: its latest decided gate (with the record) or
    /// its first step. A record still pending or expired cannot belong to
    /// a run being resumed.
    async fn resume_point(
        &self,
        run_id: &str,
    ) -> Result<(Option<ApprovalRecord>, usize), RunError> {
        let latest = match self.store.latest_approval_key(run_id).await? {
            Some(key) => self.store.get_approval(&key).await?,
            None => None,
        };
        let gate = latest.filter(|r| {
            matches!(
                r.status,
                ApprovalStatus::Approved | ApprovalStatus::Modified | ApprovalStatus::Rejected
            )
        });
        let index = gate.as_ref().map_or(0, |r| r.step_index);
        Ok((gate, index))
    }

    /// Drive a run this process owns on from its last durable point (see
    /// [`AgentRun::resume_recovered`]); `retry_in_doubt` re-sends a step
    /// found in flight whatever its `on_crash`.
    async fn redrive(
        &self,
        owned: OwnedRun,
        recovered_by: Option<String>,
        retry_in_doubt: bool,
    ) -> Result<RunOutcome, RunError> {
        let OwnedRun { run, next_seq } = owned;
        let (gate, _) = self.resume_point(&run.id).await?;
        let journal = self.store.run_journal(&run.id).await?;
        let mut log = EventLog::new(&run.id, next_seq, self.events.clone(), &self.clock);
        log.owner = Some(crate::durable::node_id().to_string());
        log.lease.set(run.lease_until);
        log.journal = journal.into_iter().map(|e| (e.step_index, e)).collect();
        log.retry_in_doubt = retry_in_doubt;
        log.stored_outputs = run.outputs.clone();
        let same_spec = run.spec_hash == self.spec.hash.as_str();
        let spec_hash = run.spec_hash.clone();
        let (ctx, index) = match &gate {
            Some(record) => (
                RunContext {
                    run_id: run.id.clone(),
                    agent: run.agent_id.clone(),
                    input: run.input.clone(),
                    trigger: run.trigger.clone(),
                    outputs: record.outputs.clone(),
                    // Set by the driver when it re-enters the gate's step
                    // with its decision, as on any resume.
                    gate_key: None,
                },
                record.step_index,
            ),
            None => (fresh_context(run), 0),
        };
        let from_step = self.spec.steps.get(index).map(|s| s.id.clone());
        if let Some(by) = recovered_by {
            log.emit(EventKind::RunRecovered {
                by,
                from_step: from_step.clone(),
                forced: false,
            });
        }
        if !same_spec {
            if let Some(record) = gate
                .as_ref()
                .filter(|r| r.status == ApprovalStatus::Rejected)
            {
                log.emit(EventKind::RunRejected {
                    reason: record.reason().map(str::to_string),
                });
                return self.finish(&ctx, RunStatus::Rejected, None, log).await;
            }
            // The steps may no longer line up with what the run did.
            let reason = format!(
                "the spec changed since the run started (it ran under {}, this process serves {}): \
                 it is not resumed under another spec. Serve that spec again and `runs retry`, \
                 or `runs fail` it",
                crate::SpecHash::short_of(&spec_hash),
                self.spec.hash.short()
            );
            log.emit(EventKind::RunStuck {
                step: from_step.unwrap_or_default(),
                reason: reason.clone(),
            });
            return self.finish(&ctx, RunStatus::Stuck, Some(reason), log).await;
        }
        self.drive(ctx, index, gate, log).await
    }

    /// `approvals.approvers`, when set, lists who may decide.
    fn check_decider(&self, key: &str, decided_by: &str) -> Result<(), ApprovalError> {
        // The same rule decides who is shown a link (links::may_decide).
        if crate::links::may_decide(self.spec.approvals.approvers.as_deref(), decided_by) {
            Ok(())
        } else {
            Err(ApprovalError::Forbidden {
                key: key.into(),
                decided_by: decided_by.into(),
            })
        }
    }

    /// A modify must fit its gate; checked before the claim so a bad edit
    /// leaves the record untouched and PENDING.
    fn check_payload(
        &self,
        record: &ApprovalRecord,
        decision: &Decision,
    ) -> Result<(), ApprovalError> {
        let Decision::Modify { payload, .. } = decision else {
            return Ok(());
        };
        let is_tool_gate = record.phase == Phase::Before
            && self
                .spec
                .steps
                .get(record.step_index)
                .is_some_and(|s| matches!(s.kind, StepKind::Tool { .. }));
        if is_tool_gate && !payload.is_object() {
            return Err(ApprovalError::InvalidPayload {
                key: record.key.clone(),
                reason: "edited tool arguments must be a JSON object".into(),
            });
        }
        // A gate step's payload is a mapping of fields (the spec refuses
        // any other `payload:`), and later steps read
        // `steps.<id>.output.payload.field`: an edit keeps that shape.
        let is_gate_step = record.phase == Phase::Before
            && self
                .spec
                .steps
                .get(record.step_index)
                .is_some_and(|s| matches!(s.kind, StepKind::Approval(_) | StepKind::Gate(_)));
        if is_gate_step && !payload.is_object() {
            return Err(ApprovalError::InvalidPayload {
                key: record.key.clone(),
                reason: "an edited gate payload must be a JSON object (a mapping of fields)".into(),
            });
        }
        // A model step's output is always an object (`output: text` too);
        // a replacement of another shape would make every later
        // `steps.<id>.output.field` quietly evaluate to null.
        let is_model_output = record.phase == Phase::After
            && self
                .spec
                .steps
                .get(record.step_index)
                .is_some_and(|s| matches!(s.kind, StepKind::Model(_)));
        if is_model_output && !payload.is_object() {
            return Err(ApprovalError::InvalidPayload {
                key: record.key.clone(),
                reason: "a replacement model output must be a JSON object".into(),
            });
        }
        Ok(())
    }

    async fn continue_after_claim(
        &self,
        record: ApprovalRecord,
        next_seq: u64,
    ) -> Result<RunOutcome, RunError> {
        let (ctx, mut log) = self.context_after_claim(&record, next_seq);
        // A reject needs no step logic, and under a changed spec the steps
        // may no longer line up with the record: end the run here.
        let same_spec = record.spec_hash == self.spec.hash.as_str();
        if record.status == ApprovalStatus::Rejected && !same_spec {
            log.emit(EventKind::RunRejected {
                reason: record.reason().map(str::to_string),
            });
            return self.finish(&ctx, RunStatus::Rejected, None, log).await;
        }
        self.replay(&ctx, record.step_index, &mut log);
        self.drive(ctx, record.step_index, Some(record), log).await
    }

    /// The run's context and event log at its gate, once `record` is
    /// claimed by this process (its owner from the claim on).
    fn context_after_claim(
        &self,
        record: &ApprovalRecord,
        next_seq: u64,
    ) -> (RunContext, EventLog) {
        let mut log = EventLog::new(&record.run_id, next_seq, self.events.clone(), &self.clock);
        // The pause stored these as the run's outputs; the claim kept them.
        log.stored_outputs = record.outputs.clone();
        log.owner = Some(crate::durable::node_id().to_string());
        // The claim took a lease from about now (see `try_claim`).
        log.lease
            .set(Some(crate::time::add(self.clock.now(), self.lease)));
        let ctx = RunContext {
            run_id: record.run_id.clone(),
            agent: record.agent_id.clone(),
            input: record.input.clone(),
            trigger: record.trigger.clone(),
            outputs: record.outputs.clone(),
            // Set by `drive` when it hands this decision to its step.
            gate_key: None,
        };
        (ctx, log)
    }

    /// Re-announce the steps before `until` without running them.
    fn replay(&self, ctx: &RunContext, until: usize, log: &mut EventLog) {
        for (index, step) in self.spec.steps.iter().enumerate().take(until) {
            if let Some(output) = ctx.outputs.get(&step.id) {
                log.emit(EventKind::StepCompleted {
                    step: step.id.clone(),
                    index,
                    output: output.clone(),
                    replayed: true,
                });
            }
        }
    }

    async fn drive(
        &self,
        mut ctx: RunContext,
        mut index: usize,
        mut resumed: Option<ApprovalRecord>,
        mut log: EventLog,
    ) -> Result<RunOutcome, RunError> {
        let env = StepEnv {
            spec: &self.spec,
            store: &self.store,
            tools: self.tools.as_ref(),
            clock: self.clock.as_ref(),
        };
        while let Some(step) = self.spec.steps.get(index) {
            let decision = resumed.take().filter(|r| r.step_index == index);
            if let Some(record) = &decision {
                // From this gate on, every call's idempotency key derives
                // from it (the gated tool's own call included).
                ctx.gate_key = Some(record.key.clone());
            }
            let outcome = match decision {
                // The step ran before the pause; never run it again.
                Some(record) if record.phase == Phase::After => {
                    match workflow::after_gate_output(&record) {
                        Ok(output) => StepOutcome::Completed(output),
                        Err(reason) => StepOutcome::Rejected { reason },
                    }
                }
                // A side effect journaled as done is never repeated.
                _ if journaled(step) && log.completed(index).is_some() => {
                    let output = log.completed(index).cloned().unwrap_or(Value::Null);
                    log.emit(EventKind::StepCompleted {
                        step: step.id.clone(),
                        index,
                        output: output.clone(),
                        replayed: true,
                    });
                    ctx.outputs.insert(step.id.clone(), output);
                    index += 1;
                    continue;
                }
                decision => {
                    // A gated tool entered without its decision only pauses,
                    // and one entered with a rejection only ends the run: it
                    // calls nothing, so it journals nothing (a start recorded
                    // now would read as a call in doubt after a crash before
                    // the pause or the end, and leave the run stuck).
                    let calls = journaled(step)
                        && !(self.gated(step)
                            && decision
                                .as_ref()
                                .is_none_or(|d| d.status == ApprovalStatus::Rejected));
                    let in_doubt = calls && log.in_doubt(index);
                    if in_doubt && !log.retry_in_doubt {
                        match self.on_crash(step) {
                            OnCrash::Retry => tracing::info!(
                                run_id = %ctx.run_id,
                                step = %step.id,
                                "step was in flight when its process stopped; on_crash: retry, calling again with the same idempotency key"
                            ),
                            OnCrash::Stuck => return self.stuck(&ctx, step, log).await,
                        }
                    }
                    log.emit(EventKind::StepStarted {
                        step: step.id.clone(),
                        index,
                    });
                    if calls {
                        // A call may take long or have side effects: the
                        // journal records its start (with the run's
                        // progress) before it is made, so that a crash
                        // leaves it in doubt, never forgotten. A dedupe
                        // key's owner must be a stored run.
                        if let Some(failed) = self.flush(step, index, &mut log).await? {
                            return Ok(failed);
                        }
                    }
                    if in_doubt && claims_key(step) {
                        // The key may be this run's own from before the
                        // crash: let go of it (only if it is ours) and
                        // claim it again.
                        self.release_dedupe_key_of(step, &ctx).await;
                    }
                    let started = std::time::Instant::now();
                    let outcome = workflow::execute_step(&env, step, &ctx, decision.as_ref()).await;
                    // A pause before the step is no run of it; one after
                    // (a guardrail on a model's output) follows a real run.
                    if !matches!(&outcome, StepOutcome::Paused(g) if g.phase == Phase::Before) {
                        self.metrics.step_finished(index, started.elapsed());
                    }
                    outcome
                }
            };
            match outcome {
                StepOutcome::Completed(output) => {
                    log.emit(EventKind::StepCompleted {
                        step: step.id.clone(),
                        index,
                        output: output.clone(),
                        replayed: false,
                    });
                    if journaled(step)
                        && let Some(failed) = self
                            .journal_completed(step, index, &output, &mut log)
                            .await?
                    {
                        return Ok(failed);
                    }
                    ctx.outputs.insert(step.id.clone(), output);
                    index += 1;
                }
                StepOutcome::Paused(gate) => return self.pause(&ctx, index, gate, log).await,
                StepOutcome::Rejected { reason } => {
                    log.emit(EventKind::RunRejected { reason });
                    return self.finish(&ctx, RunStatus::Rejected, None, log).await;
                }
                StepOutcome::Skipped { dedupe_key } => {
                    log.emit(EventKind::RunSkipped {
                        step: step.id.clone(),
                        dedupe_key,
                    });
                    return self.finish(&ctx, RunStatus::Skipped, None, log).await;
                }
                StepOutcome::Failed(StepFailure::Store(e)) => {
                    // The store is unreachable: record what we can, report it.
                    tracing::error!(
                        run_id = %ctx.run_id,
                        step = %step.id,
                        store = %self.store.describe(),
                        error = %e,
                        "a step's store operation failed; ending the run failed"
                    );
                    let error = e.to_string();
                    log.emit(EventKind::failed(error.clone()));
                    let _ = self.finish(&ctx, RunStatus::Failed, Some(error), log).await;
                    return Err(RunError::Store(e));
                }
                StepOutcome::Failed(StepFailure::Step(error)) => {
                    self.release_dedupe_keys(&ctx, index).await;
                    log.emit(EventKind::failed(error.clone()));
                    return self.finish(&ctx, RunStatus::Failed, Some(error), log).await;
                }
            }
        }
        log.emit(EventKind::RunCompleted {
            outputs: ctx.outputs.clone(),
        });
        self.finish(&ctx, RunStatus::Completed, None, log).await
    }

    /// Store the run's progress and the journal entry of `step`'s start
    /// before it calls out or claims (creating the run, owned by this
    /// process, if it was never stored). When the store refuses it, the call
    /// is not made and the run is ended `failed` like an unstorable pause or
    /// end (see [`AgentRun::write_point`]).
    async fn flush(
        &self,
        step: &crate::spec::Step,
        index: usize,
        log: &mut EventLog,
    ) -> Result<Option<RunOutcome>, RunError> {
        let before = step.id.as_str();
        let mut unstored = log.unstored.take();
        let entry = JournalEntry {
            run_id: log.run_id.clone(),
            step_index: index,
            step_id: step.id.clone(),
            output: None,
            at: self.clock.now(),
        };
        let what = format!("progress before step {before:?}");
        let written = if let Some(run) = &mut unstored {
            let lease = self.new_lease();
            run.owner = Some(lease.owner.clone());
            run.lease_until = Some(lease.until);
            log.owner = Some(lease.owner);
            log.lease.set(Some(lease.until));
            let created = match log.buffer.first() {
                Some(first) => {
                    let run = &*run;
                    let events = &log.buffer;
                    self.outage(log, &what)
                        .write(Probe::Event(first.clone()), || {
                            self.store.create_run(run, events)
                        })
                        .await
                }
                None => self.store.create_run(run, log.pending()).await,
            };
            match created {
                Ok(()) => {
                    log.published();
                    let owner = log.owner.clone().unwrap_or_default();
                    self.outage(log, &what)
                        .write(Probe::Journal(entry.clone()), || {
                            self.store.record_step(&owner, &entry, &[])
                        })
                        .await
                }
                Err(e) => {
                    log.owner = None;
                    log.lease.set(None);
                    Err(e)
                }
            }
        } else if let Some(owner) = &log.owner {
            let probe = match log.buffer.first() {
                Some(first) => Probe::Event(first.clone()),
                None => Probe::Journal(entry.clone()),
            };
            let events = &log.buffer;
            self.outage(log, &what)
                .write(probe, || self.store.record_step(owner, &entry, events))
                .await
        } else {
            // Driven by no one (never expected): keep the old behaviour.
            self.store.append_events(&log.run_id, log.pending()).await
        };
        if let Err(StoreError::NotOwner { .. }) = &written {
            return Err(self.not_driven(written.err(), log));
        }
        if let Err(e) = written {
            // Nothing was called yet: the step is not run.
            tracing::error!(
                run_id = %log.run_id,
                store = %self.store.describe(),
                error = %e,
                "could not store the run's progress before a call; the call is not made"
            );
            let unstored = unstored.filter(|_| log.owner.is_none());
            return self.fail_unstorable(unstored, what, log, e).await.map(Some);
        }
        log.published();
        log.journal.insert(index, entry);
        // The step may take long: keep the lease while it runs.
        if log.renewer.is_none() {
            log.renewer = Some(outage::renew(
                &self.store,
                &self.clock,
                self.lease,
                &log.run_id,
                &log.lease,
            ));
        }
        Ok(None)
    }

    /// Journal `step`'s output once it completed, with the events so far
    /// (one commit): from now on the side effect is never repeated. When
    /// the store refuses it, the run is ended `failed`, saying the call was
    /// made (see [`AgentRun::write_point`]).
    async fn journal_completed(
        &self,
        step: &crate::spec::Step,
        index: usize,
        output: &Value,
        log: &mut EventLog,
    ) -> Result<Option<RunOutcome>, RunError> {
        let Some(owner) = log.owner.clone() else {
            return Ok(None);
        };
        let entry = JournalEntry {
            run_id: log.run_id.clone(),
            step_index: index,
            step_id: step.id.clone(),
            output: Some(output.clone()),
            at: self.clock.now(),
        };
        let what = format!("result of step {:?}", step.id);
        let probe = match log.buffer.first() {
            Some(first) => Probe::Event(first.clone()),
            None => Probe::Journal(entry.clone()),
        };
        let events = &log.buffer;
        let written = self
            .outage(log, &what)
            .write(probe, || self.store.record_step(&owner, &entry, events))
            .await;
        match written {
            Ok(()) => {
                log.published();
                log.journal.insert(index, entry);
                Ok(None)
            }
            Err(e @ StoreError::NotOwner { .. }) => Err(self.not_driven(Some(e), log)),
            Err(e) => self.fail_unstorable(None, what, log, e).await.map(Some),
        }
    }

    /// The driver lost its run (a fenced write changed nothing): say why,
    /// once, and stop; the buffered events are dropped with the run's
    /// continuation, which belongs to its new owner (or to nobody).
    fn not_driven(&self, cause: Option<StoreError>, log: &mut EventLog) -> RunError {
        log.buffer.clear();
        log.renewer = None;
        let error = match cause {
            Some(e) => RunError::from(e),
            None => RunError::NotDriven {
                run_id: log.run_id.clone(),
                detail: "unknown".into(),
            },
        };
        tracing::info!(run_id = %log.run_id, reason = %error, "stopped driving the run");
        error
    }

    /// How this driver's write for `log`'s run waits out a store outage.
    fn outage<'a>(&'a self, log: &'a EventLog, what: &'a str) -> Outage<'a> {
        Outage {
            store: &self.store,
            clock: &self.clock,
            run_id: &log.run_id,
            owner: log.owner.as_deref(),
            what,
            lease: self.lease,
            watch: &log.lease,
            patience: self.patience,
        }
    }

    /// A tool step whose every call pauses first (`approval: required`).
    fn gated(&self, step: &crate::spec::Step) -> bool {
        matches!(&step.kind, StepKind::Tool { tool, .. }
            if self.spec.tools.get(tool).is_some_and(|t| t.approval_required))
    }

    /// What to do with `step` found in flight after a crash.
    fn on_crash(&self, step: &crate::spec::Step) -> OnCrash {
        match &step.kind {
            // Claiming a dedupe key again is safe: see `drive`.
            StepKind::Dedupe(_) => OnCrash::Retry,
            StepKind::Tool { tool, .. } => self
                .spec
                .tools
                .get(tool)
                .map_or(OnCrash::Stuck, crate::spec::ToolSpec::on_crash),
            StepKind::Model(model) => model.on_crash(),
            _ => OnCrash::Retry,
        }
    }

    /// End the run `stuck` at `step`, which was in flight when its process
    /// stopped and must not be repeated without an operator.
    async fn stuck(
        &self,
        ctx: &RunContext,
        step: &crate::spec::Step,
        mut log: EventLog,
    ) -> Result<RunOutcome, RunError> {
        let reason = format!(
            "step {:?} was in flight when its process stopped, and its on_crash is stuck: \
             it may or may not have taken effect. Check the downstream, then `runs retry` \
             (calls again with the same idempotency key) or `runs fail`",
            step.id
        );
        tracing::warn!(run_id = %ctx.run_id, step = %step.id, "run stuck: a step was in flight when its process stopped");
        log.emit(EventKind::RunStuck {
            step: step.id.clone(),
            reason: reason.clone(),
        });
        self.finish(ctx, RunStatus::Stuck, Some(reason), log).await
    }

    /// Release the dedupe key `step` claims, if this run holds it.
    async fn release_dedupe_key_of(&self, step: &crate::spec::Step, ctx: &RunContext) {
        let StepKind::Dedupe(dedupe) = &step.kind else {
            return;
        };
        let Ok(key) = crate::expr::evaluate_to_string(&dedupe.key, &ctx.expr_context()) else {
            return;
        };
        let claim_key = workflow::dedupe_claim_key(&self.spec.agent, &key);
        let _ = self.store.release_key(&claim_key, &ctx.run_id).await;
    }

    /// Write a durable point (a pause or an end) with the buffered events,
    /// storing the run with it if it was never stored, then announce them.
    ///
    /// When the store refuses it (the state cannot be stored, the database
    /// is down or full), the run is not left looking `running` with its
    /// steps' side effects done: it is ended `failed` with what the store
    /// already holds and an error saying why, and that outcome is returned
    /// (`Some`). Only if that fails too is the store's error returned.
    async fn write_point(
        &self,
        point: FirstWrite<'_>,
        log: &mut EventLog,
    ) -> Result<Option<RunOutcome>, RunError> {
        if let Some(claim) = log.unclaimed.take() {
            return self
                .write_with_claim(claim, point, log)
                .await
                .map(|()| None);
        }
        let unstored = log.unstored.take();
        let what = match point {
            FirstWrite::Pause(pause) => format!("pause at step {:?}", pause.record.step_id),
            FirstWrite::End(end) => format!("end ({})", end.status.as_str()),
        };
        let write = || async {
            match (&unstored, point) {
                (Some(run), point) => self.store.create_run_at(run, point, &log.buffer).await,
                (None, FirstWrite::Pause(pause)) => self.store.pause_run(pause, &log.buffer).await,
                (None, FirstWrite::End(end)) => self.store.end_run(end, &log.buffer).await,
            }
        };
        let written = match log.buffer.first() {
            Some(first) => {
                self.outage(log, &what)
                    .write(Probe::Event(first.clone()), write)
                    .await
            }
            None => write().await,
        };
        match written {
            Ok(()) => {
                log.published();
                log.renewer = None;
                Ok(None)
            }
            Err(e @ StoreError::NotOwner { .. }) => Err(self.not_driven(Some(e), log)),
            Err(e) => self.fail_unstorable(unstored, what, log, e).await.map(Some),
        }
    }

    /// The run's end written by the deferred claim's own write (see
    /// [`AgentRun::claim`]). Any failure means the decision was not taken:
    /// it is returned as it is, and nothing is announced.
    async fn write_with_claim(
        &self,
        mut claim: Claim,
        point: FirstWrite<'_>,
        log: &mut EventLog,
    ) -> Result<(), RunError> {
        let FirstWrite::End(end) = point else {
            // `ends_without_io` lets only runs that end through here.
            return Err(RunError::Store(StoreError::Database(
                "a decision deferred to its run's end reached a pause".into(),
            )));
        };
        claim.then = AfterClaim::Finish(Box::new(crate::pending_approval::RunFinish {
            end: RunEnd {
                owner: None,
                ..end.clone()
            },
            events: log.pending().to_vec(),
        }));
        let claimed = self.store.claim(&claim).await?;
        let first = claimed.event.seq + 1;
        for (event, seq) in log.buffer.iter_mut().zip(first..) {
            event.seq = seq;
        }
        let _ = self.events.send(claimed.event);
        log.published();
        log.renewer = None;
        Ok(())
    }

    /// See [`AgentRun::write_point`]: end the run `failed` after its pause,
    /// its end or its progress (`what`) could not be stored.
    async fn fail_unstorable(
        &self,
        unstored: Option<RunRecord>,
        what: String,
        log: &mut EventLog,
        cause: StoreError,
    ) -> Result<RunOutcome, RunError> {
        let store = self.store.describe();
        tracing::error!(
            run_id = %log.run_id,
            store = %store,
            error = %cause,
            "could not store the run's {what}; ending it failed"
        );
        let error = format!(
            "the run's {what} could not be stored ({cause}); the run was ended failed \
             instead. Calls its steps made since its last pause were made, and their \
             results are not kept"
        );
        let now = self.clock.now();
        // The buffered events were not stored: the failure takes their place.
        let mut events: Vec<Event> = Vec::new();
        let mut seq = log.first_unstored_seq();
        // A run never stored keeps its `run_started` (its input and agent).
        if let (Some(_), Some(started)) = (&unstored, log.pending().first()) {
            events.push(started.clone());
            seq = started.seq + 1;
        }
        events.push(Event {
            run_id: log.run_id.clone(),
            seq,
            at: now,
            kind: EventKind::failed(error.clone()),
        });
        let end = RunEnd {
            run_id: log.run_id.clone(),
            status: RunStatus::Failed,
            outputs: log.stored_outputs.clone(),
            error: Some(error.clone()),
            at: now,
            owner: log.owner.clone(),
        };
        let fallback = match &unstored {
            Some(run) => {
                self.store
                    .create_run_at(run, FirstWrite::End(&end), &events)
                    .await
            }
            None => self.store.end_run(&end, &events).await,
        };
        if let Err(again) = fallback {
            tracing::error!(
                run_id = %log.run_id,
                store = %store,
                error = %again,
                "could not record the run as failed either; it stays as last stored"
            );
            return Err(RunError::Store(cause));
        }
        log.buffer = events;
        log.published();
        log.renewer = None;
        Ok(RunOutcome {
            run_id: log.run_id.clone(),
            status: RunStatus::Failed,
            outputs: end.outputs,
            error: Some(error),
            pending: None,
        })
    }

    async fn pause(
        &self,
        ctx: &RunContext,
        index: usize,
        gate: GateRequest,
        mut log: EventLog,
    ) -> Result<RunOutcome, RunError> {
        let now = self.clock.now();
        let step = &self.spec.steps[index];
        let record = ApprovalRecord {
            key: pending_approval::new_key(),
            run_id: ctx.run_id.clone(),
            agent_id: self.spec.agent.clone(),
            spec_hash: self.spec.hash.to_string(),
            step_index: index,
            step_id: step.id.clone(),
            phase: gate.phase,
            message: gate.message,
            payload: gate.payload,
            outputs: ctx.outputs.clone(),
            input: ctx.input.clone(),
            trigger: ctx.trigger.clone(),
            status: ApprovalStatus::Pending,
            decision_data: None,
            decided_by: None,
            decided_at: None,
            created_at: now,
            expires_at: match crate::time::checked_add(now, gate.ttl) {
                Ok(at) => at,
                Err(e) => {
                    // Never a row that no store could read back.
                    let error = format!("step {:?}: cannot pause: {e}", step.id);
                    self.release_dedupe_keys(ctx, index).await;
                    log.emit(EventKind::failed(error.clone()));
                    return self.finish(ctx, RunStatus::Failed, Some(error), log).await;
                }
            },
        };
        log.emit(EventKind::awaiting(&record));
        let pause = Pause {
            record: record.clone(),
            at: now,
            owner: log.owner.clone(),
        };
        if let Some(failed) = self
            .write_point(FirstWrite::Pause(&pause), &mut log)
            .await?
        {
            return Ok(failed);
        }
        Ok(RunOutcome {
            run_id: ctx.run_id.clone(),
            status: RunStatus::AwaitingApproval,
            outputs: ctx.outputs.clone(),
            error: None,
            pending: Some(record),
        })
    }

    async fn finish(
        &self,
        ctx: &RunContext,
        status: RunStatus,
        error: Option<String>,
        mut log: EventLog,
    ) -> Result<RunOutcome, RunError> {
        let end = RunEnd {
            run_id: ctx.run_id.clone(),
            status,
            outputs: ctx.outputs.clone(),
            error: error.clone(),
            at: now_or(log.last_at(), self.clock.as_ref()),
            owner: log.owner.clone(),
        };
        if let Some(failed) = self.write_point(FirstWrite::End(&end), &mut log).await? {
            return Ok(failed);
        }
        Ok(RunOutcome {
            run_id: ctx.run_id.clone(),
            status,
            outputs: ctx.outputs.clone(),
            error,
            pending: None,
        })
    }

    /// A failed run lets a retry through: release the dedupe keys it claimed
    /// (unless a step says `release_on_failure: false`).
    async fn release_dedupe_keys(&self, ctx: &RunContext, failed_at: usize) {
        for step in self.spec.steps.iter().take(failed_at) {
            let StepKind::Dedupe(dedupe) = &step.kind else {
                continue;
            };
            if !dedupe.release_on_failure {
                continue;
            }
            let key = ctx
                .outputs
                .get(&step.id)
                .and_then(|o| o.get("key"))
                .and_then(Value::as_str);
            if let Some(key) = key {
                let claim_key = workflow::dedupe_claim_key(&self.spec.agent, key);
                // Best effort: if this fails the key simply expires with its TTL.
                let _ = self.store.release_key(&claim_key, &ctx.run_id).await;
            }
        }
    }
}

/// Who failed a run by hand (`runs fail`), when and why: its last event,
/// a `run_failed` naming an operator. A run failed before `run_failed`
/// named one is recognised by the `run_stuck` right before it (a stuck
/// run ends failed only by an operator).
#[derive(Debug, Clone, PartialEq)]
pub struct OperatorFail {
    pub by: String,
    pub at: DateTime<Utc>,
    pub reason: String,
}

impl OperatorFail {
    /// From a run's events, oldest first; `None` unless the last one is an
    /// operator's `run_failed`.
    pub fn of(events: &[Event]) -> Option<OperatorFail> {
        let (last, before) = events.split_last()?;
        match &last.kind {
            EventKind::RunFailed {
                by: Some(by),
                reason,
                error,
            } => Some(OperatorFail {
                by: by.clone(),
                at: last.at,
                reason: reason.clone().unwrap_or_else(|| error.clone()),
            }),
            EventKind::RunFailed {
                by: None, error, ..
            } if before
                .last()
                .is_some_and(|e| matches!(e.kind, EventKind::RunStuck { .. })) =>
            {
                Some(OperatorFail {
                    by: "an operator".into(),
                    at: last.at,
                    reason: error.clone(),
                })
            }
            _ => None,
        }
    }

    /// The refusal of a retry of this run (409 `run_conflict`, exit 4).
    fn refusal(&self, run_id: &str) -> StoreError {
        StoreError::WrongRunStatus {
            run_id: run_id.to_string(),
            status: RunStatus::Failed,
            expected: format!(
                "{} failed it at {} ({}), and an operator's fail is final: retry it only \
                 if you mean to undo that, with `runs retry --force` (HTTP: \
                 {{\"force\": true}})",
                self.by,
                crate::time::format_utc(self.at),
                self.reason
            ),
        }
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
fn calls_out(step: &crate::spec::Step) -> bool {
    matches!(step.kind, StepKind::Tool { .. } | StepKind::Model(_))
}

/// Steps whose start and output the journal records: those that call out
/// or claim. Pure steps are re-evaluated on recovery and write nothing.
fn journaled(step: &crate::spec::Step) -> bool {
    calls_out(step) || claims_key(step)
}

pub use crate::spec::OnCrash;

fn claims_key(step: &crate::spec::Step) -> bool {
    matches!(step.kind, StepKind::Dedupe(_))
}

fn now_or(at: Option<DateTime<Utc>>, clock: &dyn Clock) -> DateTime<Utc> {
    at.unwrap_or_else(|| clock.now())
}

/// Events of one run: numbered, buffered until the next durable write, and
/// broadcast to live listeners only once stored, so a listener never sees an
/// event (such as a pause and its key) that a crash could still lose.
struct EventLog {
    run_id: String,
    next_seq: u64,
    buffer: Vec<Event>,
    live: broadcast::Sender<Event>,
    /// A run started by [`AgentRun::start`] and not stored yet: the next
    /// write stores it together with the buffered events.
    unstored: Option<RunRecord>,
    /// The run's outputs as the store holds them (written at its creation
    /// and at each pause): what a run whose state could not be stored is
    /// ended with.
    stored_outputs: Map<String, Value>,
    /// The run's clock: each event is stamped when it is emitted.
    clock: SharedClock,
    /// This process, once it owns the stored run: every write is fenced on
    /// it. `None` while the run is not stored.
    owner: Option<String>,
    /// The run's journal of side effects, by step index.
    journal: BTreeMap<usize, JournalEntry>,
    /// Re-send steps found in flight whatever their `on_crash` (an
    /// operator's `runs retry`).
    retry_in_doubt: bool,
    /// Keeps the lease while a step is in flight.
    renewer: Option<Renewer>,
    /// Until when the lease is known to hold (see [`outage`]).
    lease: LeaseWatch,
    /// A decision not claimed yet: the run's end is written by its claim
    /// (see [`AgentRun::claim`]).
    unclaimed: Option<Claim>,
}

impl EventLog {
    fn new(
        run_id: &str,
        next_seq: u64,
        live: broadcast::Sender<Event>,
        clock: &SharedClock,
    ) -> EventLog {
        EventLog {
            run_id: run_id.to_string(),
            next_seq,
            buffer: Vec::new(),
            live,
            unstored: None,
            stored_outputs: Map::new(),
            clock: Arc::clone(clock),
            owner: None,
            journal: BTreeMap::new(),
            retry_in_doubt: false,
            renewer: None,
            lease: LeaseWatch::holding_until(None),
            unclaimed: None,
        }
    }

    /// The journaled output of step `index`, if it completed.
    fn completed(&self, index: usize) -> Option<&Value> {
        self.journal.get(&index).and_then(|e| e.output.as_ref())
    }

    /// True when step `index`'s start was journaled and its end was not.
    fn in_doubt(&self, index: usize) -> bool {
        self.journal.get(&index).is_some_and(|e| e.output.is_none())
    }

    /// The seq of the first event not stored yet.
    fn first_unstored_seq(&self) -> u64 {
        self.buffer.first().map_or(self.next_seq, |e| e.seq)
    }

    fn emit(&mut self, kind: EventKind) {
        self.buffer.push(Event {
            run_id: self.run_id.clone(),
            seq: self.next_seq,
            at: self.clock.now(),
            kind,
        });
        self.next_seq += 1;
    }

    fn last_at(&self) -> Option<DateTime<Utc>> {
        self.buffer.last().map(|e| e.at)
    }

    fn pending(&self) -> &[Event] {
        &self.buffer
    }

    /// Call after the buffered events were written: announce and forget them.
    fn published(&mut self) {
        for event in self.buffer.drain(..) {
            // No listener is fine: events are also stored.
            let _ = self.live.send(event);
        }
    }
}

/// A new run id: a UUID v7, so ids sort by creation time. Every index keyed
/// by run id (runs, events, a run's approvals) then grows at its end, where
/// the pages are already cached, instead of dirtying a random page per insert:
/// fewer pages per commit and a smaller working set as the store grows. The
/// 74 random bits keep ids unguessable enough for what they are (approval
/// keys, the correlation key, stay v4: fully random).
fn new_run_id() -> String {
    uuid::Uuid::now_v7().to_string()
}
