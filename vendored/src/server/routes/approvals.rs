//! /approvals: list pending records, show one, approve, reject.
//!
//! Everything is read from the store, never from this process's memory, so
//! a pause made by any process sharing the store is listed and decidable.

use axum::extract::State;
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use serde::Deserialize;
use serde_json::Value;

use super::runs::answer_decision;
use crate::pending_approval::{ApprovalError, Decision};
use crate::server::api::{ApprovalView, ApprovalsPage};
use crate::server::auth::Caller;
use crate::server::error::ApiError;
use crate::server::extract::{
    JsonBody, PathParam, QueryParams, WaitParam, edited_payload, present,
};
use crate::server::openapi::schema::request_type;
use crate::server::state::AppState;
use crate::store::PendingQuery;

request_type! {
    #[derive(Debug, Deserialize)]
    #[serde(deny_unknown_fields)]
    pub(super) struct ListParams {
        /// Approvals per page: 1 to 500, 50 unless given.
        limit: Option<usize>,
        /// `next_cursor` of the page before.
        cursor: Option<String>,
    }
}

/// GET /approvals: `{approvals: [record...], next_cursor}`, pending and
/// unexpired, newest first, this agent's only.
pub(super) async fn list(
    State(state): State<AppState>,
    Extension(_caller): Extension<Caller>,
    QueryParams(params): QueryParams<ListParams>,
) -> Result<Json<ApprovalsPage>, ApiError> {
    let limit = super::page_limit(params.limit)?;
    let page = state
        .agent
        .store()
        .list_pending(&PendingQuery {
            agent_id: Some(state.agent_id().to_string()),
            now: state.agent.clock().now(),
            limit,
            cursor: params.cursor.filter(|c| !c.is_empty()),
        })
        .await?;
    Ok(Json(page.into()))
}

/// GET /approvals/{key}: one record, whatever its status, with its signed
/// `link` while it is PENDING and links are on.
pub(super) async fn show(
    State(state): State<AppState>,
    Extension(_caller): Extension<Caller>,
    PathParam(key): PathParam,
) -> Result<Json<ApprovalView>, ApiError> {
    // As of now: overdue reads EXPIRED even before the sweeper marked it.
    let record = state
        .agent
        .store()
        .approval_as_of(&key, state.agent.clock().now())
        .await?
        .filter(|r| r.agent_id == state.agent_id())
        .ok_or(ApprovalError::NotFound { key })?;
    Ok(Json(
        ApprovalView::from(record).with_link(state.links.as_ref()),
    ))
}

request_type! {
    #[derive(Debug, Deserialize)]
    #[serde(deny_unknown_fields)]
    pub(super) struct ApproveBody {
        /// Why, recorded with the decision.
        reason: Option<String>,
        /// Present: approve with this payload instead (MODIFIED); `null` is
        /// refused.
        // (by `extract::edited_payload`)
        #[serde(default, deserialize_with = "present")]
        payload: Option<Value>,
    }
}

request_type! {
    #[derive(Debug, Deserialize)]
    #[serde(deny_unknown_fields)]
    pub(super) struct RejectBody {
        /// Why, recorded with the decision.
        reason: Option<String>,
    }
}

/// POST /approvals/{key}/approve `{reason?, payload?}`.
pub(super) async fn approve(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    PathParam(key): PathParam,
    QueryParams(wait): QueryParams<WaitParam>,
    JsonBody(body): JsonBody<ApproveBody>,
) -> Result<Response, ApiError> {
    let decision = match edited_payload(body.payload)? {
        Some(payload) => Decision::Modify {
            payload,
            reason: body.reason,
        },
        None => Decision::Approve {
            reason: body.reason,
        },
    };
    answer_decision(&state, caller, key, decision, wait.wait)
        .await
        .map(IntoResponse::into_response)
}

/// POST /approvals/{key}/reject `{reason?}`.
pub(super) async fn reject(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    PathParam(key): PathParam,
    QueryParams(wait): QueryParams<WaitParam>,
    JsonBody(body): JsonBody<RejectBody>,
) -> Result<Response, ApiError> {
    let decision = Decision::Reject {
        reason: body.reason,
    };
    answer_decision(&state, caller, key, decision, wait.wait)
        .await
        .map(IntoResponse::into_response)
}
