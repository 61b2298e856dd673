//! The expiry sweeper: at startup and every interval, mark overdue
//! approvals EXPIRED and end their runs. The store makes each expiry happen
//! once across every process sharing it; this logs the ones it did.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;

use crate::notify::SlackNotifier;
use crate::run::AgentRun;

pub(crate) const DEFAULT_SWEEP_EVERY: Duration = Duration::from_secs(30);

/// One sweep; returns how many approvals it expired.
pub(crate) async fn sweep_once(agent: &AgentRun) -> usize {
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
            expired.len()
        }
        Err(e) => {
            tracing::warn!(error = %e, "expiry sweep failed; will retry");
            0
        }
    }
}

/// Sweep every `every` until shutdown (the startup sweep is done by the
/// caller before it accepts requests). With Slack, each sweep is followed by
/// the notifier's repair, so the expiries it made show in Slack at once.
pub(crate) async fn run(
    agent: AgentRun,
    every: Duration,
    mut shutdown: watch::Receiver<bool>,
    slack: Option<Arc<SlackNotifier>>,
) {
    loop {
        tokio::select! {
            _ = tokio::time::sleep(every) => {}
            _ = shutdown.changed() => return,
        }
        sweep_once(&agent).await;
        if let Some(slack) = &slack {
            slack.repair().await;
        }
    }
}
