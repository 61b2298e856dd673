//! What operators and the server's background rounds do to runs: cancel,
//! expire overdue approvals, take over orphaned runs, retry a stuck or
//! failed run, fail a stuck one.

use chrono::{DateTime, Utc};

use super::decide::Ballot;
use super::outcome::DecisionOutcome;
use super::{AgentRun, RunError, RunOutcome};
use crate::domain::events::{Event, EventKind};
use crate::domain::pending_approval::{ApprovalError, ApprovalRecord, Decision};
use crate::domain::policy::{Channel, OnTimeout};
use crate::domain::run_state::{OwnedRun, RunRecord, RunStatus};
use crate::store::{CancelRun, Cancelled, Nudged, RunTransition, StoreError};

impl AgentRun {
    /// Cancel a waiting or running run of this agent (see
    /// [`crate::store::Approvals::cancel_run`]): `by` must be allowed to
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
        self.cancel_checked(run_id, by, reason).await
    }

    /// Cancel a run whose caller the caller of this has already checked
    /// (a run's cancel above; a gate request's, which its requester may
    /// cancel too, in `service/gates.rs`): one conditional write, counted
    /// and announced to this process's event streams.
    pub(crate) async fn cancel_checked(
        &self,
        run_id: &str,
        by: &str,
        reason: Option<String>,
    ) -> Result<Cancelled, RunError> {
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
            .decided(crate::engine::metrics::ApprovalEnd::Cancelled, ended);
        let _ = self.events.send(cancelled.event.clone());
        Ok(cancelled)
    }

    /// Mark overdue approvals EXPIRED and end their runs (at most once
    /// across processes). Returns what this call expired.
    pub async fn sweep_expired(&self) -> Result<Vec<ApprovalRecord>, RunError> {
        let expired = self.store.expire_due(self.clock.now()).await?;
        self.metrics.decided(
            crate::engine::metrics::ApprovalEnd::Expired,
            expired.len() as u64,
        );
        Ok(expired)
    }

    /// Settle this agent's gates whose time ran out by their own
    /// `on_timeout` (DESIGN §13): `approve` approves and `reject` rejects,
    /// `continue` rejects in a way the gate's step goes on from; each is
    /// a claim by `timeout`, conditional on the record being PENDING and
    /// overdue, so one process settles each. An `approve` that the
    /// record's spec version refuses (a changed spec that `refuse`s, a
    /// version that cannot run here) rejects instead, saying why: nothing
    /// is approved on steps it was not written for, and the gate does not
    /// wait for ever. Returns the settlements this call made; pass each to
    /// [`AgentRun::resume_claimed`].
    pub async fn settle_timeouts(&self) -> Result<Vec<DecisionOutcome>, RunError> {
        let mut settled = Vec::new();
        loop {
            let due = self
                .store
                .due_timeouts(self.clock.now(), crate::domain::durable::RECOVER_BATCH)
                .await?;
            let full = due.len() >= crate::domain::durable::RECOVER_BATCH;
            let mut progressed = false;
            for record in due.iter().filter(|r| r.agent_id == self.spec.agent) {
                if let Some(claimed) = self.settle_timeout(record).await? {
                    settled.push(claimed);
                    progressed = true;
                }
            }
            if !full || !progressed {
                return Ok(settled);
            }
        }
    }

    /// One gate's timeout; `None` when another process settled (or a
    /// person decided) it first.
    async fn settle_timeout(
        &self,
        record: &ApprovalRecord,
    ) -> Result<Option<DecisionOutcome>, RunError> {
        let action = record.on_timeout();
        let deadline = crate::support::time::format_utc(record.expires_at);
        let reason = format!("no decision by {deadline}: on_timeout: {action}");
        let Some(decision) = action.decision(reason) else {
            return Ok(None);
        };
        let by_timeout = |decision| Ballot::new(decision, "timeout", Channel::Timeout);
        let refused = match self.vote(&record.key, by_timeout(decision)).await {
            Ok(claimed) => return Ok(Some(claimed)),
            Err(
                e @ (RunError::Approval(ApprovalError::SpecChanged { .. })
                | RunError::SpecUnavailable { .. }),
            ) if action == OnTimeout::Approve => e,
            Err(RunError::Approval(
                ApprovalError::AlreadyResolved { .. } | ApprovalError::Expired { .. },
            )) => return Ok(None),
            Err(e) => return Err(e),
        };
        tracing::warn!(
            key = %record.key,
            run_id = %record.run_id,
            error = %refused,
            "on_timeout: approve cannot run on this gate's spec version; rejecting it instead"
        );
        let reason = format!(
            "no decision by {deadline}: on_timeout: approve could not run ({refused}), so the gate was rejected"
        );
        match self
            .vote(
                &record.key,
                by_timeout(Decision::Reject {
                    reason: Some(reason),
                }),
            )
            .await
        {
            Ok(claimed) => Ok(Some(claimed)),
            Err(RunError::Approval(ApprovalError::AlreadyResolved { .. })) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Do the reminders and escalations now due of every waiting gate in
    /// the store (they need no spec: the roster stored with the pause has
    /// them), once across processes; announces the events of this agent's
    /// runs. Returns what this call did.
    pub async fn nudge_due(&self) -> Result<Vec<Nudged>, RunError> {
        let mut done = Vec::new();
        loop {
            let batch = self
                .store
                .nudge_due(self.clock.now(), crate::domain::durable::RECOVER_BATCH)
                .await?;
            let full = batch.len() >= crate::domain::durable::RECOVER_BATCH;
            for nudged in &batch {
                if nudged.record.agent_id == self.spec.agent {
                    for event in &nudged.events {
                        let _ = self.events.send(event.clone());
                    }
                }
            }
            done.extend(batch);
            if !full {
                return Ok(done);
            }
        }
    }

    /// Claim this agent's orphaned runs for this process (`running`, and
    /// their driver's lease ran out or never existed, or their driver is
    /// a process on this host that is seen to be dead): one conditional
    /// write, so each orphan has one winner across every process sharing
    /// the store. Resume each with [`AgentRun::resume_recovered`].
    pub async fn claim_orphans(&self) -> Result<Vec<OwnedRun>, RunError> {
        let batch = crate::domain::durable::RECOVER_BATCH;
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
            let crate::domain::durable::owner::Liveness::Dead(why) =
                crate::domain::durable::owner_liveness(&owner, one_kernel)
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
        let by = crate::domain::durable::node_id().to_string();
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
        // The events first, then the row: a change landing between the two
        // reads then shows in the row but not in `if_last_seq`, so the
        // write below refuses. (The other order could pair a stale `stuck`
        // row with a fail's event and revive the run an operator had just
        // failed.)
        let events = self.store.run_events(run_id, 0).await?;
        let run = self.operated_run(run_id, by).await?;
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
                crate::support::time::format_utc(self.at),
                self.reason
            ),
        }
    }
}
