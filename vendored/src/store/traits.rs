//! The store's traits, one per concept ([`RunLog`], [`Approvals`],
//! [`Votes`], [`Queries`], [`Keys`], [`SpecVersions`], [`Health`]), and
//! [`StateStore`], their sum.
//! `use tollgate_runtime::store::prelude::*` brings them all into scope.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use super::{
    ApprovalPage, ApprovalQuery, CancelRun, Cancelled, CastVote, Claimed, FirstWrite, KeyClaim,
    Nudged, Outbox, Pause, PendingPage, PendingQuery, RunEnd, RunQuery, RunTransition, RunsPage,
    SharedNotifications, StoreResult, StuckClaim, VoteOutcome, expired_as_of, feed,
};
use crate::domain::events::Event;
use crate::domain::pending_approval::{ApprovalMove, ApprovalRecord, Claim, Moved};
use crate::domain::policy::Vote;
use crate::domain::run_state::{JournalEntry, Lease, OwnedRun, RunRecord, RunStatus};
use crate::domain::spec_version::{SpecVersion, SpecVersionUse};

/// The run log: what a run's driver writes (creation, events, journal,
/// pauses, ends, leases) and the little it reads back for itself (its
/// journal). Every write at a durable point is one transaction; writes of a
/// driver that lost its run are fenced ([`StoreError::NotOwner`](super::StoreError::NotOwner)).
#[async_trait]
pub trait RunLog: Send + Sync + 'static {
    /// Insert a new run with its first events.
    async fn create_run(&self, run: &RunRecord, events: &[Event]) -> StoreResult<()>;

    /// [`RunLog::create_run`] if `once` can be claimed (as
    /// [`Keys::claim_key`] would), in one write: a trigger that must
    /// start at most one run (a schedule tick, a signed webhook request)
    /// claims its key and stores its run, or does neither, so a crash
    /// between the two can neither lose the run nor let it start twice.
    /// False, with nothing written, when the key is taken.
    async fn create_run_once(
        &self,
        once: &KeyClaim,
        run: &RunRecord,
        events: &[Event],
    ) -> StoreResult<bool>;

    /// Append events to a run that is executing.
    async fn append_events(&self, run_id: &str, events: &[Event]) -> StoreResult<()>;

    /// Atomically, if the run is still `running` and owned by `owner`
    /// (else [`StoreError::NotOwner`](super::StoreError::NotOwner), and nothing changes): record a
    /// journal entry (a step's start, or its output once it completed;
    /// the entry for that step is replaced) and append `events`.
    async fn record_step(
        &self,
        owner: &str,
        entry: &JournalEntry,
        events: &[Event],
    ) -> StoreResult<()>;

    /// The run's journal, by step index.
    async fn run_journal(&self, run_id: &str) -> StoreResult<Vec<JournalEntry>>;

    /// Extend the lease of a run its owner still drives (`running`, owned
    /// by `lease.owner`). False when it does not own it any more.
    async fn renew_lease(&self, run_id: &str, lease: &Lease) -> StoreResult<bool>;

    /// Claim up to `limit` orphaned runs of `agent_id` (`running`, with a
    /// lease past at `now` or none) for `lease`, oldest first: one
    /// conditional write per run, so each orphan has one winner across
    /// every process. Returns the runs as claimed, each with the seq its
    /// next event gets.
    async fn claim_orphans(
        &self,
        agent_id: &str,
        lease: &Lease,
        now: DateTime<Utc>,
        limit: usize,
    ) -> StoreResult<Vec<OwnedRun>>;

    /// The owners of `agent_id`'s `running` runs whose lease still holds
    /// at `now`, each once: the candidates for a same-host take-over of a
    /// dead owner's runs ([`crate::domain::durable::owner`]). The default lists
    /// none, and those runs wait for their lease.
    async fn leased_owners(&self, agent_id: &str, now: DateTime<Utc>) -> StoreResult<Vec<String>> {
        let _ = (agent_id, now);
        Ok(Vec::new())
    }

    /// Take over up to `limit` of `agent_id`'s `running` runs owned by
    /// exactly `from` (an owner found dead) for `lease`, oldest first,
    /// whatever their lease: one conditional write on each run's id and
    /// that exact owner, so of two processes taking over one dead owner's
    /// run one wins. Returns the runs as taken, each with the seq its next
    /// event gets.
    async fn take_over_runs(
        &self,
        agent_id: &str,
        from: &str,
        lease: &Lease,
        limit: usize,
    ) -> StoreResult<Vec<OwnedRun>> {
        let _ = (agent_id, from, lease, limit);
        Ok(Vec::new())
    }

    /// Apply `change` if the run's status is one of `change.from` (else
    /// [`StoreError::WrongRunStatus`](super::StoreError::WrongRunStatus) or `RunNotFound`, and nothing
    /// changes), appending its event. Returns the run as changed and the
    /// event as stored.
    async fn transition_run(&self, change: &RunTransition) -> StoreResult<(RunRecord, Event)>;

    /// Atomically: insert the pending record, set the run to
    /// `awaiting_approval` with its outputs so far, append `events`.
    async fn pause_run(&self, pause: &Pause, events: &[Event]) -> StoreResult<()>;

    /// Atomically: set the run's final (or running) state, append `events`.
    async fn end_run(&self, end: &RunEnd, events: &[Event]) -> StoreResult<()>;

    /// Atomically: insert a run that was never stored, apply its first
    /// durable point (`first`: a pause or its end) and append `events` (all
    /// of them, from `run_started`). A run that reaches its first gate, or
    /// its end, without calling out so costs one commit instead of two.
    async fn create_run_at(
        &self,
        run: &RunRecord,
        first: FirstWrite<'_>,
        events: &[Event],
    ) -> StoreResult<()>;
}

/// Approvals: the claim, the cancel and the expiry sweep (the race rules:
/// one conditional write each, one winner in any process), and the records
/// as a decision or a watcher reads them.
#[async_trait]
pub trait Approvals: Send + Sync + 'static {
    /// The claim: one conditional write, `PENDING` and unexpired (and, for
    /// approve/modify, the same spec hash) -> decided. On success the run is
    /// set back to `running` and an `approval_resolved` event is appended, in
    /// the same transaction. Exactly one caller in any process wins; the
    /// others get [`ApprovalError`](crate::domain::pending_approval::ApprovalError) explaining why.
    async fn claim(&self, claim: &Claim) -> StoreResult<Claimed>;

    async fn get_approval(&self, key: &str) -> StoreResult<Option<ApprovalRecord>>;

    /// The run's unexpired PENDING record, if it is paused.
    async fn pending_for_run(
        &self,
        run_id: &str,
        now: DateTime<Utc>,
    ) -> StoreResult<Option<ApprovalRecord>>;

    /// The key of the run's latest approval, whatever its status: what a
    /// decision addressed by run id decides. A run pauses at one gate at a
    /// time, so its latest record is the pending one while it waits, and
    /// otherwise the one that explains why nothing is pending (decided,
    /// expired). Latest by `created_at`, then `step_index`, then key; one
    /// read through the approvals-by-run index. `None` when the run never
    /// paused (or does not exist).
    async fn latest_approval_key(&self, run_id: &str) -> StoreResult<Option<String>>;

    /// Mark every overdue PENDING record EXPIRED and end its run `expired`
    /// (with a `run_expired` event). At most once across processes: returns
    /// only the records this call expired, oldest first. In batches of
    /// at most [`EXPIRE_BATCH`](crate::store::EXPIRE_BATCH), the earliest due first,
    /// each one transaction (each record with its run, event and notices),
    /// so a decision is not held up for a whole pass; an error ends the
    /// pass with the batches before it committed.
    async fn expire_due(&self, now: DateTime<Utc>) -> StoreResult<Vec<ApprovalRecord>>;

    /// Overdue PENDING records whose gate settles by an `on_timeout`
    /// other than `expire` (which [`Approvals::expire_due`] leaves alone),
    /// earliest deadline first, at most `limit`: what a timeout claim
    /// ([`Claim::timeout`](crate::domain::pending_approval::Claim::timeout))
    /// settles.
    async fn due_timeouts(
        &self,
        now: DateTime<Utc>,
        limit: usize,
    ) -> StoreResult<Vec<ApprovalRecord>>;

    /// Do the reminders and escalations due at `now` of up to `limit`
    /// unexpired PENDING records (see [`crate::domain::policy::Roster::take_due`]):
    /// per record, one write of its roster and next due time, conditional
    /// on what was read, with an event per nudge. At most once across
    /// processes: returns only what this call did.
    async fn nudge_due(&self, now: DateTime<Utc>, limit: usize) -> StoreResult<Vec<Nudged>>;

    /// End a waiting or running run `cancelled`, with a `run_cancelled`
    /// event, in one transaction. A waiting run's PENDING, unexpired
    /// approval becomes CANCELLED (`decided_by` the canceller) in the same
    /// conditional write that a decision's claim races: exactly one of
    /// them wins. A run in any other state is
    /// [`StoreError::RunNotCancellable`](super::StoreError::RunNotCancellable).
    async fn cancel_run(&self, cancel: &CancelRun) -> StoreResult<Cancelled>;

    /// Move a PENDING, unexpired approval on spec `from` onto spec `to`
    /// with its run (see [`ApprovalMove`]): one conditional write that a
    /// claim of the same key races, so exactly one of them goes first. A
    /// record in any other state is an
    /// [`ApprovalError`](crate::domain::pending_approval::ApprovalError) saying why
    /// (not found, expired, decided, or on another version now).
    async fn move_approval(&self, to_move: &ApprovalMove) -> StoreResult<Moved>;

    /// The records of `keys` that exist, in any order: what a watcher
    /// re-reads for the keys it waits on. One query where the store can.
    async fn approvals_by_key(&self, keys: &[String]) -> StoreResult<Vec<ApprovalRecord>> {
        let mut found = Vec::with_capacity(keys.len());
        for key in keys {
            if let Some(record) = self.get_approval(key).await? {
                found.push(record);
            }
        }
        Ok(found)
    }

    /// The record of `key` as a reader at `now` must see it: a PENDING
    /// record past its `expires_at` reads EXPIRED even before a sweep
    /// marked it so (the claim refuses it either way).
    async fn approval_as_of(
        &self,
        key: &str,
        now: DateTime<Utc>,
    ) -> StoreResult<Option<ApprovalRecord>> {
        Ok(self.get_approval(key).await?.map(|r| expired_as_of(r, now)))
    }
}

/// The ledger of votes on gates (DESIGN §13).
#[async_trait]
pub trait Votes: Send + Sync + 'static {
    /// Cast a vote, in one transaction that a claim, a cancel, a move and
    /// other votes of the same key are serialised with:
    ///
    /// 1. The record must be PENDING and unexpired, and on the claim's spec
    ///    for approve and modify; otherwise the claim's explanation
    ///    ([`ApprovalError::explain_failed_claim`](crate::domain::pending_approval::ApprovalError::explain_failed_claim)).
    /// 2. The choice's `payload_digest` must be the record's
    ///    ([`ApprovalRecord::payload_digest`]); otherwise
    ///    `ApprovalError::PayloadChanged`.
    /// 3. A plain gate (no roster): the vote is appended to the ledger
    ///    (rule `None`) and the claim written: `Settled`, no vote event.
    /// 4. A gate with a roster: [`Roster::cast`](crate::domain::policy::Roster::cast)
    ///    over the ledger decides (a refusal is its error, nothing
    ///    written). A modify marks every earlier vote superseded and
    ///    stores the cast's roster. The vote is appended with its rule and
    ///    an `approval_vote` event; if the cast settles, the claim (whose
    ///    decision must equal the settlement) is written too: `Settled`,
    ///    else `Recorded`.
    async fn cast_vote(&self, cast: &CastVote) -> StoreResult<VoteOutcome>;

    /// The ledger of `key`, in the order cast (superseded votes included).
    async fn votes(&self, key: &str) -> StoreResult<Vec<Vote>>;

    /// The ledgers of several gates with rules at once (a list showing
    /// each gate's progress reads them in one query, not one per row), by
    /// key, each in the order cast. A key without votes is absent; so is a
    /// plain gate's one decision (read it with [`Votes::votes`]). This
    /// default reads one key at a time; SQLite and PostgreSQL read them
    /// all in one statement.
    async fn ledgers(
        &self,
        keys: &[String],
    ) -> StoreResult<std::collections::BTreeMap<String, Vec<Vote>>> {
        let mut ledgers = std::collections::BTreeMap::new();
        for key in keys {
            let votes = self.votes(key).await?;
            if !votes.is_empty() {
                ledgers.insert(key.clone(), votes);
            }
        }
        Ok(ledgers)
    }
}

/// The read model for the API, the UI, the CLI and metrics: runs and their
/// events, pages of approvals, counts, stuck claims. Reads only.
#[async_trait]
pub trait Queries: Send + Sync + 'static {
    /// How many of `agent_id`'s runs have `status` (for the start-up log).
    async fn count_runs(&self, agent_id: &str, status: RunStatus) -> StoreResult<u64>;

    /// `agent_id`'s runs counted by status: every status, in
    /// [`RunStatus::ALL`] order, zero or not (`GET /metrics`). This default
    /// counts one status at a time; SQLite and PostgreSQL read the runs
    /// once, grouped.
    async fn count_runs_by_status(&self, agent_id: &str) -> StoreResult<Vec<(RunStatus, u64)>> {
        let mut counts = Vec::with_capacity(RunStatus::ALL.len());
        for &status in RunStatus::ALL {
            counts.push((status, self.count_runs(agent_id, status).await?));
        }
        Ok(counts)
    }

    async fn list_pending(&self, query: &PendingQuery) -> StoreResult<PendingPage>;

    /// Approval records of any status, filtered (see [`ApprovalQuery`]),
    /// newest first by [`approval_order_at`](super::approval_order_at) then key, one page at a time:
    /// the inbox (PENDING) and the history (every other status). Overdue
    /// PENDING records are listed, and filtered, as EXPIRED.
    async fn list_approvals(&self, query: &ApprovalQuery) -> StoreResult<ApprovalPage>;

    /// `agent_id`'s unexpired PENDING approvals at `now`, counted by step
    /// id (`GET /metrics`). This default pages through
    /// [`Queries::list_pending`]; SQLite and PostgreSQL count in one
    /// grouped query instead.
    async fn count_pending_by_step(
        &self,
        agent_id: &str,
        now: DateTime<Utc>,
    ) -> StoreResult<std::collections::BTreeMap<String, u64>> {
        count_pending_by(self, agent_id, now, |record| Some(record.step_id)).await
    }

    /// `agent_id`'s unexpired PENDING pauses at `now` (gate requests
    /// belong to no version), counted by the spec hash they paused under:
    /// what waits on versions other than the
    /// served one (`GET /metrics`, `serve`'s start-up log). This default
    /// pages through [`Queries::list_pending`]; SQLite and PostgreSQL
    /// count in one grouped query instead.
    async fn count_pending_by_spec(
        &self,
        agent_id: &str,
        now: DateTime<Utc>,
    ) -> StoreResult<std::collections::BTreeMap<String, u64>> {
        count_pending_by(self, agent_id, now, |record| {
            record.paused_under().map(str::to_string)
        })
        .await
    }

    /// Decided approvals whose run never reached a final state: `stuck` (a
    /// step was in flight when its process died), or still `running` after
    /// the claim with no live lease at `now` (its driver stopped and no
    /// process recovered it yet; one with a live lease is running, never
    /// stuck), newest decision first.
    async fn list_stuck(
        &self,
        agent_id: Option<&str>,
        now: DateTime<Utc>,
    ) -> StoreResult<Vec<StuckClaim>>;

    async fn get_run(&self, run_id: &str) -> StoreResult<Option<RunRecord>>;

    /// [`Queries::get_run`] without the input (`{}` in its place): what a
    /// run view reads, since it does not show the input, which may be
    /// wide (tollgate issue 41).
    async fn get_run_outline(&self, run_id: &str) -> StoreResult<Option<RunRecord>> {
        self.get_run(run_id).await
    }

    /// Runs newest first (`created_at`, then id), one page at a time.
    async fn list_runs(&self, query: &RunQuery) -> StoreResult<RunsPage>;

    /// The run's events with `seq > after_seq`, in order.
    async fn run_events(&self, run_id: &str, after_seq: u64) -> StoreResult<Vec<Event>>;
}

/// Keys claimed at most once at a time: dedupe keys of signed requests and
/// scheduler ticks ([`KeyClaim`]).
#[async_trait]
pub trait Keys: Send + Sync + 'static {
    /// Claim a dedupe (or scheduler tick) key for `owner` until
    /// `expires_at`. True when this caller got it: the key was free or its
    /// previous claim expired.
    async fn claim_key(
        &self,
        key: &str,
        owner: &str,
        now: DateTime<Utc>,
        expires_at: DateTime<Utc>,
    ) -> StoreResult<bool>;

    /// Release a key `owner` claimed (a failed run lets a retry through). A
    /// claim that expired and was taken over by someone else is left alone.
    async fn release_key(&self, key: &str, owner: &str) -> StoreResult<()>;
}

/// The spec versions runs started under (`tollgate_specs`), one row per
/// hash: what a pause that waits across a deploy needs to name (and show)
/// the version it paused under.
#[async_trait]
pub trait SpecVersions: Send + Sync + 'static {
    /// Record that `version` was seen at `version.last_seen`. The first
    /// record of a hash inserts it whole; every later one only moves
    /// `last_seen` forward (never back), and never rewrites the canonical
    /// text, the source or `first_seen`. Concurrent records of one hash,
    /// in any process, all succeed and leave one row.
    async fn record_spec_version(&self, version: &SpecVersion) -> StoreResult<()>;

    /// The version stored under exactly `hash`.
    async fn get_spec_version(&self, hash: &str) -> StoreResult<Option<SpecVersion>>;

    /// The stored versions (of `agent_id`, or all), newest first by
    /// `first_seen` then hash, each with its PENDING approvals unexpired at
    /// `now` and its runs that are not over.
    async fn list_spec_versions(
        &self,
        agent_id: Option<&str>,
        now: DateTime<Utc>,
    ) -> StoreResult<Vec<SpecVersionUse>>;
}

/// What a store is and can do: its description, whether it can be written
/// now (health checks, start-up), and its capabilities (one kernel, a change
/// feed, notifications).
#[async_trait]
pub trait Health: Send + Sync + 'static {
    /// A short description for logs and errors (never contains credentials).
    fn describe(&self) -> String;

    /// Whether every process that can share this store runs on one
    /// kernel: a SQLite file (its locks and shared memory work on one host
    /// only) or memory. Then a run owner with this host's name and another
    /// boot id ran before a reboot and is dead; on a store shared across
    /// machines it may be another machine of the same name. The default
    /// assumes the store is shared across machines.
    fn one_kernel(&self) -> bool {
        false
    }

    /// Whether the store can take writes now, for a health check. Changes
    /// nothing when all is well (GET never changes state): a store writes
    /// a probe only after a write failed, to find out whether it recovered.
    async fn check_writable(&self) -> StoreResult<()> {
        Ok(())
    }

    /// One real committed write that leaves no trace in the data: what a
    /// server does before it starts, so that it never serves a store it
    /// cannot write. Also runs the store's full integrity check where it has
    /// one (SQLite's quick check, however large the file).
    async fn verify_writable(&self) -> StoreResult<()> {
        Ok(())
    }

    /// How this store pushes approval changes made by any process, if it
    /// can (PostgreSQL LISTEN/NOTIFY). `None`: watchers poll it.
    fn change_feed(&self) -> Option<Arc<dyn feed::ChangeFeed>> {
        None
    }

    /// Where this store keeps the chat messages announcing approvals
    /// ([`NotificationStore`](super::NotificationStore)); `None` for a store that keeps none, which
    /// then cannot serve a spec with Slack notifications.
    fn notifications(self: Arc<Self>) -> Option<SharedNotifications> {
        None
    }

    /// What this process's one writer connection did so far, for a store
    /// that writes through one (SQLite: see its group commit); `None` for a
    /// store whose writes go through a pool (PostgreSQL).
    fn writer_stats(&self) -> Option<WriterStats> {
        None
    }
}

/// Totals since the store was opened of what its one writer connection did
/// (see [`Health::writer_stats`]): how many writes shared each commit, and
/// how busy the writer was. A writer busy nearly all the time is what
/// bounds the store's write rate.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WriterStats {
    /// Write transactions committed (one fsync each at `synchronous=FULL`).
    pub commits: u64,
    /// Write operations run in those transactions and in those that failed
    /// to commit: concurrent writes share one transaction.
    pub writes: u64,
    /// Time the connection spent in write transactions, from `BEGIN` to
    /// the end of `COMMIT` or `ROLLBACK`.
    pub busy: Duration,
    /// Of `busy`, the time in `COMMIT`: writing the WAL, its fsync, and any
    /// checkpoint SQLite runs then.
    pub committing: Duration,
}

/// Everything a store is: the sum of the concepts, implemented for every
/// type that implements each of them. Code that needs one concept only
/// takes that trait; [`SharedStore`] holds the whole store.
pub trait StateStore:
    RunLog + Approvals + Votes + Queries + Keys + SpecVersions + Outbox + Health
{
    /// This store as its read model only: what the inbox, the metrics and
    /// the other readers take, so they cannot write. (The runtime's Rust
    /// version predates coercing `dyn StateStore` to `dyn Queries`.)
    fn queries(&self) -> &dyn Queries;
}

impl<T: RunLog + Approvals + Votes + Queries + Keys + SpecVersions + Outbox + Health> StateStore
    for T
{
    fn queries(&self) -> &dyn Queries {
        self
    }
}

pub type SharedStore = Arc<dyn StateStore>;

/// The default of the `count_pending_by_*` queries: page through
/// [`Queries::list_pending`] and count each record under `group(record)`.
async fn count_pending_by<Q: Queries + ?Sized>(
    store: &Q,
    agent_id: &str,
    now: DateTime<Utc>,
    // The group a record counts in; `None`: not counted.
    group: impl Fn(ApprovalRecord) -> Option<String>,
) -> StoreResult<std::collections::BTreeMap<String, u64>> {
    let mut counts = std::collections::BTreeMap::new();
    let mut query = PendingQuery {
        agent_id: Some(agent_id.to_string()),
        now,
        limit: 500,
        cursor: None,
    };
    loop {
        let page = store.list_pending(&query).await?;
        for record in page.approvals {
            if let Some(group) = group(record) {
                *counts.entry(group).or_insert(0) += 1;
            }
        }
        match page.next_cursor {
            Some(cursor) => query.cursor = Some(cursor),
            None => return Ok(counts),
        }
    }
}
