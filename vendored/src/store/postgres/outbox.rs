//! The PostgreSQL store: the outbox (leases with `FOR UPDATE SKIP LOCKED`,
//! so nodes sharing the database never send one notice at once).

use super::*;
use crate::store::{
    DisabledEndpoint, LaneLimits, LaneStats, NoticeQuery, NoticeWrite, Outbox, OutboxNotice,
    OutboxStats, RetryNotices, UnlabelledNotice,
};

#[async_trait]
impl Outbox for PostgresStore {
    async fn lease_notices(
        &self,
        owner: &str,
        now: DateTime<Utc>,
        until: DateTime<Utc>,
        limit: usize,
    ) -> StoreResult<Vec<OutboxNotice>> {
        let result: StoreResult<_> = async {
            in_transaction!(self, |tx| ops::lease_notices(
                &tx, owner, &now, &until, limit
            )
            .await)
        }
        .await;
        self.context("leasing due notices", result)
    }

    async fn settle_notice(&self, id: &str, owner: &str, write: &NoticeWrite) -> StoreResult<bool> {
        let result: StoreResult<_> =
            async { ops::settle_notice(&self.client().await?, id, owner, write).await }.await;
        self.context(&format!("recording the delivery of notice {id}"), result)
    }

    async fn list_notices(&self, query: &NoticeQuery) -> StoreResult<Vec<OutboxNotice>> {
        let read = async { ops::list_notices(&self.client().await?, query).await }.await;
        self.context("listing notices", read)
    }

    async fn get_notice(&self, id: &str) -> StoreResult<Option<OutboxNotice>> {
        let read = async { ops::get_notice(&self.client().await?, id).await }.await;
        self.context(&format!("reading notice {id}"), read)
    }

    async fn routes_of(
        &self,
        key: &str,
    ) -> StoreResult<Option<crate::domain::notices::NoticeRoutes>> {
        let read = async { ops::routes_of(&self.client().await?, key).await }.await;
        self.context(&format!("reading where approval {key}'s notices go"), read)
    }

    async fn retry_notices(&self, which: &RetryNotices, now: DateTime<Utc>) -> StoreResult<u64> {
        let result: StoreResult<_> =
            async { in_transaction!(self, |tx| ops::retry_notices(&tx, which, &now).await) }.await;
        self.context("retrying notices", result)
    }

    async fn outbox_stats(&self) -> StoreResult<OutboxStats> {
        let read = async { ops::outbox_stats(&self.client().await?).await }.await;
        self.context("counting notices", read)
    }

    async fn disable_endpoint(&self, endpoint: &DisabledEndpoint) -> StoreResult<()> {
        let result: StoreResult<_> =
            async { ops::disable_endpoint(&self.client().await?, endpoint).await }.await;
        self.context("disabling a webhook endpoint", result)
    }

    async fn disabled_endpoints(&self) -> StoreResult<Vec<DisabledEndpoint>> {
        let read = async { ops::disabled_endpoints(&self.client().await?).await }.await;
        self.context("listing disabled webhook endpoints", read)
    }

    async fn unlabelled_notices(&self, limit: usize) -> StoreResult<Vec<UnlabelledNotice>> {
        let read = async { ops::unlabelled_notices(&self.client().await?, limit).await }.await;
        self.context("looking for notices without a lane", read)
    }

    async fn label_notices(&self, lanes: &[(String, String)]) -> StoreResult<()> {
        if lanes.is_empty() {
            return Ok(());
        }
        let result: StoreResult<_> =
            async { ops::label_notices(&self.client().await?, lanes).await }.await;
        self.context("labelling notices with their lanes", result)
    }

    async fn lease_lane_notices(
        &self,
        owner: &str,
        now: DateTime<Utc>,
        until: DateTime<Utc>,
        limits: LaneLimits,
    ) -> StoreResult<Vec<OutboxNotice>> {
        if limits.total == 0 || limits.per_lane == 0 {
            return Ok(Vec::new());
        }
        let result: StoreResult<_> = async {
            in_transaction!(self, |tx| ops::lease_lane_notices(
                &tx, owner, &now, &until, limits
            )
            .await)
        }
        .await;
        self.context("leasing due notices", result)
    }

    async fn lane_stats(&self, now: DateTime<Utc>) -> StoreResult<Vec<LaneStats>> {
        let read = async { ops::lane_stats(&self.client().await?, &now).await }.await;
        self.context("counting the notices of each lane", read)
    }
}
