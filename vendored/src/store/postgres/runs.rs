//! The PostgreSQL store: the run log: the driver's writes (runs, events, journal, pauses, ends, leases).

use super::*;

#[async_trait]
impl RunLog for PostgresStore {
    async fn create_run(&self, run: &RunRecord, events: &[Event]) -> StoreResult<()> {
        check_started(Some(run), events)?;
        let result: StoreResult<_> = async {
            in_transaction!(self, |tx| {
                async {
                    ops::insert_run(&tx, run).await?;
                    ops::insert_events(&tx, &run.id, events).await
                }
                .await
            })
        }
        .await;
        self.context(&format!("storing run {}", run.id), result)
    }

    async fn create_run_once(
        &self,
        once: &KeyClaim,
        run: &RunRecord,
        events: &[Event],
    ) -> StoreResult<bool> {
        check_claim_end(once.expires_at)?;
        check_started(Some(run), events)?;
        let result: StoreResult<_> = async {
            in_transaction!(self, |tx| {
                async {
                    let claimed =
                        ops::claim_key(&tx, &once.key, &once.owner, &once.now, &once.expires_at)
                            .await?;
                    if claimed {
                        ops::insert_run(&tx, run).await?;
                        ops::insert_events(&tx, &run.id, events).await?;
                    }
                    Ok(claimed)
                }
                .await
            })
        }
        .await;
        self.context(
            &format!("storing run {} once for {}", run.id, once.key),
            result,
        )
    }

    async fn append_events(&self, run_id: &str, events: &[Event]) -> StoreResult<()> {
        check_started(None, events)?;
        let result: StoreResult<_> = async {
            in_transaction!(self, |tx| {
                async {
                    ops::require_run(&tx, run_id).await?;
                    ops::insert_events(&tx, run_id, events).await
                }
                .await
            })
        }
        .await;
        self.context(&format!("appending events of run {run_id}"), result)
    }

    async fn record_step(
        &self,
        owner: &str,
        entry: &JournalEntry,
        events: &[Event],
    ) -> StoreResult<()> {
        let result: StoreResult<_> = async {
            in_transaction!(self, |tx| {
                async {
                    ops::record_step(&tx, owner, entry).await?;
                    ops::insert_events(&tx, &entry.run_id, events).await
                }
                .await
            })
        }
        .await;
        self.context(
            &format!("journaling step {} of run {}", entry.step_id, entry.run_id),
            result,
        )
    }

    async fn run_journal(&self, run_id: &str) -> StoreResult<Vec<JournalEntry>> {
        let read = async { ops::run_journal(&self.client().await?, run_id).await }.await;
        self.context(&format!("reading the journal of run {run_id}"), read)
    }

    async fn renew_lease(&self, run_id: &str, lease: &Lease) -> StoreResult<bool> {
        check_lease_end(lease.until)?;
        let renewed = async { ops::renew_lease(&self.client().await?, run_id, lease).await }.await;
        self.context(&format!("renewing the lease of run {run_id}"), renewed)
    }

    async fn claim_orphans(
        &self,
        agent_id: &str,
        lease: &Lease,
        now: DateTime<Utc>,
        limit: usize,
    ) -> StoreResult<Vec<OwnedRun>> {
        check_lease_end(lease.until)?;
        let limit = row_limit(limit);
        let claimed =
            async { ops::claim_orphans(&self.client().await?, agent_id, lease, &now, limit).await }
                .await;
        self.context("claiming orphaned runs", claimed)
    }

    async fn leased_owners(&self, agent_id: &str, now: DateTime<Utc>) -> StoreResult<Vec<String>> {
        let read = async { ops::leased_owners(&self.client().await?, agent_id, &now).await }.await;
        self.context("listing the owners of leased runs", read)
    }

    async fn take_over_runs(
        &self,
        agent_id: &str,
        from: &str,
        lease: &Lease,
        limit: usize,
    ) -> StoreResult<Vec<OwnedRun>> {
        check_lease_end(lease.until)?;
        let limit = row_limit(limit);
        let taken = async {
            ops::take_over_runs(&self.client().await?, agent_id, from, lease, limit).await
        }
        .await;
        self.context(&format!("taking over the runs of {from}"), taken)
    }

    async fn transition_run(&self, change: &RunTransition) -> StoreResult<(RunRecord, Event)> {
        if let Some(lease) = &change.lease {
            check_lease_end(lease.until)?;
        }
        let result: StoreResult<_> =
            async { in_transaction!(self, |tx| ops::transition_run(&tx, change).await) }.await;
        self.context(&format!("changing run {}", change.run_id), result)
    }

    async fn pause_run(&self, pause: &Pause, events: &[Event]) -> StoreResult<()> {
        check_pause(pause)?;
        let result: StoreResult<_> = async {
            in_transaction!(self, |tx| {
                async {
                    ops::pause_run(&tx, pause).await?;
                    ops::insert_events(&tx, &pause.record.run_id, events).await
                }
                .await
            })
        }
        .await;
        self.context(
            &format!("storing the pause of run {}", pause.record.run_id),
            result,
        )
    }

    async fn end_run(&self, end: &RunEnd, events: &[Event]) -> StoreResult<()> {
        let result: StoreResult<_> = async {
            in_transaction!(self, |tx| {
                async {
                    ops::end_run(&tx, end).await?;
                    ops::insert_events(&tx, &end.run_id, events).await
                }
                .await
            })
        }
        .await;
        self.context(&format!("storing the end of run {}", end.run_id), result)
    }

    async fn create_run_at(
        &self,
        run: &RunRecord,
        first: FirstWrite<'_>,
        events: &[Event],
    ) -> StoreResult<()> {
        if let FirstWrite::Pause(pause) = first {
            check_pause(pause)?;
        }
        check_started(Some(run), events)?;
        let result: StoreResult<_> = async {
            in_transaction!(self, |tx| {
                async {
                    ops::insert_run(&tx, run).await?;
                    match first {
                        FirstWrite::Pause(pause) => ops::pause_run(&tx, pause).await?,
                        FirstWrite::End(end) => ops::end_run(&tx, end).await?,
                    }
                    ops::insert_events(&tx, &run.id, events).await
                }
                .await
            })
        }
        .await;
        self.context(&format!("storing run {}", run.id), result)
    }
}
