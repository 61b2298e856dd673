//! A gate's votes as the approval page shows them (DESIGN §13): each
//! rule's progress, who has voted and who still may, and whether the
//! person looking may vote at all (the page offers the decision buttons
//! only to those who may).

use serde::Serialize;

use crate::domain::pending_approval::{ApprovalRecord, ApprovalStatus};
use crate::domain::policy::{Roster, Vote, VoteDecision};
use crate::server::ui::render::format;

/// One rule's line: "finance: 1 of 2".
#[derive(Debug, Serialize)]
pub(crate) struct RuleLine {
    group: String,
    counted: usize,
    min: u32,
    voted: String,
    may_still_vote: String,
}

/// One vote of the ledger.
#[derive(Debug, Serialize)]
pub(crate) struct VoteLine {
    voter: String,
    decision: &'static str,
    rule: Option<String>,
    reason: Option<String>,
    /// The approver's input given with the vote (a gate with a form), as
    /// compact JSON.
    input: Option<String>,
    channel: &'static str,
    at: String,
    superseded: bool,
}

/// The votes section of an approval page.
#[derive(Debug, Serialize)]
pub(crate) struct TeamView {
    /// "finance 1 of 2; security 0 of 1".
    summary: String,
    rules: Vec<RuleLine>,
    votes: Vec<VoteLine>,
    /// Who may vote on this gate at all: members not barred as requesters.
    pub deciders: String,
    /// Why the viewer may not vote, when they may not (the page then shows
    /// this instead of the buttons).
    pub may_not_vote: Option<String>,
}

impl TeamView {
    /// `record`'s votes as `viewer` sees them; `None` for a plain gate.
    pub fn new(record: &ApprovalRecord, votes: &[Vote], viewer: &str) -> Option<TeamView> {
        let roster = record.roster.as_ref()?;
        let tally = roster.tally(votes);
        let rules = roster
            .rules
            .iter()
            .zip(&tally.rules)
            .map(|(rule, progress)| RuleLine {
                group: rule.group.clone(),
                counted: progress.counted.len(),
                min: rule.min,
                voted: names(&progress.counted),
                may_still_vote: names(&progress.may_still_vote),
            })
            .collect();
        let votes_shown = votes
            .iter()
            .map(|v| VoteLine {
                voter: v.voter.clone(),
                decision: v.decision.as_str(),
                rule: v.rule.clone(),
                reason: v.reason.clone(),
                input: v.input.as_ref().map(|i| i.to_string()),
                channel: v.channel.as_str(),
                at: format::time(v.at),
                superseded: v.superseded,
            })
            .collect();
        Some(TeamView {
            summary: tally.summary(),
            rules,
            votes: votes_shown,
            deciders: deciders(roster),
            may_not_vote: (record.status == ApprovalStatus::Pending)
                .then(|| why_not(roster, votes, viewer))
                .flatten(),
        })
    }
}

/// Why `viewer` may not vote on the gate now, if they may not.
fn why_not(roster: &Roster, votes: &[Vote], viewer: &str) -> Option<String> {
    Some(match Barred::of(roster, votes, viewer)? {
        Barred::Requester => format!(
            "You ({viewer}) started this run or edited its payload, so you cannot vote on it (separation of duties)."
        ),
        Barred::NotMember => format!(
            "You ({viewer}) are not a member of {}, so you cannot vote on this approval.",
            groups(roster).join(" or ")
        ),
        Barred::Voted(decision) => {
            format!("You voted {decision} on this approval; your vote stands.")
        }
    })
}

/// Why someone may not vote on a pending gate with a roster; the approval
/// page says it in a sentence, the inbox list in a few words.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Barred {
    /// Started the run or edited its payload (separation of duties).
    Requester,
    /// In none of the rules' groups.
    NotMember,
    /// Voted already; the vote stands.
    Voted(VoteDecision),
}

impl Barred {
    /// Why `viewer` may not vote on a gate with `roster` and ledger
    /// `votes`, or `None` when they may.
    pub fn of(roster: &Roster, votes: &[Vote], viewer: &str) -> Option<Barred> {
        if !roster.allow_self_approval && roster.requesters.iter().any(|r| r == viewer) {
            return Some(Barred::Requester);
        }
        if !roster.is_member(viewer) {
            return Some(Barred::NotMember);
        }
        votes
            .iter()
            .find(|v| !v.superseded && v.voter == viewer)
            .map(|v| Barred::Voted(v.decision))
    }

    /// A few words for a list's row ("you voted approve").
    pub fn label(self, roster: &Roster) -> String {
        match self {
            Barred::Requester => "your run: you may not vote".into(),
            Barred::NotMember => format!("not in {}", groups(roster).join(" or ")),
            Barred::Voted(decision) => format!("you voted {decision}"),
        }
    }
}

fn groups(roster: &Roster) -> Vec<&str> {
    roster.rules.iter().map(|r| r.group.as_str()).collect()
}

/// The members who may vote, each once, in rule order.
fn deciders(roster: &Roster) -> String {
    let mut seen = Vec::new();
    for rule in &roster.rules {
        for member in &rule.members {
            let barred = !roster.allow_self_approval && roster.requesters.contains(member);
            if !barred && !seen.contains(member) {
                seen.push(member.clone());
            }
        }
    }
    if roster.rules.is_empty() {
        return "anyone allowed, except who started or edited the run".into();
    }
    names(&seen)
}

fn names(list: &[String]) -> String {
    if list.is_empty() {
        "nobody".into()
    } else {
        list.join(", ")
    }
}
