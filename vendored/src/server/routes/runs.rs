//! /runs: start a run, show one, decide its pending approval.

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use serde::Deserialize;
use serde_json::Value;

use crate::events::EventKind;
use crate::json_doc::JsonDoc;
use crate::pending_approval::Decision;
use crate::policy::Channel;
use crate::run::Ballot;
use crate::run_state::RunStatus;
use crate::server::api::{
    ApprovalView, CancelView, DecisionView, RunStarted, RunView, RunsPage, Trigger,
};
use crate::server::auth::Caller;
use crate::server::error::ApiError;
use crate::server::extract::{
    JsonBody, PathParam, QueryParams, WaitParam, edited_payload, present,
};
use crate::server::openapi::schema::request_type;
use crate::server::paging;
use crate::server::state::AppState;
use crate::server::{tasks, view};
use crate::store::RunQuery;

request_type! {
    #[derive(Debug, Deserialize)]
    #[serde(deny_unknown_fields)]
    pub(super) struct CreateBody {
        /// The run's `input`; `{}` unless given.
        #[serde(default, deserialize_with = "crate::json_doc::raw")]
        input: JsonDoc,
    }
}

/// How long a `?wait=true` (`POST /runs`, a decision, a retry) waits for
/// the run's next pause or end.
/// A run whose steps take longer (a slow tool, a long model loop) does not
/// hold the request open: the answer is then the run as it stands
/// (`running`), to follow with `GET /runs/{id}` or its event stream. The
/// bound of `GET /gates/{key}?wait=`, under common proxy and client
/// timeouts. Counted on the agent's clock, so a test's clock ends it.
pub(crate) const RUN_WAIT_LIMIT: std::time::Duration = crate::server::gates::MAX_WAIT;

/// POST /runs `{input}` -> 202 `{run_id}`; with `?wait=true`, 200 and the
/// run view once the run pauses or ends, or after [`RUN_WAIT_LIMIT`].
pub(super) async fn create(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    QueryParams(wait): QueryParams<WaitParam>,
    JsonBody(body): JsonBody<CreateBody>,
) -> Result<Response, ApiError> {
    let trigger = Trigger::Api {
        started_by: caller.0,
        received_at: crate::time::format_utc(state.agent.clock().now()),
    }
    .into_value()?;
    let (run_id, driving) =
        tasks::start_run(&state.agent, &state.background, body.input, trigger).await?;
    if !wait.wait {
        return Ok((StatusCode::ACCEPTED, Json(RunStarted { run_id })).into_response());
    }
    wait_for_run(&state, driving).await;
    Ok(Json(view::run_view(&state, &run_id).await?).into_response())
}

/// Wait for `driving` (a run driven on in the background) to reach its
/// next pause or end, for at most [`RUN_WAIT_LIMIT`]: what `?wait=true`
/// does on every route that has it. The run goes on if the request is
/// dropped or the wait is over: only the wait ends.
async fn wait_for_run(state: &AppState, driving: impl std::future::Future) {
    let clock = state.agent.clock();
    let deadline = crate::time::add(clock.now(), RUN_WAIT_LIMIT);
    tokio::select! {
        _ = driving => {}
        _ = clock.sleep_until(deadline) => {}
    }
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
    cancel_run(&state, caller, run_id, body.reason)
        .await
        .map(Json)
}

/// Cancel a run as `caller` (POST /runs/{id}/cancel and the runs page's
/// cancel form share it).
pub(crate) async fn cancel_run(
    state: &AppState,
    caller: Caller,
    run_id: String,
    reason: Option<String>,
) -> Result<CancelView, ApiError> {
    let cancelled = state.agent.cancel(&run_id, &caller.0, reason).await?;
    tracing::info!(run_id = %run_id, by = %caller.0, was = %cancelled.was, "run cancelled");
    let (by, reason) = match cancelled.event.kind {
        EventKind::RunCancelled { by, reason } => (by, reason),
        _ => (caller.0, None),
    };
    Ok(CancelView {
        run_id,
        status: RunStatus::Cancelled,
        was: cancelled.was,
        cancelled_by: by,
        reason,
        approval: cancelled
            .approval
            .map(|record| ApprovalView::new(record, state.agent.spec().hash.as_str())),
    })
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
    let key = key_for(&state, &id_or_key).await?;
    let ballot = Ballot::new(decision, &caller.0, Channel::Api)
        .shown(body.payload_digest)
        .with_input(body.input);
    answer_decision(&state, key, ballot, wait.wait)
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
    store
        .latest_approval_key(&run.id)
        .await?
        .ok_or(ApiError::RunHasNoApproval(run.id))
}

/// Claim the decision, answer with the decided record, and resume the run
/// in the background (`api::DecisionView`). The decider repeating the
/// decision that won gets the same answer with `repeated: true` (200, not
/// `already_resolved`). `status` is the run's status in
/// the store once the claim is made; with `wait`, the run view at its next
/// pause or end, and its status.
pub(super) async fn answer_decision(
    state: &AppState,
    key: String,
    ballot: Ballot,
    wait: bool,
) -> Result<Json<DecisionView>, ApiError> {
    let tasks::Answered { outcome, resuming } =
        tasks::decide(&state.agent, &state.background, key, ballot).await?;
    let run_id = outcome.record().run_id.clone();
    // A repeat waits for nothing: the resume belongs to the claim that won
    // (here or in another process); it answers with the run as it is.
    let run = if wait {
        wait_for_run(state, resuming).await;
        Some(view::run_view(state, &run_id).await?)
    } else {
        None
    };
    let status = match &run {
        Some(run) => run.status,
        None => status_after_claim(state, &run_id).await,
    };
    Ok(Json(DecisionView::of(
        &outcome,
        state.agent.spec().hash.as_str(),
        status,
        run,
    )))
}

/// What the store says of the run now that the claim is made: `running`
/// while it resumes, or wherever the resume got to already. The decision
/// is made whatever this read does, so a failed read must not turn it into
/// an error answer (a client would retry and be told `already_resolved`):
/// it answers with what the claim itself wrote, `running`.
async fn status_after_claim(state: &AppState, run_id: &str) -> RunStatus {
    match view::run_view(state, run_id).await {
        Ok(run) => run.status,
        Err(e) => {
            tracing::warn!(run_id = %run_id, error = %e, "cannot read the run after its decision; answering with the claim's status");
            RunStatus::Running
        }
    }
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
    retry_run(&state, caller, run_id, body.force, wait.wait)
        .await
        .map(Json)
}

/// Retry a stuck or failed run as `caller` (POST /runs/{id}/retry and the
/// runs page's retry form share it; the page never forces).
pub(crate) async fn retry_run(
    state: &AppState,
    caller: Caller,
    run_id: String,
    force: bool,
    wait: bool,
) -> Result<RunView, ApiError> {
    view::load_run(state, &run_id).await?;
    let owned = state.agent.claim_retry(&run_id, &caller.0, force).await?;
    tracing::info!(run_id = %run_id, by = %caller.0, force, "run retried: driving it on from its last durable point");
    let agent = state.agent.clone();
    let driving = state.background.spawn(async move {
        let run_id = owned.run.id.clone();
        let outcome = agent.resume_retried(owned).await;
        tasks::log_outcome(&run_id, &outcome);
    });
    if wait {
        wait_for_run(state, driving).await;
    }
    view::run_view(state, &run_id).await
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
    fail_run(&state, caller, run_id, &body.reason)
        .await
        .map(Json)
}

/// End a stuck run `failed` as `caller` (POST /runs/{id}/fail and the runs
/// page's fail form share it).
pub(crate) async fn fail_run(
    state: &AppState,
    caller: Caller,
    run_id: String,
    reason: &str,
) -> Result<RunView, ApiError> {
    if reason.trim().is_empty() {
        return Err(ApiError::invalid("reason must say why the run is failed"));
    }
    view::load_run(state, &run_id).await?;
    state.agent.fail_stuck(&run_id, reason, &caller.0).await?;
    tracing::info!(run_id = %run_id, by = %caller.0, reason = %reason, "stuck run failed by an operator");
    view::run_view(state, &run_id).await
}
