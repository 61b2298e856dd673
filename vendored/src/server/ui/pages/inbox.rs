//! GET /ui: the pending approvals, newest first, filtered by step and
//! text, a page at a time; `?fragment=rows` answers the rows alone (the
//! live script swaps them in).

use axum::Extension;
use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};

use super::listing::{self, Listing};
use super::templates::{self, Chrome};
use super::viewer::Viewer;
use super::{SharedUi, format};
use crate::pending_approval::{ApprovalRecord, ApprovalStatus};
use crate::server::state::AppState;

/// Rows per page.
pub(crate) const PAGE: usize = 25;

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(super) struct InboxQuery {
    pub step: Option<String>,
    pub q: Option<String>,
    pub cursor: Option<String>,
    /// The cursors of the pages before this one, newest last, joined by
    /// newlines (`""` for the first page): the way back.
    pub trail: Option<String>,
    pub fragment: Option<String>,
}

#[derive(Serialize)]
struct Row {
    key: String,
    message: String,
    agent: String,
    step: String,
    age: String,
    created_at: String,
    time_left: String,
    expires_at: String,
}

fn row(record: &ApprovalRecord, now: chrono::DateTime<chrono::Utc>) -> Row {
    Row {
        key: record.key.clone(),
        message: record
            .message
            .clone()
            .unwrap_or_else(|| format!("Approve step {}?", record.step_id)),
        agent: record.agent_id.clone(),
        step: record.step_id.clone(),
        age: format::span(record.created_at, now),
        created_at: format::machine(record.created_at),
        time_left: format::span(now, record.expires_at),
        expires_at: format::machine(record.expires_at),
    }
}

/// The steps of the spec that can pause: the step filter's choices.
pub(crate) fn gate_steps(state: &AppState) -> Vec<String> {
    let spec = state.agent.spec();
    spec.steps
        .iter()
        .filter(|s| spec.step_can_pause(s))
        .map(|s| s.id.clone())
        .collect()
}

/// Who may decide, as the page says it.
pub(crate) fn deciders(state: &AppState) -> String {
    match &state.agent.spec().approvals.approvers {
        Some(names) if !names.is_empty() => names.join(", "),
        Some(_) => "nobody (approvals.approvers is empty)".into(),
        None if state.tokens.is_empty() => "anyone on this machine".into(),
        None => "anyone with an API token".into(),
    }
}

fn blank_to_none(value: Option<String>) -> Option<String> {
    value
        .map(|v| v.trim().to_string())
        .filter(|v| !v.is_empty())
}

/// Links to the pages before and after, as query strings.
pub(crate) fn paging(
    base: &[(&str, Option<&str>)],
    cursor: Option<&str>,
    trail: Option<&str>,
    next: Option<&str>,
) -> (Option<String>, Option<String>) {
    // `Some("")` is a trail of one entry: the first page (no cursor).
    let trail: Vec<&str> = trail.map(|t| t.split('\n').collect()).unwrap_or_default();
    let encode = |pairs: Vec<(&str, String)>| {
        let mut all: Vec<(&str, String)> = base
            .iter()
            .filter_map(|(k, v)| v.map(|v| (*k, v.to_string())))
            .collect();
        all.extend(pairs);
        serde_urlencoded::to_string(all).unwrap_or_default()
    };
    let next_link = next.map(|next| {
        let mut newer = trail.clone();
        newer.push(cursor.unwrap_or(""));
        encode(vec![
            ("cursor", next.to_string()),
            ("trail", newer.join("\n")),
        ])
    });
    let prev_link = trail.split_last().map(|(last, rest)| {
        let mut pairs = Vec::new();
        if !last.is_empty() {
            pairs.push(("cursor", last.to_string()));
        }
        if !rest.is_empty() {
            pairs.push(("trail", rest.join("\n")));
        }
        encode(pairs)
    });
    (prev_link, next_link)
}

pub(super) async fn page(
    State(state): State<AppState>,
    Extension(ui): Extension<SharedUi>,
    viewer: Viewer,
    Query(query): Query<InboxQuery>,
) -> Response {
    let step = blank_to_none(query.step);
    let text = blank_to_none(query.q);
    let cursor = blank_to_none(query.cursor);
    let now = state.agent.clock().now();
    let listed = match listing::approvals(
        &state,
        Listing {
            statuses: vec![ApprovalStatus::Pending],
            step: step.clone(),
            text: text.clone(),
            limit: PAGE,
            cursor: cursor.clone(),
        },
    )
    .await
    {
        Ok(listed) => listed,
        Err(e) => return viewer.finish(super::refusal::from_api(e)),
    };
    let rows: Vec<Row> = listed.approvals.iter().map(|r| row(r, now)).collect();
    let (prev, next) = paging(
        &[("step", step.as_deref()), ("q", text.as_deref())],
        cursor.as_deref(),
        query.trail.as_deref(),
        listed.next_cursor.as_deref(),
    );
    let context = serde_json::json!({
        "rows": rows,
        "steps": gate_steps(&state),
        "step": step,
        "q": text,
        "deciders": deciders(&state),
        "prev": prev,
        "next": next,
        "first_page": cursor.is_none(),
    });
    if query.fragment.as_deref() == Some("rows") {
        return viewer.finish(templates::fragment("inbox_rows.html", &context));
    }
    let fragment_url = {
        let mut pairs = vec![("fragment", "rows")];
        if let Some(step) = step.as_deref() {
            pairs.push(("step", step));
        }
        if let Some(q) = text.as_deref() {
            pairs.push(("q", q));
        }
        format!(
            "/ui?{}",
            serde_urlencoded::to_string(pairs).unwrap_or_default()
        )
    };
    let mut context = context;
    context["fragment_url"] = fragment_url.into();
    let context = match templates::with_partial(&context, "rows_html", "inbox_rows.html", &context)
    {
        Ok(context) => context,
        Err(failed) => return viewer.finish(failed.into_response()),
    };
    let chrome = Chrome {
        // Live on the first page only: later pages hold older rows, and
        // swapping them under a reader would lose their place.
        live: cursor.is_none().then_some("inbox"),
        stream: cursor.is_none().then(|| "/ui/stream".to_string()),
        ..viewer.chrome(&ui, "Approvals inbox", "inbox")
    };
    viewer.finish(templates::page(
        StatusCode::OK,
        "inbox.html",
        context,
        &chrome,
    ))
}

#[cfg(test)]
mod tests {
    use super::paging;

    fn query(text: &str) -> Vec<(String, String)> {
        serde_urlencoded::from_str(text).unwrap()
    }

    #[test]
    fn paging_goes_forward_and_back_keeping_the_filters() {
        let base = [("step", Some("gate")), ("q", None)];
        // First page: no way back; forward carries the cursor and a trail.
        let (prev, next) = paging(&base, None, None, Some("c1"));
        assert!(prev.is_none());
        let next = query(&next.unwrap());
        assert_eq!(
            next,
            [
                ("step".into(), "gate".into()),
                ("cursor".into(), "c1".into()),
                ("trail".into(), "".into())
            ]
        );
        // Second page (cursor c1, trail [""]): back to the first page.
        let (prev, next) = paging(&base, Some("c1"), Some(""), Some("c2"));
        assert_eq!(
            query(&prev.unwrap()),
            [("step".to_string(), "gate".to_string())]
        );
        let next = query(&next.unwrap());
        assert_eq!(next[2], ("trail".into(), "\nc1".into()));
        // Third page: back to the second.
        let (prev, next) = paging(&base, Some("c2"), Some("\nc1"), None);
        assert!(next.is_none());
        assert_eq!(
            query(&prev.unwrap()),
            [
                ("step".into(), "gate".into()),
                ("cursor".into(), "c1".into()),
                ("trail".into(), "".into())
            ]
        );
    }
}
