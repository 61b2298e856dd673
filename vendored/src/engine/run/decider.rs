//! The workflow as a decider on the one decision path (`decide`): who may
//! decide a pause, whether a decision fits its gate and can run here, the
//! approver's input against the gate's form, and what the claim's write
//! does to the run.

use super::claim::{PlannedFinish, gate_request_finish};
use super::decide::{Decider, approver_input};
use super::{AgentRun, RunError};
use crate::domain::pending_approval::{
    AfterClaim, ApprovalError, ApprovalRecord, Claim, Decision, Phase,
};
use crate::domain::spec::StepKind;

impl AgentRun {
    /// Who may decide `record`: on a gate with rules, its groups as
    /// resolved when it paused (the store checks the voter against them,
    /// with the votes, in the vote's transaction); on any other gate, the
    /// served spec's `approvals.approvers` (also for a pause of an older
    /// version) and whom its escalations added; on every gate, not one who
    /// asked for it unless the gate allows it (DESIGN §13).
    pub(super) fn check_voter(
        &self,
        record: &ApprovalRecord,
        decided_by: &str,
    ) -> Result<(), ApprovalError> {
        let deciders = self.serving.deciders_of(record);
        match &record.roster {
            // The store checks membership and requesters with the votes:
            // its refusal names the groups, or who asked.
            Some(roster) if !roster.rules.is_empty() => Ok(()),
            _ if !crate::domain::links::is_decider_of(record, deciders.approvers, decided_by) => {
                Err(ApprovalError::Forbidden {
                    key: record.key.clone(),
                    decided_by: decided_by.into(),
                })
            }
            // Separation of duties, before the claim: a plain gate's
            // requesters are in its trigger, which never changes, and a
            // roster's are checked again by the store with the vote.
            _ if crate::domain::policy::barred_as_requester(
                record,
                deciders.allow_self_approval,
                decided_by,
            ) =>
            {
                Err(ApprovalError::SelfApproval {
                    key: record.key.clone(),
                    voter: decided_by.into(),
                    asked_by: crate::domain::policy::requesters_of(record),
                })
            }
            _ => Ok(()),
        }
    }

    /// This process has every variable the spec's steps need (see
    /// [`crate::domain::spec::Spec::missing_secrets_to_run`]); else the decision on
    /// `key` is refused as `spec_unavailable`, naming each.
    fn check_runnable(&self, key: &str) -> Result<(), RunError> {
        let missing = self
            .spec
            .missing_secrets_to_run(|name| std::env::var_os(name).is_some());
        if missing.is_empty() {
            return Ok(());
        }
        Err(RunError::SpecUnavailable {
            key: key.to_string(),
            version: self.spec.hash.short().to_string(),
            reason: missing
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join("; "),
        })
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

/// A workflow's decisions: its approvers and gates decide, and a run whose
/// steps after the gate are all pure ends in the claim's own write.
impl Decider for AgentRun {
    type Error = RunError;
    /// The run's end, when the claim writes it.
    type Plan = Option<Box<PlannedFinish>>;

    fn admit(&self, record: &ApprovalRecord, decided_by: &str) -> Result<(), RunError> {
        self.check_voter(record, decided_by)?;
        if record.agent_id != self.spec.agent {
            return Err(RunError::WrongAgent {
                key: record.key.clone(),
                found: record.agent_id.clone(),
                expected: self.spec.agent.clone(),
            });
        }
        Ok(())
    }

    fn now(&self) -> chrono::DateTime<chrono::Utc> {
        self.clock.now()
    }

    /// The version this handle runs: older than the one served when a
    /// pause pinned to it is decided (`on_spec_change: pin`).
    fn resumes_on(&self) -> (String, bool) {
        (
            self.spec.hash.to_string(),
            self.spec.hash != self.serving.hash,
        )
    }

    fn check(&self, record: &ApprovalRecord, decision: &Decision) -> Result<(), RunError> {
        if record.is_gate_request() {
            return Ok(crate::engine::gate::Requests::check(record, decision)?);
        }
        // An approve or modify is checked against the spec the run resumes
        // on, which must be the one it paused under (its steps are what the
        // record's step index points into): refused here, before anything
        // is worked out on the wrong steps, as the claim would refuse it.
        if decision.requires_same_spec() && record.spec_hash != self.spec.hash.as_str() {
            return Err(RunError::Approval(ApprovalError::SpecChanged {
                key: record.key.clone(),
                paused_with: crate::SpecHash::short_of(&record.spec_hash).to_string(),
                current: self.spec.hash.short().to_string(),
            }));
        }
        // An approval resumes the run in this process: it must be able to
        // make the calls that follow, or the run would fail after a person
        // approved it. Refused before the claim; the record stays PENDING.
        if decision.requires_same_spec() {
            self.check_runnable(&record.key)?;
        }
        Ok(self.check_payload(record, decision)?)
    }

    fn input(
        &self,
        record: &ApprovalRecord,
        decision: &Decision,
        given: Option<serde_json::Value>,
    ) -> Result<Option<serde_json::Value>, ApprovalError> {
        // Another version's pause: an approval is decided by that
        // version's own handle, with its own form (or refused as
        // `spec_changed`); a reject, allowed under any spec, takes no
        // input either way.
        if record.is_gate_request() {
            return crate::engine::gate::Requests::input(record, decision, given);
        }
        let same_spec = record.spec_hash == self.spec.hash.as_str();
        if !same_spec && decision.requires_same_spec() {
            return Ok(given);
        }
        let form = same_spec
            .then(|| self.spec.gate_policy(record.step_index))
            .flatten()
            .and_then(|p| p.form.as_ref());
        approver_input(&record.key, form, decision, given)
    }

    async fn plan(
        &self,
        record: &ApprovalRecord,
        claim: &Claim,
    ) -> Result<(AfterClaim, Option<Box<PlannedFinish>>), RunError> {
        if record.is_gate_request() {
            let planned = gate_request_finish(record, claim);
            let then = AfterClaim::Finish(Box::new(planned.finish.clone()));
            return Ok((then, Some(Box::new(planned))));
        }
        let decided = record.decided_by_claim(claim);
        if self.ends_without_io(&decided)
            && let Some(planned) = self.plan_finish(&decided).await?
        {
            let then = AfterClaim::Finish(Box::new(planned.finish.clone()));
            return Ok((then, Some(Box::new(planned))));
        }
        Ok((AfterClaim::Drive(self.new_lease()), None))
    }
}
