//! GET /ui: the pending approvals, newest first, filtered by step and
//! text, a page at a time; `?fragment=rows` answers the rows alone (the
//! live script swaps them in).

use axum::Extension;
use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::response::Response;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::{blank_to_none, refusal};
use crate::domain::pending_approval::{ApprovalRecord, ApprovalStatus};
use crate::server::http::paging::{PageLinks, Position, UI_PAGE};
use crate::server::http::state::AppState;
use crate::server::ui::SharedUi;
use crate::server::ui::auth::viewer::Viewer;
use crate::server::ui::listing::{self, Listing};
use crate::server::ui::render::templates::{self, Chrome, Page};
use crate::server::ui::render::votes::Barred;
use crate::server::ui::render::{context, deciders, format};
use crate::server::ui::staleness::{Stale, Staleness};
use crate::service::votes::ListedLedgers;

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct InboxQuery {
    pub step: Option<String>,
    pub q: Option<String>,
    pub cursor: Option<String>,
    /// The cursors of the pages before this one (server/http/paging.rs).
    pub trail: Option<String>,
    pub fragment: Option<String>,
}

/// One pending approval, as a row of the inbox.
#[derive(Debug, Serialize)]
pub(crate) struct Row {
    key: String,
    message: String,
    agent: String,
    step: String,
    /// Who started the run (or asked for the gate).
    started_by: String,
    /// The run's input in a few words.
    input: String,
    /// Who may decide this gate, and who may not for having asked.
    deciders: String,
    age: String,
    created_at: String,
    /// The whole timestamp, for the time's `title`.
    created_full: String,
    time_left: String,
    expires_at: String,
    expires_full: String,
    /// Paused under another version of the spec than the one served.
    stale: Option<Stale>,
    /// A gate with rules: each rule's progress, "finance 1 of 2; security
    /// 0 of 1".
    progress: Option<String>,
    /// Why the viewer may not vote on this gate ("you voted approve",
    /// "your run: you may not vote", "not in finance"): the row offers
    /// them nothing to decide.
    barred: Option<String>,
}

impl Row {
    /// `record` as a row; `deciders` says who may decide it (see
    /// [`deciders::who_decides`]).
    pub fn new(
        record: &ApprovalRecord,
        now: DateTime<Utc>,
        stale: Option<Stale>,
        deciders: String,
    ) -> Row {
        Row {
            key: record.key.clone(),
            message: super::message_of(record),
            agent: record.agent_id.clone(),
            step: record.step_id.clone(),
            started_by: context::started_by(&record.trigger),
            input: context::input_summary(&record.input),
            deciders,
            age: format::span(record.created_at, now),
            created_at: format::machine(record.created_at),
            created_full: format::full(record.created_at),
            time_left: format::span(now, record.expires_at),
            expires_at: format::machine(record.expires_at),
            expires_full: format::full(record.expires_at),
            stale,
            progress: None,
            barred: None,
        }
    }

    /// With `record`'s progress and why `viewer` may not vote on it, from
    /// the page's ledgers.
    pub fn with_votes(
        mut self,
        record: &ApprovalRecord,
        ledgers: &ListedLedgers,
        viewer: &str,
    ) -> Row {
        self.progress = ledgers.progress(record);
        self.barred = record.roster.as_ref().and_then(|roster| {
            Barred::of(roster, ledgers.votes(&record.key), viewer).map(|b| b.label(roster))
        });
        self
    }
}

/// The rows (`inbox_rows.html`), on the page and on their own.
#[derive(Debug, Serialize)]
pub(crate) struct InboxRows {
    pub rows: Vec<Row>,
    /// A step or text filter is set: an empty list says so.
    pub filtered: bool,
}

/// `inbox_rows.html` alone (`?fragment=rows`).
#[derive(Serialize)]
pub(crate) struct RowsFragment<'a> {
    pub inbox: &'a InboxRows,
}

/// GET /ui.
#[derive(Debug, Serialize)]
pub(crate) struct InboxPage {
    pub inbox: InboxRows,
    /// The step filter's choices, and the one chosen.
    pub steps: Vec<String>,
    pub step: Option<String>,
    pub q: Option<String>,
    pub deciders: String,
    /// Where the live script fetches the rows.
    pub fragment_url: String,
    pub links: PageLinks,
}

impl Page for InboxPage {
    const TEMPLATE: &'static str = "inbox.html";
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

/// Who may decide when the spec lists no approvers: anyone who can
/// reach the server as a person.
pub(crate) fn open_to(state: &AppState) -> &'static str {
    if state.tokens.is_empty() {
        "anyone on this machine"
    } else {
        "anyone with an API token"
    }
}

/// Who may decide, as the inbox's heading line says it for every gate:
/// the approvers, and that whoever asked for a gate may not decide it
/// (each row names them). Without tokens everyone is `local`, who is
/// exempt (there is nobody else).
pub(crate) fn deciders(state: &AppState) -> String {
    let spec = state.agent.spec();
    let base = match &spec.approvals.approvers {
        Some(names) if !names.is_empty() => names.join(", "),
        Some(_) => "nobody (approvals.approvers is empty)".into(),
        None => open_to(state).to_string(),
    };
    if state.tokens.is_empty() {
        return base;
    }
    format!(
        "{base}, except whoever started the run, asked for the gate or edited its payload \
         (separation of duties{})",
        if spec.approvals.allow_self_approval {
            ""
        } else {
            ", unless the gate allows self-approval"
        }
    )
}

/// Where the live script fetches the rows of the list these filters show.
pub(crate) fn fragment_url(step: Option<&str>, q: Option<&str>) -> String {
    let mut pairs = vec![("fragment", "rows")];
    if let Some(step) = step {
        pairs.push(("step", step));
    }
    if let Some(q) = q {
        pairs.push(("q", q));
    }
    format!(
        "/ui?{}",
        serde_urlencoded::to_string(pairs).unwrap_or_default()
    )
}

pub(crate) async fn page(
    State(state): State<AppState>,
    Extension(ui): Extension<SharedUi>,
    viewer: Viewer,
    Query(query): Query<InboxQuery>,
) -> Response {
    let step = blank_to_none(query.step);
    let text = blank_to_none(query.q);
    let position = Position::new(query.cursor, query.trail);
    let now = state.agent.clock().now();
    let listed = match listing::approvals(
        &state,
        Listing {
            statuses: vec![ApprovalStatus::Pending],
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
    // One read for the whole page's votes, not one per row.
    let ledgers = match ListedLedgers::read(state.agent.store().as_ref(), &listed.approvals).await {
        Ok(ledgers) => ledgers,
        Err(e) => return viewer.finish(refusal::from_api(e.into())),
    };
    let mut staleness = Staleness::new(&state);
    let mut rows = Vec::with_capacity(listed.approvals.len());
    for record in &listed.approvals {
        let who = deciders::who_decides(
            record,
            state.agent.spec().deciders_of(record),
            open_to(&state),
        );
        rows.push(
            Row::new(record, now, staleness.of(record).await, who).with_votes(
                record,
                &ledgers,
                &viewer.name,
            ),
        );
    }
    let inbox = InboxRows {
        rows,
        filtered: step.is_some() || text.is_some(),
    };
    if query.fragment.as_deref() == Some("rows") {
        return viewer.finish(templates::fragment(
            "inbox_rows.html",
            RowsFragment { inbox: &inbox },
        ));
    }
    let links = position.links(
        &[("step", step.as_deref()), ("q", text.as_deref())],
        listed.next_cursor.as_deref(),
    );
    let page = InboxPage {
        inbox,
        steps: gate_steps(&state),
        fragment_url: fragment_url(step.as_deref(), text.as_deref()),
        step,
        q: text,
        deciders: deciders(&state),
        links,
    };
    let first = position.is_first();
    let chrome = Chrome {
        // Live on the first page only: later pages hold older rows, and
        // swapping them under a reader would lose their place.
        live: first.then_some("inbox"),
        stream: first.then(|| "/ui/stream".to_string()),
        ..viewer.chrome(&ui, "Approvals inbox", "inbox")
    };
    viewer.finish(templates::page(StatusCode::OK, &page, &chrome))
}
