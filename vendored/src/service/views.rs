//! The bodies the HTTP API answers with, one type per shape (DESIGN §5).
//!
//! Handlers build these and nothing else, so the contract is read here, in
//! one place, rather than pieced together from `json!` literals; a field
//! changes only by an edit to this file (tests/it/server/responses.rs pins
//! every shape). A view takes the store's records apart (moves, no
//! copies), so what a record holds reaches a client only through a field
//! named here. Fields serialize in declaration order, the order clients
//! have always seen.
//!
//! Errors are not here: `service/error.rs` alone maps them to a status and
//! `{"error": {"code", "message"}}`.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde::Serialize;
use serde_json::{Map, Value};

use super::error::ApiError;
use crate::domain::links::LinkSigner;
use crate::domain::pending_approval::{ApprovalRecord, ApprovalStatus};
use crate::domain::run_state::{RunRecord, RunStatus};
use crate::engine::run::{DecisionOutcome, VoteRecorded};
use crate::service::schema::response_type;
use crate::service::votes::ListedLedgers;

response_type! {
    /// GET /runs/{id}, and POST /runs?wait=true: a run as a client sees it.
    #[derive(Debug, Serialize)]
    pub(crate) struct RunView {
        pub id: String,
        pub agent: String,
        /// The hash of the spec version the run started under (or was
        /// moved to), in full.
        pub spec_hash: String,
        /// Whether `spec_hash` is the hash of the spec this server serves.
        /// `false`: the run belongs to an older (or other) version; its
        /// pending approval is stale (see `approvals.on_spec_change`).
        pub spec_current: bool,
        /// The status as of this read: a run whose approval has expired
        /// reads `expired`, whether or not the sweeper has marked it yet.
        // (`view::run_view` applies the rule.)
        pub status: RunStatus,
        pub outputs: Map<String, Value>,
        pub error: Option<String>,
        pub created_at: DateTime<Utc>,
        pub updated_at: DateTime<Utc>,
        /// Who executes the run (`host:pid:random`, one per process, then
        /// where /proc tells `:start:boot_id:pid_ns[.time_ns]`) and until
        /// when, while a process drives it; `null` at pauses and once it
        /// ended. An `until` in the past means orphaned: a serving process
        /// recovers the run (DESIGN §9); so does one on the same host that
        /// sees the owner's process is gone, without waiting for `until`.
        pub lease: Option<LeaseView>,
        /// The unexpired PENDING record the run waits on; `null` otherwise.
        pub pending_approval: Option<ApprovalView>,
    }
}

response_type! {
    /// A running run's driver: `owner` renews `until` while it executes. A
    /// `running` run whose lease is past is orphaned: a serving process
    /// recovers it.
    #[derive(Debug, Serialize)]
    pub(crate) struct LeaseView {
        pub owner: String,
        pub until: DateTime<Utc>,
    }
}

impl LeaseView {
    fn of(owner: Option<String>, until: Option<DateTime<Utc>>) -> Option<LeaseView> {
        Some(LeaseView {
            owner: owner?,
            until: until?,
        })
    }
}

impl RunView {
    /// `served`: the hash of the spec this server serves.
    pub fn new(
        run: RunRecord,
        status: RunStatus,
        pending: Option<ApprovalRecord>,
        served: &str,
    ) -> RunView {
        RunView {
            id: run.id,
            agent: run.agent_id,
            spec_current: run.spec_hash == served,
            spec_hash: run.spec_hash,
            status,
            outputs: run.outputs,
            error: run.error,
            created_at: run.created_at,
            updated_at: run.updated_at,
            lease: LeaseView::of(run.owner, run.lease_until),
            pending_approval: pending.map(|record| ApprovalView::new(record, served)),
        }
    }
}

response_type! {
    /// One entry of GET /runs: the run without its outputs (GET /runs/{id}
    /// has them, and the approval it waits on).
    #[derive(Debug, Serialize)]
    pub(crate) struct RunSummary {
        pub id: String,
        pub agent: String,
        pub status: RunStatus,
        pub error: Option<String>,
        pub created_at: DateTime<Utc>,
        pub updated_at: DateTime<Utc>,
        /// As on GET /runs/{id}.
        pub lease: Option<LeaseView>,
    }
}

impl From<RunRecord> for RunSummary {
    fn from(run: RunRecord) -> RunSummary {
        RunSummary {
            id: run.id,
            agent: run.agent_id,
            status: run.status,
            error: run.error,
            created_at: run.created_at,
            updated_at: run.updated_at,
            lease: LeaseView::of(run.owner, run.lease_until),
        }
    }
}

response_type! {
    /// GET /runs: one page, newest first.
    #[derive(Debug, Serialize)]
    pub(crate) struct RunsPage {
        pub runs: Vec<RunSummary>,
        /// Pass as `?cursor=` for the next page; `null` on the last one.
        pub next_cursor: Option<String>,
    }
}

impl From<crate::store::RunsPage> for RunsPage {
    fn from(page: crate::store::RunsPage) -> RunsPage {
        RunsPage {
            runs: page.runs.into_iter().map(RunSummary::from).collect(),
            next_cursor: page.next_cursor,
        }
    }
}

response_type! {
    /// POST /runs/{id}/cancel: what the cancel did.
    #[derive(Debug, Serialize)]
    pub(crate) struct CancelView {
        pub run_id: String,
        /// Always `cancelled`.
        pub status: RunStatus,
        /// What the run was: `awaiting_approval` or `running`.
        pub was: RunStatus,
        pub cancelled_by: String,
        pub reason: Option<String>,
        /// The approval it waited on, now CANCELLED; `null` for a running run.
        pub approval: Option<ApprovalView>,
    }
}

response_type! {
    /// One approval record, whatever its status: GET /approvals/{key}, each
    /// entry of a page, a decision's `approval`, a run's `pending_approval`.
    /// Every field of the stored record, named as stored.
    #[derive(Debug, Serialize)]
    pub(crate) struct ApprovalView {
        // The record's own serialization, field for field and in its order
        // (its schema: `impl Schema for ApprovalRecord` in service/schema.rs).
        #[serde(flatten)]
        pub record: ApprovalRecord,
        /// Whether `spec_hash` is the hash of the spec this server serves.
        /// `false`: a stale approval, paused under another version; what
        /// approving it does is the served spec's `on_spec_change` policy
        /// (`refuse`, the default: 409 `spec_changed`, reject works).
        pub spec_current: bool,
        /// `sha256:` + hex of the canonical JSON of the payload the gate
        /// asks about now (`payload`, or a vote's edit on a gate that counts
        /// votes). Send it back as a decision's `payload_digest` to decide
        /// on exactly this payload: 409 `payload_changed` if it changed.
        pub payload_digest: String,
        /// GET /approvals/{key} only, while the record is PENDING, signed
        /// links are on (TOLLGATE_LINK_SECRET) and the caller may decide it
        /// (approvals.approvers, or the gate's groups on a gate with
        /// rules): the signed link that shows and decides
        /// this approval without an API token, bound to the caller (it
        /// decides as them; `?as=NAME`), or unbound (deciding as `link`)
        /// when TOLLGATE_UNBOUND_LINKS is on and `link` may decide.
        /// Absolute under TOLLGATE_PUBLIC_URL, else a path. Made for each
        /// answer, never stored.
        #[serde(skip_serializing_if = "Option::is_none")]
        pub link: Option<String>,
        /// GET /approvals only, for a gate with rules: each rule's progress
        /// as the votes that count stand now, e.g. `finance 1 of 2;
        /// security 0 of 1` (GET /approvals/{key}/votes has the ledger).
        #[serde(skip_serializing_if = "Option::is_none")]
        pub progress: Option<String>,
        /// GET /approvals/{key} only, when the gate has a `form:` (in the
        /// spec this server serves): the JSON Schema of the input an
        /// approval gives as `input`. The input given is kept in
        /// `decision_data.input`.
        #[serde(skip_serializing_if = "Option::is_none")]
        pub form: Option<serde_json::Value>,
    }
}

impl ApprovalView {
    /// With the signed link `viewer` is shown ([`LinkSigner::link_for_viewer`])
    /// when `links` are on and the record is PENDING (as of the read: an
    /// overdue record already reads EXPIRED).
    pub fn with_link(
        mut self,
        links: Option<&LinkSigner>,
        viewer: &str,
        spec: &crate::domain::spec::Spec,
    ) -> ApprovalView {
        let deciders = spec.deciders_of(&self.record);
        self.link = links
            .filter(|_| self.record.status == ApprovalStatus::Pending)
            .and_then(|links| links.link_for_viewer(&self.record, viewer, deciders));
        self
    }
}

impl ApprovalView {
    /// With the schema of its gate's form, when `spec` is the one it
    /// paused under and its gate has one.
    pub fn with_form(mut self, spec: &crate::domain::spec::Spec) -> ApprovalView {
        self.form = (self.record.spec_hash == spec.hash.as_str())
            .then(|| spec.gate_policy(self.record.step_index))
            .flatten()
            .and_then(|p| p.form.as_ref())
            .map(|f| f.schema.clone());
        self
    }

    /// `record` as a client sees it, `served` being the hash of the spec
    /// this server serves.
    pub fn new(record: ApprovalRecord, served: &str) -> ApprovalView {
        ApprovalView {
            spec_current: record.is_current_for(served),
            payload_digest: record.payload_digest(),
            record,
            link: None,
            progress: None,
            form: None,
        }
    }
}

response_type! {
    /// GET /approvals: one page, newest first.
    #[derive(Debug, Serialize)]
    pub(crate) struct ApprovalsPage {
        pub approvals: Vec<ApprovalView>,
        /// Pass as `?cursor=` for the next page; `null` on the last one.
        pub next_cursor: Option<String>,
    }
}

impl ApprovalsPage {
    /// One page of `records`, `served` being the hash of the spec this
    /// server serves. Rows the store could not read are logged by the
    /// store, not listed.
    pub fn new(
        records: Vec<ApprovalRecord>,
        next_cursor: Option<String>,
        served: &str,
    ) -> ApprovalsPage {
        ApprovalsPage {
            approvals: records
                .into_iter()
                .map(|record| ApprovalView::new(record, served))
                .collect(),
            next_cursor,
        }
    }

    /// With each gate's rules' progress, from the page's ledgers (one read
    /// for the page).
    pub fn with_progress(mut self, ledgers: &ListedLedgers) -> ApprovalsPage {
        for view in &mut self.approvals {
            view.progress = ledgers.progress(&view.record);
        }
        self
    }
}

response_type! {
    /// The answer to a decision (POST /runs/{id_or_key}/approve,
    /// /approvals/{key}/approve and /reject).
    #[derive(Debug, Serialize)]
    pub(crate) struct DecisionView {
        /// The record as decided.
        pub approval: ApprovalView,
        pub run_id: String,
        /// The run's status in the store when the answer is made: `running`
        /// while it resumes, or wherever the resume got to by then; with
        /// `?wait=true`, `run.status`.
        pub status: RunStatus,
        /// Present (`true`) only when the same decider repeated the decision
        /// that had already won (a retry after a lost answer): nothing was
        /// decided again, and this is the stored outcome.
        #[serde(skip_serializing_if = "std::ops::Not::not")]
        pub repeated: bool,
        /// On a gate that counts votes, when this decision was a vote that
        /// did not settle it: the vote as recorded and every rule's
        /// progress. `approval.status` is then still `PENDING`.
        #[serde(skip_serializing_if = "Option::is_none")]
        pub vote: Option<VoteView>,
        /// With `?wait=true` only: the run at its next pause or its end.
        #[serde(skip_serializing_if = "Option::is_none")]
        pub run: Option<RunView>,
    }
}

response_type! {
    /// A vote recorded on a gate that counts votes.
    #[derive(Debug, Serialize)]
    pub(crate) struct VoteView {
        pub voter: String,
        /// approve, reject or modify.
        pub decision: String,
        /// The rule the vote counted toward (approvals only).
        pub rule: Option<String>,
        /// Each rule's progress, e.g. `finance 1 of 2; security 0 of 1`.
        pub progress: String,
        /// The approver's input given with the vote (a gate with a
        /// `form:`), as checked, defaults filled in.
        #[serde(skip_serializing_if = "Option::is_none")]
        pub input: Option<serde_json::Value>,
        /// The vote repeated one its voter had cast (a retry): nothing new
        /// was recorded.
        #[serde(skip_serializing_if = "std::ops::Not::not")]
        pub repeated: bool,
    }
}

impl DecisionView {
    /// The answer to a decision that came to `outcome`, with the run's
    /// status as read after it (`run`, with `?wait=true`). `served`: the
    /// hash of the spec this server serves.
    pub fn of(
        outcome: &DecisionOutcome,
        served: &str,
        status: RunStatus,
        run: Option<RunView>,
    ) -> DecisionView {
        let record = outcome.record();
        let (repeated, vote) = match outcome {
            DecisionOutcome::Resumes(_) | DecisionOutcome::Finished { .. } => (false, None),
            DecisionOutcome::Repeated(_) => (true, None),
            DecisionOutcome::Voted(recorded) => (false, Some(VoteView::of(recorded, false))),
            DecisionOutcome::VoteRepeated(recorded) => (false, Some(VoteView::of(recorded, true))),
        };
        DecisionView {
            approval: ApprovalView::new(record.clone(), served),
            run_id: record.run_id.clone(),
            status,
            repeated,
            vote,
            run,
        }
    }
}

impl VoteView {
    /// `repeated`: the voter cast this vote before (nothing new recorded).
    fn of(recorded: &VoteRecorded, repeated: bool) -> VoteView {
        VoteView {
            voter: recorded.vote.voter.clone(),
            decision: recorded.vote.decision.as_str().to_string(),
            rule: recorded.vote.rule.clone(),
            progress: recorded.tally.summary(),
            input: recorded.vote.input.clone(),
            repeated,
        }
    }
}

response_type! {
    /// 202 to POST /runs and to a webhook: the run is stored and starting.
    #[derive(Debug, Serialize)]
    pub(crate) struct RunStarted {
        pub run_id: String,
    }
}

response_type! {
    /// GET /healthz.
    #[derive(Debug, Serialize)]
    pub(crate) struct Health {
        /// `ok`, or `unavailable` (with 503) when the store cannot take writes.
        pub status: &'static str,
        #[serde(skip_serializing_if = "Option::is_none")]
        pub error: Option<HealthError>,
    }
}

response_type! {
    /// Why the store is unavailable, in the API's error shape.
    #[derive(Debug, Serialize)]
    pub(crate) struct HealthError {
        pub code: &'static str,
        pub message: String,
    }
}

/// A run's `trigger` when the API starts it: how it was started, stored
/// with the run and its approvals (scrubbed of credentials first, see
/// `pending_approval::scrub_trigger`) and shown to the person deciding.
#[derive(Debug, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub(crate) enum Trigger {
    /// POST /runs.
    Api {
        /// The name of the caller's token (`local` without tokens).
        started_by: String,
        received_at: String,
    },
    /// A POST to the spec's `trigger.webhook.path`.
    Webhook {
        path: String,
        /// The request's headers; a repeated header's values joined by ", ".
        headers: Map<String, Value>,
        query: BTreeMap<String, String>,
        received_at: String,
    },
}

impl Trigger {
    /// As stored: a JSON object, credentials removed. The store scrubs
    /// too; doing it here keeps credentials out of every copy from the
    /// first moment.
    pub fn into_value(self) -> Result<Value, ApiError> {
        // Strings and string-keyed maps always serialize; the error is
        // handled rather than assumed away.
        let mut value = serde_json::to_value(self)
            .map_err(|e| ApiError::Internal(format!("cannot encode the trigger: {e}")))?;
        crate::domain::pending_approval::scrub_trigger(&mut value);
        Ok(value)
    }
}
