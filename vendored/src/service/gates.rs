//! Gate requests from any agent (DESIGN §14): the service behind `POST
//! /gates`, `GET /gates/{key}`, `DELETE /gates/{key}` and the MCP tools
//! (`server/mcp`), so that an agent written in anything asks for an
//! approval with the guarantees of a YAML gate.
//!
//! A request is stored by the runtime's gate API ([`crate::engine::gate::Gate`])
//! as the served agent's approval ([`ListedWith::ServedAgent`]): it is
//! listed in `/approvals`, the inbox and the CLI, posted to Slack, linked
//! and mailed like any pause, decided through the same claim by whoever
//! may decide this agent's gates (its `approvals.approvers`, or the
//! request's own `policy`), and its decision ends its run in the claim's
//! write. Nothing waits in memory: a waiter reads the store, so a request
//! survives any restart, and any server on the store answers for it.
//!
//! Who may see what: a `requester` token (see `server/http/auth.rs`) sees, waits for
//! and cancels the requests it made, and nothing else (another's key is
//! not found); a full token sees every request of this agent.

pub(crate) mod policy;

use std::time::Duration;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use crate::domain::pending_approval::{
    ApprovalError, ApprovalOrigin, ApprovalRecord, ApprovalStatus,
};
use crate::domain::policy::RequestField;
use crate::engine::gate::{GateError, GateRequest, ListedWith};
use crate::engine::run::RunError;
use crate::service::ApiError;
use crate::service::schema::{request_type, response_type};
use crate::service::{Caller, Scope, Services};
use crate::store::{StoreError, expired_as_of};
use policy::{Allowed, PolicyBody};

/// The longest a single wait lasts; a longer one asked for is cut to
/// this (a client waits again). Under common proxy and client timeouts.
pub(crate) const MAX_WAIT: Duration = Duration::from_secs(60);

/// The step id a request gets when it names none.
pub(crate) const DEFAULT_STEP: &str = "approval";

/// Longest step id, requester and idempotency key.
const MAX_NAME_LEN: usize = 200;

request_type! {
    /// POST /gates: ask for an approval.
    #[derive(Debug, Deserialize)]
    #[serde(deny_unknown_fields)]
    pub(crate) struct NewGate {
        /// For the person deciding: what is asked, and why.
        pub message: String,
        /// What is to be approved, as JSON (an approver may edit it: the
        /// decision says what to act on). Not `null`.
        #[serde(deserialize_with = "given_json")]
        pub payload: Value,
        /// How long it can be decided (`30m`, `4h`, `2d`); the served
        /// spec's `approvals.ttl` unless given. A request may set it while
        /// the spec's `approvals.requests.may_set` has `ttl` (the default).
        pub ttl: Option<String>,
        /// What the action is called, as a step id (`send_payout`):
        /// listed, filtered and shown as the step. `approval` unless given.
        pub step: Option<String>,
        /// Who must agree (DESIGN §13); a plain gate unless given.
        pub policy: Option<PolicyBody>,
        /// On whose behalf the agent asks (a user's name): shown to the
        /// approver, and, like the token that asks, barred from deciding
        /// (separation of duties). The token's name is always recorded as
        /// well.
        pub requester: Option<String>,
        /// The same key from the same token answers with the approval it
        /// first made (201 then, 200 after), whatever happened since; with
        /// a different request it is refused (409 `idempotency_conflict`).
        pub idempotency_key: Option<String>,
    }
}

response_type! {
    /// A gate request as it stands.
    #[derive(Debug, Clone, Serialize)]
    pub(crate) struct GateView {
        pub key: String,
        /// `pending` (waiting for a decision), `decided`, `expired` or
        /// `cancelled`: what a waiting agent branches on.
        pub state: String,
        /// The record's status as of this read (an overdue one reads
        /// EXPIRED, whether or not the sweeper has marked it yet).
        pub status: ApprovalStatus,
        /// `true` when approved (as asked, or with an edited payload),
        /// `false` when rejected, `null` until decided.
        pub approved: Option<bool>,
        /// The decision, once there is one.
        pub decision: Option<GateDecision>,
        pub step: String,
        pub message: Option<String>,
        /// The payload as asked.
        pub payload: Value,
        pub requester: Option<String>,
        /// The token that asked.
        pub requested_by: String,
        pub idempotency_key: Option<String>,
        pub created_at: DateTime<Utc>,
        pub expires_at: DateTime<Utc>,
    }
}

response_type! {
    /// Who decided what, when, and what to act on.
    #[derive(Debug, Clone, Serialize)]
    pub(crate) struct GateDecision {
        /// `approved`, `modified` (approved with an edited payload),
        /// `rejected` or `cancelled`.
        pub outcome: String,
        pub by: Option<String>,
        pub at: Option<DateTime<Utc>>,
        pub reason: Option<String>,
        /// What to act on: the payload as approved (the edit, when
        /// modified); `null` unless approved.
        pub payload: Value,
    }
}

/// What a create did.
pub(crate) struct Created {
    pub view: GateView,
    /// `false`: an earlier request with the same idempotency key made it.
    pub created: bool,
}

/// The gate requests of the served agent, for one caller.
pub(crate) struct Gates<'a> {
    services: &'a Services,
    caller: &'a Caller,
    scope: Scope,
}

impl<'a> Gates<'a> {
    pub(crate) fn new(services: &'a Services, caller: &'a Caller, scope: Scope) -> Gates<'a> {
        Gates {
            services,
            caller,
            scope,
        }
    }

    /// Store a new request (or answer with the one its idempotency key made).
    pub(crate) async fn create(&self, body: NewGate) -> Result<Created, ApiError> {
        let spec = self.services.agent.spec();
        let fingerprint = fingerprint(&body);
        let as_sent = fingerprint_as_sent(&body);
        let step = checked_name("step", body.step.as_deref())?.unwrap_or(DEFAULT_STEP);
        if !step
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "_-.".contains(c))
        {
            return Err(ApiError::invalid(format!(
                "step {step:?}: use letters, digits, '_', '-' and '.'"
            )));
        }
        let requester = checked_name("requester", body.requester.as_deref())?;
        let idempotency_key = checked_name("idempotency_key", body.idempotency_key.as_deref())?;
        if body.payload.is_null() {
            return Err(ApiError::invalid(
                "payload is null: send the JSON the approver decides on (usually an object)",
            ));
        }
        if body.message.trim().is_empty() {
            return Err(ApiError::invalid(
                "message is empty: say what is asked, for the person deciding",
            ));
        }
        let groups = spec
            .resolve_groups(|name| std::env::var(name).ok())
            .map_err(|e| ApiError::Internal(e.to_string()))?;
        let allowed = Allowed {
            groups: &groups,
            approvers: spec.approvals.approvers.as_deref(),
            limits: &spec.approvals.requests,
            allow_self_approval: spec.approvals.allow_self_approval,
        };
        let ttl = match body.ttl.as_deref() {
            Some(text) => {
                allowed
                    .may_set(RequestField::Ttl, "ttl")
                    .map_err(ApiError::invalid)?;
                crate::support::time::parse_duration(text).map_err(|e| {
                    ApiError::invalid(format!("ttl {text:?}: {e} (such as 30m, 4h, 2d)"))
                })?
            }
            None => spec.approvals.ttl,
        };
        let policy = match body.policy {
            Some(policy) => {
                let policy = policy.resolve(allowed, ttl).map_err(ApiError::invalid)?;
                Some((policy, groups))
            }
            None => None,
        };
        let mut requesters = vec![self.caller.0.clone()];
        requesters.extend(requester.map(str::to_string));
        requesters.dedup();
        let trigger = json!({
            "kind": "gate",
            "requested_by": self.caller.0,
            "requester": requester,
            "idempotency_key": idempotency_key,
            "fingerprint": fingerprint,
        });
        let agent = spec.agent.clone();
        let request = GateRequest {
            key: idempotency_key.map(|k| {
                crate::domain::pending_approval::derived_key(&[
                    "gate-request",
                    &agent,
                    &self.caller.0,
                    k,
                ])
            }),
            agent,
            listed_with: ListedWith::ServedAgent,
            action: step.to_string(),
            message: Some(body.message),
            payload: body.payload,
            ttl,
            trigger,
            policy,
            requesters,
            routes: None,
        };
        let opened = self
            .services
            .gates
            .open(request)
            .await
            .map_err(gate_error)?;
        if !opened.created {
            // The key is this caller's (it is derived from its name): the
            // same request again, or another one under a reused key.
            if !same_request(&opened.record, &fingerprint, &as_sent) {
                return Err(ApiError::IdempotencyConflict(format!(
                    "idempotency_key {:?} was used for a different request (approval {}); use a new key for a new request",
                    idempotency_key.unwrap_or_default(),
                    opened.record.key
                )));
            }
        } else {
            tracing::info!(key = %opened.record.key, step, by = %self.caller.0, "gate request stored");
        }
        let now = self.services.agent.clock().now();
        Ok(Created {
            view: GateView::of(expired_as_of(opened.record, now)),
            created: opened.created,
        })
    }

    /// The request as it stands.
    pub(crate) async fn get(&self, key: &str) -> Result<GateView, ApiError> {
        let record = self.find(key).await?;
        Ok(GateView::of(expired_as_of(
            record,
            self.services.agent.clock().now(),
        )))
    }

    /// The request once it is decided, expired or cancelled, or as it
    /// stands when `wait` (at most [`MAX_WAIT`]) is over or the server
    /// shuts down. Writes nothing: an overdue request reads EXPIRED.
    pub(crate) async fn wait(&self, key: &str, wait: Duration) -> Result<GateView, ApiError> {
        let record = self.find(key).await?;
        let now = self.services.agent.clock().now();
        if record.status != ApprovalStatus::Pending || record.is_expired_at(now) || wait.is_zero() {
            return Ok(GateView::of(expired_as_of(record, now)));
        }
        let mut shutdown = self.services.shutdown.clone();
        let settled = self.services.gates.watcher().wait_until_settled(key);
        let waited = tokio::select! {
            settled = tokio::time::timeout(wait.min(MAX_WAIT), settled) => settled.ok(),
            _ = shutdown.wait_for(|stopping| *stopping) => None,
        };
        let record = match waited {
            Some(settled) => settled?,
            None => self.find(key).await?,
        };
        Ok(GateView::of(expired_as_of(
            record,
            self.services.agent.clock().now(),
        )))
    }

    /// Cancel a pending request: CANCELLED, its run `cancelled`, in one
    /// write. Cancelling one already cancelled answers with it; one
    /// already decided or expired is refused for its state.
    pub(crate) async fn cancel(
        &self,
        key: &str,
        reason: Option<String>,
    ) -> Result<GateView, ApiError> {
        let record = self.find(key).await?;
        let asked_for_it = requested_by(&record) == Some(self.caller.0.as_str());
        let approvers = self.services.agent.spec().approvals.approvers.as_deref();
        if !asked_for_it && approvers.is_some_and(|list| !list.contains(&self.caller.0)) {
            return Err(ApiError::Forbidden(format!(
                "{} may not cancel gate request {key}: it did not ask for it and is not in approvals.approvers",
                self.caller.0
            )));
        }
        let now = self.services.agent.clock().now();
        let cancelled = self
            .services
            .agent
            .cancel_checked(&record.run_id, &self.caller.0, reason)
            .await;
        match cancelled {
            Ok(done) => {
                tracing::info!(key, by = %self.caller.0, "gate request cancelled");
                let record = done.approval.unwrap_or(record);
                Ok(GateView::of(expired_as_of(record, now)))
            }
            Err(RunError::Store(StoreError::RunNotCancellable { .. })) => {
                // Overdue reads EXPIRED, swept or not.
                let record = expired_as_of(self.find(key).await?, now);
                match record.status {
                    ApprovalStatus::Cancelled => Ok(GateView::of(record)),
                    ApprovalStatus::Expired => Err(ApprovalError::Expired {
                        key: key.into(),
                        expired_at: record.expires_at,
                    }
                    .into()),
                    _ => Err(ApprovalError::AlreadyResolved {
                        key: key.into(),
                        status: record.status,
                        decided_by: record.decided_by.clone(),
                        decided_at: record.decided_at,
                    }
                    .into()),
                }
            }
            Err(e) => Err(e.into()),
        }
    }

    /// The gate request `key` of this agent that the caller may see;
    /// anything else is not found.
    async fn find(&self, key: &str) -> Result<ApprovalRecord, ApiError> {
        let not_found = || ApiError::Approval(ApprovalError::NotFound { key: key.into() });
        let record = self
            .services
            .agent
            .store()
            .get_approval(key)
            .await?
            .ok_or_else(not_found)?;
        let ours = record.is_gate_request() && record.agent_id == self.services.agent_id();
        let visible = match self.scope {
            Scope::Full => true,
            Scope::Requester => requested_by(&record) == Some(self.caller.0.as_str()),
        };
        if ours && visible {
            Ok(record)
        } else {
            Err(not_found())
        }
    }
}

impl GateView {
    pub(crate) fn of(record: ApprovalRecord) -> GateView {
        let state = match record.status {
            ApprovalStatus::Pending => "pending",
            ApprovalStatus::Approved | ApprovalStatus::Modified | ApprovalStatus::Rejected => {
                "decided"
            }
            ApprovalStatus::Expired => "expired",
            ApprovalStatus::Cancelled => "cancelled",
        };
        let approved = match record.status {
            ApprovalStatus::Approved | ApprovalStatus::Modified => Some(true),
            ApprovalStatus::Rejected => Some(false),
            _ => None,
        };
        let decision = match record.status {
            ApprovalStatus::Pending | ApprovalStatus::Expired => None,
            status => Some(GateDecision {
                outcome: match status {
                    ApprovalStatus::Approved => "approved",
                    ApprovalStatus::Modified => "modified",
                    ApprovalStatus::Rejected => "rejected",
                    _ => "cancelled",
                }
                .to_string(),
                by: record.decided_by.clone(),
                at: record.decided_at,
                reason: record.reason().map(str::to_string),
                payload: if approved == Some(true) {
                    record.effective_payload().clone()
                } else {
                    Value::Null
                },
            }),
        };
        let text = |name: &str| {
            record
                .trigger
                .get(name)
                .and_then(Value::as_str)
                .map(str::to_string)
        };
        GateView {
            state: state.to_string(),
            status: record.status,
            approved,
            decision,
            requester: text("requester"),
            requested_by: text("requested_by").unwrap_or_default(),
            idempotency_key: text("idempotency_key"),
            key: record.key,
            step: record.step_id,
            message: record.message,
            payload: record.payload,
            created_at: record.created_at,
            expires_at: record.expires_at,
        }
    }
}

/// The token that asked for `record`, as stored with it.
fn requested_by(record: &ApprovalRecord) -> Option<&str> {
    match &record.origin {
        ApprovalOrigin::Request { requested_by, .. } => requested_by.as_deref(),
        ApprovalOrigin::Pause => None,
    }
}

/// A digest of what a request asks (everything but its idempotency key):
/// a repeated key must come with the same request. Over canonical JSON
/// (object keys sorted, as the spec hash and `payload_digest` are): the
/// same request with its payload's keys in another order is the same
/// request.
fn fingerprint(body: &NewGate) -> String {
    digest_of(&crate::domain::spec::canonical_text(&asked(body)))
}

/// [`fingerprint`] as requests stored before it was canonical had it (the
/// keys in the order they came): a retry of such a request still matches.
fn fingerprint_as_sent(body: &NewGate) -> String {
    digest_of(&asked(body).to_string())
}

/// Whether `record` was made by `body` (its fingerprint, either form).
fn same_request(record: &ApprovalRecord, body_fingerprint: &str, as_sent: &str) -> bool {
    let ApprovalOrigin::Request {
        fingerprint: Some(stored),
        ..
    } = &record.origin
    else {
        return false;
    };
    stored == body_fingerprint || stored == as_sent
}

fn asked(body: &NewGate) -> Value {
    json!({
        "message": body.message,
        "payload": body.payload,
        "ttl": body.ttl,
        "step": body.step,
        "policy": body.policy.as_ref().map(|p| format!("{p:?}")),
        "requester": body.requester,
    })
}

fn digest_of(text: &str) -> String {
    format!(
        "sha256:{}",
        crate::support::hex::encode(&Sha256::digest(text.as_bytes()))
    )
}

/// A JSON value that must be given: serde reads a missing `Value` field as
/// `null` unless told otherwise, and a request that forgot its payload
/// must be refused, not stored with none.
fn given_json<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Value, D::Error> {
    Value::deserialize(d)
}

/// A name-like field: not blank, at most [`MAX_NAME_LEN`] characters, no
/// control characters.
fn checked_name<'t>(field: &str, value: Option<&'t str>) -> Result<Option<&'t str>, ApiError> {
    let Some(value) = value else {
        return Ok(None);
    };
    if value.trim().is_empty() {
        return Err(ApiError::invalid(format!(
            "{field} is blank: leave it out or give a value"
        )));
    }
    if value.chars().count() > MAX_NAME_LEN || value.chars().any(char::is_control) {
        return Err(ApiError::invalid(format!(
            "{field} must be at most {MAX_NAME_LEN} characters, without control characters"
        )));
    }
    Ok(Some(value))
}

fn gate_error(e: GateError) -> ApiError {
    match e {
        GateError::Approval(a) => ApiError::Approval(a),
        GateError::Store(s) => s.into(),
        GateError::InvalidRequest(message) => ApiError::InvalidRequest(message),
        other => ApiError::Internal(other.to_string()),
    }
}
