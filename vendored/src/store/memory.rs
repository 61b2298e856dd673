//! In-memory store: for `tollgate run` without `--persist` and for tests.
//!
//! Same rules as the durable stores (the claim is one check-and-set under a
//! lock), but everything is gone when the process ends.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use super::{
    ApprovalFilter, ApprovalPage, ApprovalQuery, CancelRun, Cancelled, Claimed, FirstWrite,
    KeyClaim, Notification, NotificationStore, NotificationWrite, NotificationsDue, Pause,
    PendingPage, PendingQuery, RunEnd, RunQuery, RunTransition, RunsPage, SharedNotifications,
    StateStore, StoreError, StoreResult, StuckClaim, approval_order_at, check_json_text,
    check_pause, check_storable, cursor, expired_as_of, resolved_event,
};
use crate::events::{Event, EventKind};
use crate::pending_approval::{ApprovalError, ApprovalRecord, ApprovalStatus, Claim};
use crate::run_state::{JournalEntry, Lease, OwnedRun, RunRecord, RunStatus};

#[derive(Default)]
struct State {
    runs: HashMap<String, RunRecord>,
    events: HashMap<String, Vec<Event>>,
    approvals: HashMap<String, ApprovalRecord>,
    /// Dedupe and scheduler claims: key -> (owner, expires_at).
    claims: BTreeMap<String, (String, DateTime<Utc>)>,
    /// Chat messages announcing approvals, by approval key.
    notifications: HashMap<String, Notification>,
    /// Each run's journal of side effects, by step index.
    journal: HashMap<String, BTreeMap<usize, JournalEntry>>,
}

/// The depth rule of the stores that keep JSON text (see
/// [`check_json_text`]), applied to what this store keeps as values: the
/// same writes are refused everywhere, and a run behaves alike on each.
fn storable<T: serde::Serialize + ?Sized>(what: &str, value: &T) -> StoreResult<()> {
    let text = serde_json::to_string(value)
        .map_err(|e| StoreError::Database(format!("cannot encode {what} as JSON: {e}")))?;
    check_json_text(what, &text)
}

fn storable_run(run: &RunRecord) -> StoreResult<()> {
    storable("run input", &run.input)?;
    storable("run trigger", &run.trigger)?;
    storable("run outputs", &run.outputs)
}

fn storable_pause(pause: &Pause) -> StoreResult<()> {
    let r = &pause.record;
    storable("approval payload", &r.payload)?;
    storable("approval outputs", &r.outputs)?;
    storable("approval input", &r.input)?;
    storable("approval trigger", &r.trigger)?;
    storable("decision data", &r.decision_data)
}

fn storable_events(events: &[Event]) -> StoreResult<()> {
    events.iter().try_for_each(|e| storable("event", e))
}

#[derive(Default)]
pub struct MemoryStore {
    state: Mutex<State>,
}

impl MemoryStore {
    pub fn new() -> MemoryStore {
        MemoryStore::default()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        // A panic while holding the lock leaves plain data behind, still
        // consistent at the granularity of each method; keep serving.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl State {
    fn insert_run(&mut self, run: &RunRecord) -> StoreResult<()> {
        if self.runs.contains_key(&run.id) {
            return Err(StoreError::Conflict(format!(
                "run {} already exists",
                run.id
            )));
        }
        self.runs.insert(run.id.clone(), run.clone());
        Ok(())
    }

    fn check_new_approval(&self, pause: &Pause) -> StoreResult<()> {
        if self.approvals.contains_key(&pause.record.key) {
            // Never overwrite a record: it is the audit trail.
            return Err(StoreError::Conflict(format!(
                "approval {} already exists",
                pause.record.key
            )));
        }
        Ok(())
    }

    /// Apply a checked pause: the run's state and the new record.
    fn pause(&mut self, pause: &Pause) {
        let record = &pause.record;
        if let Some(run) = self.runs.get_mut(&record.run_id) {
            run.status = RunStatus::AwaitingApproval;
            run.outputs = record.outputs.clone();
            run.updated_at = pause.at;
            run.owner = None;
            run.lease_until = None;
        }
        self.approvals.insert(record.key.clone(), record.clone());
    }

    fn end(&mut self, end: &RunEnd) -> StoreResult<()> {
        self.check_fence(&end.run_id, end.owner.as_deref())?;
        let run = self.run_mut(&end.run_id)?;
        run.status = end.status;
        run.outputs = end.outputs.clone();
        run.error = end.error.clone();
        run.updated_at = end.at;
        run.owner = None;
        run.lease_until = None;
        Ok(())
    }

    /// With an owner: the run must still be `running` and owned by it.
    fn check_fence(&self, run_id: &str, owner: Option<&str>) -> StoreResult<()> {
        let run = self
            .runs
            .get(run_id)
            .ok_or_else(|| StoreError::RunNotFound(run_id.to_string()))?;
        match owner {
            Some(owner)
                if run.status != RunStatus::Running || run.owner.as_deref() != Some(owner) =>
            {
                Err(super::not_owner(
                    run_id,
                    owner,
                    run.status.as_str(),
                    run.owner.as_deref(),
                ))
            }
            _ => Ok(()),
        }
    }

    fn run_mut(&mut self, run_id: &str) -> StoreResult<&mut RunRecord> {
        self.runs
            .get_mut(run_id)
            .ok_or_else(|| StoreError::RunNotFound(run_id.to_string()))
    }

    fn push_events(&mut self, run_id: &str, events: &[Event]) {
        self.events
            .entry(run_id.to_string())
            .or_default()
            .extend_from_slice(events);
    }

    fn next_seq(&self, run_id: &str) -> u64 {
        self.events
            .get(run_id)
            .and_then(|e| e.last())
            .map(|e| e.seq + 1)
            .unwrap_or(1)
    }

    /// Give `lease` the oldest `limit` running runs of `agent_id` that
    /// `pick` chooses (orphans, or a dead owner's runs): one pass under the
    /// store's lock, so two takers never both get a run.
    fn take_runs(
        &mut self,
        agent_id: &str,
        lease: &Lease,
        limit: usize,
        pick: impl Fn(&RunRecord) -> bool,
    ) -> Vec<OwnedRun> {
        let mut ids: Vec<(DateTime<Utc>, String)> = self
            .runs
            .values()
            .filter(|r| r.agent_id == agent_id && r.status == RunStatus::Running)
            .filter(|r| pick(r))
            .map(|r| (r.created_at, r.id.clone()))
            .collect();
        ids.sort();
        ids.truncate(limit.max(1));
        let mut owned = Vec::with_capacity(ids.len());
        for (_, id) in ids {
            let next_seq = self.next_seq(&id);
            if let Some(run) = self.runs.get_mut(&id) {
                run.owner = Some(lease.owner.clone());
                run.lease_until = Some(lease.until);
                owned.push(OwnedRun {
                    run: run.clone(),
                    next_seq,
                });
            }
        }
        owned
    }
}

#[async_trait]
impl StateStore for MemoryStore {
    fn describe(&self) -> String {
        "memory".into()
    }

    async fn create_run(&self, run: &RunRecord, events: &[Event]) -> StoreResult<()> {
        storable_run(run)?;
        storable_events(events)?;
        let mut s = self.lock();
        s.insert_run(run)?;
        s.push_events(&run.id, events);
        Ok(())
    }

    async fn create_run_once(
        &self,
        once: &KeyClaim,
        run: &RunRecord,
        events: &[Event],
    ) -> StoreResult<bool> {
        check_storable("a claim's expires_at", once.expires_at)?;
        storable_run(run)?;
        storable_events(events)?;
        let mut s = self.lock();
        if s.claims
            .get(&once.key)
            .is_some_and(|(_, until)| *until > once.now)
        {
            return Ok(false);
        }
        s.insert_run(run)?;
        s.push_events(&run.id, events);
        s.claims
            .insert(once.key.clone(), (once.owner.clone(), once.expires_at));
        Ok(true)
    }

    async fn append_events(&self, run_id: &str, events: &[Event]) -> StoreResult<()> {
        storable_events(events)?;
        let mut s = self.lock();
        s.run_mut(run_id)?;
        s.push_events(run_id, events);
        Ok(())
    }

    async fn record_step(
        &self,
        owner: &str,
        entry: &JournalEntry,
        events: &[Event],
    ) -> StoreResult<()> {
        if let Some(output) = &entry.output {
            storable("step output", output)?;
        }
        storable_events(events)?;
        let mut s = self.lock();
        s.check_fence(&entry.run_id, Some(owner))?;
        if let Some(run) = s.runs.get_mut(&entry.run_id) {
            run.updated_at = entry.at;
        }
        s.journal
            .entry(entry.run_id.clone())
            .or_default()
            .insert(entry.step_index, entry.clone());
        s.push_events(&entry.run_id, events);
        Ok(())
    }

    async fn run_journal(&self, run_id: &str) -> StoreResult<Vec<JournalEntry>> {
        Ok(self
            .lock()
            .journal
            .get(run_id)
            .map(|steps| steps.values().cloned().collect())
            .unwrap_or_default())
    }

    async fn renew_lease(&self, run_id: &str, lease: &Lease) -> StoreResult<bool> {
        check_storable("a lease's end", lease.until)?;
        let mut s = self.lock();
        match s.runs.get_mut(run_id) {
            Some(run)
                if run.status == RunStatus::Running
                    && run.owner.as_deref() == Some(lease.owner.as_str()) =>
            {
                run.lease_until = Some(lease.until);
                Ok(true)
            }
            _ => Ok(false),
        }
    }

    async fn claim_orphans(
        &self,
        agent_id: &str,
        lease: &Lease,
        now: DateTime<Utc>,
        limit: usize,
    ) -> StoreResult<Vec<OwnedRun>> {
        check_storable("a lease's end", lease.until)?;
        let taken = self.lock().take_runs(agent_id, lease, limit, |r| {
            r.lease_until.is_none_or(|until| until <= now)
        });
        Ok(taken)
    }

    fn one_kernel(&self) -> bool {
        true
    }

    async fn leased_owners(&self, agent_id: &str, now: DateTime<Utc>) -> StoreResult<Vec<String>> {
        let s = self.lock();
        let owners: std::collections::BTreeSet<String> = s
            .runs
            .values()
            .filter(|r| r.agent_id == agent_id && r.status == RunStatus::Running)
            .filter(|r| r.lease_until.is_some_and(|until| until > now))
            .filter_map(|r| r.owner.clone())
            .collect();
        Ok(owners.into_iter().collect())
    }

    async fn take_over_runs(
        &self,
        agent_id: &str,
        from: &str,
        lease: &Lease,
        limit: usize,
    ) -> StoreResult<Vec<OwnedRun>> {
        check_storable("a lease's end", lease.until)?;
        let taken = self
            .lock()
            .take_runs(agent_id, lease, limit, |r| r.owner.as_deref() == Some(from));
        Ok(taken)
    }

    async fn transition_run(&self, change: &RunTransition) -> StoreResult<(RunRecord, Event)> {
        if let Some(lease) = &change.lease {
            check_storable("a lease's end", lease.until)?;
        }
        let mut s = self.lock();
        let status = s.run_mut(&change.run_id)?.status;
        if !change.from.contains(&status) {
            return Err(super::wrong_status(change, status));
        }
        let seq = s.next_seq(&change.run_id);
        if !super::unchanged(change, seq) {
            return Err(super::changed_since(change, status));
        }
        let event = Event {
            run_id: change.run_id.clone(),
            seq,
            at: change.at,
            kind: change.event.clone(),
        };
        storable_events(std::slice::from_ref(&event))?;
        let run = s.run_mut(&change.run_id)?;
        run.status = change.to;
        run.error = change.error.clone();
        run.owner = change.lease.as_ref().map(|l| l.owner.clone());
        run.lease_until = change.lease.as_ref().map(|l| l.until);
        run.updated_at = change.at;
        let run = run.clone();
        s.push_events(&change.run_id, std::slice::from_ref(&event));
        Ok((run, event))
    }

    async fn count_runs(&self, agent_id: &str, status: RunStatus) -> StoreResult<u64> {
        let s = self.lock();
        let n = s
            .runs
            .values()
            .filter(|r| r.agent_id == agent_id && r.status == status)
            .count();
        Ok(n as u64)
    }

    async fn pause_run(&self, pause: &Pause, events: &[Event]) -> StoreResult<()> {
        check_pause(pause)?;
        storable_pause(pause)?;
        storable_events(events)?;
        let mut s = self.lock();
        s.check_new_approval(pause)?;
        s.check_fence(&pause.record.run_id, pause.owner.as_deref())?;
        s.pause(pause);
        s.push_events(&pause.record.run_id, events);
        Ok(())
    }

    async fn end_run(&self, end: &RunEnd, events: &[Event]) -> StoreResult<()> {
        storable("run outputs", &end.outputs)?;
        storable_events(events)?;
        let mut s = self.lock();
        s.end(end)?;
        s.push_events(&end.run_id, events);
        Ok(())
    }

    async fn create_run_at(
        &self,
        run: &RunRecord,
        first: FirstWrite<'_>,
        events: &[Event],
    ) -> StoreResult<()> {
        storable_run(run)?;
        storable_events(events)?;
        match first {
            FirstWrite::Pause(pause) => storable_pause(pause)?,
            FirstWrite::End(end) => storable("run outputs", &end.outputs)?,
        }
        let mut s = self.lock();
        // Every check before the first change, so a refusal changes nothing.
        if let FirstWrite::Pause(pause) = first {
            check_pause(pause)?;
            s.check_new_approval(pause)?;
        }
        s.insert_run(run)?;
        match first {
            FirstWrite::Pause(pause) => s.pause(pause),
            FirstWrite::End(end) => s.end(end)?,
        }
        s.push_events(&run.id, events);
        Ok(())
    }

    async fn claim(&self, claim: &Claim) -> StoreResult<Claimed> {
        storable("decision data", &claim.decision.data())?;
        let mut s = self.lock();
        let claimable = s.approvals.get(&claim.key).is_some_and(|r| {
            r.status == ApprovalStatus::Pending
                && r.expires_at > claim.now
                && (!claim.decision.requires_same_spec() || r.spec_hash == claim.spec_hash)
        });
        if !claimable {
            let err =
                ApprovalError::explain_failed_claim(&claim.key, s.approvals.get(&claim.key), claim);
            return Err(err.into());
        }
        let record = {
            let r = s
                .approvals
                .get_mut(&claim.key)
                .ok_or_else(|| StoreError::Database("record vanished under lock".into()))?;
            r.status = claim.decision.status();
            r.decision_data = claim.decision.data();
            r.decided_by = Some(claim.decided_by.clone());
            r.decided_at = Some(claim.now);
            r.clone()
        };
        let seq = s.next_seq(&record.run_id);
        let event = resolved_event(&record, claim, seq);
        let mut events = vec![event.clone()];
        if let Some(run) = s.runs.get_mut(&record.run_id) {
            run.updated_at = claim.now;
            if let Some((end, ended)) = claim.run_end(&record, seq + 1) {
                run.updated_at = end.at;
                run.status = end.status;
                run.outputs = end.outputs;
                run.error = end.error;
                run.owner = None;
                run.lease_until = None;
                events.extend(ended);
            } else {
                // The claimer (if any) drives the run on from here: it owns it.
                run.status = RunStatus::Running;
                run.owner = claim.lease().map(|l| l.owner.clone());
                run.lease_until = claim.lease().map(|l| l.until);
            }
        }
        s.push_events(&record.run_id, &events);
        Ok(Claimed { record, event })
    }

    async fn get_approval(&self, key: &str) -> StoreResult<Option<ApprovalRecord>> {
        Ok(self.lock().approvals.get(key).cloned())
    }

    async fn list_runs(&self, query: &RunQuery) -> StoreResult<RunsPage> {
        let after = match query.cursor.as_deref() {
            Some(text) => {
                let (at, id) = cursor::decode(text)?;
                let at = crate::time::parse_utc(&at)
                    .ok_or_else(|| StoreError::InvalidCursor(text.to_string()))?;
                Some((at, id))
            }
            None => None,
        };
        let s = self.lock();
        let mut runs: Vec<&RunRecord> = s
            .runs
            .values()
            .filter(|r| query.agent_id.as_ref().is_none_or(|a| &r.agent_id == a))
            .filter(|r| query.status.is_none_or(|st| r.status == st))
            .filter(|r| {
                after
                    .as_ref()
                    .is_none_or(|(at, id)| (r.created_at, &r.id) < (*at, id))
            })
            .collect();
        runs.sort_by(|a, b| (b.created_at, &b.id).cmp(&(a.created_at, &a.id)));
        let limit = query.limit.max(1);
        let next_cursor = (runs.len() > limit).then(|| {
            let last = runs[limit - 1];
            cursor::encode(last.created_at, &last.id)
        });
        Ok(RunsPage {
            runs: runs.into_iter().take(limit).cloned().collect(),
            next_cursor,
        })
    }

    async fn cancel_run(&self, cancel: &CancelRun) -> StoreResult<Cancelled> {
        storable("cancel reason", &cancel.reason)?;
        let mut s = self.lock();
        let run = s
            .runs
            .get(&cancel.run_id)
            .ok_or_else(|| StoreError::RunNotFound(cancel.run_id.clone()))?;
        let was = run.status;
        let approval = match was {
            RunStatus::AwaitingApproval => {
                let pending = s
                    .approvals
                    .values_mut()
                    .find(|r| {
                        r.run_id == cancel.run_id
                            && r.status == ApprovalStatus::Pending
                            && r.expires_at > cancel.now
                    })
                    .ok_or(StoreError::RunNotCancellable {
                        run_id: cancel.run_id.clone(),
                        status: RunStatus::Expired,
                    })?;
                pending.status = ApprovalStatus::Cancelled;
                pending.decision_data = cancel.decision_data();
                pending.decided_by = Some(cancel.by.clone());
                pending.decided_at = Some(cancel.now);
                Some(pending.clone())
            }
            RunStatus::Running => None,
            status => {
                return Err(StoreError::RunNotCancellable {
                    run_id: cancel.run_id.clone(),
                    status,
                });
            }
        };
        let event = cancel.event(s.next_seq(&cancel.run_id));
        if let Some(run) = s.runs.get_mut(&cancel.run_id) {
            run.status = RunStatus::Cancelled;
            run.updated_at = cancel.now;
            run.owner = None;
            run.lease_until = None;
        }
        s.push_events(&cancel.run_id, std::slice::from_ref(&event));
        Ok(Cancelled {
            was,
            approval,
            event,
        })
    }

    async fn pending_for_run(
        &self,
        run_id: &str,
        now: DateTime<Utc>,
    ) -> StoreResult<Option<ApprovalRecord>> {
        Ok(self
            .lock()
            .approvals
            .values()
            .filter(|r| r.run_id == run_id && r.status == ApprovalStatus::Pending)
            .filter(|r| r.expires_at > now)
            .max_by_key(|r| r.created_at)
            .cloned())
    }

    async fn latest_approval_key(&self, run_id: &str) -> StoreResult<Option<String>> {
        Ok(self
            .lock()
            .approvals
            .values()
            .filter(|r| r.run_id == run_id)
            .max_by(|a, b| {
                (a.created_at, a.step_index, &a.key).cmp(&(b.created_at, b.step_index, &b.key))
            })
            .map(|r| r.key.clone()))
    }

    async fn list_pending(&self, query: &PendingQuery) -> StoreResult<PendingPage> {
        let after = query.cursor.as_deref().map(cursor::decode).transpose()?;
        let s = self.lock();
        let mut rows: Vec<&ApprovalRecord> = s
            .approvals
            .values()
            .filter(|r| r.status == ApprovalStatus::Pending && r.expires_at > query.now)
            .filter(|r| query.agent_id.as_ref().is_none_or(|a| &r.agent_id == a))
            .filter(|r| match &after {
                // Newest first: the next page holds rows strictly "older"
                // than the cursor in (created_at, key) order.
                Some((at, key)) => {
                    let this_at = crate::time::format_utc(r.created_at);
                    (this_at.as_str(), r.key.as_str()) < (at.as_str(), key.as_str())
                }
                None => true,
            })
            .collect();
        rows.sort_by(|a, b| (b.created_at, &b.key).cmp(&(a.created_at, &a.key)));
        let limit = query.limit.max(1);
        let next_cursor = (rows.len() > limit).then(|| {
            let last = rows[limit - 1];
            cursor::encode(last.created_at, &last.key)
        });
        rows.truncate(limit);
        Ok(PendingPage {
            approvals: rows.into_iter().cloned().collect(),
            next_cursor,
            // Every record here is a typed value: none can be unreadable.
            unreadable: Vec::new(),
        })
    }

    async fn list_approvals(&self, query: &ApprovalQuery) -> StoreResult<ApprovalPage> {
        // The cursor's time in the stored text form, so positions compare
        // exactly as they do in the SQL stores (microseconds, as text).
        let after = match query.cursor.as_deref() {
            Some(text) => {
                let (at, key) = cursor::decode(text)?;
                let at = crate::time::parse_utc(&at)
                    .map(crate::time::format_utc)
                    .ok_or_else(|| StoreError::InvalidCursor(text.to_string()))?;
                Some((at, key))
            }
            None => None,
        };
        let filter = ApprovalFilter::new(query);
        let s = self.lock();
        let mut rows: Vec<(String, ApprovalRecord)> = s
            .approvals
            .values()
            .filter(|r| query.agent_id.as_ref().is_none_or(|a| &r.agent_id == a))
            .map(|r| expired_as_of(r.clone(), query.now))
            .filter(|r| filter.matches(r))
            .map(|r| (crate::time::format_utc(approval_order_at(&r)), r))
            .filter(|(at, r)| {
                after
                    .as_ref()
                    .is_none_or(|(a, k)| (at.as_str(), r.key.as_str()) < (a.as_str(), k.as_str()))
            })
            .collect();
        rows.sort_by(|(a_at, a), (b_at, b)| (b_at, &b.key).cmp(&(a_at, &a.key)));
        let limit = query.limit.max(1);
        let next_cursor = (rows.len() > limit).then(|| {
            let last = &rows[limit - 1].1;
            cursor::encode(approval_order_at(last), &last.key)
        });
        rows.truncate(limit);
        Ok(ApprovalPage {
            approvals: rows.into_iter().map(|(_, r)| r).collect(),
            next_cursor,
            // Every record here is a typed value: none can be unreadable.
            unreadable: Vec::new(),
        })
    }

    async fn list_stuck(
        &self,
        agent_id: Option<&str>,
        now: DateTime<Utc>,
    ) -> StoreResult<Vec<StuckClaim>> {
        let s = self.lock();
        let mut stuck: Vec<StuckClaim> = s
            .approvals
            .values()
            .filter(|r| agent_id.is_none_or(|a| r.agent_id == a))
            .filter(|r| r.decided_at.is_some() && r.status != ApprovalStatus::Expired)
            .filter_map(|r| {
                let run = s.runs.get(&r.run_id)?;
                let latest = s
                    .approvals
                    .values()
                    .filter(|o| o.run_id == r.run_id)
                    .max_by_key(|o| o.created_at)?;
                let orphaned = run.status == RunStatus::Running
                    && run.lease_until.is_none_or(|until| until <= now);
                let unfinished = orphaned || run.status == RunStatus::Stuck;
                (unfinished && latest.key == r.key).then(|| StuckClaim {
                    record: r.clone(),
                    run_status: run.status,
                    run_updated_at: run.updated_at,
                })
            })
            .collect();
        stuck.sort_by_key(|c| std::cmp::Reverse(c.record.decided_at));
        Ok(stuck)
    }

    async fn expire_due(&self, now: DateTime<Utc>) -> StoreResult<Vec<ApprovalRecord>> {
        let mut s = self.lock();
        let due: Vec<String> = s
            .approvals
            .values()
            .filter(|r| r.status == ApprovalStatus::Pending && r.expires_at <= now)
            .map(|r| r.key.clone())
            .collect();
        let mut expired = Vec::with_capacity(due.len());
        for key in due {
            let Some(r) = s.approvals.get_mut(&key) else {
                continue;
            };
            r.status = ApprovalStatus::Expired;
            let record = r.clone();
            let seq = s.next_seq(&record.run_id);
            if let Some(run) = s.runs.get_mut(&record.run_id) {
                run.status = RunStatus::Expired;
                run.updated_at = now;
            }
            let event = Event {
                run_id: record.run_id.clone(),
                seq,
                at: now,
                kind: EventKind::RunExpired {
                    key: record.key.clone(),
                },
            };
            s.push_events(&record.run_id, &[event]);
            expired.push(record);
        }
        Ok(expired)
    }

    async fn get_run(&self, run_id: &str) -> StoreResult<Option<RunRecord>> {
        Ok(self.lock().runs.get(run_id).cloned())
    }

    async fn run_events(&self, run_id: &str, after_seq: u64) -> StoreResult<Vec<Event>> {
        Ok(self
            .lock()
            .events
            .get(run_id)
            .map(|events| {
                events
                    .iter()
                    .filter(|e| e.seq > after_seq)
                    .cloned()
                    .collect()
            })
            .unwrap_or_default())
    }

    async fn claim_key(
        &self,
        key: &str,
        owner: &str,
        now: DateTime<Utc>,
        expires_at: DateTime<Utc>,
    ) -> StoreResult<bool> {
        check_storable("a claim's expires_at", expires_at)?;
        let mut s = self.lock();
        match s.claims.get(key) {
            Some((_, until)) if *until > now => Ok(false),
            _ => {
                s.claims
                    .insert(key.to_string(), (owner.to_string(), expires_at));
                Ok(true)
            }
        }
    }

    async fn release_key(&self, key: &str, owner: &str) -> StoreResult<()> {
        let mut s = self.lock();
        if s.claims.get(key).is_some_and(|(o, _)| o == owner) {
            s.claims.remove(key);
        }
        Ok(())
    }

    fn notifications(self: Arc<Self>) -> Option<SharedNotifications> {
        Some(self)
    }
}

#[async_trait]
impl NotificationStore for MemoryStore {
    async fn lease_notification(
        &self,
        key: &str,
        now: DateTime<Utc>,
        until: DateTime<Utc>,
    ) -> StoreResult<Option<Notification>> {
        check_storable("a lease's end", until)?;
        let mut s = self.lock();
        if !s.approvals.contains_key(key) {
            return Err(StoreError::Approval(ApprovalError::NotFound {
                key: key.into(),
            }));
        }
        let row = s
            .notifications
            .entry(key.to_string())
            .or_insert_with(|| empty_notification(key));
        if row.lease_until.is_some_and(|held| held > now) {
            return Ok(None);
        }
        row.lease_until = Some(until);
        Ok(Some(row.clone()))
    }

    async fn record_notification(&self, key: &str, write: &NotificationWrite) -> StoreResult<()> {
        let mut s = self.lock();
        let row = s
            .notifications
            .get_mut(key)
            .ok_or_else(|| StoreError::Database(format!("no notification for approval {key}")))?;
        match write {
            NotificationWrite::Posted { channel, ts, at } => {
                row.channel = Some(channel.clone());
                row.ts = Some(ts.clone());
                row.posted_at = Some(*at);
                row.attempts = row.attempts.saturating_add(1);
                row.last_error = None;
                row.lease_until = None;
            }
            NotificationWrite::DecisionPosted { at } => {
                row.decision_posted_at = Some(*at);
                row.attempts = row.attempts.saturating_add(1);
                row.last_error = None;
                row.lease_until = None;
            }
            NotificationWrite::Failed { error, hold_until } => {
                row.attempts = row.attempts.saturating_add(1);
                row.last_error = Some(error.clone());
                row.lease_until = Some(*hold_until);
            }
            NotificationWrite::Release => row.lease_until = None,
        }
        Ok(())
    }

    async fn get_notification(&self, key: &str) -> StoreResult<Option<Notification>> {
        Ok(self.lock().notifications.get(key).cloned())
    }

    async fn notifications_due(
        &self,
        agent_id: &str,
        now: DateTime<Utc>,
        limit: usize,
    ) -> StoreResult<NotificationsDue> {
        let s = self.lock();
        let free = |n: &Notification| n.lease_until.is_none_or(|held| held <= now);
        let mut to_post: Vec<ApprovalRecord> = s
            .approvals
            .values()
            .filter(|r| r.agent_id == agent_id)
            .filter(|r| r.status == ApprovalStatus::Pending && r.expires_at > now)
            .filter(|r| match s.notifications.get(&r.key) {
                None => true,
                Some(n) => n.ts.is_none() && free(n),
            })
            .cloned()
            .collect();
        to_post.sort_by(|a, b| (a.created_at, &a.key).cmp(&(b.created_at, &b.key)));
        to_post.truncate(limit);
        let mut to_settle: Vec<(ApprovalRecord, Notification)> = s
            .notifications
            .values()
            .filter(|n| n.ts.is_some() && n.decision_posted_at.is_none() && free(n))
            .filter_map(|n| {
                let r = s.approvals.get(&n.key)?;
                (r.agent_id == agent_id && r.status != ApprovalStatus::Pending)
                    .then(|| (r.clone(), n.clone()))
            })
            .collect();
        to_settle.sort_by(|a, b| (a.0.created_at, &a.0.key).cmp(&(b.0.created_at, &b.0.key)));
        to_settle.truncate(limit);
        Ok(NotificationsDue { to_post, to_settle })
    }
}

fn empty_notification(key: &str) -> Notification {
    Notification {
        key: key.to_string(),
        channel: None,
        ts: None,
        posted_at: None,
        attempts: 0,
        last_error: None,
        decision_posted_at: None,
        lease_until: None,
    }
}
