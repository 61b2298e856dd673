//! Team approval policy (DESIGN §13): who may vote on a gate, how votes
//! count toward its rules, and when they settle it.
//!
//! A gate's policy as the spec writes it is a [`GatePolicy`]. When a run
//! pauses at a gate with rules, the policy is resolved into a [`Roster`]
//! (each rule with its members by name, the requesters who may not vote)
//! and stored on the pause, so a later change of membership is visible
//! rather than silent. Votes are a ledger ([`Vote`]); [`Roster::cast`]
//! decides, from the roster and the votes so far, what one more vote does:
//! refused, recorded, or the vote that settles the gate. It is pure: every
//! store calls it inside the transaction that appends the vote, so the
//! counting rules are written once.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::domain::pending_approval::{ApprovalError, Decision};

crate::named_enum! {
    /// When rejections end a gate.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
    #[serde(rename_all = "snake_case")]
    pub enum RejectWhen {
        /// One reject ends the gate.
        #[default]
        Any = "any",
        /// A reject ends the gate once the voters left cannot reach every
        /// rule's minimum any more.
        WhenUnreachable = "when_unreachable",
    }
}

crate::named_enum! {
    /// What happens when a gate's time runs out.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
    #[serde(rename_all = "snake_case")]
    pub enum OnTimeout {
        Reject = "reject",
        /// The record becomes EXPIRED and its run `expired` (the behaviour
        /// of every gate before policies).
        #[default]
        Expire = "expire",
        /// Approved, decided by `timeout`. Must be written out.
        Approve = "approve",
        /// The gate's step records the timeout and the run goes on.
        Continue = "continue",
    }
}

crate::named_enum! {
    /// Where a vote came from: recorded with every vote.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
    #[serde(rename_all = "snake_case")]
    pub enum Channel {
        Api = "api",
        Cli = "cli",
        Inbox = "inbox",
        Link = "link",
        Slack = "slack",
        /// The gate API of a Rust program (`Gate::decide`).
        Gate = "gate",
        /// A gate's own `on_timeout`.
        Timeout = "timeout",
    }
}

impl OnTimeout {
    /// The decision a gate whose time ran out settles with under this
    /// action, `reason` saying so. `None` for `expire`: the sweep marks
    /// the record EXPIRED instead of deciding it.
    pub fn decision(self, reason: String) -> Option<Decision> {
        match self {
            OnTimeout::Expire => None,
            OnTimeout::Approve => Some(Decision::Approve {
                reason: Some(reason),
            }),
            OnTimeout::Reject | OnTimeout::Continue => Some(Decision::Reject {
                reason: Some(reason),
            }),
        }
    }

    /// The action a timeout's `decision` applies on a gate configured with
    /// `self`: its own, or `reject` when an `approve` could not run (a
    /// changed spec refused it: nothing is approved on steps it was not
    /// written for). `None`: the decision is not this gate's to take.
    pub fn applied_by(self, decision: &Decision) -> Option<OnTimeout> {
        match (self, decision) {
            (OnTimeout::Approve, Decision::Approve { .. }) => Some(OnTimeout::Approve),
            (OnTimeout::Approve | OnTimeout::Reject, Decision::Reject { .. }) => {
                Some(OnTimeout::Reject)
            }
            (OnTimeout::Continue, Decision::Reject { .. }) => Some(OnTimeout::Continue),
            _ => None,
        }
    }
}

/// One `rules:` entry: at least `min` votes from members of `group`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RuleSpec {
    pub group: String,
    pub min: u32,
}

/// One `escalate:` entry: after `after` of waiting, `add` these groups'
/// members to those who may vote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Escalation {
    pub after: Duration,
    pub add: Vec<String>,
}

/// A gate's policy as the spec writes it. The default is a plain gate: no
/// rules (one vote from anyone `approvals.approvers` allows settles it).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct GatePolicy {
    /// All required. Empty: a plain gate.
    pub rules: Vec<RuleSpec>,
    pub reject: RejectWhen,
    /// As written; see [`GatePolicy::self_approval_allowed`].
    pub allow_self_approval: Option<bool>,
    /// `voter_counts_once: false` lets one vote count toward every rule
    /// whose group has the voter; by default it counts toward one.
    pub voter_counts_once: bool,
    pub require_reason: bool,
    pub on_timeout: OnTimeout,
    /// Reminders, as percentages of the gate's time (`remind: [50%, 90%]`).
    pub remind: Vec<u8>,
    pub escalate: Vec<Escalation>,
    /// The approver's input: a JSON Schema of the supported subset (see
    /// `domain/form.rs`), read when the spec is.
    pub form: Option<crate::domain::form::Form>,
    /// The gate's own `notify:`: where its notices go, over the spec's
    /// `approvals.notify`. Who hears, not what is decided: a change of it
    /// never makes a pause's gate "changed" (spec/diff.rs).
    pub notify: crate::domain::spec::GateNotify,
}

impl GatePolicy {
    /// A plain policy: no rules, the defaults.
    pub fn plain() -> GatePolicy {
        GatePolicy {
            voter_counts_once: true,
            ..GatePolicy::default()
        }
    }

    /// Whether the gate counts votes (has rules) rather than taking the
    /// first allowed decision.
    pub fn has_rules(&self) -> bool {
        !self.rules.is_empty()
    }

    /// Separation of duties (see `separation.rs`): on for every gate
    /// unless the gate (or, filled in when the spec is read,
    /// `approvals.allow_self_approval`) writes `allow_self_approval: true`.
    pub fn self_approval_allowed(&self) -> bool {
        self.allow_self_approval.unwrap_or(false)
    }

    /// Whether a pause at this gate stores a [`Roster`] and counts votes:
    /// it has rules, or wants a reason with every refusal (the roster is
    /// what enforces that). A plain gate bars its requesters without one:
    /// they are in its record's trigger (`separation.rs`).
    pub fn counts_votes(&self) -> bool {
        self.has_rules() || self.require_reason
    }

    /// Whether a pause at this gate stores a [`Roster`]: it counts votes,
    /// or it has something to do while it waits or when its time runs out
    /// (an `on_timeout` other than `expire`, reminders, escalations), which
    /// the roster carries so that any process, on any version, does it.
    pub fn stores_roster(&self) -> bool {
        self.counts_votes()
            || self.on_timeout != OnTimeout::Expire
            || !self.remind.is_empty()
            || !self.escalate.is_empty()
    }
}

/// Groups by name, their members resolved (from the spec, or from
/// `TOLLGATE_GROUP_<NAME>`).
pub type Groups = BTreeMap<String, Vec<String>>;

/// One rule of a pause, its group's members resolved when it paused.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RosterRule {
    pub group: String,
    pub min: u32,
    pub members: Vec<String>,
}

/// A gate's policy resolved when its run paused, stored with the pause.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Roster {
    pub rules: Vec<RosterRule>,
    pub reject: RejectWhen,
    pub allow_self_approval: bool,
    pub voter_counts_once: bool,
    pub require_reason: bool,
    /// Who may not vote: who started the run, and anyone who modified the
    /// payload since (unless `allow_self_approval`).
    pub requesters: Vec<String>,
    /// The payload as last edited by a vote to modify, when one was: what
    /// the gate asks about now, and what it settles with.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revised_payload: Option<Value>,
    /// What happens when the gate's time runs out.
    #[serde(default, skip_serializing_if = "is_expire")]
    pub on_timeout: OnTimeout,
    /// Reminders and escalations still to come, in time order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub nudges: Vec<Nudge>,
    /// Deciders escalations added so far (also added to every rule's
    /// members), in the order added.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub added: Vec<String>,
}

fn is_expire(action: &OnTimeout) -> bool {
    *action == OnTimeout::Expire
}

/// Why a roster could not be made: a rule its members cannot meet.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct Unsatisfiable {
    pub group: String,
    pub message: String,
}

impl Roster {
    /// Resolve `policy` for a pause requested by `requesters`. A plain
    /// gate (no rules) gets one rule of anyone (`members` empty means
    /// "anyone the served spec's approvers allow"). A rule its members
    /// cannot meet once the requesters are left out is an error naming
    /// it: the quorum is never lowered.
    pub fn resolve(
        policy: &GatePolicy,
        groups: &Groups,
        requesters: Vec<String>,
    ) -> Result<Roster, Unsatisfiable> {
        let mut rules = Vec::with_capacity(policy.rules.len());
        for rule in &policy.rules {
            let Some(members) = groups.get(&rule.group) else {
                return Err(Unsatisfiable {
                    group: rule.group.clone(),
                    message: format!("group {:?} is not defined", rule.group),
                });
            };
            rules.push(RosterRule {
                group: rule.group.clone(),
                min: rule.min,
                members: members.clone(),
            });
        }
        let roster = Roster {
            rules,
            reject: policy.reject,
            allow_self_approval: policy.self_approval_allowed(),
            voter_counts_once: policy.voter_counts_once,
            require_reason: policy.require_reason,
            requesters,
            revised_payload: None,
            on_timeout: policy.on_timeout,
            nudges: Vec::new(),
            added: Vec::new(),
        };
        roster.check_satisfiable()?;
        Ok(roster)
    }

    /// Every rule can still be met by the members who may vote.
    pub fn check_satisfiable(&self) -> Result<(), Unsatisfiable> {
        let voters: Vec<&str> = self.eligible_members().collect();
        let counted = self.assign(&voters);
        for (rule, got) in self.rules.iter().zip(counted.per_rule.iter()) {
            if (got.len() as u32) < rule.min {
                let excluded: Vec<&str> = rule
                    .members
                    .iter()
                    .filter(|m| !self.may_vote(m))
                    .map(String::as_str)
                    .collect();
                let mut message = format!(
                    "rule {} of {} can never be met: it needs {} vote(s) and at most {} member(s) can give one",
                    rule.group,
                    rule.min,
                    rule.min,
                    got.len()
                );
                if !excluded.is_empty() {
                    message.push_str(&format!(
                        " ({} started or edited this run and may not vote on it: separation of duties; allow_self_approval: true opts out)",
                        excluded.join(", ")
                    ));
                } else if self.voter_counts_once && self.rules.len() > 1 {
                    message.push_str(" (a voter counts toward one rule only: voter_counts_once)");
                }
                return Err(Unsatisfiable {
                    group: rule.group.clone(),
                    message,
                });
            }
        }
        Ok(())
    }

    /// Whether `voter` is not barred as a requester (the one decider of a
    /// server without tokens never is: see `separation.rs`).
    fn may_vote(&self, voter: &str) -> bool {
        self.allow_self_approval
            || voter == LOCAL_DECIDER
            || !self.requesters.iter().any(|r| r == voter)
    }

    /// Whether `voter` is a member of any rule's group.
    /// A roster without rules (a plain gate that bars its requesters) has
    /// no groups: anyone the served spec's approvers allow is a member.
    pub fn is_member(&self, voter: &str) -> bool {
        self.rules.is_empty()
            || self
                .rules
                .iter()
                .any(|r| r.members.iter().any(|m| m == voter))
    }

    /// Members of any rule who may vote, each once, in rule order.
    fn eligible_members(&self) -> impl Iterator<Item = &str> {
        let mut seen = BTreeSet::new();
        self.rules
            .iter()
            .flat_map(|r| r.members.iter())
            .map(String::as_str)
            .filter(move |m| seen.insert(*m))
            .filter(|m| self.may_vote(m))
    }

    /// Count `voters` (approvals) toward the rules: with
    /// `voter_counts_once`, the assignment that fills the most rule slots
    /// (a voter in two groups counts where needed); otherwise each voter
    /// counts toward every rule whose group has them. Order-independent.
    fn assign(&self, voters: &[&str]) -> Assignment {
        let mut per_rule: Vec<Vec<String>> = vec![Vec::new(); self.rules.len()];
        if !self.voter_counts_once {
            for (i, rule) in self.rules.iter().enumerate() {
                for voter in voters {
                    if rule.members.iter().any(|m| m == voter)
                        && (per_rule[i].len() as u32) < rule.min
                    {
                        per_rule[i].push(voter.to_string());
                    }
                }
            }
            return Assignment { per_rule };
        }
        // Bipartite matching of voters to rule slots (rule i has `min`
        // slots), by augmenting paths: sizes are a handful of people.
        let mut slot_of: BTreeMap<&str, usize> = BTreeMap::new();
        let mut holder: Vec<Vec<&str>> = vec![Vec::new(); self.rules.len()];
        for voter in voters {
            let mut visited = vec![false; self.rules.len()];
            self.augment(voter, &mut visited, &mut slot_of, &mut holder);
        }
        for (i, held) in holder.into_iter().enumerate() {
            per_rule[i] = held.into_iter().map(str::to_string).collect();
        }
        Assignment { per_rule }
    }

    fn augment<'v>(
        &self,
        voter: &'v str,
        visited: &mut [bool],
        slot_of: &mut BTreeMap<&'v str, usize>,
        holder: &mut [Vec<&'v str>],
    ) -> bool {
        for (i, rule) in self.rules.iter().enumerate() {
            if visited[i] || !rule.members.iter().any(|m| m == voter) {
                continue;
            }
            visited[i] = true;
            if (holder[i].len() as u32) < rule.min {
                holder[i].push(voter);
                slot_of.insert(voter, i);
                return true;
            }
            // Full: can one of its holders move to another rule?
            for j in 0..holder[i].len() {
                let other = holder[i][j];
                if self.augment(other, visited, slot_of, holder) {
                    // `other` now also holds a slot elsewhere; free this one.
                    holder[i].remove(j);
                    holder[i].push(voter);
                    slot_of.insert(voter, i);
                    return true;
                }
            }
        }
        false
    }

    /// The progress of `votes` (the ledger, superseded votes included)
    /// against the rules.
    pub fn tally(&self, votes: &[Vote]) -> Tally {
        let live: Vec<&Vote> = votes.iter().filter(|v| !v.superseded).collect();
        let approvers: Vec<&str> = live
            .iter()
            .filter(|v| v.decision == VoteDecision::Approve && self.may_vote(&v.voter))
            .map(|v| v.voter.as_str())
            .collect();
        let rejecters: Vec<&str> = live
            .iter()
            .filter(|v| v.decision == VoteDecision::Reject)
            .map(|v| v.voter.as_str())
            .collect();
        let counted = self.assign(&approvers);
        let voted: BTreeSet<&str> = live.iter().map(|v| v.voter.as_str()).collect();
        let rules: Vec<RuleProgress> = self
            .rules
            .iter()
            .zip(counted.per_rule)
            .map(|(rule, counted)| RuleProgress {
                group: rule.group.clone(),
                min: rule.min,
                may_still_vote: rule
                    .members
                    .iter()
                    .filter(|m| !voted.contains(m.as_str()) && self.may_vote(m))
                    .cloned()
                    .collect(),
                counted,
            })
            .collect();
        let complete = rules.iter().all(|r| r.counted.len() as u32 >= r.min);
        let outcome = if !rejecters.is_empty()
            && (self.reject == RejectWhen::Any || !self.reachable(&approvers, &voted))
        {
            TallyOutcome::Rejected
        } else if complete {
            TallyOutcome::Approved
        } else {
            TallyOutcome::Open
        };
        Tally { rules, outcome }
    }

    /// Whether the approvals so far and the members who have not voted
    /// yet could still meet every rule.
    fn reachable(&self, approvers: &[&str], voted: &BTreeSet<&str>) -> bool {
        let mut possible: Vec<&str> = approvers.to_vec();
        possible.extend(self.eligible_members().filter(|m| !voted.contains(m)));
        let counted = self.assign(&possible);
        self.rules
            .iter()
            .zip(counted.per_rule.iter())
            .all(|(rule, got)| got.len() as u32 >= rule.min)
    }

    /// The payload the gate asks about now: the last edit, or `original`.
    pub fn current_payload<'a>(&'a self, original: &'a Value) -> &'a Value {
        self.revised_payload.as_ref().unwrap_or(original)
    }

    /// The decision the gate settles with if a vote of `choice` settles
    /// it: a reject rejects; an approval approves the payload the gate asks
    /// about now (a modify's edit, or an earlier vote's edit, settles as
    /// MODIFIED with it). What a decider plans the settlement's write for
    /// before the vote is counted.
    pub fn settles_as(&self, choice: &VoteChoice) -> Decision {
        let reason = choice.reason.clone();
        match (choice.decision, &choice.payload, &self.revised_payload) {
            (VoteDecision::Reject, _, _) => Decision::Reject { reason },
            (VoteDecision::Modify, Some(payload), _) | (_, _, Some(payload)) => Decision::Modify {
                payload: payload.clone(),
                reason,
            },
            _ => Decision::Approve { reason },
        }
    }

    /// What one more vote does (see [`Cast`]), given the ledger so far.
    /// `key` names the record in errors.
    pub fn cast(
        &self,
        key: &str,
        ballot: &BallotVote,
        votes: &[Vote],
    ) -> Result<Cast, ApprovalError> {
        let voter = ballot.voter.as_str();
        let choice = &ballot.choice;
        if !self.is_member(voter) {
            return Err(ApprovalError::NotInGroups {
                key: key.into(),
                voter: voter.into(),
                groups: self.rules.iter().map(|r| r.group.clone()).collect(),
            });
        }
        if !self.may_vote(voter) {
            return Err(ApprovalError::SelfApproval {
                key: key.into(),
                voter: voter.into(),
                asked_by: self.requesters.clone(),
            });
        }
        if let Some(earlier) = votes.iter().find(|v| !v.superseded && v.voter == voter) {
            return Err(ApprovalError::AlreadyVoted {
                key: key.into(),
                voter: voter.into(),
                decision: earlier.decision,
            });
        }
        if self.require_reason
            && choice.decision != VoteDecision::Approve
            && choice.reason.as_deref().is_none_or(|r| r.trim().is_empty())
        {
            return Err(ApprovalError::ReasonRequired { key: key.into() });
        }
        let mut roster = self.clone();
        let mut ledger: Vec<Vote> = votes.to_vec();
        let supersedes = choice.decision == VoteDecision::Modify;
        if supersedes {
            for vote in ledger.iter_mut() {
                vote.superseded = true;
            }
            roster.revised_payload = choice.payload.clone();
            if !roster.requesters.iter().any(|r| r == voter) {
                roster.requesters.push(voter.to_string());
            }
        }
        // A modify counts as its author's approval of the edit only where
        // authors may approve their own.
        let counts_as = match choice.decision {
            VoteDecision::Modify if roster.allow_self_approval => VoteDecision::Approve,
            other => other,
        };
        let probe = Vote {
            decision: counts_as,
            ..ballot.to_vote(0, None)
        };
        ledger.push(probe);
        let tally = roster.tally(&ledger);
        let rule = if counts_as == VoteDecision::Approve {
            tally
                .rules
                .iter()
                .find(|r| r.counted.iter().any(|c| c == voter))
                .map(|r| r.group.clone())
        } else {
            None
        };
        let settles = match tally.outcome {
            TallyOutcome::Open => None,
            TallyOutcome::Rejected => Some(Decision::Reject {
                reason: choice.reason.clone(),
            }),
            TallyOutcome::Approved => Some(roster.settles_as(choice)),
        };
        Ok(Cast {
            rule,
            supersedes,
            roster: supersedes.then_some(roster),
            tally,
            settles,
        })
    }
}

/// Voters counted per rule.
struct Assignment {
    per_rule: Vec<Vec<String>>,
}

/// One rule's progress.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RuleProgress {
    pub group: String,
    pub min: u32,
    /// The voters whose approval counts toward this rule.
    pub counted: Vec<String>,
    /// Members who have not voted and may.
    pub may_still_vote: Vec<String>,
}

impl RuleProgress {
    /// "finance 1 of 2".
    pub fn summary(&self) -> String {
        format!("{} {} of {}", self.group, self.counted.len(), self.min)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TallyOutcome {
    Open,
    Approved,
    Rejected,
}

/// The votes so far against the rules.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Tally {
    pub rules: Vec<RuleProgress>,
    pub outcome: TallyOutcome,
}

impl Tally {
    /// "finance 1 of 2; security 0 of 1".
    pub fn summary(&self) -> String {
        self.rules
            .iter()
            .map(RuleProgress::summary)
            .collect::<Vec<_>>()
            .join("; ")
    }
}

crate::named_enum! {
    /// What a vote says.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
    #[serde(rename_all = "snake_case")]
    pub enum VoteDecision {
        Approve = "approve",
        Reject = "reject",
        /// Approve with an edited payload: supersedes the votes cast on the
        /// payload before it, and the gate asks again.
        Modify = "modify",
    }
}

impl VoteDecision {
    pub fn of(decision: &Decision) -> VoteDecision {
        match decision {
            Decision::Approve { .. } => VoteDecision::Approve,
            Decision::Reject { .. } => VoteDecision::Reject,
            Decision::Modify { .. } => VoteDecision::Modify,
        }
    }
}

/// What a vote says, through what, and on which payload: the part of a
/// vote that is the voter's own choice, beside who voted, when and with
/// what input (which a claim holds too).
#[derive(Debug, Clone, PartialEq)]
pub struct VoteChoice {
    pub decision: VoteDecision,
    pub reason: Option<String>,
    /// The edit of a modify.
    pub payload: Option<Value>,
    pub channel: Channel,
    /// The digest of the payload the voter was shown (or, when they sent
    /// none, of the payload the decider read).
    pub payload_digest: String,
}

/// One vote as asked for: who cast which [`VoteChoice`], when.
#[derive(Debug, Clone, PartialEq)]
pub struct BallotVote {
    pub voter: String,
    pub choice: VoteChoice,
    /// The approver's input, as checked against the gate's form.
    pub input: Option<Value>,
    pub at: DateTime<Utc>,
}

impl BallotVote {
    /// The ledger entry this ballot becomes.
    pub fn to_vote(&self, seq: u32, rule: Option<String>) -> Vote {
        let choice = &self.choice;
        Vote {
            seq,
            voter: self.voter.clone(),
            rule,
            decision: choice.decision,
            reason: choice.reason.clone(),
            payload: choice.payload.clone(),
            channel: choice.channel,
            payload_digest: choice.payload_digest.clone(),
            input: self.input.clone(),
            superseded: false,
            at: self.at,
        }
    }
}

/// One entry of a gate's ledger of votes (`GET /approvals/{key}/votes`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Vote {
    /// 1, 2, ... per key, in the order the votes were cast.
    pub seq: u32,
    pub voter: String,
    /// The rule the vote counted toward when cast (approvals only).
    pub rule: Option<String>,
    pub decision: VoteDecision,
    pub reason: Option<String>,
    /// The edited payload of a modify.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub payload: Option<Value>,
    pub channel: Channel,
    /// `sha256:` + hex of the payload the vote was cast on.
    pub payload_digest: String,
    /// The approver's input given with the vote (a gate with a `form:`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input: Option<Value>,
    /// A later modify replaced the payload this vote was cast on: kept for
    /// the audit, no longer counted.
    pub superseded: bool,
    pub at: DateTime<Utc>,
}

/// What one more vote does.
#[derive(Debug, Clone, PartialEq)]
pub struct Cast {
    /// The rule the vote counts toward, if it counts.
    pub rule: Option<String>,
    /// A modify: every earlier vote is superseded.
    pub supersedes: bool,
    /// The roster to store instead of the current one (a modify revised
    /// the payload and made its author a requester).
    pub roster: Option<Roster>,
    /// The votes, this one included, against the rules.
    pub tally: Tally,
    /// The decision the gate settles with, when this vote settles it.
    pub settles: Option<Decision>,
}

/// `sha256:` + hex of the canonical JSON (keys sorted, compact) of a
/// payload: what a decision sends to say which payload its voter saw.
pub fn payload_digest(payload: &Value) -> String {
    let text = crate::domain::spec::canonical_text(payload);
    format!(
        "sha256:{}",
        crate::support::hex::encode(&Sha256::digest(text.as_bytes()))
    )
}

#[cfg(test)]
impl Roster {
    /// A roster for tests: `rules` as (group, min, members), `requesters`
    /// barred (separation of duties on), every other setting as a gate
    /// with rules has it by default.
    pub(crate) fn sample(rules: &[(&str, u32, &[&str])], requesters: &[&str]) -> Roster {
        Roster {
            rules: rules
                .iter()
                .map(|(group, min, members)| RosterRule {
                    group: group.to_string(),
                    min: *min,
                    members: members.iter().map(|m| m.to_string()).collect(),
                })
                .collect(),
            reject: RejectWhen::Any,
            allow_self_approval: false,
            voter_counts_once: true,
            require_reason: false,
            requesters: requesters.iter().map(|r| r.to_string()).collect(),
            revised_payload: None,
            on_timeout: OnTimeout::Expire,
            nudges: Vec::new(),
            added: Vec::new(),
        }
    }
}

mod nudges;
pub use nudges::{Nudge, NudgeKind, schedule};
mod requests;
pub use requests::{RequestField, RequestLimits};
mod separation;
pub use separation::{
    LOCAL_DECIDER, RESERVED_NAMES, barred_as_requester, requesters_from_trigger, requesters_of,
};

#[cfg(test)]
mod tests;
