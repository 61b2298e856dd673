//! Run events: what a run did, in order. Stored per run (`seq` from 1) and
//! broadcast live to listeners (SSE, `--json`).

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::domain::pending_approval::{ApprovalRecord, Phase};

/// One event of one run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Event {
    pub run_id: String,
    pub seq: u64,
    pub at: DateTime<Utc>,
    #[serde(flatten)]
    pub kind: EventKind,
}

/// The event's payload; serialised with a `type` field.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum EventKind {
    RunStarted {
        agent: String,
        spec_hash: String,
        input: crate::support::json_doc::JsonDoc,
    },
    StepStarted {
        step: String,
        index: usize,
    },
    StepCompleted {
        step: String,
        index: usize,
        output: Value,
        /// True when a resumed run re-announces an earlier step without running it.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        replayed: bool,
    },
    AwaitingApproval {
        key: String,
        step: String,
        phase: Phase,
        message: Option<String>,
        payload: Value,
        expires_at: DateTime<Utc>,
    },
    ApprovalResolved {
        key: String,
        decision: String,
        decided_by: String,
        reason: Option<String>,
        /// The approver's input (a gate with a `form:`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        input: Option<serde_json::Value>,
        /// The spec version (hash) the run resumes on when it is not the
        /// one the deciding process serves: the pause was made under an
        /// older version and `on_spec_change: pin` keeps the run on it.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pinned_to: Option<String>,
    },
    /// A pending approval moved, with its run, onto another version of the
    /// spec (DESIGN §12): by `approvals migrate`, or by `on_spec_change:
    /// auto` when its gate is unchanged in the version deployed.
    ApprovalMigrated {
        key: String,
        /// The spec hash it paused under.
        from: String,
        /// The spec hash it waits under now.
        to: String,
        /// Who moved it: the operator who migrated, or the decider whose
        /// decision moved it under `auto`.
        by: String,
        /// Steps renamed by the move (old id -> new id); empty when none.
        map: std::collections::BTreeMap<String, String>,
        /// Moved by the `auto` policy at a decision, not by a migrate.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        auto: bool,
    },
    /// A vote on a gate that counts votes (DESIGN §13); the vote that
    /// settles it is followed by `approval_resolved`.
    ApprovalVote {
        key: String,
        voter: String,
        decision: crate::domain::policy::VoteDecision,
        /// The rule the vote counted toward (approvals only).
        rule: Option<String>,
        reason: Option<String>,
        channel: crate::domain::policy::Channel,
        payload_digest: String,
        /// The approver's input given with the vote (a gate with a `form:`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        input: Option<serde_json::Value>,
        /// A modify: the votes before it no longer count.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        supersedes: bool,
        /// Each rule's progress after the vote ("finance 1 of 2").
        progress: String,
    },
    /// A waiting gate's reminder (`remind:`): `percent` of its time has
    /// passed (DESIGN §13).
    ApprovalReminded {
        key: String,
        step: String,
        percent: u8,
        expires_at: DateTime<Utc>,
    },
    /// A waiting gate's escalation (`escalate:`): the members of `groups`
    /// (`added`, as they were when the run paused) may decide it from now
    /// on; votes already cast stand.
    ApprovalEscalated {
        key: String,
        step: String,
        groups: Vec<String>,
        added: Vec<String>,
    },
    /// A gated tool's `when:` did not hold for a call's arguments: the
    /// call went out without a gate. `value` is what the predicate gave.
    GateSkipped {
        step: String,
        when: String,
        value: Value,
    },
    RunCompleted {
        outputs: Map<String, Value>,
    },
    RunRejected {
        reason: Option<String>,
    },
    RunExpired {
        key: String,
    },
    RunSkipped {
        step: String,
        dedupe_key: String,
    },
    RunFailed {
        error: String,
        /// Who failed the run by hand (`runs fail`); absent when it failed
        /// by itself. An operator's fail is final for `runs retry` unless
        /// forced.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        by: Option<String>,
        /// The operator's reason, with `by`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
    },
    /// An operator ended the run (DESIGN §3).
    RunCancelled {
        by: String,
        reason: Option<String>,
    },
    /// A process took over a run whose driver had stopped (its lease ran
    /// out) and resumes it from its last durable point.
    RunRecovered {
        /// The recovering process ([`crate::domain::durable::node_id`]).
        by: String,
        /// The step it resumes at; `None` when every step was done.
        from_step: Option<String>,
        /// An operator's `runs retry --force` of a run another operator
        /// had failed (the `run_failed` before this names who).
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        forced: bool,
    },
    /// A step was in flight when its process stopped, and its `on_crash`
    /// says not to repeat it: the run waits for an operator.
    RunStuck {
        step: String,
        reason: String,
    },
}

impl EventKind {
    /// A `run_failed` that records no operator: the run failed by itself.
    pub fn failed(error: String) -> EventKind {
        EventKind::RunFailed {
            error,
            by: None,
            reason: None,
        }
    }

    /// The `awaiting_approval` event announcing a pause.
    pub fn awaiting(record: &ApprovalRecord) -> EventKind {
        EventKind::AwaitingApproval {
            key: record.key.clone(),
            step: record.step_id.clone(),
            phase: record.phase,
            message: record.message.clone(),
            payload: record.payload.clone(),
            expires_at: record.expires_at,
        }
    }

    /// The `approval_vote` event of `vote` on `key`, as `cast` counted it.
    pub fn vote(
        key: &str,
        vote: &crate::domain::policy::Vote,
        cast: &crate::domain::policy::Cast,
    ) -> EventKind {
        EventKind::ApprovalVote {
            key: key.to_string(),
            voter: vote.voter.clone(),
            decision: vote.decision,
            rule: vote.rule.clone(),
            reason: vote.reason.clone(),
            channel: vote.channel,
            payload_digest: vote.payload_digest.clone(),
            input: vote.input.clone(),
            supersedes: cast.supersedes,
            progress: cast.tally.summary(),
        }
    }

    /// The `type` name, as serialised.
    pub fn name(&self) -> &'static str {
        match self {
            EventKind::RunStarted { .. } => "run_started",
            EventKind::StepStarted { .. } => "step_started",
            EventKind::StepCompleted { .. } => "step_completed",
            EventKind::AwaitingApproval { .. } => "awaiting_approval",
            EventKind::ApprovalResolved { .. } => "approval_resolved",
            EventKind::ApprovalMigrated { .. } => "approval_migrated",
            EventKind::ApprovalVote { .. } => "approval_vote",
            EventKind::ApprovalReminded { .. } => "approval_reminded",
            EventKind::ApprovalEscalated { .. } => "approval_escalated",
            EventKind::GateSkipped { .. } => "gate_skipped",
            EventKind::RunCompleted { .. } => "run_completed",
            EventKind::RunRejected { .. } => "run_rejected",
            EventKind::RunExpired { .. } => "run_expired",
            EventKind::RunSkipped { .. } => "run_skipped",
            EventKind::RunFailed { .. } => "run_failed",
            EventKind::RunCancelled { .. } => "run_cancelled",
            EventKind::RunRecovered { .. } => "run_recovered",
            EventKind::RunStuck { .. } => "run_stuck",
        }
    }

    /// True for the event that ends a run for good.
    pub fn is_final(&self) -> bool {
        matches!(
            self,
            EventKind::RunCompleted { .. }
                | EventKind::RunRejected { .. }
                | EventKind::RunExpired { .. }
                | EventKind::RunSkipped { .. }
                | EventKind::RunFailed { .. }
                | EventKind::RunCancelled { .. }
        )
    }
}

/// One event type as the reference (docs/reference/events.md) lists it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EventType {
    /// The `type` value ([`EventKind::name`]).
    pub name: &'static str,
    /// When it is written.
    pub about: &'static str,
    /// Its fields beside `run_id`, `seq`, `at` and `type`, each with what
    /// it holds (`(optional)` when it may be absent or null).
    pub fields: &'static [(&'static str, &'static str)],
}

/// Every event type, in the order a run writes them: the registry the
/// reference is generated from. A test serialises one event of every
/// [`EventKind`] variant and requires its `type` and its fields here.
pub const EVENT_TYPES: &[EventType] = &[
    EventType {
        name: "run_started",
        about: "A run began.",
        fields: &[
            ("agent", "The spec's agent id."),
            (
                "spec_hash",
                "The hash of the spec version the run started under.",
            ),
            ("input", "The run's input."),
        ],
    },
    EventType {
        name: "step_started",
        about: "A step began.",
        fields: &[
            ("step", "The step's id."),
            ("index", "Its position in the spec, from 0."),
        ],
    },
    EventType {
        name: "step_completed",
        about: "A step finished with an output.",
        fields: &[
            ("step", "The step's id."),
            ("index", "Its position in the spec, from 0."),
            ("output", "What the step produced."),
            (
                "replayed",
                "(optional) true when a resumed run re-announces an earlier step without running it.",
            ),
        ],
    },
    EventType {
        name: "awaiting_approval",
        about: "The run paused at a gate; it waits for a decision on `key`.",
        fields: &[
            ("key", "The pending approval's key."),
            ("step", "The gate's step id."),
            ("phase", "`before` or `after` the step's action."),
            ("message", "(optional) The gate's message."),
            ("payload", "What is to be approved."),
            ("expires_at", "When the approval expires (RFC 3339)."),
        ],
    },
    EventType {
        name: "approval_resolved",
        about: "The gate was decided; the run resumes (or ends when rejected).",
        fields: &[
            ("key", "The approval's key."),
            ("decision", "`approve`, `reject` or `modify`."),
            ("decided_by", "Who decided."),
            ("reason", "(optional) The decider's reason."),
            (
                "input",
                "(optional) The approver's input, for a gate with a `form:`.",
            ),
            (
                "pinned_to",
                "(optional) The spec hash the run resumes on when it is not the one the deciding process serves (`on_spec_change: pin`).",
            ),
        ],
    },
    EventType {
        name: "approval_migrated",
        about: "A pending approval moved, with its run, onto another spec version (`approvals migrate`, or `on_spec_change: auto`).",
        fields: &[
            ("key", "The approval's key."),
            ("from", "The spec hash it paused under."),
            ("to", "The spec hash it waits under now."),
            (
                "by",
                "The operator who migrated, or the decider whose decision moved it under `auto`.",
            ),
            (
                "map",
                "Steps renamed by the move (old id to new id); empty when none.",
            ),
            (
                "auto",
                "(optional) true when moved by the `auto` policy at a decision.",
            ),
        ],
    },
    EventType {
        name: "approval_vote",
        about: "A vote on a gate that counts votes; the vote that settles it is followed by `approval_resolved`.",
        fields: &[
            ("key", "The approval's key."),
            ("voter", "Who voted."),
            ("decision", "`approve`, `reject` or `modify`."),
            (
                "rule",
                "(optional) The rule the vote counted toward (approvals only).",
            ),
            ("reason", "(optional) The voter's reason."),
            (
                "channel",
                "Where the vote came from: the API, the CLI, the inbox, a signed link, Slack, a Rust program's gate API, or the gate's own timeout.",
            ),
            ("payload_digest", "The digest of the payload voted on."),
            (
                "input",
                "(optional) The approver's input given with the vote.",
            ),
            (
                "supersedes",
                "(optional) true for a modify: the votes before it no longer count.",
            ),
            (
                "progress",
                "Each rule's progress after the vote (\"finance 1 of 2\").",
            ),
        ],
    },
    EventType {
        name: "approval_reminded",
        about: "A waiting gate's reminder (`remind:`).",
        fields: &[
            ("key", "The approval's key."),
            ("step", "The gate's step id."),
            ("percent", "How much of its time has passed."),
            ("expires_at", "When the approval expires (RFC 3339)."),
        ],
    },
    EventType {
        name: "approval_escalated",
        about: "A waiting gate's escalation (`escalate:`): more groups may decide from now on; votes already cast stand.",
        fields: &[
            ("key", "The approval's key."),
            ("step", "The gate's step id."),
            ("groups", "The groups added."),
            ("added", "Their members, as they were when the run paused."),
        ],
    },
    EventType {
        name: "gate_skipped",
        about: "A gated tool's `when:` did not hold for a call's arguments: the call went out without a gate.",
        fields: &[
            ("step", "The step id."),
            ("when", "The predicate."),
            ("value", "What the predicate gave."),
        ],
    },
    EventType {
        name: "run_completed",
        about: "The run ended: every step done.",
        fields: &[("outputs", "The run's outputs.")],
    },
    EventType {
        name: "run_rejected",
        about: "The run ended: a gate was rejected.",
        fields: &[("reason", "(optional) The decider's reason.")],
    },
    EventType {
        name: "run_expired",
        about: "The run ended: a gate's time ran out.",
        fields: &[("key", "The approval that expired.")],
    },
    EventType {
        name: "run_skipped",
        about: "The run ended without running: another run already had its dedupe key.",
        fields: &[
            ("step", "The step whose dedupe key matched."),
            ("dedupe_key", "The key."),
        ],
    },
    EventType {
        name: "run_failed",
        about: "The run ended failed: by itself, or by an operator (`runs fail`).",
        fields: &[
            ("error", "What went wrong."),
            (
                "by",
                "(optional) The operator who failed it; absent when it failed by itself.",
            ),
            ("reason", "(optional) The operator's reason."),
        ],
    },
    EventType {
        name: "run_cancelled",
        about: "An operator ended the run; its pending approval became cancelled.",
        fields: &[
            ("by", "Who cancelled it."),
            ("reason", "(optional) Their reason."),
        ],
    },
    EventType {
        name: "run_recovered",
        about: "A process took over a run whose driver had stopped (its lease ran out) and resumes it from its last durable point.",
        fields: &[
            ("by", "The recovering process's node id."),
            (
                "from_step",
                "(optional) The step it resumes at; null when every step was done.",
            ),
            (
                "forced",
                "(optional) true for `runs retry --force` of a run an operator had failed.",
            ),
        ],
    },
    EventType {
        name: "run_stuck",
        about: "A step was in flight when its process stopped and its `on_crash` says not to repeat it: the run waits for an operator.",
        fields: &[
            ("step", "The step that was in flight."),
            ("reason", "Why the run stopped there."),
        ],
    },
];
