//! One owner of every long-lived background task of a server: the
//! recovery of orphaned runs, the expiry sweeper, the outbox's worker and
//! what wakes it, the schedules.
//!
//! A task that panics while the server serves is logged, restarted after a
//! jittered backoff, and counted as down until it runs again: `GET
//! /readyz` answers `not_ready` naming it meanwhile, so a load balancer
//! sends traffic to a server whose notifications and timers work. A task
//! that returns by itself (the sweeper after a store refusal it cannot
//! fix, which it logs) is not restarted. At shutdown every task is told to
//! stop, waited for within a bound, and any still running then is aborted
//! and named in the log.

use std::collections::BTreeSet;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::watch;
use tokio::task::{JoinError, JoinHandle};

use crate::support::backoff::Backoff;

/// The first restart's wait at most; doubles per failure in a row.
const RESTART_BASE: Duration = Duration::from_secs(1);
/// The longest wait before a restart.
const RESTART_CAP: Duration = Duration::from_secs(60);
/// A run that lasted this long before it died starts the backoff afresh:
/// it was not failing in a loop.
const HEALTHY_RUN: Duration = Duration::from_secs(60);

/// Which supervised tasks are not running now (died, waiting to restart).
#[derive(Debug, Default)]
pub(crate) struct TaskHealth {
    down: Mutex<BTreeSet<String>>,
}

impl TaskHealth {
    /// The names of the tasks that are down, in order; empty when all run.
    pub fn down(&self) -> Vec<String> {
        self.lock().iter().cloned().collect()
    }

    fn set_down(&self, name: &str, down: bool) {
        let mut set = self.lock();
        if down {
            set.insert(name.to_string());
        } else {
            set.remove(name);
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeSet<String>> {
        // A panic while holding the set leaves it whole (single calls).
        self.down.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The background tasks of one server, and the signal that stops them.
pub(crate) struct Supervisor {
    stop: watch::Receiver<bool>,
    health: Arc<TaskHealth>,
    tasks: Vec<(String, JoinHandle<()>)>,
}

impl Supervisor {
    /// Tasks stop when `stop` turns true.
    pub fn new(stop: watch::Receiver<bool>) -> Supervisor {
        Supervisor {
            stop,
            health: Arc::default(),
            tasks: Vec::new(),
        }
    }

    /// What `/readyz` asks: which tasks are down.
    pub fn health(&self) -> Arc<TaskHealth> {
        Arc::clone(&self.health)
    }

    /// Run the task `make` builds (and build it again after it panics),
    /// under `name` in the log and in `/readyz`. The task must end soon
    /// after the receiver it is given turns true.
    pub fn spawn<F, Fut>(&mut self, name: String, make: F)
    where
        F: FnMut(watch::Receiver<bool>) -> Fut + Send + 'static,
        Fut: Future<Output = ()> + Send + 'static,
    {
        let watched = supervise(name.clone(), make, self.stop.clone(), self.health());
        self.tasks.push((name, tokio::spawn(watched)));
    }

    /// Wait for every task to end after the stop signal (sent by the
    /// caller), up to `bound` in all; a task still running then is aborted
    /// and named in the log.
    pub async fn join(self, bound: Duration) {
        let deadline = tokio::time::Instant::now() + bound;
        for (name, mut handle) in self.tasks {
            match tokio::time::timeout_at(deadline, &mut handle).await {
                Ok(Ok(())) => {}
                Ok(Err(e)) => {
                    tracing::error!(task = %name, error = %e, "background task failed while stopping")
                }
                Err(_) => {
                    handle.abort();
                    tracing::warn!(task = %name, bound = ?bound, "background task did not stop in time; aborted");
                }
            }
        }
    }
}

/// Aborts the task it holds when dropped: the supervisor's own abort then
/// reaches the task it watches.
struct AbortOnDrop(JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Run `make`'s task until it ends by itself or `stop` turns true;
/// restart it after a panic, with a backoff, unless stopping.
async fn supervise<F, Fut>(
    name: String,
    mut make: F,
    mut stop: watch::Receiver<bool>,
    health: Arc<TaskHealth>,
) where
    F: FnMut(watch::Receiver<bool>) -> Fut + Send + 'static,
    Fut: Future<Output = ()> + Send + 'static,
{
    let mut backoff = Backoff::new(RESTART_BASE, RESTART_CAP);
    let mut failures = 0u32;
    loop {
        let started = Instant::now();
        let mut run = AbortOnDrop(tokio::spawn(make(stop.clone())));
        let ended = (&mut run.0).await;
        let stopping = *stop.borrow();
        let error = match ended {
            Ok(()) => {
                if !stopping {
                    tracing::info!(task = %name, "background task ended by itself");
                }
                return;
            }
            Err(e) => panic_message(&e),
        };
        if stopping {
            tracing::error!(task = %name, error = %error, "background task failed while stopping");
            return;
        }
        health.set_down(&name, true);
        failures = if started.elapsed() >= HEALTHY_RUN {
            1
        } else {
            failures.saturating_add(1)
        };
        let wait = backoff.wait_after(failures);
        tracing::error!(task = %name, error = %error, failures, restart_in = ?wait, "background task died; restarting it (the server reports not ready until it runs)");
        tokio::select! {
            _ = tokio::time::sleep(wait) => {}
            _ = stop.changed() => return,
        }
        health.set_down(&name, false);
        tracing::info!(task = %name, "background task restarted");
    }
}

/// What a task's end says: its panic's message, or that it was cancelled.
fn panic_message(e: &JoinError) -> String {
    if !e.is_panic() {
        return "cancelled".into();
    }
    // A JoinError's Display says "task N panicked with message ...".
    e.to_string()
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicU32, Ordering};

    use super::*;

    /// A task that panics on its first run and then runs until the stop:
    /// down while it waits for its restart, up once it runs again; the
    /// stop ends it and `join` returns.
    #[tokio::test(start_paused = true)]
    async fn a_task_that_dies_is_restarted_and_down_until_it_runs() {
        let (stop_tx, stop) = watch::channel(false);
        let mut supervisor = Supervisor::new(stop);
        let health = supervisor.health();
        let runs = Arc::new(AtomicU32::new(0));
        let counted = Arc::clone(&runs);
        supervisor.spawn("flaky".into(), move |mut stop| {
            let run = counted.fetch_add(1, Ordering::SeqCst) + 1;
            async move {
                if run == 1 {
                    panic!("run {run} fails");
                }
                let _ = stop.wait_for(|stopped| *stopped).await;
            }
        });
        // Yielding (not sleeping) keeps the paused clock still, so the
        // supervisor is still waiting to restart when this looks.
        yield_until(|| health.down() == ["flaky"]).await;
        assert_eq!(runs.load(Ordering::SeqCst), 1);
        // The first restart waits at most RESTART_BASE.
        tokio::time::sleep(RESTART_BASE * 2).await;
        yield_until(|| runs.load(Ordering::SeqCst) == 2).await;
        assert!(health.down().is_empty(), "{:?}", health.down());
        stop_tx.send(true).unwrap();
        supervisor.join(Duration::from_secs(5)).await;
        assert_eq!(runs.load(Ordering::SeqCst), 2, "no restart after the stop");
    }

    /// A task that ignores the stop is aborted at the bound, and `join`
    /// does not wait longer.
    #[tokio::test(start_paused = true)]
    async fn a_task_that_does_not_stop_is_aborted_at_the_bound() {
        let (stop_tx, stop) = watch::channel(false);
        let mut supervisor = Supervisor::new(stop);
        let dropped = Arc::new(AtomicU32::new(0));
        let guard = Arc::clone(&dropped);
        supervisor.spawn("stubborn".into(), move |_stop| {
            let guard = Arc::clone(&guard);
            async move {
                let _noted = NoteDrop(guard);
                std::future::pending::<()>().await;
            }
        });
        tokio::task::yield_now().await;
        stop_tx.send(true).unwrap();
        let began = tokio::time::Instant::now();
        supervisor.join(Duration::from_secs(3)).await;
        assert_eq!(began.elapsed(), Duration::from_secs(3));
        yield_until(|| dropped.load(Ordering::SeqCst) == 1).await;
    }

    /// A task that returns by itself is not restarted, and not down.
    #[tokio::test(start_paused = true)]
    async fn a_task_that_ends_by_itself_stays_ended() {
        let (_stop_tx, stop) = watch::channel(false);
        let mut supervisor = Supervisor::new(stop);
        let health = supervisor.health();
        let runs = Arc::new(AtomicU32::new(0));
        let counted = Arc::clone(&runs);
        supervisor.spawn("once".into(), move |_stop| {
            counted.fetch_add(1, Ordering::SeqCst);
            async {}
        });
        tokio::time::sleep(RESTART_CAP * 2).await;
        assert_eq!(runs.load(Ordering::SeqCst), 1);
        assert!(health.down().is_empty());
        supervisor.join(Duration::from_secs(1)).await;
    }

    struct NoteDrop(Arc<AtomicU32>);

    impl Drop for NoteDrop {
        fn drop(&mut self) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    async fn yield_until(done: impl Fn() -> bool) {
        for _ in 0..10_000 {
            if done() {
                return;
            }
            tokio::task::yield_now().await;
        }
        panic!("condition not reached");
    }
}
