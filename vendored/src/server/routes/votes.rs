//! GET /approvals/{key}/votes: a gate's ledger (see `server::votes`).

use axum::Json;
use axum::extract::State;

use crate::domain::pending_approval::ApprovalError;
use crate::server::http::extract::PathParam;
use crate::server::http::state::AppState;
use crate::service::ApiError;
use crate::service::votes::VotesView;

/// GET /approvals/{key}/votes.
pub(super) async fn list(
    State(state): State<AppState>,
    PathParam(key): PathParam,
) -> Result<Json<VotesView>, ApiError> {
    let store = state.agent.store();
    let record = store
        .approval_as_of(&key, state.agent.clock().now())
        .await?
        .filter(|r| r.agent_id == state.agent_id())
        .ok_or(ApprovalError::NotFound { key: key.clone() })?;
    let votes = store.votes(&key).await?;
    Ok(Json(VotesView::new(&record, votes)))
}
