//! Spec language, version 1: the typed model of a parsed, validated spec.
//!
//! Parsing goes YAML text -> a marked tree (every node knows its line and
//! column) -> these types. Semantic checks (duplicate ids, unknown tools,
//! references to later steps, bad expressions) look positions up in the
//! marked tree by path, never by searching the source text.
//!
//! Each type that a YAML mapping becomes declares that mapping's keys in a
//! `SCHEMA` right after it (see `schema.rs`): the allowed keys and the
//! template-bearing paths are derived from these tables, so adding a key
//! means one line there plus the code that reads it.
//!
//! The canonical hash is SHA-256 over the canonical JSON of the parsed YAML
//! (keys sorted, compact), so key order and comments do not change it, and
//! `${NAME}` secret references are hashed as written.

mod convert;
mod diff;
mod error;
mod features;
mod groups;
mod hash;
pub(crate) mod marked;
mod needs;
mod request;
mod routes;
mod schema;
mod unsupported;
mod validate;

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::Value;

pub use diff::{
    Change, ChangedStep, Classification, Outcome, PausePlan, RenamedStep, SpecDiff, StepRef,
    TopLevel, classify_pause, diff, gate_unchanged_for_resume, plan_pause, policy_for_pause,
};
pub use error::{SpecError, SpecErrorKind};
pub use features::{Feature, MissingFeature, NeededFeature};
pub use groups::PolicyError;
pub use hash::SpecHash;
pub(crate) use hash::canonical_text;
pub use needs::{MissingSecret, RequiredSecret, SecretUse};
use schema::{Schema, mapping, template, value};

use crate::domain::notices::NoticeEvent;
use crate::domain::policy::GatePolicy;

/// The keys of a mapping that is a gate, `$field`s first, then the team
/// approval policy's keys (DESIGN §13), the same on every gate: an
/// approval step, an `if` step, a guardrail and a tool's `approval:`.
macro_rules! gate_keys {
    ($($field:expr),* $(,)?) => {
        &[
            $($field,)*
            value("rules"),
            value("reject"),
            value("allow_self_approval"),
            value("voter_counts_once"),
            value("require_reason"),
            value("on_timeout"),
            value("remind"),
            value("escalate"),
            value("form"),
            mapping("notify", &GateNotify::SCHEMA),
        ]
    };
}

/// A parsed and validated spec. Cheap to share behind an `Arc`.
#[derive(Debug, Clone, PartialEq)]
pub struct Spec {
    pub version: u32,
    /// Agent id: lowercase letters, digits and '-'.
    pub agent: String,
    pub description: Option<String>,
    pub trigger: TriggerSpec,
    pub approvals: ApprovalDefaults,
    pub model: Option<ModelConfig>,
    /// Tool definitions, by name, in the order they were written.
    pub tools: BTreeMap<String, ToolSpec>,
    pub steps: Vec<Step>,
    /// Canonical hash of the document.
    pub hash: SpecHash,
    /// The parsed document as JSON (used for the hash and for exports).
    pub document: Value,
    /// The YAML text the spec was parsed from, as written: what a stored
    /// version keeps for people to read (`tollgate specs show --source`).
    /// Secrets are `${NAME}` references in it, never their values: tollgate
    /// substitutes into a call's arguments, never into the source.
    pub source: Arc<str>,
}

impl Spec {
    /// The top level. `tools` and `steps` are walked per tool and per step
    /// (`ToolSpec::SCHEMA`, `StepKind::SCHEMAS`).
    pub(crate) const SCHEMA: Schema = Schema::new(&[
        value("version"),
        value("agent"),
        value("description"),
        mapping("trigger", &TriggerSpec::SCHEMA),
        mapping("approvals", &ApprovalDefaults::SCHEMA),
        mapping("model", &ModelConfig::SCHEMA),
        value("tools"),
        value("steps"),
    ]);
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct TriggerSpec {
    pub webhook: Option<WebhookTrigger>,
    pub schedule: Vec<ScheduleTrigger>,
}

impl TriggerSpec {
    /// `schedule` is a sequence of `ScheduleTrigger::SCHEMA` mappings.
    pub(crate) const SCHEMA: Schema = Schema::new(&[
        mapping("webhook", &WebhookTrigger::SCHEMA),
        value("schedule"),
    ]);
}

#[derive(Debug, Clone, PartialEq)]
pub struct WebhookTrigger {
    /// Absolute path starting with '/', e.g. `/hooks/refund`.
    pub path: String,
    /// HMAC secret, as written (normally a `${NAME}` reference).
    pub secret: Option<String>,
}

impl WebhookTrigger {
    pub(crate) const SCHEMA: Schema = Schema::new(&[value("path"), value("secret")]);

    /// Why `path` (which starts with '/') cannot be a webhook path, or
    /// None: it is `/`, is or lies under a path the API serves
    /// ([`RESERVED_PATHS`]), is not a request path as the server's HTTP
    /// parser reads one (the webhook matches that exactly), or has a `.`
    /// or `..` segment (clients remove those before sending, so
    /// `/hooks/../runs` would reach `/runs`).
    pub fn path_problem(path: &str) -> Option<String> {
        if path == "/" {
            return Some("\"/\" is the server's root: choose a path such as /hooks/orders".into());
        }
        if let Some(route) = reserved_path(path) {
            let under = if path == route {
                ""
            } else {
                " (it lies under it)"
            };
            return Some(format!(
                "{path:?} clashes with the API's route {route}{under}: the API serves {} and everything under them (choose a path such as /hooks/orders)",
                RESERVED_PATHS.join(", ")
            ));
        }
        // What this server's HTTP parser takes as a request path: the
        // webhook is matched against it byte for byte. Not ASCII: a
        // browser or an OpenAPI client sends %XX escapes instead, which
        // would not match.
        let parsed = path.parse::<axum::http::uri::PathAndQuery>();
        if !parsed
            .as_ref()
            .is_ok_and(|p| p.as_str() == path && p.query().is_none() && path.is_ascii())
        {
            let why = match path.find(['?', '#']).map(|at| &path[at..at + 1]) {
                Some("?") => {
                    "'?' starts a query string, and the webhook matches the path alone".to_string()
                }
                Some(_) => "'#' starts a fragment, which clients never send".to_string(),
                None => {
                    let bad = path
                        .chars()
                        .find(|c| !c.is_ascii_graphic())
                        .map_or_else(String::new, |c| format!(" ({c:?})"));
                    format!(
                        "it holds a character a request path cannot carry as written{bad}: use %XX escapes"
                    )
                }
            };
            return Some(format!("{path:?} is not a request path: {why}"));
        }
        if path
            .split('/')
            .any(|segment| segment == "." || segment == "..")
        {
            return Some(format!(
                "{path:?} has a '.' or '..' segment, which clients resolve before sending"
            ));
        }
        None
    }
}

/// The paths the API serves, each with everything under it: the first
/// segment of every route of the router (server/routes and server/ui). A
/// test in server/routes/openapi.rs holds this list to the router's
/// routes, so neither can change without the other.
pub const RESERVED_PATHS: [&str; 13] = [
    "/runs",
    "/approvals",
    "/gates",
    "/mcp",
    "/notifications",
    "/specs",
    "/healthz",
    "/readyz",
    "/metrics",
    "/openapi.json",
    "/slack",
    // The approvals inbox (server/ui) and its signed links.
    "/ui",
    "/a",
];

/// The entry of [`RESERVED_PATHS`] that `path` is or lies under.
pub fn reserved_path(path: &str) -> Option<&'static str> {
    RESERVED_PATHS.iter().copied().find(|route| {
        path.strip_prefix(route)
            .is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
    })
}

#[derive(Debug, Clone, PartialEq)]
pub struct ScheduleTrigger {
    pub cron: String,
    /// The run's `input` for each tick (default `{}`).
    pub input: Value,
}

impl ScheduleTrigger {
    pub(crate) const SCHEMA: Schema = Schema::new(&[value("cron"), value("input")]);
}

impl ScheduleTrigger {
    /// The parsed expression: standard 5-field cron (minute hour
    /// day-of-month month day-of-week, 0 = Sunday; day-of-month OR
    /// day-of-week as in vixie cron), with an optional leading seconds
    /// field, evaluated in UTC. The spec parser calls this too, so a bad
    /// expression is a spec error, not a surprise at startup.
    ///
    /// croner parses patterns no date matches (`0 0 30 2 *`, 30 February;
    /// `0 0 31 4 *`, 31 April): those are errors too, found by looking for
    /// the next tick after now. Without a year field a pattern repeats
    /// with the 400-year Gregorian cycle, and croner searches to the year
    /// 5000, so "no next tick" means "never", not "not soon": `0 0 29 2 *`
    /// passes, and so does a rarer one such as the fifth Friday of
    /// February. With a year field (seconds, then five fields, then the
    /// year) it means the years given are past.
    pub fn parse_cron(&self) -> Result<croner::Cron, String> {
        let cron = croner::parser::CronParser::builder()
            .seconds(croner::parser::Seconds::Optional)
            .build()
            .parse(&self.cron)
            .map_err(|e| format!("invalid cron expression {:?}: {e}", self.cron))?;
        match cron.find_next_occurrence(&crate::support::time::now(), false) {
            Ok(_) => Ok(cron),
            Err(_) => Err(format!(
                "cron expression {:?} never fires: no date matches it (such as 30 February or 31 April), so the schedule would never start a run",
                self.cron
            )),
        }
    }
}

/// Spec-wide defaults for every gate.
#[derive(Debug, Clone, PartialEq)]
pub struct ApprovalDefaults {
    /// Default 7 days.
    pub ttl: Duration,
    /// When set, only these identities may decide.
    pub approvers: Option<Vec<String>>,
    pub notify: NotifySpec,
    /// `approvals.on_spec_change`: what approving a pause made under an
    /// older version of this spec does, for every gate that does not say
    /// (default `refuse`).
    pub on_spec_change: OnSpecChange,
    /// `approvals.groups`: the named groups gates' `rules:` count votes
    /// from, each with its members (API-token names) as written. The
    /// members in force come from [`Spec::resolve_groups`], which applies
    /// `TOLLGATE_GROUP_<NAME>`.
    pub groups: BTreeMap<String, Vec<String>>,
    /// `approvals.allow_self_approval`: whether those who asked for a gate
    /// may decide it, for every gate that does not say (default `false`:
    /// separation of duties, DESIGN §13). Filled into each gate's policy
    /// when the spec is read.
    pub allow_self_approval: bool,
    /// `approvals.requests`: what a gate request may set of its policy.
    pub requests: crate::domain::policy::RequestLimits,
}

impl ApprovalDefaults {
    pub(crate) const SCHEMA: Schema = Schema::new(&[
        value("ttl"),
        value("approvers"),
        mapping("notify", &NotifySpec::SCHEMA),
        value("on_spec_change"),
        value("groups"),
        value("allow_self_approval"),
        mapping("requests", &REQUEST_LIMITS_SCHEMA),
    ]);
}

/// `approvals.requests`' keys.
pub(crate) const REQUEST_LIMITS_SCHEMA: Schema = Schema::new(&[
    value("may_set"),
    value("on_timeout"),
    value("max_reminders"),
]);

impl Default for ApprovalDefaults {
    fn default() -> Self {
        ApprovalDefaults {
            ttl: DEFAULT_APPROVAL_TTL,
            approvers: None,
            notify: NotifySpec::default(),
            on_spec_change: OnSpecChange::default(),
            groups: BTreeMap::new(),
            allow_self_approval: false,
            requests: crate::domain::policy::RequestLimits::default(),
        }
    }
}

crate::named_enum! {
    /// What approving a pause does when the spec it paused under is no
    /// longer the one deployed (DESIGN §12). Written as
    /// `approvals.on_spec_change` for the whole spec and as
    /// `on_spec_change` on a gate, which overrides it for that gate.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
    #[serde(rename_all = "snake_case")]
    pub enum OnSpecChange {
        /// Approve answers 409 `spec_changed`; reject is allowed, and
        /// restoring the old spec makes the pause approvable again.
        #[default]
        Refuse = "refuse",
        /// Approve resumes the run on the version it paused under.
        Pin = "pin",
        /// As `pin`, except that a pause whose gate is unchanged in the new
        /// version (see [`gate_unchanged_for_resume`]) moves to it.
        Auto = "auto",
    }
}

/// Seven days.
pub const DEFAULT_APPROVAL_TTL: Duration = Duration::from_secs(7 * 24 * 3600);

/// The longest duration a spec may give (every `ttl`, `timeout` and
/// `backoff`): 3650 days, about ten years. Longer is never meant, and an
/// expiry far in the future is a timestamp a store may not read back.
pub const MAX_DURATION: Duration = Duration::from_secs(3650 * 24 * 3600);
/// `MAX_DURATION` as a spec writes it, for messages.
pub const MAX_DURATION_TEXT: &str = "3650d";

/// The largest spec file: 1 MiB. Real specs are a few KB; the bound keeps
/// parsing (and its memory) small whatever the file holds.
pub const MAX_SPEC_BYTES: usize = 1024 * 1024;

/// `approvals.notify`: where every gate's notices go, unless the gate's
/// own `notify:` says otherwise ([`GateNotify`]). Values as written:
/// `${NAME}` references stay references, resolved when a notice is sent.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct NotifySpec {
    pub slack: Option<SlackNotifySpec>,
    /// Outbound webhooks (Standard Webhooks), each sent every notice its
    /// `events` lets through.
    pub webhooks: Vec<WebhookSpec>,
    /// Mail to the deciders.
    pub email: Option<EmailSpec>,
}

impl NotifySpec {
    pub(crate) const SCHEMA: Schema = Schema::new(&[
        mapping("slack", &SlackNotifySpec::SCHEMA),
        value("webhooks"),
        mapping("email", &EmailSpec::SCHEMA),
    ]);
}

/// One outbound webhook endpoint, as written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WebhookSpec {
    /// A `${NAME}` reference, or an absolute http(s) URL without userinfo.
    pub url: String,
    /// The signing secret: always a `${NAME}` reference (the spec's text
    /// is stored with every version, so a literal would be kept there).
    pub secret: String,
    /// The events it receives; `None`: every event.
    pub events: Option<Vec<NoticeEvent>>,
}

impl WebhookSpec {
    /// One entry of a `webhooks:` sequence.
    pub(crate) const SCHEMA: Schema =
        Schema::new(&[value("url"), value("secret"), value("events")]);
}

/// Mail to the deciders, as written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EmailSpec {
    /// A `${NAME}` reference (credentials belong there), or
    /// `smtp://host[:port]` / `smtps://host[:port]` with an optional
    /// `?tls=required|opportunistic|none`, without a literal password.
    pub smtp_url: String,
    /// The sender: `addr`, `Name <addr>`, or a reference.
    pub from: String,
    /// Decider name (an API-token name, as approvers are written) ->
    /// address (or its `${NAME}` reference).
    pub to: BTreeMap<String, String>,
    /// The events mailed; `None`: every event.
    pub events: Option<Vec<NoticeEvent>>,
}

impl EmailSpec {
    pub(crate) const SCHEMA: Schema = Schema::new(&[
        value("smtp_url"),
        value("from"),
        value("to"),
        value("events"),
    ]);
}

/// A gate's own `notify:`: a key written replaces the spec's
/// `approvals.notify` value for this gate, a key left out inherits it.
/// Slack is not here: it is configured once per spec (its signing secret
/// is the server's).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GateNotify {
    /// `None`: the spec's webhooks. `Some(vec![])` (`webhooks: []`): none.
    pub webhooks: Option<Vec<WebhookSpec>>,
    /// `None`: the spec's email. `Some(None)` (`email: false`): no mail
    /// for this gate. `Some(Some(..))`: this gate's own.
    pub email: Option<Option<EmailSpec>>,
}

impl GateNotify {
    pub(crate) const SCHEMA: Schema =
        Schema::new(&[value("webhooks"), mapping("email", &EmailSpec::SCHEMA)]);

    /// Nothing written: the gate inherits everything.
    pub fn is_inherited(&self) -> bool {
        self.webhooks.is_none() && self.email.is_none()
    }
}

/// Values as written: normally `${NAME}` references, resolved at call time.
#[derive(Debug, Clone, PartialEq)]
pub struct SlackNotifySpec {
    pub bot_token: String,
    pub channel: String,
    pub signing_secret: String,
}

impl SlackNotifySpec {
    pub(crate) const SCHEMA: Schema = Schema::new(&[
        value("bot_token"),
        value("channel"),
        value("signing_secret"),
    ]);
}

/// An OpenAI-compatible chat-completions endpoint. Values as written.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ModelConfig {
    pub base_url: Option<String>,
    pub api_key: Option<String>,
    pub name: Option<String>,
    pub timeout: Option<Duration>,
}

impl ModelConfig {
    pub(crate) const SCHEMA: Schema = Schema::new(&[
        value("base_url"),
        value("api_key"),
        value("name"),
        value("timeout"),
    ]);
}

#[derive(Debug, Clone, PartialEq)]
pub struct ToolSpec {
    pub name: String,
    pub kind: ToolKind,
    /// The tool has a gate (`approval: required`, or `approval:` as a
    /// mapping): calls pause first (phase before).
    pub approval_required: bool,
    /// `approval: { when: "{{ ... }}" }`: an expression over the call
    /// (`args`) that decides whether the gate fires; None: every call.
    pub when: Option<String>,
    /// The gate's policy (`approval:` as a mapping); plain otherwise.
    pub policy: GatePolicy,
    /// Template for the gate's message.
    pub message: Option<String>,
    /// Gate TTL for this tool; falls back to `approvals.ttl`.
    pub ttl: Option<Duration>,
    /// `idempotent: true`: calling twice has the effect of calling once,
    /// so a call found in flight after a crash is re-sent by default.
    pub idempotent: bool,
    /// `on_crash:` as written; see [`ToolSpec::on_crash`] for the default.
    pub on_crash: Option<OnCrash>,
    /// The gate's `on_spec_change:` (only with `approval: required`);
    /// falls back to `approvals.on_spec_change`.
    pub on_spec_change: Option<OnSpecChange>,
}

/// What recovery does with a call found in flight when its process died
/// (its start was journaled, its result was not): DESIGN §9.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OnCrash {
    /// Call again, with the same Idempotency-Key.
    Retry,
    /// End the run `stuck` for an operator to retry or fail.
    Stuck,
}

impl OnCrash {
    pub fn as_str(self) -> &'static str {
        match self {
            OnCrash::Retry => "retry",
            OnCrash::Stuck => "stuck",
        }
    }
}

impl ToolSpec {
    /// `on_crash`, or its default: `retry` for GET and HEAD and for tools
    /// marked `idempotent: true`, `stuck` for every other call (a POST
    /// without a promise must not be sent twice silently).
    pub fn on_crash(&self) -> OnCrash {
        if let Some(chosen) = self.on_crash {
            return chosen;
        }
        let safe_method =
            matches!(&self.kind, ToolKind::Http(h) if matches!(h.method.as_str(), "GET" | "HEAD"));
        if self.idempotent || safe_method {
            OnCrash::Retry
        } else {
            OnCrash::Stuck
        }
    }

    /// One entry of `tools:`. Its templates may read `args` too (the
    /// checks give every tool's walk that root).
    pub(crate) const SCHEMA: Schema = Schema::new(&[
        mapping("http", &HttpToolSpec::SCHEMA),
        value("rust"),
        mapping("approval", &ToolSpec::APPROVAL_SCHEMA),
        template("message"),
        value("ttl"),
        value("idempotent"),
        value("on_crash"),
        value("on_spec_change"),
    ]);
}

impl ToolSpec {
    /// A tool's `approval:` written as a mapping (`approval: required` is
    /// the other form). `message`, `ttl` and `on_spec_change` may be given
    /// here or beside it on the tool, not both.
    pub(crate) const APPROVAL_SCHEMA: Schema = Schema::new(gate_keys![
        template("when"),
        template("message"),
        value("ttl"),
        value("on_spec_change"),
    ]);
}

// Built once per spec load; the size difference between variants is irrelevant.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq)]
pub enum ToolKind {
    Http(HttpToolSpec),
    /// Implemented in Rust inside an exported crate.
    Rust,
}

#[derive(Debug, Clone, PartialEq)]
pub struct HttpToolSpec {
    /// Upper-case HTTP method.
    pub method: String,
    /// Template.
    pub url: String,
    /// Header name -> template.
    pub headers: BTreeMap<String, String>,
    /// Query parameter -> template.
    pub query: BTreeMap<String, String>,
    /// JSON body template (strings inside are templates).
    pub json: Option<Value>,
    /// Raw body template.
    pub body: Option<String>,
    pub timeout: Option<Duration>,
    /// Statuses accepted besides 2xx.
    pub ok_status: Vec<u16>,
    pub retry: Option<RetrySpec>,
    pub idempotency: IdempotencySpec,
}

impl HttpToolSpec {
    pub(crate) const SCHEMA: Schema = Schema::new(&[
        value("method"),
        template("url"),
        template("headers"),
        template("query"),
        template("json"),
        template("body"),
        value("timeout"),
        value("ok_status"),
        mapping("retry", &RetrySpec::SCHEMA),
        mapping("idempotency", &IdempotencySpec::SCHEMA),
    ]);
}

#[derive(Debug, Clone, PartialEq)]
pub struct RetrySpec {
    pub attempts: u32,
    pub backoff: Duration,
}

impl RetrySpec {
    pub(crate) const SCHEMA: Schema = Schema::new(&[value("attempts"), value("backoff")]);
}

#[derive(Debug, Clone, PartialEq)]
pub enum IdempotencySpec {
    /// Send the header (default name `Idempotency-Key`) on every call but GET, HEAD, OPTIONS and TRACE.
    Header(String),
    /// `idempotency: false`.
    Off,
}

impl IdempotencySpec {
    /// The mapping form; `idempotency: false` is the other.
    pub(crate) const SCHEMA: Schema = Schema::new(&[value("header")]);
}

impl Default for IdempotencySpec {
    fn default() -> Self {
        IdempotencySpec::Header("Idempotency-Key".to_string())
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Step {
    pub id: String,
    pub kind: StepKind,
}

#[derive(Debug, Clone, PartialEq)]
pub enum StepKind {
    /// `tool: NAME` with `with:` arguments (strings inside are templates).
    Tool {
        tool: String,
        with: Value,
    },
    Model(ModelStep),
    Approval(ApprovalStep),
    /// `if: EXPR` + `then: request_human_approval`.
    Gate(GateStep),
    Dedupe(DedupeStep),
    /// `set:` a mapping whose strings are templates.
    Set {
        values: Value,
    },
}

impl StepKind {
    /// A step's keys, by the key that decides its kind (a step has exactly
    /// one of them), in the order messages list the kinds.
    pub(crate) const SCHEMAS: &'static [(&'static str, Schema)] = &[
        (
            "tool",
            Schema::new(&[value("id"), value("tool"), template("with")]),
        ),
        (
            "model",
            Schema::new(&[
                value("id"),
                mapping("model", &ModelStep::SCHEMA),
                mapping("guardrail", &Guardrail::SCHEMA),
            ]),
        ),
        (
            "approval",
            Schema::new(&[value("id"), mapping("approval", &ApprovalStep::SCHEMA)]),
        ),
        (
            "if",
            Schema::new(gate_keys![
                value("id"),
                template("if"),
                value("then"),
                template("message"),
                value("ttl"),
                template("payload"),
                value("on_spec_change"),
            ]),
        ),
        (
            "dedupe",
            Schema::new(&[value("id"), mapping("dedupe", &DedupeStep::SCHEMA)]),
        ),
        ("set", Schema::new(&[value("id"), template("set")])),
    ];

    /// The key that made this step this kind.
    pub(crate) fn key(&self) -> &'static str {
        match self {
            StepKind::Tool { .. } => "tool",
            StepKind::Model(_) => "model",
            StepKind::Approval(_) => "approval",
            StepKind::Gate(_) => "if",
            StepKind::Dedupe(_) => "dedupe",
            StepKind::Set { .. } => "set",
        }
    }

    /// The keys of a step whose kind key is `kind`.
    pub(crate) fn schema(kind: &str) -> Option<&'static Schema> {
        StepKind::SCHEMAS
            .iter()
            .find(|(k, _)| *k == kind)
            .map(|(_, s)| s)
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct ModelStep {
    pub prompt: String,
    pub system: Option<String>,
    pub output: ModelOutput,
    /// Per-step overrides of the spec's `model:` block.
    pub name: Option<String>,
    pub base_url: Option<String>,
    pub api_key: Option<String>,
    pub timeout: Option<Duration>,
    pub guardrail: Option<Guardrail>,
    /// `on_crash:` as written; the default is `stuck` (model calls are
    /// billed, and a second answer may differ from the first).
    pub on_crash: Option<OnCrash>,
}

impl ModelStep {
    pub fn on_crash(&self) -> OnCrash {
        self.on_crash.unwrap_or(OnCrash::Stuck)
    }

    /// The step's `model:` mapping (`guardrail` is a key of the step).
    pub(crate) const SCHEMA: Schema = Schema::new(&[
        template("prompt"),
        template("system"),
        value("output"),
        value("name"),
        value("base_url"),
        value("api_key"),
        value("timeout"),
        value("on_crash"),
    ]);
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ModelOutput {
    #[default]
    Text,
    Json,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Guardrail {
    pub min_confidence: f64,
    /// Expression over `output`; default `{{ output.confidence }}`.
    pub confidence: String,
    pub message: Option<String>,
    pub ttl: Option<Duration>,
    /// Falls back to `approvals.on_spec_change`.
    pub on_spec_change: Option<OnSpecChange>,
    pub policy: GatePolicy,
}

impl Guardrail {
    /// Its templates run after the model call, so they may read `output`.
    pub(crate) const SCHEMA: Schema = Schema::reading(
        "output",
        gate_keys![
            value("min_confidence"),
            template("confidence"),
            template("message"),
            value("ttl"),
            value("on_spec_change"),
        ],
    );
}

#[derive(Debug, Clone, PartialEq)]
pub struct ApprovalStep {
    pub message: Option<String>,
    pub ttl: Option<Duration>,
    /// Optional payload template shown to (and editable by) the decider.
    pub payload: Option<Value>,
    pub on_reject: OnReject,
    /// Falls back to `approvals.on_spec_change`.
    pub on_spec_change: Option<OnSpecChange>,
    pub policy: GatePolicy,
}

impl ApprovalStep {
    pub(crate) const SCHEMA: Schema = Schema::new(gate_keys![
        template("message"),
        value("ttl"),
        template("payload"),
        value("on_reject"),
        value("on_spec_change"),
    ]);
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OnReject {
    /// The run ends `rejected`.
    #[default]
    Fail,
    /// The step's output records the rejection and the run goes on.
    Continue,
}

/// Its keys are the step's own (`StepKind::SCHEMAS`, kind `if`).
#[derive(Debug, Clone, PartialEq)]
pub struct GateStep {
    /// Condition expression (template).
    pub condition: String,
    pub message: Option<String>,
    pub ttl: Option<Duration>,
    pub payload: Option<Value>,
    /// Falls back to `approvals.on_spec_change`.
    pub on_spec_change: Option<OnSpecChange>,
    pub policy: GatePolicy,
}

#[derive(Debug, Clone, PartialEq)]
pub struct DedupeStep {
    /// Key template.
    pub key: String,
    pub ttl: Duration,
    pub release_on_failure: bool,
}

impl DedupeStep {
    pub(crate) const SCHEMA: Schema =
        Schema::new(&[template("key"), value("ttl"), value("release_on_failure")]);
}

impl Spec {
    /// Parse and validate spec text. `origin` names the file in error messages.
    pub fn parse(source: &str, origin: &str) -> Result<Spec, SpecError> {
        if source.len() > MAX_SPEC_BYTES {
            let (line, column) = line_col(source.as_bytes(), MAX_SPEC_BYTES);
            return Err(SpecError::at(
                SpecErrorKind::Invalid,
                origin,
                line,
                column,
                format!(
                    "the spec is {} bytes, more than the limit of {MAX_SPEC_BYTES} bytes (1 MiB)",
                    source.len()
                ),
            ));
        }
        let mut tree = marked::parse(source, origin)?;
        let document = std::mem::take(&mut tree.document);
        let spec = convert::to_spec(&tree, document, Arc::from(source), origin)?;
        validate::check(&spec, &tree, origin)?;
        unsupported::refuse(&spec, &tree, origin)?;
        Ok(spec)
    }

    /// Parse spec bytes as read from a file: they must be UTF-8, and the
    /// first byte that is not gets its line and column.
    pub fn parse_bytes(source: &[u8], origin: &str) -> Result<Spec, SpecError> {
        Spec::parse(utf8(source, origin)?, origin)
    }

    /// Read and parse a spec file.
    #[expect(
        clippy::disallowed_methods,
        reason = "a spec is YAML, never a database file; `serve` loads it before opening its store"
    )]
    pub fn load(path: &Path) -> Result<Spec, SpecError> {
        let origin = path.display().to_string();
        let source = std::fs::read(path).map_err(|e| SpecError::io(&origin, e))?;
        Spec::parse_bytes(&source, &origin)
    }

    pub fn step_index(&self, id: &str) -> Option<usize> {
        self.steps.iter().position(|s| s.id == id)
    }

    /// True when any step can pause for a person.
    pub fn has_gate(&self) -> bool {
        self.steps.iter().any(|s| self.step_can_pause(s))
    }

    pub fn step_can_pause(&self, step: &Step) -> bool {
        match &step.kind {
            StepKind::Approval(_) | StepKind::Gate(_) => true,
            StepKind::Model(m) => m.guardrail.is_some(),
            StepKind::Tool { tool, .. } => self
                .tools
                .get(tool)
                .map(|t| t.approval_required)
                .unwrap_or(false),
            StepKind::Dedupe(_) | StepKind::Set { .. } => false,
        }
    }

    /// The team approval policy of the gate at step `step_index`: a tool
    /// step's tool gate, an approval step, an `if` step, a model step's
    /// guardrail. None when the step has no gate (or no such step).
    pub fn gate_policy(&self, step_index: usize) -> Option<&GatePolicy> {
        self.policy_of(self.steps.get(step_index)?)
    }

    /// [`Spec::gate_policy`] of a step of this spec.
    pub(crate) fn policy_of<'s>(&'s self, step: &'s Step) -> Option<&'s GatePolicy> {
        match &step.kind {
            StepKind::Approval(a) => Some(&a.policy),
            StepKind::Gate(g) => Some(&g.policy),
            StepKind::Model(m) => m.guardrail.as_ref().map(|g| &g.policy),
            StepKind::Tool { tool, .. } => self
                .tools
                .get(tool)
                .filter(|t| t.approval_required)
                .map(|t| &t.policy),
            StepKind::Dedupe(_) | StepKind::Set { .. } => None,
        }
    }

    /// Who may decide `record` under this spec: its `approvals.approvers`,
    /// and whether those who asked for the record's gate may decide it
    /// (the gate of the same step id here, else `approvals.allow_self_approval`;
    /// a gate request follows `approvals.allow_self_approval`, which a
    /// request cannot change). A record with a roster keeps the setting it
    /// paused with (see [`crate::domain::links::may_decide_record`]).
    pub fn deciders_of(
        &self,
        record: &crate::domain::pending_approval::ApprovalRecord,
    ) -> crate::domain::links::Deciders<'_> {
        let own_gate = (!record.is_gate_request())
            .then(|| self.steps.iter().find(|s| s.id == record.step_id))
            .flatten()
            .and_then(|step| self.policy_of(step));
        crate::domain::links::Deciders {
            approvers: self.approvals.approvers.as_deref(),
            allow_self_approval: own_gate.map_or(
                self.approvals.allow_self_approval,
                GatePolicy::self_approval_allowed,
            ),
        }
    }

    /// The `on_spec_change` policy that applies to `step`'s gate: the
    /// gate's own, else `approvals.on_spec_change`. A step that cannot
    /// pause has no gate of its own, so it gets the spec's.
    pub fn on_spec_change(&self, step: &Step) -> OnSpecChange {
        let own = match &step.kind {
            StepKind::Approval(a) => a.on_spec_change,
            StepKind::Gate(g) => g.on_spec_change,
            StepKind::Model(m) => m.guardrail.as_ref().and_then(|g| g.on_spec_change),
            StepKind::Tool { tool, .. } => self
                .tools
                .get(tool)
                .filter(|t| t.approval_required)
                .and_then(|t| t.on_spec_change),
            StepKind::Dedupe(_) | StepKind::Set { .. } => None,
        };
        own.unwrap_or(self.approvals.on_spec_change)
    }

    /// Every `${NAME}` secret reference in the document, sorted, deduplicated.
    /// The canonical JSON of the document (object keys sorted, compact):
    /// the text [`Spec::hash`] is the SHA-256 of.
    pub fn canonical_json(&self) -> String {
        hash::canonical_text(&self.document)
    }

    pub fn secret_names(&self) -> Vec<String> {
        let mut names = std::collections::BTreeSet::new();
        collect_secret_names(&self.document, &mut names);
        names.into_iter().collect()
    }
}

/// The spec text as UTF-8, or a positioned error at the first bad byte.
/// Never lossy: a replacement character would change what the spec says.
pub fn utf8<'a>(source: &'a [u8], origin: &str) -> Result<&'a str, SpecError> {
    std::str::from_utf8(source).map_err(|e| {
        let at = e.valid_up_to();
        let (line, column) = line_col(source, at);
        let bad: Vec<String> = source[at..]
            .iter()
            .take(e.error_len().unwrap_or(source.len() - at).max(1))
            .map(|b| format!("0x{b:02x}"))
            .collect();
        SpecError::at(
            SpecErrorKind::Syntax,
            origin,
            line,
            column,
            format!(
                "the spec is not valid UTF-8: {} at byte offset {at} (save the file as UTF-8)",
                bad.join(" ")
            ),
        )
    })
}

/// 1-based line and column (in characters) of byte offset `at`, counting
/// lines as YAML does (LF, CRLF or a lone CR) and only the text before it.
fn line_col(source: &[u8], at: usize) -> (usize, usize) {
    let before = String::from_utf8_lossy(&source[..at.min(source.len())]);
    // A byte-order mark is not a column (as in the YAML parser).
    let before = before.strip_prefix('\u{feff}').unwrap_or(&before);
    let (mut line, mut column) = (1, 1);
    let mut chars = before.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\r' if chars.peek() == Some(&'\n') => {}
            '\r' | '\n' => {
                line += 1;
                column = 1;
            }
            _ => column += 1,
        }
    }
    (line, column)
}

fn collect_secret_names(value: &Value, out: &mut std::collections::BTreeSet<String>) {
    match value {
        Value::String(s) => {
            for r in crate::support::secrets::references(s) {
                out.insert(r.name.to_string());
            }
        }
        Value::Array(items) => items.iter().for_each(|v| collect_secret_names(v, out)),
        Value::Object(map) => map.values().for_each(|v| collect_secret_names(v, out)),
        _ => {}
    }
}
