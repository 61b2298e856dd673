//! GET /ui/history: decided, expired and cancelled approvals (who, what,
//! when, why; an edited payload as a line diff), filtered by status, step
//! and text, a page at a time.

use axum::Extension;
use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::response::Response;
use serde::{Deserialize, Serialize};

use super::{blank_to_none, inbox, refusal};
use crate::domain::pending_approval::{ApprovalRecord, ApprovalStatus};
use crate::server::http::paging::{PageLinks, Position, UI_PAGE};
use crate::server::http::state::AppState;
use crate::server::ui::SharedUi;
use crate::server::ui::auth::viewer::Viewer;
use crate::server::ui::listing::{self, Listing};
use crate::server::ui::render::format;
use crate::server::ui::render::payload::{self, DiffLine};
use crate::server::ui::render::templates::{self, Page};

/// The statuses the history lists.
pub(crate) const DONE: [ApprovalStatus; 5] = [
    ApprovalStatus::Approved,
    ApprovalStatus::Modified,
    ApprovalStatus::Rejected,
    ApprovalStatus::Expired,
    ApprovalStatus::Cancelled,
];

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct HistoryQuery {
    status: Option<String>,
    step: Option<String>,
    q: Option<String>,
    cursor: Option<String>,
    trail: Option<String>,
}

/// One decided (expired, cancelled) approval, as a row of the history.
#[derive(Debug, Serialize)]
pub(crate) struct HistoryRow {
    key: String,
    message: String,
    step: String,
    status: &'static str,
    decided_by: Option<String>,
    decided_at: Option<String>,
    reason: Option<String>,
    /// A MODIFIED record's edit.
    diff: Option<Vec<DiffLine>>,
}

impl HistoryRow {
    pub fn new(record: &ApprovalRecord) -> HistoryRow {
        HistoryRow {
            key: record.key.clone(),
            message: super::message_of(record),
            step: record.step_id.clone(),
            status: record.status.as_str(),
            decided_by: record.decided_by.clone(),
            decided_at: record.decided_at.map(format::time),
            reason: record.reason().map(str::to_string),
            diff: record
                .modified_payload()
                .map(|edited| payload::diff(&record.payload, edited)),
        }
    }
}

/// GET /ui/history.
#[derive(Debug, Serialize)]
pub(crate) struct HistoryPage {
    pub rows: Vec<HistoryRow>,
    /// The status filter's choices, and the one chosen.
    pub statuses: Vec<&'static str>,
    pub status: Option<String>,
    /// The step filter's choices, and the one chosen.
    pub steps: Vec<String>,
    pub step: Option<String>,
    pub q: Option<String>,
    pub links: PageLinks,
}

impl Page for HistoryPage {
    const TEMPLATE: &'static str = "history.html";
}

pub(crate) async fn page(
    State(state): State<AppState>,
    Extension(ui): Extension<SharedUi>,
    viewer: Viewer,
    Query(query): Query<HistoryQuery>,
) -> Response {
    let status_text = blank_to_none(query.status);
    let statuses = match status_text.as_deref() {
        None => DONE.to_vec(),
        Some(text) => match DONE.iter().find(|s| s.as_str().eq_ignore_ascii_case(text)) {
            Some(status) => vec![*status],
            None => {
                return viewer.finish(refusal::page(
                    StatusCode::BAD_REQUEST,
                    "Unknown status",
                    &format!("{text:?} is not a status the history lists"),
                    None,
                ));
            }
        },
    };
    let step = blank_to_none(query.step);
    let text = blank_to_none(query.q);
    let position = Position::new(query.cursor, query.trail);
    let listed = match listing::approvals(
        &state,
        Listing {
            statuses,
            step: step.clone(),
            text: text.clone(),
            limit: UI_PAGE,
            cursor: position.cursor.clone(),
        },
    )
    .await
    {
        Ok(listed) => listed,
        Err(e) => return viewer.finish(refusal::from_api(e)),
    };
    let links = position.links(
        &[
            ("status", status_text.as_deref()),
            ("step", step.as_deref()),
            ("q", text.as_deref()),
        ],
        listed.next_cursor.as_deref(),
    );
    let page = HistoryPage {
        rows: listed.approvals.iter().map(HistoryRow::new).collect(),
        statuses: DONE.iter().map(|s| s.as_str()).collect(),
        status: status_text.map(|s| s.to_ascii_uppercase()),
        steps: inbox::gate_steps(&state),
        step,
        q: text,
        links,
    };
    let chrome = viewer.chrome(&ui, "History", "history");
    viewer.finish(templates::page(StatusCode::OK, &page, &chrome))
}
