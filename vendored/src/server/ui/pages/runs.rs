//! GET /ui/runs (by status), GET /ui/runs/{id} (a run's timeline, live)
//! and POST /ui/runs/{id}/{retry|fail|cancel}: the operators' actions,
//! through the same functions as POST /runs/{id}/... (routes/runs.rs).

use axum::Extension;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Redirect, Response};
use serde::Deserialize;
use serde_json::json;

use super::approval::{encode, timeline};
use super::form::Form;
use super::templates::{self, Chrome};
use super::viewer::Viewer;
use super::{SharedUi, format, inbox, payload, refusal};
use crate::run::OperatorFail;
use crate::run_state::RunStatus;
use crate::server::auth::Caller;
use crate::server::extract::PathParam;
use crate::server::routes::runs as api;
use crate::server::state::AppState;
use crate::server::view;
use crate::store::RunQuery;

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(super) struct RunsQuery {
    status: Option<String>,
    cursor: Option<String>,
    trail: Option<String>,
}

/// GET /ui/runs.
pub(super) async fn list(
    State(state): State<AppState>,
    Extension(ui): Extension<SharedUi>,
    viewer: Viewer,
    Query(query): Query<RunsQuery>,
) -> Response {
    let status_text = query.status.filter(|s| !s.trim().is_empty());
    let status = match status_text.as_deref() {
        None => None,
        Some(text) => match RunStatus::parse(text) {
            Some(status) => Some(status),
            None => {
                return viewer.finish(refusal::page(
                    StatusCode::BAD_REQUEST,
                    "Unknown status",
                    &format!("{text:?} is not a run status"),
                    None,
                ));
            }
        },
    };
    let cursor = query.cursor.filter(|c| !c.is_empty());
    let page = state
        .agent
        .store()
        .list_runs(&RunQuery {
            agent_id: Some(state.agent_id().to_string()),
            status,
            limit: inbox::PAGE,
            cursor: cursor.clone(),
        })
        .await;
    let page = match page {
        Ok(page) => page,
        Err(e) => return viewer.finish(refusal::from_api(e.into())),
    };
    let rows: Vec<serde_json::Value> = page
        .runs
        .iter()
        .map(|run| {
            json!({
                "id": run.id,
                "status": run.status.as_str(),
                "created_at": format::time(run.created_at),
                "updated_at": format::time(run.updated_at),
                "error": run.error,
            })
        })
        .collect();
    let (prev, next) = inbox::paging(
        &[("status", status_text.as_deref())],
        cursor.as_deref(),
        query.trail.as_deref(),
        page.next_cursor.as_deref(),
    );
    let statuses: Vec<&str> = RunStatus::ALL.iter().map(|s| s.as_str()).collect();
    let context = json!({
        "rows": rows,
        "statuses": statuses,
        "status": status.map(|s| s.as_str()),
        "prev": prev,
        "next": next,
    });
    let chrome = viewer.chrome(&ui, "Runs", "runs");
    viewer.finish(templates::page(
        StatusCode::OK,
        "runs.html",
        context,
        &chrome,
    ))
}

/// GET /ui/runs/{id}.
pub(super) async fn page(
    State(state): State<AppState>,
    Extension(ui): Extension<SharedUi>,
    viewer: Viewer,
    PathParam(run_id): PathParam,
) -> Response {
    let run = match view::run_view(&state, &run_id).await {
        Ok(run) => run,
        Err(e) => return viewer.finish(refusal::from_api(e)),
    };
    let events = match state.agent.store().run_events(&run_id, 0).await {
        Ok(events) => events,
        Err(e) => return viewer.finish(refusal::from_api(e.into())),
    };
    let status = run.status;
    let outputs: Vec<serde_json::Value> = run
        .outputs
        .iter()
        .map(|(step, output)| json!({"step": step, "raw": payload::pretty(output)}))
        .collect();
    let context = json!({
        "id": run.id,
        "status": status.as_str(),
        "error": run.error,
        "created_at": format::time(run.created_at),
        "updated_at": format::time(run.updated_at),
        "outputs": outputs,
        "pending": run.pending_approval.as_ref().map(|p| json!({"key": p.record.key, "message": p.record.message})),
        "timeline": timeline(&events),
        // An operator's fail is final here: forcing a retry past it is for
        // the API and the command line, where it is spelled out.
        "can_retry": status == RunStatus::Stuck
            || (status == RunStatus::Failed && OperatorFail::of(&events).is_none()),
        "can_fail": status == RunStatus::Stuck,
        "can_cancel": matches!(status, RunStatus::AwaitingApproval | RunStatus::Running),
        "action": format!("/ui/runs/{}", encode(&run.id)),
        "csrf": viewer.csrf(&ui),
    });
    let context = match templates::with_timeline(&context) {
        Ok(context) => context,
        Err(failed) => return viewer.finish(failed.into_response()),
    };
    let chrome = Chrome {
        live: Some("timeline"),
        stream: Some(format!("/ui/runs/{}/stream", encode(&run.id))),
        ..viewer.chrome(&ui, format!("Run {}", run.id), "runs")
    };
    viewer.finish(templates::page(
        StatusCode::OK,
        "run.html",
        context,
        &chrome,
    ))
}

/// POST /ui/runs/{id}/{retry|fail|cancel} `csrf, reason?`: 303 back to the run.
pub(super) async fn act(
    State(state): State<AppState>,
    Extension(ui): Extension<SharedUi>,
    viewer: Viewer,
    Path((run_id, action)): Path<(String, String)>,
    Form(fields): Form,
) -> Response {
    if !viewer.csrf_ok(&ui, fields.csrf.as_deref()) {
        return viewer.finish(refusal::csrf());
    }
    let caller = Caller(viewer.name.clone());
    let done = match action.as_str() {
        "retry" => api::retry_run(&state, caller, run_id.clone(), false, false)
            .await
            .map(|_| ()),
        "fail" => api::fail_run(
            &state,
            caller,
            run_id.clone(),
            fields.reason.as_deref().unwrap_or(""),
        )
        .await
        .map(|_| ()),
        "cancel" => api::cancel_run(&state, caller, run_id.clone(), fields.reason())
            .await
            .map(|_| ()),
        _ => return viewer.finish(refusal::not_found()),
    };
    let response = match done {
        Ok(()) => Redirect::to(&format!("/ui/runs/{}", encode(&run_id))).into_response(),
        Err(e) => refusal::from_api(e),
    };
    viewer.finish(response)
}
