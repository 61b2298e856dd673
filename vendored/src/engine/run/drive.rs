//! Driving a run: execute its steps in order from where it stands, until
//! it pauses or ends, handling steps a crash left in flight.

use std::ops::ControlFlow;

use serde_json::Value;

use super::event_log::EventLog;
use super::{AgentRun, OnCrash, RunError, RunOutcome, claims_key, journaled};
use crate::domain::events::EventKind;
use crate::domain::pending_approval::{ApprovalRecord, ApprovalStatus, Phase};
use crate::domain::run_state::RunStatus;
use crate::domain::spec::StepKind;
use crate::engine::workflow::{self, GateRequest, RunContext, StepEnv, StepFailure, StepOutcome};
use crate::store::StoreError;

/// Where the step loop stopped, before anything about it is written.
pub(super) enum Stop {
    /// The run ends with this status; the event saying so is in the log.
    End {
        status: RunStatus,
        error: Option<String>,
    },
    /// Step `index` asks for a decision.
    Pause { index: usize, gate: GateRequest },
    /// A step's own store operation failed: the run ends `failed` (the
    /// event is in the log) and the caller hears the store's error.
    StoreFailed(StoreError),
    /// A write the loop had to make (a call's start, a step's result) was
    /// refused and already ended the run: this is its outcome.
    Ended(Box<RunOutcome>),
    /// Worked out in memory before a claim (`EventLog::planning`), the
    /// run reached a step that would have to write first: it is driven
    /// after its claim instead.
    Unplanned,
}

impl Stop {
    fn end(status: RunStatus, error: Option<String>) -> Stop {
        Stop::End { status, error }
    }
}

impl AgentRun {
    /// Run the steps from `index` (re-entering a gate with its decision,
    /// `resumed`) and write where the run stopped: its pause or its end.
    pub(super) async fn drive(
        &self,
        mut ctx: RunContext,
        index: usize,
        resumed: Option<ApprovalRecord>,
        mut log: EventLog,
    ) -> Result<RunOutcome, RunError> {
        match self.run_steps(&mut ctx, index, resumed, &mut log).await? {
            Stop::End { status, error } => self.finish(&ctx, status, error, log).await,
            Stop::Pause { index, gate } => self.pause(ctx, index, gate, log).await,
            Stop::StoreFailed(e) => {
                let error = e.to_string();
                let _ = self.finish(&ctx, RunStatus::Failed, Some(error), log).await;
                Err(RunError::Store(e))
            }
            Stop::Ended(outcome) => Ok(*outcome),
            // Only a log that is planning stops there, and it is never
            // driven (see `AgentRun::plan_finish`).
            Stop::Unplanned => Err(RunError::NotDriven {
                run_id: ctx.run_id,
                detail: "a planned decision reached a step that writes".into(),
            }),
        }
    }

    /// The step loop: execute the steps in order from `index` until one
    /// pauses or ends the run, or the last completes. Writes only what a
    /// step needs before or after it runs (a call's start, its result);
    /// where the run stops is for the caller to write.
    pub(super) async fn run_steps(
        &self,
        ctx: &mut RunContext,
        mut index: usize,
        mut resumed: Option<ApprovalRecord>,
        log: &mut EventLog,
    ) -> Result<Stop, RunError> {
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
                    replay_journaled(ctx, step, index, log);
                    index += 1;
                    continue;
                }
                decision => match self.run_step(ctx, step, index, decision, log).await? {
                    ControlFlow::Continue(outcome) => outcome,
                    ControlFlow::Break(stop) => return Ok(stop),
                },
            };
            match outcome {
                StepOutcome::Completed(output) => {
                    if let Some(stop) = self.step_completed(ctx, step, index, output, log).await? {
                        return Ok(stop);
                    }
                    index += 1;
                }
                StepOutcome::Paused(gate) => return Ok(Stop::Pause { index, gate }),
                StepOutcome::Rejected { reason } => {
                    log.emit(EventKind::RunRejected { reason });
                    return Ok(Stop::end(RunStatus::Rejected, None));
                }
                StepOutcome::Skipped { dedupe_key } => {
                    log.emit(EventKind::RunSkipped {
                        step: step.id.clone(),
                        dedupe_key,
                    });
                    return Ok(Stop::end(RunStatus::Skipped, None));
                }
                StepOutcome::Failed(StepFailure::Store(e)) => {
                    return Ok(self.store_failed(ctx, step, e, log));
                }
                StepOutcome::Failed(StepFailure::Step(error)) => {
                    self.release_dedupe_keys(ctx, index).await;
                    log.emit(EventKind::failed(error.clone()));
                    return Ok(Stop::end(RunStatus::Failed, Some(error)));
                }
            }
        }
        log.emit(EventKind::RunCompleted {
            outputs: ctx.outputs.clone(),
        });
        Ok(Stop::end(RunStatus::Completed, None))
    }

    /// Execute `step` (with `decision` when the run resumes at it). A step
    /// that calls out or claims has its start journaled first, so that a
    /// crash leaves it in doubt, never forgotten; one found in doubt is
    /// called again or ends the run `stuck`, by its `on_crash`.
    async fn run_step(
        &self,
        ctx: &RunContext,
        step: &crate::domain::spec::Step,
        index: usize,
        decision: Option<ApprovalRecord>,
        log: &mut EventLog,
    ) -> Result<ControlFlow<Stop, StepOutcome>, RunError> {
        // A gated tool entered without its decision only pauses, and one
        // entered with a rejection only ends the run: it calls nothing, so
        // it journals nothing (a start recorded now would read as a call in
        // doubt after a crash before the pause or the end, and leave the
        // run stuck).
        // A gated tool whose `when:` does not hold calls as an ungated one.
        let skipped = match &decision {
            None => workflow::skipped_gate(&self.spec, step, ctx),
            Some(_) => None,
        };
        let calls = journaled(step)
            && (skipped.is_some()
                || !(self.gated(step)
                    && decision
                        .as_ref()
                        .is_none_or(|d| d.status == ApprovalStatus::Rejected)));
        if calls && log.planning {
            return Ok(ControlFlow::Break(Stop::Unplanned));
        }
        let in_doubt = calls && log.in_doubt(index);
        if in_doubt && !log.retry_in_doubt {
            match self.on_crash(step) {
                OnCrash::Retry => tracing::info!(
                    run_id = %ctx.run_id,
                    step = %step.id,
                    "step was in flight when its process stopped; on_crash: retry, calling again with the same idempotency key"
                ),
                OnCrash::Stuck => return Ok(ControlFlow::Break(stuck(ctx, step, log))),
            }
        }
        log.emit(EventKind::StepStarted {
            step: step.id.clone(),
            index,
        });
        if let Some((when, value)) = skipped {
            // Never silent: the run says the gate did not fire, and why.
            log.emit(EventKind::GateSkipped {
                step: step.id.clone(),
                when,
                value,
            });
        }
        if calls {
            // A call may take long or have side effects: the journal
            // records its start (with the run's progress) before it is
            // made. A dedupe key's owner must be a stored run.
            if let Some(failed) = self.flush(step, index, log).await? {
                return Ok(ControlFlow::Break(Stop::Ended(Box::new(failed))));
            }
        }
        if in_doubt && claims_key(step) {
            // The key may be this run's own from before the crash: let go
            // of it (only if it is ours) and claim it again.
            self.release_dedupe_key_of(step, ctx).await;
        }
        let env = StepEnv {
            spec: &self.spec,
            store: &self.store,
            tools: self.tools.as_ref(),
            clock: self.clock.as_ref(),
        };
        let started = std::time::Instant::now();
        let outcome = workflow::execute_step(&env, step, ctx, decision.as_ref()).await;
        // A pause before the step is no run of it; one after (a guardrail
        // on a model's output) follows a real run.
        if !matches!(&outcome, StepOutcome::Paused(g) if g.phase == Phase::Before) {
            self.metrics.step_finished(index, started.elapsed());
        }
        Ok(ControlFlow::Continue(outcome))
    }

    /// `step` completed with `output`: announce it and, for a step with a
    /// side effect, journal its result before the run goes on.
    async fn step_completed(
        &self,
        ctx: &mut RunContext,
        step: &crate::domain::spec::Step,
        index: usize,
        output: Value,
        log: &mut EventLog,
    ) -> Result<Option<Stop>, RunError> {
        log.emit(EventKind::StepCompleted {
            step: step.id.clone(),
            index,
            output: output.clone(),
            replayed: false,
        });
        if journaled(step)
            && let Some(failed) = self.journal_completed(step, index, &output, log).await?
        {
            return Ok(Some(Stop::Ended(Box::new(failed))));
        }
        ctx.outputs.insert(step.id.clone(), output);
        Ok(None)
    }

    /// The store is unreachable from inside a step: record what we can,
    /// report it.
    fn store_failed(
        &self,
        ctx: &RunContext,
        step: &crate::domain::spec::Step,
        e: StoreError,
        log: &mut EventLog,
    ) -> Stop {
        tracing::error!(
            run_id = %ctx.run_id,
            step = %step.id,
            store = %self.store.describe(),
            error = %e,
            "a step's store operation failed; ending the run failed"
        );
        log.emit(EventKind::failed(e.to_string()));
        Stop::StoreFailed(e)
    }

    /// A tool step whose every call pauses first (`approval: required`).
    fn gated(&self, step: &crate::domain::spec::Step) -> bool {
        matches!(&step.kind, StepKind::Tool { tool, .. }
            if self.spec.tools.get(tool).is_some_and(|t| t.approval_required))
    }

    /// What to do with `step` found in flight after a crash.
    fn on_crash(&self, step: &crate::domain::spec::Step) -> OnCrash {
        match &step.kind {
            // Claiming a dedupe key again is safe: see `drive`.
            StepKind::Dedupe(_) => OnCrash::Retry,
            StepKind::Tool { tool, .. } => self
                .spec
                .tools
                .get(tool)
                .map_or(OnCrash::Stuck, crate::domain::spec::ToolSpec::on_crash),
            StepKind::Model(model) => model.on_crash(),
            _ => OnCrash::Retry,
        }
    }

    /// Release the dedupe key `step` claims, if this run holds it.
    async fn release_dedupe_key_of(&self, step: &crate::domain::spec::Step, ctx: &RunContext) {
        let StepKind::Dedupe(dedupe) = &step.kind else {
            return;
        };
        let Ok(key) = crate::domain::expr::evaluate_to_string(&dedupe.key, &ctx.expr_context())
        else {
            return;
        };
        let claim_key = workflow::dedupe_claim_key(&self.spec.agent, &key);
        let _ = self.store.release_key(&claim_key, &ctx.run_id).await;
    }

    /// A failed run lets a retry through: release the dedupe keys it claimed
    /// (unless a step says `release_on_failure: false`).
    pub(super) async fn release_dedupe_keys(&self, ctx: &RunContext, failed_at: usize) {
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

/// A step journaled as done: re-announce it with its journaled output,
/// never running it again.
fn replay_journaled(
    ctx: &mut RunContext,
    step: &crate::domain::spec::Step,
    index: usize,
    log: &mut EventLog,
) {
    let output = log.completed(index).cloned().unwrap_or(Value::Null);
    log.emit(EventKind::StepCompleted {
        step: step.id.clone(),
        index,
        output: output.clone(),
        replayed: true,
    });
    ctx.outputs.insert(step.id.clone(), output);
}

/// End the run `stuck` at `step`, which was in flight when its process
/// stopped and must not be repeated without an operator.
fn stuck(ctx: &RunContext, step: &crate::domain::spec::Step, log: &mut EventLog) -> Stop {
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
    Stop::end(RunStatus::Stuck, Some(reason))
}
