//! GET /openapi.json, and what it says of each route: which request and
//! response types a handler takes and answers with.
//!
//! The shapes are the types' own (`service/schema.rs`); this table only
//! pairs them with the routes, here beside the router, and a test holds it
//! to the router's `.route(...)` lines so that neither can gain a route
//! the other lacks.

use axum::Json;
use axum::extract::State;
use serde_json::Value;

use super::{approvals, batch, gates, migrate, notifications, runs};
use crate::engine::deploy_plan::DeployPlan;
use crate::engine::run::MigrateReport;
use crate::server::http::extract::WaitParam;
use crate::server::http::state::AppState;
use crate::server::openapi::{Auth, Operation};
use crate::service::batch::BatchResults;
use crate::service::gates::{GateView, NewGate};
use crate::service::notices::{NoticeView, NoticesPage, Retried};
use crate::service::views::{
    ApprovalView, ApprovalsPage, CancelView, DecisionView, Health, RunStarted, RunView, RunsPage,
};
use crate::service::votes::VotesView;

/// GET /openapi.json: the document for this server's spec.
pub(super) async fn document(State(state): State<AppState>) -> Json<Value> {
    Json(crate::server::openapi::document(state.agent.spec()))
}

/// The approvals inbox's routes (server/ui.rs), left out of the
/// document on purpose: they answer HTML pages, form posts and event
/// streams for people in a browser, with a session cookie or a signed link
/// rather than a bearer token, and their shapes are the page contract's
/// (ids and form fields), not JSON a client codes against. A test holds
/// this list to the inbox's router, so a new page must be listed here.
#[cfg(test)]
const PAGES: [(&str, &str); 22] = [
    ("get", "/a/{key}/{signature}"),
    // the payload, whole, as a download
    ("get", "/a/{key}/{signature}/payload"),
    ("get", "/a/{key}/{signature}/stream"),
    ("get", "/ui"),
    ("get", "/ui/"),
    ("get", "/ui/approvals/{key}"),
    ("get", "/ui/approvals/{key}/payload"),
    ("get", "/ui/assets/{file}"),
    ("get", "/ui/history"),
    ("get", "/ui/login"),
    ("get", "/ui/notifications"),
    ("get", "/ui/runs"),
    ("get", "/ui/runs/{id}"),
    ("get", "/ui/runs/{id}/stream"),
    ("get", "/ui/stream"),
    ("post", "/a/{key}/{signature}"),
    ("post", "/ui/approvals/{key}"),
    ("post", "/ui/login"),
    ("post", "/ui/logout"),
    ("post", "/ui/notifications/retry"),
    ("post", "/ui/notifications/{id}/retry"),
    // retry, fail, cancel
    ("post", "/ui/runs/{id}/{action}"),
];

/// Every route of the router (the spec's webhook, routed by the fallback,
/// is added by `openapi::document`).
pub(crate) fn operations() -> Vec<Operation> {
    vec![
        Operation::new("post", "/runs", "createRun", "Start a run")
            .describe("Starts a run with `input`. Answers 202 at once with `run_id`, or with `?wait=true` 200 and the run once it pauses or ends: its `id`, and at a pause `pending_approval.key`, the key that decides it. The wait lasts at most 60 s: a run still `running` then is answered as it stands.")
            .tag("runs")
            .query::<WaitParam>()
            .body::<runs::CreateBody>()
            .json::<RunStarted>(202, "The run is stored and starting.")
            .json::<RunView>(200, "With `?wait=true`: the run at its first pause or its end, or as it stands after 60 s."),
        Operation::new("get", "/runs", "listRuns", "List runs")
            .describe("This agent's runs, newest first, a page at a time.")
            .tag("runs")
            .query::<runs::ListParams>()
            .json::<RunsPage>(200, "One page of runs."),
        Operation::new("get", "/runs/{id}", "showRun", "Show a run")
            .tag("runs")
            .json::<RunView>(200, "The run, with the approval it waits on."),
        Operation::new("get", "/runs/{id}/events", "streamRunEvents", "Stream a run's events")
            .describe("Server-Sent Events: the stored events (after `Last-Event-ID`), then live ones until the run's final event. Each event's `id` is its `seq`; its `data` is the event as JSON.")
            .tag("runs")
            .header("Last-Event-ID", false, "Resume after this event `seq`.")
            .event_stream(200, "The run's events."),
        Operation::new("post", "/runs/{id_or_key}/approve", "decideRun", "Decide a run's approval")
            .describe("Approves (`approved: true`, with `payload` to approve an edited payload) or rejects the run's latest gate, named by the run id or by the approval key.")
            .tag("runs")
            .query::<WaitParam>()
            .body::<runs::DecideBody>()
            .json::<DecisionView>(200, "The decision as recorded."),
        Operation::new("post", "/runs/{id}/cancel", "cancelRun", "Cancel a run")
            .describe("Ends a waiting or running run `cancelled`; its pending approval becomes CANCELLED.")
            .tag("runs")
            .body::<runs::CancelBody>()
            .json::<CancelView>(200, "What the cancel did."),
        Operation::new("post", "/runs/{id}/retry", "retryRun", "Retry a stuck or failed run")
            .describe("Drives a `stuck` or `failed` run on from its last durable point.")
            .tag("runs")
            .query::<WaitParam>()
            .body::<runs::RetryBody>()
            .json::<RunView>(200, "The run as the retry left it (with `?wait=true`, at its next pause or end)."),
        Operation::new("post", "/runs/{id}/fail", "failRun", "Fail a stuck run")
            .tag("runs")
            .body::<runs::FailBody>()
            .json::<RunView>(200, "The run, now `failed`."),
        Operation::new("get", "/approvals", "listApprovals", "List pending approvals")
            .describe("Pending, unexpired approvals of this agent, newest first, a page at a time (at most `limit` records and about 2 MiB of their JSON, at least one record); `step` and `q` narrow the list (a cursor continues the list it came from).")
            .tag("approvals")
            .query::<approvals::ListParams>()
            .json::<ApprovalsPage>(200, "One page of pending approvals."),
        Operation::new("get", "/approvals/{key}", "showApproval", "Show an approval")
            .describe("One approval record, whatever its status (an overdue one reads EXPIRED).")
            .tag("approvals")
            .json::<ApprovalView>(200, "The record."),
        Operation::new("post", "/approvals/{key}/approve", "approveApproval", "Approve")
            .describe("Approves as asked, or with `payload` approves an edited payload (MODIFIED). On a gate with rules (DESIGN §13) this is a vote: the answer's `vote` says so while the gate waits for more. `payload_digest` (the approval's, as shown) makes the decision hold only for that payload: 409 `payload_changed` otherwise.")
            .tag("approvals")
            .query::<WaitParam>()
            .body::<approvals::ApproveBody>()
            .json::<DecisionView>(200, "The decision as recorded."),
        Operation::new("post", "/approvals/{key}/reject", "rejectApproval", "Reject")
            .tag("approvals")
            .query::<WaitParam>()
            .body::<approvals::RejectBody>()
            .json::<DecisionView>(200, "The decision as recorded."),
        Operation::new("post", "/approvals/batch", "decideApprovals", "Decide many approvals")
            .describe("Decides each entry on its own, as `POST /approvals/{key}/approve` or `/reject` would (its own claim and `payload_digest` check; an approve with `payload` is a modify), at most 8 at a time, and answers one result per entry in the order given: the record's status after the decision (`PENDING` with `progress` for a vote that left a gate with rules open; `repeated` when the caller had already made that decision), or `refused` with the `error` the single-key route would answer. Decided runs resume in the background. The whole batch is refused (400) only when the body is malformed: no entries or more than 500, a key given twice, a reject with a payload, a null payload.")
            .tag("approvals")
            .body::<batch::BatchBody>()
            .json::<BatchResults>(200, "Each entry's result, in order."),
        Operation::new("get", "/approvals/{key}/votes", "listVotes", "A gate's votes")
            .describe("The ledger of votes on a gate (DESIGN §13): each vote's voter, decision, reason, the rule it counted toward, its channel and the digest of the payload it was cast on, oldest first, superseded votes included; each rule's members and progress; who may not vote. A plain gate's ledger has at most its one decision.")
            .tag("approvals")
            .json::<VotesView>(200, "The ledger and the progress."),
        Operation::new("post", "/approvals/migrate", "migrateApprovals", "Move approvals onto the served spec")
            .describe("Moves pending approvals made under older versions of the spec, with their runs, onto the version this server serves (`tollgate approvals migrate`): exactly one of `key`, `all`, `step`, `from`; `map` names renamed gates; `dry_run` changes nothing. Each key has its own result; one that does not fit is `refused` with a reason and stays as it was. The caller must be on `approvals.approvers` when it is set (403).")
            .tag("approvals")
            .body::<migrate::MigrateBody>()
            .json::<MigrateReport>(200, "Each selected approval's result."),
        Operation::new("post", "/gates", "requestApproval", "Ask for an approval")
            .describe("Asks for a person's approval on behalf of any agent (DESIGN §14): stored as a pending approval of this agent, listed, posted, linked and decided like any other (its `approvals.approvers`, or the request's own `policy`), never by whoever asked: the token and the `requester` it names are barred from deciding (403 `forbidden`). A `policy` may only narrow who decides, as the served spec's `approvals.requests` allows (by default `rules` within the approvers, `require_reason`, `ttl`, `on_timeout` of `expire`, `reject` or `continue`, up to 3 reminders); anything else is 400 `invalid_request` naming the field. Answers 201 with its `key` at once; follow it with `GET /gates/{key}?wait=30s`. A repeated `idempotency_key` from the same token answers 200 with the approval it first made; with a different request, 409 `idempotency_conflict`. A `requester` token may call this (and nothing that decides).")
            .tag("gates")
            .body::<NewGate>()
            .json::<GateView>(201, "Stored: the request, pending.")
            .json::<GateView>(200, "The approval an earlier request with this idempotency key made, as it stands."),
        Operation::new("get", "/gates/{key}", "getApproval", "A gate request, or wait for its decision")
            .describe("The request as it stands: `state` is `pending`, `decided` (`approved` says which way and `decision.by` who decided: never whoever asked; `decision.payload` is what to act on, as approved or edited), `expired` or `cancelled`. With `?wait=30s` the answer comes once it is no longer pending, or when the wait (at most 60 s) is over, pending still: ask again. Waiting changes nothing; a waiter that disconnects leaves the request as it was. A `requester` token sees only its own requests (another's key is 404).")
            .tag("gates")
            .query::<gates::WaitParams>()
            .json::<GateView>(200, "The request."),
        Operation::new("delete", "/gates/{key}", "cancelApproval", "Cancel a gate request")
            .describe("Cancels a pending request: CANCELLED, in one write, at most once. Cancelling one already cancelled answers with it; one decided is 409 `already_resolved`, one expired 410 `approval_expired`. The token that asked may cancel; another must be on `approvals.approvers` when it is set (403).")
            .tag("gates")
            .query::<gates::CancelParams>()
            .json::<GateView>(200, "The request, now `cancelled`."),
        Operation::new("post", "/mcp", "mcp", "MCP server (Streamable HTTP)")
            .describe("The Model Context Protocol (protocol versions 2025-06-18 and 2025-03-26) over Streamable HTTP, stateless: a JSON-RPC 2.0 message (or a batch) per POST; a request is answered as `application/json`, a notification or response with 202 and no body. Tools: `request_approval` (the body of `POST /gates`), `wait_for_approval` (`key`, `timeout_seconds` up to 60), `get_approval` and `cancel_approval` (`key`, `reason`), each answering the request as `GET /gates/{key}` does, as `structuredContent` and as text; `tools/list` gives their input and output schemas. Arguments that do not fit are JSON-RPC error -32602 (nothing is stored); a refusal of the service (not found, already decided, `idempotency_conflict`) is a tool result with `isError: true` and the API's error body as text. No session id is issued and no stream opened (GET is 405). A `requester` token may call this. An unsupported `MCP-Protocol-Version` header is 400. A batch's calls run concurrently, at most 8 at once, answered in the batch's order; a batch of more than 32 messages is refused whole (400, error -32600), as is a message with a key twice in one object.")
            .tag("gates")
            .header("MCP-Protocol-Version", false, "The protocol version `initialize` settled on (2025-06-18 or 2025-03-26).")
            .body::<Value>()
            .json::<Value>(200, "The JSON-RPC response (an array for a batch).")
            .empty(202, "A notification or a response: taken, nothing to answer.")
            .json::<Value>(400, "Not JSON, not JSON-RPC, or an unsupported `MCP-Protocol-Version`: a JSON-RPC error with a null `id`."),
        Operation::new("get", "/notifications", "listNotifications", "List notices")
            .describe("The outbox (DESIGN §14): every notice a change to an approval wrote (webhook, email, Slack), newest first, a page at a time; `status` (repeatable), `key` and `channel` narrow the list. Targets are shown as the spec wrote them (`${NAME}` references), never resolved.")
            .tag("notifications")
            .query::<notifications::ListParams>()
            .json::<NoticesPage>(200, "One page of notices."),
        Operation::new("get", "/notifications/{id}", "showNotification", "Show a notice")
            .tag("notifications")
            .json::<NoticeView>(200, "The notice, with its body."),
        Operation::new("post", "/notifications/{id}/retry", "retryNotification", "Retry a notice")
            .describe("Makes a `failed` or `dead` notice due now, with a fresh retry window (and enables its webhook endpoint again if a 410 disabled it). 409 `notice_not_retriable` for a notice that is pending or sent; 404 `notice_not_found` for an unknown id.")
            .tag("notifications")
            .json::<Retried>(200, "The notice is due again (`retried`: 1)."),
        Operation::new("post", "/notifications/retry", "retryDeadNotifications", "Retry every dead notice")
            .describe("With `{\"all_dead\": true}`: makes every `dead` notice due now, with a fresh retry window.")
            .tag("notifications")
            .body::<notifications::RetryBody>()
            .json::<Retried>(200, "How many notices are due again."),
        Operation::new("get", "/specs/plan", "planServedSpec", "Plan the served spec")
            .describe("The deploy preview (`tollgate plan --json`) of the spec this server serves: each pending approval on another stored version of the agent, classified, with what approving it will do under this spec's `on_spec_change`; each such version's step-level diff; live runs on other versions.")
            .tag("specs")
            .json::<DeployPlan>(200, "The plan."),
        Operation::new("post", "/specs/plan", "planSpec", "Plan a spec before deploying it")
            .describe("The deploy preview of the spec in the body (its YAML, at most 1 MiB) against the versions this server's store holds. A spec that does not parse is 400 `invalid_request` with its line and column.")
            .tag("specs")
            .text_body(
                &["application/yaml", "text/yaml", "text/plain"],
                "The spec about to be deployed, as its YAML file holds it.",
            )
            .json::<DeployPlan>(200, "The plan."),
        Operation::new("get", "/healthz", "health", "Liveness")
            .describe("Whether the server is up and its store can take writes.")
            .tag("operations")
            .auth(Auth::Public)
            .json::<Health>(200, "The store takes writes.")
            .json::<Health>(503, "The store cannot take writes."),
        Operation::new("get", "/readyz", "ready", "Readiness")
            .describe(
                "Whether this process should get traffic: its store answers a read, every background task (recovery, sweeper, outbox, schedules) runs, and it is not shutting down.",
            )
            .tag("operations")
            .auth(Auth::Public)
            .json::<Health>(200, "Ready (`ready`).")
            .json::<Health>(503, "Not ready (`not_ready`), with the reason."),
        Operation::new("get", "/metrics", "metrics", "Prometheus metrics")
            .describe("Pending approvals by step, decisions by outcome, claim conflicts, runs by status, stuck runs and step durations, in the Prometheus text format 0.0.4.")
            .tag("operations")
            .text(200, crate::engine::metrics::CONTENT_TYPE, "Prometheus text 0.0.4.")
            .json::<Health>(503, "The store did not answer (`store_unavailable`)."),
        Operation::new("get", "/openapi.json", "openapi", "This document")
            .tag("operations")
            .auth(Auth::Public)
            .json::<Value>(200, "The OpenAPI 3.1 document of this server."),
        Operation::new("post", "/slack/actions", "slackActions", "Slack interactivity")
            .describe("A click on Approve or Reject in Slack. Signed by Slack rather than bearer-authenticated; 404 when the spec has no Slack notifier. Answers 200 at once; a click that cannot decide is answered in an ephemeral Slack reply.")
            .tag("slack")
            .auth(Auth::Slack)
            .form("payload", "Slack's interaction payload (JSON text).")
            .empty(200, "Received."),
    ]
}

#[cfg(test)]
mod tests {
    use serde::de::DeserializeOwned;
    use serde_json::{Value, json};

    use super::*;
    use crate::server::openapi::{Components, schema::Schema, schema_errors};

    /// Each body: whether serde takes it into `T` and whether the schema
    /// takes it must agree. Bodies are objects: serde also reads a struct
    /// from a JSON array of its fields in order, a form the document does
    /// not offer (and no client is told of).
    fn agree<T: DeserializeOwned + Schema>(bodies: &[Value]) {
        let mut components = Components::default();
        let schema = T::schema(&mut components);
        let document = json!({ "components": { "schemas": components.into_map() } });
        for body in bodies {
            assert!(body.is_object(), "{body}: bodies here are objects");
            let by_serde = serde_json::from_value::<T>(body.clone()).is_ok();
            let errors = schema_errors(&document, &schema, body);
            assert_eq!(
                by_serde,
                errors.is_empty(),
                "{} {body}: serde {}, schema {errors:?}",
                std::any::type_name::<T>(),
                if by_serde { "accepts" } else { "refuses" }
            );
        }
    }

    #[test]
    fn request_schemas_accept_what_serde_accepts_and_no_more() {
        agree::<runs::CreateBody>(&[
            json!({}),
            json!({ "input": { "a": 1 } }),
            json!({ "input": null }),
            json!({ "inputs": {} }),
        ]);
        agree::<runs::DecideBody>(&[
            json!({ "approved": true }),
            json!({ "approved": false, "reason": "no" }),
            json!({ "approved": true, "reason": null, "payload": { "x": 1 } }),
            json!({}),
            json!({ "approved": "yes" }),
            json!({ "approved": true, "reason": 3 }),
            json!({ "approved": true, "by": "me" }),
        ]);
        agree::<runs::CancelBody>(&[json!({}), json!({ "reason": "x" }), json!({ "why": 1 })]);
        agree::<runs::RetryBody>(&[json!({}), json!({ "wait": true })]);
        agree::<runs::FailBody>(&[
            json!({ "reason": "x" }),
            json!({}),
            json!({ "reason": null }),
        ]);
        agree::<approvals::ApproveBody>(&[
            json!({}),
            json!({ "reason": "ok", "payload": [1] }),
            json!({ "approved": true }),
        ]);
        agree::<batch::BatchBody>(&[
            json!({ "decisions": [] }),
            json!({ "decisions": [{ "key": "k", "decision": "approve" }] }),
            json!({ "decisions": [{ "key": "k", "decision": "reject", "reason": "no", "payload_digest": "sha256:00" }] }),
            json!({ "decisions": [{ "key": "k", "decision": "approve", "payload": { "x": 1 } }] }),
            json!({ "decisions": [{ "key": "k", "decision": "modify" }] }),
            json!({ "decisions": [{ "key": "k" }] }),
            json!({ "decisions": [{ "key": "k", "decision": "approve", "by": "me" }] }),
            json!({ "decision": [] }),
            json!({}),
        ]);
        agree::<crate::service::gates::NewGate>(&[
            json!({ "message": "m", "payload": { "a": 1 } }),
            json!({ "message": "m", "payload": null }),
            json!({ "message": "m" }),
            json!({ "payload": {} }),
            json!({ "message": "m", "payload": 1, "ttl": "4h", "step": "s", "requester": "r", "idempotency_key": "k" }),
            json!({ "message": "m", "payload": 1, "policy": { "rules": [{ "group": "g", "min": 2 }], "remind": ["50%"], "escalate": [{ "after": "1h", "add": ["g"] }] } }),
            json!({ "message": "m", "payload": 1, "policy": { "rules": [{ "group": "g" }] } }),
            json!({ "message": "m", "payload": 1, "policy": { "quorum": 2 } }),
            json!({ "message": "m", "payload": 1, "ttl": 30 }),
            json!({ "message": "m", "payload": 1, "extra": true }),
        ]);
        agree::<approvals::RejectBody>(&[
            json!({}),
            json!({ "reason": "no" }),
            json!({ "payload": {} }),
        ]);
    }

    #[test]
    fn query_schemas_accept_what_serde_accepts() {
        agree::<WaitParam>(&[
            json!({}),
            json!({ "wait": true }),
            json!({ "wait": "yes" }),
            json!({ "w": 1 }),
        ]);
        agree::<runs::ListParams>(&[
            json!({}),
            json!({ "status": "failed", "limit": 5, "cursor": "c" }),
            json!({ "limit": -1 }),
            json!({ "page": 2 }),
        ]);
        agree::<gates::WaitParams>(&[json!({}), json!({ "wait": "30s" }), json!({ "w": 1 })]);
        agree::<gates::CancelParams>(&[json!({}), json!({ "reason": "x" }), json!({ "why": "x" })]);
        agree::<approvals::ListParams>(&[
            json!({ "limit": 10 }),
            json!({ "status": "x" }),
            json!({ "step": "refund", "q": "50%", "limit": 5, "cursor": "c" }),
            json!({ "q": 7 }),
        ]);
    }

    /// The `.route("PATH", METHOD(handler)...)` lines of the API's routes
    /// and of the router (MCP), read from their source: `(method, path)`,
    /// sorted.
    fn routed() -> Vec<(String, String)> {
        let mut routed = routed_in(include_str!("../routes.rs"));
        routed.extend(routed_in(include_str!("../router.rs")));
        routed.sort();
        routed
    }

    fn routed_in(source: &str) -> Vec<(String, String)> {
        let mut routes = Vec::new();
        for (start, _) in source.match_indices(".route(") {
            let rest = &source[start + ".route(".len()..];
            let Some(open) = rest.find('"') else { continue };
            let Some(close) = rest[open + 1..].find('"') else {
                continue;
            };
            let path = &rest[open + 1..open + 1 + close];
            // The method router: up to the `)` that closes `.route(`.
            let mut depth = 1;
            let mut end = rest.len();
            for (i, c) in rest.char_indices() {
                match c {
                    '(' => depth += 1,
                    ')' => {
                        depth -= 1;
                        if depth == 0 {
                            end = i;
                            break;
                        }
                    }
                    _ => {}
                }
            }
            let methods = &rest[open + close + 2..end];
            for method in ["get", "post", "put", "patch", "delete"] {
                let called = methods.match_indices(&format!("{method}(")).any(|(i, _)| {
                    i == 0
                        || !methods[..i]
                            .ends_with(|c: char| c.is_alphanumeric() || c == '_' || c == ':')
                });
                if called {
                    routes.push((method.to_string(), path.to_string()));
                }
            }
        }
        routes.sort();
        routes
    }

    #[test]
    fn every_routed_path_is_documented_and_nothing_else() {
        let routed = routed();
        assert!(
            routed.contains(&("post".into(), "/runs".into())),
            "{routed:?}"
        );
        assert!(
            routed.contains(&("get".into(), "/runs".into())),
            "{routed:?}"
        );
        let mut documented: Vec<(String, String)> = operations()
            .iter()
            .map(|o| (o.method().to_string(), o.path().to_string()))
            .collect();
        documented.sort();
        assert_eq!(documented, routed);
    }

    /// A webhook path may not be or lie under a path the API serves
    /// (`spec::RESERVED_PATHS`, checked when a spec is validated): that
    /// list is exactly the first segments of the router's routes, the
    /// API's and the inbox's, so a new route cannot leave it behind.
    #[test]
    fn the_reserved_webhook_paths_are_the_routes_first_segments() {
        let mut routed = routed();
        routed.extend(routed_in(include_str!("../ui.rs")));
        let firsts: std::collections::BTreeSet<String> = routed
            .iter()
            .map(|(_, path)| {
                let rest = path.trim_start_matches('/');
                format!("/{}", rest.split('/').next().unwrap_or_default())
            })
            .collect();
        let reserved: std::collections::BTreeSet<String> = crate::domain::spec::RESERVED_PATHS
            .iter()
            .map(|p| p.to_string())
            .collect();
        assert_eq!(reserved, firsts);
        for (_, path) in &routed {
            let concrete = path.replace('{', "x").replace('}', "");
            assert!(
                crate::domain::spec::WebhookTrigger::path_problem(&concrete).is_some(),
                "{path} is routed, but a webhook could take it"
            );
        }
    }

    #[test]
    fn the_inbox_pages_are_listed_as_left_out_and_nothing_else() {
        let mut pages: Vec<(String, String)> = PAGES
            .iter()
            .map(|(m, p)| (m.to_string(), p.to_string()))
            .collect();
        pages.sort();
        let routed = routed_in(include_str!("../ui.rs"));
        assert_eq!(routed, pages);
        // None of them is in the document.
        for operation in operations() {
            assert!(
                !PAGES.iter().any(|(_, p)| *p == operation.path()),
                "{}",
                operation.path()
            );
        }
    }
}
