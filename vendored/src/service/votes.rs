//! A gate's ledger of votes as the API and the CLI show it (DESIGN §13):
//! `GET /approvals/{key}/votes` and `tollgate approvals votes KEY`. The
//! votes in the order they were cast, superseded ones included, with each
//! rule's progress as the votes that count stand now.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde::Serialize;

use crate::domain::pending_approval::ApprovalRecord;
use crate::domain::policy::{Tally, Vote};
use crate::service::schema::response_type;
use crate::store::{StateStore, StoreResult};

response_type! {
    /// One vote of the ledger.
    #[derive(Debug, Serialize)]
    pub(crate) struct VoteEntry {
        /// 1, 2, ... in the order cast.
        pub seq: u64,
        pub voter: String,
        /// approve, reject or modify.
        pub decision: String,
        /// The rule the vote counted toward when it was cast (approvals on
        /// a gate with rules only).
        pub rule: Option<String>,
        pub reason: Option<String>,
        /// api, cli, inbox, link, slack, gate or timeout.
        pub channel: String,
        /// The digest of the payload the vote was cast on.
        pub payload_digest: String,
        /// The approver's input given with the vote, on a gate with a
        /// `form:` (as checked, defaults filled in).
        #[serde(skip_serializing_if = "Option::is_none")]
        pub input: Option<serde_json::Value>,
        /// A later modify replaced the payload this vote was on: kept for
        /// the audit, no longer counted.
        pub superseded: bool,
        pub at: DateTime<Utc>,
    }
}

impl VoteEntry {
    fn of(vote: Vote) -> VoteEntry {
        VoteEntry {
            seq: u64::from(vote.seq),
            voter: vote.voter,
            decision: vote.decision.as_str().to_string(),
            rule: vote.rule,
            reason: vote.reason,
            channel: vote.channel.as_str().to_string(),
            payload_digest: vote.payload_digest,
            input: vote.input,
            superseded: vote.superseded,
            at: vote.at,
        }
    }
}

response_type! {
    /// One rule of a gate and how far its votes got.
    #[derive(Debug, Serialize)]
    pub(crate) struct RuleView {
        pub group: String,
        pub min: u64,
        /// The group's members as resolved when the run paused.
        pub members: Vec<String>,
        /// The voters whose approval counts toward this rule.
        pub counted: Vec<String>,
        /// Members who have not voted and may still (not requesters).
        pub may_still_vote: Vec<String>,
    }
}

response_type! {
    /// GET /approvals/{key}/votes.
    #[derive(Debug, Serialize)]
    pub(crate) struct VotesView {
        pub key: String,
        /// The record's status (PENDING while votes are still asked for).
        pub status: String,
        /// The ledger, oldest first. A plain gate has at most one entry:
        /// the decision that settled it.
        pub votes: Vec<VoteEntry>,
        /// Each rule's progress; empty for a plain gate.
        pub rules: Vec<RuleView>,
        /// Who may not vote on this gate: who started the run and anyone
        /// who edited its payload (unless `allow_self_approval`).
        pub requesters: Vec<String>,
        /// Each rule's progress in a line, e.g. `finance 1 of 2; security 0
        /// of 1`; empty for a plain gate.
        pub progress: String,
    }
}

impl VotesView {
    pub fn new(record: &ApprovalRecord, votes: Vec<Vote>) -> VotesView {
        let tally = record.roster.as_ref().map(|roster| roster.tally(&votes));
        let rules = match (&record.roster, &tally) {
            (Some(roster), Some(tally)) => roster
                .rules
                .iter()
                .zip(&tally.rules)
                .map(|(rule, progress)| RuleView {
                    group: rule.group.clone(),
                    min: u64::from(rule.min),
                    members: rule.members.clone(),
                    counted: progress.counted.clone(),
                    may_still_vote: progress.may_still_vote.clone(),
                })
                .collect(),
            _ => Vec::new(),
        };
        VotesView {
            key: record.key.clone(),
            status: record.status.as_str().to_string(),
            votes: votes.into_iter().map(VoteEntry::of).collect(),
            rules,
            requesters: record
                .roster
                .as_ref()
                .map(|r| r.requesters.clone())
                .unwrap_or_default(),
            progress: tally.as_ref().map(Tally::summary).unwrap_or_default(),
        }
    }
}

/// The ledgers of listed gates, read in one query for a whole page
/// ([`Votes::ledgers`](crate::store::Votes::ledgers)): what a list needs to
/// show each gate's progress and whether its viewer may still vote.
#[derive(Debug, Default)]
pub(crate) struct ListedLedgers {
    ledgers: BTreeMap<String, Vec<Vote>>,
}

impl ListedLedgers {
    /// The ledgers of those of `records` that count votes (a roster was
    /// stored with the pause); plain gates need none.
    pub async fn read<'r>(
        store: &dyn StateStore,
        records: impl IntoIterator<Item = &'r ApprovalRecord>,
    ) -> StoreResult<ListedLedgers> {
        let keys: Vec<String> = records
            .into_iter()
            .filter(|r| r.roster.is_some())
            .map(|r| r.key.clone())
            .collect();
        Ok(ListedLedgers {
            ledgers: store.ledgers(&keys).await?,
        })
    }

    /// Ledgers already read (the page tests build them by hand).
    #[cfg(test)]
    pub fn of(ledgers: BTreeMap<String, Vec<Vote>>) -> ListedLedgers {
        ListedLedgers { ledgers }
    }

    /// The ledger of `key` as read (empty when it has no votes).
    pub fn votes(&self, key: &str) -> &[Vote] {
        self.ledgers.get(key).map_or(&[], Vec::as_slice)
    }

    /// `record`'s rules' progress ("finance 1 of 2; security 0 of 1"), for
    /// a gate with rules.
    pub fn progress(&self, record: &ApprovalRecord) -> Option<String> {
        let roster = record.roster.as_ref().filter(|r| !r.rules.is_empty())?;
        Some(roster.tally(self.votes(&record.key)).summary())
    }

    /// How many votes `key`'s ledger holds (a change of the list's
    /// progress shows as a change of this).
    pub fn count(&self, key: &str) -> usize {
        self.votes(key).len()
    }
}
