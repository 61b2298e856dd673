//! The SQLite store: approvals: the claim, the cancel, the expiry sweep, and the records as decisions read them.

use super::*;
use std::time::Instant;

use super::sweep_pace::SweepPace;
use crate::store::Nudged;

#[async_trait]
impl Approvals for SqliteStore {
    async fn claim(&self, claim: &Claim) -> StoreResult<Claimed> {
        let row = ClaimRow::encode(claim)?;
        let claim = claim.clone();
        self.write(format!("deciding approval {}", claim.key), move |conn| {
            ops::claim(conn, &claim, &row)
        })
        .await
    }

    async fn get_approval(&self, key: &str) -> StoreResult<Option<ApprovalRecord>> {
        let key = key.to_string();
        self.read(format!("reading approval {key}"), move |conn| {
            ops::get_approval(conn, &key)
        })
        .await
    }

    async fn pending_for_run(
        &self,
        run_id: &str,
        now: DateTime<Utc>,
    ) -> StoreResult<Option<ApprovalRecord>> {
        let run_id = run_id.to_string();
        let now = format_utc(now);
        self.read(
            format!("reading the pending approval of run {run_id}"),
            move |conn| ops::pending_for_run(conn, &run_id, &now),
        )
        .await
    }

    async fn latest_approval_key(&self, run_id: &str) -> StoreResult<Option<String>> {
        let run_id = run_id.to_string();
        self.read(
            format!("finding the latest approval of run {run_id}"),
            move |conn| ops::latest_approval_key(conn, &run_id),
        )
        .await
    }

    async fn expire_due(&self, now: DateTime<Utc>) -> StoreResult<Vec<ApprovalRecord>> {
        let now = format_utc(now);
        // Every CLI command sweeps first; a read on the reader connection
        // spares them the write lock (and a commit) when nothing is due.
        let probe = now.clone();
        if !self
            .read("looking for overdue approvals", move |conn| {
                ops::any_due(conn, &probe)
            })
            .await?
        {
            return Ok(Vec::new());
        }
        // In batches, each its own write: the one writer commits the
        // decisions that queued meanwhile between two batches, and each
        // batch is sized to take a short while (see `sweep_pace`).
        let mut expired = Vec::new();
        let mut skip = crate::store::UnreadableKeys::default();
        let mut pace = SweepPace::new();
        loop {
            let (now, keys, rows) = (now.clone(), skip.json(), pace.rows());
            let (batch, took) = self
                .write("expiring overdue approvals", move |conn| {
                    let started = Instant::now();
                    let batch = ops::expire_batch(conn, &now, &keys, rows)?;
                    Ok((batch, started.elapsed()))
                })
                .await?;
            pace.record(batch.expired.len() + batch.unreadable.len(), took);
            report_skipped(&self.describe(), "approval", &batch.unreadable);
            let added = skip.add(&batch.unreadable);
            let progressed = added || !batch.expired.is_empty();
            expired.extend(batch.expired);
            if !batch.full || !progressed {
                break;
            }
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
        let now = format_utc(now);
        let (due, unreadable) = self
            .read("looking for gates whose time ran out", move |conn| {
                ops::due_timeouts(conn, &now, limit)
            })
            .await?;
        report_skipped(&self.describe(), "approval", &unreadable);
        Ok(due)
    }

    async fn nudge_due(&self, now: DateTime<Utc>, limit: usize) -> StoreResult<Vec<Nudged>> {
        let (nudged, unreadable) = self
            .write("sending due reminders and escalations", move |conn| {
                ops::nudge_due(conn, now, limit)
            })
            .await?;
        report_skipped(&self.describe(), "approval", &unreadable);
        Ok(nudged)
    }

    async fn move_approval(&self, to_move: &ApprovalMove) -> StoreResult<Moved> {
        let row = MoveRow::encode(to_move)?;
        let to_move = to_move.clone();
        self.write(format!("moving approval {}", to_move.key), move |conn| {
            ops::move_approval(conn, &to_move, &row)
        })
        .await
    }

    async fn cancel_run(&self, cancel: &CancelRun) -> StoreResult<Cancelled> {
        let cancel = cancel.clone();
        self.write(format!("cancelling run {}", cancel.run_id), move |conn| {
            ops::cancel_run(conn, &cancel)
        })
        .await
    }
}
