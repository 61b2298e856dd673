//! A run as a client sees it (`views::RunView`), read from the store.

use super::Services;
use super::error::ApiError;
use super::views::RunView;
use crate::domain::run_state::{RunRecord, RunStatus};

/// This agent's run, or `run_not_found` (another agent's run sharing the
/// store is not this server's).
pub(crate) async fn load_run(services: &Services, run_id: &str) -> Result<RunRecord, ApiError> {
    services
        .queries()
        .get_run(run_id)
        .await?
        .filter(|run| services.owns_run(run))
        .ok_or_else(|| ApiError::RunNotFound(run_id.to_string()))
}

/// The run with its pending approval and its status as of now. The run is
/// read without its input, which the view does not show.
pub(crate) async fn run_view(services: &Services, run_id: &str) -> Result<RunView, ApiError> {
    let run = services
        .queries()
        .get_run_outline(run_id)
        .await?
        .filter(|run| services.owns_run(run))
        .ok_or_else(|| ApiError::RunNotFound(run_id.to_string()))?;
    let pending = if run.status == RunStatus::AwaitingApproval {
        services
            .agent
            .store()
            .pending_for_run(run_id, services.agent.clock().now())
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
        services.agent.spec().hash.as_str(),
    ))
}

/// How long a `?wait=true` (`POST /runs`, a decision, a retry) waits for
/// the run's next pause or end.
/// A run whose steps take longer (a slow tool, a long model loop) does not
/// hold the request open: the answer is then the run as it stands
/// (`running`), to follow with `GET /runs/{id}` or its event stream. The
/// bound of `GET /gates/{key}?wait=`, under common proxy and client
/// timeouts. Counted on the agent's clock, so a test's clock ends it.
pub(crate) const RUN_WAIT_LIMIT: std::time::Duration = crate::service::gates::MAX_WAIT;

/// Wait for `driving` (a run driven on in the background) to reach its
/// next pause or end, for at most [`RUN_WAIT_LIMIT`]: what `?wait=true`
/// does on every route that has it. The run goes on if the request is
/// dropped or the wait is over: only the wait ends.
pub(crate) async fn wait_for_run(services: &Services, driving: impl std::future::Future) {
    let clock = services.agent.clock();
    let deadline = crate::support::time::add(clock.now(), RUN_WAIT_LIMIT);
    tokio::select! {
        _ = driving => {}
        _ = clock.sleep_until(deadline) => {}
    }
}
