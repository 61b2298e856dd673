//! Resuming a run: from a claimed decision at its gate, or from its last
//! durable point (recovery, an operator's retry), and answering with the
//! run as stored.

use super::event_log::EventLog;
use super::outcome::DecisionOutcome;
use super::{AgentRun, RunError, RunOutcome, fresh_context};
use crate::domain::events::EventKind;
use crate::domain::pending_approval::{ApprovalRecord, ApprovalStatus, Decision};
use crate::domain::run_state::{OwnedRun, RunStatus};
use crate::engine::workflow::RunContext;
use crate::store::StoreError;

impl AgentRun {
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

    /// The second half of a resume: re-enter the run at its gate with the
    /// claimed decision and drive it to its next pause or its end.
    ///
    /// Only a decision that [`Resumes`](DecisionOutcome::Resumes) the run
    /// drives it. A claim that ended the run answers with that end; a
    /// repeat (the claim that won drove it, or does) and a vote that left
    /// its gate open answer with the run as the store holds it now.
    pub async fn resume_claimed(&self, outcome: DecisionOutcome) -> Result<RunOutcome, RunError> {
        match outcome {
            DecisionOutcome::Resumes(mut resumption) => {
                // A pinned decision resumes on the version the run paused under.
                if let Some(version) = resumption.version.take() {
                    return Box::pin(version.resume_claimed(DecisionOutcome::Resumes(resumption)))
                        .await;
                }
                self.continue_after_claim(resumption.record, resumption.next_seq)
                    .await
            }
            DecisionOutcome::Finished { run, .. } => Ok(*run),
            DecisionOutcome::Voted(_)
            | DecisionOutcome::VoteRepeated(_)
            | DecisionOutcome::Repeated(_) => self.stored_outcome(&outcome.record().run_id).await,
        }
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
    pub(super) fn context_after_claim(
        &self,
        record: &ApprovalRecord,
        next_seq: u64,
    ) -> (RunContext, EventLog) {
        let mut log = EventLog::new(&record.run_id, next_seq, self.events.clone(), &self.clock);
        // The pause stored these as the run's outputs; the claim kept them.
        log.stored_outputs = record.outputs.clone();
        log.owner = Some(crate::domain::durable::node_id().to_string());
        // The claim took a lease from about now (see `Decider::plan`).
        log.lease.set(Some(crate::support::time::add(
            self.clock.now(),
            self.lease,
        )));
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
    pub(super) fn replay(&self, ctx: &RunContext, until: usize, log: &mut EventLog) {
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

    /// Where a run resumes: its latest decided gate (with the record) or
    /// its first step. A record still pending or expired cannot belong to
    /// a run being resumed.
    pub(super) async fn resume_point(
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
    pub(super) async fn redrive(
        &self,
        owned: OwnedRun,
        recovered_by: Option<String>,
        retry_in_doubt: bool,
    ) -> Result<RunOutcome, RunError> {
        let (gate, _) = self.resume_point(&owned.run.id).await?;
        // A run on another version goes on on it when the served spec's
        // policy keeps runs on their version (a reject needs no steps).
        let mut unavailable = None;
        let rejected = gate
            .as_ref()
            .is_some_and(|r| r.status == ApprovalStatus::Rejected);
        if owned.run.spec_hash != self.spec.hash.as_str()
            && !rejected
            && self.keeps_its_version(gate.as_ref().map(|r| r.step_id.as_str()))
        {
            match self.for_recovered_run(&owned.run.spec_hash).await {
                Ok(version) => {
                    return Box::pin(version.redrive(owned, recovered_by, retry_in_doubt)).await;
                }
                Err(reason) => unavailable = Some(reason),
            }
        }
        let OwnedRun { run, next_seq } = owned;
        let journal = self.store.run_journal(&run.id).await?;
        let mut log = EventLog::new(&run.id, next_seq, self.events.clone(), &self.clock);
        log.owner = Some(crate::domain::durable::node_id().to_string());
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
            let reason = match unavailable {
                Some(reason) => format!(
                    "the run is on spec version {}, which on_spec_change keeps it on, and that \
                     version cannot run in this process: {reason}. Fix that and `runs retry`, \
                     or `runs fail` it",
                    crate::SpecHash::short_of(&spec_hash)
                ),
                None => format!(
                    "the spec changed since the run started (it ran under {}, this process serves \
                     {}): it is not resumed under another spec. Serve that spec again and `runs \
                     retry`, or `runs fail` it",
                    crate::SpecHash::short_of(&spec_hash),
                    self.spec.hash.short()
                ),
            };
            log.emit(EventKind::RunStuck {
                step: from_step.unwrap_or_default(),
                reason: reason.clone(),
            });
            return self.finish(&ctx, RunStatus::Stuck, Some(reason), log).await;
        }
        self.drive(ctx, index, gate, log).await
    }
}
