//! The pending-approval record, its key, scrubbing, and the decision rules.
//!
//! A record is written when a run pauses and stays after the decision: it is
//! the audit trail (who decided what, and when). Deciding is one conditional
//! write in the store (the claim); exactly one caller in any process wins.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use thiserror::Error;

use crate::domain::spec::SpecHash;

mod origin;
pub use origin::ApprovalOrigin;

crate::named_enum! {
    /// Lifecycle of a record. Stored upper-case.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
    #[serde(rename_all = "SCREAMING_SNAKE_CASE")]
    pub enum ApprovalStatus {
        Pending = "PENDING",
        Approved = "APPROVED",
        Rejected = "REJECTED",
        Modified = "MODIFIED",
        Expired = "EXPIRED",
        /// Its run was cancelled while it waited (`decided_by` is who
        /// cancelled, `decision_data` the reason).
        Cancelled = "CANCELLED",
    }
}

impl ApprovalStatus {
    /// The verb a person would use in a sentence ("approved by alice").
    pub fn past_tense(self) -> &'static str {
        match self {
            ApprovalStatus::Pending => "pending",
            ApprovalStatus::Approved => "approved",
            ApprovalStatus::Rejected => "rejected",
            ApprovalStatus::Modified => "approved with changes",
            ApprovalStatus::Expired => "expired",
            ApprovalStatus::Cancelled => "cancelled",
        }
    }
}

crate::named_enum! {
    /// Where a gate sits relative to its step's work.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
    #[serde(rename_all = "snake_case")]
    pub enum Phase {
        /// Nothing with side effects has happened in the step yet; resuming
        /// re-enters the step and the gate takes the stored decision.
        Before = "before",
        /// The step ran and its output is stored; resuming continues with the
        /// next step.
        After = "after",
    }
}

/// One pending (or decided) approval. Serialized as clients see it (see
/// `origin.rs`): a gate request's `spec_hash` is `null`, and `origin`
/// names the pause's spec hash and step or the request's asker.
#[derive(Debug, Clone, PartialEq)]
pub struct ApprovalRecord {
    /// UUID v4: the correlation key.
    pub key: String,
    pub run_id: String,
    pub agent_id: String,
    /// Full 64-hex spec hash at the time of the pause; empty for a gate
    /// request, which has no spec (read it through
    /// [`ApprovalRecord::paused_under`], which says so).
    pub spec_hash: String,
    pub step_index: usize,
    pub step_id: String,
    pub phase: Phase,
    pub message: Option<String>,
    pub payload: Value,
    /// Step outputs so far (step id -> output).
    pub outputs: Map<String, Value>,
    pub input: crate::support::json_doc::JsonDoc,
    /// Trigger context, scrubbed of credential-like headers.
    pub trigger: Value,
    pub status: ApprovalStatus,
    /// Reject: `{"reason": ...}`. Modify: `{"payload": ..., "reason": ...}`.
    /// An approval or modify on a gate with a `form:` adds `"input": {...}`,
    /// the approver's input as checked.
    pub decision_data: Option<Value>,
    pub decided_by: Option<String>,
    pub decided_at: Option<DateTime<Utc>>,
    pub created_at: DateTime<Utc>,
    pub expires_at: DateTime<Utc>,
    /// The gate's team policy as resolved when the run paused (DESIGN
    /// §13): set when the gate counts votes (it has rules, or bars its
    /// requesters); `None` for a plain gate, which the first allowed
    /// decision settles.
    pub roster: Option<crate::domain::policy::Roster>,
    /// What asked for this approval: a workflow run's pause or a gate
    /// request.
    pub origin: ApprovalOrigin,
}

impl ApprovalRecord {
    /// Whether this is a gate request rather than a workflow run's pause.
    pub fn is_gate_request(&self) -> bool {
        matches!(self.origin, ApprovalOrigin::Request { .. })
    }

    /// The spec hash a pause paused under; `None` for a gate request,
    /// which belongs to no spec version.
    pub fn paused_under(&self) -> Option<&str> {
        match self.origin {
            ApprovalOrigin::Pause => Some(&self.spec_hash),
            ApprovalOrigin::Request { .. } => None,
        }
    }

    /// Whether no spec change stands between this record and the spec
    /// hashed `served`: it paused under that spec, or it is a gate request
    /// (which belongs to no version, so is never stale).
    pub fn is_current_for(&self, served: &str) -> bool {
        self.paused_under().is_none_or(|hash| hash == served)
    }

    /// The payload the gate asks about now: a vote's edit on a gate that
    /// counts votes, else the payload it paused with.
    pub fn current_payload(&self) -> &Value {
        match &self.roster {
            Some(roster) => roster.current_payload(&self.payload),
            None => &self.payload,
        }
    }

    /// The digest of [`ApprovalRecord::current_payload`]: what a decision
    /// carries to say it was made on this payload.
    pub fn payload_digest(&self) -> String {
        crate::domain::policy::payload_digest(self.current_payload())
    }

    /// The reason given with the decision, if any.
    pub fn reason(&self) -> Option<&str> {
        self.decision_data
            .as_ref()
            .and_then(|d| d.get("reason"))
            .and_then(Value::as_str)
    }

    /// The `on_timeout` action that settled this record when its time ran
    /// out, if that is how it was decided (see [`Claim::timeout`]).
    pub fn timed_out(&self) -> Option<crate::domain::policy::OnTimeout> {
        let action = self.decision_data.as_ref()?.get("on_timeout")?.as_str()?;
        crate::domain::policy::OnTimeout::parse(action)
    }

    /// The `on_timeout` its gate takes when its time runs out: the
    /// roster's (stored with the pause), `expire` without one.
    pub fn on_timeout(&self) -> crate::domain::policy::OnTimeout {
        self.roster
            .as_ref()
            .map_or(crate::domain::policy::OnTimeout::Expire, |r| r.on_timeout)
    }

    /// The edited payload of a MODIFIED record.
    pub fn modified_payload(&self) -> Option<&Value> {
        if self.status != ApprovalStatus::Modified {
            return None;
        }
        self.decision_data.as_ref().and_then(|d| d.get("payload"))
    }

    /// The approver's input given with the decision (a gate with a
    /// `form:`), if any.
    pub fn approver_input(&self) -> Option<&Value> {
        self.decision_data.as_ref().and_then(|d| d.get("input"))
    }

    /// The record as `claim` decides it: what the store's claim writes.
    pub fn decided_by_claim(&self, claim: &Claim) -> ApprovalRecord {
        ApprovalRecord {
            status: claim.decision.status(),
            decision_data: claim.decision_data(),
            decided_by: Some(claim.decided_by.clone()),
            decided_at: Some(claim.now),
            ..self.clone()
        }
    }

    /// The payload as decided: the edit for MODIFIED, else the original.
    pub fn effective_payload(&self) -> &Value {
        self.modified_payload().unwrap_or(&self.payload)
    }

    pub fn is_expired_at(&self, now: DateTime<Utc>) -> bool {
        self.expires_at <= now
    }

    /// Whether this record is already decided by `decided_by` with exactly
    /// `decision`: a repeat (a retry after a lost answer) of the decision
    /// that won, answered with the stored outcome instead of
    /// `already_resolved`.
    ///
    /// "The same decision" is the same decider and the same stored
    /// decision: the same kind (approve, modify, reject; an approve is not a
    /// modify, even with a payload equal to the original), the same reason
    /// (both absent, or equal text), and for a modify an equal payload (JSON
    /// equality: key order and whitespace do not matter). Anything else,
    /// including a reject with a different reason, is a different decision.
    pub fn was_decided_as(&self, decision: &Decision, decided_by: &str) -> bool {
        matches!(
            self.status,
            ApprovalStatus::Approved | ApprovalStatus::Rejected | ApprovalStatus::Modified
        ) && self.status == decision.status()
            && self.decided_by.as_deref() == Some(decided_by)
            && strip_input(self.decision_data.clone()) == decision.data()
    }

    /// [`ApprovalRecord::was_decided_as`] for a whole claim: the same
    /// decision by the same decider with the same input.
    pub fn was_claimed_as(&self, claim: &Claim) -> bool {
        self.was_decided_as(&claim.decision, &claim.decided_by)
            && self.decision_data == claim.decision_data()
    }
}

/// Decision data without the approver's input.
fn strip_input(data: Option<Value>) -> Option<Value> {
    match data {
        Some(Value::Object(mut map)) => {
            map.remove("input");
            (!map.is_empty()).then_some(Value::Object(map))
        }
        other => other,
    }
}

/// A fresh correlation key.
pub fn new_key() -> String {
    uuid::Uuid::new_v4().to_string()
}

/// The correlation key of an idempotent request: the same `parts` always
/// give the same key, so concurrent requests with one idempotency key race
/// to insert one row and exactly one of them can. Shaped as a UUID v4 (its
/// 122 free bits from SHA-256), so it reads as any other key.
pub fn derived_key(parts: &[&str]) -> String {
    use sha2::{Digest, Sha256};
    let mut hasher = Sha256::new();
    for part in parts {
        // Length-prefixed: ("ab", "c") and ("a", "bc") differ.
        hasher.update((part.len() as u64).to_be_bytes());
        hasher.update(part.as_bytes());
    }
    let digest = hasher.finalize();
    let mut bytes = [0u8; 16];
    bytes.copy_from_slice(&digest[..16]);
    uuid::Builder::from_random_bytes(bytes)
        .into_uuid()
        .to_string()
}

/// What a person decided.
#[derive(Debug, Clone, PartialEq)]
pub enum Decision {
    Approve {
        reason: Option<String>,
    },
    Reject {
        reason: Option<String>,
    },
    /// Approve with a new payload: edited tool arguments for a tool gate, a
    /// replacement output for an `after` gate.
    Modify {
        payload: Value,
        reason: Option<String>,
    },
}

impl Decision {
    /// The status a successful claim writes.
    pub fn status(&self) -> ApprovalStatus {
        match self {
            Decision::Approve { .. } => ApprovalStatus::Approved,
            Decision::Reject { .. } => ApprovalStatus::Rejected,
            Decision::Modify { .. } => ApprovalStatus::Modified,
        }
    }

    /// The name used in events: approve, reject, modify.
    pub fn name(&self) -> &'static str {
        match self {
            Decision::Approve { .. } => "approve",
            Decision::Reject { .. } => "reject",
            Decision::Modify { .. } => "modify",
        }
    }

    pub fn reason(&self) -> Option<&str> {
        match self {
            Decision::Approve { reason }
            | Decision::Reject { reason }
            | Decision::Modify { reason, .. } => reason.as_deref(),
        }
    }

    /// The JSON kept in `decision_data`.
    pub fn data(&self) -> Option<Value> {
        let mut data = Map::new();
        if let Some(reason) = self.reason() {
            data.insert("reason".into(), Value::String(reason.to_string()));
        }
        if let Decision::Modify { payload, .. } = self {
            data.insert("payload".into(), payload.clone());
        }
        (!data.is_empty()).then_some(Value::Object(data))
    }

    /// A reject is allowed under any spec; approve and modify only under the
    /// spec the run paused with.
    pub fn requires_same_spec(&self) -> bool {
        !matches!(self, Decision::Reject { .. })
    }
}

/// A request to decide one record: the conditional write's parameters.
#[derive(Debug, Clone)]
pub struct Claim {
    pub key: String,
    pub decision: Decision,
    /// The approver's input (a gate with a `form:`), checked against the
    /// form before the claim: kept in `decision_data` as `input`.
    pub input: Option<Value>,
    pub decided_by: String,
    pub now: DateTime<Utc>,
    /// The hash of the spec the run resumes on; checked for approve and
    /// modify (the record's must be the same).
    pub spec_hash: String,
    /// Set when `spec_hash` is an older version than the one the deciding
    /// process serves (`on_spec_change: pin`): said in the
    /// `approval_resolved` event, so the run's events show which version ran.
    pub pinned: bool,
    /// Set when the gate's own time ran out and this claim applies its
    /// `on_timeout` (DESIGN §13): the record must then be overdue rather
    /// than unexpired, and the decision data says which action settled it
    /// (`on_timeout`), so nobody can pass for the timeout by name.
    pub timeout: Option<crate::domain::policy::OnTimeout>,
    /// What the claim's write does to the run besides deciding.
    pub then: AfterClaim,
}

impl Claim {
    /// The JSON the claim stores in `decision_data`: the decision's, for a
    /// timeout the action that settled the gate, and the approver's input
    /// (a gate with a `form:`).
    pub fn decision_data(&self) -> Option<Value> {
        let mut data = self.decision.data();
        if let Some(action) = self.timeout {
            let object = data.get_or_insert_with(|| Value::Object(Map::new()));
            if let Value::Object(fields) = object {
                fields.insert("on_timeout".into(), Value::String(action.as_str().into()));
            }
        }
        if let Some(input) = &self.input {
            let object = data.get_or_insert_with(|| Value::Object(Map::new()));
            if let Value::Object(fields) = object {
                fields.insert("input".into(), input.clone());
            }
        }
        data
    }

    /// The lease the claimer drives the run on under, if it does.
    pub fn lease(&self) -> Option<&crate::domain::run_state::Lease> {
        match &self.then {
            AfterClaim::Drive(lease) => Some(lease),
            AfterClaim::Release | AfterClaim::Finish(_) => None,
        }
    }

    /// When the claim's write also ends the run: the end, and the events
    /// that follow the decision's own (numbered `seq`, `seq + 1`, ...).
    /// `record` is the record as this claim decided it. Every store calls
    /// this inside the claim's write; the end was worked out by the
    /// claimer before the claim, so nothing here reaches back up into the
    /// engine.
    pub fn run_end(
        &self,
        record: &ApprovalRecord,
        seq: u64,
    ) -> Option<(
        crate::domain::run_state::RunEnd,
        Vec<crate::domain::events::Event>,
    )> {
        match &self.then {
            AfterClaim::Finish(finish) => {
                debug_assert_eq!(
                    finish.end.run_id, record.run_id,
                    "a planned end belongs to the decided record's run"
                );
                Some((finish.end.clone(), finish.numbered_from(seq)))
            }
            AfterClaim::Drive(_) | AfterClaim::Release => None,
        }
    }
}

/// What becomes of the run in the claim's write.
#[derive(Debug, Clone, PartialEq)]
pub enum AfterClaim {
    /// The claimer drives the run on: it owns it under this lease from the
    /// claim's commit on.
    Drive(crate::domain::run_state::Lease),
    /// Nobody drives it yet: the run is `running` without a lease, an
    /// orphan the next recovery round of a serving process resumes.
    Release,
    /// The run's end, worked out before the claim, written in the claim's
    /// own transaction: a decision and its run's end are one commit. If the
    /// claim loses, nothing of it is written. The gate API ends a request's
    /// run this way (approve and modify complete it with the decision as
    /// its output, reject rejects it: see `gate::request_finish`), and a
    /// workflow run whose steps after the gate are all pure (see
    /// `AgentRun::claim`).
    Finish(Box<RunFinish>),
}

/// A run's end planned before its claim ([`AfterClaim::Finish`]).
#[derive(Debug, Clone, PartialEq)]
pub struct RunFinish {
    /// Written with `owner: None`: the claim itself is the fence.
    pub end: crate::domain::run_state::RunEnd,
    /// The events between the decision and the end, the end's included, in
    /// order. Their `seq` is assigned by the store (after the decision's
    /// own event), whatever they carry here.
    pub events: Vec<crate::domain::events::Event>,
}

impl RunFinish {
    /// The events numbered from `seq` on.
    pub fn numbered_from(&self, seq: u64) -> Vec<crate::domain::events::Event> {
        self.events
            .iter()
            .zip(seq..)
            .map(|(event, seq)| crate::domain::events::Event {
                seq,
                ..event.clone()
            })
            .collect()
    }
}

/// A pending approval moved, with its run, onto another version of its
/// spec (DESIGN §12: `approvals migrate`, or `on_spec_change: auto` at a
/// decision). One conditional write, like a claim: the record must still
/// be PENDING, unexpired and on `from`; then it takes `to`, its step in
/// that version, and its message and payload as that version renders them,
/// the run takes `to`, and an `approval_migrated` event is appended. A
/// decision and a move racing on one key: exactly one of them goes first,
/// and a decision never lands on the version it was not checked against.
#[derive(Debug, Clone, PartialEq)]
pub struct ApprovalMove {
    pub key: String,
    pub from: String,
    pub to: String,
    /// The gate's step in `to` (the same id, or the one a mapping names).
    pub step_id: String,
    pub step_index: usize,
    pub message: Option<String>,
    pub payload: Value,
    pub by: String,
    /// Steps renamed by the move (old id -> new id).
    pub map: std::collections::BTreeMap<String, String>,
    /// Moved by `auto` at a decision rather than by a migrate.
    pub auto: bool,
    pub now: DateTime<Utc>,
}

impl ApprovalMove {
    /// The `approval_migrated` event the move appends.
    pub fn event(&self, run_id: &str, seq: u64) -> crate::domain::events::Event {
        crate::domain::events::Event {
            run_id: run_id.to_string(),
            seq,
            at: self.now,
            kind: crate::domain::events::EventKind::ApprovalMigrated {
                key: self.key.clone(),
                from: self.from.clone(),
                to: self.to.clone(),
                by: self.by.clone(),
                map: self.map.clone(),
                auto: self.auto,
            },
        }
    }

    /// Explain a move that matched no row, from the record as it is now.
    pub fn explain_failure(&self, record: Option<&ApprovalRecord>) -> ApprovalError {
        let key = self.key.clone();
        match record {
            None => ApprovalError::NotFound { key },
            Some(r) if r.status == ApprovalStatus::Pending && r.is_expired_at(self.now) => {
                ApprovalError::Expired {
                    key,
                    expired_at: r.expires_at,
                }
            }
            Some(r) if r.status == ApprovalStatus::Expired => ApprovalError::Expired {
                key,
                expired_at: r.expires_at,
            },
            Some(r) if r.status != ApprovalStatus::Pending => ApprovalError::AlreadyResolved {
                key,
                status: r.status,
                decided_by: r.decided_by.clone(),
                decided_at: r.decided_at,
            },
            Some(r) => ApprovalError::NotOnVersion {
                key,
                expected: SpecHash::short_of(&self.from).to_string(),
                found: SpecHash::short_of(&r.spec_hash).to_string(),
            },
        }
    }
}

/// A move that was written: the record as moved and the event appended.
#[derive(Debug, Clone)]
pub struct Moved {
    pub record: ApprovalRecord,
    pub event: crate::domain::events::Event,
}

/// Why a decision was refused. The same codes everywhere: HTTP and CLI.
/// What each means at an edge (an HTTP status, an exit status) is decided
/// there: `service/error.rs` and `cli/exit.rs`.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum ApprovalError {
    #[error("no approval with key {key}")]
    NotFound { key: String },

    #[error("approval {key} expired at {}", fmt_time(&Some(*.expired_at)))]
    Expired {
        key: String,
        expired_at: DateTime<Utc>,
    },

    #[error("approval {key} was already {} by {} at {}", .status.past_tense(), .decided_by.as_deref().unwrap_or("unknown"), fmt_time(.decided_at))]
    AlreadyResolved {
        key: String,
        status: ApprovalStatus,
        decided_by: Option<String>,
        decided_at: Option<DateTime<Utc>>,
    },

    #[error(
        "approval {key} was requested under spec {paused_with}, but the spec is now {current}: move it onto the new spec with `tollgate approvals migrate --key {key} --to SPEC` (`tollgate plan SPEC` shows what would move), or set `on_spec_change: auto` (or `pin`) under `approvals:` in the spec so waiting approvals resume on the version they paused under; else restore the spec to approve it, or reject it"
    )]
    SpecChanged {
        key: String,
        paused_with: String,
        current: String,
    },

    /// A move onto another spec version found the record on a version
    /// other than the one it was to move from (another move won).
    #[error("approval {key} is on spec {found} now, not {expected}; nothing was moved")]
    NotOnVersion {
        key: String,
        expected: String,
        found: String,
    },

    #[error("{decided_by} may not decide approval {key}: not in approvals.approvers")]
    Forbidden { key: String, decided_by: String },

    #[error("invalid payload for approval {key}: {reason}")]
    InvalidPayload { key: String, reason: String },

    /// A gate with rules takes votes from its groups' members only.
    #[error("{voter} may not vote on approval {key}: not a member of {}", .groups.join(" or "))]
    NotInGroups {
        key: String,
        voter: String,
        groups: Vec<String>,
    },

    /// Separation of duties (DESIGN §13): who started the run, made the
    /// gate request or edited its payload may not decide it.
    #[error(
        "{voter} may not decide approval {key}: separation of duties: it was asked for by {} (whoever started the run, made the request or edited the payload may not decide it; allow_self_approval: true on the gate, or approvals.allow_self_approval: true in the spec, opts out)",
        .asked_by.join(", ")
    )]
    SelfApproval {
        key: String,
        voter: String,
        /// The gate's requesters.
        asked_by: Vec<String>,
    },

    /// A voter's vote on a gate that counts votes stands; a second one
    /// (other than a repeat of the first) is refused.
    #[error("{voter} already voted {} on approval {key}", .decision.as_str())]
    AlreadyVoted {
        key: String,
        voter: String,
        decision: crate::domain::policy::VoteDecision,
    },

    /// The approver's input does not fit the gate's form (or the gate, or
    /// the decision, takes none): every error, each with its path.
    #[error("invalid input for approval {key}: {}", crate::domain::form::describe(.errors))]
    InvalidInput {
        key: String,
        errors: Vec<crate::domain::form::InputError>,
    },

    #[error("approval {key} needs a reason to reject or modify it (require_reason)")]
    ReasonRequired { key: String },

    /// A gate's `on_timeout` applied before its time ran out.
    #[error("approval {key} is not due: its time runs out at {}", fmt_time(&Some(*.expires_at)))]
    NotDue {
        key: String,
        expires_at: DateTime<Utc>,
    },

    /// The decision was made on a payload other than the one the gate asks
    /// about now (another voter edited it, or the pause moved).
    #[error(
        "approval {key} asks about another payload now: the decision was made on {given}, the payload is {current}; look again and decide"
    )]
    PayloadChanged {
        key: String,
        given: String,
        current: String,
    },
}

/// RFC 3339 UTC to the second (`2026-12-01T09:08:00Z`): the one form the
/// CLI prints times in, errors included.
fn fmt_time(t: &Option<DateTime<Utc>>) -> String {
    t.map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true))
        .unwrap_or_else(|| "an unknown time".into())
}

impl ApprovalError {
    /// Stable machine-readable code.
    pub fn code(&self) -> &'static str {
        match self {
            ApprovalError::NotFound { .. } => "approval_not_found",
            ApprovalError::Expired { .. } => "approval_expired",
            ApprovalError::AlreadyResolved { .. } => "already_resolved",
            ApprovalError::SpecChanged { .. } | ApprovalError::NotOnVersion { .. } => {
                "spec_changed"
            }
            ApprovalError::Forbidden { .. }
            | ApprovalError::NotInGroups { .. }
            | ApprovalError::SelfApproval { .. } => "forbidden",
            ApprovalError::InvalidPayload { .. } | ApprovalError::ReasonRequired { .. } => {
                "invalid_request"
            }
            ApprovalError::AlreadyVoted { .. } => "already_voted",
            ApprovalError::InvalidInput { .. } => "invalid_input",
            ApprovalError::PayloadChanged { .. } => "payload_changed",
            ApprovalError::NotDue { .. } => "not_due",
        }
    }

    /// Explain a claim that matched no row, from the record as it is now.
    pub fn explain_failed_claim(
        key: &str,
        record: Option<&ApprovalRecord>,
        claim: &Claim,
    ) -> ApprovalError {
        let Some(record) = record else {
            return ApprovalError::NotFound { key: key.into() };
        };
        match record.status {
            // A timeout's claim is of an overdue record: one still pending
            // was refused for its spec (below), or is not due yet.
            ApprovalStatus::Pending
                if claim.timeout.is_some() && !record.is_expired_at(claim.now) =>
            {
                ApprovalError::NotDue {
                    key: key.into(),
                    expires_at: record.expires_at,
                }
            }
            ApprovalStatus::Pending
                if claim.timeout.is_none() && record.is_expired_at(claim.now) =>
            {
                ApprovalError::Expired {
                    key: key.into(),
                    expired_at: record.expires_at,
                }
            }
            ApprovalStatus::Expired => ApprovalError::Expired {
                key: key.into(),
                expired_at: record.expires_at,
            },
            ApprovalStatus::Pending => ApprovalError::SpecChanged {
                key: key.into(),
                paused_with: SpecHash::short_of(&record.spec_hash).to_string(),
                current: SpecHash::short_of(&claim.spec_hash).to_string(),
            },
            status => ApprovalError::AlreadyResolved {
                key: key.into(),
                status,
                decided_by: record.decided_by.clone(),
                decided_at: record.decided_at,
            },
        }
    }
}

/// Substrings that mark a header or query parameter name as
/// credential-like (case-insensitive). Broad on purpose: dropping a
/// harmless `x-design-id` costs little, storing a credential costs a lot.
/// `pass` covers password and passwd, `sig` covers signature, `key` covers
/// api_key and apikey, `auth` covers authorization and oauth.
pub const CREDENTIAL_MARKERS: [&str; 13] = [
    "auth",
    "bearer",
    "cookie",
    "credential",
    "hmac",
    "jwt",
    "key",
    "pass",
    "private",
    "secret",
    "session",
    "sig",
    "token",
];

/// True when a header (or query parameter) name looks like it carries a
/// credential. Separators do not hide a marker: `api-key`, `api_key`,
/// `api.key` and `apiKey` all match `key`.
pub fn is_credential_header(name: &str) -> bool {
    let lower = name.to_ascii_lowercase();
    CREDENTIAL_MARKERS.iter().any(|m| lower.contains(m))
}

/// Drop credential-like headers and query parameters from a trigger's
/// `headers` and `query` objects, in place: the name and its value are
/// gone, as if never sent. Every other part of the trigger is kept.
pub fn scrub_trigger(trigger: &mut Value) {
    for part in ["headers", "query"] {
        if let Some(Value::Object(fields)) = trigger.get_mut(part) {
            fields.retain(|name, _| !is_credential_header(name));
        }
    }
}

/// A record for unit tests: pending at step 0 (`gate`) of `run_id`,
/// created now, due in an hour; tests change the fields they are about.
#[cfg(test)]
pub(crate) fn sample_record(key: &str, run_id: &str) -> ApprovalRecord {
    let now = crate::support::time::now();
    ApprovalRecord {
        key: key.into(),
        run_id: run_id.into(),
        agent_id: "agent".into(),
        spec_hash: "a".repeat(64),
        step_index: 0,
        step_id: "gate".into(),
        phase: Phase::Before,
        message: None,
        payload: Value::Object(Map::new()),
        outputs: Map::new(),
        input: Value::Object(Map::new()).into(),
        trigger: Value::Object(Map::new()),
        status: ApprovalStatus::Pending,
        decision_data: None,
        decided_by: None,
        decided_at: None,
        created_at: now,
        expires_at: crate::support::time::add(now, std::time::Duration::from_secs(3600)),
        roster: None,
        origin: ApprovalOrigin::Pause,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn scrubs_every_credential_like_header() {
        let mut trigger = json!({
            "kind": "webhook",
            "headers": {
                "Authorization": "Bearer x", "Cookie": "c", "X-Api-Key": "k",
                "X-Slack-Signature": "s", "x-session-id": "s", "X-Passwd": "p",
                "Content-Type": "application/json", "User-Agent": "curl"
            }
        });
        scrub_trigger(&mut trigger);
        let kept: Vec<&String> = trigger["headers"].as_object().unwrap().keys().collect();
        assert_eq!(kept, vec!["Content-Type", "User-Agent"]);
    }

    #[test]
    fn scrubs_query_parameters_by_the_same_rule() {
        let mut trigger = json!({
            "kind": "webhook",
            "headers": { "X-Bearer": "b", "X-Private-Id": "p", "X-Hub-Hmac": "h" },
            "query": {
                "token": "t", "api_key": "k", "apiKey": "k", "access_token": "t",
                "pass": "p", "password": "p", "passphrase": "p", "bearer": "b",
                "private": "p", "jwt": "j", "sig": "s", "signature": "s",
                "auth": "a", "oauth_verifier": "o", "sessionid": "s",
                "client_secret": "s", "credentials": "c", "hmac": "h",
                "source": "shop", "batch": "7"
            }
        });
        scrub_trigger(&mut trigger);
        assert_eq!(trigger["headers"], json!({}));
        assert_eq!(trigger["query"], json!({"source": "shop", "batch": "7"}));
    }

    #[test]
    fn decision_data_keeps_reason_and_payload() {
        let d = Decision::Modify {
            payload: json!({"amount": 5}),
            reason: Some("smaller".into()),
        };
        assert_eq!(
            d.data().unwrap(),
            json!({"reason": "smaller", "payload": {"amount": 5}})
        );
        assert_eq!(Decision::Approve { reason: None }.data(), None);
    }

    fn decided(status: ApprovalStatus, data: Option<Value>) -> ApprovalRecord {
        let now = crate::support::time::now();
        ApprovalRecord {
            key: "k".into(),
            run_id: "r".into(),
            agent_id: "a".into(),
            spec_hash: "h".into(),
            step_index: 0,
            step_id: "s".into(),
            phase: Phase::Before,
            message: None,
            payload: json!({"amount": 5}),
            outputs: Map::new(),
            input: json!({}).into(),
            trigger: json!({}),
            status,
            decision_data: data,
            decided_by: Some("alice".into()),
            decided_at: Some(now),
            created_at: now,
            expires_at: now,
            roster: None,
            origin: ApprovalOrigin::Pause,
        }
    }

    #[test]
    fn the_same_decision_is_the_same_decider_kind_reason_and_payload() {
        let approve = |reason: Option<&str>| Decision::Approve {
            reason: reason.map(str::to_string),
        };
        let approved = decided(ApprovalStatus::Approved, approve(Some("ok")).data());
        assert!(approved.was_decided_as(&approve(Some("ok")), "alice"));
        assert!(!approved.was_decided_as(&approve(Some("ok")), "bob"));
        assert!(!approved.was_decided_as(&approve(None), "alice"));
        assert!(!approved.was_decided_as(&approve(Some("OK")), "alice"));
        let modify_same = Decision::Modify {
            payload: json!({"amount": 5}),
            reason: Some("ok".into()),
        };
        assert!(
            !approved.was_decided_as(&modify_same, "alice"),
            "a modify is not an approve, even with the original payload"
        );

        let modify = Decision::Modify {
            payload: json!({"amount": 3, "note": "x"}),
            reason: None,
        };
        let modified = decided(ApprovalStatus::Modified, modify.data());
        let reordered: Value = serde_json::from_str(r#"{"note":"x","amount":3}"#).unwrap();
        assert!(modified.was_decided_as(
            &Decision::Modify {
                payload: reordered,
                reason: None
            },
            "alice"
        ));
        assert!(!modified.was_decided_as(
            &Decision::Modify {
                payload: json!({"amount": 4, "note": "x"}),
                reason: None
            },
            "alice"
        ));
        assert!(!modified.was_decided_as(&approve(None), "alice"));

        let reject = |reason: &str| Decision::Reject {
            reason: Some(reason.into()),
        };
        let rejected = decided(ApprovalStatus::Rejected, reject("too much").data());
        assert!(rejected.was_decided_as(&reject("too much"), "alice"));
        assert!(!rejected.was_decided_as(&reject("too big"), "alice"));
        assert!(!rejected.was_decided_as(&approve(None), "alice"));

        let expired = decided(ApprovalStatus::Expired, None);
        assert!(!expired.was_decided_as(&approve(None), "alice"));
    }
}
