//! One [`NoticeSender`] per channel (issue 43): how the outbox's worker
//! sends one notice on a webhook, a mail, or the approval's Slack message.
//! The worker owns what is the same for every channel (leases, lanes,
//! retry windows, disabled endpoints, metrics) and asks the channel's
//! sender for one [`Attempt`]; a sender knows nothing of retries.

use std::future::Future;
use std::sync::Arc;

use crate::domain::links::LinkSigner;
use crate::domain::notices::{NoticeBody, NoticeRoutes};
use crate::notify::delivery::Attempt;
use crate::notify::email::EmailSender;
use crate::notify::slack::{Progress, SlackNotifier};
use crate::notify::webhook::WebhookSender;
use crate::store::OutboxNotice;
use crate::support::time::SharedClock;

/// Sends one notice on one channel.
pub trait NoticeSender: Send + Sync {
    /// One attempt at `notice`, with the routes stored with its approval's
    /// pause (where it goes, as written).
    fn send(
        &self,
        notice: &OutboxNotice,
        routes: &NoticeRoutes,
    ) -> impl Future<Output = Attempt> + Send;
}

/// Signed outbound webhooks (Standard Webhooks).
pub struct WebhookNotices {
    pub sender: WebhookSender,
    pub links: Option<LinkSigner>,
    pub clock: SharedClock,
}

impl NoticeSender for WebhookNotices {
    /// In the body only an unbound link (a webhook has no single viewer),
    /// when unbound links are on and `link` may decide.
    async fn send(&self, notice: &OutboxNotice, routes: &NoticeRoutes) -> Attempt {
        let n = &notice.notice;
        let Some(route) = routes.webhooks.iter().find(|r| r.url == n.target) else {
            return Attempt::Gone {
                reason: format!(
                    "no webhook {} is configured for approval {} any more",
                    n.target, n.key
                ),
            };
        };
        let approvers = routes.email.as_ref().and_then(|e| e.approvers.as_deref());
        let link = self
            .links
            .as_ref()
            .and_then(|links| links.unattended_link(&n.key, approvers));
        let body = match serialize(&n.body, link) {
            Ok(body) => body,
            Err(error) => return Attempt::Gone { reason: error },
        };
        self.sender
            .deliver(route, &n.id, &body, self.clock.now())
            .await
    }
}

/// Mail to one decider.
pub struct EmailNotices {
    pub sender: EmailSender,
    pub links: Option<LinkSigner>,
}

impl NoticeSender for EmailNotices {
    /// With a link bound to the recipient while the approval waits (when
    /// links are on and have a public URL: a path alone is no use in a
    /// mail).
    async fn send(&self, notice: &OutboxNotice, routes: &NoticeRoutes) -> Attempt {
        let n = &notice.notice;
        let Some(route) = &routes.email else {
            return Attempt::Gone {
                reason: format!("no mail is configured for approval {} any more", n.key),
            };
        };
        let link = self
            .links
            .as_ref()
            .filter(|links| {
                links.public_url().is_some()
                    && n.body.data.status
                        == crate::domain::pending_approval::ApprovalStatus::Pending
            })
            .map(|links| links.url(&n.key, Some(&n.target)));
        self.sender
            .deliver(route, &n.target, &n.body, &n.id, link.as_deref())
            .await
    }
}

/// The approval's Slack message, through the served spec's notifier.
pub struct SlackNotices {
    pub slack: Option<Arc<SlackNotifier>>,
}

impl NoticeSender for SlackNotices {
    /// The message made to show what the store holds now (see
    /// [`SlackNotifier::sync`]). The outbox hands out one approval's Slack
    /// notices one at a time, in order, so no other worker is changing
    /// this message meanwhile. Slack's `Retry-After` (a 429) is when the
    /// notice is tried again, at the earliest.
    async fn send(&self, notice: &OutboxNotice, _routes: &NoticeRoutes) -> Attempt {
        let Some(slack) = &self.slack else {
            return Attempt::Misconfigured {
                error: "this server has no approvals.notify.slack: another server sends it".into(),
            };
        };
        let n = &notice.notice;
        match slack.sync(&n.key, n.event).await {
            Progress::Done | Progress::Skipped => Attempt::Sent,
            Progress::Failed { error, retry_after } => Attempt::Failed { error, retry_after },
        }
    }
}

/// The body as sent: the stored body with the link of this send.
fn serialize(body: &NoticeBody, link: Option<String>) -> Result<Vec<u8>, String> {
    let mut body = body.clone();
    body.data.link = link;
    serde_json::to_vec(&body).map_err(|e| format!("cannot encode the notice: {e}"))
}
