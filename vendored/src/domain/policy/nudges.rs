//! What a waiting gate does by itself before its time runs out (DESIGN
//! §13): reminders (`remind: [50%, 90%]`, fractions of its time) and
//! escalations (`escalate: [{ after: 4h, add: [security] }]`, which add
//! those groups' members to who may decide, without resetting a vote).
//!
//! Both are worked out when the run pauses, with the groups' members as
//! they are then, and stored in the gate's [`Roster`] as a list of
//! [`Nudge`]s in time order. The sweep takes the due ones
//! ([`Roster::take_due`]) in one conditional write per gate, so each
//! happens once across processes; each is an event on the run
//! (`approval_reminded`, `approval_escalated`), which the notifications
//! deliver.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::{GatePolicy, Groups, Roster, Unsatisfiable};
use crate::domain::events::EventKind;

/// One thing a waiting gate does at a given time.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Nudge {
    pub at: DateTime<Utc>,
    #[serde(flatten)]
    pub kind: NudgeKind,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "nudge", rename_all = "snake_case")]
pub enum NudgeKind {
    /// `percent` of the gate's time has passed.
    Remind { percent: u8 },
    /// `groups`' `members` (as they were when the run paused) may decide
    /// from now on.
    Escalate {
        groups: Vec<String>,
        members: Vec<String>,
    },
}

/// The reminders and escalations of a gate that paused at `created_at`
/// and runs out at `expires_at`, in time order (a reminder before an
/// escalation due at the same time). Those due at or after `expires_at`
/// never happen and are left out. An escalation to a group that is not
/// defined is an error naming it.
pub fn schedule(
    policy: &GatePolicy,
    groups: &Groups,
    created_at: DateTime<Utc>,
    expires_at: DateTime<Utc>,
) -> Result<Vec<Nudge>, Unsatisfiable> {
    let ttl = (expires_at - created_at).to_std().unwrap_or_default();
    let mut nudges = Vec::with_capacity(policy.remind.len() + policy.escalate.len());
    for &percent in &policy.remind {
        let after = ttl.mul_f64(f64::from(percent) / 100.0);
        nudges.push(Nudge {
            at: crate::support::time::add(created_at, after),
            kind: NudgeKind::Remind { percent },
        });
    }
    for escalation in &policy.escalate {
        let mut members: Vec<String> = Vec::new();
        for group in &escalation.add {
            let Some(of_group) = groups.get(group) else {
                return Err(Unsatisfiable {
                    group: group.clone(),
                    message: format!("escalate: group {group:?} is not defined"),
                });
            };
            for member in of_group {
                if !members.contains(member) {
                    members.push(member.clone());
                }
            }
        }
        nudges.push(Nudge {
            at: crate::support::time::add(created_at, escalation.after),
            kind: NudgeKind::Escalate {
                groups: escalation.add.clone(),
                members,
            },
        });
    }
    nudges.retain(|n| n.at < expires_at);
    // Stable: reminders were pushed first.
    nudges.sort_by_key(|n| n.at);
    Ok(nudges)
}

impl Roster {
    /// When the next reminder or escalation is due, if one is left.
    pub fn next_nudge_at(&self) -> Option<DateTime<Utc>> {
        self.nudges.first().map(|n| n.at)
    }

    /// Take the nudges due at `now` off the list, in time order, and make
    /// each escalation's members deciders: added to every rule's members
    /// (they may count toward any rule; no minimum changes) and to
    /// [`Roster::added`] (which a gate without rules checks besides
    /// `approvals.approvers`). Votes already cast stay as they are.
    pub fn take_due(&mut self, now: DateTime<Utc>) -> Vec<Nudge> {
        let due = self.nudges.partition_point(|n| n.at <= now);
        let taken: Vec<Nudge> = self.nudges.drain(..due).collect();
        for nudge in &taken {
            if let NudgeKind::Escalate { members, .. } = &nudge.kind {
                for member in members {
                    if !self.added.contains(member) {
                        self.added.push(member.clone());
                    }
                    for rule in &mut self.rules {
                        if !rule.members.contains(member) {
                            rule.members.push(member.clone());
                        }
                    }
                }
            }
        }
        taken
    }
}

impl Nudge {
    /// The event on the run of gate `key` (at step `step`, running out at
    /// `expires_at`) that says this nudge happened.
    pub fn event(&self, key: &str, step: &str, expires_at: DateTime<Utc>) -> EventKind {
        match &self.kind {
            NudgeKind::Remind { percent } => EventKind::ApprovalReminded {
                key: key.to_string(),
                step: step.to_string(),
                percent: *percent,
                expires_at,
            },
            NudgeKind::Escalate { groups, members } => EventKind::ApprovalEscalated {
                key: key.to_string(),
                step: step.to_string(),
                groups: groups.clone(),
                added: members.clone(),
            },
        }
    }
}
