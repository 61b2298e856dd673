//! The inbox's and the history's lists, through `StateStore::list_approvals`.

use crate::pending_approval::{ApprovalRecord, ApprovalStatus};
use crate::server::error::ApiError;
use crate::server::state::AppState;

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
    // Until the store's list_approvals lands: pending only, filtered here.
    let now = state.agent.clock().now();
    if listing.statuses != [ApprovalStatus::Pending] {
        return Ok(Listed {
            approvals: Vec::new(),
            next_cursor: None,
        });
    }
    let page = state
        .agent
        .store()
        .list_pending(&crate::store::PendingQuery {
            agent_id: Some(state.agent_id().to_string()),
            now,
            limit: listing.limit,
            cursor: listing.cursor,
        })
        .await?;
    let text = listing.text.map(|t| t.to_lowercase());
    let approvals = page
        .approvals
        .into_iter()
        .filter(|r| listing.step.as_ref().is_none_or(|s| &r.step_id == s))
        .filter(|r| {
            text.as_ref().is_none_or(|t| {
                r.message
                    .as_deref()
                    .unwrap_or("")
                    .to_lowercase()
                    .contains(t)
                    || r.step_id.to_lowercase().contains(t)
                    || r.key.contains(t)
                    || r.run_id.contains(t)
            })
        })
        .collect();
    Ok(Listed {
        approvals,
        next_cursor: page.next_cursor,
    })
}
