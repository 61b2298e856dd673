//! Moves: a pending approval moved, with its run, onto another version of
//! its spec (`approvals migrate`, `on_spec_change: auto`): one conditional
//! write that a decision of the same key races, so exactly one of them
//! goes first, and a decision never lands on a version it was not checked
//! against.

use super::fixtures::*;
use super::prelude::*;
use std::collections::BTreeMap;
use tollgate_runtime::pending_approval::ApprovalMove;

/// Move `key` from [`SPEC`] to [`OTHER_SPEC`] at `now`, its gate renamed
/// to `ship`, by `by`.
fn to_other(key: &str, by: &str, now: u64) -> ApprovalMove {
    ApprovalMove {
        key: key.into(),
        from: SPEC.into(),
        to: OTHER_SPEC.into(),
        step_id: "ship".into(),
        step_index: 2,
        message: Some("Ship it now?".into()),
        payload: json!({"order": "A-1", "carrier": "post"}),
        by: by.into(),
        map: BTreeMap::from([("gate".to_string(), "ship".to_string())]),
        auto: false,
        now: at(now),
    }
}

fn move_error(result: Result<impl std::fmt::Debug, StoreError>) -> ApprovalError {
    match result {
        Err(StoreError::Approval(e)) => e,
        other => panic!("expected an approval error, got {other:?}"),
    }
}

pub async fn a_move_takes_the_record_and_its_run_to_the_new_version_with_one_event(
    store: SharedStore,
) {
    let before = paused_run(store.as_ref(), "k", "agent", 0).await;
    let moved = store
        .move_approval(&to_other("k", "ops", 10))
        .await
        .expect("move");
    let expected = ApprovalRecord {
        spec_hash: OTHER_SPEC.into(),
        step_id: "ship".into(),
        step_index: 2,
        message: Some("Ship it now?".into()),
        payload: json!({"order": "A-1", "carrier": "post"}),
        ..before.clone()
    };
    assert_eq!(
        moved.record, expected,
        "the key, run, outputs and times stay"
    );
    let stored = store.get_approval("k").await.expect("get").expect("record");
    assert_eq!(stored, expected);
    let run = store.get_run("run-k").await.expect("run").expect("stored");
    assert_eq!(run.spec_hash, OTHER_SPEC, "the run moves with its approval");
    assert_eq!(run.status, RunStatus::AwaitingApproval);

    let events = store.run_events("run-k", 0).await.expect("events");
    assert_eq!(events.last(), Some(&moved.event));
    assert_eq!(
        moved.event.kind,
        EventKind::ApprovalMigrated {
            key: "k".into(),
            from: SPEC.into(),
            to: OTHER_SPEC.into(),
            by: "ops".into(),
            map: BTreeMap::from([("gate".to_string(), "ship".to_string())]),
            auto: false,
        }
    );
    assert_eq!((moved.event.seq, moved.event.at), (3, at(10)));

    // Decided on the version it moved to, not the one it left.
    let refused = move_error(store.claim(&approve("k", "alice", 11)).await);
    assert_eq!(refused.code(), "spec_changed", "{refused}");
    let won = store
        .claim(&claim(
            "k",
            Decision::Approve { reason: None },
            "alice",
            12,
            OTHER_SPEC,
        ))
        .await
        .expect("approve on the new version");
    assert_eq!(won.record.status, ApprovalStatus::Approved);
    assert_eq!(won.record.step_id, "ship");
}

pub async fn a_move_of_a_record_not_pending_on_its_version_changes_nothing(store: SharedStore) {
    let unknown = move_error(store.move_approval(&to_other("nope", "ops", 1)).await);
    assert_eq!(unknown.code(), "approval_not_found");

    let overdue = paused_run(store.as_ref(), "late", "agent", 0).await;
    let expired = move_error(store.move_approval(&to_other("late", "ops", TTL)).await);
    assert_eq!(
        expired,
        ApprovalError::Expired {
            key: "late".into(),
            expired_at: overdue.expires_at
        }
    );

    paused_run(store.as_ref(), "done", "agent", 0).await;
    store
        .claim(&approve("done", "alice", 5))
        .await
        .expect("approve");
    let decided = move_error(store.move_approval(&to_other("done", "ops", 6)).await);
    assert!(
        matches!(decided, ApprovalError::AlreadyResolved { ref decided_by, .. } if decided_by.as_deref() == Some("alice")),
        "{decided:?}"
    );

    paused_run(store.as_ref(), "twice", "agent", 0).await;
    store
        .move_approval(&to_other("twice", "ops", 5))
        .await
        .expect("first move");
    let again = move_error(store.move_approval(&to_other("twice", "ops", 6)).await);
    assert!(
        matches!(again, ApprovalError::NotOnVersion { .. }),
        "{again:?}"
    );
    assert_eq!(again.code(), "spec_changed");

    for (key, spec, seqs) in [
        ("late", SPEC, vec![1, 2]),
        ("done", SPEC, vec![1, 2, 3]),
        ("twice", OTHER_SPEC, vec![1, 2, 3]),
    ] {
        let record = store.get_approval(key).await.expect("get").expect("record");
        assert_eq!(record.spec_hash, spec, "{key}: left as it was");
        let run = store
            .get_run(&format!("run-{key}"))
            .await
            .expect("run")
            .expect("stored");
        assert_eq!(run.spec_hash, spec, "{key}: its run too");
        assert_eq!(
            event_seqs(store.as_ref(), &format!("run-{key}")).await,
            seqs,
            "{key}: no event for a refused move"
        );
    }
}

/// Four moves and four approvals of one key at once: whichever goes first,
/// it is alone. A move first: the other moves find it moved, the approvals
/// (checked against the old version) are refused and it stays PENDING on
/// the new one. An approval first: nothing moves.
pub async fn moves_and_decisions_racing_on_one_key_have_exactly_one_first(store: SharedStore) {
    for round in 0..8 {
        let key = format!("k{round}");
        paused_run(store.as_ref(), &key, "agent", 0).await;
        let mut contenders = Vec::new();
        for i in 0..8 {
            let store = Arc::clone(&store);
            let key = key.clone();
            contenders.push(tokio::spawn(async move {
                if i % 2 == 0 {
                    store
                        .move_approval(&to_other(&key, &format!("ops-{i}"), 10))
                        .await
                        .map(|_| "moved")
                } else {
                    store
                        .claim(&approve(&key, &format!("user-{i}"), 10))
                        .await
                        .map(|_| "approved")
                }
            }));
        }
        let mut firsts = Vec::new();
        for handle in contenders {
            match handle.await.expect("task") {
                Ok(what) => firsts.push(what),
                Err(StoreError::Approval(
                    ApprovalError::AlreadyResolved { .. }
                    | ApprovalError::NotOnVersion { .. }
                    | ApprovalError::SpecChanged { .. },
                )) => {}
                Err(other) => panic!("a loser is told why, got {other:?}"),
            }
        }
        assert_eq!(
            firsts.len(),
            1,
            "round {round}: exactly one first: {firsts:?}"
        );
        let record = store
            .get_approval(&key)
            .await
            .expect("get")
            .expect("record");
        let run = store
            .get_run(&format!("run-{key}"))
            .await
            .expect("run")
            .expect("stored");
        match firsts[0] {
            "moved" => {
                assert_eq!(record.status, ApprovalStatus::Pending);
                assert_eq!(
                    (record.spec_hash.as_str(), run.spec_hash.as_str()),
                    (OTHER_SPEC, OTHER_SPEC)
                );
            }
            _ => {
                assert_eq!(record.status, ApprovalStatus::Approved);
                assert_eq!(
                    (record.spec_hash.as_str(), run.spec_hash.as_str()),
                    (SPEC, SPEC)
                );
            }
        }
        assert_eq!(
            event_seqs(store.as_ref(), &format!("run-{key}")).await,
            vec![1, 2, 3],
            "round {round}: one event, of the one that went first"
        );
    }
}
