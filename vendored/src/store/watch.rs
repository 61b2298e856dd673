//! Watching approvals change across every process that shares a store.
//!
//! ```no_run
//! # use tollgate_runtime::SharedStore;
//! # use tollgate_runtime::watch::{ApprovalWatcher, WatchOptions};
//! # async fn example(store: SharedStore, key: &str) -> Result<(), tollgate_runtime::StoreError> {
//! let watcher = ApprovalWatcher::start(store.clone(), WatchOptions::default());
//! let decided = watcher.wait_for_decision(key).await?;  // any node decides
//! println!("{} by {:?}", decided.status, decided.decided_by);
//! let mut changes = watcher.changes();                   // or follow everything
//! # let _ = changes.recv().await;
//! # Ok(())
//! # }
//! ```
//!
//! How changes arrive depends on the store:
//!
//! - **PostgreSQL pushes.** Every pause, decision and expiry sends `NOTIFY
//!   tollgate_approvals` when it commits. The watcher keeps one dedicated
//!   LISTEN connection, reconnects with jittered exponential backoff when it drops,
//!   and after every (re)connect re-reads the records someone is waiting for
//!   (the catch-up), so a decision made while it was disconnected still
//!   resolves its waiter. As a safety net against a connection that died
//!   silently it also re-reads them every [`WatchOptions::recheck_interval`].
//! - **SQLite and memory poll**: every [`WatchOptions::poll_interval`]
//!   (default 1 s) the watcher re-reads the records someone is waiting for.
//!
//! [`ApprovalWatcher::changes`] is a hint stream, at least once for keys
//! being waited on: with PostgreSQL it carries every change any node made
//! while the connection was up; on a polling store, and for what happened
//! while disconnected, only changes of keys someone waits for. A change may
//! arrive twice. Re-read the record before acting on it.
//!
//! Waiters also resolve on expiry without anyone sweeping: when a record's
//! `expires_at` passes, the waiter runs the store's sweep (at most once
//! across processes) and returns the record as EXPIRED.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tokio::sync::{broadcast, watch};

use crate::domain::pending_approval::{ApprovalError, ApprovalRecord, ApprovalStatus};
use crate::store::{SharedStore, StoreErrorKind, StoreResult};
use crate::support::backoff::Backoff;
use crate::support::time::SharedClock;
// The change-feed types live with the store that implements them; they are
// named here too, where watchers have always found them.
pub use crate::store::feed::{ApprovalChange, ChangeFeed, FeedConnection, FeedItem};

/// Timing of a watcher.
#[derive(Debug, Clone)]
pub struct WatchOptions {
    /// Use the store's push when it has one. Turn off where LISTEN cannot
    /// work (PostgreSQL behind a pooler in transaction mode, such as
    /// pgbouncer's `pool_mode = transaction`): the watcher then polls.
    pub push: bool,
    /// How often a polling store is re-read for the keys being waited on.
    pub poll_interval: Duration,
    /// With push: how often waited-on keys are re-read anyway, in case the
    /// connection died without the watcher noticing.
    pub recheck_interval: Duration,
    /// Reconnecting a lost push connection waits a random time (full
    /// jitter) under a ceiling that starts here and doubles per failed
    /// attempt up to `reconnect_max`.
    pub reconnect_min: Duration,
    pub reconnect_max: Duration,
}

impl Default for WatchOptions {
    fn default() -> Self {
        WatchOptions {
            push: true,
            poll_interval: Duration::from_secs(1),
            recheck_interval: Duration::from_secs(30),
            reconnect_min: Duration::from_millis(200),
            reconnect_max: Duration::from_secs(30),
        }
    }
}

/// Where the watcher's feed stands (for health checks and tests).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FeedState {
    /// The store has no push: polling every `poll_interval`.
    Polling,
    /// Push connection not (yet, or no longer) up; `connects` so far.
    Disconnected {
        connects: u64,
        error: Option<String>,
    },
    /// Listening; this is connection number `connects` (1 = first).
    Listening { connects: u64 },
}

/// Follows approval changes from every process sharing a store. Cheap to
/// clone; the background task stops when the last clone is dropped.
#[derive(Clone)]
pub struct ApprovalWatcher {
    handle: Arc<Handle>,
    /// What waits decide expiry by (see [`ApprovalWatcher::with_clock`]).
    clock: SharedClock,
}

struct Handle {
    shared: Arc<Shared>,
    task: tokio::task::AbortHandle,
}

impl Drop for Handle {
    fn drop(&mut self) {
        self.task.abort();
    }
}

struct Shared {
    store: SharedStore,
    options: WatchOptions,
    changes: broadcast::Sender<ApprovalChange>,
    /// Keys someone waits for, with how many waiters each.
    waited: Mutex<HashMap<String, usize>>,
    state: watch::Sender<FeedState>,
}

/// When a waiter's re-read fails for a reason that may pass (the database
/// restarting), it retries with jittered backoff (`crate::support::backoff`) whose
/// ceiling doubles from the first to the second delay.
const MIN_RETRY_DELAY: Duration = Duration::from_millis(100);
const MAX_RETRY_DELAY: Duration = Duration::from_secs(30);

impl ApprovalWatcher {
    /// Start watching `store`: push if it has a feed, else poll. Must be
    /// called inside a tokio runtime.
    pub fn start(store: SharedStore, options: WatchOptions) -> ApprovalWatcher {
        let feed = store.change_feed().filter(|_| options.push);
        let initial = if feed.is_some() {
            FeedState::Disconnected {
                connects: 0,
                error: None,
            }
        } else {
            FeedState::Polling
        };
        let (changes, _) = broadcast::channel(1024);
        let shared = Arc::new(Shared {
            store,
            options,
            changes,
            waited: Mutex::new(HashMap::new()),
            state: watch::channel(initial).0,
        });
        let task = match feed {
            Some(feed) => tokio::spawn(listen(Arc::clone(&shared), feed)),
            None => tokio::spawn(poll(Arc::clone(&shared))),
        };
        ApprovalWatcher {
            handle: Arc::new(Handle {
                shared,
                task: task.abort_handle(),
            }),
            clock: crate::support::time::system(),
        }
    }

    /// This watcher (the same background task) with waits that read the
    /// time from `clock`: a record expires, and its waiter sweeps, when that
    /// clock reaches its `expires_at`.
    pub fn with_clock(mut self, clock: SharedClock) -> ApprovalWatcher {
        self.clock = clock;
        self
    }

    pub fn clock(&self) -> &SharedClock {
        &self.clock
    }

    /// Every change this watcher learns of (see the module docs for which).
    pub fn changes(&self) -> broadcast::Receiver<ApprovalChange> {
        self.handle.shared.changes.subscribe()
    }

    /// The feed's state, updated as it connects and disconnects.
    pub fn state(&self) -> watch::Receiver<FeedState> {
        self.handle.shared.state.subscribe()
    }

    /// Resolves with the record once it is no longer PENDING: decided by
    /// any process, or expired. A record already decided resolves at once;
    /// an unknown key is `approval_not_found`. Errors that may pass
    /// ([`StoreErrorKind::Unavailable`]: busy, no connection) are retried;
    /// any other is returned, never retried forever. Drop the future to
    /// stop waiting.
    pub async fn wait_for_decision(&self, key: &str) -> StoreResult<ApprovalRecord> {
        let shared = &self.handle.shared;
        // Subscribe and register before the first read: a change committed
        // after that read is then either heard or caught up on.
        let mut changes = shared.changes.subscribe();
        let _registration = Registration::new(shared, key);
        let mut swept = false;
        loop {
            let record = shared.read_retrying(key).await?;
            if record.status != ApprovalStatus::Pending {
                return Ok(record);
            }
            let now = self.clock.now();
            if record.is_expired_at(now) && !swept {
                // Overdue but not swept yet: sweep (once across processes)
                // and re-read. Should another transaction hold the row (a
                // claim in flight), wait for its change instead of spinning.
                swept = true;
                if shared.store.expire_due(now).await.is_ok() {
                    continue;
                }
            }
            // Until the clock reaches the expiry; once there (swept, but
            // still pending), a poll interval before looking again.
            let until_expiry = async {
                if record.expires_at > now {
                    self.clock.sleep_until(record.expires_at).await
                } else {
                    tokio::time::sleep(shared.options.poll_interval).await
                }
            };
            tokio::select! {
                _ = next_change_of(&mut changes, key) => {}
                _ = until_expiry => swept = false,
            }
        }
    }
}

impl ApprovalWatcher {
    /// Resolves with the record once it is no longer PENDING, or once its
    /// time is up (then read as EXPIRED: [`crate::store::expired_as_of`]).
    /// Unlike [`ApprovalWatcher::wait_for_decision`] it never writes,
    /// not even the expiry: a reader's wait (`GET /gates/{key}?wait=`)
    /// leaves the record as it is, for the sweeper. Drop the future to
    /// stop waiting (wrap it in a timeout for a bounded wait).
    pub async fn wait_until_settled(&self, key: &str) -> StoreResult<ApprovalRecord> {
        let shared = &self.handle.shared;
        let mut changes = shared.changes.subscribe();
        let _registration = Registration::new(shared, key);
        loop {
            let record = shared.read_retrying(key).await?;
            let now = self.clock.now();
            if record.status != ApprovalStatus::Pending || record.is_expired_at(now) {
                return Ok(crate::store::expired_as_of(record, now));
            }
            tokio::select! {
                _ = next_change_of(&mut changes, key) => {}
                _ = self.clock.sleep_until(record.expires_at) => {}
            }
        }
    }
}

/// Resolves when `key` changes, or when the stream lagged or closed (the
/// caller re-reads either way).
async fn next_change_of(changes: &mut broadcast::Receiver<ApprovalChange>, key: &str) {
    loop {
        match changes.recv().await {
            Ok(change) if change.key == key => return,
            Ok(_) => continue,
            Err(broadcast::error::RecvError::Lagged(_)) => return,
            Err(broadcast::error::RecvError::Closed) => {
                // The watcher is gone; only expiry can end the wait now.
                std::future::pending::<()>().await
            }
        }
    }
}

/// A waiter's key in `waited` for as long as it waits (also when the wait
/// is cancelled by dropping its future).
struct Registration<'a> {
    shared: &'a Shared,
    key: String,
}

impl<'a> Registration<'a> {
    fn new(shared: &'a Shared, key: &str) -> Self {
        *shared.waited().entry(key.to_string()).or_insert(0) += 1;
        Registration {
            shared,
            key: key.to_string(),
        }
    }
}

impl Drop for Registration<'_> {
    fn drop(&mut self) {
        let mut waited = self.shared.waited();
        if let Some(n) = waited.get_mut(&self.key) {
            *n -= 1;
            if *n == 0 {
                waited.remove(&self.key);
            }
        }
    }
}

impl Shared {
    fn waited(&self) -> MutexGuard<'_, HashMap<String, usize>> {
        // Plain data, consistent after every statement: keep serving.
        self.waited.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The record of `key`, read again after errors that may pass (busy,
    /// no connection) with jittered backoff; an unknown key is
    /// `approval_not_found`, any other error is returned.
    async fn read_retrying(&self, key: &str) -> StoreResult<ApprovalRecord> {
        let mut retry = Backoff::new(MIN_RETRY_DELAY, MAX_RETRY_DELAY);
        loop {
            match self.store.get_approval(key).await {
                Ok(Some(record)) => return Ok(record),
                Ok(None) => return Err(ApprovalError::NotFound { key: key.into() }.into()),
                Err(e) if e.is_retryable() => {
                    tracing::debug!(key, error = %e, "cannot read the approval; will retry");
                    tokio::time::sleep(retry.next_wait()).await;
                }
                Err(other) => return Err(other),
            }
        }
    }

    fn publish(&self, change: ApprovalChange) {
        // No receivers is fine: nobody is listening right now.
        let _ = self.changes.send(change);
    }

    /// Re-read every waited-on record and announce those that are no longer
    /// PENDING. Errors are left for the next round: the waiters' own reads
    /// report what is wrong.
    async fn recheck(&self) {
        let keys: Vec<String> = self.waited().keys().cloned().collect();
        if keys.is_empty() {
            return;
        }
        let Ok(records) = self.store.approvals_by_key(&keys).await else {
            return;
        };
        for record in records {
            if record.status != ApprovalStatus::Pending {
                self.publish(ApprovalChange {
                    key: record.key,
                    run_id: record.run_id,
                    status: record.status,
                });
            }
        }
    }
}

/// The polling loop of a store without push.
async fn poll(shared: Arc<Shared>) {
    let mut ticks = tokio::time::interval(shared.options.poll_interval);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticks.tick().await;
        shared.recheck().await;
    }
}

/// The push loop: connect, catch up, relay; on loss back off and repeat.
async fn listen(shared: Arc<Shared>, feed: Arc<dyn ChangeFeed>) {
    let options = shared.options.clone();
    // Jittered, so the servers sharing a database that restarts do not all
    // reconnect at the same instants.
    let mut backoff = Backoff::new(options.reconnect_min, options.reconnect_max);
    let mut connects = 0u64;
    // Failed attempts since the connection was last up: the first is
    // logged, the rest only counted, so an outage is one warning, not one
    // per retry.
    let mut failed_attempts = 0u64;
    loop {
        match feed.connect().await {
            Ok(mut connection) => {
                connects += 1;
                if connects > 1 {
                    tracing::info!(
                        store = %shared.store.describe(),
                        failed_attempts,
                        "listening for approval changes again (LISTEN reconnected); catching up on what was decided meanwhile"
                    );
                }
                failed_attempts = 0;
                backoff.reset();
                shared.state.send_replace(FeedState::Listening { connects });
                // Anything decided while no connection listened.
                shared.recheck().await;
                let mut recheck = tokio::time::interval(options.recheck_interval);
                recheck.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
                recheck.tick().await; // the first tick is immediate: just done
                let error = loop {
                    tokio::select! {
                        item = connection.next() => match item {
                            Some(FeedItem::Change(change)) => shared.publish(change),
                            Some(FeedItem::Unreadable) => shared.recheck().await,
                            None => break "connection lost".to_string(),
                        },
                        _ = recheck.tick() => shared.recheck().await,
                    }
                };
                tracing::warn!(
                    store = %shared.store.describe(),
                    error = %error,
                    "the LISTEN connection for approval changes was lost; reconnecting (waiters poll meanwhile)"
                );
                shared.state.send_replace(FeedState::Disconnected {
                    connects,
                    error: Some(error),
                });
            }
            Err(e) if e.kind() == StoreErrorKind::Unavailable => {
                failed_attempts += 1;
                if failed_attempts == 1 {
                    tracing::warn!(
                        store = %shared.store.describe(),
                        error = %e,
                        "cannot open the LISTEN connection for approval changes; retrying with backoff"
                    );
                }
                shared.state.send_replace(FeedState::Disconnected {
                    connects,
                    error: Some(e.to_string()),
                });
                tokio::time::sleep(backoff.next_wait()).await;
                continue;
            }
            Err(e) => {
                // Reconnecting cannot fix this (LISTEN refused, bad
                // credentials for the listen connection): say so once and
                // poll instead, so waiters still resolve.
                tracing::error!(
                    store = %shared.store.describe(),
                    error = %e,
                    "cannot listen for approval changes; polling instead"
                );
                shared.state.send_replace(FeedState::Polling);
                return poll(shared).await;
            }
        }
        tokio::time::sleep(backoff.next_wait()).await;
    }
}
