//! Every store keeps the same contract (DESIGN §3-§4): the cases live in
//! `common/store_cases/` and run here against the memory store (SQLite on
//! a database in memory) and a real SQLite file. SQLite-only properties
//! (durability across instances, migrations under concurrent opens, many
//! instances racing on one file) follow below.

use crate::common::store_cases;

mod memory {
    use std::sync::Arc;

    use super::store_cases::TestStore;
    use tollgate_runtime::store::MemoryStore;

    async fn open() -> TestStore {
        TestStore::new(Arc::new(MemoryStore::new()))
    }

    store_conformance_tests!(open);
}

mod sqlite {
    use std::sync::Arc;

    use super::store_cases::TestStore;
    use tollgate_runtime::store::{SharedStore, SqliteOptions, SqliteStore};

    async fn open() -> TestStore {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("state.db");
        let open_at = move || {
            let store =
                SqliteStore::open(&path, SqliteOptions::default()).expect("open sqlite store");
            let store: SharedStore = Arc::new(store);
            async move { store }
        };
        TestStore::keeping(open_at().await, dir).reopening(open_at)
    }

    store_conformance_tests!(open);
}

mod sqlite_file {
    use std::sync::Arc;

    use super::store_cases::{approve, at, paused_run};
    use tollgate_runtime::pending_approval::{ApprovalError, ApprovalStatus};
    use tollgate_runtime::run_state::RunStatus;
    use tollgate_runtime::store::{
        self, SharedStore, SqliteOptions, SqliteStore, StoreError, Synchronous,
    };

    fn open_at(path: &std::path::Path) -> SharedStore {
        Arc::new(SqliteStore::open(path, SqliteOptions::default()).expect("open sqlite store"))
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn a_reopened_file_sees_every_run_event_and_decision() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("state.db");
        let (record, events, run) = {
            let first = open_at(&path);
            paused_run(first.as_ref(), "decided", "agent", 0).await;
            paused_run(first.as_ref(), "waiting", "agent", 1).await;
            let claimed = first
                .claim(&approve("decided", "alice", 5))
                .await
                .expect("claim");
            let events = first.run_events("run-decided", 0).await.expect("events");
            let run = first.get_run("run-decided").await.expect("run");
            (claimed.record, events, run)
        };

        let second = open_at(&path);
        assert_eq!(
            second.get_approval("decided").await.expect("get"),
            Some(record)
        );
        assert_eq!(
            second.run_events("run-decided", 0).await.expect("events"),
            events
        );
        assert_eq!(second.get_run("run-decided").await.expect("run"), run);
        let waiting = second
            .get_approval("waiting")
            .await
            .expect("get")
            .expect("record");
        assert_eq!(waiting.status, ApprovalStatus::Pending);
        let err = second.claim(&approve("decided", "bob", 6)).await;
        assert!(matches!(
            err,
            Err(StoreError::Approval(ApprovalError::AlreadyResolved { .. }))
        ));
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn two_stores_open_on_one_file_see_each_others_writes() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("state.db");
        let (a, b) = (open_at(&path), open_at(&path));
        paused_run(a.as_ref(), "k", "agent", 0).await;
        b.claim(&approve("k", "bob", 1))
            .await
            .expect("claim through the other store");
        let run = a.get_run("run-k").await.expect("get").expect("run");
        assert_eq!(run.status, RunStatus::Running);
    }

    #[test]
    fn many_threads_opening_a_new_file_at_once_all_succeed() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("fresh.db");
        let openers: Vec<_> = (0..8)
            .map(|_| {
                let path = path.clone();
                std::thread::spawn(move || {
                    SqliteStore::open(&path, SqliteOptions::default()).map(drop)
                })
            })
            .collect();
        for opener in openers {
            opener
                .join()
                .expect("opener thread")
                .expect("concurrent open");
        }
        drop(open_at(&path));
    }

    /// Eight store instances (separate connections, as separate processes
    /// would have) race to approve each of 40 keys: one winner per key.
    #[tokio::test(flavor = "multi_thread", worker_threads = 8)]
    async fn claims_race_across_store_instances_with_one_winner_per_key() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("state.db");
        let stores: Vec<SharedStore> = (0..8).map(|_| open_at(&path)).collect();
        let keys: Vec<String> = (0..40).map(|i| format!("key-{i}")).collect();
        for key in &keys {
            paused_run(stores[0].as_ref(), key, "agent", 0).await;
        }

        let mut racers = Vec::new();
        for key in &keys {
            for (i, store) in stores.iter().enumerate() {
                let (store, key) = (Arc::clone(store), key.clone());
                racers.push(tokio::spawn(async move {
                    let won = store.claim(&approve(&key, &format!("cli-{i}"), 10)).await;
                    (key, won)
                }));
            }
        }
        let mut winners = std::collections::HashMap::<String, usize>::new();
        for racer in racers {
            let (key, outcome) = racer.await.expect("racer task");
            match outcome {
                Ok(_) => *winners.entry(key).or_default() += 1,
                Err(StoreError::Approval(ApprovalError::AlreadyResolved { .. })) => {}
                Err(other) => panic!("unexpected claim failure for {key}: {other}"),
            }
        }
        assert_eq!(winners.len(), keys.len(), "every key was won");
        assert!(
            winners.values().all(|&n| n == 1),
            "one winner per key: {winners:?}"
        );
        for key in &keys {
            let events = stores[7]
                .run_events(&format!("run-{key}"), 2)
                .await
                .expect("events");
            assert_eq!(events.len(), 1, "one approval_resolved event for {key}");
        }
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn synchronous_normal_keeps_the_same_contract() {
        let dir = tempfile::tempdir().expect("temp dir");
        let options = SqliteOptions {
            synchronous: Synchronous::Normal,
            ..SqliteOptions::default()
        };
        let store: SharedStore =
            Arc::new(SqliteStore::open(&dir.path().join("state.db"), options).expect("open"));
        super::store_cases::runs::create_pause_claim_end_round_trip_keeps_every_field(store).await;
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn a_sqlite_url_opens_a_file_creating_its_directories() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("nested/deeper/state.db");
        let location = format!("sqlite://{}", path.display());
        let opened = store::open(&location, SqliteOptions::default()).expect("open by url");
        assert_eq!(opened.describe(), location);
        paused_run(opened.as_ref(), "k", "agent", 0).await;
        assert!(path.exists());
        let none = opened.expire_due(at(1)).await.expect("sweep");
        assert!(none.is_empty());
    }
}
