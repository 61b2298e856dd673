//! One approval: GET /ui/approvals/{key} (the page) and POST (a decision
//! from its forms). The signed-link page (link.rs) renders the same page.

use axum::Extension;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Redirect, Response};
use serde::Serialize;
use serde_json::{Value, json};

use super::form::{Fields, Form};
use super::templates::{self, Chrome};
use super::viewer::Viewer;
use super::{SharedUi, format, inbox, payload, refusal};
use crate::events::{Event, EventKind};
use crate::pending_approval::{ApprovalError, ApprovalRecord, ApprovalStatus, Decision};
use crate::run::RunError;
use crate::server::error::ApiError;
use crate::server::extract::PathParam;
use crate::server::state::AppState;
use crate::server::{tasks, view};

/// How the page was reached: it decides where the forms post, what the
/// CSRF token is and which stream the timeline follows.
pub(crate) struct Frame {
    /// Where the forms post.
    pub action: String,
    pub csrf: String,
    /// The timeline's event stream.
    pub stream: String,
    pub chrome: Chrome,
    /// Link to the run's page (signed-in pages only).
    pub run_link: bool,
}

/// What a failed decision shows on the re-rendered page.
#[derive(Default)]
pub(crate) struct Problem {
    /// The edit box's text, kept as the person typed it.
    pub payload_text: Option<String>,
    pub payload_error: Option<String>,
    /// Someone else won: (who, when).
    pub already_decided: Option<(String, String)>,
}

#[derive(Serialize)]
struct TimelineEntry {
    seq: u64,
    kind: &'static str,
    at: String,
    at_machine: String,
    summary: String,
}

/// One line for an event, as the timeline shows it (the script builds the
/// same from the stream's JSON).
fn summary(kind: &EventKind) -> String {
    match kind {
        EventKind::RunStarted { .. } => "run started".into(),
        EventKind::StepStarted { step, .. } => format!("step {step} started"),
        EventKind::StepCompleted { step, replayed, .. } => {
            if *replayed {
                format!("step {step} completed (replayed)")
            } else {
                format!("step {step} completed")
            }
        }
        EventKind::AwaitingApproval { step, .. } => format!("waiting for approval at {step}"),
        EventKind::ApprovalResolved {
            decision,
            decided_by,
            reason,
            ..
        } => match reason {
            Some(reason) => format!("{decision} by {decided_by}: {reason}"),
            None => format!("{decision} by {decided_by}"),
        },
        EventKind::RunCompleted { .. } => "run completed".into(),
        EventKind::RunRejected { .. } => "run rejected".into(),
        EventKind::RunExpired { .. } => "run expired".into(),
        EventKind::RunSkipped { step, .. } => format!("run skipped at {step} (dedupe)"),
        EventKind::RunFailed { error, .. } => format!("run failed: {error}"),
        EventKind::RunCancelled { by, reason } => match reason {
            Some(reason) => format!("run cancelled by {by}: {reason}"),
            None => format!("run cancelled by {by}"),
        },
        EventKind::RunRecovered { by, .. } => format!("run recovered by {by}"),
        EventKind::RunStuck { step, reason } => format!("run stuck at {step}: {reason}"),
    }
}

pub(crate) fn timeline(events: &[Event]) -> Value {
    let entries: Vec<TimelineEntry> = events
        .iter()
        .map(|e| TimelineEntry {
            seq: e.seq,
            kind: e.kind.name(),
            at: format::time(e.at),
            at_machine: format::machine(e.at),
            summary: summary(&e.kind),
        })
        .collect();
    json!(entries)
}

/// This agent's record `key`, as of now (an overdue one reads EXPIRED).
pub(crate) async fn load(state: &AppState, key: &str) -> Result<Option<ApprovalRecord>, ApiError> {
    Ok(state
        .agent
        .store()
        .approval_as_of(key, state.agent.clock().now())
        .await?
        .filter(|r| r.agent_id == state.agent_id()))
}

/// The approval page for `record`.
pub(crate) async fn render(
    state: &AppState,
    record: &ApprovalRecord,
    frame: Frame,
    problem: Problem,
    status: StatusCode,
) -> Response {
    let now = state.agent.clock().now();
    let events = match state.agent.store().run_events(&record.run_id, 0).await {
        Ok(events) => events,
        Err(e) => return refusal::from_api(e.into()),
    };
    let run_status = match view::run_view(state, &record.run_id).await {
        Ok(run) => Some(run.status.as_str()),
        Err(_) => None,
    };
    let pending = record.status == ApprovalStatus::Pending;
    let outcome = (!pending).then(|| {
        json!({
            "status": record.status.as_str(),
            "words": record.status.past_tense(),
            "decided_by": record.decided_by,
            "decided_at": record.decided_at.map(format::time),
            "reason": record.reason(),
            "diff": record.modified_payload().map(|edited| payload::diff(&record.payload, edited)),
        })
    });
    let outputs: Vec<Value> = record
        .outputs
        .iter()
        .map(|(step, output)| json!({"step": step, "raw": payload::pretty(output)}))
        .collect();
    let context = json!({
        "key": record.key,
        "run_id": record.run_id,
        "agent": record.agent_id,
        "step": record.step_id,
        "phase": record.phase.as_str(),
        "message": record.message.clone().unwrap_or_else(|| format!("Approve step {}?", record.step_id)),
        "status": record.status.as_str(),
        "created_at": format::time(record.created_at),
        "expires_at": format::time(record.expires_at),
        "time_left": format::span(now, record.expires_at),
        "deciders": inbox::deciders(state),
        "tree": payload::tree(&record.payload),
        "raw": payload::pretty(&record.payload),
        "edit": problem.payload_text.unwrap_or_else(|| payload::pretty(&record.payload)),
        "payload_error": problem.payload_error,
        "input": payload::pretty(&record.input),
        "outputs": outputs,
        "timeline": timeline(&events),
        "pending": pending,
        "outcome": outcome,
        "run_status": run_status,
        "already_decided": problem.already_decided.map(|(by, at)| json!({"by": by, "at": at})),
        "action": frame.action,
        "csrf": frame.csrf,
        "run_link": frame.run_link,
    });
    let context = match templates::with_timeline(&context) {
        Ok(context) => context,
        Err(failed) => return failed.into_response(),
    };
    let mut chrome = frame.chrome;
    chrome.live = Some("timeline");
    chrome.stream = Some(frame.stream);
    templates::page(status, "approval.html", context, &chrome)
}

fn ui_frame(ui: &super::Ui, viewer: &Viewer, record: &ApprovalRecord) -> Frame {
    Frame {
        action: format!("/ui/approvals/{}", encode(&record.key)),
        csrf: viewer.csrf(ui),
        stream: format!("/ui/runs/{}/stream", encode(&record.run_id)),
        chrome: viewer.chrome(
            ui,
            record.message.clone().unwrap_or_else(|| "Approval".into()),
            "inbox",
        ),
        run_link: true,
    }
}

/// What a path segment escapes: everything but RFC 3986's unreserved
/// characters (so a UUID or run id reads as itself).
const SEGMENT: &percent_encoding::AsciiSet = &percent_encoding::NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'_')
    .remove(b'.')
    .remove(b'~');

/// A path segment, percent-encoded.
pub(crate) fn encode(segment: &str) -> String {
    percent_encoding::utf8_percent_encode(segment, SEGMENT).to_string()
}

/// GET /ui/approvals/{key}.
pub(super) async fn page(
    State(state): State<AppState>,
    Extension(ui): Extension<SharedUi>,
    viewer: Viewer,
    PathParam(key): PathParam,
) -> Response {
    let record = match load(&state, &key).await {
        Ok(Some(record)) => record,
        Ok(None) => return viewer.finish(refusal::not_found()),
        Err(e) => return viewer.finish(refusal::from_api(e)),
    };
    let frame = ui_frame(&ui, &viewer, &record);
    let response = render(&state, &record, frame, Problem::default(), StatusCode::OK).await;
    viewer.finish(response)
}

/// The decision a form asks for, or the problem with it (shown by the
/// edit box).
pub(crate) fn decision_of(fields: &Fields) -> Result<Decision, Problem> {
    let reason = fields.reason();
    match fields.decision.as_deref() {
        Some("approve") => Ok(Decision::Approve { reason }),
        Some("reject") => Ok(Decision::Reject { reason }),
        Some("modify") => {
            let text = fields.payload.clone().unwrap_or_default();
            match serde_json::from_str::<Value>(&text) {
                Ok(Value::Null) => Err(Problem {
                    payload_error: Some(
                        "The payload is null: approve instead to keep it as it is.".into(),
                    ),
                    payload_text: Some(text),
                    ..Problem::default()
                }),
                Ok(payload) => Ok(Decision::Modify { payload, reason }),
                Err(e) => Err(Problem {
                    payload_error: Some(format!("This is not valid JSON: {e}")),
                    payload_text: Some(text),
                    ..Problem::default()
                }),
            }
        }
        _ => Err(Problem::default()),
    }
}

/// What became of a decision, as the page answers it.
pub(crate) enum Answer {
    /// Decided now, or repeated by its winner.
    Decided(Box<ApprovalRecord>),
    /// Shown again on the page: a bad edit, a lost race.
    Again(Problem, StatusCode),
    Refused(Response),
}

/// Decide `key` as `by`, through the API's path (`tasks::decide`).
pub(crate) async fn decide_as(state: &AppState, key: &str, fields: &Fields, by: &str) -> Answer {
    let decision = match decision_of(fields) {
        Ok(decision) => decision,
        Err(problem) if problem.payload_error.is_some() => {
            return Answer::Again(problem, StatusCode::UNPROCESSABLE_ENTITY);
        }
        Err(_) => {
            return Answer::Refused(refusal::page(
                StatusCode::BAD_REQUEST,
                "Unknown decision",
                "Choose approve, reject or modify.",
                None,
            ));
        }
    };
    let edited = match &decision {
        Decision::Modify { .. } => fields.payload.clone(),
        _ => None,
    };
    match tasks::decide(
        &state.agent,
        &state.background,
        key.to_string(),
        decision,
        by.to_string(),
    )
    .await
    {
        Ok(decided) => Answer::Decided(Box::new(decided.record)),
        Err(RunError::Approval(ApprovalError::AlreadyResolved {
            decided_by,
            decided_at,
            ..
        })) => Answer::Again(
            Problem {
                already_decided: Some((
                    decided_by.unwrap_or_else(|| "someone".into()),
                    decided_at
                        .map(format::time)
                        .unwrap_or_else(|| "an unknown time".into()),
                )),
                ..Problem::default()
            },
            StatusCode::CONFLICT,
        ),
        Err(RunError::Approval(ApprovalError::InvalidPayload { reason, .. })) => Answer::Again(
            Problem {
                payload_error: Some(format!("The edited payload does not fit: {reason}")),
                payload_text: edited,
                ..Problem::default()
            },
            StatusCode::UNPROCESSABLE_ENTITY,
        ),
        Err(e) => Answer::Refused(refusal::from_api(e.into())),
    }
}

/// POST /ui/approvals/{key} `csrf, decision, reason?, payload?`: 303 back
/// to the page, which shows the outcome.
pub(super) async fn decide(
    State(state): State<AppState>,
    Extension(ui): Extension<SharedUi>,
    viewer: Viewer,
    PathParam(key): PathParam,
    Form(fields): Form,
) -> Response {
    if !viewer.csrf_ok(&ui, fields.csrf.as_deref()) {
        return viewer.finish(refusal::csrf());
    }
    let answer = decide_as(&state, &key, &fields, &viewer.name).await;
    let response = match answer {
        Answer::Decided(record) => {
            Redirect::to(&format!("/ui/approvals/{}", encode(&record.key))).into_response()
        }
        Answer::Again(problem, status) => match load(&state, &key).await {
            Ok(Some(record)) => {
                let frame = ui_frame(&ui, &viewer, &record);
                render(&state, &record, frame, problem, status).await
            }
            Ok(None) => refusal::not_found(),
            Err(e) => refusal::from_api(e),
        },
        Answer::Refused(response) => response,
    };
    viewer.finish(response)
}
