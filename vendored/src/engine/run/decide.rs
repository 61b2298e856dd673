//! Deciding a pending approval, on one path for every decider: a
//! workflow's [`AgentRun::claim`] (which the server's decide task, the
//! CLI, Slack and the inbox call) and the gate API's `Gate::decide`. Read
//! the record, check it, plan what the claim's write does to the run, then
//! claim: one conditional write, so exactly one decision per key wins
//! across processes. Deciding never drives a run: it is driven only after
//! its claim won (see `resume`).

use chrono::{DateTime, Utc};

use super::drive::Stop;
use super::outcome::{DecisionOutcome, Resumption, VoteRecorded};
use super::{AgentRun, RunError, RunOutcome, claims_key, journaled};
use crate::events::Event;
use crate::pending_approval::{
    AfterClaim, ApprovalError, ApprovalRecord, ApprovalStatus, Claim, Decision, Phase, RunFinish,
};
use crate::policy::{BallotVote, Channel, VoteDecision};
use crate::spec::StepKind;
use crate::store::{CastVote, Claimed, RunEnd, StateStore, StoreError, VoteOutcome};

/// What differs between deciders: their own checks, and what the claim's
/// write does to the run besides deciding. Everything else (repeats, the
/// record's state, the claim, a lost race) is [`decide_approval`]'s, the same for
/// all of them.
pub(crate) trait Decider {
    type Error: From<ApprovalError> + From<StoreError>;
    /// What the decider worked out before the claim and needs once it won.
    type Plan;

    /// Checks of the record as read, before its state is looked at: who
    /// may decide, whose record it is.
    fn admit(&self, record: &ApprovalRecord, decided_by: &str) -> Result<(), Self::Error>;

    /// Checks of a decision on a record still pending: does it fit its
    /// gate. A refusal leaves the record untouched and PENDING.
    fn check(&self, record: &ApprovalRecord, decision: &Decision) -> Result<(), Self::Error>;

    /// The approver's input as it is stored with `decision`, from what
    /// they gave (see `domain/form.rs`): checked against the gate's
    /// `form:`, defaults filled in. A gate without a form, and a reject,
    /// take none. By default: no gate has a form.
    fn input(
        &self,
        record: &ApprovalRecord,
        _decision: &Decision,
        given: Option<serde_json::Value>,
    ) -> Result<Option<serde_json::Value>, ApprovalError> {
        match given {
            None => Ok(None),
            Some(_) => Err(no_form(&record.key)),
        }
    }

    /// What the claim's write does to the run, worked out from the record
    /// as read and the claim about to be made. Writes nothing.
    async fn plan(
        &self,
        record: &ApprovalRecord,
        claim: &Claim,
    ) -> Result<(AfterClaim, Self::Plan), Self::Error>;
}

/// One decision asked for: the ballot, and what the decider's handle
/// adds to it.
pub(crate) struct DecisionRequest<'a> {
    pub key: &'a str,
    pub ballot: Ballot,
    pub now: DateTime<Utc>,
    /// The decider's spec hash (checked by the claim for approve and modify).
    pub spec_hash: String,
    /// `spec_hash` is an older version than the one served (see
    /// [`Claim::pinned`]).
    pub pinned: bool,
}

/// A decision as a decider asks for it: what, by whom, from where, and on
/// which payload (see [`AgentRun::vote`]).
#[derive(Debug, Clone, PartialEq)]
pub struct Ballot {
    pub decision: Decision,
    pub by: String,
    pub channel: Channel,
    /// `sha256:` + hex of the payload the decider was shown
    /// ([`ApprovalRecord::payload_digest`]); `None` decides on whatever the
    /// gate asks about when the vote is counted.
    pub payload_digest: Option<String>,
    /// The approver's input, for a gate with a `form:` (DESIGN §13):
    /// checked against the form, stored with the decision, and part of the
    /// step's output.
    pub input: Option<serde_json::Value>,
}

impl Ballot {
    /// A decision by `by` through `channel`, with no digest.
    pub fn new(decision: Decision, by: &str, channel: Channel) -> Ballot {
        Ballot {
            decision,
            by: by.to_string(),
            channel,
            payload_digest: None,
            input: None,
        }
    }

    /// The same ballot, with the approver's input.
    pub fn with_input(mut self, input: Option<serde_json::Value>) -> Ballot {
        self.input = input;
        self
    }

    /// The same ballot, made on the payload with this digest.
    pub fn shown(mut self, payload_digest: Option<String>) -> Ballot {
        self.payload_digest = payload_digest;
        self
    }
}

/// What a ballot came to on the one decision path, before the decider
/// makes it its own answer (a workflow's [`DecisionOutcome`], a gate
/// request's outcome).
pub(crate) enum Ruling<P> {
    /// This claim won: the store's answer (the record as decided and the
    /// `approval_resolved` event it appended), the vote's own
    /// `approval_vote` event before it on a gate that counts votes, and the
    /// decider's plan.
    Won {
        claimed: Box<Claimed>,
        vote_event: Option<Event>,
        plan: P,
    },
    /// A vote recorded; the gate waits for more. `event` is its
    /// `approval_vote` event.
    Voted {
        recorded: Box<VoteRecorded>,
        event: Event,
    },
    /// The same voter repeated their standing vote: nothing was written.
    VoteRepeated(Box<VoteRecorded>),
    /// The same decider repeated the decision that had won (a retry after
    /// a lost answer, see [`ApprovalRecord::was_decided_as`]): nothing was
    /// written; the record as decided.
    Repeat(Box<ApprovalRecord>),
}

/// The one decision path: read the record, let `decider` admit it, answer
/// a repeat with the decision that won, refuse a record no longer pending
/// for its state, let `decider` check the decision and plan the claim's
/// write, then claim. A claim that lost the race since the read is, to the
/// same decider with the same decision, a repeat; to anyone else, a
/// conflict.
pub(crate) async fn decide_approval<D: Decider>(
    decider: &D,
    store: &dyn StateStore,
    request: DecisionRequest<'_>,
) -> Result<Ruling<D::Plan>, D::Error> {
    let DecisionRequest {
        key,
        ballot,
        now,
        spec_hash,
        pinned,
    } = request;
    let Ballot {
        decision,
        by: decided_by,
        channel,
        payload_digest,
        input: given,
    } = ballot;
    let decided_by = decided_by.as_str();
    let record = store
        .get_approval(key)
        .await?
        .ok_or_else(|| ApprovalError::NotFound { key: key.into() })?;
    // The input as it would be stored: a repeat is recognised by it. When
    // it does not fit, a record no longer pending still answers for its
    // state first (below). A gate's own timeout gives none.
    let input = match channel {
        Channel::Timeout => Ok(None),
        _ => decider.input(&record, &decision, given),
    };
    let mut claim = Claim {
        key: key.to_string(),
        decision,
        input: input.as_ref().ok().cloned().flatten(),
        decided_by: decided_by.to_string(),
        now,
        spec_hash,
        pinned,
        timeout: None,
        // Replaced by the decider's plan below, once the decision is known
        // to be worth a write.
        then: AfterClaim::Release,
    };
    // A gate request belongs to no spec version: whoever decides it
    // claims it as it is, never refused as `spec_changed`.
    if record.is_gate_request() {
        claim.spec_hash = record.spec_hash.clone();
        claim.pinned = false;
    }
    if channel == Channel::Timeout {
        return settle_by_timeout(decider, store, &record, claim).await;
    }
    decider.admit(&record, decided_by)?;
    if record.was_claimed_as(&claim) {
        return Ok(Ruling::Repeat(Box::new(record)));
    }
    // A record that is no longer pending answers for its state
    // (`already_resolved`, `approval_expired`) whatever the decision looks
    // like: a payload that would not fit is beside the point then.
    if record.status != ApprovalStatus::Pending || record.is_expired_at(now) {
        return Err(ApprovalError::explain_failed_claim(key, Some(&record), &claim).into());
    }
    input?;
    // The payload the gate asks about now; a decision made on another one
    // is refused here, and the store checks it again with the vote.
    let current = check_shown(&record, payload_digest)?;
    decider.check(&record, &claim.decision)?;
    let ballot = ballot_of(&claim, channel, current);
    // The decision as asked for: a repeat is recognised by it.
    let asked = claim.decision.clone();
    // What the gate settles with if this vote settles it: planned now, so
    // that the settlement's write is the claim's one conditional write.
    if let Some(roster) = &record.roster {
        claim.decision = roster.settles_as(&ballot);
    }
    let (then, plan) = decider.plan(&record, &claim).await?;
    claim.then = then;
    let cast = store
        .cast_vote(&CastVote {
            ballot,
            claim: claim.clone(),
        })
        .await;
    answer_cast(store, record, &claim, &asked, cast, plan).await
}

/// The payload digest of `record` (what the gate asks about now), when
/// the decider was shown it (`shown`, if the channel sent one): else
/// `payload_changed`, naming both.
fn check_shown(record: &ApprovalRecord, shown: Option<String>) -> Result<String, ApprovalError> {
    let current = record.payload_digest();
    match shown {
        Some(given) if given != current => Err(ApprovalError::PayloadChanged {
            key: record.key.clone(),
            given,
            current,
        }),
        _ => Ok(current),
    }
}

/// The ledger entry `claim` casts, through `channel`, on the payload with
/// digest `payload_digest`.
fn ballot_of(claim: &Claim, channel: Channel, payload_digest: String) -> BallotVote {
    BallotVote {
        voter: claim.decided_by.clone(),
        decision: VoteDecision::of(&claim.decision),
        reason: claim.decision.reason().map(str::to_string),
        payload: match &claim.decision {
            Decision::Modify { payload, .. } => Some(payload.clone()),
            _ => None,
        },
        channel,
        payload_digest,
        input: claim.input.clone(),
        at: claim.now,
    }
}

/// What the store's answer to a vote (`cast`, of `claim` on `record` as
/// read, asked as `asked`) comes to: the settlement won, a vote recorded,
/// a repeat of the decider's own vote or decision, or the refusal
/// explained from the record as it is now.
async fn answer_cast<P, E: From<StoreError> + From<ApprovalError>>(
    store: &dyn StateStore,
    record: ApprovalRecord,
    claim: &Claim,
    asked: &Decision,
    cast: Result<VoteOutcome, StoreError>,
    plan: P,
) -> Result<Ruling<P>, E> {
    let key = claim.key.as_str();
    match cast {
        Ok(VoteOutcome::Settled {
            vote_event,
            claimed,
            ..
        }) => Ok(Ruling::Won {
            claimed,
            vote_event,
            plan,
        }),
        Ok(VoteOutcome::Recorded { vote, tally, event }) => {
            // An edit changed the payload the gate asks about: answer with
            // the record as the vote left it.
            let record = if vote.decision == VoteDecision::Modify {
                store.get_approval(key).await?.unwrap_or(record)
            } else {
                record
            };
            Ok(Ruling::Voted {
                recorded: Box::new(VoteRecorded {
                    record,
                    vote,
                    tally,
                }),
                event,
            })
        }
        Err(StoreError::Approval(refusal @ ApprovalError::AlreadyVoted { .. })) => {
            // Not a repeat: the refusal, which names the vote that stands.
            repeated_vote::<P, E>(store, key, &claim.decided_by, asked, &claim.input)
                .await?
                .ok_or_else(|| refusal.into())
        }
        Err(StoreError::Approval(ApprovalError::AlreadyResolved { .. })) => {
            match store.get_approval(key).await? {
                Some(won) if won.was_claimed_as(claim) => Ok(Ruling::Repeat(Box::new(won))),
                other => {
                    Err(ApprovalError::explain_failed_claim(key, other.as_ref(), claim).into())
                }
            }
        }
        Err(e) => Err(e.into()),
    }
}

/// A gate whose time ran out, settled by its own `on_timeout` (DESIGN
/// §13): not a vote (no voter is checked, no ledger row is written), but
/// the same claim as any decision, conditional on the record being
/// PENDING and overdue, so exactly one settlement wins across processes
/// and against a sweep that would expire it. The decision must be the one
/// the record's roster asks for (or a reject in place of an approve that
/// could not run); the decision data records which action applied.
async fn settle_by_timeout<D: Decider>(
    decider: &D,
    store: &dyn StateStore,
    record: &ApprovalRecord,
    mut claim: Claim,
) -> Result<Ruling<D::Plan>, D::Error> {
    let Some(action) = record.on_timeout().applied_by(&claim.decision) else {
        return Err(ApprovalError::Forbidden {
            key: claim.key.clone(),
            decided_by: claim.decided_by.clone(),
        }
        .into());
    };
    claim.timeout = Some(action);
    if record.status != ApprovalStatus::Pending || !record.is_expired_at(claim.now) {
        return Err(ApprovalError::explain_failed_claim(&claim.key, Some(record), &claim).into());
    }
    decider.check(record, &claim.decision)?;
    let (then, plan) = decider.plan(record, &claim).await?;
    claim.then = then;
    let claimed = store.claim(&claim).await?;
    Ok(Ruling::Won {
        claimed: Box::new(claimed),
        vote_event: None,
        plan,
    })
}

/// When `voter`'s standing vote on `key` is `decision` (a retry after a
/// lost answer): that vote, answered as recorded, with nothing written.
/// `None` when their vote says something else.
async fn repeated_vote<P, E: From<StoreError> + From<ApprovalError>>(
    store: &dyn StateStore,
    key: &str,
    voter: &str,
    decision: &Decision,
    input: &Option<serde_json::Value>,
) -> Result<Option<Ruling<P>>, E> {
    let record = store
        .get_approval(key)
        .await?
        .ok_or_else(|| ApprovalError::NotFound { key: key.into() })?;
    let Some(roster) = &record.roster else {
        return Ok(None);
    };
    let votes = store.votes(key).await?;
    let Some(standing) = votes.iter().find(|v| !v.superseded && v.voter == voter) else {
        return Ok(None);
    };
    let same = standing.decision == VoteDecision::of(decision)
        && standing.reason.as_deref() == decision.reason()
        && &standing.input == input;
    if !same {
        return Ok(None);
    }
    let vote = standing.clone();
    let tally = roster.tally(&votes);
    Ok(Some(Ruling::VoteRepeated(Box::new(VoteRecorded {
        record,
        vote,
        tally,
    }))))
}

/// A run's end worked out before its decision's claim (see
/// [`AgentRun::plan_finish`]).
pub(crate) struct PlannedFinish {
    /// The record as the claim decides it.
    decided: ApprovalRecord,
    /// What the claim's write stores besides the decision.
    finish: RunFinish,
    /// What the caller hears once the claim won.
    outcome: RunOutcome,
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
                if let Some(outcome) = crate::metrics::ApprovalEnd::of(won.record().status) {
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
        let request = DecisionRequest {
            key,
            ballot,
            now: self.clock.now(),
            spec_hash: self.spec.hash.to_string(),
            pinned: self.spec.hash != self.serving.hash,
        };
        let cast = decide_approval(self, self.store.as_ref(), request).await?;
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
    fn ends_without_io(&self, decided: &ApprovalRecord) -> bool {
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
    async fn plan_finish(
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
            _ if !crate::links::is_decider_of(record, deciders.approvers, decided_by) => {
                Err(ApprovalError::Forbidden {
                    key: record.key.clone(),
                    decided_by: decided_by.into(),
                })
            }
            // Separation of duties, before the claim: a plain gate's
            // requesters are in its trigger, which never changes, and a
            // roster's are checked again by the store with the vote.
            _ if crate::policy::barred_as_requester(
                record,
                deciders.allow_self_approval,
                decided_by,
            ) =>
            {
                Err(ApprovalError::SelfApproval {
                    key: record.key.clone(),
                    voter: decided_by.into(),
                    asked_by: crate::policy::requesters_of(record),
                })
            }
            _ => Ok(()),
        }
    }

    /// This process has every variable the spec's steps need (see
    /// [`crate::spec::Spec::missing_secrets_to_run`]); else the decision on
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

    fn check(&self, record: &ApprovalRecord, decision: &Decision) -> Result<(), RunError> {
        // A gate request's payload is whatever its caller asked with: any
        // edit fits, and there is no spec to change.
        if record.is_gate_request() {
            return Ok(());
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
        // A gate request has no form.
        if record.is_gate_request() {
            return approver_input(&record.key, None, decision, given);
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
        let decided = record.decided_by_claim(claim);
        if decided.is_gate_request() {
            let planned = gate_request_finish(decided, claim.now);
            let then = AfterClaim::Finish(Box::new(planned.finish.clone()));
            return Ok((then, Some(Box::new(planned))));
        }
        if self.ends_without_io(&decided)
            && let Some(planned) = self.plan_finish(&decided).await?
        {
            let then = AfterClaim::Finish(Box::new(planned.finish.clone()));
            return Ok((then, Some(Box::new(planned))));
        }
        Ok((AfterClaim::Drive(self.new_lease()), None))
    }
}

/// How a decision ends a gate request's run (`crate::gate::request_finish`),
/// written by its claim: a served agent decides gate requests made through
/// its server (`POST /gates`, MCP) as it decides its own pauses, and the
/// request's run ends with the decision.
fn gate_request_finish(decided: ApprovalRecord, at: DateTime<Utc>) -> PlannedFinish {
    let finish = crate::gate::request_finish(&decided, at);
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

/// The refusal of input on a gate that has no form.
fn no_form(key: &str) -> ApprovalError {
    ApprovalError::InvalidInput {
        key: key.into(),
        errors: vec![crate::form::InputError {
            path: String::new(),
            message: "this gate has no form: it takes no input".into(),
        }],
    }
}

/// The input stored with `decision` on a gate whose form is `form`: an
/// approval or modify on a form's gate is checked against it (an absent
/// input is an empty one, so required fields are asked for); a gate
/// without a form, and a reject, take none.
pub(crate) fn approver_input(
    key: &str,
    form: Option<&crate::form::Form>,
    decision: &Decision,
    given: Option<serde_json::Value>,
) -> Result<Option<serde_json::Value>, ApprovalError> {
    match (form, decision) {
        (_, Decision::Reject { .. }) => match given {
            None => Ok(None),
            Some(_) => Err(ApprovalError::InvalidInput {
                key: key.into(),
                errors: vec![crate::form::InputError {
                    path: String::new(),
                    message: "a reject takes no input: give a reason instead".into(),
                }],
            }),
        },
        (None, _) => match given {
            None => Ok(None),
            Some(_) => Err(no_form(key)),
        },
        (Some(form), _) => {
            form.complete(given.as_ref())
                .map(Some)
                .map_err(|errors| ApprovalError::InvalidInput {
                    key: key.into(),
                    errors,
                })
        }
    }
}

#[cfg(test)]
mod input_tests {
    use serde_json::json;

    use super::*;
    use crate::form::Form;

    fn form() -> Form {
        Form::parse(&json!({"type": "object", "properties": {
            "note": {"type": "string"}, "rush": {"type": "boolean", "default": false}
        }, "required": ["note"]}))
        .unwrap()
    }

    fn approve() -> Decision {
        Decision::Approve { reason: None }
    }

    #[test]
    fn an_approval_on_a_form_is_completed_and_checked() {
        let given = Some(json!({"note": "ok"}));
        assert_eq!(
            approver_input("k", Some(&form()), &approve(), given),
            Ok(Some(json!({"note": "ok", "rush": false})))
        );
        let refused = approver_input("k", Some(&form()), &approve(), None).unwrap_err();
        assert_eq!(refused.code(), "invalid_input");
        assert_eq!(
            refused.to_string(),
            "invalid input for approval k: /note: is required"
        );
    }

    #[test]
    fn a_gate_without_a_form_and_a_reject_take_no_input() {
        assert_eq!(approver_input("k", None, &approve(), None), Ok(None));
        let refused = approver_input("k", None, &approve(), Some(json!({}))).unwrap_err();
        assert_eq!(
            refused.to_string(),
            "invalid input for approval k: this gate has no form: it takes no input"
        );
        let reject = Decision::Reject { reason: None };
        assert_eq!(approver_input("k", Some(&form()), &reject, None), Ok(None));
        let refused = approver_input("k", Some(&form()), &reject, Some(json!({"note": "x"})));
        assert_eq!(
            refused.unwrap_err().to_string(),
            "invalid input for approval k: a reject takes no input: give a reason instead"
        );
    }
}
