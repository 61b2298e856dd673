//! /runs: start a run, show one, decide its pending approval.

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use serde::Deserialize;
use serde_json::Value;

use crate::domain::pending_approval::Decision;
use crate::domain::policy::Channel;
use crate::domain::run_state::RunStatus;
use crate::engine::run::Ballot;
use crate::server::http::extract::{
    JsonBody, PathParam, QueryParams, WaitParam, edited_payload, present,
};
use crate::server::http::paging;
use crate::server::http::state::AppState;
use crate::service::ApiError;
use crate::service::Caller;
use crate::service::runs as view;
use crate::service::schema::request_type;
use crate::service::views::{CancelView, RunStarted, RunView, RunsPage, Trigger};
use crate::service::{decide, operate, tasks};
use crate::store::RunQuery;
use crate::support::json_doc::JsonDoc;

request_type! {
    #[derive(Debug, Deserialize)]
    #[serde(deny_unknown_fields)]
    pub(super) struct CreateBody {
        /// The run's `input`; `{}` unless given.
        #[serde(default, deserialize_with = "crate::support::json_doc::raw")]
        input: JsonDoc,
    }
}

/// POST /runs `{input}` -> 202 `{run_id}`; with `?wait=true`, 200 and the
/// run view once the run pauses or ends, or after [`view::RUN_WAIT_LIMIT`].
pub(super) async fn create(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    QueryParams(wait): QueryParams<WaitParam>,
    JsonBody(body): JsonBody<CreateBody>,
) -> Result<Response, ApiError> {
    let trigger = Trigger::Api {
        started_by: caller.0,
        received_at: crate::support::time::format_utc(state.agent.clock().now()),
    }
    .into_value()?;
    let (run_id, driving) =
        tasks::start_run(&state.agent, &state.background, body.input, trigger).await?;
    if !wait.wait {
        return Ok((StatusCode::ACCEPTED, Json(RunStarted { run_id })).into_response());
    }
    view::wait_for_run(&state, driving).await;
    Ok(Json(view::run_view(&state, &run_id).await?).into_response())
}

/// GET /runs/{id}: the run view (`api::RunView`).
pub(super) async fn show(
    State(state): State<AppState>,
    Extension(_caller): Extension<Caller>,
    PathParam(run_id): PathParam,
) -> Result<Json<RunView>, ApiError> {
    Ok(Json(view::run_view(&state, &run_id).await?))
}

request_type! {
    #[derive(Debug, Deserialize)]
    #[serde(deny_unknown_fields)]
    pub(super) struct ListParams {
        /// Only runs with this status (a run status name).
        status: Option<String>,
        /// Runs per page: 1 to 500, 50 unless given.
        limit: Option<usize>,
        /// `next_cursor` of the page before.
        cursor: Option<String>,
    }
}

/// GET /runs: `{runs: [...], next_cursor}`, this agent's, newest first,
/// `?status=` any run status.
pub(super) async fn list(
    State(state): State<AppState>,
    Extension(_caller): Extension<Caller>,
    QueryParams(params): QueryParams<ListParams>,
) -> Result<Json<RunsPage>, ApiError> {
    let limit = paging::limit(params.limit)?;
    let status = match params.status.as_deref().filter(|s| !s.is_empty()) {
        None => None,
        Some(text) => Some(RunStatus::parse(text).ok_or_else(|| {
            let known: Vec<&str> = RunStatus::ALL.iter().map(|s| s.as_str()).collect();
            ApiError::invalid(format!(
                "status {text:?} is not a run status; use one of {}",
                known.join(", ")
            ))
        })?),
    };
    let page = state
        .agent
        .store()
        .list_runs(&RunQuery {
            agent_id: Some(state.agent_id().to_string()),
            status,
            limit,
            cursor: paging::cursor(params.cursor),
            text: None,
        })
        .await?;
    Ok(Json(page.into()))
}

request_type! {
    #[derive(Debug, Deserialize)]
    #[serde(deny_unknown_fields)]
    pub(super) struct CancelBody {
        /// Why, recorded in the run's `run_cancelled` event.
        reason: Option<String>,
    }
}

/// POST /runs/{id}/cancel `{reason?}`: a waiting or running run ends
/// `cancelled` (its pending approval CANCELLED); the caller's token name is
/// `by`, checked against `approvals.approvers` as for a decision.
pub(super) async fn cancel(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    PathParam(run_id): PathParam,
    JsonBody(body): JsonBody<CancelBody>,
) -> Result<Json<CancelView>, ApiError> {
    operate::cancel(&state, caller, run_id, body.reason)
        .await
        .map(Json)
}

request_type! {
    #[derive(Debug, Deserialize)]
    #[serde(deny_unknown_fields)]
    pub(super) struct DecideBody {
        /// `true` approves, `false` rejects.
        approved: bool,
        /// Why, recorded with the decision.
        reason: Option<String>,
        /// With `approved: true`: approve with this payload instead
        /// (MODIFIED); `null` is refused.
        // (by `extract::edited_payload`)
        #[serde(default, deserialize_with = "present")]
        payload: Option<Value>,
        /// The approval's `payload_digest` as the decider saw it: the
        /// decision is refused (409 `payload_changed`) if the payload has
        /// changed since.
        payload_digest: Option<String>,
        /// With `approved: true`: the approver's input, on a gate with a
        /// `form:` (400 `invalid_input` when it does not fit; see POST
        /// /approvals/{key}/approve).
        input: Option<Value>,
    }
}

/// POST /runs/{id_or_key}/approve `{approved, reason?, payload?, payload_digest?}`.
pub(super) async fn decide(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    PathParam(id_or_key): PathParam,
    QueryParams(wait): QueryParams<WaitParam>,
    JsonBody(body): JsonBody<DecideBody>,
) -> Result<Response, ApiError> {
    let decision = match (body.approved, edited_payload(body.payload)?) {
        (true, Some(payload)) => Decision::Modify {
            payload,
            reason: body.reason,
        },
        (true, None) => Decision::Approve {
            reason: body.reason,
        },
        (false, None) if body.input.is_some() => {
            return Err(ApiError::invalid(
                "input goes with approved: true (a reject takes a reason)",
            ));
        }
        (false, None) => Decision::Reject {
            reason: body.reason,
        },
        (false, Some(_)) => {
            return Err(ApiError::invalid(
                "payload goes with approved: true (it approves with changes)",
            ));
        }
    };
    let key = decide::key_for(&state, &id_or_key).await?;
    let ballot = Ballot::new(decision, &caller.0, Channel::Api)
        .shown(body.payload_digest)
        .with_input(body.input);
    decide::answer(&state, key, ballot, wait.wait)
        .await
        .map(|view| Json(view).into_response())
}

request_type! {
    /// `{}`, or `{"force": true}` to retry a run an operator failed.
    // The body is still JSON (see `JsonBody`), so that a page of another
    // origin cannot retry with a plain form post.
    #[derive(Debug, Deserialize)]
    #[serde(deny_unknown_fields)]
    pub(super) struct RetryBody {
        /// Retry even a run an operator failed (`POST /runs/{id}/fail`,
        /// `runs fail`), undoing that decision; without it such a retry is
        /// refused with 409 `run_conflict` naming who failed the run, when
        /// and why. A run that failed by itself needs no force.
        #[serde(default)]
        force: bool,
    }
}

/// POST /runs/{id}/retry `{force?}`: take a `stuck` or `failed` run over
/// and drive it on from its last durable point in the background (a step
/// found in flight is re-sent with the same idempotency key). Answers with
/// the run as the retry left it (`running`), or with `?wait=true` at its
/// next pause or end. `by` (the caller) is recorded in `run_recovered`.
/// A run an operator failed is refused (409) unless `force`.
pub(super) async fn retry(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    PathParam(run_id): PathParam,
    QueryParams(wait): QueryParams<WaitParam>,
    JsonBody(body): JsonBody<RetryBody>,
) -> Result<Json<RunView>, ApiError> {
    operate::retry(&state, caller, run_id, body.force, wait.wait)
        .await
        .map(Json)
}

request_type! {
    #[derive(Debug, Deserialize)]
    #[serde(deny_unknown_fields)]
    pub(super) struct FailBody {
        /// Why the run is failed (not blank), recorded with it.
        reason: String,
    }
}

/// POST /runs/{id}/fail `{reason}`: end a `stuck` run `failed`, recording
/// the caller and the reason.
pub(super) async fn fail(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    PathParam(run_id): PathParam,
    JsonBody(body): JsonBody<FailBody>,
) -> Result<Json<RunView>, ApiError> {
    operate::fail(&state, caller, run_id, &body.reason)
        .await
        .map(Json)
}
