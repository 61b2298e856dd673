//! The outbox of notices (DESIGN §14), as a store keeps it: rows written
//! by the change they tell of (see [`crate::domain::notices`]), and what the
//! delivery workers and operators do with them.
//!
//! A worker takes due notices with a lease (one conditional write per
//! notice: one sender across processes), sends each, and records what
//! came of it under the same lease. A notice whose lease ran out (its
//! worker died mid-send) is due again: delivery is at least once, and
//! every delivery of a notice carries its one id.
//!
//! Workers label each notice with its lane (the endpoint it goes to, see
//! `notify::lanes`) and lease by lanes: at most a lane's share of one
//! endpoint's notices is leased at once, counted over every worker's live
//! leases, so a hanging endpoint holds only its own notices.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use serde::Serialize;

use super::StoreResult;
use crate::domain::events::Event;
use crate::domain::notices::{Notice, NoticeChannel, NoticeRoutes, NoticeStatus};
use crate::domain::pending_approval::ApprovalRecord;

/// The notices `event` calls for on `record` to `routes`, each with a
/// fresh id: what every store writes in the change's transaction.
pub(crate) fn notices_of(
    record: &ApprovalRecord,
    routes: &NoticeRoutes,
    event: &Event,
) -> Vec<Notice> {
    crate::domain::notices::notices_for(record, routes, event, &mut new_notice_id)
}

/// A fresh notice id: a UUID v7, so ids grow with time. The id is the
/// outbox's primary key and delivered notices are kept, so the table only
/// grows; a time-ordered id puts each new row at the b-tree's end, in the
/// page the last insert touched, where a random one (v4) would dirty a
/// page at a random place in an ever larger file with every notice.
pub fn new_notice_id() -> String {
    uuid::Uuid::now_v7().to_string()
}

/// A notice as the outbox holds it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct OutboxNotice {
    #[serde(flatten)]
    pub notice: Notice,
    pub status: NoticeStatus,
    /// Sends tried so far.
    pub attempts: u32,
    /// When it is due (pending, failed); when it was last due otherwise.
    pub next_at: DateTime<Utc>,
    /// The last failure, for operators: never a secret or a URL.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
    /// When its retry window opened: the lease of its first attempt (after
    /// its creation, or after an operator's retry); until that lease, its
    /// creation or the retry.
    pub window_from: DateTime<Utc>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sent_at: Option<DateTime<Utc>>,
}

/// What a worker holding a notice's lease records: each releases it.
#[derive(Debug, Clone, PartialEq)]
pub enum NoticeWrite {
    Sent {
        at: DateTime<Utc>,
    },
    /// Try again at `next_at`.
    Failed {
        error: String,
        next_at: DateTime<Utc>,
    },
    /// Given up: the retry window closed, or the receiver refused for good.
    Dead {
        error: String,
        at: DateTime<Utc>,
    },
    /// Not tried: its lane is held until `next_at` (its receiver said when
    /// to come back, see `notify::hold`). Due again then, with its status,
    /// attempts and last error as they were; a pending notice stays
    /// pending, so its retry window opens at the lease that sends it.
    ///
    /// Why a write rather than held lanes passed to the lease: the lease
    /// queries stay as they are (no list of labels bound into both
    /// dialects' SQL, nor into the cheap probe before SQLite's write
    /// lock), and a notice the worker leased just before its lane was
    /// held (a batch in flight) needs releasing this way anyway.
    Postponed {
        next_at: DateTime<Utc>,
    },
}

impl NoticeWrite {
    /// A write that did not deliver: the status it leaves, the error and
    /// when the notice is next due (a dead one: when it died). `None` for
    /// [`NoticeWrite::Sent`]. Both dialects record the two with one
    /// statement.
    pub(crate) fn undelivered(&self) -> Option<(NoticeStatus, &str, DateTime<Utc>)> {
        match self {
            NoticeWrite::Sent { .. } | NoticeWrite::Postponed { .. } => None,
            NoticeWrite::Failed { error, next_at } => Some((NoticeStatus::Failed, error, *next_at)),
            NoticeWrite::Dead { error, at } => Some((NoticeStatus::Dead, error, *at)),
        }
    }
}

/// Which notices to list.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct NoticeQuery {
    /// Only these statuses (empty: all).
    pub statuses: Vec<NoticeStatus>,
    /// Only this approval's.
    pub key: Option<String>,
    pub channel: Option<NoticeChannel>,
    /// At most this many, newest first (at least 1; capped by the store at
    /// [`MAX_NOTICE_PAGE`]).
    pub limit: usize,
    /// Only notices created before this one (the last of a previous page):
    /// `(created_at, id)`.
    pub before: Option<(DateTime<Utc>, String)>,
}

/// The most notices one list returns.
pub const MAX_NOTICE_PAGE: usize = 500;

/// Which notices an operator sends again.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RetryNotices {
    /// This one, if it is failed or dead.
    One(String),
    /// Every dead notice.
    AllDead,
}

/// The outbox at a glance, for metrics and health.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct OutboxStats {
    pub pending: u64,
    pub failed: u64,
    pub dead: u64,
    pub sent: u64,
    /// When the oldest notice still to deliver (pending or failed) was
    /// created.
    pub oldest_undelivered: Option<DateTime<Utc>>,
}

/// How many notices workers send at once (DESIGN §14, lanes): at most
/// `per_lane` of one lane across every worker sharing the store, and at
/// most `total` by the worker that leases.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LaneLimits {
    pub per_lane: usize,
    pub total: usize,
}

/// A notice a worker has not labelled with its lane yet: what it needs to
/// work the lane out (the route is read from the approval's routes).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnlabelledNotice {
    pub id: String,
    pub key: String,
    pub channel: NoticeChannel,
    /// Where it goes, as written (see [`Notice::target`]).
    pub target: String,
}

/// One lane of the outbox at a glance: the notices still to deliver to
/// one endpoint. `endpoint` is the lane's label (never a path, a query or
/// a credential).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LaneStats {
    pub channel: NoticeChannel,
    pub endpoint: String,
    /// Due and not leased: waiting for a free slot of the lane.
    pub waiting: u64,
    /// Leased by a worker now (every worker sharing the store).
    pub in_flight: u64,
    /// Pending or failed notices whose last attempt failed.
    pub failing: u64,
    /// The most attempts of a notice still to deliver.
    pub most_attempts: u32,
    /// Since when the longest-waiting due, unleased notice has been due.
    pub oldest_waiting: Option<DateTime<Utc>>,
}

impl LaneStats {
    /// What the lane is doing, worst first: `failing` (a notice's last
    /// attempt failed: the endpoint refuses or does not answer), `queued`
    /// (due notices wait for a slot: every slot is taken, by a burst or
    /// by sends that hang), `sending`, or `scheduled` (only notices due
    /// later).
    pub fn state(&self) -> &'static str {
        if self.failing > 0 {
            "failing"
        } else if self.waiting > 0 {
            "queued"
        } else if self.in_flight > 0 {
            "sending"
        } else {
            "scheduled"
        }
    }
}

/// A webhook endpoint that answered 410 Gone.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DisabledEndpoint {
    /// The URL as written (normally a `${NAME}` reference).
    pub endpoint: String,
    pub disabled_at: DateTime<Utc>,
    pub reason: String,
}

/// The outbox: the notices every change to an approval writes in its own
/// transaction (a store writes them itself, from the routes stored with
/// the pause), their delivery and their operation.
/// A lease's condition on a notice `d` (both dialects): a Slack notice
/// waits while an earlier Slack notice of its approval is still to send
/// (pending or failed), so one approval's message is posted, then changed,
/// by one worker at a time and in order, with no lease of its own. Other
/// channels' notices are independent calls and go as they are due.
pub(crate) const SLACK_IN_ORDER: &str = "(d.channel <> 'slack' OR NOT EXISTS (\
     SELECT 1 FROM tollgate_outbox e \
     WHERE e.key = d.key AND e.channel = 'slack' AND e.status IN ('pending', 'failed') \
       AND (e.created_at < d.created_at OR (e.created_at = d.created_at AND e.id < d.id))))";

#[async_trait]
pub trait Outbox: Send + Sync + 'static {
    /// Lease up to `limit` due notices (pending or failed, `next_at <=
    /// now`, no live lease; a Slack notice only once the earlier ones of
    /// its approval are sent or dead, see [`SLACK_IN_ORDER`]) to `owner`
    /// until `until`, oldest due first.
    /// One conditional write each: a notice leased by one worker is not
    /// leased by another until its lease runs out. A pending notice's
    /// retry window opens at its lease (see [`OutboxNotice::window_from`]).
    async fn lease_notices(
        &self,
        owner: &str,
        now: DateTime<Utc>,
        until: DateTime<Utc>,
        limit: usize,
    ) -> StoreResult<Vec<OutboxNotice>>;

    /// Record what came of a send, if `owner` still holds the notice's
    /// lease; releases it. `false` when it does not (its lease ran out and
    /// another worker took it): nothing is written.
    async fn settle_notice(&self, id: &str, owner: &str, write: &NoticeWrite) -> StoreResult<bool>;

    /// Notices newest first (see [`NoticeQuery`]).
    async fn list_notices(&self, query: &NoticeQuery) -> StoreResult<Vec<OutboxNotice>>;

    async fn get_notice(&self, id: &str) -> StoreResult<Option<OutboxNotice>>;

    /// Where approval `key`'s notices go, as stored with its pause: what a
    /// worker reads to send one (a webhook's secret reference, a mail's
    /// server). `None` for an unknown key or a gate that notifies nobody.
    async fn routes_of(&self, key: &str) -> StoreResult<Option<NoticeRoutes>>;

    /// Make failed or dead notices due now, with a fresh retry window, and
    /// enable again the webhook endpoints they go to. Returns how many.
    async fn retry_notices(&self, which: &RetryNotices, now: DateTime<Utc>) -> StoreResult<u64>;

    async fn outbox_stats(&self) -> StoreResult<OutboxStats>;

    /// Stop sending to a webhook endpoint (it answered 410 Gone).
    async fn disable_endpoint(&self, endpoint: &DisabledEndpoint) -> StoreResult<()>;

    async fn disabled_endpoints(&self) -> StoreResult<Vec<DisabledEndpoint>>;

    /// Up to `limit` pending or failed notices not labelled with their
    /// lane yet, oldest first. A store that keeps no lanes has none.
    async fn unlabelled_notices(&self, limit: usize) -> StoreResult<Vec<UnlabelledNotice>> {
        let _ = limit;
        Ok(Vec::new())
    }

    /// Label notices with their lanes: `(id, lane)` each.
    async fn label_notices(&self, lanes: &[(String, String)]) -> StoreResult<()> {
        let _ = lanes;
        Ok(())
    }

    /// [`Outbox::lease_notices`] by lanes: only labelled notices, at most
    /// `limits.total`, and of each lane (channel and label) no more than
    /// `limits.per_lane` minus the notices of that lane any worker holds a
    /// live lease on; oldest due first within a lane. A pending notice's
    /// retry window opens at this lease: when a slot of its endpoint was
    /// first free for it, not when it was queued. A store that keeps no
    /// lanes leases as [`Outbox::lease_notices`] does.
    async fn lease_lane_notices(
        &self,
        owner: &str,
        now: DateTime<Utc>,
        until: DateTime<Utc>,
        limits: LaneLimits,
    ) -> StoreResult<Vec<OutboxNotice>> {
        self.lease_notices(owner, now, until, limits.total).await
    }

    /// Every lane with notices still to deliver, by channel and label.
    async fn lane_stats(&self, now: DateTime<Utc>) -> StoreResult<Vec<LaneStats>> {
        let _ = now;
        Ok(Vec::new())
    }
}

#[cfg(test)]
mod tests {
    use super::new_notice_id;

    #[test]
    fn notice_ids_sort_in_the_order_they_were_made() {
        let ids: Vec<String> = (0..1000).map(|_| new_notice_id()).collect();
        let mut sorted = ids.clone();
        sorted.sort();
        sorted.dedup();
        assert_eq!(sorted, ids, "ids are distinct and already in order");
        let parsed = uuid::Uuid::parse_str(&ids[0]).expect("a UUID");
        assert_eq!(parsed.get_version_num(), 7);
    }
}
