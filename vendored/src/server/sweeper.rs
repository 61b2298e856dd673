//! The expiry sweeper: at startup and every interval, mark overdue
//! approvals EXPIRED and end their runs. The store makes each expiry happen
//! once across every process sharing it; this logs the ones it did.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;

use crate::notify::SlackNotifier;
use crate::run::{AgentRun, RunError};

pub(crate) const DEFAULT_SWEEP_EVERY: Duration = Duration::from_secs(30);

/// What one sweep did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Swept {
    /// It ran; this many approvals expired by this process.
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
    match agent.sweep_expired().await {
        Ok(expired) => {
            for record in &expired {
                tracing::info!(
                    run_id = %record.run_id,
                    key = %record.key,
                    step = %record.step_id,
                    expired_at = %crate::time::format_utc(record.expires_at),
                    "approval expired; run ended as expired"
                );
            }
            Swept::Expired(expired.len())
        }
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

/// Sweep every `every` until shutdown (the startup sweep is done by the
/// caller before it accepts requests; `sweeping` is false when it said
/// [`Swept::Stop`]). With Slack, each sweep is followed by the notifier's
/// repair, so the expiries it made show in Slack at once; the repair goes on
/// after the sweeps stopped.
pub(crate) async fn run(
    agent: AgentRun,
    every: Duration,
    mut shutdown: watch::Receiver<bool>,
    slack: Option<Arc<SlackNotifier>>,
    mut sweeping: bool,
) {
    loop {
        if !sweeping && slack.is_none() {
            return;
        }
        tokio::select! {
            _ = tokio::time::sleep(every) => {}
            _ = shutdown.changed() => return,
        }
        if sweeping && sweep_once(&agent).await == Swept::Stop {
            sweeping = false;
        }
        if let Some(slack) = &slack {
            slack.repair().await;
        }
    }
}
