//! Slack approvals (`approvals.notify.slack`): every pause is announced in
//! a channel with Approve and Reject buttons; a click decides through the
//! same claim as every other decision (`POST /slack/actions`, see
//! `server::routes::slack`); and once an approval is settled, however and
//! wherever, the message is edited to say so and its buttons disappear.
//! On a gate with rules (DESIGN §13) the message shows each rule's progress
//! and who voted, and is edited again after every vote: each edit renders
//! the ledger as the store holds it then, never the event, so a repeated
//! or late edit cannot show older progress over newer.
//!
//! One trigger (issue 43). Every pause, vote, escalation, decision, expiry
//! and cancel writes a Slack notice into the outbox in the transaction of
//! the change itself, whichever process made it (a server, the CLI,
//! `tollgate run --persist`); the outbox's worker sends each through
//! [`SlackNotifier::sync`], which brings the message in line with the
//! store. A failed call is retried by the notice's own backoff (Slack's
//! `Retry-After` included) and, past its retry window, is dead for an
//! operator to retry: nothing else posts or edits a message.
//!
//! Durability. The pause is stored before anything is posted, so a Slack
//! outage never loses or blocks one. Where each message is (channel, ts) is
//! stored with the approval (`tollgate_notifications`), because Slack's
//! `response_url` expires after 30 minutes and a click may come days later,
//! after a redeploy.
//!
//! One call per message at a time: the outbox hands out an approval's
//! Slack notices one at a time and in order (`store::outbox::SLACK_IN_ORDER`),
//! so two workers never post or edit one message at once, and the message
//! needs no lease of its own.
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

use crate::domain::links::LinkSigner;
use crate::domain::pending_approval::{ApprovalRecord, ApprovalStatus};
use crate::domain::spec::{SlackNotifySpec, Spec};
use crate::engine::tools::template::CallSecrets;
use crate::store::{NotificationWrite, SharedNotifications, SharedStore};
use crate::support::backoff::Backoff;
use crate::support::time::SharedClock;

pub use api::{SlackApi, SlackError};

/// What became of one post or edit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Progress {
    Done,
    /// Nothing to do.
    Skipped,
    /// Failed for now: `error` says what failed, for the notice's
    /// `last_error` (stored and served: never a credential); `retry_after`
    /// when Slack said when to come back (a 429).
    Failed {
        error: String,
        retry_after: Option<Duration>,
    },
}

/// Posts and edits the Slack messages of one agent.
pub struct SlackNotifier {
    config: SlackNotifySpec,
    /// Approvals are read here; the messages kept in `notifications`.
    store: SharedStore,
    notifications: SharedNotifications,
    api: SlackApi,
    /// "Still pending" and the times recorded are this clock's.
    clock: SharedClock,
    /// Signs the "Open in browser" link of each message, when links are
    /// on and have a public URL (Slack opens only absolute URLs).
    links: Option<LinkSigner>,
    /// `approvals.approvers`: whether `link` may decide (an unbound link).
    approvers: Option<Vec<String>>,
    /// How many votes each open message of a gate with rules was last
    /// shown with by this process, by key: a repeated vote notice whose
    /// ledger this process showed already makes no call.
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
        SlackNotifier::for_spec_with_clock(spec, store, crate::support::time::system())
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
                crate::domain::spec::MissingFeature {
                    feature: crate::domain::spec::Feature::HttpClient,
                    at: "approvals.notify.slack".to_string(),
                }
                .to_string(),
            ))
        }
        #[cfg(feature = "http-client")]
        {
            let http =
                crate::engine::tools::http::client().map_err(|e| SlackError::Config(e.message))?;
            let api = SlackApi::new(http, &SlackApi::base_from_env());
            Ok(Some(Arc::new(SlackNotifier {
                config,
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
    pub async fn announce(&self, key: &str) -> Progress {
        match self.message(key).await {
            Ok(Some(message)) if message.ts.is_some() => return Progress::Skipped,
            Ok(_) => {}
            Err(failed) => return failed,
        }
        {
            let Some(record) = self.still_pending(key).await else {
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
                        // Posted but not remembered: the notice's retry
                        // posts again. Say so.
                        tracing::error!(key = %key, error = %e, "Slack message posted but not stored; it may be posted twice");
                        return Progress::Failed {
                            error: format!(
                                "the message was posted but where it is was not stored (it may be posted twice): {e}"
                            ),
                            retry_after: None,
                        };
                    }
                    self.mark_shown(&record, votes.len());
                    tracing::info!(run_id = %record.run_id, key = %key, channel = %posted.channel, ts = %posted.ts, "Slack message posted");
                    // A decision may have landed while the post was on its
                    // way; its own edit found no message. Show it now.
                    match self.still_pending(key).await {
                        None => {
                            self.settle(key).await;
                        }
                        // So may a vote, whose edit found no message either.
                        Some(now) if self.ledger(&now).await.len() != votes.len() => {
                            self.show_votes(key).await;
                        }
                        Some(_) => {}
                    }
                    Progress::Done
                }
                Err(e) => self.failed(key, "post", &e),
            }
        }
    }

    /// Edit the message of a settled (decided or expired) approval to show
    /// how it was settled, removing the buttons.
    pub async fn settle(&self, key: &str) -> Progress {
        // Never posted: nothing to edit (and nothing will be posted for an
        // approval that is no longer pending).
        let (channel, ts) = match self.open_message(key).await {
            Ok(Some(open)) => open,
            Ok(None) => return Progress::Skipped,
            Err(failed) => return failed,
        };
        {
            let record = match self.store.get_approval(key).await {
                Ok(Some(record)) if record.status != ApprovalStatus::Pending => record,
                Ok(_) => return Progress::Skipped,
                Err(e) => {
                    tracing::warn!(key = %key, error = %e, "cannot read the approval to update its Slack message");
                    return Progress::Failed {
                        error: format!("cannot read the approval: {e}"),
                        retry_after: None,
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
                    Progress::Done
                }
                Err(e) => self.failed(key, "update", &e),
            }
        }
    }

    /// Edit the message of a pending gate with rules to show its votes as
    /// the store holds them now (after a vote that did not settle it).
    /// Renders from the store, never from the event: repeating it, or
    /// running it late, shows the newest progress.
    pub async fn show_votes(&self, key: &str) -> Progress {
        // Not posted yet: the post reads the ledger itself.
        let (channel, ts) = match self.open_message(key).await {
            Ok(Some(open)) => open,
            Ok(None) => return Progress::Skipped,
            Err(failed) => return failed,
        };
        loop {
            let Some(record) = self.still_pending(key).await else {
                // Settled meanwhile: that edit replaces this one.
                return self.settle(key).await;
            };
            let votes = self.ledger(&record).await;
            if record.roster.as_ref().is_none_or(|r| r.rules.is_empty()) {
                // No rules, no progress to show: the message stays as posted.
                self.mark_shown(&record, votes.len());
                return Progress::Skipped;
            }
            if self.shows(key, votes.len()) {
                // This process's last edit already showed this ledger (the
                // ledger only grows, and an approval's edits are made one
                // at a time): a repeated notice of one vote.
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
                    // A vote recorded while this edit was on its way: show
                    // it too (its own notice, next, then finds it shown).
                    if let Some(now) = self.still_pending(key).await
                        && self.ledger(&now).await.len() != votes.len()
                    {
                        continue;
                    }
                    if self.still_pending(key).await.is_none() {
                        self.settle(key).await;
                    }
                    tracing::info!(run_id = %record.run_id, key = %key, votes = votes.len(), "Slack message shows the votes");
                    return Progress::Done;
                }
                Err(e) => return self.failed(key, "update", &e),
            }
        }
    }

    /// The ledger of a gate with a roster, as the store holds it now; none
    /// for a plain gate (its message shows no votes). A read that fails
    /// shows none, logged: the message is still worth posting.
    async fn ledger(&self, record: &ApprovalRecord) -> Vec<crate::domain::policy::Vote> {
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

    /// Bring approval `key`'s message in line with what `event` says
    /// happened, for the outbox's worker (a notice on the Slack channel):
    /// post it, show its votes, or show how it was settled. Each renders
    /// what the store holds now, so a late or repeated notice shows the
    /// newest state, and a post is never made twice (the outbox sends an
    /// approval's notices one at a time, and where the message is is in
    /// the store). A reminder changes nothing the message shows.
    pub async fn sync(&self, key: &str, event: crate::domain::notices::NoticeEvent) -> Progress {
        use crate::domain::notices::NoticeEvent;
        match event {
            NoticeEvent::Requested => self.announce(key).await,
            NoticeEvent::Voted => self.show_votes(key).await,
            NoticeEvent::Escalated => {
                // Same votes, more who may still cast one.
                self.forget_shown(key);
                self.show_votes(key).await
            }
            NoticeEvent::Approved
            | NoticeEvent::Rejected
            | NoticeEvent::Expired
            | NoticeEvent::Cancelled => self.settle(key).await,
            NoticeEvent::Reminded => Progress::Skipped,
        }
    }

    /// Approval `key`'s message as stored, if a row exists; a read that
    /// fails is the notice's failure (tried again by its backoff).
    async fn message(&self, key: &str) -> Result<Option<crate::store::Notification>, Progress> {
        self.notifications.get_notification(key).await.map_err(|e| {
            tracing::warn!(key = %key, error = %e, "cannot read where the Slack message is");
            Progress::Failed {
                error: format!("cannot read where the message is: {e}"),
                retry_after: None,
            }
        })
    }

    /// Where approval `key`'s message is (channel, ts), when it was posted
    /// and does not show an outcome yet: the message an edit may change.
    async fn open_message(&self, key: &str) -> Result<Option<(String, String)>, Progress> {
        Ok(match self.message(key).await? {
            Some(crate::store::Notification {
                channel: Some(channel),
                ts: Some(ts),
                decision_posted_at: None,
                ..
            }) => Some((channel, ts)),
            _ => None,
        })
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

    /// After a failed call: log it, and say what the notice's backoff
    /// needs: whether Slack was the cause, and when Slack asked to be
    /// called again. The notice keeps the count and the last error.
    fn failed(&self, key: &str, what: &str, error: &SlackError) -> Progress {
        tracing::warn!(key = %key, error = %error, "cannot {what} the Slack message; its notice is retried");
        Progress::Failed {
            // Slack's answer is stored and served: redact what it may echo.
            error: crate::support::secrets::known()
                .text(&format!("cannot {what} the message: {error}")),
            retry_after: error.retry_after(),
        }
    }
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
