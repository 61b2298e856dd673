//! Slack approvals (`approvals.notify.slack`): every pause is announced in
//! a channel with Approve and Reject buttons; a click decides through the
//! same claim as every other decision (`POST /slack/actions`, see
//! `server::routes::slack`); and once an approval is settled, however and
//! wherever, the message is edited to say so and its buttons disappear.
//! On a gate with rules (DESIGN §13) the message shows each rule's progress
//! and who voted, and is edited again after every vote recorded by a
//! server with Slack on (its own `approval_vote` event; servers sharing a
//! store share where the message is): each edit renders the ledger as the
//! store holds it then, never the event, so a repeated or late edit cannot
//! show older progress over newer. Votes recorded where no notifier saw
//! them (the CLI) are shown by the repair sweep.
//!
//! Durability. The pause is stored before anything is posted, so a Slack
//! outage never loses or blocks one. Where each message is (channel, ts) is
//! stored with the approval (`tollgate_notifications`), because Slack's
//! `response_url` expires after 30 minutes and a click may come days later,
//! after a redeploy. Posts and edits are retried with backoff; whatever is
//! still undone (an outage longer than the retries, a crash, a pause made
//! by `tollgate run --persist`, a decision made by the CLI in another
//! process) is found in the store by the repair sweep of any server.
//!
//! One worker per message: every post or edit first takes the message's
//! lease in the store (one conditional write), so two servers sharing a
//! store, or an event and a sweep in one server, never post the same
//! message twice.
//!
//! Credentials: `bot_token` and `signing_secret` are `${NAME}` references
//! resolved from the environment at each call; their values are never
//! logged, stored, or put into an error.

pub mod api;
pub mod interaction;
pub mod message;
pub mod signature;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{DateTime, Utc};
use tokio::sync::{broadcast, watch};

use crate::backoff::Backoff;
use crate::events::{Event, EventKind};
use crate::links::LinkSigner;
use crate::pending_approval::{ApprovalRecord, ApprovalStatus};
use crate::spec::{SlackNotifySpec, Spec};
use crate::store::{NotificationWrite, SharedNotifications, SharedStore};
use crate::time::SharedClock;
use crate::tools::template::CallSecrets;

pub use api::{SlackApi, SlackError};

/// Waits between attempts of one post or edit: jittered (see
/// `crate::backoff`) under a ceiling doubling from 1s to 128s, at most about
/// 4 minutes over 9 attempts. After that the repair sweep takes over.
const RETRY_BASE: Duration = Duration::from_secs(1);
const RETRY_CAP: Duration = Duration::from_secs(128);
/// Retries (after the first attempt) before the repair sweep takes over.
const RETRIES: u32 = 8;

/// A lease outlives one call by this much, so a worker that crashed
/// mid-call hands the message over soon after.
const LEASE_MARGIN: Duration = Duration::from_secs(api::CALL_TIMEOUT.as_secs() + 20);

/// The longest the repair sweep waits before trying a message again.
const MAX_HOLD: Duration = Duration::from_secs(3600);

/// Messages the repair sweep handles per pass (of each kind).
const REPAIR_BATCH: usize = 50;

/// Open messages of gates with rules the repair sweep compares per pass
/// (one query, each with its ledger's length): all of them in practice.
const OPEN_VOTE_MESSAGES: usize = 1000;

/// How hard one call tries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Retries {
    /// Retry transient failures with backoff (live events).
    Backoff,
    /// One attempt (the repair sweep: it comes back anyway).
    Once,
    /// One attempt, for the outbox's worker: a failure releases the
    /// message at once rather than holding it, since the notice's own
    /// backoff decides when it is tried again.
    Outbox,
}

/// What became of one post or edit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Progress {
    Done,
    /// Nothing to do.
    Skipped,
    /// Another worker holds the message now.
    Busy,
    /// Failed for now; `transient` when Slack (or the network) is the cause.
    Failed {
        transient: bool,
    },
}

/// Posts and edits the Slack messages of one agent.
pub struct SlackNotifier {
    config: SlackNotifySpec,
    agent_id: String,
    /// Approvals are read here; the messages kept in `notifications`.
    store: SharedStore,
    notifications: SharedNotifications,
    api: SlackApi,
    /// Leases, holds and "still pending" are decided by this clock.
    clock: SharedClock,
    /// Signs the "Open in browser" link of each message, when links are
    /// on and have a public URL (Slack opens only absolute URLs).
    links: Option<LinkSigner>,
    /// `approvals.approvers`: whether `link` may decide (an unbound link).
    approvers: Option<Vec<String>>,
    /// How many votes each open message of a gate with rules was last
    /// shown with by this process, by key: the repair sweep edits those
    /// whose ledger grew since (votes recorded without Slack, such as by
    /// the CLI). Empty at start, so a new process shows each open gate's
    /// votes once.
    shown: Mutex<HashMap<String, u64>>,
}

impl SlackNotifier {
    /// The notifier for `spec`, if it has `approvals.notify.slack`. The API
    /// base comes from `TOLLGATE_SLACK_API_BASE` (default
    /// `https://slack.com/api`).
    pub fn for_spec(
        spec: &Spec,
        store: SharedStore,
    ) -> Result<Option<Arc<SlackNotifier>>, SlackError> {
        SlackNotifier::for_spec_with_clock(spec, store, crate::time::system())
    }

    /// [`SlackNotifier::for_spec`] reading the time from `clock` (the
    /// server passes its agent's).
    pub fn for_spec_with_clock(
        spec: &Spec,
        store: SharedStore,
        clock: SharedClock,
    ) -> Result<Option<Arc<SlackNotifier>>, SlackError> {
        SlackNotifier::for_spec_with_links(spec, store, clock, None)
    }

    /// [`SlackNotifier::for_spec_with_clock`] whose messages carry an "Open
    /// in browser" button with the signed approval link, when `links` has a
    /// public URL.
    pub fn for_spec_with_links(
        spec: &Spec,
        store: SharedStore,
        clock: SharedClock,
        links: Option<LinkSigner>,
    ) -> Result<Option<Arc<SlackNotifier>>, SlackError> {
        let Some(config) = spec.approvals.notify.slack.clone() else {
            return Ok(None);
        };
        let notifications = Arc::clone(&store).notifications().ok_or_else(|| {
            SlackError::Config(format!(
                "the store {} keeps no Slack messages: use a memory, SQLite or PostgreSQL store",
                store.describe()
            ))
        })?;
        #[cfg(not(feature = "http-client"))]
        {
            let _ = (config, notifications, clock, links);
            Err(SlackError::Config(
                crate::spec::MissingFeature {
                    feature: crate::spec::Feature::HttpClient,
                    at: "approvals.notify.slack".to_string(),
                }
                .to_string(),
            ))
        }
        #[cfg(feature = "http-client")]
        {
            let http = crate::tools::http::client().map_err(|e| SlackError::Config(e.message))?;
            let api = SlackApi::new(http, &SlackApi::base_from_env());
            Ok(Some(Arc::new(SlackNotifier {
                config,
                agent_id: spec.agent.clone(),
                store,
                notifications,
                api,
                clock,
                links: links.filter(|links| links.public_url().is_some()),
                approvers: spec.approvals.approvers.clone(),
                shown: Mutex::new(HashMap::new()),
            })))
        }
    }

    /// Where the message's "Open in browser" button goes. A channel has
    /// no single viewer, so no link bound to a person: an unbound signed
    /// link only when unbound links are on (TOLLGATE_UNBOUND_LINKS) and
    /// `link` may decide; else the approval's inbox page, which asks
    /// whoever opens it to sign in. Made now, never stored: rotating the
    /// secret voids it.
    fn open_in_browser(&self, key: &str) -> Option<String> {
        let links = self.links.as_ref()?;
        links
            .unattended_link(key, self.approvers.as_deref())
            .or_else(|| links.inbox_url(key))
    }

    /// The signing secret, resolved now (rotating it needs no restart).
    pub fn signing_secret(&self) -> Result<String, SlackError> {
        resolve("signing_secret", &self.config.signing_secret)
    }

    /// What keeps the settings from resolving now (named, never a value).
    pub fn check_credentials(&self) -> Vec<SlackError> {
        [self.bot_token().err(), self.signing_secret().err()]
            .into_iter()
            .flatten()
            .collect()
    }

    fn bot_token(&self) -> Result<String, SlackError> {
        resolve("bot_token", &self.config.bot_token)
    }

    /// Post the message announcing the pending approval `key`, unless it
    /// has one already or is no longer pending.
    pub async fn announce(&self, key: &str, retries: Retries) -> Progress {
        let Some(leased) = self.lease(key).await else {
            return Progress::Busy;
        };
        if leased.ts.is_some() {
            self.release(key).await;
            return Progress::Skipped;
        }
        let mut failures = 0u32;
        loop {
            let Some(record) = self.still_pending(key).await else {
                self.release(key).await;
                return Progress::Skipped;
            };
            let link = self.open_in_browser(key);
            let votes = self.ledger(&record).await;
            let body =
                message::pending_voted(&self.config.channel, &record, link.as_deref(), &votes);
            let result = match self.bot_token() {
                Ok(token) => self.api.post_message(&token, &body).await,
                Err(e) => Err(e),
            };
            match result {
                Ok(posted) => {
                    let write = NotificationWrite::Posted {
                        channel: posted.channel.clone(),
                        ts: posted.ts.clone(),
                        at: self.clock.now(),
                    };
                    if let Err(e) = self.notifications.record_notification(key, &write).await {
                        // Posted but not remembered: the sweep will post
                        // again once the lease runs out. Say so.
                        tracing::error!(key = %key, error = %e, "Slack message posted but not stored; it may be posted twice");
                        // A store that may come back stops the repair pass;
                        // one that refused this row lets it go on.
                        return Progress::Failed {
                            transient: e.is_retryable(),
                        };
                    }
                    self.mark_shown(&record, votes.len());
                    tracing::info!(run_id = %record.run_id, key = %key, channel = %posted.channel, ts = %posted.ts, "Slack message posted");
                    // A decision may have landed while the post was on its
                    // way; its own edit found no message. Show it now.
                    match self.still_pending(key).await {
                        None => {
                            self.settle(key, retries).await;
                        }
                        // So may a vote, whose edit found no message either.
                        Some(now) if self.ledger(&now).await.len() != votes.len() => {
                            self.show_votes(key, retries).await;
                        }
                        Some(_) => {}
                    }
                    return Progress::Done;
                }
                Err(e) => {
                    failures += 1;
                    let held = self
                        .retry_or_hold(key, "post", &e, retries, failures, leased.attempts)
                        .await;
                    if let Err(failed) = held {
                        return failed;
                    }
                }
            }
        }
    }

    /// Edit the message of a settled (decided or expired) approval to show
    /// how it was settled, removing the buttons.
    pub async fn settle(&self, key: &str, retries: Retries) -> Progress {
        let Some(leased) = self.lease(key).await else {
            return Progress::Busy;
        };
        // Never posted: nothing to edit (and nothing will be posted for an
        // approval that is no longer pending).
        let Some((channel, ts)) = self.open_message(key, &leased).await else {
            return Progress::Skipped;
        };
        let mut failures = 0u32;
        loop {
            let record = match self.store.get_approval(key).await {
                Ok(Some(record)) if record.status != ApprovalStatus::Pending => record,
                Ok(_) => {
                    self.release(key).await;
                    return Progress::Skipped;
                }
                Err(e) => {
                    tracing::warn!(key = %key, error = %e, "cannot read the approval to update its Slack message");
                    self.release(key).await;
                    return Progress::Failed {
                        transient: e.is_retryable(),
                    };
                }
            };
            let votes = self.ledger(&record).await;
            let body = message::settled_voted(&channel, &ts, &record, &votes);
            let result = match self.bot_token() {
                Ok(token) => self.api.update_message(&token, &body).await,
                Err(e) => Err(e),
            };
            match result {
                Ok(()) => {
                    let write = NotificationWrite::DecisionPosted {
                        at: self.clock.now(),
                    };
                    if let Err(e) = self.notifications.record_notification(key, &write).await {
                        tracing::warn!(key = %key, error = %e, "Slack message updated but not recorded; it may be updated again");
                    }
                    self.forget_shown(key);
                    tracing::info!(run_id = %record.run_id, key = %key, status = %record.status.past_tense(), "Slack message updated");
                    return Progress::Done;
                }
                Err(e) => {
                    failures += 1;
                    let held = self
                        .retry_or_hold(key, "update", &e, retries, failures, leased.attempts)
                        .await;
                    if let Err(failed) = held {
                        return failed;
                    }
                }
            }
        }
    }

    /// Edit the message of a pending gate with rules to show its votes as
    /// the store holds them now (after a vote that did not settle it). A
    /// message another worker holds is waited for (its edit may have read
    /// the ledger before this vote), up to a lease's length; then the next
    /// vote's edit, or the settlement's, shows it. Renders from the store,
    /// never from the event: repeating it, or running it late, shows the
    /// newest progress.
    pub async fn show_votes(&self, key: &str, retries: Retries) -> Progress {
        let leased = match retries {
            Retries::Backoff => self.lease_waiting(key).await,
            // The sweep, or the notice, comes back anyway.
            Retries::Once | Retries::Outbox => self.lease(key).await,
        };
        let Some(leased) = leased else {
            return Progress::Busy;
        };
        // Not posted yet: the post reads the ledger itself.
        let Some((channel, ts)) = self.open_message(key, &leased).await else {
            return Progress::Skipped;
        };
        let mut failures = 0u32;
        loop {
            let Some(record) = self.still_pending(key).await else {
                // Settled meanwhile: that edit replaces this one.
                self.release(key).await;
                return self.settle(key, retries).await;
            };
            let votes = self.ledger(&record).await;
            if record.roster.as_ref().is_none_or(|r| r.rules.is_empty()) {
                // No rules, no progress to show: the message stays as posted.
                self.mark_shown(&record, votes.len());
                self.release(key).await;
                return Progress::Skipped;
            }
            if self.shows(key, votes.len()) {
                // This process's last edit already showed this ledger (the
                // ledger only grows, and every edit renders it under the
                // lease): a repeat, say an event and a NOTIFY of one vote.
                self.release(key).await;
                return Progress::Skipped;
            }
            let link = self.open_in_browser(key);
            let body = message::voted(&channel, &ts, &record, link.as_deref(), &votes);
            let result = match self.bot_token() {
                Ok(token) => self.api.update_message(&token, &body).await,
                Err(e) => Err(e),
            };
            match result {
                Ok(()) => {
                    self.mark_shown(&record, votes.len());
                    // A vote recorded while this edit was on its way may
                    // have found the message held: show it too.
                    if let Some(now) = self.still_pending(key).await
                        && self.ledger(&now).await.len() != votes.len()
                    {
                        continue;
                    }
                    self.release(key).await;
                    if self.still_pending(key).await.is_none() {
                        self.settle(key, retries).await;
                    }
                    tracing::info!(run_id = %record.run_id, key = %key, votes = votes.len(), "Slack message shows the votes");
                    return Progress::Done;
                }
                Err(e) => {
                    failures += 1;
                    let held = self
                        .retry_or_hold(key, "update", &e, retries, failures, leased.attempts)
                        .await;
                    if let Err(failed) = held {
                        return failed;
                    }
                }
            }
        }
    }

    /// The ledger of a gate with a roster, as the store holds it now; none
    /// for a plain gate (its message shows no votes). A read that fails
    /// shows none, logged: the message is still worth posting.
    async fn ledger(&self, record: &ApprovalRecord) -> Vec<crate::policy::Vote> {
        if record.roster.is_none() {
            return Vec::new();
        }
        match self.store.votes(&record.key).await {
            Ok(votes) => votes,
            Err(e) => {
                tracing::warn!(key = %record.key, error = %e, "cannot read the votes for the Slack message");
                Vec::new()
            }
        }
    }

    /// Remember that `record`'s message now shows `votes` votes.
    fn mark_shown(&self, record: &ApprovalRecord, votes: usize) {
        if record.roster.is_none() {
            return;
        }
        if let Ok(mut shown) = self.shown.lock() {
            shown.insert(record.key.clone(), votes as u64);
        }
    }

    /// Whether this process last showed `key`'s message with `votes` votes.
    fn shows(&self, key: &str, votes: usize) -> bool {
        self.shown
            .lock()
            .is_ok_and(|shown| shown.get(key) == Some(&(votes as u64)))
    }

    fn forget_shown(&self, key: &str) {
        if let Ok(mut shown) = self.shown.lock() {
            shown.remove(key);
        }
    }

    /// The open messages of gates with rules whose ledger holds another
    /// number of votes than this process last showed; forgets the gates
    /// no longer open.
    fn votes_unshown(&self, open: &[(String, u64)]) -> Vec<String> {
        let Ok(mut shown) = self.shown.lock() else {
            return Vec::new();
        };
        let keys: std::collections::HashSet<&str> =
            open.iter().map(|(key, _)| key.as_str()).collect();
        shown.retain(|key, _| keys.contains(key.as_str()));
        open.iter()
            .filter(|(key, votes)| shown.get(key) != Some(votes))
            .map(|(key, _)| key.clone())
            .collect()
    }

    /// [`Self::lease`], waiting while another worker holds the message,
    /// at most a lease's length.
    async fn lease_waiting(&self, key: &str) -> Option<crate::store::Notification> {
        let give_up = std::time::Instant::now() + LEASE_MARGIN;
        let mut wait = Duration::from_millis(100);
        loop {
            if let Some(leased) = self.lease(key).await {
                return Some(leased);
            }
            if std::time::Instant::now() + wait > give_up {
                return None;
            }
            tokio::time::sleep(wait).await;
            wait = (wait * 2).min(Duration::from_secs(2));
        }
    }

    /// Reply to the person who clicked, visible to them only. Best effort:
    /// the click itself has been answered already.
    pub async fn tell(&self, response_url: &str, text: &str) {
        let body = message::ephemeral(text);
        let mut backoff = Backoff::new(Duration::from_secs(1), Duration::from_secs(2));
        for attempt in 0..3 {
            if attempt > 0 {
                tokio::time::sleep(backoff.next_wait()).await;
            }
            match self.api.respond(response_url, &body).await {
                Ok(()) => return,
                Err(e) if e.is_transient() => continue,
                Err(e) => {
                    // The URL is a credential for 30 minutes: not logged.
                    tracing::warn!(error = %e, "cannot reply to a Slack click");
                    return;
                }
            }
        }
        tracing::warn!("cannot reply to a Slack click: Slack did not answer");
    }

    /// One pass over what is undone in the store: posts for pending
    /// approvals without a message, edits for settled approvals whose
    /// message still shows buttons, and edits for open messages of gates
    /// with rules whose votes this process has not shown. Stops early
    /// while Slack is unreachable.
    pub async fn repair(&self) {
        let due = match self
            .notifications
            .notifications_due(&self.agent_id, self.clock.now(), REPAIR_BATCH)
            .await
        {
            Ok(due) => due,
            Err(e) if e.is_retryable() => {
                tracing::warn!(error = %e, "cannot look for unsent Slack messages; will retry");
                return;
            }
            Err(e) => {
                // The next pass runs anyway (the sweeper's schedule); say
                // louder that it is not a passing outage.
                tracing::error!(error = %e, kind = ?e.kind(), "cannot look for unsent Slack messages, and retrying will not help");
                return;
            }
        };
        for record in &due.to_post {
            if self.announce(&record.key, Retries::Once).await
                == (Progress::Failed { transient: true })
            {
                return;
            }
        }
        for (record, _) in &due.to_settle {
            if self.settle(&record.key, Retries::Once).await
                == (Progress::Failed { transient: true })
            {
                return;
            }
        }
        // Votes recorded where no notifier saw them (the CLI, a server
        // without Slack), or whose edit failed: shown from the store.
        let open = match self
            .notifications
            .open_vote_counts(&self.agent_id, self.clock.now(), OPEN_VOTE_MESSAGES)
            .await
        {
            Ok(open) => open,
            Err(e) => {
                tracing::warn!(error = %e, "cannot look for Slack messages behind on votes");
                return;
            }
        };
        for key in self.votes_unshown(&open) {
            if self.show_votes(&key, Retries::Once).await == (Progress::Failed { transient: true })
            {
                return;
            }
        }
    }

    /// Follow this process's run events: announce every pause, show every
    /// vote and escalation, settle every decision and expiry. Each call runs in its own task, so one slow
    /// message never holds up another.
    pub async fn follow(
        self: Arc<Self>,
        mut events: broadcast::Receiver<Event>,
        mut shutdown: watch::Receiver<bool>,
    ) {
        loop {
            let event = tokio::select! {
                event = events.recv() => event,
                _ = shutdown.changed() => return,
            };
            match event {
                Ok(event) => match event.kind {
                    EventKind::AwaitingApproval { key, .. } => {
                        let this = Arc::clone(&self);
                        tokio::spawn(async move { this.announce(&key, Retries::Backoff).await });
                    }
                    EventKind::ApprovalVote { key, .. } => {
                        let this = Arc::clone(&self);
                        tokio::spawn(async move { this.show_votes(&key, Retries::Backoff).await });
                    }
                    EventKind::ApprovalEscalated { key, .. } => {
                        // Same votes, more who may still cast one: shown
                        // even though the ledger did not grow.
                        self.forget_shown(&key);
                        let this = Arc::clone(&self);
                        tokio::spawn(async move { this.show_votes(&key, Retries::Backoff).await });
                    }
                    EventKind::ApprovalResolved { key, .. } | EventKind::RunExpired { key } => {
                        let this = Arc::clone(&self);
                        tokio::spawn(async move { this.settle(&key, Retries::Backoff).await });
                    }
                    _ => {}
                },
                // Missed events: the store has everything they would have said.
                Err(broadcast::error::RecvError::Lagged(_)) => {
                    let this = Arc::clone(&self);
                    tokio::spawn(async move { this.repair().await });
                }
                Err(broadcast::error::RecvError::Closed) => return,
            }
        }
    }

    /// Follow the changes other processes push through the store
    /// (PostgreSQL's NOTIFY; a recorded vote sends one): a change to a
    /// pending gate whose message this process shows with votes is shown
    /// now, not at the next repair sweep (a vote cast by the CLI).
    pub async fn follow_changes(
        self: Arc<Self>,
        mut changes: broadcast::Receiver<crate::watch::ApprovalChange>,
        mut shutdown: watch::Receiver<bool>,
    ) {
        loop {
            let change = tokio::select! {
                change = changes.recv() => change,
                _ = shutdown.changed() => return,
            };
            match change {
                Ok(change) => {
                    let known = self
                        .shown
                        .lock()
                        .is_ok_and(|shown| shown.contains_key(&change.key));
                    if change.status == ApprovalStatus::Pending && known {
                        let this = Arc::clone(&self);
                        tokio::spawn(async move {
                            this.show_votes(&change.key, Retries::Backoff).await
                        });
                    }
                }
                // Missed some: the repair sweep finds them in the store.
                Err(broadcast::error::RecvError::Lagged(_)) => {}
                Err(broadcast::error::RecvError::Closed) => return,
            }
        }
    }

    /// Bring approval `key`'s message in line with what `event` says
    /// happened, for the outbox's worker (a notice on the Slack channel):
    /// post it, show its votes, or show how it was settled. Each renders
    /// what the store holds now, so a late or repeated notice shows the
    /// newest state, and a post is never made twice (the message's lease,
    /// and where it is, are in the store). A reminder changes nothing the
    /// message shows.
    pub async fn sync(&self, key: &str, event: crate::notices::NoticeEvent) -> Progress {
        use crate::notices::NoticeEvent;
        match event {
            NoticeEvent::Requested => self.announce(key, Retries::Outbox).await,
            NoticeEvent::Voted => self.show_votes(key, Retries::Outbox).await,
            NoticeEvent::Escalated => {
                // Same votes, more who may still cast one.
                self.forget_shown(key);
                self.show_votes(key, Retries::Outbox).await
            }
            NoticeEvent::Approved
            | NoticeEvent::Rejected
            | NoticeEvent::Expired
            | NoticeEvent::Cancelled => self.settle(key, Retries::Outbox).await,
            NoticeEvent::Reminded => Progress::Skipped,
        }
    }

    /// One repair pass, owning the notifier (for `tokio::spawn`).
    pub async fn repair_once(self: Arc<Self>) {
        self.repair().await;
    }

    /// Where the leased message of `key` is (channel, ts), when it was
    /// posted and its outcome not yet: the message an edit may change.
    /// Otherwise the lease is released and there is nothing to edit.
    async fn open_message(
        &self,
        key: &str,
        leased: &crate::store::Notification,
    ) -> Option<(String, String)> {
        match (&leased.channel, &leased.ts) {
            (Some(channel), Some(ts)) if leased.decision_posted_at.is_none() => {
                Some((channel.clone(), ts.clone()))
            }
            _ => {
                self.release(key).await;
                None
            }
        }
    }

    async fn lease(&self, key: &str) -> Option<crate::store::Notification> {
        let now = self.clock.now();
        match self
            .notifications
            .lease_notification(key, now, crate::time::add(now, LEASE_MARGIN))
            .await
        {
            Ok(leased) => leased,
            Err(e) => {
                tracing::warn!(key = %key, error = %e, "cannot take the Slack message's lease");
                None
            }
        }
    }

    async fn release(&self, key: &str) {
        if let Err(e) = self
            .notifications
            .record_notification(key, &NotificationWrite::Release)
            .await
        {
            tracing::warn!(key = %key, error = %e, "cannot release the Slack message's lease");
        }
    }

    /// Whether approval `key`'s Slack message is kept in line by notices
    /// in the outbox (it paused with a Slack route stored).
    async fn outbox_drives(&self, key: &str) -> bool {
        matches!(self.store.routes_of(key).await, Ok(Some(routes)) if routes.slack.is_some())
    }

    /// The record while it is pending and unexpired.
    async fn still_pending(&self, key: &str) -> Option<ApprovalRecord> {
        match self.store.get_approval(key).await {
            Ok(Some(r))
                if r.status == ApprovalStatus::Pending && !r.is_expired_at(self.clock.now()) =>
            {
                Some(r)
            }
            Ok(_) => None,
            Err(e) => {
                tracing::warn!(key = %key, error = %e, "cannot read the approval for its Slack message");
                None
            }
        }
    }

    /// After a failed call: record it, then either wait and return `Ok`
    /// (retry, still holding the lease) or hold the message for the repair
    /// sweep and return the failure to answer with.
    async fn retry_or_hold(
        &self,
        key: &str,
        what: &str,
        error: &SlackError,
        retries: Retries,
        failures: u32,
        earlier_attempts: u32,
    ) -> Result<(), Progress> {
        let now = self.clock.now();
        let delay = match retries {
            Retries::Backoff => retry_delay(failures, error),
            Retries::Once | Retries::Outbox => None,
        };
        let (hold_until, retry) = match (delay, retries) {
            (Some(delay), _) => (crate::time::add(now, delay + LEASE_MARGIN), Some(delay)),
            (None, Retries::Outbox) => (now, None),
            // Given up here: a message whose changes are notices in the
            // outbox is released for them, whose backoff decides when it
            // is tried again; an older one (paused before the outbox) is
            // held for the repair sweep.
            (None, _) if self.outbox_drives(key).await => (now, None),
            (None, _) => (hold_after(now, earlier_attempts + failures, error), None),
        };
        let write = NotificationWrite::Failed {
            // Slack's answer is stored and served: redact what it may echo.
            error: crate::secrets::known().text(&error.to_string()),
            hold_until,
        };
        if let Err(e) = self.notifications.record_notification(key, &write).await {
            tracing::warn!(key = %key, error = %e, "cannot record a failed Slack call");
        }
        match retry {
            Some(delay) => {
                tracing::warn!(key = %key, error = %error, retry_in = ?delay, "cannot {what} the Slack message; will retry");
                tokio::time::sleep(delay).await;
                Ok(())
            }
            None => {
                tracing::warn!(key = %key, error = %error, next_try = %crate::time::format_utc(hold_until), "cannot {what} the Slack message; the repair sweep tries again later");
                Err(Progress::Failed {
                    transient: error.is_transient(),
                })
            }
        }
    }
}

/// The wait before retrying a live post or edit after its `failures`-th
/// failure, or `None` when it is left to the repair sweep (a lasting error,
/// or the retries are used up).
fn retry_delay(failures: u32, error: &SlackError) -> Option<Duration> {
    if !error.is_transient() || failures > RETRIES {
        return None;
    }
    let d = Backoff::new(RETRY_BASE, RETRY_CAP).wait_after(failures);
    // Slack's Retry-After wins when it asks for longer.
    Some(error.retry_after().map_or(d, |wait| wait.max(d)))
}

/// How long the repair sweep leaves a failing message alone: doubling with
/// every attempt, at most an hour; a configuration problem (bad token,
/// unknown channel) waits longer from the start, since retrying cannot fix it.
fn hold_after(now: DateTime<Utc>, attempts: u32, error: &SlackError) -> DateTime<Utc> {
    let base = if error.is_transient() { 30 } else { 600 };
    let seconds = base * 2u64.saturating_pow(attempts.min(12).saturating_sub(1));
    crate::time::add(now, Duration::from_secs(seconds).min(MAX_HOLD))
}

/// Resolve one `${NAME}` field of the Slack settings. The error names the
/// field and the variable, never a value.
fn resolve(field: &str, written: &str) -> Result<String, SlackError> {
    let value = CallSecrets::from_env().literal(written).map_err(|e| {
        SlackError::Config(format!("approvals.notify.slack.{field}: {}", e.message))
    })?;
    if value.trim().is_empty() {
        return Err(SlackError::Config(format!(
            "approvals.notify.slack.{field} resolves to an empty value"
        )));
    }
    Ok(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn live_retries_are_jittered_bounded_and_honour_retry_after() {
        let outage = SlackError::Status {
            method: "chat.postMessage",
            status: 503,
        };
        let ceilings = Backoff::new(RETRY_BASE, RETRY_CAP);
        for failures in 1..=RETRIES {
            for _ in 0..50 {
                let d = retry_delay(failures, &outage).expect("retried");
                assert!(d <= ceilings.ceiling(failures), "{d:?} after {failures}");
            }
        }
        assert_eq!(retry_delay(RETRIES + 1, &outage), None, "then the sweep");
        let limited = SlackError::RateLimited {
            method: "chat.update",
            retry_after: Some(Duration::from_secs(300)),
        };
        assert_eq!(retry_delay(1, &limited), Some(Duration::from_secs(300)));
        let refused = SlackError::Api {
            method: "chat.postMessage",
            error: "invalid_auth".into(),
        };
        assert_eq!(
            retry_delay(1, &refused),
            None,
            "a lasting error waits for the sweep"
        );
    }
}
