//! Approvals: the claim that decides a pause (typed refusals, one winner
//! however many race) and what it writes with the decision (the run
//! released, driven or ended); expiry; cancelling a run and its approval;
//! a run's latest approval.

use super::fixtures::*;
use super::prelude::*;

fn approval_error(result: Result<impl std::fmt::Debug, StoreError>) -> ApprovalError {
    match result {
        Err(StoreError::Approval(e)) => e,
        other => panic!("expected an approval error, got {other:?}"),
    }
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
    let seqs = event_seqs(store.as_ref(), "run-k").await;
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

/// `n` runs paused at once (`due-0000`, ...), created a second apart and
/// due in the reverse order: the last created is the first due, so the
/// sweep's order (earliest due first) is not the order it reports in
/// (oldest first). Each is due by `n + 1` seconds past TTL.
async fn paused_due_in_reverse(store: &SharedStore, n: usize) -> Vec<ApprovalRecord> {
    let mut made = Vec::with_capacity(n);
    let keys: Vec<usize> = (0..n).collect();
    for chunk in keys.chunks(64) {
        let pauses: Vec<_> = chunk
            .iter()
            .map(|&i| {
                let store = Arc::clone(store);
                tokio::spawn(async move {
                    let created = i as u64;
                    paused_with(
                        store.as_ref(),
                        &format!("due-{i:04}"),
                        "agent",
                        created,
                        |r| r.expires_at = at(TTL + (n - i) as u64),
                    )
                    .await
                })
            })
            .collect();
        for pause in pauses {
            made.push(pause.await.expect("pause task"));
        }
    }
    made
}

/// The run of an expired record ended `expired` at `now`, with one
/// `run_expired` event after its pause.
async fn assert_run_expired(store: &SharedStore, record: &ApprovalRecord, now: u64) {
    let run = store
        .get_run(&record.run_id)
        .await
        .expect("get run")
        .expect("run");
    assert_eq!(
        (run.status, run.updated_at),
        (RunStatus::Expired, at(now)),
        "{}",
        record.key
    );
    let events = store.run_events(&record.run_id, 2).await.expect("events");
    assert_eq!(
        events,
        vec![event(
            &record.run_id,
            3,
            now,
            EventKind::RunExpired {
                key: record.key.clone()
            }
        )]
    );
}

pub async fn a_sweep_of_more_than_one_batch_expires_every_overdue_record_oldest_first(
    store: SharedStore,
) {
    let n = EXPIRE_BATCH + 7;
    let due = paused_due_in_reverse(&store, n).await;
    paused_run(store.as_ref(), "fresh", "agent", 10_000).await;
    let now = TTL + n as u64 + 1;

    let expired = store.expire_due(at(now)).await.expect("sweep");
    assert_eq!(
        keys(&expired),
        keys(&due),
        "every overdue record, once, oldest first across the batches"
    );
    for (record, was) in expired.iter().zip(&due) {
        assert_eq!(
            record,
            &ApprovalRecord {
                status: ApprovalStatus::Expired,
                ..was.clone()
            }
        );
        let stored = store
            .get_approval(&record.key)
            .await
            .expect("get")
            .expect("record");
        assert_eq!(stored.status, ApprovalStatus::Expired, "{}", record.key);
        assert_run_expired(&store, record, now).await;
    }
    assert!(
        store
            .expire_due(at(now))
            .await
            .expect("sweep again")
            .is_empty(),
        "nothing left to expire"
    );
    let fresh = store
        .get_approval("fresh")
        .await
        .expect("get")
        .expect("record");
    assert_eq!(fresh.status, ApprovalStatus::Pending);
}

pub async fn decisions_racing_a_sweep_of_more_than_one_batch_each_have_one_outcome(
    store: SharedStore,
) {
    let n = EXPIRE_BATCH + 7;
    let due = paused_due_in_reverse(&store, n).await;
    let fresh: Vec<String> = (0..20).map(|i| format!("fresh-{i:02}")).collect();
    for (i, key) in fresh.iter().enumerate() {
        paused_run(store.as_ref(), key, "agent", 10_000 + i as u64).await;
    }
    let now = TTL + n as u64 + 1;

    // Decisions taken before the records were due, arriving while the
    // sweep runs: on every tenth overdue record (the sweep's first and
    // last among them) and on records not due.
    let mut contested: Vec<String> = due.iter().step_by(10).map(|r| r.key.clone()).collect();
    if let Some(first_due) = due.last().filter(|r| !contested.contains(&r.key)) {
        contested.push(first_due.key.clone());
    }
    let sweep = {
        let store = Arc::clone(&store);
        tokio::spawn(async move { store.expire_due(at(now)).await })
    };
    let decisions: Vec<_> = contested
        .iter()
        .chain(&fresh)
        .map(|key| {
            let (store, key) = (Arc::clone(&store), key.clone());
            tokio::spawn(async move {
                let outcome = store.claim(&approve(&key, "alice", 1)).await;
                (key, outcome)
            })
        })
        .collect();
    let expired: HashSet<String> = keys(&sweep.await.expect("sweep task").expect("sweep"))
        .into_iter()
        .collect();
    let mut decided = HashSet::new();
    for decision in decisions {
        let (key, outcome) = decision.await.expect("decision task");
        match outcome {
            Ok(claimed) => {
                assert_eq!(claimed.record.status, ApprovalStatus::Approved);
                decided.insert(key);
            }
            Err(StoreError::Approval(
                ApprovalError::Expired { .. } | ApprovalError::AlreadyResolved { .. },
            )) => assert!(
                expired.contains(&key),
                "{key}: refused, so the sweep expired it"
            ),
            Err(other) => panic!("{key}: {other:?}"),
        }
    }
    for key in &fresh {
        assert!(
            decided.contains(key),
            "{key}: a decision on a record not due is kept"
        );
    }
    // Each overdue record has exactly one outcome, stored as returned.
    for record in &due {
        let (was_decided, was_expired) =
            (decided.contains(&record.key), expired.contains(&record.key));
        assert!(
            was_decided != was_expired,
            "{}: decided {was_decided}, expired {was_expired}",
            record.key
        );
        let stored = store
            .get_approval(&record.key)
            .await
            .expect("get")
            .expect("record");
        if was_expired {
            assert_eq!(stored.status, ApprovalStatus::Expired, "{}", record.key);
            assert_run_expired(&store, record, now).await;
        } else {
            assert_eq!(stored.status, ApprovalStatus::Approved, "{}", record.key);
            assert_eq!(stored.decided_by.as_deref(), Some("alice"));
            let events = store.run_events(&record.run_id, 2).await.expect("events");
            assert_eq!(events.len(), 1, "{}: one event, the decision's", record.key);
            assert_eq!(events[0].kind.name(), "approval_resolved", "{}", record.key);
        }
    }
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
        routes: Default::default(),
    };
    store.pause_run(&pause, &[]).await.expect("pause");
    let run = store.get_run("run-k").await.expect("get").expect("run");
    assert_eq!(run.status, RunStatus::AwaitingApproval);
    assert_eq!((run.owner, run.lease_until), (None, None));
}

/// The gate API's decision (`AfterClaim::Finish` planned by
/// `gate::request_finish`): the claim, the run's end
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
    let seqs = event_seqs(store.as_ref(), "r").await;
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
        let seqs = event_seqs(store.as_ref(), &record.run_id).await;
        let want: Vec<u64> = (1..=(2 + claims + cancels) as u64).collect();
        assert_eq!(seqs, want, "round {round}: one event per winner, no gaps");
    }
}
