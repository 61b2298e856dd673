//! The PostgreSQL store: approvals: the claim, the cancel, the expiry sweep, and the records as decisions read them.

use super::*;
use crate::store::{EXPIRE_BATCH, Nudged};

#[async_trait]
impl Approvals for PostgresStore {
    async fn claim(&self, claim: &Claim) -> StoreResult<Claimed> {
        let result: StoreResult<_> =
            async { in_transaction!(self, |tx| ops::claim(&tx, claim).await) }.await;
        self.context(&format!("deciding approval {}", claim.key), result)
    }

    async fn move_approval(&self, to_move: &ApprovalMove) -> StoreResult<Moved> {
        let result: StoreResult<_> =
            async { in_transaction!(self, |tx| ops::move_approval(&tx, to_move).await) }.await;
        self.context(&format!("moving approval {}", to_move.key), result)
    }

    async fn get_approval(&self, key: &str) -> StoreResult<Option<ApprovalRecord>> {
        let read = async { ops::get_approval(&self.client().await?, key).await }.await;
        self.context(&format!("reading approval {key}"), read)
    }

    async fn approvals_by_key(&self, keys: &[String]) -> StoreResult<Vec<ApprovalRecord>> {
        if keys.is_empty() {
            return Ok(Vec::new());
        }
        ops::approvals_by_key(&self.client().await?, keys).await
    }

    async fn pending_for_run(
        &self,
        run_id: &str,
        now: DateTime<Utc>,
    ) -> StoreResult<Option<ApprovalRecord>> {
        let read = async { ops::pending_for_run(&self.client().await?, run_id, &now).await }.await;
        self.context(
            &format!("reading the pending approval of run {run_id}"),
            read,
        )
    }

    async fn latest_approval_key(&self, run_id: &str) -> StoreResult<Option<String>> {
        let read = async { ops::latest_approval_key(&self.client().await?, run_id).await }.await;
        self.context(
            &format!("finding the latest approval of run {run_id}"),
            read,
        )
    }

    async fn expire_due(&self, now: DateTime<Utc>) -> StoreResult<Vec<ApprovalRecord>> {
        // Every CLI command sweeps first; a read spares them a write
        // transaction when nothing is due.
        let due = async { ops::any_due(&self.client().await?, &now).await }.await;
        if !self.context("looking for overdue approvals", due)? {
            return Ok(Vec::new());
        }
        // In batches, each its own transaction: a few statements per batch,
        // and no transaction that holds a whole pass's row locks.
        let due = async { ops::due_keys(&self.client().await?, &now).await }.await;
        let due = self.context("looking for overdue approvals", due)?;
        let mut expired = Vec::new();
        for keys in due.chunks(EXPIRE_BATCH) {
            let result: StoreResult<_> =
                async { in_transaction!(self, |tx| ops::expire_batch(&tx, &now, keys).await) }
                    .await;
            let batch = self.context("expiring overdue approvals", result)?;
            report_skipped(&self.description, "approval", &batch.unreadable);
            expired.extend(batch.expired);
        }
        // The sweep reports oldest first, across its batches too.
        expired.sort_by(|a, b| (a.created_at, &a.key).cmp(&(b.created_at, &b.key)));
        Ok(expired)
    }

    async fn due_timeouts(
        &self,
        now: DateTime<Utc>,
        limit: usize,
    ) -> StoreResult<Vec<ApprovalRecord>> {
        let read = async { ops::due_timeouts(&self.client().await?, &now, limit).await }.await;
        let (due, unreadable) = self.context("looking for gates whose time ran out", read)?;
        report_skipped(&self.description, "approval", &unreadable);
        Ok(due)
    }

    async fn nudge_due(&self, now: DateTime<Utc>, limit: usize) -> StoreResult<Vec<Nudged>> {
        let result: StoreResult<_> =
            async { in_transaction!(self, |tx| ops::nudge_due(&tx, &now, limit).await) }.await;
        let (nudged, unreadable) = self.context("sending due reminders and escalations", result)?;
        report_skipped(&self.description, "approval", &unreadable);
        Ok(nudged)
    }

    async fn cancel_run(&self, cancel: &CancelRun) -> StoreResult<Cancelled> {
        let result: StoreResult<_> =
            async { in_transaction!(self, |tx| ops::cancel_run(&tx, cancel).await) }.await;
        self.context(&format!("cancelling run {}", cancel.run_id), result)
    }
}
