//! The delivery worker of the outbox (DESIGN §14): every server runs one.
//! It labels new notices with their lane (the endpoint that receives
//! them, see [`crate::notify::lanes`]), leases due notices from the store
//! (one sender per notice across processes, at most a lane's share of one
//! endpoint's notices across every worker), sends each on its channel in
//! a task of its own (one [`NoticeSender`] per channel, see
//! [`crate::notify::sender`]), and records what came of it: sent; failed, retried
//! after a jittered exponential backoff (or the receiver's `Retry-After`)
//! while the notice's retry window lasts; or dead, with a log line, for an
//! operator to retry (`tollgate notifications retry`).
//!
//! A receiver that rate-limits (Slack's 429, a webhook's 429 or 503 with
//! `Retry-After`) holds its whole lane until the time it gave (see
//! [`crate::notify::hold`]): the worker sends no other notice of that lane
//! before then, and one it leased anyway is put back, due at the hold's
//! end, without counting an attempt (see [`NoticeWrite::Postponed`]).
//!
//! It is the only trigger of every notification, Slack's included (issue
//! 43): it leases as soon as a commit that wrote notices wakes it (see
//! [`crate::notify::wake`]), and every [`POLL_EVERY`] in case a wake was
//! missed.
//!
//! The worker never waits for the slowest of a batch: as soon as one send
//! ends it leases again, so a hanging endpoint holds only the slots of its
//! own lane while every other lane keeps flowing.
//!
//! Delivery is at least once: a worker that dies between a send and its
//! record leaves the notice leased until the lease runs out, and then
//! another worker sends it again, with the same id (a webhook's
//! `webhook-id`, a mail's Message-ID) for the receiver to de-duplicate on.
//!
//! Secrets are resolved when a notice is sent, never stored: the outbox
//! rows and the routes hold `${NAME}` references. A signed link is made
//! at send time too: bound to the recipient of a mail; in a webhook's body
//! only an unbound one (a webhook has no single viewer), when unbound
//! links are on and `link` may decide.

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, SubsecRound, Utc};
use tokio::sync::{Notify, watch};

use crate::domain::links::LinkSigner;
use crate::domain::notices::NoticeChannel;
use crate::notify::delivery::Attempt;
use crate::notify::email::EmailSender;
use crate::notify::hold::LaneHolds;
use crate::notify::lanes;
use crate::notify::sender::{EmailNotices, NoticeSender, SlackNotices, WebhookNotices};
use crate::notify::slack::SlackNotifier;
use crate::notify::webhook::WebhookSender;
use crate::store::{DisabledEndpoint, LaneLimits, NoticeWrite, OutboxNotice, SharedStore};
use crate::support::backoff::Backoff;
use crate::support::time::SharedClock;

/// How long a notice is retried before it is dead, by default: a day,
/// counted from its first attempt (see [`OutboxWorker::with_retry_window`]).
pub const DEFAULT_RETRY_WINDOW: Duration = Duration::from_secs(24 * 3600);

/// The waits between attempts of one notice scale with the retry window:
/// the first retry's ceiling is a thousandth of it, between
/// [`MIN_RETRY_BASE`] and [`MAX_RETRY_BASE`], and each later one doubles up
/// to an eighth of it, at most [`MAX_RETRY_CAP`]. With the default day:
/// 10 s, 20 s, 40 s ... then hourly, some 30 attempts in all.
const MIN_RETRY_BASE: Duration = Duration::from_millis(100);
const MAX_RETRY_BASE: Duration = Duration::from_secs(10);
const MAX_RETRY_CAP: Duration = Duration::from_secs(3600);

/// The backoff of a retry window (see [`MIN_RETRY_BASE`]).
fn retry_backoff(window: Duration) -> Backoff {
    let base = (window / 1000).clamp(MIN_RETRY_BASE, MAX_RETRY_BASE);
    let cap = (window / 8).clamp(base, MAX_RETRY_CAP);
    Backoff::new(base, cap)
}

/// How often an idle worker looks for due notices when nothing woke it
/// (see [`crate::notify::wake`]): a failed notice coming due, a wake lost.
pub const POLL_EVERY: Duration = Duration::from_secs(1);

/// Notices labelled with their lane per look, at most.
const LABEL_BATCH: usize = 256;

/// A lease outlives the slowest send (a webhook's 15 s, a mail's 30 s) by
/// a margin: a worker that died mid-send hands its notices over after it.
pub const LEASE: Duration = Duration::from_secs(45);

/// The default lanes: [`lanes::DEFAULT_PER_LANE`] notices of one endpoint
/// at once, [`lanes::DEFAULT_TOTAL`] in all per worker.
pub const DEFAULT_LANES: LaneLimits = LaneLimits {
    per_lane: lanes::DEFAULT_PER_LANE,
    total: lanes::DEFAULT_TOTAL,
};

/// Sends the outbox's notices.
pub struct OutboxWorker {
    store: SharedStore,
    clock: SharedClock,
    /// This worker's name on its leases: the node, and a random part so
    /// two workers of one process (tests) are told apart.
    owner: String,
    /// One sender per channel (see [`crate::notify::sender`]).
    webhooks: WebhookNotices,
    mail: EmailNotices,
    /// Posts and edits the Slack messages (`approvals.notify.slack`).
    slack: SlackNotices,
    window: Duration,
    metrics: Option<Arc<crate::engine::metrics::Metrics>>,
    /// How many notices are sent at once, per lane and in all.
    lanes: LaneLimits,
    /// Woken after a commit that wrote notices (see [`OutboxWorker::waker`]).
    wake: Arc<Notify>,
    /// The lanes whose receivers said when to come back.
    holds: LaneHolds,
}

/// What became of a leased notice's turn.
enum Turn {
    /// Sent, or tried: what came of it, and the lane it was sent in when
    /// its routes could be read (what a rate limit holds).
    Tried {
        attempt: Attempt,
        lane: Option<String>,
    },
    /// Not tried: its lane is held until then.
    Held(DateTime<Utc>),
}

/// Why a worker could not be made.
#[derive(Debug, thiserror::Error)]
#[error("cannot start the notification worker: {0}")]
pub struct WorkerError(String);

impl OutboxWorker {
    pub fn new(store: SharedStore, clock: SharedClock) -> Result<OutboxWorker, WorkerError> {
        Ok(OutboxWorker {
            store,
            clock: clock.clone(),
            owner: format!(
                "{}/{}",
                crate::domain::durable::node_id(),
                &uuid::Uuid::new_v4().simple().to_string()[..8]
            ),
            webhooks: WebhookNotices {
                sender: WebhookSender::new().map_err(|e| WorkerError(e.to_string()))?,
                links: None,
                clock: clock.clone(),
            },
            mail: EmailNotices {
                sender: EmailSender::new(),
                links: None,
            },
            slack: SlackNotices { slack: None },
            window: DEFAULT_RETRY_WINDOW,
            metrics: None,
            lanes: DEFAULT_LANES,
            wake: Arc::new(Notify::new()),
            holds: LaneHolds::new(),
        })
    }

    /// Sign links into the notices (see the module's doc for which).
    pub fn with_links(mut self, links: Option<LinkSigner>) -> OutboxWorker {
        self.webhooks.links = links.clone();
        self.mail.links = links;
        self
    }

    /// Retry a failing notice for `window` before it is dead, counted from
    /// its first attempt (after its creation, or after an operator's
    /// retry): the lease that first takes it to send opens the window, so
    /// time it waited for a slot of a busy lane is not counted.
    pub fn with_retry_window(mut self, window: Duration) -> OutboxWorker {
        self.window = window;
        self
    }

    /// Count sends, retries and dead notices in `metrics`.
    pub fn with_metrics(mut self, metrics: Arc<crate::engine::metrics::Metrics>) -> OutboxWorker {
        self.metrics = Some(metrics);
        self
    }

    /// Send mail through `sender` (tests trust their own CA, shorten its
    /// timeout).
    pub fn with_mail_sender(mut self, sender: EmailSender) -> OutboxWorker {
        self.mail.sender = sender;
        self
    }

    /// Bring Slack messages in line through `slack` (the served spec's).
    pub fn with_slack(mut self, slack: Option<Arc<SlackNotifier>>) -> OutboxWorker {
        self.slack.slack = slack;
        self
    }

    /// Send at most `limits.per_lane` notices of one endpoint at once
    /// (across every worker of the store) and `limits.total` in all.
    pub fn with_lanes(mut self, limits: LaneLimits) -> OutboxWorker {
        self.lanes = limits;
        self
    }

    /// Send web hooks through `sender` (tests shorten its timeouts).
    pub fn with_webhook_sender(mut self, sender: WebhookSender) -> OutboxWorker {
        self.webhooks.sender = sender;
        self
    }

    /// What wakes this worker at once: notify it after a commit that wrote
    /// notices (see [`crate::notify::wake`]).
    pub fn waker(&self) -> Arc<Notify> {
        Arc::clone(&self.wake)
    }

    /// Deliver until `stop` turns true. Each send runs in a task of its
    /// own; the worker leases again whenever one ends (a slot is free) or
    /// a commit wakes it, else every [`POLL_EVERY`]. Sends still running at the stop are
    /// dropped: their leases run out and another worker sends them again
    /// (delivery is at least once).
    pub async fn run(self: Arc<Self>, mut stop: watch::Receiver<bool>) {
        let mut sends = tokio::task::JoinSet::new();
        loop {
            if *stop.borrow() {
                break;
            }
            self.label_new_notices().await;
            let free = self.lanes.total.saturating_sub(sends.len());
            let (leased, disabled) = self.lease(free).await;
            for notice in leased {
                let worker = Arc::clone(&self);
                let disabled = Arc::clone(&disabled);
                sends.spawn(async move { worker.deliver(notice, &disabled).await });
            }
            tokio::select! {
                Some(_) = sends.join_next(), if !sends.is_empty() => {}
                _ = self.wake.notified() => {}
                _ = tokio::time::sleep(POLL_EVERY) => {}
                _ = stop.changed() => {}
            }
        }
        sends.abort_all();
    }

    /// Label the notices not labelled yet with their lanes (the routes of
    /// each approval read once). A store that does not answer is logged
    /// and tried again at the next look.
    async fn label_new_notices(&self) {
        let unlabelled = match self.store.unlabelled_notices(LABEL_BATCH).await {
            Ok(unlabelled) => unlabelled,
            Err(e) => {
                tracing::warn!(error = %e, "notifications: cannot read new notices; trying again");
                return;
            }
        };
        if unlabelled.is_empty() {
            return;
        }
        let lookup = |name: &str| std::env::var(name).ok();
        let mut routes = std::collections::HashMap::new();
        let mut labels = Vec::with_capacity(unlabelled.len());
        for notice in unlabelled {
            if !routes.contains_key(&notice.key) {
                // An unreadable route labels its notices unresolved: the
                // send reads it again and says why.
                let read = self.store.routes_of(&notice.key).await.ok().flatten();
                routes.insert(notice.key.clone(), read);
            }
            let of_key = routes.get(&notice.key).and_then(Option::as_ref);
            let lane = lanes::label(notice.channel, &notice.target, of_key, &lookup);
            labels.push((notice.id, lane));
        }
        if let Err(e) = self.store.label_notices(&labels).await {
            tracing::warn!(error = %e, "notifications: cannot label new notices with their lanes; trying again");
        }
    }

    /// Lease up to `free` due notices, as many of each lane as it has free
    /// slots, with the disabled webhook endpoints they are checked
    /// against. Nothing when the store does not answer (logged).
    async fn lease(&self, free: usize) -> (Vec<OutboxNotice>, Arc<Vec<DisabledEndpoint>>) {
        if free == 0 {
            return (Vec::new(), Arc::default());
        }
        let now = self.clock.now();
        let until = crate::support::time::add(now, LEASE);
        let limits = LaneLimits {
            per_lane: self.lanes.per_lane,
            total: free,
        };
        let leased = match self
            .store
            .lease_lane_notices(&self.owner, now, until, limits)
            .await
        {
            Ok(leased) => leased,
            Err(e) => {
                tracing::warn!(error = %e, "notifications: cannot lease due notices; trying again");
                return (Vec::new(), Arc::default());
            }
        };
        let disabled = if leased
            .iter()
            .any(|n| n.notice.channel == NoticeChannel::Webhook)
        {
            self.store.disabled_endpoints().await.unwrap_or_default()
        } else {
            Vec::new()
        };
        (leased, Arc::new(disabled))
    }

    async fn deliver(&self, notice: OutboxNotice, disabled: &[DisabledEndpoint]) {
        let (attempt, lane) = match disabled.iter().find(|d| {
            notice.notice.channel == NoticeChannel::Webhook && d.endpoint == notice.notice.target
        }) {
            Some(off) => (
                Attempt::Gone {
                    reason: format!(
                        "the endpoint is disabled since {} ({}); `tollgate notifications retry` enables it again",
                        crate::support::time::format_utc(off.disabled_at),
                        off.reason
                    ),
                },
                None,
            ),
            None => match self.attempt(&notice).await {
                Turn::Tried { attempt, lane } => (attempt, lane),
                Turn::Held(until) => return self.postpone(&notice, until).await,
            },
        };
        let now = self.clock.now();
        if let (
            Attempt::Failed {
                retry_after: Some(wait),
                ..
            },
            Some(lane),
        ) = (&attempt, &lane)
        {
            self.hold_lane(&notice, lane, now, *wait);
        }
        let write = self.next_state(&notice, &attempt, now);
        if let Attempt::Gone { reason } = &attempt
            && notice.notice.channel == NoticeChannel::Webhook
            && !disabled.iter().any(|d| d.endpoint == notice.notice.target)
        {
            let off = DisabledEndpoint {
                endpoint: notice.notice.target.clone(),
                disabled_at: now,
                reason: reason.clone(),
            };
            tracing::warn!(endpoint = %off.endpoint, reason = %off.reason, "notifications: webhook endpoint answered 410 Gone; disabled until an operator retries one of its notices");
            if let Err(e) = self.store.disable_endpoint(&off).await {
                tracing::warn!(endpoint = %off.endpoint, error = %e, "notifications: cannot record the disabled endpoint");
            }
        }
        self.count(&notice, &write);
        match self
            .store
            .settle_notice(&notice.notice.id, &self.owner, &write)
            .await
        {
            Ok(true) => {}
            Ok(false) => {
                tracing::warn!(id = %notice.notice.id, "notifications: the lease on a notice ran out before its delivery was recorded; another worker sends it again")
            }
            Err(e) => {
                tracing::warn!(id = %notice.notice.id, error = %e, "notifications: cannot record a delivery; it is sent again when its lease runs out")
            }
        }
    }

    /// Hold `notice`'s lane for `wait` from `now`: its receiver asked for
    /// it (a 429, or a 503 with `Retry-After`). The end is cut to whole
    /// microseconds, what a store keeps of a time: a notice put back until
    /// the end is not taken again a fraction of a microsecond early only
    /// to be put back once more.
    fn hold_lane(&self, notice: &OutboxNotice, lane: &str, now: DateTime<Utc>, wait: Duration) {
        let until = crate::support::time::add(now, wait).trunc_subsecs(6);
        let n = &notice.notice;
        tracing::warn!(channel = %n.channel, lane = %lane, until = %crate::support::time::format_utc(until), "notifications: the receiver is rate-limiting; holding its lane until it said to come back");
        self.holds.hold(n.channel, lane, until);
    }

    /// Put back `notice`, leased while its lane is held until `until`: due
    /// again then, not counted as an attempt, a retry or a failure (it was
    /// not tried).
    async fn postpone(&self, notice: &OutboxNotice, until: DateTime<Utc>) {
        let id = &notice.notice.id;
        tracing::debug!(id = %id, until = %crate::support::time::format_utc(until), "notifications: lane held; notice put back until the hold ends");
        let write = NoticeWrite::Postponed { next_at: until };
        match self.store.settle_notice(id, &self.owner, &write).await {
            Ok(_) => {}
            Err(e) => {
                tracing::warn!(id = %id, error = %e, "notifications: cannot put back a notice of a held lane; it is due again when its lease runs out")
            }
        }
    }

    /// What to record after `attempt`.
    fn next_state(
        &self,
        notice: &OutboxNotice,
        attempt: &Attempt,
        now: DateTime<Utc>,
    ) -> NoticeWrite {
        let n = &notice.notice;
        let (error, retry_after) = match attempt {
            Attempt::Sent => {
                tracing::info!(id = %n.id, key = %n.key, event = %n.event, channel = %n.channel, target = %n.target, "notification sent");
                return NoticeWrite::Sent { at: now };
            }
            Attempt::Gone { reason } => {
                let error = format!("refused for good: {reason}");
                tracing::error!(id = %n.id, key = %n.key, event = %n.event, channel = %n.channel, target = %n.target, error = %error, "notification dead");
                return NoticeWrite::Dead { error, at: now };
            }
            Attempt::Failed { error, retry_after } => (error.clone(), *retry_after),
            Attempt::Misconfigured { error } => (format!("misconfigured: {error}"), None),
        };
        let failures = notice.attempts.saturating_add(1);
        let wait = retry_backoff(self.window)
            .wait_after(failures)
            .max(retry_after.unwrap_or_default());
        let next_at = crate::support::time::add(now, wait);
        let closes = crate::support::time::add(notice.window_from, self.window);
        if next_at > closes {
            let error = format!("{error} (tried {failures} times; retry window closed)");
            tracing::error!(id = %n.id, key = %n.key, event = %n.event, channel = %n.channel, target = %n.target, error = %error, "notification dead");
            NoticeWrite::Dead { error, at: now }
        } else {
            tracing::warn!(id = %n.id, key = %n.key, channel = %n.channel, target = %n.target, error = %error, next = %crate::support::time::format_utc(next_at), "notification failed; will retry");
            NoticeWrite::Failed { error, next_at }
        }
    }

    fn count(&self, notice: &OutboxNotice, write: &NoticeWrite) {
        let Some(metrics) = &self.metrics else {
            return;
        };
        let channel = notice.notice.channel;
        match write {
            NoticeWrite::Sent { .. } => metrics.notice_sent(channel),
            NoticeWrite::Failed { .. } => metrics.notice_retried(channel),
            NoticeWrite::Dead { .. } => metrics.notice_dead(channel),
            // Never counted: nothing was tried.
            NoticeWrite::Postponed { .. } => {}
        }
    }

    /// One send of `notice` on its channel, unless its lane is held. The
    /// lane is worked out again from the routes, as when it was labelled
    /// (a leased notice does not carry its label, and the label depends
    /// only on the routes and the environment, both the same here).
    async fn attempt(&self, notice: &OutboxNotice) -> Turn {
        let n = &notice.notice;
        let routes = match self.store.routes_of(&n.key).await {
            Ok(Some(routes)) => routes,
            Ok(None) => {
                let attempt = Attempt::Gone {
                    reason: format!("approval {} has no notification routes stored", n.key),
                };
                return Turn::Tried {
                    attempt,
                    lane: None,
                };
            }
            Err(e) => {
                let attempt = Attempt::Failed {
                    error: format!("cannot read where the notice goes: {e}"),
                    retry_after: None,
                };
                return Turn::Tried {
                    attempt,
                    lane: None,
                };
            }
        };
        let lookup = |name: &str| std::env::var(name).ok();
        let lane = lanes::label(n.channel, &n.target, Some(&routes), &lookup);
        if let Some(until) = self.holds.held_until(n.channel, &lane, self.clock.now()) {
            return Turn::Held(until);
        }
        let attempt = match n.channel {
            NoticeChannel::Webhook => self.webhooks.send(notice, &routes).await,
            NoticeChannel::Email => self.mail.send(notice, &routes).await,
            NoticeChannel::Slack => self.slack.send(notice, &routes).await,
        };
        Turn::Tried {
            attempt,
            lane: Some(lane),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_waits_scale_with_the_retry_window() {
        let day = retry_backoff(DEFAULT_RETRY_WINDOW);
        assert_eq!(day.ceiling(1), Duration::from_secs(10));
        assert_eq!(day.ceiling(2), Duration::from_secs(20));
        assert_eq!(day.ceiling(20), MAX_RETRY_CAP, "hourly at most");
        let minute = retry_backoff(Duration::from_secs(60));
        assert_eq!(minute.ceiling(1), MIN_RETRY_BASE);
        assert_eq!(
            minute.ceiling(20),
            Duration::from_millis(7500),
            "an eighth of it"
        );
        let tiny = retry_backoff(Duration::from_millis(10));
        assert_eq!(tiny.ceiling(5), MIN_RETRY_BASE, "never below the floor");
    }
}
