//! Deciding a pending approval: who may decide, whether the decision fits
//! its gate, and the claim (one conditional write; exactly one decision per
//! key wins across processes).

use super::{AgentRun, RunError, RunOutcome, claims_key, journaled};
use crate::pending_approval::{
    AfterClaim, ApprovalError, ApprovalRecord, ApprovalStatus, Claim, Decision, Phase,
};
use crate::spec::StepKind;
use crate::store::StoreError;

/// A decision that won its claim; the run waits for [`AgentRun::resume_claimed`].
#[derive(Debug, Clone)]
pub struct ClaimedDecision {
    /// The record as decided.
    pub record: ApprovalRecord,
    pub(super) next_seq: u64,
    /// Set when the claim's write also ended the run (see
    /// [`AgentRun::claim`]): resuming only answers with it.
    pub(super) finished: Option<RunOutcome>,
    /// The same decider repeated the decision that had already won (see
    /// [`ApprovalRecord::was_decided_as`]): nothing was written, and
    /// resuming does not drive the run again (its first claim did).
    pub(super) repeated: bool,
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
}
