//! What a decision came to: [`DecisionOutcome`], the one answer every
//! decider gets (the API, a batch, the inbox, a signed link, Slack, MCP,
//! the CLI, a gate's own timeout), matched by each of them.

use super::{AgentRun, RunOutcome};
use crate::domain::pending_approval::ApprovalRecord;
use crate::domain::policy::{Tally, Vote};

/// What one decision came to. Exactly one decision per key wins its
/// claim ([`Resumes`](DecisionOutcome::Resumes) or
/// [`Finished`](DecisionOutcome::Finished)); every other answer wrote
/// nothing that changes the run, or only a vote.
///
/// Pass it to [`AgentRun::resume_claimed`], which drives a run that
/// [`Resumes`](DecisionOutcome::Resumes) and answers every other outcome
/// with the run as it stands.
#[derive(Debug, Clone)]
pub enum DecisionOutcome {
    /// This decision won its claim; the run goes on from its gate when
    /// resumed. Until then a crash leaves it to recovery, never lost.
    Resumes(Box<Resumption>),
    /// This decision won its claim, and the claim's write also ended the
    /// run (only pure steps followed the gate, or it was a gate request):
    /// there is nothing left to drive.
    Finished {
        /// The record as decided.
        record: Box<ApprovalRecord>,
        /// The run as its claim ended it.
        run: Box<RunOutcome>,
    },
    /// A vote recorded on a gate that counts votes, which did not settle
    /// it: the gate waits for more.
    Voted(Box<VoteRecorded>),
    /// The same voter repeated the vote they had cast (a retry after a lost
    /// answer): nothing was written; the vote as recorded.
    VoteRepeated(Box<VoteRecorded>),
    /// The same decider repeated the decision that had won (a retry after a
    /// lost answer, see [`ApprovalRecord::was_decided_as`]): nothing was
    /// written, and nothing is driven again; the record as decided.
    Repeated(Box<ApprovalRecord>),
}

impl DecisionOutcome {
    /// The approval as this decision left it: decided (or decided earlier,
    /// for a repeat), or still PENDING after a vote.
    pub fn record(&self) -> &ApprovalRecord {
        match self {
            DecisionOutcome::Resumes(resumption) => &resumption.record,
            DecisionOutcome::Finished { record, .. } | DecisionOutcome::Repeated(record) => record,
            DecisionOutcome::Voted(recorded) | DecisionOutcome::VoteRepeated(recorded) => {
                &recorded.record
            }
        }
    }

    /// Whether this decision won the claim now (it is counted as a
    /// decision, and announced).
    pub fn won(&self) -> bool {
        matches!(
            self,
            DecisionOutcome::Resumes(_) | DecisionOutcome::Finished { .. }
        )
    }
}

/// A claim that won and leaves the run to be driven from its gate (see
/// [`AgentRun::resume_claimed`]).
#[derive(Debug, Clone)]
pub struct Resumption {
    /// The record as decided.
    pub record: ApprovalRecord,
    /// Set when the run resumes on the older version it paused under
    /// (`on_spec_change: pin`): the handle that runs that version.
    pub(super) version: Option<Box<AgentRun>>,
    /// The run's next event number after the claim's own.
    pub(super) next_seq: u64,
}

/// A vote recorded on a gate that counts votes, which did not settle it:
/// the gate still waits.
#[derive(Debug, Clone)]
pub struct VoteRecorded {
    /// The record, still PENDING (with the edit, after a modify vote).
    pub record: ApprovalRecord,
    pub vote: Vote,
    /// Every rule's progress with this vote counted.
    pub tally: Tally,
}
