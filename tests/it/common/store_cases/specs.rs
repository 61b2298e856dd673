//! Spec versions (`tollgate_specs`): each hash stored once, whole; a later
//! record only moves `last_seen`; versions listed with what still uses
//! them; concurrent records of one hash all succeed and leave one row.

use super::fixtures::*;
use super::prelude::*;
use std::time::SystemTime;

/// A stored time as the test clock names it.
fn seen<T: Into<SystemTime>>(t: T) -> SystemTime {
    t.into()
}

fn version(hash: &str, agent: &str, seen: u64) -> SpecVersion {
    SpecVersion {
        hash: hash.into(),
        agent_id: agent.into(),
        canonical: format!(r#"{{"agent":"{agent}","steps":[],"x":"${{TOKEN}}"}}"#),
        source: format!("version: 1\nagent: {agent}  # ünïcode ✓\nx: ${{TOKEN}}\n"),
        first_seen: at(seen),
        last_seen: at(seen),
    }
}

pub async fn a_version_is_recorded_once_and_read_back_whole(store: SharedStore) {
    let v = version(SPEC, "agent", 0);
    store.record_spec_version(&v).await.expect("record");
    assert_eq!(
        store.get_spec_version(SPEC).await.expect("get"),
        Some(v.clone())
    );
    assert_eq!(store.get_spec_version(OTHER_SPEC).await.expect("get"), None);
    // A prefix is not a hash: the exact hash only.
    assert_eq!(
        store.get_spec_version(&SPEC[..12]).await.expect("get"),
        None
    );

    let mut bad = version("not-a-hash", "agent", 0);
    store
        .record_spec_version(&bad)
        .await
        .expect_err("a hash is 64 hex digits");
    bad.hash = OTHER_SPEC.into();
    bad.last_seen = at::<SystemTime>(0)
        .checked_add(std::time::Duration::from_secs(400 * 365 * 24 * 3600 * 25))
        .expect("far future")
        .into();
    store
        .record_spec_version(&bad)
        .await
        .expect_err("a time past 9999 is refused");
    assert_eq!(store.get_spec_version(OTHER_SPEC).await.expect("get"), None);
}

pub async fn a_second_record_of_a_hash_moves_last_seen_only(store: SharedStore) {
    let first = version(SPEC, "agent", 0);
    store.record_spec_version(&first).await.expect("record");
    // The same hash recorded again (another process, a later start): even
    // with other text, only last_seen moves.
    let mut again = version(SPEC, "agent", 50);
    again.canonical = "{}".into();
    again.source = "something else".into();
    store.record_spec_version(&again).await.expect("again");
    let stored = store
        .get_spec_version(SPEC)
        .await
        .expect("get")
        .expect("stored");
    assert_eq!(
        stored,
        SpecVersion {
            last_seen: at(50),
            ..first.clone()
        }
    );
    // An older record (a slower process) never moves it back.
    store
        .record_spec_version(&version(SPEC, "agent", 10))
        .await
        .expect("older");
    let stored = store
        .get_spec_version(SPEC)
        .await
        .expect("get")
        .expect("stored");
    assert_eq!(seen(stored.last_seen), at(50));
    assert_eq!(seen(stored.first_seen), at(0));
    assert_eq!(
        store
            .list_spec_versions(None, at(60))
            .await
            .expect("list")
            .len(),
        1
    );
}

pub async fn versions_are_listed_with_their_pending_approvals_and_live_runs(store: SharedStore) {
    const THIRD: &str = "cccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccc";
    store
        .record_spec_version(&version(SPEC, "agent", 0))
        .await
        .expect("record");
    store
        .record_spec_version(&version(OTHER_SPEC, "agent", 10))
        .await
        .expect("record");
    store
        .record_spec_version(&version(THIRD, "other", 20))
        .await
        .expect("record");

    // Under SPEC: two pending approvals, one that ran out (its run still
    // waits for the sweep), one decided and its run completed.
    paused_run(store.as_ref(), "k1", "agent", 1).await;
    paused_run(store.as_ref(), "k2", "agent", 2).await;
    paused_with(store.as_ref(), "k3", "agent", 3, |r| r.expires_at = at(50)).await;
    paused_run(store.as_ref(), "k4", "agent", 4).await;
    store
        .claim(&approve("k4", "alice", 5))
        .await
        .expect("claim");
    store
        .end_run(
            &RunEnd {
                run_id: "run-k4".into(),
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
    // Under OTHER_SPEC: one running run, one that failed.
    for (id, status) in [("r-live", None), ("r-failed", Some(RunStatus::Failed))] {
        let mut run = run_record(id, "agent", 7);
        run.spec_hash = OTHER_SPEC.into();
        store.create_run(&run, &[]).await.expect("create");
        if let Some(status) = status {
            store
                .end_run(
                    &RunEnd {
                        run_id: id.into(),
                        status,
                        outputs: Map::new(),
                        error: Some("boom".into()),
                        at: at(8),
                        owner: None,
                    },
                    &[],
                )
                .await
                .expect("end");
        }
    }

    let listed = store.list_spec_versions(None, at(100)).await.expect("list");
    let rows: Vec<(&str, &str, u64, u64)> = listed
        .iter()
        .map(|v| {
            (
                v.hash.as_str(),
                v.agent_id.as_str(),
                v.pending_approvals,
                v.live_runs,
            )
        })
        .collect();
    assert_eq!(
        rows,
        [
            (THIRD, "other", 0, 0),
            (OTHER_SPEC, "agent", 0, 1),
            (SPEC, "agent", 2, 3),
        ],
        "newest first; k3 ran out, so it is not pending, but its run is not over"
    );
    assert_eq!(seen(listed[2].first_seen), at(0));
    assert_eq!(seen(listed[2].last_seen), at(0));

    let agents: Vec<String> = store
        .list_spec_versions(Some("agent"), at(100))
        .await
        .expect("list")
        .into_iter()
        .map(|v| v.hash)
        .collect();
    assert_eq!(agents, [OTHER_SPEC, SPEC]);
    assert!(
        store
            .list_spec_versions(Some("nobody"), at(100))
            .await
            .expect("list")
            .is_empty()
    );
}

pub async fn concurrent_records_of_one_hash_never_fail_or_duplicate(store: SharedStore) {
    let racers: Vec<_> = (0..16u64)
        .map(|i| {
            let store = Arc::clone(&store);
            tokio::spawn(async move { store.record_spec_version(&version(SPEC, "agent", i)).await })
        })
        .collect();
    for racer in racers {
        racer.await.expect("task").expect("every record succeeds");
    }
    let listed = store.list_spec_versions(None, at(100)).await.expect("list");
    assert_eq!(listed.len(), 1, "one row per hash");
    let stored = store
        .get_spec_version(SPEC)
        .await
        .expect("get")
        .expect("stored");
    assert_eq!(seen(stored.last_seen), at(15), "the latest record wins");
    assert!(stored.first_seen <= stored.last_seen);
}
