//! Deciding an approval, for every way of deciding a server offers (the
//! API, a batch, the inbox, a signed link, Slack). [`decide`] claims the
//! decision and resumes the run in the background; [`answer`] is what the
//! HTTP routes answer with. The CLI takes the same engine path
//! (`AgentRun::vote`) and resumes the run in its own process, waiting for
//! it; every caller matches the one `DecisionOutcome`.

use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use super::runs::{self as view, wait_for_run};
use super::tasks::{Background, log_outcome};
use super::views::DecisionView;
use super::{ApiError, Services};
use crate::domain::run_state::RunStatus;
use crate::engine::run::{AgentRun, Ballot, DecisionOutcome, RunError};

/// A decision, answered: what it came to, and the run's resume when it won.
pub(crate) struct Answered {
    pub outcome: DecisionOutcome,
    /// Resolves when the run pauses again or ends (at once when the
    /// decision resumed nothing).
    pub resuming: JoinHandle<()>,
}

/// Decide (the answer), then resume the run in the background when the
/// decision won.
pub(crate) async fn decide(
    agent: &AgentRun,
    background: &Background,
    key: String,
    ballot: Ballot,
) -> Result<Answered, RunError> {
    let (claimed_tx, claimed_rx) = oneshot::channel();
    let agent = agent.clone();
    let handle = background.spawn(async move {
        let decided_by = ballot.by.clone();
        let outcome = match agent.vote(&key, ballot).await {
            Ok(outcome) => outcome,
            Err(e) => {
                let _ = claimed_tx.send(Err(e));
                return;
            }
        };
        log_decision(&outcome, &decided_by);
        let _ = claimed_tx.send(Ok(outcome.clone()));
        if outcome.won() {
            let run_id = outcome.record().run_id.clone();
            let run = agent.resume_claimed(outcome).await;
            log_outcome(&run_id, &run);
        }
    });
    match claimed_rx.await {
        Ok(Ok(outcome)) => Ok(Answered {
            outcome,
            resuming: handle,
        }),
        Ok(Err(e)) => Err(e),
        Err(_) => Err(RunError::TaskDropped {
            task: "claiming the decision",
        }),
    }
}

/// One line per decision, by what it came to.
fn log_decision(outcome: &DecisionOutcome, decided_by: &str) {
    let record = outcome.record();
    match outcome {
        DecisionOutcome::Resumes(_) | DecisionOutcome::Finished { .. } => tracing::info!(
            run_id = %record.run_id,
            key = %record.key,
            step = %record.step_id,
            decision = %record.status.past_tense(),
            decided_by = %decided_by,
            "approval decided"
        ),
        DecisionOutcome::Voted(recorded) | DecisionOutcome::VoteRepeated(recorded) => {
            tracing::info!(
                run_id = %record.run_id,
                key = %record.key,
                voter = %decided_by,
                decision = %recorded.vote.decision,
                progress = %recorded.tally.summary(),
                repeated = matches!(outcome, DecisionOutcome::VoteRepeated(_)),
                "vote recorded; the gate waits for more"
            )
        }
        DecisionOutcome::Repeated(_) => tracing::info!(
            run_id = %record.run_id,
            key = %record.key,
            decided_by = %decided_by,
            "approval decision repeated by its decider; answered with the stored outcome"
        ),
    }
}

/// The approval key named by `id_or_key`: the key itself, or the latest
/// gate of the run with that id. A run's latest gate is taken even when it
/// is no longer pending, so the claim explains why (already resolved,
/// expired) instead of a vague "nothing pending".
pub(crate) async fn key_for(services: &Services, id_or_key: &str) -> Result<String, ApiError> {
    let store = services.agent.store();
    if store.get_approval(id_or_key).await?.is_some() {
        return Ok(id_or_key.to_string());
    }
    let run = view::load_run(services, id_or_key).await?;
    store
        .latest_approval_key(&run.id)
        .await?
        .ok_or(ApiError::RunHasNoApproval(run.id))
}

/// Claim the decision, answer with the decided record, and resume the run
/// in the background (`views::DecisionView`). The decider repeating the
/// decision that won gets the same answer with `repeated: true` (200, not
/// `already_resolved`). `status` is the run's status in
/// the store once the claim is made; with `wait`, the run view at its next
/// pause or end, and its status.
pub(crate) async fn answer(
    services: &Services,
    key: String,
    ballot: Ballot,
    wait: bool,
) -> Result<DecisionView, ApiError> {
    let Answered { outcome, resuming } =
        decide(&services.agent, &services.background, key, ballot).await?;
    let run_id = outcome.record().run_id.clone();
    // A repeat waits for nothing: the resume belongs to the claim that won
    // (here or in another process); it answers with the run as it is.
    let run = if wait {
        wait_for_run(services, resuming).await;
        Some(view::run_view(services, &run_id).await?)
    } else {
        None
    };
    let status = match &run {
        Some(run) => run.status,
        None => status_after_claim(services, &run_id).await,
    };
    Ok(DecisionView::of(
        &outcome,
        services.agent.spec().hash.as_str(),
        status,
        run,
    ))
}

/// What the store says of the run now that the claim is made: `running`
/// while it resumes, or wherever the resume got to already. The decision
/// is made whatever this read does, so a failed read must not turn it into
/// an error answer (a client would retry and be told `already_resolved`):
/// it answers with what the claim itself wrote, `running`.
async fn status_after_claim(services: &Services, run_id: &str) -> RunStatus {
    match view::run_view(services, run_id).await {
        Ok(run) => run.status,
        Err(e) => {
            tracing::warn!(run_id = %run_id, error = %e, "cannot read the run after its decision; answering with the claim's status");
            RunStatus::Running
        }
    }
}
