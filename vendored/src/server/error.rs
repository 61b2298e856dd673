//! The one error type of the HTTP API and its mapping to a response.
//!
//! Every handler returns `Result<_, ApiError>`; this file alone decides the
//! status code and the stable `code` of each failure, so the codes are the
//! same on every route (and the same as the CLI's, via `ApprovalError`).
//! The body is always `{"error": {"code": "...", "message": "..."}}`.

use axum::Json;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::json;

use crate::pending_approval::ApprovalError;
use crate::run::RunError;
use crate::store::StoreError;

#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    /// Bad JSON, wrong types, unknown fields, a bad query parameter.
    #[error("{0}")]
    InvalidRequest(String),

    /// No token, or one that matches no configured token.
    #[error("a valid bearer token is required (Authorization: Bearer <token>)")]
    Unauthorized,

    /// A Slack signature that is missing or does not match.
    #[error("{0}")]
    BadSignature(&'static str),

    /// A webhook signature that is missing, malformed, stale or wrong.
    #[error(transparent)]
    WebhookSignature(#[from] crate::server::signature::SignatureError),

    /// A decision refused by the rules (not found, expired, already
    /// resolved, spec changed, forbidden, invalid payload).
    #[error(transparent)]
    Approval(#[from] ApprovalError),

    #[error("no run with id {0}")]
    RunNotFound(String),

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

    #[error("the request body is larger than {limit} bytes")]
    PayloadTooLarge { limit: usize },

    /// The server cannot serve this request as configured (a webhook
    /// secret that is not set). The detail goes to the log, not the caller.
    #[error("{0}")]
    Unavailable(&'static str),

    /// Anything else (the store failed). Logged in full; the caller gets a
    /// generic message, since store errors can name files and hosts.
    #[error("internal error: {0}")]
    Internal(String),
}

impl ApiError {
    pub fn status(&self) -> StatusCode {
        match self {
            ApiError::InvalidRequest(_) => StatusCode::BAD_REQUEST,
            ApiError::Unauthorized | ApiError::BadSignature(_) | ApiError::WebhookSignature(_) => {
                StatusCode::UNAUTHORIZED
            }
            ApiError::Approval(e) => {
                StatusCode::from_u16(e.http_status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR)
            }
            ApiError::RunNotFound(_)
            | ApiError::RunHasNoApproval(_)
            | ApiError::NotFound { .. } => StatusCode::NOT_FOUND,
            ApiError::MethodNotAllowed { .. } => StatusCode::METHOD_NOT_ALLOWED,
            ApiError::Replayed => StatusCode::CONFLICT,
            ApiError::PayloadTooLarge { .. } => StatusCode::PAYLOAD_TOO_LARGE,
            ApiError::UnsupportedMediaType(_) => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            ApiError::Unavailable(_) => StatusCode::SERVICE_UNAVAILABLE,
            ApiError::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    /// Stable machine-readable code.
    pub fn code(&self) -> &'static str {
        match self {
            ApiError::InvalidRequest(_) => "invalid_request",
            ApiError::Unauthorized | ApiError::BadSignature(_) | ApiError::WebhookSignature(_) => {
                "unauthorized"
            }
            ApiError::Approval(e) => e.code(),
            ApiError::RunNotFound(_) => "run_not_found",
            ApiError::RunHasNoApproval(_) => "approval_not_found",
            ApiError::NotFound { .. } => "not_found",
            ApiError::MethodNotAllowed { .. } => "method_not_allowed",
            ApiError::Replayed => "replayed",
            ApiError::PayloadTooLarge { .. } => "payload_too_large",
            ApiError::UnsupportedMediaType(_) => "unsupported_media_type",
            ApiError::Unavailable(_) => "unavailable",
            ApiError::Internal(_) => "internal_error",
        }
    }

    pub fn invalid(message: impl Into<String>) -> ApiError {
        ApiError::InvalidRequest(message.into())
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
        }
    }
}

impl From<StoreError> for ApiError {
    fn from(e: StoreError) -> Self {
        match e {
            StoreError::Approval(a) => ApiError::Approval(a),
            StoreError::RunNotFound(id) => ApiError::RunNotFound(id),
            StoreError::InvalidCursor(c) => ApiError::InvalidRequest(format!(
                "malformed cursor {c:?}: pass next_cursor from a previous page"
            )),
            other => ApiError::Internal(other.to_string()),
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let status = self.status();
        let message = match &self {
            ApiError::Internal(detail) => {
                tracing::error!(error = %detail, "request failed");
                "internal error; see the server log".to_string()
            }
            other => other.to_string(),
        };
        let body = json!({ "error": { "code": self.code(), "message": message } });
        let mut response = (status, Json(body)).into_response();
        if matches!(self, ApiError::Unauthorized) {
            response
                .headers_mut()
                .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        }
        response
    }
}
