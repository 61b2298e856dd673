//! Approval gates for Rust code: a custom tool, or any program embedding
//! tollgate, asks a person before it acts, using the same durable records,
//! statuses, claim and expiry as workflow gates, in any store.
//!
//! ```no_run
//! # use std::time::Duration;
//! # use serde::{Deserialize, Serialize};
//! # use tollgate_runtime::{SharedStore, gate::Gate};
//! #[derive(Serialize, Deserialize)]
//! struct Payout { to: String, cents: u64 }
//!
//! # async fn example(store: SharedStore) -> Result<(), Box<dyn std::error::Error>> {
//! let gate = Gate::new(store);                       // starts a watcher
//! gate.recover_expired().await?;                     // at startup
//! let payout = Payout { to: "acme".into(), cents: 12_500 };
//! let ttl = Duration::from_secs(24 * 3600);
//! let key = gate.request("payouts", "send_payout", &payout, ttl).await?;
//! // ... a person decides, on any node: gate.decide(&key, decision, "alice")
//! let outcome = gate.wait(&key).await?;              // any node's decision
//! if outcome.is_approved() {
//!     let approved: Payout = outcome.payload_as()?;  // as approved or edited
//!     println!("paying {} cents to {}", approved.cents, approved.to);
//! }
//! # Ok(())
//! # }
//! ```
//!
//! How a gate request is stored. A request has no workflow run, but the
//! store's tables require one (the claim sets the run back to `running`, the
//! sweep ends it `expired`), so each request gets a run of its own:
//!
//! - `run_id` = the request's key; the run's `agent_id` is `gate:<agent>`,
//!   and so is the record's for a program's own requests
//!   ([`ListedWith::Itself`]). Spec agent ids cannot contain `:`, so a
//!   workflow server or the CLI refuses such a key with `WrongAgent` (never
//!   resumes it), and [`Gate::decide`] refuses keys of workflow gates
//!   (`NotAGate`). A request made through a server (`POST /gates`, MCP) is
//!   listed with the served agent instead ([`ListedWith::ServedAgent`]):
//!   its record's `agent_id` is `<agent>`, so that server lists it and
//!   decides it as one of its own (the run stays `gate:<agent>`: no
//!   workflow driver ever picks it up).
//! - `origin` = [`ApprovalOrigin::Request`] (who asked and the request's
//!   fingerprint, from its trigger), `spec_hash` empty on the record and
//!   the run (there is no spec: views show `null`), `step_index` = 0, `step_id` = the action, phase `before`, `trigger` =
//!   `{"kind": "gate"}`, `input` = `{"action": ...}`, `outputs` = `{}`.
//! - The run's events: `run_started`, `awaiting_approval`, then
//!   `approval_resolved` and `run_completed` (outputs `{<action>: {approved,
//!   decided_by, reason, payload}}`) or `run_rejected`; or `run_expired`.
//!
//! A request is one store write (the run with its pause), so a crash leaves
//! the whole request or none of it. A decision is one write too: the gate
//! works out the request's end from the record it read ([`request_finish`])
//! and the claim stores the decision and that end together, so a crash
//! cannot leave a decided request whose run looks in progress (no workflow
//! server would recover it: its agent is no spec's).

use std::time::Duration;

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Map, json};
use thiserror::Error;

use crate::domain::events::{Event, EventKind};
use crate::domain::pending_approval::{
    AfterClaim, ApprovalError, ApprovalOrigin, ApprovalRecord, ApprovalStatus, Claim, Decision,
    Phase, RunFinish,
};
use crate::domain::policy::{Channel, GatePolicy, Groups, Roster};
use crate::domain::run_state::{RunRecord, RunStatus};
use crate::engine::run::{Ballot, Decider, Ruling, decide_approval};
use crate::store::watch::{ApprovalWatcher, WatchOptions};
use crate::store::{FirstWrite, Pause, PendingPage, PendingQuery, RunEnd, SharedStore, StoreError};
use crate::support::time::SharedClock;

/// The prefix of a gate request's `agent_id`.
pub const GATE_AGENT_PREFIX: &str = "gate:";

/// Whose approvals a gate request is listed and decided with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ListedWith {
    /// Its own: the record's agent is `gate:<agent>`, as the run's. A
    /// program's requests ([`Gate::request`]), decided with [`Gate::decide`].
    Itself,
    /// The served agent's: the record's agent is `<agent>` (its run's
    /// stays `gate:<agent>`, so no workflow driver ever picks the run up).
    /// Requests made through a server (`POST /gates`, MCP): they are
    /// listed, shown and decided with that server's approvals, in the
    /// inbox, Slack, links and the CLI.
    ServedAgent,
}

/// One gate request as asked for: what [`Gate::open`] stores.
#[derive(Debug, Clone)]
pub struct GateRequest {
    /// The agent it is asked for (without the `gate:` prefix).
    pub agent: String,
    pub listed_with: ListedWith,
    /// What is to be done: the record's `step_id`.
    pub action: String,
    /// For the person deciding.
    pub message: Option<String>,
    pub payload: serde_json::Value,
    /// How long it can be decided.
    pub ttl: Duration,
    /// Stored as the run's and the record's `trigger`: `{"kind": "gate",
    /// ...}` with who asked.
    pub trigger: serde_json::Value,
    /// The team policy (DESIGN §13) and the groups its rules name,
    /// resolved into a roster when the request is stored; `None` for a
    /// plain gate.
    pub policy: Option<(GatePolicy, Groups)>,
    /// Who asked: may not vote on it when the policy bars requesters.
    pub requesters: Vec<String>,
    /// A key derived from an idempotency key
    /// ([`crate::domain::pending_approval::derived_key`]); a fresh one otherwise.
    pub key: Option<String>,
    /// Where its notices go; the gate's own routes otherwise.
    pub routes: Option<crate::domain::notices::NoticeRoutes>,
}

impl GateRequest {
    /// A program's request (see [`ListedWith::Itself`]).
    pub fn for_program(
        agent: &str,
        action: &str,
        payload: serde_json::Value,
        ttl: Duration,
    ) -> GateRequest {
        GateRequest {
            agent: agent.to_string(),
            listed_with: ListedWith::Itself,
            action: action.to_string(),
            message: None,
            payload,
            ttl,
            trigger: json!({"kind": "gate"}),
            policy: None,
            requesters: Vec::new(),
            key: None,
            routes: None,
        }
    }

    fn check(&self) -> Result<(), GateError> {
        if self.agent.trim().is_empty() || self.action.trim().is_empty() {
            return Err(GateError::InvalidRequest(
                "agent and action must not be empty".into(),
            ));
        }
        if self.ttl.is_zero() {
            return Err(GateError::InvalidRequest(
                "ttl must be greater than zero".into(),
            ));
        }
        Ok(())
    }

    /// The roster its policy resolves to for a request stored at
    /// `created_at` (reminders and escalations timed to `expires_at`), or
    /// why the policy can never be met.
    fn roster(
        &self,
        created_at: chrono::DateTime<chrono::Utc>,
        expires_at: chrono::DateTime<chrono::Utc>,
    ) -> Result<Option<Roster>, GateError> {
        let Some((policy, groups)) = self.policy.as_ref().filter(|(p, _)| p.stores_roster()) else {
            return Ok(None);
        };
        let unmet = |e: crate::domain::policy::Unsatisfiable| GateError::InvalidRequest(e.message);
        let mut roster = Roster::resolve(policy, groups, self.requesters.clone()).map_err(unmet)?;
        roster.nudges = crate::domain::policy::schedule(policy, groups, created_at, expires_at)
            .map_err(unmet)?;
        Ok(Some(roster))
    }
}

/// A stored gate request: the record, and whether this call stored it
/// (`false`: its key was already taken, by an earlier identical request).
#[derive(Debug, Clone)]
pub struct Opened {
    pub record: ApprovalRecord,
    pub created: bool,
}

#[derive(Debug, Error)]
pub enum GateError {
    /// Not found, expired, already resolved.
    #[error(transparent)]
    Approval(#[from] ApprovalError),

    #[error(transparent)]
    Store(StoreError),

    #[error(
        "approval {key} belongs to agent {agent:?}, not to this program's gate requests; decide it through that agent's server or CLI"
    )]
    NotAGate { key: String, agent: String },

    #[error("invalid gate request: {0}")]
    InvalidRequest(String),

    #[error("the payload of approval {key} is not a {type_name}: {reason}")]
    PayloadType {
        key: String,
        type_name: &'static str,
        reason: String,
    },
}

impl From<StoreError> for GateError {
    fn from(e: StoreError) -> Self {
        match e {
            StoreError::Approval(a) => GateError::Approval(a),
            other => GateError::Store(other),
        }
    }
}

/// Requests, waits for and decides gate approvals in one store.
#[derive(Clone)]
pub struct Gate {
    store: SharedStore,
    watcher: ApprovalWatcher,
    /// What requests, decisions and expiry read the time from; the
    /// watcher's waits use the same clock.
    clock: SharedClock,
    /// Where each request's notices go (DESIGN §14); none by default.
    routes: crate::domain::notices::NoticeRoutes,
}

impl Gate {
    /// A gate over `store` with a watcher on default timings (push on
    /// PostgreSQL, a 1 s poll otherwise). Needs a tokio runtime.
    pub fn new(store: SharedStore) -> Gate {
        Gate::with_options(store, WatchOptions::default())
    }

    pub fn with_options(store: SharedStore, options: WatchOptions) -> Gate {
        let watcher = ApprovalWatcher::start(store.clone(), options);
        Gate::with_watcher(store, watcher)
    }

    /// A gate sharing an existing watcher (one per process is enough), and
    /// its clock.
    pub fn with_watcher(store: SharedStore, watcher: ApprovalWatcher) -> Gate {
        let clock = watcher.clock().clone();
        Gate {
            store,
            watcher,
            clock,
            routes: crate::domain::notices::NoticeRoutes::default(),
        }
    }

    /// Send each request's notices (a webhook, mail, Slack) to `routes`,
    /// as a YAML gate's `notify:` does.
    pub fn with_notify(mut self, routes: crate::domain::notices::NoticeRoutes) -> Gate {
        self.routes = routes;
        self
    }

    /// Read the time from `clock` instead of the system clock, here and in
    /// this gate's waits (tests make requests expire with a
    /// [`crate::support::time::ManualClock`]).
    pub fn with_clock(mut self, clock: SharedClock) -> Gate {
        self.watcher = self.watcher.with_clock(clock.clone());
        self.clock = clock;
        self
    }

    pub fn clock(&self) -> &SharedClock {
        &self.clock
    }

    pub fn store(&self) -> &SharedStore {
        &self.store
    }

    pub fn watcher(&self) -> &ApprovalWatcher {
        &self.watcher
    }

    /// Ask for approval of `action` with `payload`, decidable for `ttl`.
    /// Returns the key. Nothing waits in memory: [`Gate::wait`] on any node
    /// (or after a restart) picks it up.
    pub async fn request<P: Serialize + ?Sized>(
        &self,
        agent: &str,
        action: &str,
        payload: &P,
        ttl: Duration,
    ) -> Result<String, GateError> {
        self.request_with_message(agent, action, None, payload, ttl)
            .await
    }

    /// [`Gate::request`] with a message for the person deciding.
    pub async fn request_with_message<P: Serialize + ?Sized>(
        &self,
        agent: &str,
        action: &str,
        message: Option<&str>,
        payload: &P,
        ttl: Duration,
    ) -> Result<String, GateError> {
        let payload = serde_json::to_value(payload).map_err(|e| {
            GateError::InvalidRequest(format!("the payload cannot be encoded as JSON: {e}"))
        })?;
        let mut request = GateRequest::for_program(agent, action, payload, ttl);
        request.message = message.map(str::to_string);
        Ok(self.open(request).await?.record.key)
    }

    /// Store `request` as a pending approval (see [`GateRequest`]). A
    /// request with a [`GateRequest::key`] that is already stored is not
    /// stored again: the answer is the stored record, `created: false`
    /// (whoever stored it, whatever it asked: compare before trusting it).
    pub async fn open(&self, request: GateRequest) -> Result<Opened, GateError> {
        request.check()?;
        let now = self.clock.now();
        let expires_at = crate::support::time::checked_add(now, request.ttl)
            .map_err(|e| GateError::InvalidRequest(format!("ttl: {e}")))?;
        let roster = request.roster(now, expires_at)?;
        let key = request
            .key
            .clone()
            .unwrap_or_else(crate::domain::pending_approval::new_key);
        let run_agent = format!("{GATE_AGENT_PREFIX}{}", request.agent);
        let record_agent = match request.listed_with {
            ListedWith::Itself => run_agent.clone(),
            ListedWith::ServedAgent => request.agent.clone(),
        };
        let input =
            crate::support::json_doc::JsonDoc::from_value(&json!({"action": request.action}));
        // A request has no spec: its run and record keep no hash (the
        // record's `origin` says what it is).
        let run = RunRecord {
            id: key.clone(),
            agent_id: run_agent.clone(),
            spec_hash: String::new(),
            status: RunStatus::Running,
            input: input.clone(),
            trigger: request.trigger.clone(),
            outputs: Map::new(),
            error: None,
            created_at: now,
            updated_at: now,
            owner: None,
            lease_until: None,
        };
        let started = event(
            &key,
            1,
            now,
            EventKind::RunStarted {
                agent: run_agent,
                spec_hash: String::new(),
                input: input.clone(),
            },
        );
        let origin = ApprovalOrigin::request_from_trigger(&request.trigger);
        let record = ApprovalRecord {
            key: key.clone(),
            run_id: key.clone(),
            agent_id: record_agent,
            spec_hash: String::new(),
            step_index: 0,
            step_id: request.action,
            phase: Phase::Before,
            message: request.message,
            payload: request.payload,
            outputs: Map::new(),
            input,
            trigger: request.trigger,
            status: ApprovalStatus::Pending,
            decision_data: None,
            decided_by: None,
            decided_at: None,
            created_at: now,
            expires_at,
            roster,
            origin,
        };
        let awaiting = event(&key, 2, now, EventKind::awaiting(&record));
        // One atomic write, as a workflow run stored at its first gate: a
        // crash can leave the whole request or nothing, never a run without
        // its record.
        let pause = Pause {
            record,
            at: now,
            owner: None,
            routes: request.routes.unwrap_or_else(|| self.routes.clone()),
        };
        let stored = self
            .store
            .create_run_at(&run, FirstWrite::Pause(&pause), &[started, awaiting])
            .await;
        match stored {
            Ok(()) => Ok(Opened {
                record: pause.record,
                created: true,
            }),
            // The derived key is taken: by the same request made before
            // (a retry, or one of several made at once), whose record
            // answers.
            Err(StoreError::Conflict(detail)) if request.key.is_some() => {
                match self.store.get_approval(&key).await? {
                    Some(record) => Ok(Opened {
                        record,
                        created: false,
                    }),
                    None => Err(GateError::Store(StoreError::Conflict(detail))),
                }
            }
            Err(e) => Err(e.into()),
        }
    }

    /// Resolves when the request is decided on any node, or expires.
    pub async fn wait(&self, key: &str) -> Result<Outcome, GateError> {
        let record = self.watcher.wait_for_decision(key).await?;
        Ok(Outcome { record })
    }

    /// The request as it stands (PENDING or decided).
    pub async fn get(&self, key: &str) -> Result<Option<Outcome>, GateError> {
        Ok(self
            .store
            .get_approval(key)
            .await?
            .map(|record| Outcome { record }))
    }

    /// `agent`'s pending requests, newest first, one page at a time.
    pub async fn list_pending(
        &self,
        agent: &str,
        limit: usize,
        cursor: Option<String>,
    ) -> Result<PendingPage, GateError> {
        let query = PendingQuery {
            agent_id: Some(format!("{GATE_AGENT_PREFIX}{agent}")),
            now: self.clock.now(),
            limit,
            cursor,
        };
        Ok(self.store.list_pending(&query).await?)
    }

    /// Decide a request: the same decision path and claim as a workflow
    /// gate (`run::decide_approval`), so exactly one decision wins
    /// across every process. Refuses keys of workflow gates.
    pub async fn decide(
        &self,
        key: &str,
        decision: Decision,
        decided_by: &str,
    ) -> Result<Outcome, GateError> {
        let ballot = Ballot::new(decision, decided_by, Channel::Gate);
        let record = match decide_approval(self, self.store.as_ref(), key, ballot).await? {
            Ruling::Won { claimed, .. } => claimed.record,
            Ruling::Repeat(record) => *record,
            // A request is a plain gate (it stores no roster): its one
            // decision settles it. Were it ever to count votes, the record
            // is still pending and its waiter keeps waiting.
            Ruling::Voted { recorded, .. } | Ruling::VoteRepeated(recorded) => recorded.record,
        };
        Ok(Outcome { record })
    }

    /// Expire every overdue request (and workflow gate: the sweep is the
    /// store's) at most once across processes. Call at startup; waiters do
    /// it themselves when their own record's time is up.
    pub async fn recover_expired(&self) -> Result<Vec<ApprovalRecord>, GateError> {
        Ok(self.store.expire_due(self.clock.now()).await?)
    }
}

/// A gate request's decisions: only gate requests are decided here, anyone
/// but those who asked for one may decide it (separation of duties, DESIGN
/// §13: a request cannot opt out), and the decision ends the request's run
/// in the claim's own write ([`request_finish`]).
impl Decider for Gate {
    type Error = GateError;
    type Plan = ();

    fn admit(&self, record: &ApprovalRecord, decided_by: &str) -> Result<(), GateError> {
        if !record.agent_id.starts_with(GATE_AGENT_PREFIX) {
            return Err(GateError::NotAGate {
                key: record.key.clone(),
                agent: record.agent_id.clone(),
            });
        }
        if crate::domain::policy::barred_as_requester(record, false, decided_by) {
            return Err(ApprovalError::SelfApproval {
                key: record.key.clone(),
                voter: decided_by.into(),
                asked_by: crate::domain::policy::requesters_of(record),
            }
            .into());
        }
        Ok(())
    }

    fn check(&self, record: &ApprovalRecord, decision: &Decision) -> Result<(), GateError> {
        Ok(Requests::check(record, decision)?)
    }

    fn now(&self) -> chrono::DateTime<chrono::Utc> {
        self.clock.now()
    }

    /// A request belongs to no spec version: `decide_approval` claims it
    /// as it is, whatever hash is given.
    fn resumes_on(&self) -> (String, bool) {
        (String::new(), false)
    }

    fn input(
        &self,
        record: &ApprovalRecord,
        decision: &Decision,
        given: Option<serde_json::Value>,
    ) -> Result<Option<serde_json::Value>, ApprovalError> {
        Requests::input(record, decision, given)
    }

    async fn plan(
        &self,
        record: &ApprovalRecord,
        claim: &Claim,
    ) -> Result<(AfterClaim, ()), GateError> {
        let finish = Requests::finish(record, claim);
        Ok((AfterClaim::Finish(Box::new(finish)), ()))
    }
}

/// How a gate request is decided, whoever decides it: a program through
/// [`Gate::decide`], or the server it was made through (`POST /gates`,
/// MCP), which decides it with its own approvals (`run::AgentRun`). Both
/// deciders take the checks, the input and the run's end from here; they
/// differ only in who may decide (their `admit`).
pub(crate) struct Requests;

impl Requests {
    /// A request's payload is whatever its caller asked with: any edit
    /// fits, and there is no spec to change.
    pub(crate) fn check(
        _record: &ApprovalRecord,
        _decision: &Decision,
    ) -> Result<(), ApprovalError> {
        Ok(())
    }

    /// A request has no form: an approval takes no input.
    pub(crate) fn input(
        record: &ApprovalRecord,
        decision: &Decision,
        given: Option<serde_json::Value>,
    ) -> Result<Option<serde_json::Value>, ApprovalError> {
        crate::engine::run::approver_input(&record.key, None, decision, given)
    }

    /// The request's end, written by `claim` with its decision
    /// ([`request_finish`] of the record as the claim decides it).
    pub(crate) fn finish(record: &ApprovalRecord, claim: &Claim) -> RunFinish {
        request_finish(&record.decided_by_claim(claim), claim.now)
    }
}

fn event(run_id: &str, seq: u64, at: chrono::DateTime<chrono::Utc>, kind: EventKind) -> Event {
    Event {
        run_id: run_id.into(),
        seq,
        at,
        kind,
    }
}

fn approved(record: &ApprovalRecord) -> bool {
    matches!(
        record.status,
        ApprovalStatus::Approved | ApprovalStatus::Modified
    )
}

/// How a decision ends a gate request's run: approve and modify complete it
/// with the decision as its output, reject rejects it, at `at` (the claim's
/// time). `decided` is the record as the claim decides it
/// ([`ApprovalRecord::decided_by_claim`]). Worked out before the claim and
/// written by it ([`AfterClaim::Finish`]): the decision and the run's end
/// are one commit, and a claim that loses writes neither.
pub fn request_finish(decided: &ApprovalRecord, at: chrono::DateTime<chrono::Utc>) -> RunFinish {
    let mut outputs = Map::new();
    outputs.insert(
        decided.step_id.clone(),
        json!({
            "approved": approved(decided),
            "decided_by": decided.decided_by,
            "reason": decided.reason(),
            "payload": decided.effective_payload(),
        }),
    );
    let (status, kind) = if approved(decided) {
        let kind = EventKind::RunCompleted {
            outputs: outputs.clone(),
        };
        (RunStatus::Completed, kind)
    } else {
        let kind = EventKind::RunRejected {
            reason: decided.reason().map(str::to_string),
        };
        (RunStatus::Rejected, kind)
    };
    RunFinish {
        end: RunEnd {
            run_id: decided.run_id.clone(),
            status,
            outputs,
            error: None,
            at,
            owner: None,
        },
        // Numbered by the store, after the decision's own event.
        events: vec![event(&decided.run_id, 0, at, kind)],
    }
}

/// A request as decided (or expired, or still pending when read with
/// [`Gate::get`]).
#[derive(Debug, Clone, PartialEq)]
pub struct Outcome {
    record: ApprovalRecord,
}

impl Outcome {
    pub fn status(&self) -> ApprovalStatus {
        self.record.status
    }

    /// Approved as asked, or with an edited payload.
    pub fn is_approved(&self) -> bool {
        approved(&self.record)
    }

    pub fn decided_by(&self) -> Option<&str> {
        self.record.decided_by.as_deref()
    }

    pub fn reason(&self) -> Option<&str> {
        self.record.reason()
    }

    /// The payload as decided (the edit of a MODIFIED request, else the
    /// original) read back as `T`.
    pub fn payload_as<T: DeserializeOwned>(&self) -> Result<T, GateError> {
        payload_as(&self.record)
    }

    pub fn record(&self) -> &ApprovalRecord {
        &self.record
    }

    pub fn into_record(self) -> ApprovalRecord {
        self.record
    }
}

/// A record's payload as decided, read back as `T` (for listed records).
pub fn payload_as<T: DeserializeOwned>(record: &ApprovalRecord) -> Result<T, GateError> {
    T::deserialize(record.effective_payload()).map_err(|e| GateError::PayloadType {
        key: record.key.clone(),
        type_name: std::any::type_name::<T>(),
        reason: e.to_string(),
    })
}
