//! The driver's writes through a store outage, on a memory store behind a
//! wrapper that fails chosen operations: N failures then the store answers,
//! a write that committed but whose answer was lost, a store that never
//! comes back.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use serde_json::{Value, json};

use crate::domain::events::{Event, EventKind};
use crate::domain::pending_approval::{ApprovalMove, ApprovalRecord, Claim, Moved};
use crate::domain::run_state::{JournalEntry, Lease, OwnedRun, RunRecord, RunStatus};
use crate::domain::spec::{Spec, ToolSpec};
use crate::domain::spec_version::{SpecVersion, SpecVersionUse};
use crate::engine::run::{AgentRun, RunError};
use crate::engine::tools::{CallContext, ModelRequest, ToolError, ToolInvoker};
use crate::store::*;

/// A memory store whose operations fail on demand, as a store that is
/// down or full answers: [`StoreError::Unavailable`].
struct Flaky {
    inner: SharedStore,
    /// Operations refused (nothing written) this many more times.
    refuse: Mutex<HashMap<&'static str, usize>>,
    /// Operations that write, then answer as if the connection dropped.
    lose_answer: Mutex<HashMap<&'static str, usize>>,
    /// Every operation fails (reads too) while set.
    down: AtomicBool,
    /// How many times each operation was asked for, refused or not.
    calls: Mutex<HashMap<&'static str, usize>>,
    /// Another process's change, landing right after the next `get_run`
    /// read (the caller then holds a row that is already stale).
    after_get_run: Mutex<Option<RunTransition>>,
}

impl Flaky {
    fn new() -> Arc<Flaky> {
        Arc::new(Flaky {
            inner: crate::store::open("memory:", SqliteOptions::default()).expect("memory"),
            refuse: Mutex::new(HashMap::new()),
            lose_answer: Mutex::new(HashMap::new()),
            down: AtomicBool::new(false),
            calls: Mutex::new(HashMap::new()),
            after_get_run: Mutex::new(None),
        })
    }

    fn refuse(&self, op: &'static str, times: usize) {
        self.refuse.lock().unwrap().insert(op, times);
    }

    fn lose_answer(&self, op: &'static str, times: usize) {
        self.lose_answer.lock().unwrap().insert(op, times);
    }

    fn take(map: &Mutex<HashMap<&'static str, usize>>, op: &str) -> bool {
        let mut map = map.lock().unwrap();
        match map.get_mut(op) {
            Some(n) if *n > 0 => {
                *n -= 1;
                true
            }
            _ => false,
        }
    }

    fn calls(&self, op: &'static str) -> usize {
        self.calls.lock().unwrap().get(op).copied().unwrap_or(0)
    }

    fn before(&self, op: &'static str) -> StoreResult<()> {
        *self.calls.lock().unwrap().entry(op).or_insert(0) += 1;
        if self.down.load(Ordering::SeqCst) || Flaky::take(&self.refuse, op) {
            return Err(StoreError::Unavailable(format!(
                "{op}: database disk image is full (SQLITE_FULL) (test)"
            )));
        }
        Ok(())
    }

    fn after<T>(&self, op: &str, answer: StoreResult<T>) -> StoreResult<T> {
        if answer.is_ok() && Flaky::take(&self.lose_answer, op) {
            return Err(StoreError::Unavailable(format!(
                "{op}: no connection to the database: connection closed (test)"
            )));
        }
        answer
    }
}

#[async_trait]
impl RunLog for Flaky {
    async fn create_run(&self, run: &RunRecord, events: &[Event]) -> StoreResult<()> {
        self.before("create_run")?;
        let answer = self.inner.create_run(run, events).await;
        self.after("create_run", answer)
    }

    async fn create_run_once(
        &self,
        once: &KeyClaim,
        run: &RunRecord,
        events: &[Event],
    ) -> StoreResult<bool> {
        self.before("create_run_once")?;
        let answer = self.inner.create_run_once(once, run, events).await;
        self.after("create_run_once", answer)
    }

    async fn append_events(&self, run_id: &str, events: &[Event]) -> StoreResult<()> {
        self.before("append_events")?;
        let answer = self.inner.append_events(run_id, events).await;
        self.after("append_events", answer)
    }

    async fn record_step(
        &self,
        owner: &str,
        entry: &JournalEntry,
        events: &[Event],
    ) -> StoreResult<()> {
        self.before("record_step")?;
        let answer = self.inner.record_step(owner, entry, events).await;
        self.after("record_step", answer)
    }

    async fn run_journal(&self, run_id: &str) -> StoreResult<Vec<JournalEntry>> {
        self.before("run_journal")?;
        let answer = self.inner.run_journal(run_id).await;
        self.after("run_journal", answer)
    }

    async fn renew_lease(&self, run_id: &str, lease: &Lease) -> StoreResult<bool> {
        self.before("renew_lease")?;
        let answer = self.inner.renew_lease(run_id, lease).await;
        self.after("renew_lease", answer)
    }

    async fn claim_orphans(
        &self,
        agent_id: &str,
        lease: &Lease,
        now: DateTime<Utc>,
        limit: usize,
    ) -> StoreResult<Vec<OwnedRun>> {
        self.before("claim_orphans")?;
        let answer = self.inner.claim_orphans(agent_id, lease, now, limit).await;
        self.after("claim_orphans", answer)
    }

    async fn transition_run(&self, change: &RunTransition) -> StoreResult<(RunRecord, Event)> {
        self.before("transition_run")?;
        let answer = self.inner.transition_run(change).await;
        self.after("transition_run", answer)
    }

    async fn pause_run(&self, pause: &Pause, events: &[Event]) -> StoreResult<()> {
        self.before("pause_run")?;
        let answer = self.inner.pause_run(pause, events).await;
        self.after("pause_run", answer)
    }

    async fn end_run(&self, end: &RunEnd, events: &[Event]) -> StoreResult<()> {
        self.before("end_run")?;
        let answer = self.inner.end_run(end, events).await;
        self.after("end_run", answer)
    }

    async fn create_run_at(
        &self,
        run: &RunRecord,
        first: FirstWrite<'_>,
        events: &[Event],
    ) -> StoreResult<()> {
        self.before("create_run_at")?;
        let answer = self.inner.create_run_at(run, first, events).await;
        self.after("create_run_at", answer)
    }
}

#[async_trait]
impl Votes for Flaky {
    async fn cast_vote(&self, cast: &CastVote) -> StoreResult<VoteOutcome> {
        self.before("cast_vote")?;
        let answer = self.inner.cast_vote(cast).await;
        self.after("cast_vote", answer)
    }

    async fn votes(&self, key: &str) -> StoreResult<Vec<crate::domain::policy::Vote>> {
        self.before("votes")?;
        let answer = self.inner.votes(key).await;
        self.after("votes", answer)
    }
}

#[async_trait]
impl Approvals for Flaky {
    async fn claim(&self, claim: &Claim) -> StoreResult<Claimed> {
        self.before("claim")?;
        let answer = self.inner.claim(claim).await;
        self.after("claim", answer)
    }

    async fn move_approval(&self, to_move: &ApprovalMove) -> StoreResult<Moved> {
        self.before("move_approval")?;
        let answer = self.inner.move_approval(to_move).await;
        self.after("move_approval", answer)
    }

    async fn get_approval(&self, key: &str) -> StoreResult<Option<ApprovalRecord>> {
        self.before("get_approval")?;
        let answer = self.inner.get_approval(key).await;
        self.after("get_approval", answer)
    }

    async fn pending_for_run(
        &self,
        run_id: &str,
        now: DateTime<Utc>,
    ) -> StoreResult<Option<ApprovalRecord>> {
        self.before("pending_for_run")?;
        let answer = self.inner.pending_for_run(run_id, now).await;
        self.after("pending_for_run", answer)
    }

    async fn latest_approval_key(&self, run_id: &str) -> StoreResult<Option<String>> {
        self.before("latest_approval_key")?;
        let answer = self.inner.latest_approval_key(run_id).await;
        self.after("latest_approval_key", answer)
    }

    async fn expire_due(&self, now: DateTime<Utc>) -> StoreResult<Vec<ApprovalRecord>> {
        self.before("expire_due")?;
        let answer = self.inner.expire_due(now).await;
        self.after("expire_due", answer)
    }

    async fn due_timeouts(
        &self,
        now: DateTime<Utc>,
        limit: usize,
    ) -> StoreResult<Vec<ApprovalRecord>> {
        self.before("due_timeouts")?;
        let answer = self.inner.due_timeouts(now, limit).await;
        self.after("due_timeouts", answer)
    }

    async fn nudge_due(
        &self,
        now: DateTime<Utc>,
        limit: usize,
    ) -> StoreResult<Vec<crate::store::Nudged>> {
        self.before("nudge_due")?;
        let answer = self.inner.nudge_due(now, limit).await;
        self.after("nudge_due", answer)
    }

    async fn cancel_run(&self, cancel: &CancelRun) -> StoreResult<Cancelled> {
        self.before("cancel_run")?;
        let answer = self.inner.cancel_run(cancel).await;
        self.after("cancel_run", answer)
    }
}

#[async_trait]
impl Queries for Flaky {
    async fn count_runs(&self, agent_id: &str, status: RunStatus) -> StoreResult<u64> {
        self.before("count_runs")?;
        let answer = self.inner.count_runs(agent_id, status).await;
        self.after("count_runs", answer)
    }

    async fn list_pending(&self, query: &PendingQuery) -> StoreResult<PendingPage> {
        self.before("list_pending")?;
        let answer = self.inner.list_pending(query).await;
        self.after("list_pending", answer)
    }

    async fn list_approvals(&self, query: &ApprovalQuery) -> StoreResult<ApprovalPage> {
        self.before("list_approvals")?;
        let answer = self.inner.list_approvals(query).await;
        self.after("list_approvals", answer)
    }

    async fn list_stuck(
        &self,
        agent_id: Option<&str>,
        now: DateTime<Utc>,
    ) -> StoreResult<Vec<StuckClaim>> {
        self.before("list_stuck")?;
        let answer = self.inner.list_stuck(agent_id, now).await;
        self.after("list_stuck", answer)
    }

    async fn get_run(&self, run_id: &str) -> StoreResult<Option<RunRecord>> {
        self.before("get_run")?;
        let answer = self.inner.get_run(run_id).await;
        let racing = self.after_get_run.lock().unwrap().take();
        if let Some(change) = racing {
            self.inner
                .transition_run(&change)
                .await
                .expect("the racing change lands");
        }
        self.after("get_run", answer)
    }

    async fn list_runs(&self, query: &RunQuery) -> StoreResult<RunsPage> {
        self.before("list_runs")?;
        let answer = self.inner.list_runs(query).await;
        self.after("list_runs", answer)
    }

    async fn run_events(&self, run_id: &str, after_seq: u64) -> StoreResult<Vec<Event>> {
        self.before("run_events")?;
        let answer = self.inner.run_events(run_id, after_seq).await;
        self.after("run_events", answer)
    }
}

#[async_trait]
impl Keys for Flaky {
    async fn claim_key(
        &self,
        key: &str,
        owner: &str,
        now: DateTime<Utc>,
        expires_at: DateTime<Utc>,
    ) -> StoreResult<bool> {
        self.before("claim_key")?;
        let answer = self.inner.claim_key(key, owner, now, expires_at).await;
        self.after("claim_key", answer)
    }

    async fn release_key(&self, key: &str, owner: &str) -> StoreResult<()> {
        self.before("release_key")?;
        let answer = self.inner.release_key(key, owner).await;
        self.after("release_key", answer)
    }
}

#[async_trait]
impl SpecVersions for Flaky {
    async fn record_spec_version(&self, version: &SpecVersion) -> StoreResult<()> {
        self.before("record_spec_version")?;
        let answer = self.inner.record_spec_version(version).await;
        self.after("record_spec_version", answer)
    }

    async fn get_spec_version(&self, hash: &str) -> StoreResult<Option<SpecVersion>> {
        self.before("get_spec_version")?;
        let answer = self.inner.get_spec_version(hash).await;
        self.after("get_spec_version", answer)
    }

    async fn list_spec_versions(
        &self,
        agent_id: Option<&str>,
        now: DateTime<Utc>,
    ) -> StoreResult<Vec<SpecVersionUse>> {
        self.before("list_spec_versions")?;
        let answer = self.inner.list_spec_versions(agent_id, now).await;
        self.after("list_spec_versions", answer)
    }
}

/// The outbox is passed through untouched: no test here fails it.
#[async_trait]
impl Outbox for Flaky {
    async fn lease_notices(
        &self,
        owner: &str,
        now: DateTime<Utc>,
        until: DateTime<Utc>,
        limit: usize,
    ) -> StoreResult<Vec<OutboxNotice>> {
        self.inner.lease_notices(owner, now, until, limit).await
    }

    async fn settle_notice(&self, id: &str, owner: &str, write: &NoticeWrite) -> StoreResult<bool> {
        self.inner.settle_notice(id, owner, write).await
    }

    async fn list_notices(&self, query: &NoticeQuery) -> StoreResult<Vec<OutboxNotice>> {
        self.inner.list_notices(query).await
    }

    async fn get_notice(&self, id: &str) -> StoreResult<Option<OutboxNotice>> {
        self.inner.get_notice(id).await
    }

    async fn routes_of(
        &self,
        key: &str,
    ) -> StoreResult<Option<crate::domain::notices::NoticeRoutes>> {
        self.inner.routes_of(key).await
    }

    async fn retry_notices(&self, which: &RetryNotices, now: DateTime<Utc>) -> StoreResult<u64> {
        self.inner.retry_notices(which, now).await
    }

    async fn outbox_stats(&self) -> StoreResult<OutboxStats> {
        self.inner.outbox_stats().await
    }

    async fn disable_endpoint(&self, endpoint: &DisabledEndpoint) -> StoreResult<()> {
        self.inner.disable_endpoint(endpoint).await
    }

    async fn disabled_endpoints(&self) -> StoreResult<Vec<DisabledEndpoint>> {
        self.inner.disabled_endpoints().await
    }
}

#[async_trait]
impl Health for Flaky {
    fn describe(&self) -> String {
        self.inner.describe()
    }
}

/// Counts calls; answers at once.
#[derive(Default)]
struct Counting(AtomicUsize);

#[async_trait]
impl ToolInvoker for Counting {
    async fn call_tool(
        &self,
        _tool: &ToolSpec,
        _args: &Value,
        _call: &CallContext,
    ) -> Result<Value, ToolError> {
        let n = self.0.fetch_add(1, Ordering::SeqCst);
        Ok(json!({"id": format!("call-{n}")}))
    }

    async fn call_model(
        &self,
        _request: ModelRequest<'_>,
        _call: &CallContext,
    ) -> Result<Value, ToolError> {
        unreachable!("no model step")
    }
}

const SPEC: &str = r#"
version: 1
agent: outage
tools:
  ship:
    http: { method: POST, url: "https://ship.example/ship" }
steps:
  - id: ship
    tool: ship
    with: {}
  - id: review
    approval:
      message: "shipped {{ steps.ship.output.id }}?"
  - id: again
    tool: ship
    with: {}
"#;

fn agent(store: &Arc<Flaky>, tools: &Arc<Counting>) -> AgentRun {
    let spec = Arc::new(Spec::parse(SPEC, "agent.yaml").expect("spec"));
    let shared: SharedStore = store.clone();
    AgentRun::new(spec, shared).with_tools(tools.clone())
}

/// Seqs 1, 2, 3...: no event stored twice, none missing.
async fn assert_events_numbered_once(store: &Flaky, run_id: &str) -> Vec<Event> {
    let events = store.inner.run_events(run_id, 0).await.expect("events");
    let seqs: Vec<u64> = events.iter().map(|e| e.seq).collect();
    let expected: Vec<u64> = (1..=events.len() as u64).collect();
    assert_eq!(seqs, expected, "{events:#?}");
    events
}

/// The spec's version is written by the first run of a process only, on
/// every path that starts one; a refused write refuses that run (nothing
/// stored, nothing called) and the next start writes it.
#[tokio::test]
async fn the_spec_version_is_stored_once_before_the_first_run_and_retried_after_a_refusal() {
    let store = Flaky::new();
    let tools = Arc::new(Counting::default());
    let agent = agent(&store, &tools);
    store.refuse("record_spec_version", 1);
    let refused = agent.start(json!({}), json!({})).await;
    assert!(
        matches!(&refused, Err(RunError::Store(e)) if e.to_string().contains("SQLITE_FULL")),
        "{:?}",
        refused.map(|o| o.status)
    );
    assert_eq!(tools.0.load(Ordering::SeqCst), 0, "nothing was called");
    assert_eq!(store.calls("create_run"), 0, "no run was stored");
    assert_eq!(store.calls("create_run_at"), 0, "no run was stored");

    // A clone shares what its original stored: the next starts, on every
    // path, write the version once between them.
    let clone = agent.clone();
    let first = clone.start(json!({}), json!({})).await.expect("start");
    assert_eq!(first.status, RunStatus::AwaitingApproval);
    agent.start(json!({}), json!({})).await.expect("start");
    let created = agent.create(json!({}), json!({})).await.expect("create");
    agent.drive_created(created).await.expect("driven");
    let once = crate::store::KeyClaim {
        key: "tick:outage:1".into(),
        owner: "scheduler".into(),
        now: crate::support::time::now(),
        expires_at: crate::support::time::add(crate::support::time::now(), Duration::from_secs(60)),
    };
    let ticked = agent.create_once(json!({}), json!({}), &once).await;
    assert!(ticked.expect("create once").is_some());
    assert_eq!(
        store.calls("record_spec_version"),
        2,
        "the refused write and one more, for four runs"
    );
    let stored = store
        .inner
        .get_spec_version(agent.spec().hash.as_str())
        .await
        .expect("get")
        .expect("stored");
    assert_eq!(stored.source, SPEC);
    let listed = store
        .inner
        .list_spec_versions(Some("outage"), crate::support::time::now())
        .await
        .expect("list");
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].pending_approvals, 3, "{listed:?}");
    assert_eq!(listed[0].live_runs, 4, "{listed:?}");
}

#[tokio::test]
async fn every_driver_write_refused_a_few_times_goes_through_once_the_store_answers() {
    let store = Flaky::new();
    let tools = Arc::new(Counting::default());
    let agent = agent(&store, &tools);
    // The journal of the call's start and of its result, the pause, the
    // run's creation: each refused three times.
    for op in ["create_run", "record_step", "pause_run", "end_run"] {
        store.refuse(op, 3);
    }
    let created = agent.create(json!({}), json!({})).await;
    assert!(
        created.is_err(),
        "a run's creation is the caller's to retry"
    );
    store.refuse("create_run", 0);
    let created = agent.create(json!({}), json!({})).await.expect("create");
    let run_id = created.run_id().to_string();
    let paused = agent.drive_created(created).await.expect("driven");
    assert_eq!(paused.status, RunStatus::AwaitingApproval, "{paused:?}");
    assert_eq!(tools.0.load(Ordering::SeqCst), 1, "called once");
    let journal = store.inner.run_journal(&run_id).await.expect("journal");
    assert!(journal[0].output.is_some(), "the call's result is kept");
    // The decision, then the second call's writes and the end, refused too.
    for op in ["record_step", "end_run"] {
        store.refuse(op, 3);
    }
    let key = paused.pending.expect("pending").key;
    let done = agent
        .resume_by_key(
            &key,
            crate::domain::pending_approval::Decision::Approve { reason: None },
            "alice",
        )
        .await
        .expect("resumed");
    assert_eq!(done.status, RunStatus::Completed, "{done:?}");
    assert_eq!(tools.0.load(Ordering::SeqCst), 2, "each call once");
    assert_events_numbered_once(&store, &run_id).await;
    let run = store.inner.get_run(&run_id).await.unwrap().unwrap();
    assert_eq!(run.status, RunStatus::Completed);
}

#[tokio::test]
async fn a_write_that_landed_although_its_answer_was_lost_is_not_done_again() {
    let store = Flaky::new();
    let tools = Arc::new(Counting::default());
    let agent = agent(&store, &tools);
    // Each of these commits, then answers as a dropped connection would.
    store.lose_answer("record_step", 2);
    store.lose_answer("pause_run", 1);
    let outcome = agent.start(json!({}), json!({})).await.expect("start");
    assert_eq!(outcome.status, RunStatus::AwaitingApproval, "{outcome:?}");
    assert_eq!(tools.0.load(Ordering::SeqCst), 1);
    let events = assert_events_numbered_once(&store, &outcome.run_id).await;
    let pauses = events
        .iter()
        .filter(|e| e.kind.name() == "awaiting_approval")
        .count();
    assert_eq!(pauses, 1, "{events:#?}");
    let key = store
        .inner
        .latest_approval_key(&outcome.run_id)
        .await
        .expect("key");
    assert_eq!(
        key,
        outcome.pending.map(|p| p.key),
        "the one pause is stored"
    );
}

#[tokio::test]
async fn a_store_that_stays_down_is_waited_for_no_longer_than_the_patience() {
    let store = Flaky::new();
    let tools = Arc::new(Counting::default());
    let agent = agent(&store, &tools).with_store_patience(Duration::from_millis(300));
    let created = agent.create(json!({}), json!({})).await.expect("create");
    store.down.store(true, Ordering::SeqCst);
    let driven = tokio::time::timeout(Duration::from_secs(20), agent.drive_created(created))
        .await
        .expect("gives up within its bound");
    match driven {
        Err(RunError::Store(e)) => assert!(e.is_retryable(), "{e}"),
        other => panic!("expected the store's error, got {other:?}"),
    }
    assert_eq!(
        tools.0.load(Ordering::SeqCst),
        0,
        "no call without its journal"
    );
}

/// `runs retry` racing `runs fail` on one stuck run, the fail landing just
/// after the retry read the run: the retry must lose (409), not revive the
/// run the operator just failed. (Found by the HTTP race test: the retry
/// read the run, then its events, so a fail between the two left it a
/// stale `stuck` row and a current last event.)
#[tokio::test]
async fn a_retry_never_revives_a_run_failed_while_it_was_reading() {
    let store = Flaky::new();
    let tools = Arc::new(Counting::default());
    let agent = agent(&store, &tools);
    let paused = agent.start(json!({}), json!({})).await.expect("start");
    let run_id = paused.run_id.clone();
    let last = |events: &[Event]| events.last().map_or(0, |e| e.seq);
    let events = store.inner.run_events(&run_id, 0).await.expect("events");
    let stuck = RunTransition {
        run_id: run_id.clone(),
        from: vec![RunStatus::AwaitingApproval],
        to: RunStatus::Stuck,
        error: Some("in flight at a crash".into()),
        lease: None,
        event: EventKind::RunStuck {
            step: "ship".into(),
            reason: "in flight at a crash".into(),
        },
        at: crate::support::time::now(),
        if_last_seq: Some(last(&events)),
    };
    store.inner.transition_run(&stuck).await.expect("stuck");

    let events = store.inner.run_events(&run_id, 0).await.expect("events");
    let fail = RunTransition {
        run_id: run_id.clone(),
        from: vec![RunStatus::Stuck],
        to: RunStatus::Failed,
        error: Some("failed by bob: racing".into()),
        lease: None,
        event: EventKind::RunFailed {
            error: "failed by bob: racing".into(),
            by: Some("bob".into()),
            reason: Some("racing".into()),
        },
        at: crate::support::time::now(),
        if_last_seq: Some(last(&events)),
    };
    *store.after_get_run.lock().unwrap() = Some(fail);

    let retried = agent.claim_retry(&run_id, "alice", false).await;
    assert!(
        matches!(
            &retried,
            Err(RunError::Store(StoreError::WrongRunStatus { .. }))
        ),
        "the retry must lose to the fail: {:?}",
        retried.map(|owned| owned.run.status)
    );
    let run = store
        .inner
        .get_run(&run_id)
        .await
        .expect("get")
        .expect("run");
    assert_eq!(run.status, RunStatus::Failed, "the operator's fail stands");
    assert_eq!(
        assert_events_numbered_once(&store, &run_id)
            .await
            .last()
            .map(|e| e.kind.name()),
        Some("run_failed")
    );
}
