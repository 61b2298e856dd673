//! GET /ui/notifications: the outbox's deliveries that need a person
//! (DESIGN §14): failed and dead notices, newest first, each with a Retry
//! button, "Retry all dead", and the webhook endpoints a 410 disabled.
//! POST /ui/notifications/{id}/retry and /ui/notifications/retry (every
//! dead one) retry through the API's own functions (service/notices.rs),
//! then go back to the page.
//!
//! Targets are shown as the spec wrote them (`${NAME}` references) and
//! last errors as stored (without secrets or URLs): nothing here resolves
//! a secret.

use axum::Extension;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Redirect, Response};
use serde::{Deserialize, Serialize};

use super::refusal;
use crate::domain::notices::NoticeStatus;
use crate::server::http::paging::{PageLinks, Position, UI_PAGE};
use crate::server::http::state::AppState;
use crate::server::ui::SharedUi;
use crate::server::ui::auth::viewer::Viewer;
use crate::server::ui::form::Form;
use crate::server::ui::render::format::{self, segment};
use crate::server::ui::render::templates::{self, Page};
use crate::service::ApiError;
use crate::service::notices::{self, NoticeFilter};
use crate::store::{DisabledEndpoint, OutboxNotice};

/// Where the page is, and where its forms go back to.
const PATH: &str = "/ui/notifications";

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct NoticesQuery {
    cursor: Option<String>,
    trail: Option<String>,
}

/// One failed or dead notice, as a row of the page.
#[derive(Debug, Serialize)]
pub(crate) struct NoticeRow {
    id: String,
    event: &'static str,
    key: String,
    /// The approval's page.
    approval: String,
    channel: &'static str,
    target: String,
    status: &'static str,
    attempts: u32,
    created_at: String,
    /// When it is tried next (failed only: a dead one waits for a person).
    next_try: Option<String>,
    last_error: Option<String>,
    /// Where its Retry button posts.
    retry: String,
}

impl NoticeRow {
    pub fn new(row: &OutboxNotice) -> NoticeRow {
        let notice = &row.notice;
        NoticeRow {
            id: notice.id.clone(),
            event: notice.event.as_str(),
            key: notice.key.clone(),
            approval: format!("/ui/approvals/{}", segment(&notice.key)),
            channel: notice.channel.as_str(),
            target: notice.target.clone(),
            status: row.status.as_str(),
            attempts: row.attempts,
            created_at: format::time(notice.created_at),
            next_try: row.status.is_due_state().then(|| format::time(row.next_at)),
            last_error: row.last_error.clone(),
            retry: format!("{PATH}/{}/retry", segment(&notice.id)),
        }
    }
}

/// A webhook endpoint that answered 410 Gone: nothing is sent to it until
/// a notice to it is retried.
#[derive(Debug, Serialize)]
pub(crate) struct DisabledRow {
    endpoint: String,
    disabled_at: String,
    reason: String,
}

impl DisabledRow {
    pub fn new(endpoint: &DisabledEndpoint) -> DisabledRow {
        DisabledRow {
            endpoint: endpoint.endpoint.clone(),
            disabled_at: format::time(endpoint.disabled_at),
            reason: endpoint.reason.clone(),
        }
    }
}

/// GET /ui/notifications.
#[derive(Debug, Serialize)]
pub(crate) struct NotificationsPage {
    pub rows: Vec<NoticeRow>,
    /// Whether any listed row is dead (then "Retry all dead" is offered).
    pub any_dead: bool,
    pub disabled: Vec<DisabledRow>,
    pub csrf: String,
    pub links: PageLinks,
}

impl Page for NotificationsPage {
    const TEMPLATE: &'static str = "notifications.html";
}

impl NotificationsPage {
    pub fn new(
        rows: &[OutboxNotice],
        disabled: &[DisabledEndpoint],
        csrf: String,
        links: PageLinks,
    ) -> NotificationsPage {
        NotificationsPage {
            any_dead: rows.iter().any(|r| r.status == NoticeStatus::Dead),
            rows: rows.iter().map(NoticeRow::new).collect(),
            disabled: disabled.iter().map(DisabledRow::new).collect(),
            csrf,
            links,
        }
    }
}

pub(crate) async fn page(
    State(state): State<AppState>,
    Extension(ui): Extension<SharedUi>,
    viewer: Viewer,
    Query(query): Query<NoticesQuery>,
) -> Response {
    let position = Position::new(query.cursor, query.trail);
    let store = state.agent.store();
    let filter = NoticeFilter {
        statuses: vec![NoticeStatus::Failed, NoticeStatus::Dead],
        ..NoticeFilter::default()
    };
    let read = async {
        let rows =
            notices::page(store.as_ref(), &filter, UI_PAGE, position.cursor.as_deref()).await?;
        let disabled = store.disabled_endpoints().await?;
        Ok::<_, crate::store::StoreError>((rows, disabled))
    };
    let (rows, disabled) = match read.await {
        Ok(read) => read,
        Err(e) => return viewer.finish(refusal::from_api(e.into())),
    };
    let links = position.links(&[], rows.next_cursor.as_deref());
    let page = NotificationsPage::new(&rows.notices, &disabled, viewer.csrf(&ui), links);
    let chrome = viewer.chrome(&ui, "Notifications", "notifications");
    viewer.finish(templates::page(StatusCode::OK, &page, &chrome))
}

/// POST /ui/notifications/{id}/retry `csrf`: 303 back to the page.
pub(crate) async fn retry(
    State(state): State<AppState>,
    Extension(ui): Extension<SharedUi>,
    viewer: Viewer,
    Path(id): Path<String>,
    Form(fields): Form,
) -> Response {
    if !viewer.csrf_ok(&ui, fields.csrf.as_deref()) {
        return viewer.finish(refusal::csrf());
    }
    let now = state.agent.clock().now();
    let response = match notices::retry_one(state.agent.store().as_ref(), &id, now).await {
        Ok(_) => {
            tracing::info!(notice = %id, by = %viewer.name, "notice retried from the inbox: due now");
            Redirect::to(PATH).into_response()
        }
        Err(e) => refusal::from_api(ApiError::from(e)),
    };
    viewer.finish(response)
}

/// POST /ui/notifications/retry `csrf`: every dead notice; 303 back.
pub(crate) async fn retry_dead(
    State(state): State<AppState>,
    Extension(ui): Extension<SharedUi>,
    viewer: Viewer,
    Form(fields): Form,
) -> Response {
    if !viewer.csrf_ok(&ui, fields.csrf.as_deref()) {
        return viewer.finish(refusal::csrf());
    }
    let now = state.agent.clock().now();
    let response = match notices::retry_dead(state.agent.store().as_ref(), now).await {
        Ok(retried) => {
            tracing::info!(retried, by = %viewer.name, "dead notices retried from the inbox: due now");
            Redirect::to(PATH).into_response()
        }
        Err(e) => refusal::from_api(e.into()),
    };
    viewer.finish(response)
}
