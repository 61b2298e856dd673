//! An operator's actions on a run (DESIGN §13): cancel, retry, fail.
//! The API's routes and the runs page share them; each checks its caller
//! as the engine's operation does and answers with the run as it is after.

use super::runs::{self as view, wait_for_run};
use super::tasks;
use super::views::{ApprovalView, CancelView, RunView};
use super::{ApiError, Caller, Services};
use crate::domain::events::EventKind;
use crate::domain::run_state::RunStatus;

/// Cancel a run as `caller` (POST /runs/{id}/cancel and the runs page's
/// cancel form share it).
pub(crate) async fn cancel(
    services: &Services,
    caller: Caller,
    run_id: String,
    reason: Option<String>,
) -> Result<CancelView, ApiError> {
    let cancelled = services.agent.cancel(&run_id, &caller.0, reason).await?;
    tracing::info!(run_id = %run_id, by = %caller.0, was = %cancelled.was, "run cancelled");
    let (by, reason) = match cancelled.event.kind {
        EventKind::RunCancelled { by, reason } => (by, reason),
        _ => (caller.0, None),
    };
    Ok(CancelView {
        run_id,
        status: RunStatus::Cancelled,
        was: cancelled.was,
        cancelled_by: by,
        reason,
        approval: cancelled
            .approval
            .map(|record| ApprovalView::new(record, services.agent.spec().hash.as_str())),
    })
}

/// Retry a stuck or failed run as `caller` (POST /runs/{id}/retry and the
/// runs page's retry form share it; the page never forces).
pub(crate) async fn retry(
    services: &Services,
    caller: Caller,
    run_id: String,
    force: bool,
    wait: bool,
) -> Result<RunView, ApiError> {
    view::load_run(services, &run_id).await?;
    let owned = services
        .agent
        .claim_retry(&run_id, &caller.0, force)
        .await?;
    tracing::info!(run_id = %run_id, by = %caller.0, force, "run retried: driving it on from its last durable point");
    let agent = services.agent.clone();
    let driving = services.background.spawn(async move {
        let run_id = owned.run.id.clone();
        let outcome = agent.resume_retried(owned).await;
        tasks::log_outcome(&run_id, &outcome);
    });
    if wait {
        wait_for_run(services, driving).await;
    }
    view::run_view(services, &run_id).await
}

/// End a stuck run `failed` as `caller` (POST /runs/{id}/fail and the runs
/// page's fail form share it).
pub(crate) async fn fail(
    services: &Services,
    caller: Caller,
    run_id: String,
    reason: &str,
) -> Result<RunView, ApiError> {
    if reason.trim().is_empty() {
        return Err(ApiError::invalid("reason must say why the run is failed"));
    }
    view::load_run(services, &run_id).await?;
    services
        .agent
        .fail_stuck(&run_id, reason, &caller.0)
        .await?;
    tracing::info!(run_id = %run_id, by = %caller.0, reason = %reason, "stuck run failed by an operator");
    view::run_view(services, &run_id).await
}
