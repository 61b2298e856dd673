//! The sweeper: at startup and every interval, what waiting gates do by
//! themselves (DESIGN §13). Overdue approvals are marked EXPIRED and their
//! runs ended, or settled by their gate's `on_timeout` (and their runs
//! resumed); due reminders and escalations are done. The store makes each
//! happen once across every process sharing it; this logs the ones it did.

use std::time::Duration;

use tokio::sync::watch;

use crate::engine::run::{AgentRun, RunError};

pub(crate) const DEFAULT_SWEEP_EVERY: Duration = Duration::from_secs(30);

/// What one sweep did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Swept {
    /// It ran; this many approvals expired (or were settled by their
    /// `on_timeout`) by this process.
    Expired(usize),
    /// The store may serve the next one (busy, no connection).
    Retry,
    /// The store refused it for a reason another sweep cannot fix (a
    /// damaged file, a constraint violation): sweeping again would fail the
    /// same way every interval.
    Stop,
}

/// One sweep, with its outcome logged.
pub(crate) async fn sweep_once(agent: &AgentRun) -> Swept {
    match sweep(agent).await {
        Ok(ended) => Swept::Expired(ended),
        Err(RunError::Store(e)) if !e.is_retryable() => {
            tracing::error!(
                error = %e,
                kind = ?e.kind(),
                "expiry sweep failed and cannot succeed by retrying; no more sweeps until restart \
                 (overdue approvals still read as expired and cannot be decided)"
            );
            Swept::Stop
        }
        Err(e) => {
            tracing::warn!(error = %e, "expiry sweep failed; will retry");
            Swept::Retry
        }
    }
}

/// Expire, remind, escalate and settle by timeout; returns how many
/// approvals ended. A run a timeout settled is resumed in the background,
/// as a decision's is.
async fn sweep(agent: &AgentRun) -> Result<usize, RunError> {
    let expired = agent.sweep_expired().await?;
    for record in &expired {
        tracing::info!(
            run_id = %record.run_id,
            key = %record.key,
            step = %record.step_id,
            expired_at = %crate::support::time::format_utc(record.expires_at),
            "approval expired; run ended as expired"
        );
    }
    for nudged in agent.nudge_due().await? {
        for event in &nudged.events {
            tracing::info!(
                run_id = %nudged.record.run_id,
                key = %nudged.record.key,
                step = %nudged.record.step_id,
                event = %event.kind.name(),
                "approval {}",
                match event.kind {
                    crate::domain::events::EventKind::ApprovalEscalated { .. } => "escalated",
                    _ => "reminder due",
                }
            );
        }
    }
    let settled = agent.settle_timeouts().await?;
    let ended = expired.len() + settled.len();
    for claimed in settled {
        let record = claimed.record().clone();
        tracing::info!(
            run_id = %record.run_id,
            key = %record.key,
            step = %record.step_id,
            decision = %record.status.past_tense(),
            on_timeout = %record.on_timeout(),
            "approval timed out; settled by its on_timeout"
        );
        let agent = agent.clone();
        tokio::spawn(async move {
            let outcome = agent.resume_claimed(claimed).await;
            crate::service::tasks::log_outcome(&record.run_id, &outcome);
        });
    }
    Ok(ended)
}

/// Sweep every `every` until shutdown (the startup sweep is done by the
/// caller before it accepts requests; `sweeping` is false when it said
/// [`Swept::Stop`]). The expiries a sweep makes write their notices, which
/// the outbox's worker sends (Slack's included).
pub(crate) async fn run(
    agent: AgentRun,
    every: Duration,
    mut shutdown: watch::Receiver<bool>,
    sweeping: bool,
) {
    if !sweeping {
        return;
    }
    loop {
        tokio::select! {
            _ = tokio::time::sleep(every) => {}
            _ = shutdown.changed() => return,
        }
        if sweep_once(&agent).await == Swept::Stop {
            return;
        }
    }
}
