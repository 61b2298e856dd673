//! Casting a vote ([`Votes::cast_vote`](super::Votes::cast_vote)): the
//! part every SQL store decides the same way, written once. A store reads
//! the record (and, on a gate that counts votes, its ledger) inside the
//! cast's transaction, asks here what the vote may do and does, and writes
//! that in its own dialect, in the order the trait's doc gives.

use serde_json::Value;

use super::{CastVote, Claimed, StoreResult, VoteOutcome};
use crate::domain::events::{Event, EventKind};
use crate::domain::pending_approval::{ApprovalError, ApprovalRecord, ApprovalStatus, Decision};
use crate::domain::policy::{Cast, Channel, Roster, Vote, VoteDecision, payload_digest};

/// What every store refuses before a cast's transaction: a vote time it
/// could not read back.
pub(crate) fn check_cast(cast: &CastVote) -> StoreResult<()> {
    super::check_storable("a vote's time", cast.claim.now)
}

/// Steps 1 and 2 of a cast: `record`, as read in the cast's transaction,
/// takes the vote only while the claim could take it (PENDING, unexpired
/// at the claim's time, on its spec for approve and modify) and only on
/// the payload the voter saw. Returns the record.
pub(crate) fn admit<'r>(
    cast: &CastVote,
    record: Option<&'r ApprovalRecord>,
) -> StoreResult<&'r ApprovalRecord> {
    let claim = &cast.claim;
    let open = record.filter(|r| {
        r.status == ApprovalStatus::Pending
            && !r.is_expired_at(claim.now)
            && (!claim.decision.requires_same_spec() || r.spec_hash == claim.spec_hash)
    });
    let Some(record) = open else {
        return Err(ApprovalError::explain_failed_claim(&claim.key, record, claim).into());
    };
    check_digest(cast, record)?;
    Ok(record)
}

/// Step 2 alone: the vote was cast on `record`'s payload. A store whose
/// plain-gate path claims first checks this on the record its claim
/// returned (the claim leaves the payload as it was), and rolls the whole
/// cast back on a mismatch.
pub(crate) fn check_digest(cast: &CastVote, record: &ApprovalRecord) -> StoreResult<()> {
    let current = record.payload_digest();
    if cast.choice.payload_digest != current {
        return Err(ApprovalError::PayloadChanged {
            key: cast.claim.key.clone(),
            given: cast.choice.payload_digest.clone(),
            current,
        }
        .into());
    }
    Ok(())
}

/// Step 4 of a cast on a gate that counts votes: what the vote does, from
/// `roster` over the key's `ledger` (in seq order). A refusal is the
/// roster's error. A cast that settles the gate must settle it as the
/// claim the decider planned; any other settlement is refused as
/// [`ApprovalError::PayloadChanged`] (the decider planned for another
/// payload), never written.
pub(crate) fn count(
    cast: &CastVote,
    record: &ApprovalRecord,
    roster: &Roster,
    ledger: &[Vote],
) -> StoreResult<Cast> {
    let counted = roster.cast(&cast.claim.key, &cast.ballot(), ledger)?;
    if let Some(settles) = &counted.settles {
        let planned = &cast.claim.decision;
        debug_assert_eq!(
            settles, planned,
            "a settling vote's claim must carry the settlement (the engine plans it from the record)"
        );
        if settles != planned {
            return Err(ApprovalError::PayloadChanged {
                key: cast.claim.key.clone(),
                given: payload_digest(settled_payload(planned, record)),
                current: payload_digest(settled_payload(settles, record)),
            }
            .into());
        }
    }
    Ok(counted)
}

/// The payload a decision settles `record` with.
fn settled_payload<'a>(decision: &'a Decision, record: &'a ApprovalRecord) -> &'a Value {
    match decision {
        Decision::Modify { payload, .. } => payload,
        Decision::Approve { .. } | Decision::Reject { .. } => &record.payload,
    }
}

/// The `approval_vote` event of `vote` on `record`, numbered `seq`.
pub(crate) fn vote_event(record: &ApprovalRecord, vote: &Vote, counted: &Cast, seq: u64) -> Event {
    Event {
        run_id: record.run_id.clone(),
        seq,
        at: vote.at,
        kind: EventKind::vote(&record.key, vote, counted),
    }
}

/// What a counted vote came to: settled with `claimed` when the cast
/// settled the gate (the claim was written after the vote's event),
/// recorded otherwise.
pub(crate) fn counted_outcome(
    vote: Vote,
    counted: Cast,
    event: Event,
    claimed: Option<Claimed>,
) -> VoteOutcome {
    match claimed {
        Some(claimed) => VoteOutcome::Settled {
            vote,
            vote_event: Some(event),
            claimed: Box::new(claimed),
        },
        None => VoteOutcome::Recorded {
            vote,
            tally: counted.tally,
            event,
        },
    }
}

/// A plain gate's ledger: its one decision, as its record holds it (the
/// decision's `channel` is kept on the record; the payload it was made on
/// is the record's own, which no decision changes). Empty for a record
/// that no person decided (pending, expired, cancelled) or that was
/// decided before the record kept its channel.
pub(crate) fn plain_ledger(record: &ApprovalRecord, channel: &str) -> StoreResult<Vec<Vote>> {
    let decision = match record.status {
        ApprovalStatus::Approved => VoteDecision::Approve,
        ApprovalStatus::Rejected => VoteDecision::Reject,
        ApprovalStatus::Modified => VoteDecision::Modify,
        _ => return Ok(Vec::new()),
    };
    let (Some(voter), Some(at)) = (record.decided_by.clone(), record.decided_at) else {
        return Ok(Vec::new());
    };
    let channel = Channel::parse(channel).ok_or_else(|| {
        super::StoreError::Corrupt(format!(
            "tollgate_approvals.decided_via of row {:?}: unknown channel {channel:?}",
            record.key
        ))
    })?;
    Ok(vec![Vote {
        seq: 1,
        voter,
        rule: None,
        decision,
        reason: record.reason().map(str::to_string),
        payload: record.modified_payload().cloned(),
        channel,
        payload_digest: payload_digest(&record.payload),
        input: record.approver_input().cloned(),
        superseded: false,
        at,
    }])
}

/// A plain gate's vote: its single decision, settled by the claim.
pub(crate) fn plain_outcome(vote: Vote, claimed: Claimed) -> VoteOutcome {
    VoteOutcome::Settled {
        vote,
        vote_event: None,
        claimed: Box::new(claimed),
    }
}
