//! Runs executing in this process, in background tasks.
//!
//! A request never drives a run itself: if the client went away, the
//! request's future would be dropped mid-step. Instead the work (the claim
//! and what follows it, or a new run's steps) goes into a task, the request
//! waits only for what it answers with, and shutdown waits for the tasks.
//! Every run transition this process makes is logged here, once.

use crate::support::json_doc::JsonDoc;
use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use serde_json::Value;
use tokio::sync::{Notify, oneshot};
use tokio::task::JoinHandle;

use crate::domain::run_state::RunStatus;
use crate::engine::run::{AgentRun, RunError, RunOutcome};
use crate::store::KeyClaim;

/// Counts the tasks in flight so shutdown can wait for them.
#[derive(Clone, Default)]
pub(crate) struct Background {
    running: Arc<AtomicUsize>,
    idle: Arc<Notify>,
}

struct InFlight(Background);

impl Drop for InFlight {
    fn drop(&mut self) {
        if self.0.running.fetch_sub(1, Ordering::SeqCst) == 1 {
            self.0.idle.notify_waiters();
        }
    }
}

impl Background {
    pub fn spawn<T: Send + 'static>(
        &self,
        work: impl Future<Output = T> + Send + 'static,
    ) -> JoinHandle<T> {
        self.running.fetch_add(1, Ordering::SeqCst);
        let guard = InFlight(self.clone());
        tokio::spawn(async move {
            let _guard = guard;
            work.await
        })
    }

    pub fn running(&self) -> usize {
        self.running.load(Ordering::SeqCst)
    }

    /// Resolves once no task is in flight.
    pub async fn wait_idle(&self) {
        loop {
            let notified = self.idle.notified();
            if self.running() == 0 {
                return;
            }
            notified.await;
        }
    }
}

/// Create a run durably, answer with its id, and drive it in the background.
/// The returned handle resolves when the run pauses or ends.
pub(crate) async fn start_run(
    agent: &AgentRun,
    background: &Background,
    input: JsonDoc,
    trigger: Value,
) -> Result<(String, JoinHandle<()>), RunError> {
    let started = start(agent, background, input, trigger, None).await?;
    started.ok_or_else(|| {
        RunError::Store(crate::store::StoreError::Database(
            "a run started without a key claim reported its key taken".into(),
        ))
    })
}

/// [`start_run`] if `once` can be claimed, in the same write as the run
/// (a schedule tick, a signed webhook request). `None`: the key is taken,
/// and no run was created.
pub(crate) async fn start_run_once(
    agent: &AgentRun,
    background: &Background,
    input: JsonDoc,
    trigger: Value,
    once: KeyClaim,
) -> Result<Option<(String, JoinHandle<()>)>, RunError> {
    start(agent, background, input, trigger, Some(once)).await
}

async fn start(
    agent: &AgentRun,
    background: &Background,
    input: JsonDoc,
    trigger: Value,
    once: Option<KeyClaim>,
) -> Result<Option<(String, JoinHandle<()>)>, RunError> {
    let (created_tx, created_rx) = oneshot::channel();
    let agent = agent.clone();
    let handle = background.spawn(async move {
        let kind = trigger
            .get("kind")
            .and_then(Value::as_str)
            .unwrap_or("unknown")
            .to_string();
        let created = match &once {
            None => agent.create(input, trigger).await.map(Some),
            Some(once) => agent.create_once(input, trigger, once).await,
        };
        let created = match created {
            Ok(Some(created)) => created,
            Ok(None) => {
                let _ = created_tx.send(Ok(None));
                return;
            }
            Err(e) => {
                let _ = created_tx.send(Err(e));
                return;
            }
        };
        let run_id = created.run_id().to_string();
        tracing::info!(run_id = %run_id, trigger = %kind, "run started");
        let _ = created_tx.send(Ok(Some(run_id.clone())));
        let outcome = agent.drive_created(created).await;
        log_outcome(&run_id, &outcome);
    });
    match created_rx.await {
        Ok(Ok(run_id)) => Ok(run_id.map(|id| (id, handle))),
        Ok(Err(e)) => Err(e),
        Err(_) => Err(RunError::TaskDropped {
            task: "creating the run",
        }),
    }
}

/// Claim the agent's orphaned runs and resume each in the background.
/// Returns how many this process took over (`None`: the store refused).
pub(crate) async fn recover(agent: &AgentRun, background: &Background) -> Option<usize> {
    let orphans = match agent.claim_orphans().await {
        Ok(orphans) => orphans,
        Err(e) => {
            tracing::warn!(error = %e, "could not look for orphaned runs; will try again");
            return None;
        }
    };
    for owned in &orphans {
        tracing::info!(
            run_id = %owned.run.id,
            "run recovered: its driver stopped; resuming it from its last durable point"
        );
    }
    let n = orphans.len();
    for owned in orphans {
        let agent = agent.clone();
        background.spawn(async move {
            let run_id = owned.run.id.clone();
            let outcome = agent.resume_recovered(owned).await;
            log_outcome(&run_id, &outcome);
        });
    }
    Some(n)
}

/// Recover orphans every half lease or so (jittered) until shutdown.
pub(crate) async fn recover_periodically(
    agent: AgentRun,
    background: Background,
    mut shutdown: tokio::sync::watch::Receiver<bool>,
) {
    let lease = agent.lease();
    let mut jitter = crate::support::backoff::Backoff::new(lease, lease);
    loop {
        tokio::select! {
            _ = tokio::time::sleep(crate::domain::durable::next_recovery_in(lease, &mut jitter)) => {}
            _ = shutdown.changed() => return,
        }
        // A full batch means more may be waiting: take them now.
        while recover(&agent, &background).await == Some(crate::domain::durable::RECOVER_BATCH) {}
    }
}

/// One line per transition: paused, completed, rejected, failed, skipped.
pub(crate) fn log_outcome(run_id: &str, outcome: &Result<RunOutcome, RunError>) {
    match outcome {
        Ok(outcome) => match outcome.status {
            RunStatus::AwaitingApproval => {
                if let Some(record) = &outcome.pending {
                    tracing::info!(
                        run_id = %run_id,
                        key = %record.key,
                        step = %record.step_id,
                        phase = %record.phase.as_str(),
                        expires_at = %crate::support::time::format_utc(record.expires_at),
                        "run paused for approval"
                    );
                }
            }
            RunStatus::Completed => tracing::info!(run_id = %run_id, "run completed"),
            RunStatus::Rejected => tracing::info!(run_id = %run_id, "run rejected"),
            RunStatus::Skipped => tracing::info!(run_id = %run_id, "run skipped (dedupe)"),
            RunStatus::Expired => tracing::info!(run_id = %run_id, "run expired"),
            RunStatus::Failed => tracing::warn!(
                run_id = %run_id,
                error = %outcome.error.as_deref().unwrap_or("unknown error"),
                "run failed"
            ),
            RunStatus::Stuck => tracing::warn!(
                run_id = %run_id,
                reason = %outcome.error.as_deref().unwrap_or("unknown"),
                "run stuck: waiting for an operator (runs retry or runs fail)"
            ),
            RunStatus::Running => tracing::warn!(run_id = %run_id, "run stopped while running"),
            RunStatus::Cancelled => tracing::info!(run_id = %run_id, "run cancelled"),
        },
        // Said once where it was found out (`AgentRun::not_driven`).
        Err(RunError::NotDriven { .. }) => {}
        Err(e) => tracing::error!(run_id = %run_id, error = %e, "run could not continue"),
    }
}
