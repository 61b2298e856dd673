//! The inbox's and the history's lists, through `StateStore::list_approvals`.

use crate::domain::pending_approval::{ApprovalRecord, ApprovalStatus};
use crate::server::http::state::AppState;
use crate::service::ApiError;
use crate::store::ApprovalQuery;

/// One page of a list.
pub(crate) struct Listing {
    pub statuses: Vec<ApprovalStatus>,
    pub step: Option<String>,
    pub text: Option<String>,
    pub limit: usize,
    pub cursor: Option<String>,
}

pub(crate) struct Listed {
    pub approvals: Vec<ApprovalRecord>,
    pub next_cursor: Option<String>,
}

/// This agent's approvals matching `listing`, newest first.
pub(crate) async fn approvals(state: &AppState, listing: Listing) -> Result<Listed, ApiError> {
    let page = state
        .queries()
        .list_approvals(&ApprovalQuery {
            agent_id: Some(state.agent_id().to_string()),
            statuses: listing.statuses,
            step_id: listing.step,
            text: listing.text,
            // The inbox and the history find a run by its context too.
            text_in_context: true,
            now: state.agent.clock().now(),
            limit: listing.limit,
            cursor: listing.cursor,
            ..Default::default()
        })
        .await?;
    crate::store::report_skipped(
        &state.agent.store().describe(),
        "approval",
        &page.unreadable,
    );
    Ok(Listed {
        approvals: page.approvals,
        next_cursor: page.next_cursor,
    })
}
