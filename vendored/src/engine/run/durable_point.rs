//! The driver's writes, at durable points only: progress before a call, a
//! step's result, a pause, an end. A write the store refuses ends the run
//! `failed` instead of leaving it looking `running` (see
//! [`AgentRun::write_point`]).

use chrono::{DateTime, Utc};
use serde_json::Value;

use super::event_log::EventLog;
use super::outage::{self, Outage, Probe};
use super::{AgentRun, RunError, RunOutcome};
use crate::domain::events::{Event, EventKind};
use crate::domain::pending_approval::{self, ApprovalRecord, ApprovalStatus};
use crate::domain::policy::{Roster, requesters_from_trigger};
use crate::domain::run_state::{JournalEntry, RunRecord, RunStatus};
use crate::engine::workflow::{GateRequest, RunContext};
use crate::store::{FirstWrite, Pause, RunEnd, StoreError};
use crate::support::time::Clock;

impl AgentRun {
    /// Store the run's progress and the journal entry of `step`'s start
    /// before it calls out or claims (creating the run, owned by this
    /// process, if it was never stored). When the store refuses it, the call
    /// is not made and the run is ended `failed` like an unstorable pause or
    /// end (see [`AgentRun::write_point`]).
    pub(super) async fn flush(
        &self,
        step: &crate::domain::spec::Step,
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
            self.create_owned(run, &entry, &what, log).await
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

    /// Store a run never stored yet with its events, owned by this process
    /// from now, then journal `entry` (a call's start) for it.
    async fn create_owned(
        &self,
        run: &mut RunRecord,
        entry: &JournalEntry,
        what: &str,
        log: &mut EventLog,
    ) -> Result<(), StoreError> {
        let lease = self.new_lease();
        run.owner = Some(lease.owner.clone());
        run.lease_until = Some(lease.until);
        log.owner = Some(lease.owner);
        log.lease.set(Some(lease.until));
        let created = match log.buffer.first() {
            Some(first) => {
                let run = &*run;
                let events = &log.buffer;
                self.outage(log, what)
                    .write(Probe::Event(first.clone()), || {
                        self.store.create_run(run, events)
                    })
                    .await
            }
            None => self.store.create_run(run, log.pending()).await,
        };
        if let Err(e) = created {
            log.owner = None;
            log.lease.set(None);
            return Err(e);
        }
        log.published();
        let owner = log.owner.clone().unwrap_or_default();
        self.outage(log, what)
            .write(Probe::Journal(entry.clone()), || {
                self.store.record_step(&owner, entry, &[])
            })
            .await
    }

    /// Journal `step`'s output once it completed, with the events so far
    /// (one commit): from now on the side effect is never repeated. When
    /// the store refuses it, the run is ended `failed`, saying the call was
    /// made (see [`AgentRun::write_point`]).
    pub(super) async fn journal_completed(
        &self,
        step: &crate::domain::spec::Step,
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

    /// The roster of a pause at step `index` (DESIGN §13), when its gate
    /// counts votes or has timing to keep (see
    /// [`crate::domain::policy::GatePolicy::stores_roster`]): the rules with their groups' members in force (the
    /// spec's, or `TOLLGATE_GROUP_<NAME>`'s), and the requesters who may
    /// not vote. An error says why the gate can never be decided.
    /// Its reminders and escalations are timed from `created_at` to
    /// `expires_at`.
    fn roster_for(
        &self,
        ctx: &RunContext,
        index: usize,
        created_at: DateTime<Utc>,
        expires_at: DateTime<Utc>,
    ) -> Result<Option<Roster>, String> {
        let Some(policy) = self.spec.gate_policy(index).filter(|p| p.stores_roster()) else {
            return Ok(None);
        };
        let groups = self
            .spec
            .resolve_groups(|name| std::env::var(name).ok())
            .map_err(|e| e.to_string())?;
        let mut roster = Roster::resolve(policy, &groups, requesters_from_trigger(&ctx.trigger))
            .map_err(|e| e.message)?;
        roster.nudges = crate::domain::policy::schedule(policy, &groups, created_at, expires_at)
            .map_err(|e| e.message)?;
        Ok(Some(roster))
    }

    /// Pause at the gate of step `index`. Takes the context: the run's
    /// input and trigger move into the record instead of being copied (a
    /// wide input costs some 200 bytes a key in memory, each copy again).
    pub(super) async fn pause(
        &self,
        mut ctx: RunContext,
        index: usize,
        gate: GateRequest,
        mut log: EventLog,
    ) -> Result<RunOutcome, RunError> {
        let now = self.clock.now();
        let step = &self.spec.steps[index];
        // A gate with rules is resolved now: who may vote, who may not. A
        // rule the members cannot meet fails the run, naming it: the
        // quorum is never lowered.
        // Never a row that no store could read back.
        let expires_at =
            crate::support::time::checked_add(now, gate.ttl).map_err(|e| e.to_string());
        let roster = expires_at
            .clone()
            .and_then(|expires_at| self.roster_for(&ctx, index, now, expires_at));
        let (expires_at, roster) = match (expires_at, roster) {
            (Ok(expires_at), Ok(roster)) => (expires_at, roster),
            (Err(error), _) | (_, Err(error)) => {
                let error = format!("step {:?}: cannot pause: {error}", step.id);
                self.release_dedupe_keys(&ctx, index).await;
                log.emit(EventKind::failed(error.clone()));
                return self.finish(&ctx, RunStatus::Failed, Some(error), log).await;
            }
        };
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
            // Shared text: no copy.
            input: ctx.input.clone(),
            trigger: std::mem::take(&mut ctx.trigger),
            status: ApprovalStatus::Pending,
            decision_data: None,
            decided_by: None,
            decided_at: None,
            created_at: now,
            expires_at,
            roster,
            origin: pending_approval::ApprovalOrigin::Pause,
        };
        log.emit(EventKind::awaiting(&record));
        // The record is written from the pause and answered with after:
        // one record, not a copy of it.
        let pause = Pause {
            record,
            at: now,
            owner: log.owner.clone(),
            routes: self.spec.notice_routes(index),
        };
        if let Some(failed) = self
            .write_point(FirstWrite::Pause(&pause), &mut log)
            .await?
        {
            return Ok(failed);
        }
        Ok(RunOutcome {
            run_id: ctx.run_id,
            status: RunStatus::AwaitingApproval,
            outputs: ctx.outputs,
            error: None,
            pending: Some(pause.record),
        })
    }

    /// Write the run's end (see [`AgentRun::write_point`]).
    pub(super) async fn finish(
        &self,
        ctx: &RunContext,
        status: RunStatus,
        error: Option<String>,
        mut log: EventLog,
    ) -> Result<RunOutcome, RunError> {
        let end = self.run_end(ctx, status, error.clone(), &log);
        if let Some(failed) = self.write_point(FirstWrite::End(&end), &mut log).await? {
            return Ok(failed);
        }
        Ok(ended(ctx, status, error))
    }

    /// The run's end as it stands after the events in `log`.
    pub(super) fn run_end(
        &self,
        ctx: &RunContext,
        status: RunStatus,
        error: Option<String>,
        log: &EventLog,
    ) -> RunEnd {
        RunEnd {
            run_id: ctx.run_id.clone(),
            status,
            outputs: ctx.outputs.clone(),
            error,
            at: now_or(log.last_at(), self.clock.as_ref()),
            owner: log.owner.clone(),
        }
    }
}

/// What the caller hears of a run that ended as `status`.
pub(super) fn ended(ctx: &RunContext, status: RunStatus, error: Option<String>) -> RunOutcome {
    RunOutcome {
        run_id: ctx.run_id.clone(),
        status,
        outputs: ctx.outputs.clone(),
        error,
        pending: None,
    }
}

fn now_or(at: Option<DateTime<Utc>>, clock: &dyn Clock) -> DateTime<Utc> {
    at.unwrap_or_else(|| clock.now())
}
