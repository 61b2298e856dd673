//! The one error type of the use cases, with its HTTP status and stable
//! code.
//!
//! Every use case and handler returns `Result<_, ApiError>`; this file
//! alone decides the status code and the stable `code` of each failure, so
//! the codes are the same on every route, in MCP and in the CLI (via
//! `ApprovalError`); `server/http/error.rs` writes it as a response.
//! The domain's errors carry no HTTP status: what each means here is the
//! one match in [`ApiError::status`].
//! The body is always `{"error": {"code": "...", "message": "..."}}`.

use axum::http::StatusCode;
use serde_json::json;

use crate::domain::pending_approval::ApprovalError;
use crate::engine::run::RunError;
use crate::store::StoreError;

#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    /// Bad JSON, wrong types, unknown fields, a bad query parameter.
    #[error("{0}")]
    InvalidRequest(String),

    /// No token, or one that matches no configured token.
    #[error("a valid bearer token is required (Authorization: Bearer <token>)")]
    Unauthorized,

    /// A Slack signature that is missing, stale or does not match: the
    /// verifier's own error, kept as the source.
    #[error("{0}")]
    SlackSignature(#[from] crate::notify::slack::signature::SlackSignatureError),

    /// A webhook signature that is missing, malformed, stale or wrong.
    #[error(transparent)]
    WebhookSignature(#[from] crate::support::webhook_signature::WebhookSignatureError),

    /// A decision refused by the rules (not found, expired, already
    /// resolved, spec changed, forbidden, invalid payload).
    #[error(transparent)]
    Approval(#[from] ApprovalError),

    #[error("no run with id {0}")]
    RunNotFound(String),

    /// No notice in the outbox has this id.
    #[error("no notice with id {0}")]
    NoticeNotFound(String),

    /// A retry of a notice that is not failed or dead.
    #[error("{0}")]
    NoticeNotRetriable(String),

    /// A cancel of a run that has ended (or is stuck).
    #[error("run {run_id} is {status} and cannot be cancelled")]
    RunNotCancellable {
        run_id: String,
        status: &'static str,
    },

    /// `by` is not in the spec's `approvals.approvers`.
    #[error("{by} may not cancel run {run_id}: not in approvals.approvers")]
    CancelForbidden { run_id: String, by: String },
    /// The run is not in a state that allows this (retry a run that is
    /// not stuck or failed; a driver that lost its run).
    #[error("{0}")]
    RunConflict(String),

    /// Not allowed by `approvals.approvers` (an operator's action on a run).
    #[error("{0}")]
    Forbidden(String),

    /// A token whose scope does not allow this route (a requester token
    /// outside `/gates` and `/mcp`).
    #[error(
        "token {name:?} has scope {scope}: it may ask for approvals (/gates, /mcp) but not decide, list or operate"
    )]
    InsufficientScope { name: String, scope: &'static str },

    /// An idempotency key used again with a different request.
    #[error("{0}")]
    IdempotencyConflict(String),

    /// The spec version a pause waits on cannot run in this process
    /// (`RunError::SpecUnavailable`); the approval stays PENDING.
    #[error("{0}")]
    SpecUnavailable(String),

    /// The run exists but never paused, so there is nothing to decide.
    #[error("run {0} has no approval to decide")]
    RunHasNoApproval(String),

    /// A timestamped webhook signature already taken: a copy of a request
    /// that started a run.
    #[error(
        "this signed request was already received; a sender signs each delivery anew (a new t=)"
    )]
    Replayed,

    #[error("no route for {method} {path}")]
    NotFound { method: String, path: String },

    #[error("{method} is not allowed on {path}")]
    MethodNotAllowed { method: String, path: String },

    /// A JSON route called without a JSON Content-Type (what was sent).
    #[error("{0}: this route takes a JSON body; send Content-Type: application/json")]
    UnsupportedMediaType(String),

    /// A spec route (`POST /specs/plan`) called without a YAML or plain
    /// text Content-Type (what was sent).
    #[error(
        "{0}: this route takes a spec's YAML; send Content-Type: application/yaml, text/yaml or text/plain"
    )]
    UnsupportedSpecMediaType(String),

    #[error("the request body is larger than {limit} bytes")]
    PayloadTooLarge { limit: usize },

    /// Without API tokens, a `Host` that is not a loopback name (DNS
    /// rebinding), or a malformed or repeated `Host`.
    #[error("{0}")]
    BadHost(String),

    /// An `Origin` that is not this server's own (a page of another site).
    #[error("{0}")]
    ForbiddenOrigin(String),

    /// The body did not arrive within `--body-timeout` of the headers.
    #[error("the request body did not arrive within {after} of the headers")]
    BodyTimeout { after: String },

    /// A request line or header hyper could not parse.
    #[error("the request is not valid HTTP/1.1 (request line or a header is malformed)")]
    MalformedHead,

    #[error("the request URI is too long")]
    UriTooLong,

    #[error(
        "the request line and headers must fit in {max_bytes} bytes and {max_headers} header fields"
    )]
    HeadersTooLarge {
        max_bytes: usize,
        max_headers: usize,
    },

    /// The server cannot serve this request as configured (a webhook
    /// secret that is not set). The detail goes to the log, not the caller.
    #[error("{0}")]
    Unavailable(&'static str),

    /// The store is busy: another connection held its write lock past the
    /// busy timeout (SQLITE_BUSY). Not a failure of the request: 503 with
    /// `Retry-After`. The detail (it names the file) goes to the log.
    #[error("the store is busy: another process holds its write lock; retry shortly")]
    StoreBusy(String),

    /// Anything else (the store failed). Logged in full; the caller gets a
    /// generic message, since store errors can name files and hosts.
    #[error("internal error: {0}")]
    Internal(String),
}

/// One stable error code as the reference (docs/reference/errors.md)
/// describes it; its HTTP statuses come from [`ApiError::status`] itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ErrorCode {
    pub code: &'static str,
    /// What it means, and what a client does about it.
    pub meaning: &'static str,
}

/// `GET /readyz`'s code when the store is not reachable or writable, a
/// background task died and waits to restart, or the server is shutting
/// down (its body is not an [`ApiError`]'s).
pub const NOT_READY: &str = "not_ready";

/// Every code an answer's `error.code` can hold. A test requires exactly
/// the codes [`ApiError::code`] gives for one value of each variant (plus
/// [`NOT_READY`]), so a new code without an entry here fails it.
pub const CODES: &[ErrorCode] = &[
    ErrorCode {
        code: "already_resolved",
        meaning: "The approval was already decided (or expired or cancelled); the message says how and by whom. A repeat of the same decision by the same decider answers 200 instead.",
    },
    ErrorCode {
        code: "already_voted",
        meaning: "This voter already voted on this gate.",
    },
    ErrorCode {
        code: "approval_expired",
        meaning: "The approval's time ran out before the decision.",
    },
    ErrorCode {
        code: "approval_not_found",
        meaning: "No approval with this key (or the run never paused, or the key is empty).",
    },
    ErrorCode {
        code: "bad_host",
        meaning: "Without API tokens, a `Host` that is not a loopback name (DNS rebinding), or a malformed or repeated `Host`.",
    },
    ErrorCode {
        code: "forbidden",
        meaning: "The caller may not do this: not in `approvals.approvers` or the gate's groups, or deciding their own request.",
    },
    ErrorCode {
        code: "forbidden_origin",
        meaning: "An `Origin` that is not this server's own (a page of another site).",
    },
    ErrorCode {
        code: "headers_too_large",
        meaning: "The request line and headers are larger than the server accepts.",
    },
    ErrorCode {
        code: "idempotency_conflict",
        meaning: "An idempotency key used again with a different request.",
    },
    ErrorCode {
        code: "insufficient_scope",
        meaning: "A requester token outside `/gates` and `/mcp`: it may ask for approvals but not decide, list or operate.",
    },
    ErrorCode {
        code: "internal_error",
        meaning: "The server failed (the store, usually); the detail is in the server log, never in the answer.",
    },
    ErrorCode {
        code: "invalid_input",
        meaning: "The approver's input does not fit the gate's form; `error.errors` lists each problem with its JSON Pointer.",
    },
    ErrorCode {
        code: "invalid_request",
        meaning: "Bad JSON, wrong types, unknown fields, a bad query parameter or cursor, a missing required reason, or malformed HTTP.",
    },
    ErrorCode {
        code: "method_not_allowed",
        meaning: "The path exists but not with this method.",
    },
    ErrorCode {
        code: NOT_READY,
        meaning: "`GET /readyz` only: the store is not reachable or writable, a background task died and waits to restart, or the server is shutting down.",
    },
    ErrorCode {
        code: "not_due",
        meaning: "The gate's time has not run out yet, so it cannot be expired now.",
    },
    ErrorCode {
        code: "not_found",
        meaning: "No route for this method and path.",
    },
    ErrorCode {
        code: "notice_not_found",
        meaning: "No notice in the outbox has this id.",
    },
    ErrorCode {
        code: "notice_not_retriable",
        meaning: "A retry of a notice that is neither failed nor dead.",
    },
    ErrorCode {
        code: "payload_changed",
        meaning: "The vote names a payload that is no longer the gate's current one (a modify came first).",
    },
    ErrorCode {
        code: "payload_too_large",
        meaning: "The request body is larger than `--max-body-bytes`.",
    },
    ErrorCode {
        code: "replayed",
        meaning: "A signed webhook request already received; a sender signs each delivery anew.",
    },
    ErrorCode {
        code: "request_timeout",
        meaning: "The body did not arrive within `--body-timeout` of the headers.",
    },
    ErrorCode {
        code: "run_conflict",
        meaning: "The run is not in a state that allows this (a retry of a run that is neither stuck nor failed).",
    },
    ErrorCode {
        code: "run_not_cancellable",
        meaning: "The run has ended (or is stuck) and cannot be cancelled.",
    },
    ErrorCode {
        code: "run_not_found",
        meaning: "No run with this id.",
    },
    ErrorCode {
        code: "spec_changed",
        meaning: "The approval paused under another spec version than this server runs; see `approvals migrate` and `on_spec_change: auto`.",
    },
    ErrorCode {
        code: "spec_unavailable",
        meaning: "The spec version the pause waits on cannot run in this process; the approval stays pending.",
    },
    ErrorCode {
        code: "store_busy",
        meaning: "Another process holds the store's write lock; retry after `Retry-After` seconds.",
    },
    ErrorCode {
        code: "unauthorized",
        meaning: "No bearer token, an unknown one, or a Slack or webhook signature that is missing, stale or wrong.",
    },
    ErrorCode {
        code: "unavailable",
        meaning: "The server cannot serve this as configured (a webhook secret that is not set); the detail is in the log.",
    },
    ErrorCode {
        code: "unsupported_media_type",
        meaning: "The body's Content-Type is not the one the route takes (JSON, or a spec's YAML).",
    },
    ErrorCode {
        code: "uri_too_long",
        meaning: "The request URI is too long.",
    },
];

/// Seconds a client is told to wait before retrying a busy store: the
/// server already waited out its busy timeout, so a short pause is enough
/// for the other writer's transaction to end.
pub const BUSY_RETRY_AFTER_SECS: u64 = 1;

impl ApiError {
    pub fn status(&self) -> StatusCode {
        match self {
            ApiError::InvalidRequest(_) => StatusCode::BAD_REQUEST,
            ApiError::Unauthorized
            | ApiError::SlackSignature(_)
            | ApiError::WebhookSignature(_) => StatusCode::UNAUTHORIZED,
            ApiError::Approval(e) => match e {
                ApprovalError::NotFound { .. } => StatusCode::NOT_FOUND,
                ApprovalError::Expired { .. } => StatusCode::GONE,
                ApprovalError::AlreadyResolved { .. }
                | ApprovalError::SpecChanged { .. }
                | ApprovalError::NotOnVersion { .. }
                | ApprovalError::AlreadyVoted { .. }
                | ApprovalError::PayloadChanged { .. }
                | ApprovalError::NotDue { .. } => StatusCode::CONFLICT,
                ApprovalError::Forbidden { .. }
                | ApprovalError::NotInGroups { .. }
                | ApprovalError::SelfApproval { .. } => StatusCode::FORBIDDEN,
                ApprovalError::InvalidPayload { .. }
                | ApprovalError::ReasonRequired { .. }
                | ApprovalError::InvalidInput { .. } => StatusCode::BAD_REQUEST,
            },
            ApiError::RunNotFound(_)
            | ApiError::NoticeNotFound(_)
            | ApiError::RunHasNoApproval(_)
            | ApiError::NotFound { .. } => StatusCode::NOT_FOUND,
            ApiError::MethodNotAllowed { .. } => StatusCode::METHOD_NOT_ALLOWED,
            ApiError::Replayed
            | ApiError::NoticeNotRetriable(_)
            | ApiError::RunNotCancellable { .. }
            | ApiError::RunConflict(_)
            | ApiError::IdempotencyConflict(_)
            | ApiError::SpecUnavailable(_) => StatusCode::CONFLICT,
            ApiError::CancelForbidden { .. } | ApiError::InsufficientScope { .. } => {
                StatusCode::FORBIDDEN
            }
            ApiError::PayloadTooLarge { .. } => StatusCode::PAYLOAD_TOO_LARGE,
            ApiError::BadHost(_) | ApiError::ForbiddenOrigin(_) | ApiError::Forbidden(_) => {
                StatusCode::FORBIDDEN
            }
            ApiError::BodyTimeout { .. } => StatusCode::REQUEST_TIMEOUT,
            ApiError::MalformedHead => StatusCode::BAD_REQUEST,
            ApiError::UriTooLong => StatusCode::URI_TOO_LONG,
            ApiError::HeadersTooLarge { .. } => StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
            ApiError::UnsupportedMediaType(_) | ApiError::UnsupportedSpecMediaType(_) => {
                StatusCode::UNSUPPORTED_MEDIA_TYPE
            }
            ApiError::Unavailable(_) | ApiError::StoreBusy(_) => StatusCode::SERVICE_UNAVAILABLE,
            ApiError::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    /// Stable machine-readable code.
    pub fn code(&self) -> &'static str {
        match self {
            ApiError::InvalidRequest(_) | ApiError::MalformedHead => "invalid_request",
            ApiError::Unauthorized
            | ApiError::SlackSignature(_)
            | ApiError::WebhookSignature(_) => "unauthorized",
            ApiError::Approval(e) => e.code(),
            ApiError::RunNotFound(_) => "run_not_found",
            ApiError::RunHasNoApproval(_) => "approval_not_found",
            ApiError::RunConflict(_) => "run_conflict",
            ApiError::SpecUnavailable(_) => "spec_unavailable",
            ApiError::Forbidden(_) => "forbidden",
            ApiError::InsufficientScope { .. } => "insufficient_scope",
            ApiError::IdempotencyConflict(_) => "idempotency_conflict",
            ApiError::NotFound { .. } => "not_found",
            // Not `not_found`: that code means no route, and a client (and
            // the document's tests) tell the two apart, as `run_not_found`.
            ApiError::NoticeNotFound(_) => "notice_not_found",
            ApiError::NoticeNotRetriable(_) => "notice_not_retriable",
            ApiError::MethodNotAllowed { .. } => "method_not_allowed",
            ApiError::Replayed => "replayed",
            ApiError::RunNotCancellable { .. } => "run_not_cancellable",
            ApiError::CancelForbidden { .. } => "forbidden",
            ApiError::PayloadTooLarge { .. } => "payload_too_large",
            ApiError::BadHost(_) => "bad_host",
            ApiError::ForbiddenOrigin(_) => "forbidden_origin",
            ApiError::BodyTimeout { .. } => "request_timeout",
            ApiError::UriTooLong => "uri_too_long",
            ApiError::HeadersTooLarge { .. } => "headers_too_large",
            ApiError::UnsupportedMediaType(_) | ApiError::UnsupportedSpecMediaType(_) => {
                "unsupported_media_type"
            }
            ApiError::Unavailable(_) => "unavailable",
            ApiError::StoreBusy(_) => "store_busy",
            ApiError::Internal(_) => "internal_error",
        }
    }

    pub fn invalid(message: impl Into<String>) -> ApiError {
        ApiError::InvalidRequest(message.into())
    }

    /// The JSON body: `{"error": {"code", "message"}}`. An internal error's
    /// detail is logged, never sent (store errors can name files and hosts);
    /// a busy store's detail likewise.
    pub fn body(&self) -> serde_json::Value {
        let mut body =
            json!({ "error": { "code": self.code(), "message": self.public_message() } });
        // An input that does not fit a gate's form: each error with its
        // path, for a client to show beside its field.
        if let ApiError::Approval(ApprovalError::InvalidInput { errors, .. }) = self {
            body["error"]["errors"] = json!(errors);
        }
        body
    }

    /// The message a caller is told: the error's own, except an internal
    /// error's or a busy store's detail, which is logged instead.
    pub fn public_message(&self) -> String {
        match self {
            ApiError::Internal(detail) => {
                tracing::error!(error = %detail, "request failed");
                "internal error; see the server log".to_string()
            }
            ApiError::StoreBusy(detail) => {
                tracing::warn!(error = %detail, "store busy: answered 503 with Retry-After");
                self.to_string()
            }
            other => other.to_string(),
        }
    }
}

impl From<RunError> for ApiError {
    fn from(e: RunError) -> Self {
        match e {
            RunError::Approval(a) => ApiError::Approval(a),
            RunError::Store(s) => s.into(),
            // Another agent's key is not this server's business: it does
            // not exist here.
            RunError::WrongAgent { key, .. } => ApiError::Approval(ApprovalError::NotFound { key }),
            RunError::NoPendingApproval(run_id) => ApiError::RunHasNoApproval(run_id),
            RunError::CancelForbidden { run_id, by } => ApiError::CancelForbidden { run_id, by },
            e @ RunError::NotDriven { .. } => ApiError::RunConflict(e.to_string()),
            e @ (RunError::Forbidden { .. } | RunError::MigrateForbidden { .. }) => {
                ApiError::Forbidden(e.to_string())
            }
            e @ RunError::SpecUnavailable { .. } => ApiError::SpecUnavailable(e.to_string()),
            // A 500 as any failure that is not the client's: the detail is
            // logged, not sent.
            e @ RunError::TaskDropped { .. } => ApiError::Internal(e.to_string()),
        }
    }
}

impl From<StoreError> for ApiError {
    fn from(e: StoreError) -> Self {
        match e {
            StoreError::Approval(a) => ApiError::Approval(a),
            StoreError::RunNotFound(id) => ApiError::RunNotFound(id),
            StoreError::RunNotCancellable { run_id, status } => ApiError::RunNotCancellable {
                run_id,
                status: status.as_str(),
            },
            e @ StoreError::WrongRunStatus { .. } => ApiError::RunConflict(e.to_string()),
            StoreError::InvalidCursor(c) => ApiError::InvalidRequest(format!(
                "malformed cursor {c:?}: pass next_cursor from a previous page"
            )),
            busy if busy.is_busy() => ApiError::StoreBusy(busy.to_string()),
            other => ApiError::Internal(other.to_string()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::notify::slack::signature::SlackSignatureError;
    use std::error::Error as _;

    fn approval(e: ApprovalError) -> (u16, &'static str) {
        let e = ApiError::from(e);
        (e.status().as_u16(), e.code())
    }

    #[test]
    fn refused_decisions_map_to_their_statuses_here() {
        let key = || "k".to_string();
        let at = chrono::Utc::now();
        assert_eq!(
            approval(ApprovalError::NotFound { key: key() }),
            (404, "approval_not_found")
        );
        assert_eq!(
            approval(ApprovalError::Expired {
                key: key(),
                expired_at: at
            }),
            (410, "approval_expired")
        );
        assert_eq!(
            approval(ApprovalError::AlreadyResolved {
                key: key(),
                status: crate::ApprovalStatus::Approved,
                decided_by: None,
                decided_at: None
            }),
            (409, "already_resolved")
        );
        assert_eq!(
            approval(ApprovalError::SpecChanged {
                key: key(),
                paused_with: "a".into(),
                current: "b".into()
            }),
            (409, "spec_changed")
        );
        assert_eq!(
            approval(ApprovalError::Forbidden {
                key: key(),
                decided_by: "m".into()
            }),
            (403, "forbidden")
        );
        assert_eq!(
            approval(ApprovalError::InvalidPayload {
                key: key(),
                reason: "r".into()
            }),
            (400, "invalid_request")
        );
    }

    #[test]
    fn a_slack_signature_error_is_kept_as_the_source() {
        let e = ApiError::from(SlackSignatureError::Stale);
        assert_eq!((e.status().as_u16(), e.code()), (401, "unauthorized"));
        assert_eq!(e.to_string(), SlackSignatureError::Stale.to_string());
        let source = e
            .source()
            .and_then(|s| s.downcast_ref::<SlackSignatureError>());
        assert_eq!(source, Some(&SlackSignatureError::Stale));
    }

    #[test]
    fn a_dropped_task_is_an_internal_error_as_a_store_failure_is() {
        let dropped = ApiError::from(RunError::TaskDropped {
            task: "claiming the decision",
        });
        assert_eq!(dropped.status(), StatusCode::INTERNAL_SERVER_ERROR);
        assert_eq!(dropped.code(), "internal_error");
        let store = ApiError::from(RunError::Store(StoreError::Database("gone".into())));
        assert_eq!(
            (dropped.status(), dropped.code()),
            (store.status(), store.code())
        );
    }
}
