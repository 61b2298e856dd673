//! A driver's writes through a store outage (the database restarting, the
//! disk full): the driver keeps its run and its lease and writes again,
//! with jittered backoff, until the store answers, instead of ending the
//! run `failed` or leaving it to recovery, where a call in flight would
//! read as in doubt and the run would end `stuck` although its outcome is
//! known here.
//!
//! What makes writing again safe: every driver write is fenced on the
//! run's owner (a run taken over meanwhile answers `NotOwner` and the
//! driver stops), and a write whose answer was lost (a connection dropped
//! at commit) may have landed, so before each new attempt the store is
//! read to see whether it did: a write is never done twice.
//!
//! The wait is bounded: by the lease as last stored (renewals go on
//! trying during the outage; once the lease may have run out, another
//! process, or this one's own recovery, may drive the run, and this
//! driver stops trying), and by a maximum, so that a store that takes
//! renewals but not the write (a nearly full disk) does not hold a run
//! forever.

use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};

use crate::domain::events::Event;
use crate::domain::run_state::{JournalEntry, Lease};
use crate::store::{SharedStore, StoreResult};
use crate::support::backoff::Backoff;
use crate::support::time::SharedClock;

/// The longest a driver waits for the store to take one write, whatever
/// its lease says.
pub const DEFAULT_PATIENCE: Duration = Duration::from_secs(600);

/// The first wait's ceiling, doubled per failure up to [`MAX_WAIT`]:
/// short, so a store back within seconds is noticed within about one.
const FIRST_WAIT: Duration = Duration::from_millis(50);
const MAX_WAIT: Duration = Duration::from_secs(1);

/// Until when this process's lease on a run is known to hold: what was
/// last stored (at creation, a claim, a renewal). Shared by the driver
/// and its renewer.
#[derive(Debug, Clone, Default)]
pub(super) struct LeaseWatch(Arc<Mutex<Option<DateTime<Utc>>>>);

impl LeaseWatch {
    pub(super) fn holding_until(until: Option<DateTime<Utc>>) -> LeaseWatch {
        LeaseWatch(Arc::new(Mutex::new(until)))
    }

    pub(super) fn set(&self, until: Option<DateTime<Utc>>) {
        if let Ok(mut held) = self.0.lock() {
            *held = until;
        }
    }

    fn get(&self) -> Option<DateTime<Utc>> {
        self.0.lock().ok().and_then(|held| *held)
    }
}

/// How to tell whether a write whose answer was an error landed anyway.
#[derive(Debug, Clone)]
pub(super) enum Probe {
    /// The write appends this event first (writes are atomic: it is
    /// stored if and only if the rest is).
    Event(Event),
    /// The write stores this journal entry and no event.
    Journal(JournalEntry),
}

/// What a driver's write needs to wait out an outage.
pub(super) struct Outage<'a> {
    pub store: &'a SharedStore,
    pub clock: &'a SharedClock,
    pub run_id: &'a str,
    /// The run's owner, when it is stored: a renewer keeps its lease.
    pub owner: Option<&'a str>,
    /// What is written ("result of step \"ship\""), for the log.
    pub what: &'a str,
    pub lease: Duration,
    pub watch: &'a LeaseWatch,
    pub patience: Duration,
}

impl Outage<'_> {
    /// Run `write`; while it fails because the store is unavailable (busy,
    /// no connection, no space, read-only for now), wait and try again,
    /// checking first whether the failed attempt landed after all. Any
    /// other error (a conflict, lost ownership, bad data) is returned at
    /// once, as is the last unavailable one once the wait is over.
    pub(super) async fn write<F, Fut>(&self, probe: Probe, mut write: F) -> StoreResult<()>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = StoreResult<()>>,
    {
        let first = match write().await {
            Err(e) if e.is_retryable() => e,
            done => return done,
        };
        let since = Instant::now();
        tracing::warn!(
            run_id = %self.run_id,
            store = %self.store.describe(),
            error = %first,
            "the store did not take the run's {}; keeping the run and trying again until it answers",
            self.what
        );
        // The lease must outlive the outage: renew it meanwhile (the
        // driver's own renewer, if any, does too; two renewals are fine).
        let _renewer = self
            .owner
            .map(|_| renew(self.store, self.clock, self.lease, self.run_id, self.watch));
        let mut backoff = Backoff::new(FIRST_WAIT, MAX_WAIT);
        let mut last = first;
        let mut attempts: u32 = 1;
        loop {
            if !self.trusted(since) {
                tracing::error!(
                    run_id = %self.run_id,
                    store = %self.store.describe(),
                    error = %last,
                    attempts,
                    waited_ms = since.elapsed().as_millis() as u64,
                    "the store stayed unavailable longer than this process may hold the run; giving up the run's {}",
                    self.what
                );
                return Err(last);
            }
            tokio::time::sleep(backoff.next_wait()).await;
            // The failed attempt may have committed before its answer was
            // lost: look before writing again.
            match landed(self.store, self.run_id, &probe).await {
                Ok(true) => {
                    self.recovered(
                        attempts,
                        since,
                        "found stored (an earlier attempt landed; its answer was lost)",
                    );
                    return Ok(());
                }
                Ok(false) => {}
                // Still away: wait again. The write's own error is what a
                // give-up reports (it names the operation).
                Err(e) if e.is_retryable() => continue,
                Err(e) => return Err(e),
            }
            attempts = attempts.saturating_add(1);
            match write().await {
                Ok(()) => {
                    self.recovered(attempts, since, "stored");
                    return Ok(());
                }
                Err(e) if e.is_retryable() => last = e,
                Err(e) => return Err(e),
            }
        }
    }

    fn recovered(&self, attempts: u32, since: Instant, how: &str) {
        tracing::info!(
            run_id = %self.run_id,
            store = %self.store.describe(),
            attempts,
            waited_ms = since.elapsed().as_millis() as u64,
            "the store answers again: the run's {} is {how}; the run goes on",
            self.what
        );
    }

    /// Whether to go on trying: within the patience, and while the lease
    /// as last stored still holds for a while (a run not stored yet has
    /// none: nobody else can take it; it waits at most a lease).
    fn trusted(&self, since: Instant) -> bool {
        if since.elapsed() >= self.patience {
            return false;
        }
        match self.watch.get() {
            Some(until) => {
                let margin = self.lease / 6;
                crate::support::time::add(self.clock.now(), margin) < until
            }
            None => since.elapsed() < self.lease,
        }
    }
}

/// Whether the write `probe` stands for is in the store.
async fn landed(store: &SharedStore, run_id: &str, probe: &Probe) -> StoreResult<bool> {
    match probe {
        Probe::Event(first) => {
            let after = store
                .run_events(run_id, first.seq.saturating_sub(1))
                .await?;
            Ok(after.first().is_some_and(|stored| {
                stored.seq == first.seq
                    && stored.kind.name() == first.kind.name()
                    && same_instant(stored.at, first.at)
            }))
        }
        Probe::Journal(entry) => {
            let journal = store.run_journal(run_id).await?;
            Ok(journal.iter().any(|stored| {
                stored.step_index == entry.step_index
                    && stored.output.is_some() == entry.output.is_some()
                    && same_instant(stored.at, entry.at)
            }))
        }
    }
}

/// Stores keep microseconds: the same instant as far as a store can say.
fn same_instant(a: DateTime<Utc>, b: DateTime<Utc>) -> bool {
    (a - b).abs() < chrono::Duration::milliseconds(1)
}

/// Renews a driven run's lease in the background until dropped.
pub(super) struct Renewer(tokio::task::JoinHandle<()>);

impl Drop for Renewer {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Renew this process's lease on `run_id` every third of a lease until
/// dropped, or until the run is no longer ours; each renewal that lands
/// moves `watch` on. A failed renewal is tried again at the next turn.
pub(super) fn renew(
    store: &SharedStore,
    clock: &SharedClock,
    lease: Duration,
    run_id: &str,
    watch: &LeaseWatch,
) -> Renewer {
    let store = store.clone();
    let clock = Arc::clone(clock);
    let run_id = run_id.to_string();
    let watch = watch.clone();
    Renewer(tokio::spawn(async move {
        loop {
            tokio::time::sleep(crate::domain::durable::renew_every(lease)).await;
            let renewal = Lease {
                owner: crate::domain::durable::node_id().to_string(),
                until: crate::support::time::add(clock.now(), lease),
            };
            match store.renew_lease(&run_id, &renewal).await {
                Ok(true) => watch.set(Some(renewal.until)),
                Ok(false) => {
                    tracing::info!(
                        run_id = %run_id,
                        "the run's lease is no longer this process's (recovered elsewhere, or ended); its driver stops at its next write"
                    );
                    return;
                }
                Err(e) => tracing::warn!(
                    run_id = %run_id,
                    error = %e,
                    "could not renew the run's lease; will try again"
                ),
            }
        }
    }))
}
