//! /runs: start a run, show one, decide its pending approval.

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::events::EventKind;
use crate::pending_approval::Decision;
use crate::run_state::RunStatus;
use crate::server::auth::Caller;
use crate::server::error::ApiError;
use crate::server::extract::{
    JsonBody, PathParam, QueryParams, WaitParam, edited_payload, present,
};
use crate::server::state::AppState;
use crate::server::{tasks, view};

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct CreateBody {
    #[serde(default = "empty_object")]
    input: Value,
}

fn empty_object() -> Value {
    json!({})
}

/// POST /runs `{input}` -> 202 `{run_id}`; with `?wait=true`, 200 and the
/// run view once the run pauses or ends.
pub(super) async fn create(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    QueryParams(wait): QueryParams<WaitParam>,
    JsonBody(body): JsonBody<CreateBody>,
) -> Result<Response, ApiError> {
    let trigger = json!({
        "kind": "api",
        "started_by": caller.0,
        "received_at": crate::time::format_utc(crate::time::now()),
    });
    let (run_id, driving) =
        tasks::start_run(&state.agent, &state.background, body.input, trigger).await?;
    if !wait.wait {
        return Ok((StatusCode::ACCEPTED, Json(json!({ "run_id": run_id }))).into_response());
    }
    // The run goes on if this request is dropped: only the wait ends.
    let _ = driving.await;
    Ok(Json(view::run_view(&state, &run_id).await?).into_response())
}

/// GET /runs/{id}: `{id, agent, status, outputs, error, created_at,
/// updated_at, pending_approval}`.
pub(super) async fn show(
    State(state): State<AppState>,
    Extension(_caller): Extension<Caller>,
    PathParam(run_id): PathParam,
) -> Result<Json<Value>, ApiError> {
    Ok(Json(view::run_view(&state, &run_id).await?))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct DecideBody {
    approved: bool,
    reason: Option<String>,
    /// `null` is refused (see `extract::edited_payload`).
    #[serde(default, deserialize_with = "present")]
    payload: Option<Value>,
}

/// POST /runs/{id_or_key}/approve `{approved, reason?, payload?}`.
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
        (false, None) => Decision::Reject {
            reason: body.reason,
        },
        (false, Some(_)) => {
            return Err(ApiError::invalid(
                "payload goes with approved: true (it approves with changes)",
            ));
        }
    };
    let key = key_for(&state, &id_or_key).await?;
    answer_decision(&state, caller, key, decision, wait.wait)
        .await
        .map(IntoResponse::into_response)
}

/// The approval key named by `id_or_key`: the key itself, or the latest
/// gate of the run with that id. A run's latest gate is taken even when it
/// is no longer pending, so the claim explains why (already resolved,
/// expired) instead of a vague "nothing pending".
async fn key_for(state: &AppState, id_or_key: &str) -> Result<String, ApiError> {
    let store = state.agent.store();
    if store.get_approval(id_or_key).await?.is_some() {
        return Ok(id_or_key.to_string());
    }
    let run = view::load_run(state, id_or_key).await?;
    if let Some(record) = store.pending_for_run(&run.id, crate::time::now()).await? {
        return Ok(record.key);
    }
    let events = store.run_events(&run.id, 0).await?;
    events
        .iter()
        .rev()
        .find_map(|e| match &e.kind {
            EventKind::AwaitingApproval { key, .. } => Some(key.clone()),
            _ => None,
        })
        .ok_or(ApiError::RunHasNoApproval(run.id))
}

/// Claim the decision, answer with the decided record, and resume the run
/// in the background. `{approval, run_id, status}`; with `wait`, also `run`
/// (the run view at its next pause or end) and its status.
pub(super) async fn answer_decision(
    state: &AppState,
    caller: Caller,
    key: String,
    decision: Decision,
    wait: bool,
) -> Result<Json<Value>, ApiError> {
    let (record, resuming) =
        tasks::decide(&state.agent, &state.background, key, decision, caller.0).await?;
    let run_id = record.run_id.clone();
    if !wait {
        return Ok(Json(json!({
            "approval": record,
            "run_id": run_id,
            "status": RunStatus::Running,
        })));
    }
    let _ = resuming.await;
    let run = view::run_view(state, &run_id).await?;
    Ok(Json(json!({
        "approval": record,
        "run_id": run_id,
        "status": run["status"],
        "run": run,
    })))
}
