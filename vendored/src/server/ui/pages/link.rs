//! Signed approval links: GET /a/{key}/{signature}[?as=NAME] shows the
//! approval page without sign-in and changes nothing (link previews and
//! mail scanners fetch links: a GET must never decide, claim or write);
//! POST decides as the bound identity, or as `link` when unbound. A link is
//! good only while its approval is pending; a wrong signature, an approval
//! no longer pending and links off all show the same `#bad-link` page.
//!
//! Every route checks, in this order: the client is not locked out for
//! bad signatures (429, server/http/throttle.rs); the signature (a bad one is
//! counted); an unbound link only while unbound links are on
//! (TOLLGATE_UNBOUND_LINKS, else 403); then, with the record read, the
//! identity it decides as may decide it exactly as the API's callers must
//! (`links::may_decide_record`: the gate's groups, or the approvers list;
//! else 403, before anything is shown or written).

use axum::Extension;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;

use super::approval::{self, Answer, Frame, Problem};
use super::refusal;
use crate::domain::links::{LINK_CALLER, LinkSigner, may_decide_record};
use crate::domain::pending_approval::{ApprovalRecord, ApprovalStatus};
use crate::server::http::feed::Watcher;
use crate::server::http::state::AppState;
use crate::server::http::throttle::ClientAddr;
use crate::server::ui::auth::csrf::{self, Binding};
use crate::server::ui::form::Form as FormBody;
use crate::server::ui::render::format::segment;
use crate::server::ui::render::templates::Chrome;
use crate::server::ui::{SharedUi, Ui};

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct LinkQuery {
    #[serde(rename = "as")]
    bound: Option<String>,
}

/// The link signer, when links are on.
fn signer(state: &AppState) -> Option<&LinkSigner> {
    state.links.as_ref()
}

/// The checks of every link route before its record is read (see the
/// module's comment): `Ok` with who the link decides as, else the refusal.
fn admit<'a>(
    state: &AppState,
    ui: &Ui,
    client: ClientAddr,
    key: &str,
    signature: &str,
    bound: Option<&'a str>,
) -> Result<&'a str, Box<Response>> {
    let client = client.key();
    let now = state.agent.clock().now();
    if let Err(lockout) = ui.bad_links.check(client, now) {
        return Err(Box::new(refusal::too_many("bad links", lockout)));
    }
    let Some(signer) = signer(state) else {
        return Err(Box::new(refusal::bad_link()));
    };
    if !signer.verify(key, signature, bound) {
        if let Some(lockout) = ui.bad_links.fail(client, now) {
            tracing::warn!(
                client = %client,
                retry_after_secs = lockout.retry_after_secs(),
                "signed links locked out for a client: too many bad link signatures"
            );
        }
        return Err(Box::new(refusal::bad_link()));
    }
    if bound.is_none() && !signer.unbound() {
        return Err(Box::new(refusal::unbound_off()));
    }
    Ok(bound.unwrap_or(LINK_CALLER))
}

/// The pending record a link names, when `by` may decide it, or the page
/// to answer with: the "bad link" page when it is no longer pending (or
/// gone), 403 when `by` may not decide it, an error page when the store
/// could not be read (not a "bad link", which would send the approver off
/// to ask for a new one).
async fn linked(state: &AppState, key: &str, by: &str) -> Result<ApprovalRecord, Response> {
    let record = match approval::load(state, key).await {
        Ok(Some(record)) if record.status == ApprovalStatus::Pending => record,
        Ok(_) => return Err(refusal::bad_link()),
        Err(e) => return Err(refusal::from_api(e)),
    };
    if !may_decide_record(&record, state.agent.spec().deciders_of(&record), by) {
        return Err(refusal::not_a_decider(by, &record));
    }
    Ok(record)
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
        None => format!("/a/{}/{}", segment(key), segment(signature)),
    };
    let beside = |what: &str| match path.split_once('?') {
        Some((base, query)) => format!("{base}/{what}?{query}"),
        None => format!("{path}/{what}"),
    };
    Frame {
        csrf: csrf::token(&ui.key, &binding(key, signature, bound)),
        stream: beside("stream"),
        raw: beside("payload"),
        action: path,
        chrome: Chrome {
            title: "Approval".into(),
            whoami: Some(bound.unwrap_or(LINK_CALLER).to_string()),
            ..Chrome::default()
        },
        run_link: false,
    }
}

/// GET /a/{key}/{signature}/payload: the payload, whole, as a JSON
/// download, for who the link admits; nothing is written.
pub(crate) async fn raw_payload(
    State(state): State<AppState>,
    Extension(ui): Extension<SharedUi>,
    client: ClientAddr,
    Path((key, signature)): Path<(String, String)>,
    Query(query): Query<LinkQuery>,
) -> Response {
    match admitted_record(
        &state,
        &ui,
        client,
        &key,
        &signature,
        query.bound.as_deref(),
    )
    .await
    {
        Ok(record) => super::approval::download(&record),
        Err(refused) => refused,
    }
}

/// The checks of a link route that only reads ([`admit`], then
/// [`linked`]): the pending record the link may see, or the refusal.
async fn admitted_record(
    state: &AppState,
    ui: &Ui,
    client: ClientAddr,
    key: &str,
    signature: &str,
    bound: Option<&str>,
) -> Result<ApprovalRecord, Response> {
    let by = admit(state, ui, client, key, signature, bound).map_err(|refused| *refused)?;
    linked(state, key, by).await
}

/// GET /a/{key}/{signature}: the approval page; nothing is written.
pub(crate) async fn page(
    State(state): State<AppState>,
    Extension(ui): Extension<SharedUi>,
    client: ClientAddr,
    Path((key, signature)): Path<(String, String)>,
    Query(query): Query<LinkQuery>,
) -> Response {
    let bound = query.bound.as_deref();
    let record = match admitted_record(&state, &ui, client, &key, &signature, bound).await {
        Ok(record) => record,
        Err(refused) => return refused,
    };
    let frame = frame(&ui, &state, &key, &signature, bound);
    approval::render(&state, &record, frame, Problem::default(), StatusCode::OK).await
}

/// POST /a/{key}/{signature}: decide as the bound identity (or `link`).
/// The outcome is shown at once: the link stops working once decided.
pub(crate) async fn decide(
    State(state): State<AppState>,
    Extension(ui): Extension<SharedUi>,
    client: ClientAddr,
    Path((key, signature)): Path<(String, String)>,
    Query(query): Query<LinkQuery>,
    FormBody(fields): FormBody,
) -> Response {
    let bound = query.bound.as_deref();
    let by = match admit(&state, &ui, client, &key, &signature, bound) {
        Ok(by) => by,
        Err(refused) => return *refused,
    };
    if !csrf::check(
        &ui.key,
        &binding(&key, &signature, bound),
        fields.csrf.as_deref(),
    ) {
        return refusal::csrf();
    }
    if let Err(refused) = linked(&state, &key, by).await {
        return refused;
    }
    let (problem, status) = match approval::decide_as(
        &state,
        &key,
        &fields,
        by,
        crate::domain::policy::Channel::Link,
    )
    .await
    {
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

/// GET /a/{key}/{signature}/stream: the run's events for the link's page,
/// while the approval is pending only: the stream ends once it is decided
/// (or expires, or its run is cancelled), and a link no longer pending is
/// refused, like its page. The link is a capability for one decision, not
/// a lasting view of the run.
pub(crate) async fn timeline(
    State(state): State<AppState>,
    Extension(ui): Extension<SharedUi>,
    client: ClientAddr,
    Path((key, signature)): Path<(String, String)>,
    Query(query): Query<LinkQuery>,
    headers: HeaderMap,
) -> Response {
    let bound = query.bound.as_deref();
    let record = match admitted_record(&state, &ui, client, &key, &signature, bound).await {
        Ok(record) => record,
        Err(refused) => return refused,
    };
    crate::server::ui::stream::run_events(state, Watcher::Link { key }, record.run_id, headers)
        .await
        .into_response()
}
