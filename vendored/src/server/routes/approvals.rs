//! /approvals: list pending records, show one, approve, reject.
//!
//! Everything is read from the store, never from this process's memory, so
//! a pause made by any process sharing the store is listed and decidable.

use axum::extract::State;
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use serde::Deserialize;
use serde_json::Value;

use crate::domain::pending_approval::{ApprovalError, ApprovalStatus, Decision};
use crate::domain::policy::Channel;
use crate::engine::run::Ballot;
use crate::server::http::extract::{
    JsonBody, PathParam, QueryParams, WaitParam, edited_payload, present,
};
use crate::server::http::paging;
use crate::server::http::state::AppState;
use crate::service::ApiError;
use crate::service::Caller;
use crate::service::decide;
use crate::service::schema::request_type;
use crate::service::views::{ApprovalView, ApprovalsPage};
use crate::service::votes::ListedLedgers;
use crate::store::{
    ApprovalQuery, PendingQuery, SpecFilter, SpecFilterError, SpecSelector, StateStore,
};

request_type! {
    #[derive(Debug, Deserialize)]
    #[serde(deny_unknown_fields)]
    pub(super) struct ListParams {
        /// Approvals per page: 1 to 500, 50 unless given.
        limit: Option<usize>,
        /// `next_cursor` of the page before (of the same filters).
        cursor: Option<String>,
        /// Only approvals paused at this step id.
        step: Option<String>,
        /// Only approvals whose message, step id, key, run id or decider
        /// holds this text, ignoring case (`%` and `_` are plain text).
        q: Option<String>,
        /// Only approvals paused under these spec versions: `current` (the
        /// spec this server serves), `stale` (any other version: approve
        /// does what `approvals.on_spec_change` says), or a spec hash, in
        /// full or its first 8 or more hex characters (a prefix that
        /// several stored versions share is refused).
        spec: Option<String>,
    }
}

/// GET /approvals: `{approvals: [record...], next_cursor}`, pending and
/// unexpired, newest first, this agent's only; `?step=`, `?q=` and
/// `?spec=` narrow it.
pub(super) async fn list(
    State(state): State<AppState>,
    Extension(_caller): Extension<Caller>,
    QueryParams(params): QueryParams<ListParams>,
) -> Result<Json<ApprovalsPage>, ApiError> {
    let limit = paging::limit(params.limit)?;
    let agent_id = Some(state.agent_id().to_string());
    let now = state.agent.clock().now();
    let cursor = paging::cursor(params.cursor);
    // Empty values filter nothing, as an absent one.
    let step_id = params.step.filter(|s| !s.is_empty());
    let text = params.q.filter(|q| !q.is_empty());
    let store = state.agent.store();
    let served = state.agent.spec().hash.as_str();
    let spec = match params.spec.filter(|s| !s.is_empty()) {
        Some(given) => Some(spec_filter(&state, &given).await?),
        None => None,
    };
    if step_id.is_none() && text.is_none() && spec.is_none() {
        let page = store
            .list_pending(&PendingQuery {
                agent_id,
                now,
                limit,
                cursor,
            })
            .await?;
        return with_progress(
            store.as_ref(),
            ApprovalsPage::new(page.approvals, page.next_cursor, served),
        )
        .await;
    }
    // The same rows and cursor form as the unfiltered listing: PENDING
    // and unexpired, newest first by (created_at, key).
    let page = store
        .list_approvals(&ApprovalQuery {
            agent_id,
            statuses: vec![ApprovalStatus::Pending],
            step_id,
            text,
            text_in_context: false,
            spec,
            now,
            limit,
            cursor,
        })
        .await?;
    with_progress(
        store.as_ref(),
        ApprovalsPage::new(page.approvals, page.next_cursor, served),
    )
    .await
}

/// `page` with each gate's progress, its votes read in one query.
async fn with_progress(
    store: &dyn StateStore,
    page: ApprovalsPage,
) -> Result<Json<ApprovalsPage>, ApiError> {
    let ledgers = ListedLedgers::read(store, page.approvals.iter().map(|v| &v.record)).await?;
    Ok(Json(page.with_progress(&ledgers)))
}

/// `?spec=` as the store's filter; a value that names no version, or
/// names several, is `invalid_request`.
async fn spec_filter(state: &AppState, given: &str) -> Result<SpecFilter, ApiError> {
    let selector = SpecSelector::parse(given).map_err(|e| ApiError::invalid(e.to_string()))?;
    let resolved = selector
        .resolve(
            state.agent.spec().hash.as_str(),
            state.agent.store().as_ref(),
            Some(state.agent_id()),
            state.agent.clock().now(),
        )
        .await;
    match resolved {
        Ok(filter) => Ok(filter),
        Err(SpecFilterError::Store(e)) => Err(e.into()),
        Err(e) => Err(ApiError::invalid(e.to_string())),
    }
}

/// GET /approvals/{key}: one record, whatever its status, with the signed
/// `link` the caller is shown while it is PENDING and links are on (none
/// for a caller the approvers list leaves out).
pub(super) async fn show(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
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
    let served = state.agent.spec().hash.as_str();
    Ok(Json(
        ApprovalView::new(record, served)
            .with_link(state.links.as_ref(), &caller.0, state.agent.spec())
            .with_form(state.agent.spec()),
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
        /// The approval's `payload_digest` as the decider saw it: the
        /// decision is refused (409 `payload_changed`) if the payload has
        /// changed since.
        payload_digest: Option<String>,
        /// The approver's input, on a gate with a `form:` (a JSON object
        /// the gate's form checks, defaults filled in; 400 `invalid_input`
        /// with each error's path when it does not fit, or when the gate has
        /// no form). Part of the step's output as `input`.
        input: Option<Value>,
    }
}

request_type! {
    #[derive(Debug, Deserialize)]
    #[serde(deny_unknown_fields)]
    pub(super) struct RejectBody {
        /// Why, recorded with the decision.
        reason: Option<String>,
        /// As for approve: the digest of the payload the decider saw.
        payload_digest: Option<String>,
    }
}

/// POST /approvals/{key}/approve `{reason?, payload?, payload_digest?, input?}`.
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
    let ballot = Ballot::new(decision, &caller.0, Channel::Api)
        .shown(body.payload_digest)
        .with_input(body.input);
    decide::answer(&state, key, ballot, wait.wait)
        .await
        .map(|view| Json(view).into_response())
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
    let ballot = Ballot::new(decision, &caller.0, Channel::Api).shown(body.payload_digest);
    decide::answer(&state, key, ballot, wait.wait)
        .await
        .map(|view| Json(view).into_response())
}
