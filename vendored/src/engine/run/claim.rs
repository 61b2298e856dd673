//! A workflow's claim of a decision: [`AgentRun::claim`] and
//! [`AgentRun::vote`] run the one decision path (`decide`) with the
//! workflow as its decider, try the pause's own spec version when it was
//! made under another, and say what the claim came to
//! ([`DecisionOutcome`]); a claim that ends its run (only pure steps follow
//! the gate, or a gate request) writes that end with the decision.

use super::decide::{Ballot, Ruling, decide_approval};
use super::drive::Stop;
use super::outcome::{DecisionOutcome, Resumption};
use super::{AgentRun, RunError, RunOutcome, claims_key, journaled};
use crate::domain::events::Event;
use crate::domain::pending_approval::{
    ApprovalError, ApprovalRecord, ApprovalStatus, Claim, Decision, Phase, RunFinish,
};
use crate::domain::policy::Channel;
use crate::domain::spec::StepKind;
use crate::store::{Claimed, RunEnd};

/// A run's end worked out before its decision's claim (see
/// [`AgentRun::plan_finish`]).
pub(crate) struct PlannedFinish {
    /// The record as the claim decides it.
    pub(super) decided: ApprovalRecord,
    /// What the claim's write stores besides the decision.
    pub(super) finish: RunFinish,
    /// What the caller hears once the claim won.
    pub(super) outcome: RunOutcome,
}

impl AgentRun {
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
    ) -> Result<DecisionOutcome, RunError> {
        self.vote(key, Ballot::new(decision, decided_by, Channel::Gate))
            .await
    }

    /// [`AgentRun::claim`] for a ballot: a decision with its channel and
    /// the digest of the payload its decider saw. On a gate that counts
    /// votes (DESIGN §13) the ballot is a vote: recorded, and the claim
    /// only when it settles the gate ([`DecisionOutcome::Voted`] when it
    /// did not).
    pub async fn vote(&self, key: &str, ballot: Ballot) -> Result<DecisionOutcome, RunError> {
        let claimed = self.try_claim(key, ballot).await;
        self.count_claim(&claimed);
        claimed
    }

    /// A decision that won counts by its outcome; one that found the
    /// approval already decided by someone else, as a conflict.
    fn count_claim(&self, claimed: &Result<DecisionOutcome, RunError>) {
        match claimed {
            Ok(won) if won.won() => {
                if let Some(outcome) = crate::engine::metrics::ApprovalEnd::of(won.record().status)
                {
                    self.metrics.decided(outcome, 1);
                }
            }
            Err(RunError::Approval(ApprovalError::AlreadyResolved { .. })) => {
                self.metrics.claim_conflict()
            }
            _ => {}
        }
    }

    /// Claim on this handle's version; a pause made under another one
    /// goes by the served spec's `on_spec_change` (see `versions`).
    async fn try_claim(&self, key: &str, ballot: Ballot) -> Result<DecisionOutcome, RunError> {
        let refused = match self.claim_here(key, ballot.clone()).await {
            Err(e @ RunError::Approval(ApprovalError::SpecChanged { .. })) => e,
            answered => return answered,
        };
        match self.store.get_approval(key).await? {
            Some(record)
                if record.status == ApprovalStatus::Pending
                    && record.spec_hash != self.spec.hash.as_str() =>
            {
                self.claim_on_its_version(&record, ballot).await
            }
            // Decided or moved since: the answer of a claim made now.
            Some(_) => self.claim_here(key, ballot).await,
            None => Err(refused),
        }
    }

    /// The one decision path ([`decide_approval`]) on this handle's spec.
    pub(super) async fn claim_here(
        &self,
        key: &str,
        ballot: Ballot,
    ) -> Result<DecisionOutcome, RunError> {
        let cast = decide_approval(self, self.store.as_ref(), key, ballot).await?;
        Ok(match cast {
            Ruling::Repeat(record) => DecisionOutcome::Repeated(record),
            Ruling::VoteRepeated(recorded) => DecisionOutcome::VoteRepeated(recorded),
            Ruling::Voted { recorded, event } => {
                let _ = self.events.send(event);
                DecisionOutcome::Voted(recorded)
            }
            Ruling::Won {
                claimed,
                vote_event,
                plan,
            } => {
                // The vote's own event comes first, as the store numbered it.
                if let Some(event) = vote_event {
                    let _ = self.events.send(event);
                }
                self.settled(*claimed, plan)
            }
        })
    }

    /// The claim won: announce its event and say what resuming does.
    fn settled(&self, claimed: Claimed, plan: Option<Box<PlannedFinish>>) -> DecisionOutcome {
        match plan {
            None => {
                // The claim stored this event; announce it.
                let _ = self.events.send(claimed.event.clone());
                DecisionOutcome::Resumes(Box::new(Resumption {
                    version: None,
                    next_seq: claimed.event.seq + 1,
                    record: claimed.record,
                }))
            }
            Some(planned) => self.finished_by_claim(claimed, *planned),
        }
    }

    /// The claim won and wrote the planned end with the decision: announce
    /// the decision's event and the planned ones, numbered after it as the
    /// store numbered them.
    fn finished_by_claim(&self, claimed: Claimed, planned: PlannedFinish) -> DecisionOutcome {
        let first = claimed.event.seq + 1;
        let _ = self.events.send(claimed.event);
        for (event, seq) in planned.finish.events.into_iter().zip(first..) {
            let _ = self.events.send(Event { seq, ..event });
        }
        DecisionOutcome::Finished {
            record: Box::new(planned.decided),
            run: Box::new(planned.outcome),
        }
    }

    /// True when `decided` (the record as its claim decides it) ends its
    /// run with no call, key claim or pause on the way: the gate step
    /// itself calls nothing with this decision, only `set:` steps follow
    /// it, and the spec has no dedupe step (a failing run releases its
    /// keys, a write that must not come before the claim). The spec must be
    /// the one the run paused under, whose steps line up with the record.
    pub(super) fn ends_without_io(&self, decided: &ApprovalRecord) -> bool {
        let Some(gate) = self.spec.steps.get(decided.step_index) else {
            return false;
        };
        let gate_calls = decided.phase == Phase::Before
            && journaled(gate)
            && decided.status != ApprovalStatus::Rejected;
        decided.spec_hash == self.spec.hash.as_str()
            && !gate_calls
            && self.spec.steps[decided.step_index + 1..]
                .iter()
                .all(|step| matches!(step.kind, StepKind::Set { .. }))
            && !self.spec.steps.iter().any(claims_key)
    }

    /// See [`AgentRun::claim`]: work out in memory how `decided` ends its
    /// run (only pure steps follow the gate), without writing or
    /// announcing anything: the end and the events the claim's write
    /// stores with the decision. `None` when the steps turn out to need a
    /// write after all: the run is then driven after its claim, as any
    /// other.
    pub(super) async fn plan_finish(
        &self,
        decided: &ApprovalRecord,
    ) -> Result<Option<PlannedFinish>, RunError> {
        // Numbered from 1 here: the store numbers them after the decision.
        let (mut ctx, mut log) = self.context_after_claim(decided, 1);
        log.owner = None;
        log.planning = true;
        self.replay(&ctx, decided.step_index, &mut log);
        let stop = self
            .run_steps(
                &mut ctx,
                decided.step_index,
                Some(decided.clone()),
                &mut log,
            )
            .await?;
        let Stop::End { status, error } = stop else {
            return Ok(None);
        };
        // Written with the claim, which is the fence: no owner.
        let end = RunEnd {
            owner: None,
            ..self.run_end(&ctx, status, error.clone(), &log)
        };
        Ok(Some(PlannedFinish {
            decided: decided.clone(),
            finish: RunFinish {
                end,
                events: std::mem::take(&mut log.buffer),
            },
            outcome: super::durable_point::ended(&ctx, status, error),
        }))
    }
}

/// How a decision ends a gate request's run (`crate::engine::gate::Requests`),
/// written by its claim: a served agent decides gate requests made through
/// its server (`POST /gates`, MCP) as it decides its own pauses, and the
/// request's run ends with the decision.
pub(super) fn gate_request_finish(record: &ApprovalRecord, claim: &Claim) -> PlannedFinish {
    let finish = crate::engine::gate::Requests::finish(record, claim);
    let decided = record.decided_by_claim(claim);
    let outcome = RunOutcome {
        run_id: finish.end.run_id.clone(),
        status: finish.end.status,
        outputs: finish.end.outputs.clone(),
        error: None,
        pending: None,
    };
    PlannedFinish {
        decided,
        finish,
        outcome,
    }
}
