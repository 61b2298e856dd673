//! Notices: what the outbox holds (DESIGN §14). A change to a pending
//! approval (a pause, a vote, a decision, an expiry, a cancel, a reminder,
//! an escalation) writes its notices in the same store transaction as the
//! change itself, one per channel and recipient, so a crash can neither
//! lose a notice nor send one for a change that did not commit. Delivery
//! workers then send each at least once, with an id a receiver can
//! de-duplicate on.
//!
//! Everything here is pure: which notices a change writes
//! ([`notices_for`]) and what their body says ([`NoticeBody`]) are decided
//! once, for every store, from the event and the record as the transaction
//! holds them. Where a notice goes is stored as the spec wrote it (a
//! `${NAME}` reference stays a reference, resolved at send time), so no
//! secret ever reaches an outbox row.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::domain::events::{Event, EventKind};
use crate::domain::pending_approval::{ApprovalRecord, ApprovalStatus};

crate::named_enum! {
    /// What happened to an approval, as a notice names it: the `type` of
    /// a webhook body (Standard Webhooks' dotted event names), and what a
    /// channel's `events:` filter lists.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
    pub enum NoticeEvent {
        /// A run paused at a gate: the approval waits for a decision.
        #[serde(rename = "approval.requested")]
        Requested = "approval.requested",
        /// A vote on a gate that counts votes did not settle it yet.
        #[serde(rename = "approval.voted")]
        Voted = "approval.voted",
        /// Approved (by a decision, the votes, or `on_timeout: approve`),
        /// edits included.
        #[serde(rename = "approval.approved")]
        Approved = "approval.approved",
        /// Rejected (by a decision, the votes, or `on_timeout: reject`).
        #[serde(rename = "approval.rejected")]
        Rejected = "approval.rejected",
        /// Expired undecided.
        #[serde(rename = "approval.expired")]
        Expired = "approval.expired",
        /// Its run was cancelled while it waited.
        #[serde(rename = "approval.cancelled")]
        Cancelled = "approval.cancelled",
        /// A reminder (`remind:`) while it waits.
        #[serde(rename = "approval.reminded")]
        Reminded = "approval.reminded",
        /// An escalation (`escalate:`): more people may decide it now.
        #[serde(rename = "approval.escalated")]
        Escalated = "approval.escalated",
    }
}

crate::named_enum! {
    /// How a notice is sent.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
    #[serde(rename_all = "snake_case")]
    pub enum NoticeChannel {
        /// An outbound webhook, signed in the Standard Webhooks format.
        Webhook = "webhook",
        /// A mail to one decider, over SMTP.
        Email = "email",
        /// The approval's Slack message: posted once, then updated.
        Slack = "slack",
    }
}

crate::named_enum! {
    /// Where a notice is in its delivery.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
    #[serde(rename_all = "snake_case")]
    pub enum NoticeStatus {
        /// Not sent yet; due at its `next_at`.
        Pending = "pending",
        /// Tried and failed; retried at its `next_at`.
        Failed = "failed",
        /// Delivered (a webhook's 2xx, the SMTP server's acceptance,
        /// Slack's ok).
        Sent = "sent",
        /// Failed for the whole retry window, or refused for good: held
        /// for an operator (`tollgate notifications retry`).
        Dead = "dead",
    }
}

impl NoticeStatus {
    /// Whether a worker may still send it.
    pub fn is_due_state(self) -> bool {
        matches!(self, NoticeStatus::Pending | NoticeStatus::Failed)
    }
}

impl NoticeEvent {
    /// The notice an event of a pending approval calls for, if any.
    /// `record` is the approval as the same transaction leaves it.
    pub fn of(kind: &EventKind, record: &ApprovalRecord) -> Option<NoticeEvent> {
        Some(match kind {
            EventKind::AwaitingApproval { .. } => NoticeEvent::Requested,
            EventKind::ApprovalVote { .. } if record.status == ApprovalStatus::Pending => {
                NoticeEvent::Voted
            }
            // The vote that settles a gate is followed by its
            // `approval_resolved`, which notifies the outcome.
            EventKind::ApprovalVote { .. } => return None,
            // The record's status says what the claim settled, whatever
            // decided it (a person, the votes, a timeout).
            EventKind::ApprovalResolved { .. } => return Self::of_status(record.status),
            EventKind::RunExpired { .. } => NoticeEvent::Expired,
            EventKind::RunCancelled { .. } => NoticeEvent::Cancelled,
            EventKind::ApprovalReminded { .. } => NoticeEvent::Reminded,
            EventKind::ApprovalEscalated { .. } => NoticeEvent::Escalated,
            _ => return None,
        })
    }

    fn of_status(status: ApprovalStatus) -> Option<NoticeEvent> {
        match status {
            ApprovalStatus::Approved | ApprovalStatus::Modified => Some(NoticeEvent::Approved),
            ApprovalStatus::Rejected => Some(NoticeEvent::Rejected),
            ApprovalStatus::Expired => Some(NoticeEvent::Expired),
            ApprovalStatus::Cancelled => Some(NoticeEvent::Cancelled),
            ApprovalStatus::Pending => None,
        }
    }
}

/// Where one gate's notices go, as resolved at its pause from the spec's
/// `approvals.notify` and the gate's own `notify:` (DESIGN §14). Stored
/// with the approval, values as written: `${NAME}` references stay
/// references, resolved when a notice is sent.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NoticeRoutes {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub webhooks: Vec<WebhookRoute>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub email: Option<EmailRoute>,
    /// The Slack channel as written, when Slack is on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slack: Option<String>,
}

impl NoticeRoutes {
    pub fn is_empty(&self) -> bool {
        self.webhooks.is_empty() && self.email.is_none() && self.slack.is_none()
    }
}

/// One outbound webhook endpoint, as written.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WebhookRoute {
    /// The URL (normally a `${NAME}` reference).
    pub url: String,
    /// The signing secret's reference (`${NAME}`).
    pub secret: String,
    /// The events it receives; `None`: every event.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub events: Option<Vec<NoticeEvent>>,
}

/// Mail to the deciders, as written.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EmailRoute {
    /// The SMTP server (normally a `${NAME}` reference: it holds the
    /// credentials).
    #[serde(default)]
    pub smtp_url: String,
    /// The sender's address.
    #[serde(default)]
    pub from: String,
    /// The deciders mail can reach: name (an API-token name, as approvers
    /// are written) -> address (or its `${NAME}` reference). A decider
    /// whose name is itself an address needs no entry.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub to: BTreeMap<String, String>,
    /// `approvals.approvers` as in force at the pause: who may decide a
    /// gate without rules (`None`: anyone).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approvers: Option<Vec<String>>,
    /// The events mailed; `None`: every event.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub events: Option<Vec<NoticeEvent>>,
}

fn wants(events: &Option<Vec<NoticeEvent>>, event: NoticeEvent) -> bool {
    events.as_ref().is_none_or(|list| list.contains(&event))
}

/// One notice to write: a row of the outbox.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Notice {
    /// UUID v4. The webhook's `webhook-id` and every channel's
    /// de-duplication id: the same across retries.
    pub id: String,
    pub key: String,
    pub run_id: String,
    pub event: NoticeEvent,
    pub channel: NoticeChannel,
    /// Where it goes, as written: a webhook's URL reference, a decider's
    /// name (email), the Slack channel.
    pub target: String,
    pub body: NoticeBody,
    pub created_at: DateTime<Utc>,
}

/// The notices `event` calls for on `record`, as the transaction that
/// writes the event leaves the record: one per webhook that wants the
/// event, one per decider mail reaches, one for Slack. Empty when the
/// gate has no routes or the event is not one a notice is for.
pub fn notices_for(
    record: &ApprovalRecord,
    routes: &NoticeRoutes,
    event: &Event,
    new_id: &mut dyn FnMut() -> String,
) -> Vec<Notice> {
    if routes.is_empty() {
        return Vec::new();
    }
    let Some(notice_event) = NoticeEvent::of(&event.kind, record) else {
        return Vec::new();
    };
    let body = NoticeBody::new(notice_event, record, event);
    let mut out = Vec::new();
    let mut push = |channel: NoticeChannel, target: &str| {
        out.push(Notice {
            id: new_id(),
            key: record.key.clone(),
            run_id: record.run_id.clone(),
            event: notice_event,
            channel,
            target: target.to_string(),
            body: body.clone(),
            created_at: event.at,
        })
    };
    for hook in &routes.webhooks {
        if wants(&hook.events, notice_event) {
            push(NoticeChannel::Webhook, &hook.url);
        }
    }
    if let Some(email) = &routes.email
        && wants(&email.events, notice_event)
    {
        for name in mail_recipients(record, email, &event.kind) {
            push(NoticeChannel::Email, &name);
        }
    }
    if let Some(channel) = &routes.slack {
        push(NoticeChannel::Slack, channel);
    }
    out
}

/// The deciders a mail goes to: everyone mail can reach (an entry of
/// `to`, or a roster member whose name is an address) who may decide the
/// approval now. An escalation mails only the people it added.
fn mail_recipients(record: &ApprovalRecord, email: &EmailRoute, kind: &EventKind) -> Vec<String> {
    let mut names: Vec<String> = email.to.keys().cloned().collect();
    if let Some(roster) = &record.roster {
        let members = roster
            .rules
            .iter()
            .flat_map(|rule| rule.members.iter())
            .chain(roster.added.iter());
        names.extend(members.filter(|m| is_address(m)).cloned());
    }
    if let Some(approvers) = &email.approvers {
        names.extend(approvers.iter().filter(|m| is_address(m)).cloned());
    }
    names.sort();
    names.dedup();
    // The route has the approvers, not the spec: requesters are left out
    // (on a gate that opts out of separation of duties too, so a
    // requester may miss a mail, never get one they cannot act on).
    let deciders = crate::domain::links::Deciders::approvers(email.approvers.as_deref());
    names.retain(|name| crate::domain::links::may_decide_record(record, deciders, name));
    if let EventKind::ApprovalEscalated { added, .. } = kind {
        names.retain(|name| added.contains(name));
    }
    names
}

/// Whether a decider's name is a mail address (`alice@example.com`).
pub fn is_address(name: &str) -> bool {
    match name.split_once('@') {
        Some((local, domain)) => {
            !local.is_empty() && domain.contains('.') && !domain.ends_with('.')
        }
        None => false,
    }
}

/// What a notice says, the same for every channel: the body of a webhook
/// (`{"type", "timestamp", "data"}`, Standard Webhooks' shape) and what a
/// mail or a Slack message is written from. It never holds a secret or the
/// full payload: a digest and a short preview of it. A signed link is
/// added when it is sent, never stored.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NoticeBody {
    #[serde(rename = "type")]
    pub event: NoticeEvent,
    pub timestamp: DateTime<Utc>,
    pub data: NoticeData,
}

/// The approval as the notice describes it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NoticeData {
    pub key: String,
    pub run_id: String,
    pub agent: String,
    pub step: String,
    pub phase: crate::domain::pending_approval::Phase,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    pub status: ApprovalStatus,
    pub expires_at: DateTime<Utc>,
    /// `sha256:` + hex of the canonical JSON of the payload asked about.
    pub payload_digest: String,
    /// Pretty JSON of the payload, cut to [`PAYLOAD_PREVIEW_CHARS`].
    pub payload_preview: String,
    /// Each rule's progress ("finance 1 of 2; security 0 of 1"), on a
    /// gate that counts votes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub progress: Option<String>,
    /// Who decided (a settled approval), voted (a vote), or cancelled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub by: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// A reminder: how much of the approval's time has passed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub percent: Option<u8>,
    /// An escalation: the people who may decide from now on.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub added: Vec<String>,
    /// A signed link to decide, bound to the recipient when there is one;
    /// added at send time when links are on, never stored.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub link: Option<String>,
}

/// The longest payload preview a notice carries, in characters.
pub const PAYLOAD_PREVIEW_CHARS: usize = 500;

impl NoticeBody {
    pub fn new(event: NoticeEvent, record: &ApprovalRecord, from: &Event) -> NoticeBody {
        let payload = record.current_payload();
        let (by, reason, percent, added) = match &from.kind {
            EventKind::ApprovalResolved {
                decided_by, reason, ..
            } => (Some(decided_by.clone()), reason.clone(), None, Vec::new()),
            EventKind::ApprovalVote { voter, reason, .. } => {
                (Some(voter.clone()), reason.clone(), None, Vec::new())
            }
            EventKind::RunCancelled { by, reason } => {
                (Some(by.clone()), reason.clone(), None, Vec::new())
            }
            EventKind::ApprovalReminded { percent, .. } => (None, None, Some(*percent), Vec::new()),
            EventKind::ApprovalEscalated { added, .. } => (None, None, None, added.clone()),
            _ => (None, None, None, Vec::new()),
        };
        NoticeBody {
            event,
            timestamp: from.at,
            data: NoticeData {
                key: record.key.clone(),
                run_id: record.run_id.clone(),
                agent: record.agent_id.clone(),
                step: record.step_id.clone(),
                phase: record.phase,
                message: record.message.clone(),
                status: record.status,
                expires_at: record.expires_at,
                payload_digest: crate::domain::policy::payload_digest(payload),
                payload_preview: payload_preview(payload),
                progress: progress(record, &from.kind),
                by,
                reason,
                percent,
                added,
                link: None,
            },
        }
    }
}

/// Each rule's progress: as a vote left it, or (a pause) none counted yet.
/// Other notices leave it out; the approval's page has the ledger.
fn progress(record: &ApprovalRecord, kind: &EventKind) -> Option<String> {
    match kind {
        EventKind::ApprovalVote { progress, .. } => Some(progress.clone()),
        EventKind::AwaitingApproval { .. } => record
            .roster
            .as_ref()
            .filter(|roster| !roster.rules.is_empty())
            .map(|roster| roster.tally(&[]).summary()),
        _ => None,
    }
}

/// Pretty JSON, at most [`PAYLOAD_PREVIEW_CHARS`] characters, marked when cut.
pub fn payload_preview(payload: &Value) -> String {
    let pretty = serde_json::to_string_pretty(payload).unwrap_or_else(|_| payload.to_string());
    match pretty.char_indices().nth(PAYLOAD_PREVIEW_CHARS) {
        Some((cut, _)) => format!("{}\n… (truncated)", &pretty[..cut]),
        None => pretty,
    }
}
