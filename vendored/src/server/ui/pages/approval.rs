//! One approval: GET /ui/approvals/{key} (the page) and POST (a decision
//! from its forms). The signed-link page (link.rs) renders the same page.

use axum::Extension;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Redirect, Response};
use chrono::{DateTime, Utc};
use serde::Serialize;
use serde_json::Value;

use super::{Output, inbox, refusal};
use crate::domain::events::Event;
use crate::domain::form::Form;
use crate::domain::pending_approval::{ApprovalError, ApprovalRecord, ApprovalStatus, Decision};
use crate::domain::policy::Channel;
use crate::engine::run::{Ballot, DecisionOutcome, RunError};
use crate::server::http::extract::PathParam;
use crate::server::http::state::AppState;
use crate::server::ui::auth::viewer::Viewer;
use crate::server::ui::form::{Fields, Form as FormBody};
use crate::server::ui::render::deciders;
use crate::server::ui::render::fields::{self, FormView};
use crate::server::ui::render::format::{self, segment};
use crate::server::ui::render::payload::{self, DiffLine, Node};
use crate::server::ui::render::templates::{self, Chrome, Page};
use crate::server::ui::render::timeline::{self, TimelineEntry};
use crate::server::ui::render::votes::TeamView;
use crate::server::ui::staleness::{Stale, Staleness};
use crate::server::ui::{SharedUi, Ui};
use crate::service::ApiError;
use crate::service::decide;
use crate::service::runs as view;

/// How the page was reached: it decides where the forms post, what the
/// CSRF token is and which stream the timeline follows.
pub(crate) struct Frame {
    /// Where the forms post.
    pub action: String,
    pub csrf: String,
    /// The timeline's event stream.
    pub stream: String,
    /// The payload's download (the whole JSON, as the page may cut it).
    pub raw: String,
    pub chrome: Chrome,
    /// Link to the run's page (signed-in pages only).
    pub run_link: bool,
}

/// What a failed decision shows on the re-rendered page.
#[derive(Debug, Default)]
pub(crate) struct Problem {
    /// The edit box's text, kept as the person typed it.
    pub payload_text: Option<String>,
    pub payload_error: Option<String>,
    /// Someone else won.
    pub already_decided: Option<AlreadyDecided>,
    /// What else the page says about the decision just made.
    pub notice: Option<Box<Notice>>,
    /// The form's controls as sent, and what the server refused about
    /// them (shown next to each field).
    pub input: Option<Box<InputProblem>>,
    /// The gate needs a reason and none was given: which form's reason
    /// field says so.
    pub reason_missing: Option<ReasonMissing>,
}

/// The form whose reason was missing on a gate with `require_reason`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum ReasonMissing {
    Reject,
    Modify,
}

impl ReasonMissing {
    fn message(self) -> &'static str {
        match self {
            ReasonMissing::Reject => {
                "This gate needs a reason to reject: write why, then reject again. Nothing was decided."
            }
            ReasonMissing::Modify => {
                "This gate needs a reason for an edit: write why, then approve with these changes again. Nothing was decided."
            }
        }
    }
}

/// What a decision's input (a gate's form) came back with.
#[derive(Debug, Default)]
pub(crate) struct InputProblem {
    pub sent: Vec<(String, String)>,
    pub errors: Vec<crate::domain::form::InputError>,
}

impl InputProblem {
    fn boxed(
        sent: &[(String, String)],
        errors: Vec<crate::domain::form::InputError>,
    ) -> Option<Box<Self>> {
        Some(Box::new(InputProblem {
            sent: sent.to_vec(),
            errors,
        }))
    }
}

/// What the page says about a decision that did not settle the gate.
#[derive(Debug)]
pub(crate) enum Notice {
    /// The payload was edited since the page was loaded: look again.
    PayloadChanged,
    /// The decision was a vote that left the gate open: the progress.
    VoteRecorded(String),
}

/// Who decided first, and when (shown after a lost race).
#[derive(Debug, Serialize)]
pub(crate) struct AlreadyDecided {
    pub by: String,
    pub at: String,
}

/// A record no longer pending: what became of it.
#[derive(Debug, Serialize)]
pub(crate) struct Outcome {
    status: &'static str,
    decided_by: Option<String>,
    decided_at: Option<String>,
    reason: Option<String>,
    /// A MODIFIED record's edit.
    diff: Option<Vec<DiffLine>>,
    /// The approver's input (a gate with a form), as JSON.
    input: Option<String>,
}

/// GET /ui/approvals/{key} and a signed link's page.
#[derive(Debug, Serialize)]
pub(crate) struct ApprovalPage {
    message: String,
    agent: String,
    step: String,
    phase: &'static str,
    created_at: String,
    expires_at: String,
    time_left: String,
    deciders: String,
    run_id: String,
    run_link: bool,
    /// The run's status now; `None` when it cannot be read.
    run_status: Option<&'static str>,
    pending: bool,
    /// Paused under another version of the spec than the one served.
    stale: Option<Stale>,
    /// Whether the Approve and Modify forms are shown (a pending record
    /// that approve can decide: not a stale one under `refuse`).
    approvable: bool,
    /// Whether any decision form is shown: not to someone a gate with
    /// rules does not take a vote from, nor to who asked for it.
    may_decide: bool,
    /// Why not, when `may_decide` is false.
    why_not_decide: String,
    /// A gate with rules: each rule's progress and the ledger.
    team: Option<TeamView>,
    outcome: Option<Outcome>,
    already_decided: Option<AlreadyDecided>,
    payload_changed: bool,
    vote_recorded: Option<String>,
    /// The gate needs a reason to reject or edit (`require_reason`): the
    /// reason fields say so and are required.
    reason_required: bool,
    /// Which form's reason was missing, and what to do.
    reason_missing: Option<ReasonMissing>,
    reason_error: Option<&'static str>,
    /// "Payload", or what the payload shown is once edited.
    payload_heading: String,
    /// The payload as the run asked, when the one shown is an edit of it.
    original: Option<String>,
    /// The digest of the payload shown, sent back with every decision.
    payload_digest: String,
    tree: Node,
    /// The tree (and the raw text) leave part of the payload out: the
    /// page says so and links the download.
    payload_cut: bool,
    /// The payload's download.
    raw_url: String,
    raw: String,
    /// The edit box's text: the whole payload, or empty when it is too
    /// large to edit on a page (`edit_too_large`).
    edit: String,
    edit_too_large: bool,
    payload_error: Option<String>,
    input: String,
    /// The gate's form as typed fields, in the Approve (and Modify) form.
    form: Option<FormView>,
    outputs: Vec<Output>,
    timeline: Vec<TimelineEntry>,
    /// Where the decision forms post, and their CSRF token.
    action: String,
    csrf: String,
}

impl Page for ApprovalPage {
    const TEMPLATE: &'static str = "approval.html";
}

/// What the approval page shows besides the record.
pub(crate) struct Seen<'a> {
    pub now: DateTime<Utc>,
    pub deciders: String,
    pub run_status: Option<&'static str>,
    pub events: &'a [Event],
    /// `Some` when the record paused under another version of the spec.
    pub stale: Option<Stale>,
    /// A gate with rules: its votes as the viewer sees them.
    pub team: Option<TeamView>,
    /// A plain gate the viewer asked for: why they may not decide it.
    pub asked: Option<String>,
    /// The gate's form, when it has one (in the spec it paused under).
    pub form: Option<Form>,
}

impl ApprovalPage {
    pub fn new(record: &ApprovalRecord, seen: Seen<'_>, frame: &Frame, problem: Problem) -> Self {
        let pending = record.status == ApprovalStatus::Pending;
        let shown = shown_payload(record);
        let tree = payload::tree(shown);
        let (raw, raw_cut) = payload::shown(shown);
        let edited = shown != &record.payload;
        let outcome = (!pending).then(|| Outcome {
            status: record.status.as_str(),
            decided_by: record.decided_by.clone(),
            decided_at: record.decided_at.map(format::time),
            reason: record.reason().map(str::to_string),
            diff: record
                .modified_payload()
                .map(|edited| payload::diff(&record.payload, edited)),
            input: record.approver_input().map(|i| payload::shown(i).0),
        });
        let form = seen.form.as_ref().map(|form| match &problem.input {
            Some(input) => FormView::new(form, Some(&input.sent), &input.errors),
            None => FormView::new(form, None, &[]),
        });
        ApprovalPage {
            message: super::message_of(record),
            agent: record.agent_id.clone(),
            step: record.step_id.clone(),
            phase: record.phase.as_str(),
            created_at: format::time(record.created_at),
            expires_at: format::time(record.expires_at),
            time_left: format::span(seen.now, record.expires_at),
            deciders: seen.deciders,
            may_decide: seen.team.as_ref().is_none_or(|t| t.may_not_vote.is_none())
                && seen.asked.is_none(),
            why_not_decide: seen
                .team
                .as_ref()
                .and_then(|t| t.may_not_vote.clone())
                .or_else(|| seen.asked.clone())
                .unwrap_or_default(),
            run_id: record.run_id.clone(),
            run_link: frame.run_link,
            run_status: seen.run_status,
            pending,
            approvable: pending && seen.stale.as_ref().is_none_or(|s| s.approvable),
            stale: seen.stale,
            team: seen.team,
            outcome,
            already_decided: problem.already_decided,
            payload_changed: matches!(problem.notice.as_deref(), Some(Notice::PayloadChanged)),
            vote_recorded: match problem.notice.as_deref() {
                Some(Notice::VoteRecorded(progress)) => Some(progress.clone()),
                _ => None,
            },
            reason_required: record.roster.as_ref().is_some_and(|r| r.require_reason),
            reason_missing: problem.reason_missing,
            reason_error: problem.reason_missing.map(ReasonMissing::message),
            payload_heading: payload_heading(record, edited),
            original: edited.then(|| payload::shown(&record.payload).0),
            payload_digest: record.payload_digest(),
            tree: tree.root,
            payload_cut: tree.cut || raw_cut,
            raw_url: frame.raw.clone(),
            raw,
            edit_too_large: problem.payload_text.is_none() && raw_cut,
            edit: match problem.payload_text {
                Some(text) => text,
                None if raw_cut => String::new(),
                None => payload::pretty(record.current_payload()),
            },
            payload_error: problem.payload_error,
            input: payload::shown_doc(&record.input).0,
            form,
            outputs: Output::all(&record.outputs),
            timeline: timeline::entries(seen.events),
            action: frame.action.clone(),
            csrf: frame.csrf.clone(),
        }
    }
}

/// The payload the page shows: a decision's edit once MODIFIED (what was
/// approved), else what the gate asks about now (a vote's edit on a gate
/// that counts votes, else the payload it paused with).
pub(crate) fn shown_payload(record: &ApprovalRecord) -> &Value {
    record
        .modified_payload()
        .unwrap_or_else(|| record.current_payload())
}

/// The payload section's heading: plain until someone edited the payload,
/// then what the edit is to this approval.
fn payload_heading(record: &ApprovalRecord, edited: bool) -> String {
    if !edited {
        return "Payload".into();
    }
    match record.status {
        ApprovalStatus::Pending => "Payload, as edited: what approving approves".into(),
        ApprovalStatus::Modified | ApprovalStatus::Approved => match &record.decided_by {
            Some(by) => format!("Payload, as edited by {by}: what was approved"),
            None => "Payload, as edited: what was approved".into(),
        },
        _ => "Payload, as last edited".into(),
    }
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
    let events = match state.queries().run_events(&record.run_id, 0).await {
        Ok(events) => events,
        Err(e) => return refusal::from_api(e.into()),
    };
    let run_status = match view::run_view(state, &record.run_id).await {
        Ok(run) => Some(run.status.as_str()),
        Err(_) => None,
    };
    let team = match &record.roster {
        Some(_) => match state.agent.store().votes(&record.key).await {
            Ok(votes) => {
                let viewer = frame.chrome.whoami.as_deref().unwrap_or_default();
                TeamView::new(record, &votes, viewer)
            }
            Err(e) => return refusal::from_api(e.into()),
        },
        None => None,
    };
    let viewer = frame.chrome.whoami.as_deref().unwrap_or_default();
    let asked = (record.roster.is_none()
        && record.status == ApprovalStatus::Pending
        && crate::domain::policy::barred_as_requester(
            record,
            state.agent.spec().deciders_of(record).allow_self_approval,
            viewer,
        ))
    .then(|| {
        format!(
            "You ({viewer}) asked for this approval, so you may not decide it (separation of duties): someone else must."
        )
    });
    let of = state.agent.spec().deciders_of(record);
    let who = match (&team, &record.roster) {
        // A gate with rules: its members by name, less who asked.
        (Some(team), Some(roster)) if !roster.rules.is_empty() => {
            format!("{}{}", team.deciders, deciders::barred_note(record, of))
        }
        _ => deciders::who_decides(record, of, inbox::open_to(state)),
    };
    let seen = Seen {
        now: state.agent.clock().now(),
        deciders: who,
        run_status,
        events: &events,
        stale: Staleness::new(state).of(record).await,
        team,
        asked,
        form: gate_form(state, record).cloned(),
    };
    let page = ApprovalPage::new(record, seen, &frame, problem);
    let chrome = Chrome {
        live: Some("timeline"),
        stream: Some(frame.stream),
        ..frame.chrome
    };
    templates::page(status, &page, &chrome)
}

/// The form of `record`'s gate, from the spec it paused under when that
/// is the one served (a pause of another version shows no fields; its
/// decision is checked against its own version's form all the same).
pub(crate) fn gate_form<'s>(state: &'s AppState, record: &ApprovalRecord) -> Option<&'s Form> {
    let spec = state.agent.spec();
    (record.spec_hash == spec.hash.as_str())
        .then(|| spec.gate_policy(record.step_index))
        .flatten()
        .and_then(|p| p.form.as_ref())
}

fn ui_frame(ui: &Ui, viewer: &Viewer, record: &ApprovalRecord) -> Frame {
    Frame {
        action: format!("/ui/approvals/{}", segment(&record.key)),
        csrf: viewer.csrf(ui),
        stream: format!("/ui/runs/{}/stream", segment(&record.run_id)),
        raw: format!("/ui/approvals/{}/payload", segment(&record.key)),
        chrome: viewer.chrome(
            ui,
            record.message.clone().unwrap_or_else(|| "Approval".into()),
            "inbox",
        ),
        run_link: true,
    }
}

/// GET /ui/approvals/{key}/payload: the payload the gate asks about now,
/// whole, as a JSON download (the page may show only part of it).
pub(crate) async fn raw_payload(
    State(state): State<AppState>,
    viewer: Viewer,
    PathParam(key): PathParam,
) -> Response {
    let response = match load(&state, &key).await {
        Ok(Some(record)) => download(&record),
        Ok(None) => refusal::not_found(),
        Err(e) => refusal::from_api(e),
    };
    viewer.finish(response)
}

/// `record`'s payload as the page shows it ([`shown_payload`]) as an
/// `application/json` attachment named after its key.
pub(crate) fn download(record: &ApprovalRecord) -> Response {
    let body = serde_json::to_vec(shown_payload(record)).unwrap_or_default();
    let name = format!(
        "attachment; filename=\"payload-{}.json\"",
        segment(&record.key)
    );
    (
        [
            (
                axum::http::header::CONTENT_TYPE,
                "application/json".to_string(),
            ),
            (axum::http::header::CONTENT_DISPOSITION, name),
        ],
        body,
    )
        .into_response()
}

/// GET /ui/approvals/{key}.
pub(crate) async fn page(
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
            // A key twice would be read as its last: refused, as every
            // JSON body is (see `crate::support::json_keys`).
            if let Err(e) = crate::support::json_keys::check_keys(text.as_bytes()) {
                return Err(Problem {
                    payload_error: Some(format!("This payload is refused: {e}.")),
                    payload_text: Some(text),
                    ..Problem::default()
                });
            }
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

/// Decide `key` as `by` through `channel` (the inbox or a link), on the
/// API's path (`decide::decide`).
pub(crate) async fn decide_as(
    state: &AppState,
    key: &str,
    fields: &Fields,
    by: &str,
    channel: Channel,
) -> Answer {
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
    // Where the page says a reason is missing, should the gate need one.
    let missing_reason_of = match &decision {
        Decision::Modify { .. } => ReasonMissing::Modify,
        _ => ReasonMissing::Reject,
    };
    // The typed fields of the gate's form, with an approve or a modify.
    let form = match load(state, key).await {
        Ok(Some(record)) => gate_form(state, &record).cloned(),
        Ok(None) => None,
        Err(e) => return Answer::Refused(refusal::from_api(e)),
    };
    let input = match (&form, &decision) {
        (Some(form), Decision::Approve { .. } | Decision::Modify { .. }) => {
            match fields::input_of(form, &fields.input) {
                Ok(input) => Some(input),
                Err(input_errors) => {
                    return Answer::Again(
                        Problem {
                            input: InputProblem::boxed(&fields.input, input_errors),
                            payload_text: edited,
                            ..Problem::default()
                        },
                        StatusCode::UNPROCESSABLE_ENTITY,
                    );
                }
            }
        }
        _ => None,
    };
    let ballot = Ballot::new(decision, by, channel)
        .shown(fields.payload_digest.clone())
        .with_input(input);
    let answered = decide::decide(&state.agent, &state.background, key.to_string(), ballot).await;
    match answered.map(|answered| answered.outcome) {
        Ok(DecisionOutcome::Voted(vote) | DecisionOutcome::VoteRepeated(vote)) => Answer::Again(
            Problem {
                notice: Some(Box::new(Notice::VoteRecorded(vote.tally.summary()))),
                ..Problem::default()
            },
            StatusCode::OK,
        ),
        Ok(
            outcome @ (DecisionOutcome::Resumes(_)
            | DecisionOutcome::Finished { .. }
            | DecisionOutcome::Repeated(_)),
        ) => Answer::Decided(Box::new(outcome.record().clone())),
        Err(RunError::Approval(ApprovalError::PayloadChanged { .. })) => Answer::Again(
            Problem {
                notice: Some(Box::new(Notice::PayloadChanged)),
                ..Problem::default()
            },
            StatusCode::CONFLICT,
        ),
        Err(RunError::Approval(ApprovalError::AlreadyResolved {
            decided_by,
            decided_at,
            ..
        })) => Answer::Again(
            Problem {
                already_decided: Some(AlreadyDecided {
                    by: decided_by.unwrap_or_else(|| "someone".into()),
                    at: decided_at
                        .map(format::time)
                        .unwrap_or_else(|| "an unknown time".into()),
                }),
                ..Problem::default()
            },
            StatusCode::CONFLICT,
        ),
        Err(RunError::Approval(ApprovalError::ReasonRequired { .. })) => Answer::Again(
            Problem {
                reason_missing: Some(missing_reason_of),
                // What was typed stays: the edit, and the form's fields.
                input: if fields.input.is_empty() {
                    None
                } else {
                    InputProblem::boxed(&fields.input, Vec::new())
                },
                payload_text: edited,
                ..Problem::default()
            },
            StatusCode::UNPROCESSABLE_ENTITY,
        ),
        Err(RunError::Approval(ApprovalError::InvalidInput { errors, .. })) => Answer::Again(
            Problem {
                input: InputProblem::boxed(&fields.input, errors),
                payload_text: edited,
                ..Problem::default()
            },
            StatusCode::UNPROCESSABLE_ENTITY,
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
pub(crate) async fn decide(
    State(state): State<AppState>,
    Extension(ui): Extension<SharedUi>,
    viewer: Viewer,
    PathParam(key): PathParam,
    FormBody(fields): FormBody,
) -> Response {
    if !viewer.csrf_ok(&ui, fields.csrf.as_deref()) {
        return viewer.finish(refusal::csrf());
    }
    let answer = decide_as(&state, &key, &fields, &viewer.name, Channel::Inbox).await;
    let response = match answer {
        Answer::Decided(record) => {
            Redirect::to(&format!("/ui/approvals/{}", segment(&record.key))).into_response()
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
