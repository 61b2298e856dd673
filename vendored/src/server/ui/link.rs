//! Signed approval links: GET /a/{key}/{signature}[?as=NAME] shows the
//! approval page without sign-in and changes nothing (link previews and
//! mail scanners fetch links: a GET must never decide, claim or write);
//! POST decides as the bound identity, or as `link` when unbound, with the
//! approvers allow-list applied. A link is good only while its approval is
//! pending; a wrong signature, an approval no longer pending and links off
//! all show the same `#bad-link` page.

use axum::Extension;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;

use super::approval::{self, Answer, Frame, Problem, encode};
use super::csrf::{self, Binding};
use super::form::Form;
use super::templates::Chrome;
use super::{SharedUi, Ui, refusal};
use crate::links::{LINK_CALLER, LinkSigner};
use crate::pending_approval::{ApprovalRecord, ApprovalStatus};
use crate::server::state::AppState;

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(super) struct LinkQuery {
    #[serde(rename = "as")]
    bound: Option<String>,
}

/// The link signer, when links are on.
fn signer(state: &AppState) -> Option<&LinkSigner> {
    state.links.as_ref()
}

/// The session key derived from the link secret, when there is one.
pub(crate) fn derived_session_key(state: &AppState) -> Option<[u8; 32]> {
    signer(state).map(|links| links.derive_key("tollgate-session-v1"))
}

/// The pending record a link names: `Ok(None)` when the link is not usable
/// (whatever the reason: the page says nothing more), `Err` when the store
/// could not be read (an error page, not a "bad link" that would send the
/// approver off to ask for a new one).
async fn linked(
    state: &AppState,
    key: &str,
    signature: &str,
    bound: Option<&str>,
) -> Result<Option<ApprovalRecord>, Response> {
    let Some(signer) = signer(state) else {
        return Ok(None);
    };
    if !signer.verify(key, signature, bound) {
        return Ok(None);
    }
    match approval::load(state, key).await {
        Ok(record) => Ok(record.filter(|r| r.status == ApprovalStatus::Pending)),
        Err(e) => Err(refusal::from_api(e)),
    }
}

fn binding(key: &str, signature: &str, bound: Option<&str>) -> Binding {
    Binding::Link {
        key: key.to_string(),
        signature: signature.to_string(),
        bound: bound.map(str::to_string),
    }
}

fn frame(ui: &Ui, state: &AppState, key: &str, signature: &str, bound: Option<&str>) -> Frame {
    let path = match signer(state) {
        Some(signer) => signer.path(key, bound),
        None => format!("/a/{}/{}", encode(key), encode(signature)),
    };
    let stream = match path.split_once('?') {
        Some((base, query)) => format!("{base}/stream?{query}"),
        None => format!("{path}/stream"),
    };
    Frame {
        action: path,
        csrf: csrf::token(&ui.key, &binding(key, signature, bound)),
        stream,
        chrome: Chrome {
            title: "Approval".into(),
            whoami: Some(bound.unwrap_or(LINK_CALLER).to_string()),
            ..Chrome::default()
        },
        run_link: false,
    }
}

/// GET /a/{key}/{signature}: the approval page; nothing is written.
pub(super) async fn page(
    State(state): State<AppState>,
    Extension(ui): Extension<SharedUi>,
    Path((key, signature)): Path<(String, String)>,
    Query(query): Query<LinkQuery>,
) -> Response {
    let bound = query.bound.as_deref();
    let record = match linked(&state, &key, &signature, bound).await {
        Ok(Some(record)) => record,
        Ok(None) => return refusal::bad_link(),
        Err(failed) => return failed,
    };
    let frame = frame(&ui, &state, &key, &signature, bound);
    approval::render(&state, &record, frame, Problem::default(), StatusCode::OK).await
}

/// POST /a/{key}/{signature}: decide as the bound identity (or `link`).
/// The outcome is shown at once: the link stops working once decided.
pub(super) async fn decide(
    State(state): State<AppState>,
    Extension(ui): Extension<SharedUi>,
    Path((key, signature)): Path<(String, String)>,
    Query(query): Query<LinkQuery>,
    Form(fields): Form,
) -> Response {
    let bound = query.bound.as_deref();
    if signer(&state).is_none_or(|s| !s.verify(&key, &signature, bound)) {
        return refusal::bad_link();
    }
    if !csrf::check(
        &ui.key,
        &binding(&key, &signature, bound),
        fields.csrf.as_deref(),
    ) {
        return refusal::csrf();
    }
    let by = bound.unwrap_or(LINK_CALLER);
    let (problem, status) = match approval::decide_as(&state, &key, &fields, by).await {
        Answer::Decided(_) => (Problem::default(), StatusCode::OK),
        Answer::Again(problem, status) => (problem, status),
        Answer::Refused(response) => return response,
    };
    match approval::load(&state, &key).await {
        Ok(Some(record)) => {
            let frame = frame(&ui, &state, &key, &signature, bound);
            approval::render(&state, &record, frame, problem, status).await
        }
        Ok(None) => refusal::bad_link(),
        Err(e) => refusal::from_api(e),
    }
}

/// GET /a/{key}/{signature}/stream: the run's events for the link's page
/// (read-only, so also after the decision the page made).
pub(super) async fn timeline(
    State(state): State<AppState>,
    Path((key, signature)): Path<(String, String)>,
    Query(query): Query<LinkQuery>,
    headers: HeaderMap,
) -> Response {
    let bound = query.bound.as_deref();
    if signer(&state).is_none_or(|s| !s.verify(&key, &signature, bound)) {
        return refusal::bad_link();
    }
    let record = match approval::load(&state, &key).await {
        Ok(Some(record)) => record,
        Ok(None) => return refusal::bad_link(),
        Err(e) => return refusal::from_api(e),
    };
    super::stream::run_events(state, record.run_id, headers)
        .await
        .into_response()
}
