//! GET /ui/history: decided, expired and cancelled approvals (who, what,
//! when, why; an edited payload as a line diff), filtered by status, step
//! and text, a page at a time.

use axum::Extension;
use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::response::Response;
use serde::Deserialize;
use serde_json::json;

use super::listing::{self, Listing};
use super::templates;
use super::viewer::Viewer;
use super::{SharedUi, format, inbox, payload, refusal};
use crate::pending_approval::ApprovalStatus;
use crate::server::state::AppState;

/// The statuses the history lists.
const DONE: [ApprovalStatus; 5] = [
    ApprovalStatus::Approved,
    ApprovalStatus::Modified,
    ApprovalStatus::Rejected,
    ApprovalStatus::Expired,
    ApprovalStatus::Cancelled,
];

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(super) struct HistoryQuery {
    status: Option<String>,
    step: Option<String>,
    q: Option<String>,
    cursor: Option<String>,
    trail: Option<String>,
}

fn blank_to_none(value: Option<String>) -> Option<String> {
    value
        .map(|v| v.trim().to_string())
        .filter(|v| !v.is_empty())
}

pub(super) async fn page(
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
    let cursor = blank_to_none(query.cursor);
    let listed = match listing::approvals(
        &state,
        Listing {
            statuses,
            step: step.clone(),
            text: text.clone(),
            limit: inbox::PAGE,
            cursor: cursor.clone(),
        },
    )
    .await
    {
        Ok(listed) => listed,
        Err(e) => return viewer.finish(refusal::from_api(e)),
    };
    let rows: Vec<serde_json::Value> = listed
        .approvals
        .iter()
        .map(|r| {
            json!({
                "key": r.key,
                "message": r.message.clone().unwrap_or_else(|| format!("Approve step {}?", r.step_id)),
                "step": r.step_id,
                "status": r.status.as_str(),
                "decided_by": r.decided_by,
                "decided_at": r.decided_at.map(format::time),
                "reason": r.reason(),
                "diff": r.modified_payload().map(|edited| payload::diff(&r.payload, edited)),
            })
        })
        .collect();
    let (prev, next) = inbox::paging(
        &[
            ("status", status_text.as_deref()),
            ("step", step.as_deref()),
            ("q", text.as_deref()),
        ],
        cursor.as_deref(),
        query.trail.as_deref(),
        listed.next_cursor.as_deref(),
    );
    let statuses: Vec<&str> = DONE.iter().map(|s| s.as_str()).collect();
    let context = json!({
        "rows": rows,
        "statuses": statuses,
        "status": status_text.map(|s| s.to_ascii_uppercase()),
        "steps": inbox::gate_steps(&state),
        "step": step,
        "q": text,
        "prev": prev,
        "next": next,
    });
    let chrome = viewer.chrome(&ui, "History", "history");
    viewer.finish(templates::page(
        StatusCode::OK,
        "history.html",
        context,
        &chrome,
    ))
}
