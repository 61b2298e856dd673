//! A run as a client sees it (`api::RunView`), read from the store.

use super::api::RunView;
use super::error::ApiError;
use super::state::AppState;
use crate::run_state::{RunRecord, RunStatus};

/// This agent's run, or `run_not_found` (another agent's run sharing the
/// store is not this server's).
pub(crate) async fn load_run(state: &AppState, run_id: &str) -> Result<RunRecord, ApiError> {
    state
        .queries()
        .get_run(run_id)
        .await?
        .filter(|run| state.owns_run(run))
        .ok_or_else(|| ApiError::RunNotFound(run_id.to_string()))
}

/// The run with its pending approval and its status as of now. The run is
/// read without its input, which the view does not show.
pub(crate) async fn run_view(state: &AppState, run_id: &str) -> Result<RunView, ApiError> {
    let run = state
        .queries()
        .get_run_outline(run_id)
        .await?
        .filter(|run| state.owns_run(run))
        .ok_or_else(|| ApiError::RunNotFound(run_id.to_string()))?;
    let pending = if run.status == RunStatus::AwaitingApproval {
        state
            .agent
            .store()
            .pending_for_run(run_id, state.agent.clock().now())
            .await?
    } else {
        None
    };
    // The expiry rule at read time: a run waiting on an approval that is
    // no longer pending and unexpired has expired, swept or not.
    let status = match (run.status, &pending) {
        (RunStatus::AwaitingApproval, None) => RunStatus::Expired,
        (status, _) => status,
    };
    Ok(RunView::new(
        run,
        status,
        pending,
        state.agent.spec().hash.as_str(),
    ))
}
