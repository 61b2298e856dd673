//! The values a store's writes take and return: a pause, a run's end, an
//! operator's transition, a claimed key, a cancel, a claim's outcome.

use chrono::{DateTime, Utc};
use serde_json::Value;

use crate::domain::events::{Event, EventKind};
use crate::domain::pending_approval::{ApprovalRecord, Claim};
use crate::domain::policy::{BallotVote, VoteChoice};
pub use crate::domain::run_state::RunEnd;
use crate::domain::run_state::{Lease, RunStatus};

/// The outcome of a successful claim.
#[derive(Debug, Clone)]
pub struct Claimed {
    /// The record as decided (status, decided_by, decided_at, decision_data set).
    pub record: ApprovalRecord,
    /// The `approval_resolved` event the claim appended to the run.
    pub event: Event,
}

/// One vote asked for (DESIGN §13): [`Votes::cast_vote`](super::Votes::cast_vote).
#[derive(Debug, Clone)]
pub struct CastVote {
    /// The claim that settles the gate if this vote does: its key, voter
    /// (`decided_by`), time (`now`), approver's input and spec hash are the
    /// vote's; its decision is the settlement the decider planned for (the
    /// vote's own, with a revised payload as a modify), its `then` what
    /// the settlement does to the run.
    pub claim: Claim,
    /// What the vote says, through what and on which payload: its own
    /// decision, which may differ from the claim's settlement.
    pub choice: VoteChoice,
}

impl CastVote {
    /// The ballot the roster counts and the ledger keeps: the claim's
    /// voter, time and input with the vote's choice.
    pub fn ballot(&self) -> BallotVote {
        BallotVote {
            voter: self.claim.decided_by.clone(),
            choice: self.choice.clone(),
            input: self.claim.input.clone(),
            at: self.claim.now,
        }
    }
}

/// What a vote came to.
#[derive(Debug, Clone)]
pub enum VoteOutcome {
    /// Recorded; the gate is still open. `event` is the `approval_vote`
    /// event appended to the run.
    Recorded {
        vote: crate::domain::policy::Vote,
        tally: crate::domain::policy::Tally,
        event: Event,
    },
    /// The vote settled the gate: the claim was written with it. On a
    /// gate that counts votes the vote's own `approval_vote` event comes
    /// first (`vote_event`); a plain gate's single decision is its
    /// `approval_resolved` alone.
    Settled {
        vote: crate::domain::policy::Vote,
        vote_event: Option<Event>,
        claimed: Box<Claimed>,
    },
}

/// An operator's change of a stopped run (`runs retry`, `runs fail`): one
/// conditional write, so of two operators acting at once one wins.
#[derive(Debug, Clone)]
pub struct RunTransition {
    pub run_id: String,
    /// The statuses the run may have for the change to apply.
    pub from: Vec<RunStatus>,
    pub to: RunStatus,
    /// The run's new `error` (`None` clears it).
    pub error: Option<String>,
    /// The new owner (a retry drives the run on); `None`: nobody.
    pub lease: Option<Lease>,
    /// The event recording the change; the store numbers it after the
    /// run's last.
    pub event: EventKind,
    pub at: DateTime<Utc>,
    /// Apply only if the run's last event is still this seq: the change
    /// is conditional on the run being as the operator saw it, so a retry
    /// and a fail racing on one run cannot both land (the later one finds
    /// the earlier one's event, answers [`StoreError::WrongRunStatus`](super::StoreError::WrongRunStatus) and
    /// changes nothing). `None`: whatever happened since.
    pub if_last_seq: Option<u64>,
}

/// Where a new run first becomes durable when it is stored only then
/// ([`RunLog::create_run_at`](super::RunLog::create_run_at)): its first pause, or its end.
#[derive(Debug, Clone, Copy)]
pub enum FirstWrite<'a> {
    Pause(&'a Pause),
    End(&'a RunEnd),
}

/// A pause: the record to insert plus the run's state so far.
#[derive(Debug, Clone)]
pub struct Pause {
    pub record: ApprovalRecord,
    pub at: DateTime<Utc>,
    /// As [`RunEnd::owner`]: the driver that must still own the run.
    pub owner: Option<String>,
    /// Where the gate's notices go, stored with the record: every later
    /// change to it writes its notices to these (DESIGN §14).
    pub routes: crate::domain::notices::NoticeRoutes,
}

impl Pause {
    /// The pause's own notices (`approval.requested`), written with it.
    pub fn notices(&self) -> Vec<crate::domain::notices::Notice> {
        let event = Event {
            run_id: self.record.run_id.clone(),
            seq: 0,
            at: self.at,
            kind: EventKind::awaiting(&self.record),
        };
        super::outbox::notices_of(&self.record, &self.routes, &event)
    }
}

/// A key claimed at most once at a time (a schedule tick, a signed
/// webhook request): see [`Keys::claim_key`](super::Keys::claim_key) and
/// [`RunLog::create_run_once`](super::RunLog::create_run_once).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyClaim {
    pub key: String,
    pub owner: String,
    pub now: DateTime<Utc>,
    pub expires_at: DateTime<Utc>,
}

/// An operator cancelling a run.
#[derive(Debug, Clone)]
pub struct CancelRun {
    pub run_id: String,
    /// Who cancels: `by` of the `run_cancelled` event, and `decided_by` of
    /// the approval it cancels.
    pub by: String,
    pub reason: Option<String>,
    pub now: DateTime<Utc>,
}

impl CancelRun {
    /// `decision_data` of a cancelled approval: `{"reason": ...}`.
    pub fn decision_data(&self) -> Option<Value> {
        self.reason
            .as_ref()
            .map(|r| serde_json::json!({ "reason": r }))
    }

    pub(crate) fn event(&self, seq: u64) -> Event {
        Event {
            run_id: self.run_id.clone(),
            seq,
            at: self.now,
            kind: EventKind::RunCancelled {
                by: self.by.clone(),
                reason: self.reason.clone(),
            },
        }
    }
}

/// A waiting gate's reminders and escalations done by one sweep (see
/// [`crate::store::Approvals::nudge_due`]).
#[derive(Debug, Clone)]
pub struct Nudged {
    /// The record as the nudges left it (an escalation's deciders added).
    pub record: ApprovalRecord,
    /// `approval_reminded` and `approval_escalated`, as appended.
    pub events: Vec<Event>,
}

/// What a cancel did.
#[derive(Debug, Clone)]
pub struct Cancelled {
    /// The status the run had: `awaiting_approval` or `running`.
    pub was: RunStatus,
    /// The approval it waited on, now CANCELLED (a waiting run only).
    pub approval: Option<ApprovalRecord>,
    /// The `run_cancelled` event appended.
    pub event: Event,
}

/// The `approval_resolved` event a successful claim appends.
pub(crate) fn resolved_event(record: &ApprovalRecord, claim: &Claim, seq: u64) -> Event {
    Event {
        run_id: record.run_id.clone(),
        seq,
        at: claim.now,
        kind: EventKind::ApprovalResolved {
            key: record.key.clone(),
            decision: claim.decision.name().to_string(),
            decided_by: claim.decided_by.clone(),
            reason: claim.decision.reason().map(str::to_string),
            input: claim.input.clone(),
            pinned_to: claim.pinned.then(|| claim.spec_hash.clone()),
        },
    }
}
