//! The SQLite store: the outbox (leases and settles in the writer's
//! transaction, so one notice has one sender at a time).

use super::*;
use crate::store::{
    DisabledEndpoint, LaneLimits, LaneStats, NoticeQuery, NoticeWrite, Outbox, OutboxNotice,
    OutboxStats, RetryNotices, UnlabelledNotice,
};

#[async_trait]
impl Outbox for SqliteStore {
    async fn lease_notices(
        &self,
        owner: &str,
        now: DateTime<Utc>,
        until: DateTime<Utc>,
        limit: usize,
    ) -> StoreResult<Vec<OutboxNotice>> {
        crate::store::check_lease_end(until)?;
        let (owner, now, until) = (owner.to_string(), format_utc(now), format_utc(until));
        let probe = now.clone();
        if !self
            .read("looking for due notices", move |conn| {
                ops::any_due_notice(conn, &probe)
            })
            .await?
        {
            return Ok(Vec::new());
        }
        self.write("leasing due notices", move |conn| {
            ops::lease_notices(conn, &owner, &now, &until, limit)
        })
        .await
    }

    async fn settle_notice(&self, id: &str, owner: &str, write: &NoticeWrite) -> StoreResult<bool> {
        let (id, owner, write) = (id.to_string(), owner.to_string(), write.clone());
        self.write(
            format!("recording the delivery of notice {id}"),
            move |conn| ops::settle_notice(conn, &id, &owner, &write),
        )
        .await
    }

    async fn list_notices(&self, query: &NoticeQuery) -> StoreResult<Vec<OutboxNotice>> {
        let query = query.clone();
        self.read("listing notices", move |conn| {
            ops::list_notices(conn, &query)
        })
        .await
    }

    async fn get_notice(&self, id: &str) -> StoreResult<Option<OutboxNotice>> {
        let id = id.to_string();
        self.read(format!("reading notice {id}"), move |conn| {
            ops::get_notice(conn, &id)
        })
        .await
    }

    async fn routes_of(
        &self,
        key: &str,
    ) -> StoreResult<Option<crate::domain::notices::NoticeRoutes>> {
        let key = key.to_string();
        self.read(
            format!("reading where approval {key}'s notices go"),
            move |conn| ops::routes_of(conn, &key),
        )
        .await
    }

    async fn retry_notices(&self, which: &RetryNotices, now: DateTime<Utc>) -> StoreResult<u64> {
        let (which, now) = (which.clone(), format_utc(now));
        self.write("retrying notices", move |conn| {
            ops::retry_notices(conn, &which, &now)
        })
        .await
    }

    async fn outbox_stats(&self) -> StoreResult<OutboxStats> {
        self.read("counting notices", ops::outbox_stats).await
    }

    async fn disable_endpoint(&self, endpoint: &DisabledEndpoint) -> StoreResult<()> {
        let endpoint = endpoint.clone();
        self.write("disabling a webhook endpoint", move |conn| {
            ops::disable_endpoint(conn, &endpoint)
        })
        .await
    }

    async fn disabled_endpoints(&self) -> StoreResult<Vec<DisabledEndpoint>> {
        self.read(
            "listing disabled webhook endpoints",
            ops::disabled_endpoints,
        )
        .await
    }

    async fn unlabelled_notices(&self, limit: usize) -> StoreResult<Vec<UnlabelledNotice>> {
        self.read("looking for notices without a lane", move |conn| {
            ops::unlabelled_notices(conn, limit)
        })
        .await
    }

    async fn label_notices(&self, lanes: &[(String, String)]) -> StoreResult<()> {
        if lanes.is_empty() {
            return Ok(());
        }
        let lanes = lanes.to_vec();
        self.write("labelling notices with their lanes", move |conn| {
            ops::label_notices(conn, &lanes)
        })
        .await
    }

    async fn lease_lane_notices(
        &self,
        owner: &str,
        now: DateTime<Utc>,
        until: DateTime<Utc>,
        limits: LaneLimits,
    ) -> StoreResult<Vec<OutboxNotice>> {
        crate::store::check_lease_end(until)?;
        if limits.total == 0 || limits.per_lane == 0 {
            return Ok(Vec::new());
        }
        let (owner, now, until) = (owner.to_string(), format_utc(now), format_utc(until));
        let probe = now.clone();
        // A cheap read first: an idle worker, or one whose lanes are all
        // full, polls often and should not take the write lock for nothing.
        if !self
            .read("looking for due notices", move |conn| {
                ops::any_leasable_notice(conn, &probe, limits.per_lane)
            })
            .await?
        {
            return Ok(Vec::new());
        }
        self.write("leasing due notices", move |conn| {
            ops::lease_lane_notices(conn, &owner, &now, &until, limits)
        })
        .await
    }

    async fn lane_stats(&self, now: DateTime<Utc>) -> StoreResult<Vec<LaneStats>> {
        let now = format_utc(now);
        self.read("counting the notices of each lane", move |conn| {
            ops::lane_stats(conn, &now)
        })
        .await
    }
}
