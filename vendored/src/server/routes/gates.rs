//! /gates: approvals asked for by any agent over HTTP (DESIGN §14). The
//! work is `service/gates`, shared with the MCP tools; these handlers only
//! read the request and shape the answer. Any token may call them; a
//! `requester` token sees only what it asked for.

use std::time::Duration;

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use serde::Deserialize;

use crate::server::http::extract::{JsonBody, PathParam, QueryParams};
use crate::server::http::state::AppState;
use crate::service::ApiError;
use crate::service::gates::{GateView, Gates, NewGate};
use crate::service::schema::request_type;
use crate::service::{Caller, Scope};

request_type! {
    #[derive(Debug, Deserialize)]
    #[serde(deny_unknown_fields)]
    pub(super) struct WaitParams {
        /// Wait up to this long (`30s`, `1m`; at most 60 s, a longer wait
        /// is cut to that) for a decision before answering; at once
        /// unless given. The answer is the request as it then stands.
        wait: Option<String>,
    }
}

request_type! {
    #[derive(Debug, Deserialize)]
    #[serde(deny_unknown_fields)]
    pub(super) struct CancelParams {
        /// Why, recorded with the cancel.
        reason: Option<String>,
    }
}

/// POST /gates -> 201 and the request (200 and the same request for a
/// repeated idempotency key).
pub(super) async fn create(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    Extension(scope): Extension<Scope>,
    JsonBody(body): JsonBody<NewGate>,
) -> Result<Response, ApiError> {
    let created = Gates::new(&state, &caller, scope).create(body).await?;
    let status = if created.created {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    Ok((status, Json(created.view)).into_response())
}

/// GET /gates/{key}[?wait=30s]: the request, once decided or when the wait
/// is over. A waiter that goes away changes nothing.
pub(super) async fn show(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    Extension(scope): Extension<Scope>,
    PathParam(key): PathParam,
    QueryParams(params): QueryParams<WaitParams>,
) -> Result<Json<GateView>, ApiError> {
    let wait = match params.wait.as_deref().filter(|w| !w.is_empty()) {
        Some(text) => parse_wait(text)?,
        None => Duration::ZERO,
    };
    let gates = Gates::new(&state, &caller, scope);
    if wait.is_zero() {
        return Ok(Json(gates.get(&key).await?));
    }
    Ok(Json(gates.wait(&key, wait).await?))
}

/// DELETE /gates/{key}[?reason=]: cancel a pending request.
pub(super) async fn cancel(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    Extension(scope): Extension<Scope>,
    PathParam(key): PathParam,
    QueryParams(params): QueryParams<CancelParams>,
) -> Result<Json<GateView>, ApiError> {
    let reason = params.reason.filter(|r| !r.trim().is_empty());
    let gates = Gates::new(&state, &caller, scope);
    Ok(Json(gates.cancel(&key, reason).await?))
}

/// `30s`, `1m`, or plain seconds (`30`).
fn parse_wait(text: &str) -> Result<Duration, ApiError> {
    if let Ok(seconds) = text.trim().parse::<u64>() {
        return Ok(Duration::from_secs(seconds));
    }
    crate::support::time::parse_duration(text)
        .map_err(|e| ApiError::invalid(format!("wait {text:?}: {e} (such as 30s or 1m)")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waits_read_as_durations_or_seconds() {
        assert_eq!(parse_wait("30s").unwrap(), Duration::from_secs(30));
        assert_eq!(parse_wait("2m").unwrap(), Duration::from_secs(120));
        assert_eq!(parse_wait("15").unwrap(), Duration::from_secs(15));
        let err = parse_wait("soon").unwrap_err().to_string();
        assert!(err.contains("wait \"soon\""), "{err}");
    }
}
