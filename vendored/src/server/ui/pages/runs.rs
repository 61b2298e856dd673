//! GET /ui/runs (by status), GET /ui/runs/{id} (a run's timeline, live)
//! and POST /ui/runs/{id}/{retry|fail|cancel}: the operators' actions,
//! through the same functions as POST /runs/{id}/... (routes/runs.rs).

use axum::Extension;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Redirect, Response};
use serde::{Deserialize, Serialize};

use super::{Output, blank_to_none, refusal};
use crate::domain::events::Event;
use crate::domain::pending_approval::ApprovalRecord;
use crate::domain::run_state::{RunRecord, RunStatus};
use crate::engine::run::OperatorFail;
use crate::server::http::extract::PathParam;
use crate::server::http::paging::{PageLinks, Position, UI_PAGE};
use crate::server::http::state::AppState;
use crate::server::ui::SharedUi;
use crate::server::ui::auth::viewer::Viewer;
use crate::server::ui::form::Form;
use crate::server::ui::render::context;
use crate::server::ui::render::format::{self, segment};
use crate::server::ui::render::templates::{self, Chrome, Page};
use crate::server::ui::render::timeline::{self, TimelineEntry};
use crate::service::Caller;
use crate::service::operate;
use crate::service::runs as view;
use crate::service::views::RunView;
use crate::store::RunQuery;

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct RunsQuery {
    status: Option<String>,
    /// Free text: run id, agent, input, who started it, a gate's step or
    /// message (`RunQuery::text`).
    q: Option<String>,
    cursor: Option<String>,
    trail: Option<String>,
}

/// One run, as a row of the list: enough to tell it from the others.
#[derive(Debug, Serialize)]
pub(crate) struct RunRow {
    id: String,
    status: &'static str,
    agent: String,
    /// The gate it waits at; else the last step that gave an output.
    step: Option<String>,
    /// The gate's message, while the run waits at it.
    message: Option<String>,
    /// The pending approval's page, while the run waits at it.
    waiting_key: Option<String>,
    started_by: String,
    input: String,
    created_at: String,
    created_machine: String,
    created_full: String,
    updated_at: String,
    updated_machine: String,
    updated_full: String,
    error: Option<String>,
}

impl RunRow {
    /// `run`'s row; `pending` is the approval it waits on, if it does.
    pub fn new(run: &RunRecord, pending: Option<&ApprovalRecord>) -> RunRow {
        RunRow {
            id: run.id.clone(),
            status: run.status.as_str(),
            agent: run.agent_id.clone(),
            step: pending
                .map(|p| p.step_id.clone())
                .or_else(|| run.outputs.keys().next_back().cloned()),
            message: pending.map(super::message_of),
            waiting_key: pending.map(|p| p.key.clone()),
            started_by: context::started_by(&run.trigger),
            input: context::input_summary(&run.input),
            created_at: format::time(run.created_at),
            created_machine: format::machine(run.created_at),
            created_full: format::full(run.created_at),
            updated_at: format::time(run.updated_at),
            updated_machine: format::machine(run.updated_at),
            updated_full: format::full(run.updated_at),
            error: run.error.clone(),
        }
    }
}

/// GET /ui/runs.
#[derive(Debug, Serialize)]
pub(crate) struct RunsPage {
    pub rows: Vec<RunRow>,
    /// The status filter's choices, and the one chosen.
    pub statuses: Vec<&'static str>,
    pub status: Option<&'static str>,
    /// The text filter.
    pub q: Option<String>,
    pub links: PageLinks,
}

impl Page for RunsPage {
    const TEMPLATE: &'static str = "runs.html";
}

/// GET /ui/runs.
pub(crate) async fn list(
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
    let text = blank_to_none(query.q);
    let position = Position::new(query.cursor, query.trail);
    let listed = state
        .queries()
        .list_runs(&RunQuery {
            agent_id: Some(state.agent_id().to_string()),
            status,
            limit: UI_PAGE,
            cursor: position.cursor.clone(),
            text: text.clone(),
        })
        .await;
    let listed = match listed {
        Ok(listed) => listed,
        Err(e) => return viewer.finish(refusal::from_api(e.into())),
    };
    let mut rows = Vec::with_capacity(listed.runs.len());
    for run in &listed.runs {
        let pending = match waiting_on(&state, run).await {
            Ok(pending) => pending,
            Err(e) => return viewer.finish(refusal::from_api(e.into())),
        };
        rows.push(RunRow::new(run, pending.as_ref()));
    }
    let page = RunsPage {
        rows,
        statuses: RunStatus::ALL.iter().map(|s| s.as_str()).collect(),
        status: status.map(|s| s.as_str()),
        links: position.links(
            &[("status", status_text.as_deref()), ("q", text.as_deref())],
            listed.next_cursor.as_deref(),
        ),
        q: text,
    };
    let chrome = viewer.chrome(&ui, "Runs", "runs");
    viewer.finish(templates::page(StatusCode::OK, &page, &chrome))
}

/// The approval `run` waits on, if it is paused: one read through the
/// approvals-by-run index, for the paused runs of a page only (at most
/// [`UI_PAGE`] of them).
async fn waiting_on(
    state: &AppState,
    run: &RunRecord,
) -> Result<Option<ApprovalRecord>, crate::store::StoreError> {
    if run.status != RunStatus::AwaitingApproval {
        return Ok(None);
    }
    state
        .agent
        .store()
        .pending_for_run(&run.id, state.agent.clock().now())
        .await
}

/// The approval a run waits on, linked from its page.
#[derive(Debug, Serialize)]
pub(crate) struct Waiting {
    key: String,
    message: Option<String>,
}

/// GET /ui/runs/{id}.
#[derive(Debug, Serialize)]
pub(crate) struct RunPage {
    id: String,
    status: &'static str,
    error: Option<String>,
    created_at: String,
    updated_at: String,
    pending: Option<Waiting>,
    outputs: Vec<Output>,
    timeline: Vec<TimelineEntry>,
    can_retry: bool,
    can_fail: bool,
    can_cancel: bool,
    /// Where the action forms post (`/retry`, `/fail`, `/cancel` added).
    action: String,
    csrf: String,
}

impl Page for RunPage {
    const TEMPLATE: &'static str = "run.html";
}

impl RunPage {
    pub fn new(run: &RunView, events: &[Event], csrf: String) -> RunPage {
        let status = run.status;
        RunPage {
            id: run.id.clone(),
            status: status.as_str(),
            error: run.error.clone(),
            created_at: format::time(run.created_at),
            updated_at: format::time(run.updated_at),
            pending: run.pending_approval.as_ref().map(|p| Waiting {
                key: p.record.key.clone(),
                message: p.record.message.clone(),
            }),
            outputs: Output::all(&run.outputs),
            timeline: timeline::entries(events),
            // An operator's fail is final here: forcing a retry past it is
            // for the API and the command line, where it is spelled out.
            can_retry: status == RunStatus::Stuck
                || (status == RunStatus::Failed && OperatorFail::of(events).is_none()),
            can_fail: status == RunStatus::Stuck,
            can_cancel: matches!(status, RunStatus::AwaitingApproval | RunStatus::Running),
            action: format!("/ui/runs/{}", segment(&run.id)),
            csrf,
        }
    }
}

/// GET /ui/runs/{id}.
pub(crate) async fn page(
    State(state): State<AppState>,
    Extension(ui): Extension<SharedUi>,
    viewer: Viewer,
    PathParam(run_id): PathParam,
) -> Response {
    let run = match view::run_view(&state, &run_id).await {
        Ok(run) => run,
        Err(e) => return viewer.finish(refusal::from_api(e)),
    };
    let events = match state.queries().run_events(&run_id, 0).await {
        Ok(events) => events,
        Err(e) => return viewer.finish(refusal::from_api(e.into())),
    };
    let page = RunPage::new(&run, &events, viewer.csrf(&ui));
    let chrome = Chrome {
        live: Some("timeline"),
        stream: Some(format!("/ui/runs/{}/stream", segment(&run.id))),
        ..viewer.chrome(&ui, format!("Run {}", run.id), "runs")
    };
    viewer.finish(templates::page(StatusCode::OK, &page, &chrome))
}

/// POST /ui/runs/{id}/{retry|fail|cancel} `csrf, reason?`: 303 back to the run.
pub(crate) async fn act(
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
        "retry" => operate::retry(&state, caller, run_id.clone(), false, false)
            .await
            .map(|_| ()),
        "fail" => operate::fail(
            &state,
            caller,
            run_id.clone(),
            fields.reason.as_deref().unwrap_or(""),
        )
        .await
        .map(|_| ()),
        "cancel" => operate::cancel(&state, caller, run_id.clone(), fields.reason())
            .await
            .map(|_| ()),
        _ => return viewer.finish(refusal::not_found()),
    };
    let response = match done {
        Ok(()) => Redirect::to(&format!("/ui/runs/{}", segment(&run_id))).into_response(),
        Err(e) => refusal::from_api(e),
    };
    viewer.finish(response)
}
