//! The SQLite store: the run log: the driver's writes (runs, events, journal, pauses, ends, leases).

use super::*;

#[async_trait]
impl RunLog for SqliteStore {
    async fn create_run(&self, run: &RunRecord, events: &[Event]) -> StoreResult<()> {
        check_started(Some(run), events)?;
        let row = RunRow::encode(run)?;
        let run_id = run.id.clone();
        let events = encode_events(events)?;
        self.write(format!("storing run {run_id}"), move |conn| {
            ops::insert_run(conn, &row)?;
            ops::insert_events(conn, &run_id, &events)
        })
        .await
    }

    async fn create_run_once(
        &self,
        once: &KeyClaim,
        run: &RunRecord,
        events: &[Event],
    ) -> StoreResult<bool> {
        check_claim_end(once.expires_at)?;
        check_started(Some(run), events)?;
        let row = RunRow::encode(run)?;
        let run_id = run.id.clone();
        let events = encode_events(events)?;
        let (key, owner) = (once.key.clone(), once.owner.clone());
        let (now, expires_at) = (format_utc(once.now), format_utc(once.expires_at));
        self.write(
            format!("storing run {run_id} once for {key}"),
            move |conn| {
                if !ops::claim_key(conn, &key, &owner, &now, &expires_at)? {
                    return Ok(false);
                }
                ops::insert_run(conn, &row)?;
                ops::insert_events(conn, &run_id, &events)?;
                Ok(true)
            },
        )
        .await
    }

    async fn append_events(&self, run_id: &str, events: &[Event]) -> StoreResult<()> {
        check_started(None, events)?;
        let run_id = run_id.to_string();
        let events = encode_events(events)?;
        self.write(format!("appending events of run {run_id}"), move |conn| {
            ops::require_run(conn, &run_id)?;
            ops::insert_events(conn, &run_id, &events)
        })
        .await
    }

    async fn record_step(
        &self,
        owner: &str,
        entry: &JournalEntry,
        events: &[Event],
    ) -> StoreResult<()> {
        let row = ops::StepRow::encode(entry)?;
        let (run_id, owner) = (entry.run_id.clone(), owner.to_string());
        let events = encode_events(events)?;
        let what = format!("journaling step {} of run {run_id}", entry.step_id);
        self.write(what, move |conn| {
            ops::record_step(conn, &owner, &row)?;
            ops::insert_events(conn, &run_id, &events)
        })
        .await
    }

    async fn run_journal(&self, run_id: &str) -> StoreResult<Vec<JournalEntry>> {
        let run_id = run_id.to_string();
        self.read(
            format!("reading the journal of run {run_id}"),
            move |conn| ops::run_journal(conn, &run_id),
        )
        .await
    }

    async fn renew_lease(&self, run_id: &str, lease: &Lease) -> StoreResult<bool> {
        check_lease_end(lease.until)?;
        let (run_id, owner) = (run_id.to_string(), lease.owner.clone());
        let until = format_utc(lease.until);
        self.write(format!("renewing the lease of run {run_id}"), move |conn| {
            ops::renew_lease(conn, &run_id, &owner, &until)
        })
        .await
    }

    async fn claim_orphans(
        &self,
        agent_id: &str,
        lease: &Lease,
        now: DateTime<Utc>,
        limit: usize,
    ) -> StoreResult<Vec<OwnedRun>> {
        check_lease_end(lease.until)?;
        let (agent_id, owner) = (agent_id.to_string(), lease.owner.clone());
        let (until, now) = (format_utc(lease.until), format_utc(now));
        let limit = row_limit(limit);
        self.write("claiming orphaned runs", move |conn| {
            ops::claim_orphans(conn, &agent_id, &owner, &until, &now, limit)
        })
        .await
    }

    async fn leased_owners(&self, agent_id: &str, now: DateTime<Utc>) -> StoreResult<Vec<String>> {
        let (agent_id, now) = (agent_id.to_string(), format_utc(now));
        self.read("listing the owners of leased runs", move |conn| {
            ops::leased_owners(conn, &agent_id, &now)
        })
        .await
    }

    async fn take_over_runs(
        &self,
        agent_id: &str,
        from: &str,
        lease: &Lease,
        limit: usize,
    ) -> StoreResult<Vec<OwnedRun>> {
        check_lease_end(lease.until)?;
        let (agent_id, from) = (agent_id.to_string(), from.to_string());
        let (owner, until) = (lease.owner.clone(), format_utc(lease.until));
        let limit = row_limit(limit);
        self.write(format!("taking over the runs of {from}"), move |conn| {
            ops::take_over_runs(conn, &agent_id, &from, &owner, &until, limit)
        })
        .await
    }

    async fn transition_run(&self, change: &RunTransition) -> StoreResult<(RunRecord, Event)> {
        if let Some(lease) = &change.lease {
            check_lease_end(lease.until)?;
        }
        // Encoded here so that an unstorable event fails before the write.
        encode_events(&[Event {
            run_id: change.run_id.clone(),
            seq: 0,
            at: change.at,
            kind: change.event.clone(),
        }])?;
        let change = change.clone();
        self.write(format!("changing run {}", change.run_id), move |conn| {
            ops::transition_run(conn, &change)
        })
        .await
    }

    async fn pause_run(&self, pause: &Pause, events: &[Event]) -> StoreResult<()> {
        check_pause(pause)?;
        let row = ApprovalRow::encode(pause)?;
        let run_id = pause.record.run_id.clone();
        let events = encode_events(events)?;
        self.write(format!("storing the pause of run {run_id}"), move |conn| {
            ops::pause_run(conn, &row)?;
            ops::insert_events(conn, &run_id, &events)
        })
        .await
    }

    async fn end_run(&self, end: &RunEnd, events: &[Event]) -> StoreResult<()> {
        let row = EndRow::encode(end)?;
        let run_id = end.run_id.clone();
        let events = encode_events(events)?;
        self.write(format!("storing the end of run {run_id}"), move |conn| {
            ops::end_run(conn, &row)?;
            ops::insert_events(conn, &run_id, &events)
        })
        .await
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
        let run_row = RunRow::encode(run)?;
        let run_id = run.id.clone();
        let first = FirstRow::encode(first)?;
        let events = encode_events(events)?;
        self.write(format!("storing run {run_id}"), move |conn| {
            // The run row is inserted and then updated in one transaction:
            // the page is written to the WAL once, at the commit.
            ops::insert_run(conn, &run_row)?;
            match &first {
                FirstRow::Pause(row) => ops::pause_run(conn, row)?,
                FirstRow::End(row) => ops::end_run(conn, row)?,
            }
            ops::insert_events(conn, &run_id, &events)
        })
        .await
    }
}
