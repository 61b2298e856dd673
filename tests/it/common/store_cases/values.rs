//! What every write keeps whole or refuses whole, whichever store: a NUL is
//! kept in every field; a time past the year 9999 and JSON nested deeper
//! than a store reads back are refused before anything is written.

use super::fixtures::*;
use super::prelude::*;

/// A run's outline (what a run view reads) is the run with `{}` for its
/// input, which may be wide and which the view does not show; everything
/// else as stored.
pub async fn a_runs_outline_is_the_run_without_its_input(store: SharedStore) {
    let mut run = run_record("run-outline", "agent", 0);
    run.input = json!({ "wide": "x".repeat(10_000), "n": 1 }).into();
    store
        .create_run(&run, &[event("run-outline", 1, 0, started(&run))])
        .await
        .expect("create");
    let outline = store
        .get_run_outline("run-outline")
        .await
        .expect("outline")
        .expect("the run");
    assert_eq!(outline.input.as_str(), "{}");
    assert_eq!(
        RunRecord {
            input: run.input.clone(),
            ..outline
        },
        run
    );
    assert_eq!(
        store.get_run_outline("no-such-run").await.expect("read"),
        None
    );
}

/// A NUL (`\u0000`) in anything a person or a downstream wrote: the run's
/// input and trigger, a gate's message and payload, the decider, the reason,
/// an edited payload, a run's outputs and error, its events. Every store
/// keeps it as it was given (PostgreSQL's jsonb and text would refuse it).
pub async fn nul_characters_are_kept_in_every_field(store: SharedStore) {
    let nul = "a\u{0}b";
    let mut run = run_record("run-nul", "agent", 0);
    run.input = json!({ "text": nul, nul: [nul] }).into();
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
        routes: Default::default(),
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
    run.input = nested(READABLE_DEPTH).into();
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
    deeper.input = nested(READABLE_DEPTH + 1).into();
    too_deep(store.create_run(&deeper, &[]).await);
    let shallow = run_record("run-deeper", "agent", 0);
    // A run_started event holds no copy of the input (its run's row has
    // it): one whose input is not its run's is refused as such.
    let mismatched = store
        .create_run(&shallow, &[event("run-deeper", 1, 0, started(&deeper))])
        .await;
    assert!(
        matches!(&mismatched, Err(StoreError::Conflict(m)) if m.contains("run_started")),
        "{mismatched:?}"
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
        routes: Default::default(),
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
