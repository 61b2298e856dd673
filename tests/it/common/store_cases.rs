//! The store contract (DESIGN §3-§4), written once and run against every
//! store. A backend provides an async `open` returning a [`TestStore`] and
//! calls [`store_conformance_tests!`] inside its own module:
//!
//! ```ignore
//! mod sqlite {
//!     async fn open() -> TestStore { ... }
//!     store_conformance_tests!(open);
//! }
//! ```
//!
//! Every case drives the store through the `StateStore` trait only, with an
//! explicit clock (every method takes `now`), so the cases are deterministic
//! and never sleep.

#![allow(dead_code)]

use std::any::Any;
use std::collections::HashSet;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::{Map, json};
use tollgate_runtime::events::{Event, EventKind};
use tollgate_runtime::json_depth::READABLE_DEPTH;
use tollgate_runtime::pending_approval::{
    AfterClaim, ApprovalError, ApprovalRecord, ApprovalStatus, Claim, Decision, Phase,
};
use tollgate_runtime::run_state::{JournalEntry, Lease, RunRecord, RunStatus};
use tollgate_runtime::store::{
    ApprovalQuery, CancelRun, FirstWrite, KeyClaim, Pause, PendingQuery, RunEnd, RunQuery,
    RunTransition, SharedStore, StateStore, StoreError, StoreErrorKind,
};

/// A store under test plus whatever must outlive it (a temp dir, a schema).
pub struct TestStore {
    pub store: SharedStore,
    _keep: Option<Box<dyn Any + Send>>,
}

impl TestStore {
    pub fn new(store: SharedStore) -> TestStore {
        TestStore { store, _keep: None }
    }

    pub fn keeping(store: SharedStore, keep: impl Any + Send) -> TestStore {
        TestStore {
            store,
            _keep: Some(Box::new(keep)),
        }
    }
}

/// One `#[tokio::test]` per case, each on a fresh store from `$open`.
/// Include this file with `#[macro_use]` to use it.
macro_rules! store_conformance_tests {
    ($open:path) => {
        store_conformance_tests!(@cases $open;
            create_pause_claim_end_round_trip_keeps_every_field,
            claim_of_an_unknown_key_is_not_found,
            claim_after_expiry_is_approval_expired,
            second_claim_is_already_resolved_saying_who_what_when,
            approve_under_another_spec_is_spec_changed_and_stays_pending,
            reject_is_allowed_under_another_spec,
            modify_stores_the_new_payload_in_decision_data,
            concurrent_claims_of_one_key_have_exactly_one_winner,
            expiry_sweep_expires_once_and_ends_the_run,
            expired_records_are_neither_listed_nor_claimable,
            a_runs_latest_approval_key_is_found_whatever_its_status,
            pending_pages_are_newest_first_without_duplicates,
            pending_list_filters_by_agent,
            pending_approvals_are_counted_by_step,
            malformed_cursor_is_rejected,
            stuck_lists_decided_runs_that_never_finished,
            claim_key_is_exclusive_until_released_or_expired,
            events_come_back_in_seq_order_after_a_seq,
            writes_to_an_unknown_run_are_run_not_found,
            creating_a_run_twice_is_refused,
            a_run_stored_at_its_pause_is_one_atomic_write,
            a_run_stored_at_its_end_is_one_atomic_write,
            a_refused_first_write_stores_nothing,
            nul_characters_are_kept_in_every_field,
            a_time_past_the_year_9999_is_refused_before_any_write,
            json_nested_deeper_than_a_store_reads_back_is_refused_before_any_write,
            runs_are_listed_newest_first_by_page_and_filtered_by_agent_and_status,
            a_malformed_runs_cursor_is_rejected,
            cancelling_a_waiting_run_cancels_its_approval_in_one_write,
            cancelling_a_running_run_ends_it_cancelled,
            a_final_run_cannot_be_cancelled_and_an_unknown_one_is_not_found,
            a_cancel_racing_claims_has_exactly_one_winner,
            a_driver_keeps_its_run_until_its_lease_runs_out_then_loses_every_write,
            runs_without_a_lease_are_orphans_with_one_winner_among_many_claimers,
            a_dead_owners_runs_are_taken_over_before_their_lease_ends_with_one_winner,
            the_journal_keeps_each_steps_start_then_its_output,
            a_claim_makes_the_claimer_the_owner_and_a_pause_lets_go,
            a_claim_that_ends_the_run_ends_it_in_the_same_write,
            a_claim_with_a_planned_end_writes_both_or_nothing,
            a_run_created_once_claims_its_key_in_the_same_write_or_not_at_all,
            runs_are_counted_by_status,
            an_operators_change_applies_only_from_the_statuses_it_names_once,
            a_retry_and_a_fail_racing_on_a_stuck_run_have_exactly_one_winner,
            approvals_are_listed_newest_first_by_decision_else_creation,
            approval_pages_follow_a_cursor_across_equal_times,
            approvals_filter_by_status_step_and_text_alone_and_combined,
            an_overdue_pending_approval_is_listed_as_expired,
            like_metacharacters_in_the_text_are_matched_literally,
            a_text_filter_fills_its_pages_past_rows_only_its_sql_let_through,
            another_agents_approvals_are_not_listed,
            a_malformed_approvals_cursor_is_rejected,
        );
    };
    (@cases $open:path; $($case:ident),* $(,)?) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
            async fn $case() {
                let under_test = $open().await;
                $crate::common::store_cases::$case(under_test.store.clone()).await;
            }
        )*
    };
}

// ------------------------------------------------------------------ fixtures

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
        input: json!({"ticket": 42, "note": "ünïcode ✓"}),
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
        input: json!({"ticket": 42, "note": "ünïcode ✓"}),
        trigger: json!({"kind": "webhook", "headers": {"Content-Type": "application/json"}}),
        status: ApprovalStatus::Pending,
        decision_data: None,
        decided_by: None,
        decided_at: None,
        created_at: at(created),
        expires_at: at(created + TTL),
    }
}

fn event(run_id: &str, seq: u64, when: u64, kind: EventKind) -> Event {
    Event {
        run_id: run_id.into(),
        seq,
        at: at(when),
        kind,
    }
}

fn started(run: &RunRecord) -> EventKind {
    EventKind::RunStarted {
        agent: run.agent_id.clone(),
        spec_hash: run.spec_hash.clone(),
        input: run.input.clone(),
    }
}

fn awaiting(record: &ApprovalRecord) -> EventKind {
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
    let run_id = format!("run-{key}");
    let run = run_record(&run_id, agent, created);
    store
        .create_run(&run, &[event(&run_id, 1, created, started(&run))])
        .await
        .expect("create run");
    let record = pending_record(key, &run_id, agent, created);
    pause(store, &record, 2).await;
    record
}

async fn pause(store: &dyn StateStore, record: &ApprovalRecord, seq: u64) {
    let when = record.created_at;
    let pause = Pause {
        record: record.clone(),
        at: when,
        owner: None,
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
        key: key.into(),
        decision,
        decided_by: by.into(),
        now: at(now),
        spec_hash: spec.into(),
        then: AfterClaim::Release,
    }
}

fn approval_error(result: Result<impl std::fmt::Debug, StoreError>) -> ApprovalError {
    match result {
        Err(StoreError::Approval(e)) => e,
        other => panic!("expected an approval error, got {other:?}"),
    }
}

fn keys(records: &[ApprovalRecord]) -> Vec<String> {
    records.iter().map(|r| r.key.clone()).collect()
}

async fn all_pending(store: &dyn StateStore, now: u64, agent: Option<&str>) -> Vec<String> {
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

// --------------------------------------------------------------------- cases

pub async fn create_pause_claim_end_round_trip_keeps_every_field(store: SharedStore) {
    let run = run_record("run-1", "billing", 0);
    let first = event("run-1", 1, 0, started(&run));
    store
        .create_run(&run, std::slice::from_ref(&first))
        .await
        .expect("create");
    assert_eq!(
        store.get_run("run-1").await.expect("get run"),
        Some(run.clone())
    );

    let record = pending_record("key-1", "run-1", "billing", 5);
    let paused_at = event("run-1", 2, 5, awaiting(&record));
    store
        .pause_run(
            &Pause {
                record: record.clone(),
                at: at(5),
                owner: None,
            },
            std::slice::from_ref(&paused_at),
        )
        .await
        .expect("pause");
    assert_eq!(
        store.get_approval("key-1").await.expect("get"),
        Some(record.clone())
    );
    assert_eq!(
        store
            .pending_for_run("run-1", at(6))
            .await
            .expect("pending for run"),
        Some(record.clone())
    );
    let waiting = store.get_run("run-1").await.expect("get run").expect("run");
    assert_eq!(waiting.status, RunStatus::AwaitingApproval);
    assert_eq!(waiting.outputs, record.outputs);
    assert_eq!(Some(waiting.updated_at), Some(at(5)));

    let claimed = store
        .claim(&approve("key-1", "alice", 60))
        .await
        .expect("claim");
    let decided = ApprovalRecord {
        status: ApprovalStatus::Approved,
        decision_data: Some(json!({"reason": "looks right"})),
        decided_by: Some("alice".into()),
        decided_at: Some(at(60)),
        ..record.clone()
    };
    assert_eq!(claimed.record, decided);
    let resolved = event(
        "run-1",
        3,
        60,
        EventKind::ApprovalResolved {
            key: "key-1".into(),
            decision: "approve".into(),
            decided_by: "alice".into(),
            reason: Some("looks right".into()),
        },
    );
    assert_eq!(claimed.event, resolved);
    assert_eq!(
        store.get_approval("key-1").await.expect("get"),
        Some(decided)
    );
    let resumed = store.get_run("run-1").await.expect("get run").expect("run");
    assert_eq!(
        (resumed.status, resumed.updated_at),
        (RunStatus::Running, at(60))
    );
    assert_eq!(
        store
            .pending_for_run("run-1", at(61))
            .await
            .expect("pending"),
        None
    );

    let mut outputs = record.outputs.clone();
    outputs.insert("refund".into(), json!({"ok": true}));
    let completed = event(
        "run-1",
        4,
        61,
        EventKind::RunCompleted {
            outputs: outputs.clone(),
        },
    );
    store
        .end_run(
            &RunEnd {
                run_id: "run-1".into(),
                status: RunStatus::Completed,
                outputs: outputs.clone(),
                error: None,
                at: at(61),
                owner: None,
            },
            std::slice::from_ref(&completed),
        )
        .await
        .expect("end");
    let ended = RunRecord {
        status: RunStatus::Completed,
        outputs,
        updated_at: at(61),
        owner: None,
        lease_until: None,
        ..run
    };
    assert_eq!(store.get_run("run-1").await.expect("get run"), Some(ended));
    assert_eq!(
        store.run_events("run-1", 0).await.expect("events"),
        vec![first, paused_at, resolved, completed]
    );
}

pub async fn claim_of_an_unknown_key_is_not_found(store: SharedStore) {
    let err = approval_error(store.claim(&approve("no-such-key", "alice", 1)).await);
    assert_eq!(
        err,
        ApprovalError::NotFound {
            key: "no-such-key".into()
        }
    );
    assert_eq!(err.code(), "approval_not_found");
}

pub async fn claim_after_expiry_is_approval_expired(store: SharedStore) {
    let record = paused_run(store.as_ref(), "k", "agent", 0).await;
    // Exactly at expires_at the record is already expired.
    let err = approval_error(store.claim(&approve("k", "alice", TTL)).await);
    assert_eq!(
        err,
        ApprovalError::Expired {
            key: "k".into(),
            expired_at: record.expires_at
        }
    );
    assert_eq!(err.code(), "approval_expired");
    let still = store.get_approval("k").await.expect("get").expect("record");
    assert_eq!(still.status, ApprovalStatus::Pending);
}

pub async fn second_claim_is_already_resolved_saying_who_what_when(store: SharedStore) {
    paused_run(store.as_ref(), "k", "agent", 0).await;
    let reject = claim(
        "k",
        Decision::Reject {
            reason: Some("too much".into()),
        },
        "bob",
        10,
        SPEC,
    );
    let first = store.claim(&reject).await.expect("first claim");
    assert_eq!(first.record.status, ApprovalStatus::Rejected);
    assert_eq!(first.record.reason(), Some("too much"));

    let err = approval_error(store.claim(&approve("k", "alice", 20)).await);
    assert_eq!(
        err,
        ApprovalError::AlreadyResolved {
            key: "k".into(),
            status: ApprovalStatus::Rejected,
            decided_by: Some("bob".into()),
            decided_at: Some(at(10)),
        }
    );
    let message = err.to_string();
    assert!(
        message.contains("rejected") && message.contains("bob"),
        "{message}"
    );
    // The loser changed nothing: still bob's decision, one resolved event.
    assert_eq!(
        store.get_approval("k").await.expect("get"),
        Some(first.record)
    );
    let resolved = store
        .run_events("run-k", 0)
        .await
        .expect("events")
        .into_iter()
        .filter(|e| e.kind.name() == "approval_resolved")
        .count();
    assert_eq!(resolved, 1);
}

pub async fn approve_under_another_spec_is_spec_changed_and_stays_pending(store: SharedStore) {
    let record = paused_run(store.as_ref(), "k", "agent", 0).await;
    let changed = claim(
        "k",
        Decision::Approve { reason: None },
        "alice",
        10,
        OTHER_SPEC,
    );
    let err = approval_error(store.claim(&changed).await);
    assert_eq!(
        err,
        ApprovalError::SpecChanged {
            key: "k".into(),
            paused_with: SPEC[..12].to_string(),
            current: OTHER_SPEC[..12].to_string(),
        }
    );
    let modify = claim(
        "k",
        Decision::Modify {
            payload: json!({}),
            reason: None,
        },
        "alice",
        10,
        OTHER_SPEC,
    );
    assert_eq!(
        approval_error(store.claim(&modify).await).code(),
        "spec_changed"
    );
    // Untouched: restoring the spec makes it approvable again.
    assert_eq!(store.get_approval("k").await.expect("get"), Some(record));
    store
        .claim(&approve("k", "alice", 11))
        .await
        .expect("approve under the paused spec");
}

pub async fn reject_is_allowed_under_another_spec(store: SharedStore) {
    paused_run(store.as_ref(), "k", "agent", 0).await;
    let reject = claim(
        "k",
        Decision::Reject { reason: None },
        "carol",
        10,
        OTHER_SPEC,
    );
    let claimed = store.claim(&reject).await.expect("reject under any spec");
    assert_eq!(claimed.record.status, ApprovalStatus::Rejected);
    assert_eq!(claimed.record.decision_data, None);
    assert_eq!(
        claimed.record.spec_hash, SPEC,
        "the record keeps the spec it paused with"
    );
}

pub async fn modify_stores_the_new_payload_in_decision_data(store: SharedStore) {
    paused_run(store.as_ref(), "k", "agent", 0).await;
    let modify = claim(
        "k",
        Decision::Modify {
            payload: json!({"amount": 20, "currency": "EUR"}),
            reason: Some("partial refund".into()),
        },
        "dana",
        10,
        SPEC,
    );
    store.claim(&modify).await.expect("modify");
    let record = store.get_approval("k").await.expect("get").expect("record");
    assert_eq!(record.status, ApprovalStatus::Modified);
    assert_eq!(
        record.decision_data,
        Some(json!({"reason": "partial refund", "payload": {"amount": 20, "currency": "EUR"}}))
    );
    assert_eq!(
        record.effective_payload(),
        &json!({"amount": 20, "currency": "EUR"})
    );
    assert_eq!(
        record.payload,
        json!({"amount": 30, "currency": "EUR", "nested": [1, {"a": null}]}),
        "the original payload stays for the audit trail"
    );
}

pub async fn concurrent_claims_of_one_key_have_exactly_one_winner(store: SharedStore) {
    paused_run(store.as_ref(), "k", "agent", 0).await;
    let contenders: Vec<_> = (0..32)
        .map(|i| {
            let store = Arc::clone(&store);
            tokio::spawn(async move { store.claim(&approve("k", &format!("user-{i}"), 10)).await })
        })
        .collect();
    let mut winners = Vec::new();
    for handle in contenders {
        match handle.await.expect("claim task") {
            Ok(claimed) => winners.push(claimed),
            Err(StoreError::Approval(ApprovalError::AlreadyResolved { .. })) => {}
            Err(other) => panic!("a losing claim must be already_resolved, got {other:?}"),
        }
    }
    assert_eq!(winners.len(), 1, "exactly one winner");
    let record = store.get_approval("k").await.expect("get").expect("record");
    assert_eq!(record.decided_by, winners[0].record.decided_by);
    let events = store.run_events("run-k", 0).await.expect("events");
    let seqs: Vec<u64> = events.iter().map(|e| e.seq).collect();
    assert_eq!(seqs, vec![1, 2, 3], "one approval_resolved event");
}

pub async fn expiry_sweep_expires_once_and_ends_the_run(store: SharedStore) {
    let due = paused_run(store.as_ref(), "due", "agent", 0).await;
    paused_run(store.as_ref(), "fresh", "agent", 100).await;
    let now = TTL + 50; // past "due", before "fresh"

    let sweeps: Vec<_> = (0..2)
        .map(|_| {
            let store = Arc::clone(&store);
            tokio::spawn(async move { store.expire_due(at(now)).await })
        })
        .collect();
    let mut expired = Vec::new();
    for sweep in sweeps {
        expired.extend(sweep.await.expect("sweep task").expect("sweep"));
    }
    assert_eq!(
        keys(&expired),
        vec!["due"],
        "expired exactly once across sweeps"
    );
    assert_eq!(
        expired[0],
        ApprovalRecord {
            status: ApprovalStatus::Expired,
            ..due
        }
    );
    assert!(
        store
            .expire_due(at(now))
            .await
            .expect("sweep again")
            .is_empty()
    );

    let run = store
        .get_run("run-due")
        .await
        .expect("get run")
        .expect("run");
    assert_eq!((run.status, run.updated_at), (RunStatus::Expired, at(now)));
    let events = store.run_events("run-due", 2).await.expect("events");
    assert_eq!(
        events,
        vec![event(
            "run-due",
            3,
            now,
            EventKind::RunExpired { key: "due".into() }
        )]
    );
    let fresh = store
        .get_approval("fresh")
        .await
        .expect("get")
        .expect("record");
    assert_eq!(fresh.status, ApprovalStatus::Pending);
    let fresh_run = store.get_run("run-fresh").await.expect("get").expect("run");
    assert_eq!(fresh_run.status, RunStatus::AwaitingApproval);
}

pub async fn expired_records_are_neither_listed_nor_claimable(store: SharedStore) {
    paused_run(store.as_ref(), "old", "agent", 0).await;
    paused_run(store.as_ref(), "new", "agent", 1000).await;
    let now = TTL + 1;

    // Overdue but not yet swept: already invisible and refused.
    assert_eq!(all_pending(store.as_ref(), now, None).await, vec!["new"]);
    assert_eq!(
        store
            .pending_for_run("run-old", at(now))
            .await
            .expect("pending"),
        None
    );
    assert_eq!(
        approval_error(store.claim(&approve("old", "alice", now)).await).code(),
        "approval_expired"
    );
    let reject = claim("old", Decision::Reject { reason: None }, "alice", now, SPEC);
    assert_eq!(
        approval_error(store.claim(&reject).await).code(),
        "approval_expired"
    );

    // Swept: the same.
    store.expire_due(at(now)).await.expect("sweep");
    assert_eq!(all_pending(store.as_ref(), now, None).await, vec!["new"]);
    assert_eq!(
        approval_error(store.claim(&approve("old", "alice", now)).await).code(),
        "approval_expired"
    );
    assert!(
        store
            .list_stuck(None, at(1_000))
            .await
            .expect("stuck")
            .is_empty()
    );
}

pub async fn a_runs_latest_approval_key_is_found_whatever_its_status(store: SharedStore) {
    let latest = |run_id: &'static str| {
        let store = Arc::clone(&store);
        async move {
            store
                .latest_approval_key(run_id)
                .await
                .expect("latest approval key")
        }
    };
    // No such run, and a run that never paused.
    assert_eq!(latest("run-nobody").await, None);
    let run = run_record("run-calm", "agent", 0);
    store
        .create_run(&run, &[event("run-calm", 1, 0, started(&run))])
        .await
        .expect("create run");
    assert_eq!(latest("run-calm").await, None);

    // Waiting: its pending record. Another run's records are not its own.
    paused_run(store.as_ref(), "first", "agent", 10).await;
    paused_run(store.as_ref(), "elsewhere", "agent", 20).await;
    assert_eq!(latest("run-first").await.as_deref(), Some("first"));

    // Decided: still that record (a decision by run id is then refused as
    // already resolved, not as "nothing to decide").
    store
        .claim(&approve("first", "alice", 30))
        .await
        .expect("claim");
    assert_eq!(latest("run-first").await.as_deref(), Some("first"));

    // Paused again at a later gate: the later record, found among the run's
    // others (also when a clock gives two gates one created_at: the later
    // step wins). Then expired: still it.
    let mut second = pending_record("second", "run-first", "agent", 40);
    second.step_index = 3;
    pause(store.as_ref(), &second, 4).await;
    assert_eq!(latest("run-first").await.as_deref(), Some("second"));
    store
        .claim(&approve("second", "alice", 41))
        .await
        .expect("claim second");
    let mut third = pending_record("a-third", "run-first", "agent", 40);
    third.step_index = 4;
    pause(store.as_ref(), &third, 6).await;
    assert_eq!(latest("run-first").await.as_deref(), Some("a-third"));
    store.expire_due(at(40 + TTL)).await.expect("sweep");
    assert_eq!(
        store
            .get_approval("a-third")
            .await
            .expect("get")
            .map(|r| r.status),
        Some(ApprovalStatus::Expired)
    );
    assert_eq!(latest("run-first").await.as_deref(), Some("a-third"));
    assert_eq!(latest("run-elsewhere").await.as_deref(), Some("elsewhere"));
}

pub async fn pending_pages_are_newest_first_without_duplicates(store: SharedStore) {
    // Three records share each created_at, so the key breaks the tie.
    let mut expected = Vec::new();
    for i in 0..25u64 {
        let key = format!("key-{i:02}");
        paused_run(store.as_ref(), &key, "agent", i / 3).await;
        expected.push((i / 3, key));
    }
    expected.sort_by(|a, b| b.cmp(a));
    let expected: Vec<String> = expected.into_iter().map(|(_, k)| k).collect();

    let mut seen = Vec::new();
    let mut sizes = Vec::new();
    let mut cursor = None;
    loop {
        let page = store
            .list_pending(&PendingQuery {
                agent_id: None,
                now: at(100),
                limit: 10,
                cursor: cursor.clone(),
            })
            .await
            .expect("page");
        sizes.push(page.approvals.len());
        seen.extend(keys(&page.approvals));
        match page.next_cursor {
            Some(next) => cursor = Some(next),
            None => break,
        }
    }
    assert_eq!(sizes, vec![10, 10, 5]);
    assert_eq!(
        seen.iter().collect::<HashSet<_>>().len(),
        25,
        "no duplicates"
    );
    assert_eq!(seen, expected, "newest first by (created_at, key)");
}

pub async fn pending_list_filters_by_agent(store: SharedStore) {
    paused_run(store.as_ref(), "a1", "alpha", 1).await;
    paused_run(store.as_ref(), "b1", "beta", 2).await;
    paused_run(store.as_ref(), "a2", "alpha", 3).await;
    assert_eq!(
        all_pending(store.as_ref(), 10, Some("alpha")).await,
        vec!["a2", "a1"]
    );
    assert_eq!(
        all_pending(store.as_ref(), 10, Some("beta")).await,
        vec!["b1"]
    );
    assert!(
        all_pending(store.as_ref(), 10, Some("gamma"))
            .await
            .is_empty()
    );
    assert_eq!(
        all_pending(store.as_ref(), 10, None).await,
        vec!["a2", "b1", "a1"]
    );

    // A cursor keeps the filter's order too.
    let first = store
        .list_pending(&PendingQuery {
            agent_id: Some("alpha".into()),
            now: at(10),
            limit: 1,
            cursor: None,
        })
        .await
        .expect("page 1");
    let second = store
        .list_pending(&PendingQuery {
            agent_id: Some("alpha".into()),
            now: at(10),
            limit: 1,
            cursor: first.next_cursor.clone(),
        })
        .await
        .expect("page 2");
    assert_eq!(
        (keys(&first.approvals), keys(&second.approvals)),
        (vec!["a2".into()], vec!["a1".into()])
    );
    assert_eq!(second.next_cursor, None);
}

/// What `GET /metrics` reads: one agent's unexpired PENDING records by
/// step; decided, expired and other agents' records are not counted.
pub async fn pending_approvals_are_counted_by_step(store: SharedStore) {
    let store = store.as_ref();
    paused_run(store, "a1", "alpha", 1).await;
    paused_run(store, "a2", "alpha", 2).await;
    store
        .claim(&approve("a2", "alice", 5))
        .await
        .expect("claim a2");
    paused_run(store, "a3", "alpha", 3).await;
    let run = run_record("run-r1", "alpha", 4);
    store
        .create_run(&run, &[event("run-r1", 1, 4, started(&run))])
        .await
        .expect("create run");
    let mut review = pending_record("r1", "run-r1", "alpha", 4);
    review.step_id = "review".into();
    review.step_index = 3;
    pause(store, &review, 2).await;
    paused_run(store, "b1", "beta", 5).await;

    let counts = |agent: &'static str, now: u64| async move {
        store
            .count_pending_by_step(agent, at(now))
            .await
            .expect("count pending")
            .into_iter()
            .collect::<Vec<(String, u64)>>()
    };
    let named = |pairs: &[(&str, u64)]| -> Vec<(String, u64)> {
        pairs.iter().map(|(s, n)| (s.to_string(), *n)).collect()
    };
    assert_eq!(
        counts("alpha", 10).await,
        named(&[("refund", 2), ("review", 1)])
    );
    assert_eq!(counts("beta", 10).await, named(&[("refund", 1)]));
    assert_eq!(counts("gamma", 10).await, named(&[]));
    // a1 expires at 1 + TTL: past it, a1 is no longer counted.
    assert_eq!(
        counts("alpha", 1 + TTL).await,
        named(&[("refund", 1), ("review", 1)])
    );
}

pub async fn malformed_cursor_is_rejected(store: SharedStore) {
    let result = store
        .list_pending(&PendingQuery {
            agent_id: None,
            now: at(0),
            limit: 10,
            cursor: Some("not-a-cursor".into()),
        })
        .await;
    assert!(
        matches!(result, Err(StoreError::InvalidCursor(_))),
        "{result:?}"
    );
}

pub async fn stuck_lists_decided_runs_that_never_finished(store: SharedStore) {
    // Claimed, never ended: stuck.
    paused_run(store.as_ref(), "stuck", "alpha", 0).await;
    store
        .claim(&approve("stuck", "alice", 10))
        .await
        .expect("claim");
    // Claimed and ended: fine.
    paused_run(store.as_ref(), "done", "alpha", 0).await;
    store
        .claim(&approve("done", "alice", 11))
        .await
        .expect("claim");
    store
        .end_run(
            &RunEnd {
                run_id: "run-done".into(),
                status: RunStatus::Completed,
                outputs: Map::new(),
                error: None,
                at: at(12),
                owner: None,
            },
            &[],
        )
        .await
        .expect("end");
    // Still waiting: fine.
    paused_run(store.as_ref(), "waiting", "alpha", 0).await;
    // Claimed, then paused again at a later gate which was claimed too and
    // never finished: only the latest record is stuck.
    let first = paused_run(store.as_ref(), "twice-1", "beta", 0).await;
    store
        .claim(&approve("twice-1", "bob", 20))
        .await
        .expect("claim");
    let second = pending_record("twice-2", &first.run_id, "beta", 30);
    pause(store.as_ref(), &second, 4).await;
    store
        .claim(&approve("twice-2", "bob", 40))
        .await
        .expect("claim");
    // Claimed, then paused again and waiting: the run is not running.
    paused_run(store.as_ref(), "again-1", "beta", 0).await;
    store
        .claim(&approve("again-1", "bob", 20))
        .await
        .expect("claim");
    let again = pending_record("again-2", "run-again-1", "beta", 30);
    pause(store.as_ref(), &again, 4).await;

    let stuck = store.list_stuck(None, at(1_000)).await.expect("stuck");
    let found: Vec<(String, RunStatus)> = stuck
        .iter()
        .map(|s| (s.record.key.clone(), s.run_status))
        .collect();
    assert_eq!(
        found,
        vec![
            ("twice-2".into(), RunStatus::Running),
            ("stuck".into(), RunStatus::Running)
        ],
        "most recently decided first"
    );
    assert_eq!(Some(stuck[1].run_updated_at), Some(at(10)));
    assert_eq!(stuck[1].record.decided_by.as_deref(), Some("alice"));

    let alpha = store
        .list_stuck(Some("alpha"), at(1_000))
        .await
        .expect("stuck");
    assert_eq!(
        alpha
            .iter()
            .map(|s| s.record.key.as_str())
            .collect::<Vec<_>>(),
        ["stuck"]
    );
}

pub async fn claim_key_is_exclusive_until_released_or_expired(store: SharedStore) {
    assert!(
        store
            .claim_key("dedupe:1", "run-a", at(0), at(60))
            .await
            .expect("first")
    );
    assert!(
        !store
            .claim_key("dedupe:1", "run-b", at(10), at(70))
            .await
            .expect("live claim")
    );
    assert!(
        store
            .claim_key("dedupe:2", "run-b", at(10), at(70))
            .await
            .expect("other key")
    );
    // Expiry is inclusive: at 60 the first claim is over and can be taken.
    assert!(
        store
            .claim_key("dedupe:1", "run-c", at(60), at(120))
            .await
            .expect("takeover")
    );
    assert!(
        !store
            .claim_key("dedupe:1", "run-d", at(100), at(200))
            .await
            .expect("taken over")
    );
    // The first owner's claim expired and was taken over: its release must
    // not free run-c's claim.
    store
        .release_key("dedupe:1", "run-a")
        .await
        .expect("stale release");
    assert!(
        !store
            .claim_key("dedupe:1", "run-d", at(100), at(200))
            .await
            .expect("still held by run-c")
    );
    store
        .release_key("dedupe:1", "run-c")
        .await
        .expect("release");
    assert!(
        store
            .claim_key("dedupe:1", "run-d", at(101), at(200))
            .await
            .expect("after release")
    );
    store
        .release_key("never-claimed", "run-a")
        .await
        .expect("releasing a free key is fine");

    let racers: Vec<_> = (0..16)
        .map(|_| {
            let store = Arc::clone(&store);
            tokio::spawn(async move { store.claim_key("tick", "node", at(0), at(60)).await })
        })
        .collect();
    let mut won = 0;
    for racer in racers {
        won += usize::from(racer.await.expect("task").expect("claim key"));
    }
    assert_eq!(won, 1, "exactly one racer gets a free key");
}

pub async fn events_come_back_in_seq_order_after_a_seq(store: SharedStore) {
    let run = run_record("run-e", "agent", 0);
    store
        .create_run(&run, &[event("run-e", 1, 0, started(&run))])
        .await
        .expect("create");
    let steps: Vec<Event> = (2..=6)
        .map(|seq| {
            event(
                "run-e",
                seq,
                seq,
                EventKind::StepCompleted {
                    step: format!("s{seq}"),
                    index: seq as usize,
                    output: json!({"n": seq}),
                    replayed: seq == 3,
                },
            )
        })
        .collect();
    store
        .append_events("run-e", &steps[..2])
        .await
        .expect("append");
    store
        .append_events("run-e", &steps[2..])
        .await
        .expect("append");
    store
        .append_events("run-e", &[])
        .await
        .expect("append nothing");

    let all = store.run_events("run-e", 0).await.expect("events");
    assert_eq!(
        all.iter().map(|e| e.seq).collect::<Vec<_>>(),
        [1, 2, 3, 4, 5, 6]
    );
    assert_eq!(&all[1..], &steps[..]);
    let tail = store.run_events("run-e", 4).await.expect("tail");
    assert_eq!(tail, &steps[3..]);
    assert!(store.run_events("run-e", 6).await.expect("none").is_empty());
    assert!(
        store
            .run_events("run-e", u64::MAX)
            .await
            .expect("none")
            .is_empty()
    );
    assert!(
        store
            .run_events("no-such-run", 0)
            .await
            .expect("none")
            .is_empty()
    );
}

pub async fn writes_to_an_unknown_run_are_run_not_found(store: SharedStore) {
    let missing =
        |r: Result<(), StoreError>| matches!(r, Err(StoreError::RunNotFound(id)) if id == "ghost");
    assert!(missing(store.append_events("ghost", &[]).await));
    let record = pending_record("k", "ghost", "agent", 0);
    assert!(missing(
        store
            .pause_run(
                &Pause {
                    record,
                    at: at(0),
                    owner: None
                },
                &[]
            )
            .await
    ));
    assert!(missing(
        store
            .end_run(
                &RunEnd {
                    run_id: "ghost".into(),
                    status: RunStatus::Failed,
                    outputs: Map::new(),
                    error: Some("boom".into()),
                    at: at(0),
                    owner: None,
                },
                &[],
            )
            .await
    ));
    assert_eq!(
        store.get_approval("k").await.expect("get"),
        None,
        "nothing half-written"
    );
    assert_eq!(store.get_run("ghost").await.expect("get"), None);
}

pub async fn creating_a_run_twice_is_refused(store: SharedStore) {
    let run = run_record("run-d", "agent", 0);
    store.create_run(&run, &[]).await.expect("create");
    let again = store
        .create_run(&run_record("run-d", "other", 5), &[])
        .await;
    // A conflict, not a retryable failure: a watcher or retry loop must
    // not try it again.
    let kind = again.as_ref().err().map(StoreError::kind);
    assert_eq!(kind, Some(StoreErrorKind::Conflict), "{again:?}");
    assert_eq!(
        store.get_run("run-d").await.expect("get"),
        Some(run),
        "first run untouched"
    );
}

pub async fn a_run_stored_at_its_pause_is_one_atomic_write(store: SharedStore) {
    let run = run_record("run-p", "agent", 0);
    let record = pending_record("key-p", "run-p", "agent", 2);
    let events = vec![
        event("run-p", 1, 0, started(&run)),
        event("run-p", 2, 2, awaiting(&record)),
    ];
    let pause = Pause {
        record: record.clone(),
        at: at(2),
        owner: None,
    };
    store
        .create_run_at(&run, FirstWrite::Pause(&pause), &events)
        .await
        .expect("create at pause");
    let stored = store.get_run("run-p").await.expect("get run");
    assert_eq!(
        stored,
        Some(RunRecord {
            status: RunStatus::AwaitingApproval,
            outputs: record.outputs.clone(),
            updated_at: at(2),
            owner: None,
            lease_until: None,
            ..run
        })
    );
    assert_eq!(
        store.get_approval("key-p").await.expect("get"),
        Some(record.clone())
    );
    assert_eq!(
        all_pending(&*store, 3, None).await,
        vec!["key-p".to_string()]
    );
    assert_eq!(store.run_events("run-p", 0).await.expect("events"), events);
    // It is an ordinary pause from here on.
    store
        .claim(&approve("key-p", "alice", 4))
        .await
        .expect("claim");
}

pub async fn a_run_stored_at_its_end_is_one_atomic_write(store: SharedStore) {
    let run = run_record("run-e", "agent", 0);
    let mut outputs = Map::new();
    outputs.insert("greet".into(), json!({"text": "hi"}));
    let events = vec![
        event("run-e", 1, 0, started(&run)),
        event(
            "run-e",
            2,
            1,
            EventKind::RunCompleted {
                outputs: outputs.clone(),
            },
        ),
    ];
    let end = RunEnd {
        run_id: "run-e".into(),
        status: RunStatus::Completed,
        outputs: outputs.clone(),
        error: None,
        at: at(1),
        owner: None,
    };
    store
        .create_run_at(&run, FirstWrite::End(&end), &events)
        .await
        .expect("create at end");
    assert_eq!(
        store.get_run("run-e").await.expect("get run"),
        Some(RunRecord {
            status: RunStatus::Completed,
            outputs,
            updated_at: at(1),
            owner: None,
            lease_until: None,
            ..run
        })
    );
    assert_eq!(store.run_events("run-e", 0).await.expect("events"), events);
}

pub async fn a_refused_first_write_stores_nothing(store: SharedStore) {
    // The pause reuses a key that exists: the whole write is refused, and
    // neither the new run nor its events are stored.
    paused_run(&*store, "key-x", "agent", 0).await;
    let run = run_record("run-new", "agent", 5);
    let pause = Pause {
        record: pending_record("key-x", "run-new", "agent", 5),
        at: at(5),
        owner: None,
    };
    let refused = store
        .create_run_at(
            &run,
            FirstWrite::Pause(&pause),
            &[event("run-new", 1, 5, started(&run))],
        )
        .await;
    let kind = refused.as_ref().err().map(StoreError::kind);
    assert_eq!(kind, Some(StoreErrorKind::Conflict), "{refused:?}");
    assert_eq!(store.get_run("run-new").await.expect("get"), None);
    assert_eq!(
        store.run_events("run-new", 0).await.expect("events"),
        Vec::<Event>::new()
    );
    assert_eq!(
        store
            .get_approval("key-x")
            .await
            .expect("get")
            .map(|r| r.run_id),
        Some("run-key-x".to_string()),
        "the existing record is untouched"
    );
}

/// A NUL (`\u0000`) in anything a person or a downstream wrote: the run's
/// input and trigger, a gate's message and payload, the decider, the reason,
/// an edited payload, a run's outputs and error, its events. Every store
/// keeps it as it was given (PostgreSQL's jsonb and text would refuse it).
pub async fn nul_characters_are_kept_in_every_field(store: SharedStore) {
    let nul = "a\u{0}b";
    let mut run = run_record("run-nul", "agent", 0);
    run.input = json!({ "text": nul, nul: [nul] });
    run.trigger = json!({ "body": nul });
    store
        .create_run(&run, &[event("run-nul", 1, 0, started(&run))])
        .await
        .expect("a run whose input holds a NUL");
    assert_eq!(
        store.get_run("run-nul").await.expect("get"),
        Some(run.clone())
    );

    let mut record = pending_record("key-nul", "run-nul", "agent", 1);
    record.message = Some(format!("Refund {nul}?"));
    record.payload = json!({ "note": nul });
    record.input = run.input.clone();
    record.trigger = run.trigger.clone();
    record.outputs.insert("echo".into(), json!(nul));
    pause(&*store, &record, 2).await;
    assert_eq!(
        store.get_approval("key-nul").await.expect("get"),
        Some(record.clone())
    );
    let listed = store
        .list_pending(&PendingQuery {
            agent_id: None,
            now: at(2),
            limit: 10,
            cursor: None,
        })
        .await
        .expect("list");
    assert_eq!(listed.approvals, vec![record.clone()]);

    let decision = Decision::Modify {
        payload: json!({ "note": nul, "edited": true }),
        reason: Some(format!("because {nul}")),
    };
    let claimed = store
        .claim(&claim("key-nul", decision, nul, 3, SPEC))
        .await
        .expect("a decision whose decider, reason and payload hold a NUL");
    let stored = store
        .get_approval("key-nul")
        .await
        .expect("get")
        .expect("record");
    assert_eq!(stored, claimed.record);
    assert_eq!(stored.decided_by.as_deref(), Some(nul));
    assert_eq!(stored.reason(), Some(format!("because {nul}").as_str()));
    assert_eq!(
        stored.effective_payload(),
        &json!({ "note": nul, "edited": true })
    );

    let mut outputs = record.outputs.clone();
    outputs.insert("reply".into(), json!({ "body": nul }));
    let end = RunEnd {
        run_id: "run-nul".into(),
        status: RunStatus::Failed,
        outputs: outputs.clone(),
        error: Some(format!("downstream said {nul}")),
        at: at(4),
        owner: None,
    };
    let failed = event(
        "run-nul",
        claimed.event.seq + 1,
        4,
        EventKind::RunFailed {
            error: format!("downstream said {nul}"),
            by: None,
            reason: None,
        },
    );
    store
        .end_run(&end, std::slice::from_ref(&failed))
        .await
        .expect("an end whose outputs and error hold a NUL");
    let run = store.get_run("run-nul").await.expect("get").expect("run");
    assert_eq!(run.outputs, outputs);
    assert_eq!(
        run.error.as_deref(),
        Some(format!("downstream said {nul}").as_str())
    );
    let events = store.run_events("run-nul", 0).await.expect("events");
    assert_eq!(events.last(), Some(&failed));
    assert_eq!(events.len(), 4, "run_started, awaiting, resolved, failed");
}

/// Stored times have a four-digit year: one past 9999 could not be read
/// back (it would poison every listing and sweep), so every store refuses
/// it with a typed error, and stores nothing.
pub async fn a_time_past_the_year_9999_is_refused_before_any_write(store: SharedStore) {
    // 300,000,000,000 s after 2026: the year 11,532.
    let far: u64 = 300_000_000_000;
    let run = run_record("run-far", "agent", 0);
    let mut record = pending_record("key-far", "run-far", "agent", 0);
    record.expires_at = at(far);
    let pause = Pause {
        record: record.clone(),
        at: at(0),
        owner: None,
    };
    let refused = store
        .create_run_at(
            &run,
            FirstWrite::Pause(&pause),
            &[event("run-far", 1, 0, started(&run))],
        )
        .await;
    assert!(
        matches!(refused, Err(StoreError::OutOfRange(_))),
        "{refused:?}"
    );
    assert!(refused.unwrap_err().to_string().contains("9999-12-31"));
    assert_eq!(store.get_run("run-far").await.expect("get"), None);

    store
        .create_run(&run, &[event("run-far", 1, 0, started(&run))])
        .await
        .expect("create");
    let refused = store.pause_run(&pause, &[]).await;
    assert!(
        matches!(refused, Err(StoreError::OutOfRange(_))),
        "{refused:?}"
    );
    assert_eq!(store.get_approval("key-far").await.expect("get"), None);
    let run_now = store.get_run("run-far").await.expect("get").expect("run");
    assert_eq!(
        run_now.status,
        RunStatus::Running,
        "the refused pause changed nothing"
    );

    let refused = store
        .claim_key("dedupe:far", "run-far", at(0), at(far))
        .await;
    assert!(
        matches!(refused, Err(StoreError::OutOfRange(_))),
        "{refused:?}"
    );
    assert!(
        store
            .claim_key("dedupe:far", "run-far", at(0), at(60))
            .await
            .expect("claim"),
        "the refused claim took nothing"
    );
    // Listing and sweeping are unaffected.
    assert_eq!(all_pending(&*store, 1, None).await, Vec::<String>::new());
    store.expire_due(at(far / 2)).await.expect("sweep");
}

/// `n` arrays, one in the other, around `1`: JSON nested `n` levels deep.
fn nested(n: usize) -> serde_json::Value {
    let mut v = json!(1);
    for _ in 0..n {
        v = serde_json::Value::Array(vec![v]);
    }
    v
}

fn too_deep(result: Result<impl std::fmt::Debug, StoreError>) {
    match result {
        Err(StoreError::TooDeep { limit, .. }) => assert_eq!(limit, READABLE_DEPTH),
        other => panic!("expected TooDeep, got {other:?}"),
    }
}

/// Every store reads its JSON back with serde_json, which stops at 127
/// levels: a row nested deeper could never be read again (the run, its
/// events or its approval lost to every reader). So every store refuses to
/// write one, with a typed error, and writes nothing; at exactly the limit
/// everything round-trips.
pub async fn json_nested_deeper_than_a_store_reads_back_is_refused_before_any_write(
    store: SharedStore,
) {
    // At the limit: a run's input, and an event around an output.
    let mut run = run_record("run-deep", "agent", 0);
    run.input = nested(READABLE_DEPTH);
    let completed = |seq: u64, depth: usize| {
        event(
            "run-deep",
            seq,
            1,
            EventKind::StepCompleted {
                step: "s".into(),
                index: 0,
                output: nested(depth),
                replayed: false,
            },
        )
    };
    let first = completed(1, READABLE_DEPTH - 1);
    store
        .create_run(&run, std::slice::from_ref(&first))
        .await
        .expect("JSON at the limit is stored");
    assert_eq!(
        store.get_run("run-deep").await.expect("get"),
        Some(run.clone())
    );
    assert_eq!(
        store.run_events("run-deep", 0).await.expect("events"),
        vec![first.clone()]
    );

    // One level more, in each kind of write: refused, nothing changes.
    let mut deeper = run_record("run-deeper", "agent", 0);
    deeper.input = nested(READABLE_DEPTH + 1);
    too_deep(store.create_run(&deeper, &[]).await);
    let shallow = run_record("run-deeper", "agent", 0);
    too_deep(
        store
            .create_run(&shallow, &[event("run-deeper", 1, 0, started(&deeper))])
            .await,
    );
    assert_eq!(store.get_run("run-deeper").await.expect("get"), None);
    too_deep(
        store
            .append_events("run-deep", &[completed(2, READABLE_DEPTH)])
            .await,
    );
    let mut outputs = Map::new();
    outputs.insert("s".into(), nested(READABLE_DEPTH));
    let end = RunEnd {
        run_id: "run-deep".into(),
        status: RunStatus::Completed,
        outputs,
        error: None,
        at: at(2),
        owner: None,
    };
    too_deep(store.end_run(&end, &[]).await);
    too_deep(
        store
            .create_run_at(&shallow, FirstWrite::End(&end), &[])
            .await,
    );
    let mut record = pending_record("key-deep", "run-deep", "agent", 1);
    record.payload = nested(READABLE_DEPTH + 1);
    let refused = Pause {
        record: record.clone(),
        at: at(1),
        owner: None,
    };
    too_deep(store.pause_run(&refused, &[]).await);
    assert_eq!(store.get_approval("key-deep").await.expect("get"), None);
    let run_now = store.get_run("run-deep").await.expect("get").expect("run");
    assert_eq!(run_now, run, "the refused writes changed nothing");
    assert_eq!(
        store.run_events("run-deep", 0).await.expect("events"),
        vec![first.clone()]
    );

    // A decision whose edited payload would nest too deep in decision_data.
    // (Its `awaiting_approval` event wraps the payload once more.)
    let mut record = pending_record("key-deep", "run-deep", "agent", 1);
    record.payload = nested(READABLE_DEPTH - 1);
    pause(&*store, &record, 2).await;
    let decision = Decision::Modify {
        payload: nested(READABLE_DEPTH),
        reason: None,
    };
    too_deep(
        store
            .claim(&claim("key-deep", decision, "ann", 3, SPEC))
            .await,
    );
    let still = store
        .get_approval("key-deep")
        .await
        .expect("get")
        .expect("record");
    assert_eq!(still, record, "the refused claim left the record pending");
    assert_eq!(all_pending(&*store, 3, None).await, vec!["key-deep"]);
}

// ------------------------------------------------------------ durable runs

fn lease(owner: &str, until: u64) -> Lease {
    Lease {
        owner: owner.into(),
        until: at(until),
    }
}

/// A run created `running`, driven by `owner` until `until`.
async fn driven_run(store: &dyn StateStore, run_id: &str, owner: &str, until: u64) -> RunRecord {
    let mut run = run_record(run_id, "agent", 0);
    run.owner = Some(owner.into());
    run.lease_until = Some(at(until));
    store
        .create_run(&run, &[event(run_id, 1, 0, started(&run))])
        .await
        .expect("create run");
    run
}

fn not_owner(result: Result<(), StoreError>) {
    match result {
        Err(e @ StoreError::NotOwner { .. }) => {
            assert_eq!(e.kind(), StoreErrorKind::Conflict, "{e}");
        }
        other => panic!("expected NotOwner, got {other:?}"),
    }
}

fn step(run_id: &str, index: usize, output: Option<serde_json::Value>, when: u64) -> JournalEntry {
    JournalEntry {
        run_id: run_id.into(),
        step_index: index,
        step_id: format!("s{index}"),
        output,
        at: at(when),
    }
}

pub async fn a_driver_keeps_its_run_until_its_lease_runs_out_then_loses_every_write(
    store: SharedStore,
) {
    driven_run(store.as_ref(), "r", "node-a", 30).await;
    let got = store
        .claim_orphans("agent", &lease("node-b", 100), at(10), 10)
        .await
        .expect("claim");
    assert!(got.is_empty(), "a live lease is not an orphan: {got:?}");
    assert!(
        store
            .renew_lease("r", &lease("node-a", 60))
            .await
            .expect("renew")
    );
    assert!(
        !store
            .renew_lease("r", &lease("node-b", 60))
            .await
            .expect("renew"),
        "only the owner renews"
    );
    let got = store
        .claim_orphans("agent", &lease("node-b", 100), at(59), 10)
        .await
        .expect("claim");
    assert!(got.is_empty(), "renewed until 60");
    let got = store
        .claim_orphans("agent", &lease("node-b", 100), at(61), 10)
        .await
        .expect("claim");
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].run.owner.as_deref(), Some("node-b"));
    assert_eq!(got[0].run.lease_until, Some(at(100)));
    // The store numbers the run's events: the new owner's first event
    // follows the one event the run has.
    assert_eq!(got[0].next_seq, 2);

    // node-a's every write is refused now, and changes nothing.
    assert!(
        !store
            .renew_lease("r", &lease("node-a", 200))
            .await
            .expect("renew")
    );
    let e = event(
        "r",
        2,
        62,
        EventKind::RunFailed {
            error: "x".into(),
            by: None,
            reason: None,
        },
    );
    not_owner(
        store
            .record_step("node-a", &step("r", 0, None, 62), std::slice::from_ref(&e))
            .await,
    );
    let end = |owner: &str| RunEnd {
        run_id: "r".into(),
        status: RunStatus::Completed,
        outputs: Map::new(),
        error: None,
        at: at(63),
        owner: Some(owner.into()),
    };
    not_owner(
        store
            .end_run(&end("node-a"), std::slice::from_ref(&e))
            .await,
    );
    let pause = Pause {
        record: pending_record("k", "r", "agent", 62),
        at: at(62),
        owner: Some("node-a".into()),
    };
    not_owner(store.pause_run(&pause, std::slice::from_ref(&e)).await);
    assert!(store.get_approval("k").await.expect("get").is_none());
    assert!(store.run_journal("r").await.expect("journal").is_empty());
    assert_eq!(store.run_events("r", 0).await.expect("events").len(), 1);

    // node-b drives it to its end, which lets go of it.
    store
        .end_run(&end("node-b"), std::slice::from_ref(&e))
        .await
        .expect("end by the new owner");
    let run = store.get_run("r").await.expect("get").expect("run");
    assert_eq!(run.status, RunStatus::Completed);
    assert_eq!((run.owner, run.lease_until), (None, None));
    // An ended run is nobody's orphan.
    let got = store
        .claim_orphans("agent", &lease("node-c", 300), at(200), 10)
        .await
        .expect("claim");
    assert!(got.is_empty());
}

pub async fn runs_without_a_lease_are_orphans_with_one_winner_among_many_claimers(
    store: SharedStore,
) {
    // Stored before leases existed (or by a driver that never took one).
    for i in 0..3 {
        let run = run_record(&format!("old-{i}"), "agent", i);
        store.create_run(&run, &[]).await.expect("create");
    }
    store
        .create_run(&run_record("other-agent-run", "other", 0), &[])
        .await
        .expect("create");
    let claimers: Vec<_> = (0..16)
        .map(|i| {
            let store = Arc::clone(&store);
            tokio::spawn(async move {
                store
                    .claim_orphans("agent", &lease(&format!("node-{i}"), 100), at(10), 10)
                    .await
            })
        })
        .collect();
    let mut won: Vec<(String, String)> = Vec::new();
    for claimer in claimers {
        for owned in claimer.await.expect("task").expect("claim") {
            assert_eq!(owned.next_seq, 1, "a run stored without events starts at 1");
            let run = owned.run;
            won.push((run.id.clone(), run.owner.clone().unwrap_or_default()));
        }
    }
    won.sort();
    let ids: Vec<&str> = won.iter().map(|(id, _)| id.as_str()).collect();
    assert_eq!(
        ids,
        ["old-0", "old-1", "old-2"],
        "each orphan once: {won:?}"
    );
    for (id, owner) in &won {
        let run = store.get_run(id).await.expect("get").expect("run");
        assert_eq!(run.owner.as_ref(), Some(owner), "the winner owns it");
    }
    let other = store
        .get_run("other-agent-run")
        .await
        .expect("get")
        .expect("run");
    assert_eq!(other.owner, None, "another agent's run is left alone");
}

/// A same-host take-over: the runs of an owner found dead, whatever their
/// lease, matched on the exact owner string, one winner among many.
pub async fn a_dead_owners_runs_are_taken_over_before_their_lease_ends_with_one_winner(
    store: SharedStore,
) {
    driven_run(store.as_ref(), "dead-1", "node-dead", 100).await;
    driven_run(store.as_ref(), "dead-2", "node-dead", 100).await;
    driven_run(store.as_ref(), "live", "node-live", 100).await;
    driven_run(store.as_ref(), "lapsed", "node-lapsed", 5).await;
    let mut owners = store.leased_owners("agent", at(10)).await.expect("owners");
    owners.sort();
    // A lapsed lease is an ordinary orphan's, not a candidate.
    assert_eq!(owners, ["node-dead", "node-live"]);
    assert!(
        store
            .leased_owners("other", at(10))
            .await
            .expect("owners")
            .is_empty(),
        "another agent's"
    );

    let takers: Vec<_> = (0..8)
        .map(|i| {
            let store = Arc::clone(&store);
            tokio::spawn(async move {
                store
                    .take_over_runs("agent", "node-dead", &lease(&format!("node-{i}"), 200), 10)
                    .await
            })
        })
        .collect();
    let mut won: Vec<(String, String)> = Vec::new();
    for taker in takers {
        for owned in taker.await.expect("task").expect("take over") {
            // driven_run stored one event: the taker numbers on from it.
            assert_eq!(owned.next_seq, 2);
            assert_eq!(owned.run.lease_until, Some(at(200)));
            won.push((owned.run.id.clone(), owned.run.owner.unwrap_or_default()));
        }
    }
    won.sort();
    let ids: Vec<&str> = won.iter().map(|(id, _)| id.as_str()).collect();
    assert_eq!(ids, ["dead-1", "dead-2"], "each run once: {won:?}");
    for (id, owner) in &won {
        let run = store.get_run(id).await.expect("get").expect("run");
        assert_eq!(run.owner.as_ref(), Some(owner), "the winner owns it");
    }
    // Nothing else changed hands: not the live owner's, not the lapsed
    // one (that is claim_orphans' business), and the dead owner has none.
    let live = store.get_run("live").await.expect("get").expect("run");
    assert_eq!(live.owner.as_deref(), Some("node-live"));
    let lapsed = store.get_run("lapsed").await.expect("get").expect("run");
    assert_eq!(lapsed.owner.as_deref(), Some("node-lapsed"));
    let again = store
        .take_over_runs("agent", "node-dead", &lease("node-x", 200), 10)
        .await
        .expect("take over");
    assert!(again.is_empty(), "{again:?}");
}

pub async fn the_journal_keeps_each_steps_start_then_its_output(store: SharedStore) {
    driven_run(store.as_ref(), "r", "node-a", 100).await;
    let e2 = event(
        "r",
        2,
        1,
        EventKind::StepStarted {
            step: "s0".into(),
            index: 0,
        },
    );
    store
        .record_step("node-a", &step("r", 0, None, 1), std::slice::from_ref(&e2))
        .await
        .expect("start");
    let journal = store.run_journal("r").await.expect("journal");
    assert_eq!(journal, [step("r", 0, None, 1)], "in flight");
    let output = json!({"status": 201, "body": {"id": "x\u{0}y", "n": [1, 2.5]}});
    let e3 = event(
        "r",
        3,
        2,
        EventKind::StepCompleted {
            step: "s0".into(),
            index: 0,
            output: output.clone(),
            replayed: false,
        },
    );
    store
        .record_step("node-a", &step("r", 0, Some(output.clone()), 2), &[e3])
        .await
        .expect("complete");
    store
        .record_step("node-a", &step("r", 2, None, 3), &[])
        .await
        .expect("start another");
    let journal = store.run_journal("r").await.expect("journal");
    assert_eq!(
        journal,
        [step("r", 0, Some(output), 2), step("r", 2, None, 3)],
        "by step index, the output as written"
    );
    let seqs: Vec<u64> = store
        .run_events("r", 0)
        .await
        .expect("events")
        .iter()
        .map(|e| e.seq)
        .collect();
    assert_eq!(seqs, [1, 2, 3], "the events went in with the entries");
    not_owner(
        store
            .record_step("node-b", &step("r", 3, None, 4), &[])
            .await,
    );
    match store
        .record_step("node-a", &step("missing", 0, None, 4), &[])
        .await
    {
        Err(StoreError::RunNotFound(id)) => assert_eq!(id, "missing"),
        other => panic!("expected RunNotFound, got {other:?}"),
    }
}

pub async fn a_claim_makes_the_claimer_the_owner_and_a_pause_lets_go(store: SharedStore) {
    paused_run(store.as_ref(), "k", "agent", 0).await;
    let run = store.get_run("run-k").await.expect("get").expect("run");
    assert_eq!(
        (run.owner, run.lease_until),
        (None, None),
        "a pause holds nothing"
    );
    let mut claim = approve("k", "alice", 10);
    claim.then = AfterClaim::Drive(lease("node-a", 40));
    store.claim(&claim).await.expect("claim");
    let run = store.get_run("run-k").await.expect("get").expect("run");
    assert_eq!(run.status, RunStatus::Running);
    assert_eq!(run.owner.as_deref(), Some("node-a"));
    assert_eq!(run.lease_until, Some(at(40)));
    let got = store
        .claim_orphans("agent", &lease("node-b", 100), at(20), 10)
        .await
        .expect("claim");
    assert!(got.is_empty(), "the claimer's lease is live");
    // Running under a live lease is running, never stuck; once the lease
    // is past, nobody drives it and it is listed.
    let stuck = |now| {
        let store = Arc::clone(&store);
        async move { store.list_stuck(None, at(now)).await.expect("stuck") }
    };
    assert!(stuck(20).await.is_empty(), "executing, not stuck");
    let listed = stuck(41).await;
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].record.key, "k");
    // Its next pause is fenced on it, and lets go of the run.
    let pause = Pause {
        record: pending_record("k2", "run-k", "agent", 30),
        at: at(30),
        owner: Some("node-a".into()),
    };
    store.pause_run(&pause, &[]).await.expect("pause");
    let run = store.get_run("run-k").await.expect("get").expect("run");
    assert_eq!(run.status, RunStatus::AwaitingApproval);
    assert_eq!((run.owner, run.lease_until), (None, None));
}

/// The gate API's decision (`AfterClaim::Finish` with `gate::request_finish`): the claim, the run's end
/// and both events in one write, so a crash cannot leave a decided request
/// whose run looks in progress (an orphan nobody would recover).
pub async fn a_claim_that_ends_the_run_ends_it_in_the_same_write(store: SharedStore) {
    let record = paused_run(store.as_ref(), "k", "agent", 0).await;
    let mut approved = approve("k", "alice", 10);
    approved.then = request_end(&record, &approved);
    store.claim(&approved).await.expect("claim");
    let run = store.get_run("run-k").await.expect("get").expect("run");
    assert_eq!(run.status, RunStatus::Completed);
    assert_eq!((run.owner, run.lease_until), (None, None));
    let output = &run.outputs[&record.step_id];
    assert_eq!(output["approved"], true, "{output}");
    assert_eq!(output["decided_by"], "alice", "{output}");
    let kinds: Vec<(u64, &str)> = store
        .run_events("run-k", 0)
        .await
        .expect("events")
        .iter()
        .map(|e| (e.seq, e.kind.name()))
        .collect();
    assert_eq!(
        kinds,
        [
            (1, "run_started"),
            (2, "awaiting_approval"),
            (3, "approval_resolved"),
            (4, "run_completed")
        ]
    );

    let record = paused_run(store.as_ref(), "k2", "agent", 0).await;
    let mut rejected = claim(
        "k2",
        Decision::Reject {
            reason: Some("no".into()),
        },
        "bob",
        10,
        SPEC,
    );
    rejected.then = request_end(&record, &rejected);
    store.claim(&rejected).await.expect("claim");
    let run = store.get_run("run-k2").await.expect("get").expect("run");
    assert_eq!(run.status, RunStatus::Rejected);
    let events = store.run_events("run-k2", 0).await.expect("events");
    assert_eq!(events.last().map(|e| e.kind.name()), Some("run_rejected"));
    // Nothing is left for recovery to find.
    let orphans = store
        .claim_orphans("agent", &lease("node-z", 100), at(20), 10)
        .await
        .expect("claim orphans");
    assert!(orphans.is_empty(), "{orphans:?}");
}

/// How the gate API's claim ends a request's run, planned from the record.
fn request_end(record: &ApprovalRecord, claim: &Claim) -> AfterClaim {
    let decided = record.decided_by_claim(claim);
    AfterClaim::Finish(Box::new(tollgate_runtime::gate::request_finish(
        &decided, claim.now,
    )))
}

/// A decision whose run's end was worked out before the claim
/// (`AfterClaim::Finish`, everything after the gate is pure): the decision,
/// the end and the end's events are one write, numbered by the store after
/// the decision's event. A claim that loses writes none of it.
pub async fn a_claim_with_a_planned_end_writes_both_or_nothing(store: SharedStore) {
    use tollgate_runtime::pending_approval::RunFinish;

    let record = paused_run(store.as_ref(), "k", "agent", 0).await;
    let outputs: serde_json::Map<String, serde_json::Value> =
        serde_json::from_value(json!({"gate": {"approved": true}, "act": {"done": 1}}))
            .expect("outputs");
    let planned = |by: &str| {
        let mut claim = approve("k", by, 10);
        claim.then = AfterClaim::Finish(Box::new(RunFinish {
            end: RunEnd {
                run_id: record.run_id.clone(),
                status: RunStatus::Completed,
                outputs: outputs.clone(),
                error: None,
                at: at(11),
                owner: None,
            },
            // Numbered 0 on purpose: the store numbers them.
            events: vec![
                event(
                    &record.run_id,
                    0,
                    11,
                    EventKind::StepCompleted {
                        step: "act".into(),
                        index: 2,
                        output: json!({"done": 1}),
                        replayed: false,
                    },
                ),
                event(
                    &record.run_id,
                    0,
                    11,
                    EventKind::RunCompleted {
                        outputs: outputs.clone(),
                    },
                ),
            ],
        }));
        claim
    };
    let claimed = store.claim(&planned("alice")).await.expect("claim");
    assert_eq!(claimed.record.status, ApprovalStatus::Approved);
    let run = store.get_run("run-k").await.expect("get").expect("run");
    assert_eq!(run.status, RunStatus::Completed);
    assert_eq!(run.outputs, outputs);
    assert_eq!((run.owner, run.lease_until), (None, None));
    let seqs = |events: &[Event]| -> Vec<(u64, String)> {
        events
            .iter()
            .map(|e| (e.seq, e.kind.name().to_string()))
            .collect()
    };
    let events = store.run_events("run-k", 0).await.expect("events");
    let expected: Vec<(u64, String)> = [
        (1, "run_started"),
        (2, "awaiting_approval"),
        (3, "approval_resolved"),
        (4, "step_completed"),
        (5, "run_completed"),
    ]
    .iter()
    .map(|(seq, name)| (*seq, name.to_string()))
    .collect();
    assert_eq!(seqs(&events), expected);

    // The loser's planned end is never written: same run, same events.
    let lost = store
        .claim(&planned("bob"))
        .await
        .expect_err("second claim");
    assert!(
        matches!(
            lost,
            StoreError::Approval(ApprovalError::AlreadyResolved { .. })
        ),
        "{lost:?}"
    );
    let after = store.run_events("run-k", 0).await.expect("events");
    assert_eq!(seqs(&after), expected);
    let approval = store.get_approval("k").await.expect("get").expect("record");
    assert_eq!(approval.decided_by.as_deref(), Some("alice"));
    let orphans = store
        .claim_orphans("agent", &lease("node-z", 100), at(20), 10)
        .await
        .expect("claim orphans");
    assert!(orphans.is_empty(), "{orphans:?}");
}

/// A schedule tick or a signed webhook request: the key and the run are
/// one write. Taken, nothing is written; a run that cannot be stored
/// leaves the key free for the sender's retry.
pub async fn a_run_created_once_claims_its_key_in_the_same_write_or_not_at_all(store: SharedStore) {
    let once = |now: u64| KeyClaim {
        key: "tick:agent:0:09:00".into(),
        owner: "scheduler".into(),
        now: at(now),
        expires_at: at(now + 60),
    };
    let first = run_record("tick-run-1", "agent", 0);
    assert!(
        store
            .create_run_once(
                &once(0),
                &first,
                &[event("tick-run-1", 1, 0, started(&first))]
            )
            .await
            .expect("create once")
    );
    let stored = store
        .get_run("tick-run-1")
        .await
        .expect("get")
        .expect("run");
    assert_eq!(stored.status, RunStatus::Running);
    assert_eq!(
        store
            .run_events("tick-run-1", 0)
            .await
            .expect("events")
            .len(),
        1
    );

    // Another server firing the same tick: nothing is written.
    let second = run_record("tick-run-2", "agent", 1);
    assert!(
        !store
            .create_run_once(
                &once(1),
                &second,
                &[event("tick-run-2", 1, 1, started(&second))]
            )
            .await
            .expect("create once")
    );
    assert_eq!(store.get_run("tick-run-2").await.expect("get"), None);
    assert!(
        store
            .run_events("tick-run-2", 0)
            .await
            .expect("events")
            .is_empty()
    );

    // A run that cannot be stored (its id is taken) claims nothing either.
    let other = KeyClaim {
        key: "webhook:agent:abc".into(),
        ..once(2)
    };
    let duplicate = run_record("tick-run-1", "agent", 2);
    store
        .create_run_once(&other, &duplicate, &[])
        .await
        .expect_err("a run id is stored once");
    assert!(
        store
            .claim_key(&other.key, "webhook", at(3), at(63))
            .await
            .expect("claim"),
        "the failed write left the key free"
    );

    // Once the claim is over, the key starts a run again.
    let later = run_record("tick-run-3", "agent", 100);
    assert!(
        store
            .create_run_once(&once(100), &later, &[])
            .await
            .expect("create once")
    );
}

pub async fn runs_are_counted_by_status(store: SharedStore) {
    for (i, status) in [RunStatus::Stuck, RunStatus::Stuck, RunStatus::Failed]
        .into_iter()
        .enumerate()
    {
        let id = format!("r{i}");
        store
            .create_run(&run_record(&id, "agent", 0), &[])
            .await
            .expect("create");
        let end = RunEnd {
            run_id: id,
            status,
            outputs: Map::new(),
            error: Some("why".into()),
            at: at(1),
            owner: None,
        };
        store.end_run(&end, &[]).await.expect("end");
    }
    store
        .create_run(&run_record("elsewhere", "other", 0), &[])
        .await
        .expect("create");
    let count = |status| {
        let store = Arc::clone(&store);
        async move { store.count_runs("agent", status).await.expect("count") }
    };
    assert_eq!(count(RunStatus::Stuck).await, 2);
    assert_eq!(count(RunStatus::Failed).await, 1);
    assert_eq!(count(RunStatus::Running).await, 0);
    // All at once (GET /metrics): every status, in order, zeros included.
    let all = store
        .count_runs_by_status("agent")
        .await
        .expect("count all");
    let expected: Vec<(RunStatus, u64)> = RunStatus::ALL
        .iter()
        .map(|&s| {
            let n = match s {
                RunStatus::Stuck => 2,
                RunStatus::Failed => 1,
                _ => 0,
            };
            (s, n)
        })
        .collect();
    assert_eq!(all, expected);
    let other = store
        .count_runs_by_status("other")
        .await
        .expect("count other");
    assert_eq!(
        other.iter().filter(|(_, n)| *n > 0).collect::<Vec<_>>(),
        vec![&(RunStatus::Running, 1)]
    );
}

pub async fn an_operators_change_applies_only_from_the_statuses_it_names_once(store: SharedStore) {
    let run = run_record("r", "agent", 0);
    store
        .create_run(&run, &[event("r", 1, 0, started(&run))])
        .await
        .expect("create");
    let stuck = RunEnd {
        run_id: "r".into(),
        status: RunStatus::Stuck,
        outputs: Map::new(),
        error: Some("in doubt".into()),
        at: at(1),
        owner: None,
    };
    store.end_run(&stuck, &[]).await.expect("stuck");
    let retry = |owner: &str| RunTransition {
        run_id: "r".into(),
        from: vec![RunStatus::Stuck, RunStatus::Failed],
        to: RunStatus::Running,
        error: None,
        lease: Some(lease(owner, 100)),
        event: EventKind::RunRecovered {
            by: owner.into(),
            from_step: Some("ship".into()),
            forced: false,
        },
        at: at(2),
        if_last_seq: None,
    };
    // Two operators at once: one wins, the other is told the run's status.
    let (alice, bob) = (retry("alice"), retry("bob"));
    let (a, b) = tokio::join!(store.transition_run(&alice), store.transition_run(&bob));
    let (winner, loser) = match (a, b) {
        (Ok(won), Err(lost)) | (Err(lost), Ok(won)) => (won, lost),
        other => panic!("expected one winner, got {other:?}"),
    };
    match loser {
        StoreError::WrongRunStatus { status, .. } => assert_eq!(status, RunStatus::Running),
        other => panic!("expected WrongRunStatus, got {other:?}"),
    }
    let (run, event) = winner;
    assert_eq!(run.status, RunStatus::Running);
    assert_eq!(run.error, None);
    assert_eq!(run.owner, event_owner(&event));
    assert_eq!(run.lease_until, Some(at(100)));
    assert_eq!(event.seq, 2, "numbered after the run's last event");
    assert_eq!(store.run_events("r", 1).await.expect("events"), [event]);
    let missing = RunTransition {
        run_id: "nope".into(),
        ..retry("x")
    };
    match store.transition_run(&missing).await {
        Err(StoreError::RunNotFound(id)) => assert_eq!(id, "nope"),
        other => panic!("expected RunNotFound, got {other:?}"),
    }
}

/// `runs retry` and `runs fail` of one stuck run at once, each conditional
/// on the run's last event as its operator read it: one lands, the other
/// changes nothing and is told so (WrongRunStatus), and the events show
/// only the winner. Then the late one, sent after the winner landed, is
/// refused the same way: a retry whose `from` allows `failed` does not
/// undo a fail it never saw. Many rounds, so both orders happen.
pub async fn a_retry_and_a_fail_racing_on_a_stuck_run_have_exactly_one_winner(store: SharedStore) {
    let (mut retries_won, mut fails_won) = (0, 0);
    for round in 0..40u64 {
        let run_id = format!("race-{round}");
        let run = run_record(&run_id, "agent", 0);
        store
            .create_run(&run, &[event(&run_id, 1, 0, started(&run))])
            .await
            .expect("create");
        let stuck = RunEnd {
            run_id: run_id.clone(),
            status: RunStatus::Stuck,
            outputs: Map::new(),
            error: Some("in doubt".into()),
            at: at(1),
            owner: None,
        };
        let in_doubt = event(
            &run_id,
            2,
            1,
            EventKind::RunStuck {
                step: "ship".into(),
                reason: "in doubt".into(),
            },
        );
        store
            .end_run(&stuck, std::slice::from_ref(&in_doubt))
            .await
            .expect("stuck");
        let retry = RunTransition {
            run_id: run_id.clone(),
            from: vec![RunStatus::Stuck, RunStatus::Failed],
            to: RunStatus::Running,
            error: None,
            lease: Some(lease("node-a", 100)),
            event: EventKind::RunRecovered {
                by: "alice".into(),
                from_step: Some("ship".into()),
                forced: false,
            },
            at: at(2),
            if_last_seq: Some(2),
        };
        let fail = RunTransition {
            run_id: run_id.clone(),
            from: vec![RunStatus::Stuck],
            to: RunStatus::Failed,
            error: Some("failed by bob: refunded".into()),
            lease: None,
            event: EventKind::RunFailed {
                error: "failed by bob: refunded".into(),
                by: Some("bob".into()),
                reason: Some("refunded".into()),
            },
            at: at(2),
            if_last_seq: Some(2),
        };
        let (r, f) = if round % 2 == 0 {
            tokio::join!(store.transition_run(&retry), store.transition_run(&fail))
        } else {
            let (f, r) = tokio::join!(store.transition_run(&fail), store.transition_run(&retry));
            (r, f)
        };
        let (won, lost, status) = match (r, f) {
            (Ok(won), Err(lost)) => {
                retries_won += 1;
                (won, lost, RunStatus::Running)
            }
            (Err(lost), Ok(won)) => {
                fails_won += 1;
                (won, lost, RunStatus::Failed)
            }
            other => panic!("round {round}: expected one winner, got {other:?}"),
        };
        match lost {
            StoreError::WrongRunStatus { status: now, .. } => assert_eq!(now, status),
            other => panic!("round {round}: expected WrongRunStatus, got {other:?}"),
        }
        assert_eq!(won.0.status, status);
        let events = store.run_events(&run_id, 2).await.expect("events");
        assert_eq!(
            events,
            std::slice::from_ref(&won.1),
            "only the winner's event"
        );
        // Sent again after the winner landed, the loser still changes nothing.
        let late = if status == RunStatus::Failed {
            &retry
        } else {
            &fail
        };
        assert!(
            matches!(
                store.transition_run(late).await,
                Err(StoreError::WrongRunStatus { .. })
            ),
            "round {round}: a late change over a state its sender never saw"
        );
        let now = store.get_run(&run_id).await.expect("get").expect("run");
        assert_eq!(now.status, status, "round {round}");
        assert_eq!(store.run_events(&run_id, 3).await.expect("events"), []);
    }
    // The memory store serialises on one lock, so one order may always
    // win there; the order alternates, so each side got to go first.
    assert_eq!(retries_won + fails_won, 40);
}

fn event_owner(event: &Event) -> Option<String> {
    match &event.kind {
        EventKind::RunRecovered { by, .. } => Some(by.clone()),
        _ => None,
    }
}

// ------------------------------------------------------- runs: list, cancel

fn cancel(run_id: &str, by: &str, now: u64) -> CancelRun {
    CancelRun {
        run_id: run_id.into(),
        by: by.into(),
        reason: Some("not needed".into()),
        now: at(now),
    }
}

async fn listed(store: &dyn StateStore, query: RunQuery) -> Vec<String> {
    let mut ids = Vec::new();
    let mut query = query;
    loop {
        let page = store.list_runs(&query).await.expect("list runs");
        ids.extend(page.runs.iter().map(|r| r.id.clone()));
        match page.next_cursor {
            Some(next) => query.cursor = Some(next),
            None => return ids,
        }
    }
}

pub async fn runs_are_listed_newest_first_by_page_and_filtered_by_agent_and_status(
    store: SharedStore,
) {
    // Five running runs of "a" (two created in the same instant: the id
    // orders them), one of "b", and one of "a" waiting on an approval.
    for (id, agent, created) in [
        ("r1", "a", 10),
        ("r2", "a", 20),
        ("r3b", "a", 30),
        ("r3a", "a", 30),
        ("r4", "b", 40),
        ("r5", "a", 50),
    ] {
        let run = run_record(id, agent, created);
        store
            .create_run(&run, &[event(id, 1, created, started(&run))])
            .await
            .expect("create run");
    }
    paused_run(store.as_ref(), "k", "a", 60).await;
    let query = |agent: Option<&str>, status: Option<RunStatus>, limit: usize| RunQuery {
        agent_id: agent.map(str::to_string),
        status,
        limit,
        cursor: None,
    };
    let everything = vec!["run-k", "r5", "r4", "r3b", "r3a", "r2", "r1"];
    assert_eq!(
        listed(store.as_ref(), query(None, None, 2)).await,
        everything
    );
    assert_eq!(
        listed(store.as_ref(), query(None, None, 100)).await,
        everything
    );
    assert_eq!(
        listed(store.as_ref(), query(Some("a"), None, 3)).await,
        vec!["run-k", "r5", "r3b", "r3a", "r2", "r1"]
    );
    assert_eq!(
        listed(
            store.as_ref(),
            query(Some("a"), Some(RunStatus::AwaitingApproval), 1)
        )
        .await,
        vec!["run-k"]
    );
    assert_eq!(
        listed(store.as_ref(), query(None, Some(RunStatus::Cancelled), 10)).await,
        Vec::<String>::new()
    );
    let first = store
        .list_runs(&query(Some("a"), Some(RunStatus::Running), 2))
        .await
        .expect("page");
    assert_eq!(first.runs.len(), 2);
    assert_eq!(first.runs[0], run_record("r5", "a", 50), "every field");
    assert!(first.next_cursor.is_some());
    let last = store
        .list_runs(&query(Some("a"), Some(RunStatus::Running), 5))
        .await
        .expect("page");
    assert_eq!(last.runs.len(), 5);
    assert_eq!(last.next_cursor, None, "no cursor past the last page");
}

pub async fn a_malformed_runs_cursor_is_rejected(store: SharedStore) {
    let result = store
        .list_runs(&RunQuery {
            agent_id: None,
            status: None,
            limit: 10,
            cursor: Some("not-a-cursor".into()),
        })
        .await;
    assert!(
        matches!(result, Err(StoreError::InvalidCursor(_))),
        "{result:?}"
    );
}

pub async fn cancelling_a_waiting_run_cancels_its_approval_in_one_write(store: SharedStore) {
    let record = paused_run(store.as_ref(), "k", "agent", 0).await;
    let cancelled = store
        .cancel_run(&cancel("run-k", "ops", 10))
        .await
        .expect("cancel");
    assert_eq!(cancelled.was, RunStatus::AwaitingApproval);
    let expected = ApprovalRecord {
        status: ApprovalStatus::Cancelled,
        decision_data: Some(json!({"reason": "not needed"})),
        decided_by: Some("ops".into()),
        decided_at: Some(at(10)),
        ..record
    };
    assert_eq!(cancelled.approval.as_ref(), Some(&expected));
    assert_eq!(
        store.get_approval("k").await.expect("get"),
        Some(expected),
        "kept in the audit trail"
    );
    let run = store.get_run("run-k").await.expect("get").expect("run");
    assert_eq!((run.status, run.updated_at), (RunStatus::Cancelled, at(10)));
    let event_kinds: Vec<_> = store
        .run_events("run-k", 0)
        .await
        .expect("events")
        .into_iter()
        .map(|e| (e.seq, e.kind))
        .collect();
    assert_eq!(
        event_kinds.last(),
        Some(&(
            3,
            EventKind::RunCancelled {
                by: "ops".into(),
                reason: Some("not needed".into())
            }
        ))
    );
    assert_eq!(cancelled.event.seq, 3);
    assert!(all_pending(store.as_ref(), 11, None).await.is_empty());
    // Nothing is left to decide, nor to expire.
    let error = approval_error(store.claim(&approve("k", "alice", 20)).await);
    assert!(
        matches!(
            error,
            ApprovalError::AlreadyResolved {
                status: ApprovalStatus::Cancelled,
                ..
            }
        ),
        "{error:?}"
    );
    assert!(
        store
            .expire_due(at(TTL + 10))
            .await
            .expect("sweep")
            .is_empty()
    );
}

pub async fn cancelling_a_running_run_ends_it_cancelled(store: SharedStore) {
    driven_run(store.as_ref(), "r", "node-a", 30).await;
    let cancelled = store
        .cancel_run(&CancelRun {
            reason: None,
            ..cancel("r", "ops", 5)
        })
        .await
        .expect("cancel");
    assert_eq!(cancelled.was, RunStatus::Running);
    assert_eq!(cancelled.approval, None);
    assert_eq!(
        cancelled.event.kind,
        EventKind::RunCancelled {
            by: "ops".into(),
            reason: None
        }
    );
    let stored = store.get_run("r").await.expect("get").expect("run");
    assert_eq!(stored.status, RunStatus::Cancelled);
    // Nobody drives a cancelled run: its driver's lease goes with it.
    assert_eq!((stored.owner, stored.lease_until), (None, None));
    let seqs: Vec<u64> = store
        .run_events("r", 0)
        .await
        .expect("events")
        .iter()
        .map(|e| e.seq)
        .collect();
    assert_eq!(seqs, vec![1, 2]);
}

pub async fn a_final_run_cannot_be_cancelled_and_an_unknown_one_is_not_found(store: SharedStore) {
    let record = paused_run(store.as_ref(), "k", "agent", 0).await;
    store.claim(&approve("k", "alice", 5)).await.expect("claim");
    store
        .end_run(
            &RunEnd {
                run_id: record.run_id.clone(),
                status: RunStatus::Completed,
                outputs: Map::new(),
                error: None,
                at: at(6),
                owner: None,
            },
            &[],
        )
        .await
        .expect("end");
    let refused = store.cancel_run(&cancel("run-k", "ops", 10)).await;
    assert!(
        matches!(
            refused,
            Err(StoreError::RunNotCancellable {
                status: RunStatus::Completed,
                ..
            })
        ),
        "{refused:?}"
    );
    assert_eq!(
        store
            .get_run("run-k")
            .await
            .expect("get")
            .expect("run")
            .status,
        RunStatus::Completed,
        "unchanged"
    );
    // A waiting run whose approval ran out has expired: nothing to cancel.
    paused_run(store.as_ref(), "old", "agent", 0).await;
    let overdue = store.cancel_run(&cancel("run-old", "ops", TTL + 1)).await;
    assert!(
        matches!(
            overdue,
            Err(StoreError::RunNotCancellable {
                status: RunStatus::Expired,
                ..
            })
        ),
        "{overdue:?}"
    );
    let unknown = store.cancel_run(&cancel("nope", "ops", 10)).await;
    assert!(
        matches!(unknown, Err(StoreError::RunNotFound(_))),
        "{unknown:?}"
    );
}

pub async fn a_cancel_racing_claims_has_exactly_one_winner(store: SharedStore) {
    for round in 0..8 {
        let key = format!("k{round}");
        let record = paused_run(store.as_ref(), &key, "agent", 0).await;
        let mut tasks = Vec::new();
        for i in 0..12 {
            let store = Arc::clone(&store);
            let (key, run_id) = (key.clone(), record.run_id.clone());
            tasks.push(tokio::spawn(async move {
                if i % 3 == 0 {
                    store
                        .cancel_run(&cancel(&run_id, &format!("op-{i}"), 10))
                        .await
                        .map(|_| "cancel")
                } else {
                    store
                        .claim(&approve(&key, &format!("user-{i}"), 10))
                        .await
                        .map(|_| "claim")
                }
            }));
        }
        let mut cancels = 0;
        let mut claims = 0;
        for task in tasks {
            match task.await.expect("task") {
                Ok("cancel") => cancels += 1,
                Ok(_) => claims += 1,
                Err(StoreError::Approval(ApprovalError::AlreadyResolved { .. }))
                | Err(StoreError::RunNotCancellable { .. }) => {}
                Err(other) => panic!("a loser is told why, got {other:?}"),
            }
        }
        let approval = store
            .get_approval(&key)
            .await
            .expect("get")
            .expect("record");
        let run = store
            .get_run(&record.run_id)
            .await
            .expect("get")
            .expect("run");
        match approval.status {
            // The cancel took the approval: no decision won.
            ApprovalStatus::Cancelled => {
                assert_eq!((cancels, claims), (1, 0), "round {round}");
                assert_eq!(run.status, RunStatus::Cancelled);
            }
            // A decision won the approval; at most one cancel then ended the
            // running run (a run is cancellable while it runs).
            ApprovalStatus::Approved => {
                assert_eq!(claims, 1, "round {round}");
                assert!(cancels <= 1, "round {round}: {cancels} cancels");
                let want = if cancels == 1 {
                    RunStatus::Cancelled
                } else {
                    RunStatus::Running
                };
                assert_eq!(run.status, want, "round {round}");
            }
            other => panic!("round {round}: the approval ended {other:?}"),
        }
        let events = store.run_events(&record.run_id, 0).await.expect("events");
        let seqs: Vec<u64> = events.iter().map(|e| e.seq).collect();
        let want: Vec<u64> = (1..=(2 + claims + cancels) as u64).collect();
        assert_eq!(seqs, want, "round {round}: one event per winner, no gaps");
    }
}

// ------------------------------------ approvals of any status: inbox, history

/// A run created at `created` and paused with `key`, its record shaped by
/// `shape` first (another step, message or expiry).
async fn paused_with(
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

/// Every status, no filter, one agent's or every agent's records at `now`.
fn approvals_at(now: u64) -> ApprovalQuery {
    ApprovalQuery {
        agent_id: None,
        statuses: Vec::new(),
        step_id: None,
        text: None,
        now: at(now),
        limit: 100,
        cursor: None,
    }
}

/// Every page of `query`, as (key, status) in the order listed.
async fn approvals_listed(
    store: &dyn StateStore,
    query: ApprovalQuery,
) -> Vec<(String, ApprovalStatus)> {
    let mut query = query;
    let mut listed = Vec::new();
    loop {
        let page = store.list_approvals(&query).await.expect("list approvals");
        assert!(page.unreadable.is_empty(), "{:?}", page.unreadable);
        listed.extend(page.approvals.iter().map(|r| (r.key.clone(), r.status)));
        match page.next_cursor {
            Some(next) => query.cursor = Some(next),
            None => return listed,
        }
    }
}

async fn listed_keys(store: &dyn StateStore, query: ApprovalQuery) -> Vec<String> {
    approvals_listed(store, query)
        .await
        .into_iter()
        .map(|(k, _)| k)
        .collect()
}

fn decide(key: &str, decision: Decision, by: &str, now: u64) -> Claim {
    claim(key, decision, by, now, SPEC)
}

pub async fn approvals_are_listed_newest_first_by_decision_else_creation(store: SharedStore) {
    use ApprovalStatus::*;
    let s = store.as_ref();
    paused_run(s, "p1", "agent", 10).await;
    paused_run(s, "d1", "agent", 1).await;
    s.claim(&approve("d1", "alice", 20))
        .await
        .expect("approve d1");
    paused_run(s, "d2", "agent", 5).await;
    let reject = Decision::Reject {
        reason: Some("no".into()),
    };
    s.claim(&decide("d2", reject, "bob", 15))
        .await
        .expect("reject d2");
    paused_run(s, "p2", "agent", 12).await;
    // Expired by the sweep at 3: listed by its created_at (no decided_at).
    paused_with(s, "x1", "agent", 0, |r| r.expires_at = at(2)).await;
    assert_eq!(keys(&s.expire_due(at(3)).await.expect("sweep")), vec!["x1"]);
    paused_run(s, "c1", "agent", 3).await;
    s.cancel_run(&cancel("run-c1", "carol", 18))
        .await
        .expect("cancel c1");

    let expected: Vec<(String, ApprovalStatus)> = [
        ("d1", Approved),
        ("c1", Cancelled),
        ("d2", Rejected),
        ("p2", Pending),
        ("p1", Pending),
        ("x1", Expired),
    ]
    .into_iter()
    .map(|(k, st)| (k.to_string(), st))
    .collect();
    assert_eq!(approvals_listed(s, approvals_at(100)).await, expected);

    // The records come back whole, as get_approval reads them.
    let page = s.list_approvals(&approvals_at(100)).await.expect("list");
    for record in &page.approvals {
        let stored = s
            .get_approval(&record.key)
            .await
            .expect("get")
            .expect("record");
        assert_eq!(record, &stored);
    }
}

pub async fn approval_pages_follow_a_cursor_across_equal_times(store: SharedStore) {
    let s = store.as_ref();
    // 25 records created in one instant; the odd ones decided in three
    // instants: every order time is shared, so the key breaks the ties.
    let mut expected = Vec::new();
    for i in 0..25u64 {
        let key = format!("key-{i:02}");
        paused_run(s, &key, "agent", 0).await;
        let order = if i % 2 == 1 {
            let when = 40 + i % 3;
            s.claim(&approve(&key, "alice", when))
                .await
                .expect("approve");
            when
        } else {
            0
        };
        expected.push((order, key));
    }
    expected.sort_by(|a, b| b.cmp(a));
    let expected: Vec<String> = expected.into_iter().map(|(_, k)| k).collect();

    let mut query = ApprovalQuery {
        limit: 10,
        ..approvals_at(100)
    };
    let (mut seen, mut sizes) = (Vec::new(), Vec::new());
    loop {
        let page = s.list_approvals(&query).await.expect("page");
        sizes.push(page.approvals.len());
        seen.extend(keys(&page.approvals));
        match page.next_cursor {
            Some(next) => query.cursor = Some(next),
            None => break,
        }
    }
    assert_eq!(sizes, vec![10, 10, 5]);
    assert_eq!(
        seen.iter().collect::<HashSet<_>>().len(),
        25,
        "no duplicates"
    );
    assert_eq!(
        seen, expected,
        "newest first by (decided_at else created_at, key)"
    );

    // Paging one status keeps its order too: the decided ones, four a page.
    let approved: Vec<String> = expected
        .iter()
        .filter(|k| k[4..].parse::<u64>().is_ok_and(|i| i % 2 == 1))
        .cloned()
        .collect();
    let query = ApprovalQuery {
        statuses: vec![ApprovalStatus::Approved],
        limit: 4,
        ..approvals_at(100)
    };
    assert_eq!(listed_keys(s, query).await, approved);
    // And the pending ones, through the same cursor form.
    let pending: Vec<String> = expected
        .iter()
        .filter(|k| !approved.contains(k))
        .cloned()
        .collect();
    let query = ApprovalQuery {
        statuses: vec![ApprovalStatus::Pending],
        limit: 3,
        ..approvals_at(100)
    };
    assert_eq!(listed_keys(s, query).await, pending);
}

/// Five records: alpha (pending, refund), bravo (approved by alice),
/// charlie (rejected by bob, review), delta (pending, review, mentions
/// Carol), echo (modified by carol, no message). Listed e, c, b, d, a.
async fn five_records(s: &dyn StateStore) {
    paused_with(s, "k-alpha", "agent", 1, |_| {}).await;
    paused_with(s, "k-bravo", "agent", 2, |r| {
        r.message = Some("Refund 99 EUR to c-2?".into());
    })
    .await;
    s.claim(&approve("k-bravo", "alice", 10))
        .await
        .expect("approve");
    paused_with(s, "k-charlie", "agent", 3, |r| {
        r.step_id = "review".into();
        r.message = Some("Review the wording".into());
    })
    .await;
    let reject = Decision::Reject {
        reason: Some("tone".into()),
    };
    s.claim(&decide("k-charlie", reject, "bob", 11))
        .await
        .expect("reject");
    paused_with(s, "k-delta", "agent", 4, |r| {
        r.step_id = "review".into();
        r.message = Some("Escalate to Carol".into());
    })
    .await;
    paused_with(s, "k-echo", "agent", 5, |r| r.message = None).await;
    let modify = Decision::Modify {
        payload: json!({"amount": 10}),
        reason: None,
    };
    s.claim(&decide("k-echo", modify, "carol", 12))
        .await
        .expect("modify");
}

pub async fn approvals_filter_by_status_step_and_text_alone_and_combined(store: SharedStore) {
    use ApprovalStatus::*;
    let s = store.as_ref();
    five_records(s).await;
    let q = |statuses: Vec<ApprovalStatus>, step: Option<&str>, text: Option<&str>| ApprovalQuery {
        statuses,
        step_id: step.map(str::to_string),
        text: text.map(str::to_string),
        ..approvals_at(100)
    };
    let list = |query: ApprovalQuery| async move { listed_keys(s, query).await };
    let ks = |names: &[&str]| -> Vec<String> { names.iter().map(|n| format!("k-{n}")).collect() };

    // Statuses: none given lists every one; each alone; several.
    assert_eq!(
        list(q(vec![], None, None)).await,
        ks(&["echo", "charlie", "bravo", "delta", "alpha"])
    );
    assert_eq!(
        list(q(vec![Pending], None, None)).await,
        ks(&["delta", "alpha"])
    );
    assert_eq!(list(q(vec![Approved], None, None)).await, ks(&["bravo"]));
    assert_eq!(list(q(vec![Rejected], None, None)).await, ks(&["charlie"]));
    assert_eq!(list(q(vec![Modified], None, None)).await, ks(&["echo"]));
    assert!(
        list(q(vec![Expired, Cancelled], None, None))
            .await
            .is_empty()
    );
    assert_eq!(
        list(q(vec![Rejected, Modified, Pending], None, None)).await,
        ks(&["echo", "charlie", "delta", "alpha"])
    );

    // The step alone.
    assert_eq!(
        list(q(vec![], Some("review"), None)).await,
        ks(&["charlie", "delta"])
    );
    assert_eq!(
        list(q(vec![], Some("refund"), None)).await,
        ks(&["echo", "bravo", "alpha"])
    );
    assert!(
        list(q(vec![], Some("revie"), None)).await.is_empty(),
        "a step is matched whole"
    );

    // The text alone, case-insensitive, in each searched field: the
    // message, the step id, the key, the run id, decided_by.
    assert_eq!(
        list(q(vec![], None, Some("eur"))).await,
        ks(&["bravo", "alpha"])
    );
    assert_eq!(
        list(q(vec![], None, Some("CAROL"))).await,
        ks(&["echo", "delta"])
    );
    assert_eq!(
        list(q(vec![], None, Some("REVIEW"))).await,
        ks(&["charlie", "delta"])
    );
    assert_eq!(list(q(vec![], None, Some("k-del"))).await, ks(&["delta"]));
    assert_eq!(
        list(q(vec![], None, Some("run-k-ch"))).await,
        ks(&["charlie"])
    );
    assert_eq!(list(q(vec![], None, Some("Alice"))).await, ks(&["bravo"]));
    assert!(list(q(vec![], None, Some("nowhere"))).await.is_empty());
    // An empty text filters nothing.
    assert_eq!(list(q(vec![], None, Some(""))).await.len(), 5);

    // Combined: every filter applies.
    assert_eq!(
        list(q(vec![Pending], Some("review"), Some("carol"))).await,
        ks(&["delta"])
    );
    assert_eq!(
        list(q(vec![Pending], None, Some("eur"))).await,
        ks(&["alpha"])
    );
    assert_eq!(
        list(q(vec![], Some("refund"), Some("alice"))).await,
        ks(&["bravo"])
    );
    assert!(list(q(vec![Rejected], None, Some("eur"))).await.is_empty());
    assert!(
        list(q(vec![Approved], Some("review"), None))
            .await
            .is_empty()
    );
}

pub async fn an_overdue_pending_approval_is_listed_as_expired(store: SharedStore) {
    use ApprovalStatus::*;
    let s = store.as_ref();
    paused_run(s, "due", "agent", 0).await;
    paused_run(s, "fresh", "agent", 100).await;
    let q = |statuses: Vec<ApprovalStatus>, now: u64| ApprovalQuery {
        statuses,
        ..approvals_at(now)
    };
    let pair = |k: &str, st| (k.to_string(), st);

    // Before its expiry: PENDING.
    assert_eq!(
        approvals_listed(s, q(vec![Pending], TTL - 1)).await,
        vec![pair("fresh", Pending), pair("due", Pending)]
    );
    // Past it, not yet swept: EXPIRED, for the listing and for its filter.
    let now = TTL + 1;
    for round in ["unswept", "swept"] {
        assert_eq!(
            approvals_listed(s, q(vec![Pending], now)).await,
            vec![pair("fresh", Pending)],
            "{round}"
        );
        assert_eq!(
            approvals_listed(s, q(vec![Expired], now)).await,
            vec![pair("due", Expired)],
            "{round}"
        );
        assert_eq!(
            approvals_listed(s, q(vec![], now)).await,
            vec![pair("fresh", Pending), pair("due", Expired)],
            "{round}"
        );
        assert_eq!(
            approvals_listed(s, q(vec![Pending, Expired], now)).await,
            vec![pair("fresh", Pending), pair("due", Expired)],
            "{round}"
        );
        assert!(
            approvals_listed(s, q(vec![Approved, Rejected, Modified, Cancelled], now))
                .await
                .is_empty(),
            "{round}"
        );
        // The other filters apply to it as to any record.
        let query = ApprovalQuery {
            text: Some("RUN-DUE".into()),
            step_id: Some("refund".into()),
            ..q(vec![Expired], now)
        };
        assert_eq!(
            approvals_listed(s, query).await,
            vec![pair("due", Expired)],
            "{round}"
        );
        s.expire_due(at(now)).await.expect("sweep");
    }
}

pub async fn like_metacharacters_in_the_text_are_matched_literally(store: SharedStore) {
    let s = store.as_ref();
    // Keys and run ids ("run-k-N") and the step ("refund") hold none of
    // the needles below but the ones noted.
    let messages = [
        ("k-1", "50% off"),
        ("k-2", "500 off"),
        ("k-3", "a_b"),
        ("k-4", "axb"),
        ("k-5", "back\\slash"),
        ("k-6", "backslash"),
        ("k-7", "a\tb"),
        ("k-8", "tip"),
        ("k-9", "nul\u{0}here"),
        ("k-10", "say \" here"),
    ];
    for (i, (key, message)) in messages.iter().enumerate() {
        paused_with(s, key, "agent", i as u64, |r| {
            r.message = Some(message.to_string())
        })
        .await;
    }
    let find = |text: &str| {
        let query = ApprovalQuery {
            text: Some(text.to_string()),
            ..approvals_at(100)
        };
        async move { listed_keys(s, query).await }
    };
    assert_eq!(find("50%").await, vec!["k-1"]);
    assert_eq!(find("%").await, vec!["k-1"]);
    assert_eq!(find("a_b").await, vec!["k-3"]);
    assert_eq!(find("_").await, vec!["k-3"]);
    assert_eq!(find("\\").await, vec!["k-5"]);
    assert_eq!(find("k\\s").await, vec!["k-5"]);
    assert_eq!(find("AXB").await, vec!["k-4"]);
    // A control character is text like any other, and the letters of its
    // escape in stored JSON (`\t`) are not in the message.
    assert_eq!(find("\t").await, vec!["k-7"]);
    assert_eq!(find("t").await, vec!["k-8"]);
    assert_eq!(find("\"").await, vec!["k-10"]);
    // A NUL is kept and matched, and never skipped over.
    assert_eq!(find("\u{0}h").await, vec!["k-9"]);
    assert_eq!(find("here").await, vec!["k-10", "k-9"]);
    assert!(find("lh").await.is_empty());
    // SQL quoting in the needle is only text.
    assert!(find("' OR '1'='1").await.is_empty());
}

pub async fn a_text_filter_fills_its_pages_past_rows_only_its_sql_let_through(store: SharedStore) {
    let s = store.as_ref();
    // Three real matches, oldest; newer rows that a store's SQL may let
    // through for these needles (a tab escaped `\t` in JSON, a NUL a SQL
    // LIKE ignores) but that do not hold them.
    for i in 0..3u64 {
        paused_with(s, &format!("k-{i}"), "agent", i, |r| {
            r.message = Some("taby".into());
        })
        .await;
    }
    for i in 3..8u64 {
        paused_with(s, &format!("k-{i}"), "agent", i, |r| {
            r.message = Some("x\ty".into());
        })
        .await;
    }
    for i in 8..13u64 {
        paused_with(s, &format!("k-{i}"), "agent", i, |r| {
            r.message = Some("a\u{0}b".into());
        })
        .await;
    }
    for needle in ["t", "ab"] {
        let mut query = ApprovalQuery {
            text: Some(needle.into()),
            limit: 2,
            ..approvals_at(100)
        };
        let mut pages = Vec::new();
        loop {
            let page = s.list_approvals(&query).await.expect("page");
            pages.push(keys(&page.approvals));
            match page.next_cursor {
                Some(next) => query.cursor = Some(next),
                None => break,
            }
        }
        assert_eq!(
            pages,
            vec![vec!["k-2".to_string(), "k-1".into()], vec!["k-0".into()]],
            "{needle:?}"
        );
    }
}

pub async fn another_agents_approvals_are_not_listed(store: SharedStore) {
    let s = store.as_ref();
    paused_run(s, "a1", "alpha", 1).await;
    paused_run(s, "b1", "beta", 2).await;
    paused_run(s, "a2", "alpha", 3).await;
    paused_run(s, "b2", "beta", 4).await;
    s.claim(&approve("a1", "alice", 5))
        .await
        .expect("approve a1");
    s.claim(&approve("b1", "alice", 6))
        .await
        .expect("approve b1");
    let of = |agent: Option<&str>, statuses: Vec<ApprovalStatus>| ApprovalQuery {
        agent_id: agent.map(str::to_string),
        statuses,
        limit: 1,
        ..approvals_at(100)
    };
    assert_eq!(
        listed_keys(s, of(Some("alpha"), vec![])).await,
        vec!["a1", "a2"]
    );
    assert_eq!(
        listed_keys(s, of(Some("beta"), vec![])).await,
        vec!["b1", "b2"]
    );
    assert_eq!(
        listed_keys(s, of(Some("alpha"), vec![ApprovalStatus::Pending])).await,
        vec!["a2"]
    );
    assert_eq!(
        listed_keys(s, of(Some("beta"), vec![ApprovalStatus::Approved])).await,
        vec!["b1"]
    );
    assert!(listed_keys(s, of(Some("gamma"), vec![])).await.is_empty());
    assert_eq!(
        listed_keys(s, of(None, vec![])).await,
        vec!["b1", "a1", "b2", "a2"]
    );
    // The text filter never reaches another agent's records.
    let query = ApprovalQuery {
        text: Some("b".into()),
        ..of(Some("alpha"), vec![])
    };
    assert!(listed_keys(s, query).await.is_empty());
}

pub async fn a_malformed_approvals_cursor_is_rejected(store: SharedStore) {
    paused_run(store.as_ref(), "k", "agent", 0).await;
    for bad in ["not-a-cursor", "2026-03-01T09:00:00Z|", "yesterday|k", "|k"] {
        let query = ApprovalQuery {
            cursor: Some(bad.into()),
            ..approvals_at(10)
        };
        match store.list_approvals(&query).await {
            Err(e @ StoreError::InvalidCursor(_)) => {
                assert!(e.to_string().contains("malformed cursor"), "{e}");
                assert!(e.to_string().contains(bad), "{e}");
            }
            other => panic!("{bad:?}: expected InvalidCursor, got {other:?}"),
        }
    }
}
