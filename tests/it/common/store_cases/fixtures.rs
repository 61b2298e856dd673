//! The builders every case module shares: the test clock, a run and its
//! pending record, the events of a pause, claims and their outcomes, a
//! driven run's lease. A helper only one concept uses lives with its cases.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use super::prelude::*;

pub const SPEC: &str = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
pub const OTHER_SPEC: &str = "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb";

/// The test clock: `at(s)` is `s` seconds after a fixed instant
/// (2026-03-01T09:00:00.123456Z). Generic because the root package does not
/// depend on chrono: the record field being filled names the type
/// (`DateTime<Utc>` converts from `SystemTime`).
pub fn at<T: From<SystemTime>>(seconds: u64) -> T {
    const BASE_SECS: u64 = 1_772_355_600;
    let t = UNIX_EPOCH + Duration::from_secs(BASE_SECS + seconds) + Duration::from_micros(123_456);
    T::from(t)
}

pub const TTL: u64 = 3600;

pub fn run_record(run_id: &str, agent: &str, created: u64) -> RunRecord {
    RunRecord {
        id: run_id.into(),
        agent_id: agent.into(),
        spec_hash: SPEC.into(),
        status: RunStatus::Running,
        input: json!({"ticket": 42, "note": "ünïcode ✓"}).into(),
        trigger: json!({"kind": "webhook", "headers": {"Content-Type": "application/json"}}),
        outputs: Map::new(),
        error: None,
        created_at: at(created),
        updated_at: at(created),
        owner: None,
        lease_until: None,
    }
}

pub fn pending_record(key: &str, run_id: &str, agent: &str, created: u64) -> ApprovalRecord {
    let mut outputs = Map::new();
    outputs.insert("lookup".into(), json!({"customer": "c-1", "balance": 12.5}));
    ApprovalRecord {
        key: key.into(),
        run_id: run_id.into(),
        agent_id: agent.into(),
        spec_hash: SPEC.into(),
        step_index: 2,
        step_id: "refund".into(),
        phase: Phase::Before,
        message: Some("Refund 30 EUR to c-1?".into()),
        payload: json!({"amount": 30, "currency": "EUR", "nested": [1, {"a": null}]}),
        outputs,
        input: json!({"ticket": 42, "note": "ünïcode ✓"}).into(),
        trigger: json!({"kind": "webhook", "headers": {"Content-Type": "application/json"}}),
        status: ApprovalStatus::Pending,
        decision_data: None,
        decided_by: None,
        decided_at: None,
        created_at: at(created),
        expires_at: at(created + TTL),
        roster: None,
        origin: tollgate_runtime::pending_approval::ApprovalOrigin::Pause,
    }
}

pub(super) fn event(run_id: &str, seq: u64, when: u64, kind: EventKind) -> Event {
    Event {
        run_id: run_id.into(),
        seq,
        at: at(when),
        kind,
    }
}

pub(super) fn started(run: &RunRecord) -> EventKind {
    EventKind::RunStarted {
        agent: run.agent_id.clone(),
        spec_hash: run.spec_hash.clone(),
        input: run.input.clone(),
    }
}

pub(super) fn awaiting(record: &ApprovalRecord) -> EventKind {
    EventKind::awaiting(record)
}

/// A run created at `created` and paused at once with `key`: events 1
/// (run_started) and 2 (awaiting_approval).
pub async fn paused_run(
    store: &dyn StateStore,
    key: &str,
    agent: &str,
    created: u64,
) -> ApprovalRecord {
    paused_with(store, key, agent, created, |_| {}).await
}

/// A run created at `created` and paused with `key`, its record shaped by
/// `shape` first (another step, message or expiry).
pub(super) async fn paused_with(
    store: &dyn StateStore,
    key: &str,
    agent: &str,
    created: u64,
    shape: impl FnOnce(&mut ApprovalRecord),
) -> ApprovalRecord {
    let run_id = format!("run-{key}");
    let run = run_record(&run_id, agent, created);
    store
        .create_run(&run, &[event(&run_id, 1, created, started(&run))])
        .await
        .expect("create run");
    let mut record = pending_record(key, &run_id, agent, created);
    shape(&mut record);
    pause(store, &record, 2).await;
    record
}

/// The sequence numbers of a run's events, in the order the store gives.
pub(super) async fn event_seqs(store: &dyn StateStore, run_id: &str) -> Vec<u64> {
    store
        .run_events(run_id, 0)
        .await
        .expect("events")
        .iter()
        .map(|e| e.seq)
        .collect()
}

pub(super) async fn pause(store: &dyn StateStore, record: &ApprovalRecord, seq: u64) {
    pause_routed(store, record, seq, NoticeRoutes::default()).await
}

/// As [`pause`], its notices going to `routes`.
pub(super) async fn pause_routed(
    store: &dyn StateStore,
    record: &ApprovalRecord,
    seq: u64,
    routes: NoticeRoutes,
) {
    let when = record.created_at;
    let pause = Pause {
        record: record.clone(),
        at: when,
        owner: None,
        routes,
    };
    let ev = Event {
        run_id: record.run_id.clone(),
        seq,
        at: when,
        kind: awaiting(record),
    };
    store.pause_run(&pause, &[ev]).await.expect("pause run");
}

pub fn approve(key: &str, by: &str, now: u64) -> Claim {
    claim(
        key,
        Decision::Approve {
            reason: Some("looks right".into()),
        },
        by,
        now,
        SPEC,
    )
}

pub fn claim(key: &str, decision: Decision, by: &str, now: u64, spec: &str) -> Claim {
    Claim {
        input: None,
        key: key.into(),
        decision,
        decided_by: by.into(),
        now: at(now),
        spec_hash: spec.into(),
        pinned: false,
        timeout: None,
        then: AfterClaim::Release,
    }
}

pub(super) fn keys(records: &[ApprovalRecord]) -> Vec<String> {
    records.iter().map(|r| r.key.clone()).collect()
}

pub(super) async fn all_pending(
    store: &dyn StateStore,
    now: u64,
    agent: Option<&str>,
) -> Vec<String> {
    let page = store
        .list_pending(&PendingQuery {
            agent_id: agent.map(str::to_string),
            now: at(now),
            limit: 1000,
            cursor: None,
        })
        .await
        .expect("list pending");
    keys(&page.approvals)
}

pub(super) fn lease(owner: &str, until: u64) -> Lease {
    Lease {
        owner: owner.into(),
        until: at(until),
    }
}

/// A run created `running`, driven by `owner` until `until`.
pub(super) async fn driven_run(
    store: &dyn StateStore,
    run_id: &str,
    owner: &str,
    until: u64,
) -> RunRecord {
    let mut run = run_record(run_id, "agent", 0);
    run.owner = Some(owner.into());
    run.lease_until = Some(at(until));
    store
        .create_run(&run, &[event(run_id, 1, 0, started(&run))])
        .await
        .expect("create run");
    run
}

pub(super) fn cancel(run_id: &str, by: &str, now: u64) -> CancelRun {
    CancelRun {
        run_id: run_id.into(),
        by: by.into(),
        reason: Some("not needed".into()),
        now: at(now),
    }
}
