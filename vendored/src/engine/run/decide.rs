//! Deciding a pending approval, on one path for every decider: a
//! workflow's [`AgentRun::claim`] (which the server's decide task, the
//! CLI, Slack and the inbox call) and the gate API's `Gate::decide`. Read
//! the record, check it, plan what the claim's write does to the run, then
//! claim: one conditional write, so exactly one decision per key wins
//! across processes. Deciding never drives a run: it is driven only after
//! its claim won (see `resume`).

use chrono::{DateTime, Utc};

use super::outcome::VoteRecorded;
use crate::domain::events::Event;
use crate::domain::pending_approval::{
    AfterClaim, ApprovalError, ApprovalRecord, ApprovalStatus, Claim, Decision,
};
use crate::domain::policy::{Channel, VoteChoice, VoteDecision};
use crate::store::{CastVote, Claimed, StateStore, StoreError, VoteOutcome};

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

    /// When a decision is made, by this decider's clock.
    fn now(&self) -> DateTime<Utc>;

    /// The spec version a claim that wins resumes the run on: its hash
    /// (checked by the claim for approve and modify), and whether it is
    /// older than the version served (see [`Claim::pinned`]).
    fn resumes_on(&self) -> (String, bool);

    /// What the claim's write does to the run, worked out from the record
    /// as read and the claim about to be made. Writes nothing.
    async fn plan(
        &self,
        record: &ApprovalRecord,
        claim: &Claim,
    ) -> Result<(AfterClaim, Self::Plan), Self::Error>;
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
    key: &str,
    ballot: Ballot,
) -> Result<Ruling<D::Plan>, D::Error> {
    let now = decider.now();
    let (spec_hash, pinned) = decider.resumes_on();
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
    let choice = choice_of(&claim, channel, current);
    // The decision as asked for: a repeat is recognised by it.
    let asked = claim.decision.clone();
    // What the gate settles with if this vote settles it: planned now, so
    // that the settlement's write is the claim's one conditional write.
    if let Some(roster) = &record.roster {
        claim.decision = roster.settles_as(&choice);
    }
    let (then, plan) = decider.plan(&record, &claim).await?;
    claim.then = then;
    let cast = store
        .cast_vote(&CastVote {
            claim: claim.clone(),
            choice,
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

/// What `claim`, as asked for, votes, through `channel`, on the payload
/// with digest `payload_digest`.
fn choice_of(claim: &Claim, channel: Channel, payload_digest: String) -> VoteChoice {
    VoteChoice {
        decision: VoteDecision::of(&claim.decision),
        reason: claim.decision.reason().map(str::to_string),
        payload: match &claim.decision {
            Decision::Modify { payload, .. } => Some(payload.clone()),
            _ => None,
        },
        channel,
        payload_digest,
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

/// The refusal of input on a gate that has no form.
fn no_form(key: &str) -> ApprovalError {
    ApprovalError::InvalidInput {
        key: key.into(),
        errors: vec![crate::domain::form::InputError {
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
    form: Option<&crate::domain::form::Form>,
    decision: &Decision,
    given: Option<serde_json::Value>,
) -> Result<Option<serde_json::Value>, ApprovalError> {
    match (form, decision) {
        (_, Decision::Reject { .. }) => match given {
            None => Ok(None),
            Some(_) => Err(ApprovalError::InvalidInput {
                key: key.into(),
                errors: vec![crate::domain::form::InputError {
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
    use crate::domain::form::Form;

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
