//! The run log: what a driver writes (a run's creation, its events, its
//! journal, its pause and end), each write in one piece; the lease that
//! fences a driver's writes, orphans and dead owners' runs taken over with
//! one winner; and an operator's retry or fail of a stuck run.

use super::fixtures::*;
use super::prelude::*;

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
                routes: Default::default(),
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
            input: None,
            pinned_to: None,
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
                    owner: None,
                    routes: Default::default(),
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
        routes: Default::default(),
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
        routes: Default::default(),
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
        routes: Default::default(),
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
    let seqs = event_seqs(store.as_ref(), "r").await;
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
