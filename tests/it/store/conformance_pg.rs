//! The store contract (DESIGN §3-§4) against a real PostgreSQL server: every
//! case of `common/store_cases/`, each in a fresh database of a throwaway
//! cluster (`common/postgres.rs`), then what only a shared database can get
//! wrong: migrations racing and sharing the database, time zones, claims
//! racing across store instances, and opening by URL.

use crate::common::store_cases;

use crate::common::postgres as pg;

use std::sync::Arc;

use tollgate_runtime::store::{PostgresOptions, PostgresStore, SharedStore};

async fn connect(url: &str) -> SharedStore {
    Arc::new(
        PostgresStore::connect(url, PostgresOptions::default())
            .await
            .expect("connect to the test database"),
    )
}

mod postgres {
    use super::store_cases::TestStore;

    async fn open() -> TestStore {
        let db = super::pg::database();
        let url = db.url.clone();
        TestStore::keeping(super::connect(&db.url).await, db).reopening(move || {
            let url = url.clone();
            async move { super::connect(&url).await }
        })
    }

    store_conformance_tests!(open);
}

mod postgres_only {
    use std::collections::HashMap;
    use std::sync::Arc;

    use super::store_cases::{SPEC, TTL, approve, at, paused_run};
    use super::{connect, pg};
    use tollgate_runtime::pending_approval::{ApprovalError, ApprovalOrigin, ApprovalStatus};
    use tollgate_runtime::run_state::RunStatus;
    use tollgate_runtime::store::{
        self, PostgresOptions, PostgresStore, SharedStore, SqliteOptions, StoreError,
    };

    fn history(db: &pg::TestDb) -> String {
        db.psql("SELECT string_agg(version || ':' || name, ',' ORDER BY version) FROM tollgate_schema_history")
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn migrations_run_once_however_many_nodes_start_together_or_again() {
        let db = pg::database();
        // Four "nodes" start at once on an empty database.
        let starts: Vec<_> = (0..4)
            .map(|_| {
                let url = db.url.clone();
                tokio::spawn(async move {
                    PostgresStore::connect(&url, PostgresOptions::default())
                        .await
                        .map(drop)
                })
            })
            .collect();
        for start in starts {
            start
                .await
                .expect("node task")
                .expect("concurrent migration");
        }
        // And again, one after the other.
        for _ in 0..2 {
            drop(connect(&db.url).await);
        }
        assert_eq!(
            history(&db),
            "1:initial,2:notifications,3:lossless_text,4:durable_runs,5:runs_by_age,6:approvals_settled,7:spec_versions,8:votes,9:gate_timers,10:vote_input,11:outbox,12:pending_by_step,13:outbox_lanes,14:started_without_input,15:approval_origin,16:slack_through_outbox,17:slack_message_only"
        );
        let store = connect(&db.url).await;
        paused_run(store.as_ref(), "k", "agent", 0).await;
        store.claim(&approve("k", "alice", 1)).await.expect("claim");
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn other_software_in_the_same_database_is_left_alone() {
        let db = pg::database();
        db.psql(
            "CREATE SCHEMA billing;
             CREATE TABLE billing.invoices (id serial PRIMARY KEY, total numeric);
             INSERT INTO billing.invoices (total) VALUES (10.5), (99);
             CREATE TABLE app_users (id int PRIMARY KEY, name text);
             INSERT INTO app_users VALUES (1, 'ada'), (2, 'grace');
             CREATE TABLE schema_history (version int);  -- someone else's migrations
             INSERT INTO schema_history VALUES (41);",
        );
        let before = db.psql(
            "SELECT string_agg(schemaname || '.' || tablename, ',' ORDER BY 1) FROM pg_tables \
             WHERE schemaname NOT IN ('pg_catalog', 'information_schema')",
        );

        let store = connect(&db.url).await;
        paused_run(store.as_ref(), "k", "agent", 0).await;
        drop(store);
        drop(connect(&db.url).await);

        assert_eq!(
            db.psql("SELECT string_agg(name, ',' ORDER BY id) FROM app_users"),
            "ada,grace"
        );
        assert_eq!(
            db.psql("SELECT string_agg(total::text, ',' ORDER BY id) FROM billing.invoices"),
            "10.5,99"
        );
        assert_eq!(db.psql("SELECT version FROM schema_history"), "41");
        let ours = db.psql(
            "SELECT string_agg(schemaname || '.' || tablename, ',' ORDER BY 1) FROM pg_tables \
             WHERE schemaname NOT IN ('pg_catalog', 'information_schema') \
               AND tablename NOT LIKE 'tollgate\\_%'",
        );
        assert_eq!(ours, before, "no foreign table added, removed or renamed");
        let indexes = db.psql(
            "SELECT count(*) FROM pg_indexes WHERE schemaname = 'public' \
             AND tablename LIKE 'tollgate\\_%' AND indexname NOT LIKE 'tollgate\\_%'",
        );
        // Primary keys are named by PostgreSQL after their table.
        assert_eq!(indexes, "0", "every index of ours has the tollgate_ prefix");
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn a_schema_newer_than_this_build_is_refused() {
        let db = pg::database();
        drop(connect(&db.url).await);
        db.psql(
            "INSERT INTO tollgate_schema_history (version, name, applied_at) \
             VALUES (99, 'future', now())",
        );
        match PostgresStore::connect(&db.url, PostgresOptions::default()).await {
            Err(StoreError::SchemaTooNew { found, supported }) => {
                assert_eq!((found, supported), (99, 17));
            }
            Err(other) => panic!("expected SchemaTooNew, got {other:?}"),
            Ok(_) => panic!("expected SchemaTooNew, the store opened"),
        }
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn timestamps_are_utc_whatever_the_server_time_zone() {
        let db = pg::database();
        db.psql(&format!(
            "ALTER DATABASE {} SET TimeZone = 'Asia/Kolkata'",
            db.name
        ));
        assert_eq!(db.psql("SHOW TimeZone"), "Asia/Kolkata");
        let store = connect(&db.url).await;
        let record = paused_run(store.as_ref(), "k", "agent", 0).await;
        assert_eq!(
            store.get_approval("k").await.expect("get"),
            Some(record.clone())
        );
        let claimed = store
            .claim(&approve("k", "alice", 60))
            .await
            .expect("claim");
        assert_eq!(claimed.record.decided_at, Some(at(60)));

        // What is stored is the instant: read in UTC by psql, it is the
        // fixture's clock (2026-03-01T09:00:00.123456Z + seconds).
        let stored = db.psql(
            "SELECT to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US') || ' ' || \
                    to_char(decided_at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US') \
             FROM tollgate_approvals WHERE key = 'k'",
        );
        assert_eq!(
            stored,
            "2026-03-01T09:00:00.123456 2026-03-01T09:01:00.123456"
        );

        // A session time zone set in the URL changes nothing either.
        let other = connect(&format!(
            "{}?options=-c%20TimeZone%3DAmerica/St_Johns",
            db.url
        ))
        .await;
        let again = other.get_approval("k").await.expect("get").expect("record");
        assert_eq!(again, claimed.record);
        // The expiry comparison happens in the database: still exact.
        let expired = other.expire_due(at(TTL)).await.expect("sweep");
        assert!(expired.is_empty(), "decided records never expire");
        paused_run(other.as_ref(), "k2", "agent", 0).await;
        assert!(
            other
                .expire_due(at(TTL - 1))
                .await
                .expect("sweep")
                .is_empty()
        );
        assert_eq!(other.expire_due(at(TTL)).await.expect("sweep").len(), 1);
    }

    /// 64 claimers of one key spread over three store instances (three
    /// pools, as three servers would have): one winner, one event.
    #[tokio::test(flavor = "multi_thread", worker_threads = 8)]
    async fn sixty_four_claims_of_one_key_across_three_instances_have_one_winner() {
        let db = pg::database();
        let stores: Vec<SharedStore> = vec![
            connect(&db.url).await,
            connect(&db.url).await,
            connect(&db.url).await,
        ];
        paused_run(stores[0].as_ref(), "k", "agent", 0).await;
        let racers: Vec<_> = (0..64)
            .map(|i| {
                let store = Arc::clone(&stores[i % 3]);
                tokio::spawn(async move { store.claim(&approve("k", &format!("u-{i}"), 10)).await })
            })
            .collect();
        let mut winners = Vec::new();
        for racer in racers {
            match racer.await.expect("racer") {
                Ok(claimed) => winners.push(claimed.record.decided_by),
                Err(StoreError::Approval(ApprovalError::AlreadyResolved { .. })) => {}
                Err(other) => panic!("a losing claim must be already_resolved, got {other:?}"),
            }
        }
        assert_eq!(winners.len(), 1, "exactly one winner: {winners:?}");
        let record = stores[2]
            .get_approval("k")
            .await
            .expect("get")
            .expect("record");
        assert_eq!(record.decided_by, winners[0]);
        let events = stores[1].run_events("run-k", 0).await.expect("events");
        assert_eq!(events.iter().map(|e| e.seq).collect::<Vec<_>>(), [1, 2, 3]);
    }

    /// Claims of different keys race across instances too: one winner each.
    #[tokio::test(flavor = "multi_thread", worker_threads = 8)]
    async fn claims_of_many_keys_race_across_instances_with_one_winner_each() {
        let db = pg::database();
        let stores: Vec<SharedStore> = vec![connect(&db.url).await, connect(&db.url).await];
        let keys: Vec<String> = (0..20).map(|i| format!("key-{i}")).collect();
        for key in &keys {
            paused_run(stores[0].as_ref(), key, "agent", 0).await;
        }
        let mut racers = Vec::new();
        for key in &keys {
            for (i, store) in stores.iter().enumerate() {
                let (store, key) = (Arc::clone(store), key.clone());
                racers.push(tokio::spawn(async move {
                    let won = store.claim(&approve(&key, &format!("node-{i}"), 10)).await;
                    (key, won.is_ok())
                }));
            }
        }
        let mut winners = HashMap::<String, usize>::new();
        for racer in racers {
            let (key, won) = racer.await.expect("racer");
            *winners.entry(key).or_default() += usize::from(won);
        }
        assert!(winners.values().all(|&n| n == 1), "{winners:?}");
    }

    /// A claim given up part-way (a client that went away, a timeout),
    /// after its BEGIN and UPDATE went out together and while the UPDATE
    /// waits for a row lock, commits nothing, and its connection goes back
    /// to the pool out of its transaction: the next claim on that one
    /// connection decides normally, once.
    #[tokio::test(flavor = "multi_thread")]
    async fn a_claim_dropped_part_way_commits_nothing_and_leaves_its_connection_clean() {
        let db = pg::database();
        let one_connection = PostgresOptions {
            pool_size: 1,
            ..PostgresOptions::default()
        };
        let store: SharedStore = Arc::new(
            PostgresStore::connect(&db.url, one_connection)
                .await
                .expect("connect"),
        );
        paused_run(store.as_ref(), "k", "agent", 0).await;

        // Another session holds the record's row until the test lets it go
        // (a fixed sleep could end before the claim below gives up, on a
        // loaded machine).
        let cluster = pg::cluster();
        let mut holder = std::process::Command::new(cluster.bin("psql"))
            .args(["-X", "-q", "-h", "127.0.0.1", "-U", "postgres"])
            .args(["-p", &cluster.port().to_string(), "-d", &db.name])
            .args(["-c", "BEGIN; SELECT 1 FROM tollgate_approvals WHERE key = 'k' FOR UPDATE; SELECT pg_sleep(120); COMMIT;"])
            .stdout(std::process::Stdio::null())
            // It ends with "canceling statement due to user request".
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("run psql");
        let holding = "SELECT count(*) FROM pg_stat_activity \
                       WHERE query LIKE '%pg_sleep(120)%' AND state = 'active' AND pid <> pg_backend_pid()";
        let mut waited = 0;
        while db.psql(holding) != "1" {
            assert!(waited < 200, "the holder never took the row lock");
            std::thread::sleep(std::time::Duration::from_millis(25));
            waited += 1;
        }

        let given_up = tokio::time::timeout(
            std::time::Duration::from_millis(300),
            store.claim(&approve("k", "alice", 10)),
        )
        .await;
        assert!(given_up.is_err(), "the claim should wait for the row lock");

        // Let go: cancelling the holder's statement rolls its transaction back.
        let released = "SELECT count(*) FROM (SELECT pg_cancel_backend(pid) FROM pg_stat_activity \
                        WHERE query LIKE '%pg_sleep(120)%' AND pid <> pg_backend_pid()) AS cancelled";
        assert_eq!(db.psql(released), "1", "the holder is cancelled");
        // Same pool, same connection: this claim runs after the first one's
        // rollback.
        let claimed = store
            .claim(&approve("k", "bob", 11))
            .await
            .expect("the next claim decides");
        assert_eq!(claimed.record.decided_by.as_deref(), Some("bob"));
        holder.wait().expect("psql ends once cancelled");
        let record = store.get_approval("k").await.expect("get").expect("record");
        assert_eq!(record.decided_by.as_deref(), Some("bob"));
        let events = store.run_events("run-k", 0).await.expect("events");
        assert_eq!(
            events.iter().map(|e| e.seq).collect::<Vec<_>>(),
            [1, 2, 3],
            "one decision's events, not two"
        );
        // This test's database only: the cluster is shared with the other
        // PostgreSQL tests, whose transactions run meanwhile.
        assert_eq!(
            db.psql(
                "SELECT count(*) FROM pg_stat_activity \
                 WHERE state LIKE 'idle in transaction%' AND datname = current_database()"
            ),
            "0"
        );
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn a_postgres_url_opens_the_store_without_showing_the_password() {
        let db = pg::database();
        db.psql("ALTER USER postgres PASSWORD 'hunter2'");
        let with_password = db.url.replace("postgres@", "postgres:hunter2@");
        let opened = store::open_async(&with_password, SqliteOptions::default())
            .await
            .expect("open by url");
        assert!(
            !opened.describe().contains("hunter2"),
            "{}",
            opened.describe()
        );
        assert!(
            opened
                .describe()
                .starts_with("postgres://postgres@127.0.0.1:")
        );
        paused_run(opened.as_ref(), "k", "agent", 0).await;

        // The blocking form, as the CLI calls it from its runtime.
        let url = with_password.replace("postgres://", "postgresql://");
        let sync = store::open(&url, SqliteOptions::default()).expect("open by url, blocking");
        let record = sync.get_approval("k").await.expect("get").expect("record");
        assert_eq!(record.status, ApprovalStatus::Pending);
        assert_eq!(record.spec_hash, SPEC);
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn an_unreachable_server_is_a_clear_error() {
        let url = format!(
            "postgres://postgres@127.0.0.1:{}/nowhere?connect_timeout=2",
            pg::cluster().port()
        );
        let err = store::open_async(&url, SqliteOptions::default())
            .await
            .err()
            .expect("no such database");
        let text = err.to_string();
        assert!(
            text.contains("cannot connect") && text.contains("nowhere"),
            "{text}"
        );
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn unreadable_rows_are_reported_as_corrupt_naming_the_row() {
        let db = pg::database();
        let store = connect(&db.url).await;
        paused_run(store.as_ref(), "k1", "agent", 0).await;
        db.psql("UPDATE tollgate_runs SET status = 'paused?' WHERE id = 'run-k1'");
        let err = store.get_run("run-k1").await.expect_err("unknown status");
        assert!(
            matches!(&err, StoreError::Corrupt(m) if m.contains("tollgate_runs.status") && m.contains("paused?")),
            "{err:?}"
        );
        db.psql("UPDATE tollgate_approvals SET outputs = '[1]' WHERE key = 'k1'");
        let err = store
            .get_approval("k1")
            .await
            .expect_err("outputs not an object");
        assert!(
            matches!(&err, StoreError::Corrupt(m) if m.contains("tollgate_approvals.outputs") && m.contains("k1")),
            "{err:?}"
        );
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn a_run_started_event_holds_no_input_and_an_earlier_builds_copy_reads_the_same() {
        use tollgate_runtime::events::EventKind;
        let db = pg::database();
        let store = connect(&db.url).await;
        paused_run(store.as_ref(), "k", "agent", 0).await;
        let run = store.get_run("run-k").await.expect("get").expect("run");
        let sql = "SELECT (event::jsonb) ? 'input' FROM tollgate_run_events \
                   WHERE run_id = 'run-k' AND seq = 1";
        assert_eq!(db.psql(sql), "f", "the run's row holds the input");
        let reads_the_runs = |kind: &EventKind| matches!(kind, EventKind::RunStarted { input, .. } if *input == run.input);
        let events = store.run_events("run-k", 0).await.expect("events");
        assert!(reads_the_runs(&events[0].kind), "{events:?}");

        db.psql(
            "UPDATE tollgate_run_events e SET event = (e.event::jsonb || \
             jsonb_build_object('input', r.input))::json FROM tollgate_runs r \
             WHERE r.id = e.run_id AND e.seq = 1",
        );
        assert_eq!(db.psql(sql), "t", "as an earlier build wrote it");
        let events = store.run_events("run-k", 0).await.expect("events");
        assert!(reads_the_runs(&events[0].kind), "{events:?}");
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn a_claimed_run_is_running_for_every_node() {
        let db = pg::database();
        let (a, b) = (connect(&db.url).await, connect(&db.url).await);
        paused_run(a.as_ref(), "k", "agent", 0).await;
        b.claim(&approve("k", "bob", 1)).await.expect("claim on b");
        let run = a.get_run("run-k").await.expect("get").expect("run");
        assert_eq!(run.status, RunStatus::Running);
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn unreadable_rows_are_skipped_by_listing_and_sweeping_and_named() {
        let db = pg::database();
        let store = connect(&db.url).await;
        for key in ["k1", "k2", "k3"] {
            paused_run(store.as_ref(), key, "agent", 0).await;
        }
        db.psql("UPDATE tollgate_approvals SET outputs = '[1]' WHERE key = 'k1'");
        let page = store
            .list_pending(&store::PendingQuery {
                agent_id: None,
                now: at(1),
                limit: 10,
                cursor: None,
            })
            .await
            .expect("one bad row does not stop the listing");
        let listed: Vec<_> = page.approvals.iter().map(|r| r.key.as_str()).collect();
        assert_eq!(listed, ["k3", "k2"]);
        assert_eq!(page.unreadable.len(), 1);
        assert_eq!(page.unreadable[0].key, "k1");
        let swept = store
            .expire_due(at(TTL + 1))
            .await
            .expect("one bad row does not stop the sweep");
        let swept: Vec<_> = swept.iter().map(|r| r.key.as_str()).collect();
        assert_eq!(swept, ["k2", "k3"]);
        let run = store.get_run("run-k2").await.expect("get").expect("run");
        assert_eq!(run.status, RunStatus::Expired);
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn a_version_2_database_is_converted_keeping_every_value() {
        // A store written by the previous schema (jsonb and text columns),
        // then opened by this build: migration 3 converts it in place.
        let db = pg::database();
        db.psql(include_str!(
            "../../../vendored/src/store/migrations/postgres/0001_initial.sql"
        ));
        db.psql(include_str!(
            "../../../vendored/src/store/migrations/postgres/0002_notifications.sql"
        ));
        db.psql(
            "CREATE TABLE tollgate_schema_history (version bigint PRIMARY KEY, \
             name text NOT NULL, applied_at timestamptz NOT NULL); \
             INSERT INTO tollgate_schema_history VALUES (1, 'initial', now()), \
             (2, 'notifications', now())",
        );
        db.psql(
            "INSERT INTO tollgate_runs VALUES ('run-old', 'agent', 'h', 'awaiting_approval', \
             '{\"n\": 1, \"s\": \"ünï\"}', '{\"kind\": \"cli\"}', '{\"a\": [1, 2]}', \
             'an old error', '2026-01-01T00:00:00Z', '2026-01-01T00:00:01Z'); \
             INSERT INTO tollgate_run_events VALUES ('run-old', 1, \
             '{\"run_id\": \"run-old\", \"seq\": 1, \"at\": \"2026-01-01T00:00:00Z\", \
             \"type\": \"run_completed\", \"outputs\": {}}'); \
             INSERT INTO tollgate_approvals VALUES ('k-old', 'run-old', 'agent', 'h', 1, 'gate', \
             'before', 'Ship it?', '{\"order\": \"A1\"}', '{\"a\": [1, 2]}', '{\"n\": 1}', \
             '{\"kind\": \"cli\"}', 'APPROVED', '{\"reason\": \"ok\"}', 'alice', \
             '2026-01-01T00:00:02Z', '2026-01-01T00:00:00Z', '2026-01-02T00:00:00Z')",
        );
        let store = connect(&db.url).await;
        assert_eq!(
            history(&db),
            "1:initial,2:notifications,3:lossless_text,4:durable_runs,5:runs_by_age,6:approvals_settled,7:spec_versions,8:votes,9:gate_timers,10:vote_input,11:outbox,12:pending_by_step,13:outbox_lanes,14:started_without_input,15:approval_origin,16:slack_through_outbox,17:slack_message_only"
        );
        let record = store
            .get_approval("k-old")
            .await
            .expect("get")
            .expect("record");
        assert_eq!(record.message.as_deref(), Some("Ship it?"));
        assert_eq!(record.decided_by.as_deref(), Some("alice"));
        assert_eq!(record.payload, serde_json::json!({"order": "A1"}));
        assert_eq!(record.reason(), Some("ok"));
        assert_eq!(record.status, ApprovalStatus::Approved);
        let run = store.get_run("run-old").await.expect("get").expect("run");
        assert_eq!(run.error.as_deref(), Some("an old error"));
        assert_eq!(
            run.input.to_value(),
            serde_json::json!({"n": 1, "s": "ünï"})
        );
        let events = store.run_events("run-old", 0).await.expect("events");
        assert_eq!(events.len(), 1);
        assert_eq!(
            db.psql(
                "SELECT data_type FROM information_schema.columns \
                     WHERE table_name = 'tollgate_approvals' AND column_name = 'message'"
            ),
            "json"
        );
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn a_version_14_database_gains_origins_from_the_old_gate_marker() {
        // The schema as version 14 left it: today's without `origin`, and
        // no later migration recorded (the store applies those above the
        // highest recorded; 16 writes rows only and 17 drops columns only
        // if they exist, so they run again safely).
        let db = pg::database();
        drop(connect(&db.url).await);
        db.psql(
            "ALTER TABLE tollgate_approvals DROP COLUMN origin; \
             DELETE FROM tollgate_schema_history WHERE version >= 15",
        );
        // Rows as version 14 wrote them: a gate request made through a
        // server (its spec hash 64 zeros, its run's too), a program's own
        // request, and a workflow run's pause.
        db.psql(
            "INSERT INTO tollgate_runs (id, agent_id, spec_hash, status, input, \"trigger\", \
             outputs, created_at, updated_at) VALUES \
             ('k-req', 'gate:agent', repeat('0', 64), 'running', '{}', '{}', '{}', \
              '2026-01-01T00:00:00Z', '2026-01-01T00:00:00Z'), \
             ('k-prog', 'gate:payouts', repeat('0', 64), 'running', '{}', '{}', '{}', \
              '2026-01-01T00:00:00Z', '2026-01-01T00:00:00Z'), \
             ('run-p', 'agent', 'h', 'awaiting_approval', '{}', '{}', '{}', \
              '2026-01-01T00:00:00Z', '2026-01-01T00:00:00Z'); \
             INSERT INTO tollgate_approvals (key, run_id, agent_id, spec_hash, step_index, \
             step_id, phase, message, payload, outputs, input, \"trigger\", status, \
             created_at, expires_at) VALUES \
             ('k-req', 'k-req', 'agent', repeat('0', 64), 0, 'ship', 'before', '\"Ship?\"', \
              '{}', '{}', '{\"action\": \"ship\"}', \
              '{\"kind\": \"gate\", \"requested_by\": \"bot\", \"requester\": null, \
                \"idempotency_key\": \"i-1\", \"fingerprint\": \"f-1\"}', \
              'PENDING', '2026-01-01T00:00:00Z', '2027-01-01T00:00:00Z'), \
             ('k-prog', 'k-prog', 'gate:payouts', repeat('0', 64), 0, 'pay', 'before', NULL, \
              '{}', '{}', '{\"action\": \"pay\"}', '{\"kind\": \"gate\"}', \
              'PENDING', '2026-01-01T00:00:00Z', '2027-01-01T00:00:00Z'), \
             ('k-pause', 'run-p', 'agent', 'h', 1, 'gate', 'before', NULL, \
              '{}', '{}', '{}', '{\"kind\": \"cli\"}', \
              'PENDING', '2026-01-01T00:00:00Z', '2027-01-01T00:00:00Z')",
        );
        let store = connect(&db.url).await;
        assert!(
            history(&db)
                .ends_with(",14:started_without_input,15:approval_origin,16:slack_through_outbox,17:slack_message_only")
        );
        let get = |key: &'static str| {
            let store = store.clone();
            async move { store.get_approval(key).await.expect("get").expect("kept") }
        };
        let request = get("k-req").await;
        assert_eq!(
            request.origin,
            ApprovalOrigin::Request {
                requested_by: Some("bot".into()),
                fingerprint: Some("f-1".into())
            }
        );
        assert_eq!(request.paused_under(), None);
        let program = get("k-prog").await;
        assert_eq!(
            program.origin,
            ApprovalOrigin::Request {
                requested_by: None,
                fingerprint: None
            }
        );
        let pause = get("k-pause").await;
        assert_eq!(pause.origin, ApprovalOrigin::Pause);
        assert_eq!(pause.paused_under(), Some("h"));
        // The old marker is gone from both tables; a pause keeps its hash.
        assert_eq!(
            db.psql(
                "SELECT string_agg(key || '=' || origin || ':' || spec_hash, ',' ORDER BY key) \
                 FROM tollgate_approvals"
            ),
            "k-pause=pause:h,k-prog=request:,k-req=request:"
        );
        assert_eq!(
            db.psql(
                "SELECT string_agg(id || ':' || spec_hash, ',' ORDER BY id) FROM tollgate_runs"
            ),
            "k-prog:,k-req:,run-p:h"
        );
        // A request is on no version: stale counts and filters skip it.
        let by_spec = store
            .count_pending_by_spec("agent", at(1))
            .await
            .expect("count");
        assert_eq!(
            by_spec.into_iter().collect::<Vec<_>>(),
            [("h".to_string(), 1)]
        );
    }

    /// Every migration up to version 14, as the previous build applied them.
    const PREVIOUS_SCHEMA: [(i64, &str, &str); 14] = [
        (
            1,
            "initial",
            include_str!("../../../vendored/src/store/migrations/postgres/0001_initial.sql"),
        ),
        (
            2,
            "notifications",
            include_str!("../../../vendored/src/store/migrations/postgres/0002_notifications.sql"),
        ),
        (
            3,
            "lossless_text",
            include_str!("../../../vendored/src/store/migrations/postgres/0003_lossless_text.sql"),
        ),
        (
            4,
            "durable_runs",
            include_str!("../../../vendored/src/store/migrations/postgres/0004_durable_runs.sql"),
        ),
        (
            5,
            "runs_by_age",
            include_str!("../../../vendored/src/store/migrations/postgres/0005_runs_by_age.sql"),
        ),
        (
            6,
            "approvals_settled",
            include_str!(
                "../../../vendored/src/store/migrations/postgres/0006_approvals_settled.sql"
            ),
        ),
        (
            7,
            "spec_versions",
            include_str!("../../../vendored/src/store/migrations/postgres/0007_spec_versions.sql"),
        ),
        (
            8,
            "votes",
            include_str!("../../../vendored/src/store/migrations/postgres/0008_votes.sql"),
        ),
        (
            9,
            "gate_timers",
            include_str!("../../../vendored/src/store/migrations/postgres/0009_gate_timers.sql"),
        ),
        (
            10,
            "vote_input",
            include_str!("../../../vendored/src/store/migrations/postgres/0010_vote_input.sql"),
        ),
        (
            11,
            "outbox",
            include_str!("../../../vendored/src/store/migrations/postgres/0011_outbox.sql"),
        ),
        (
            12,
            "pending_by_step",
            include_str!(
                "../../../vendored/src/store/migrations/postgres/0012_pending_by_step.sql"
            ),
        ),
        (
            13,
            "outbox_lanes",
            include_str!("../../../vendored/src/store/migrations/postgres/0013_outbox_lanes.sql"),
        ),
        (
            14,
            "started_without_input",
            include_str!(
                "../../../vendored/src/store/migrations/postgres/0014_started_without_input.sql"
            ),
        ),
    ];

    /// A database as the previous build (schema 14) left it.
    fn previous_schema(db: &pg::TestDb) {
        db.psql(
            "CREATE TABLE tollgate_schema_history (version bigint PRIMARY KEY, \
             name text NOT NULL, applied_at timestamptz NOT NULL)",
        );
        for (version, name, sql) in PREVIOUS_SCHEMA {
            db.psql(sql);
            db.psql(&format!(
                "INSERT INTO tollgate_schema_history VALUES ({version}, '{name}', now())"
            ));
        }
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn approvals_paused_before_the_outbox_get_the_slack_notices_their_messages_need() {
        use tollgate_runtime::store::NoticeQuery;
        let db = pg::database();
        previous_schema(&db);
        // Rows as schema 14 wrote them (JSON text columns, no routes).
        for (key, agent, status) in [
            ("k-unseen", "agent", "PENDING"),
            ("k-unposted", "agent", "PENDING"),
            ("k-posted", "agent", "PENDING"),
            ("k-voting", "agent", "PENDING"),
            ("k-settled", "agent", "APPROVED"),
            ("k-done", "agent", "APPROVED"),
            // An agent no Slack notifier ever worked for: left alone.
            ("k-quiet", "quiet", "PENDING"),
        ] {
            db.psql(&format!(
                "INSERT INTO tollgate_runs (id, agent_id, spec_hash, status, input, \"trigger\", \
                 outputs, created_at, updated_at) VALUES ('run-{key}', '{agent}', 'h', \
                 'awaiting_approval', '{{}}', '{{}}', '{{}}', '2026-01-01T00:00:00Z', \
                 '2026-01-01T00:00:00Z'); \
                 INSERT INTO tollgate_approvals (key, run_id, agent_id, spec_hash, step_index, \
                 step_id, phase, message, payload, outputs, input, \"trigger\", status, \
                 created_at, expires_at) VALUES ('{key}', 'run-{key}', '{agent}', 'h', 0, \
                 'gate', 'before', '\"Ship?\"', '{{\"order\": \"A1\"}}', '{{}}', '{{}}', '{{}}', \
                 '{status}', '2026-01-01T00:00:00Z', '2999-01-01T00:00:00Z')"
            ));
        }
        db.psql(
            "UPDATE tollgate_approvals SET roster = '{\"rules\": []}' WHERE key = 'k-voting'; \
             INSERT INTO tollgate_notifications (key, channel, ts, posted_at, attempts, \
             decision_posted_at) VALUES \
             ('k-unposted', NULL, NULL, NULL, 1, NULL), \
             ('k-posted', 'C0POSTED', '1700000000.000001', now(), 1, NULL), \
             ('k-voting', 'C0POSTED', '1700000000.000002', now(), 1, NULL), \
             ('k-settled', 'C0POSTED', '1700000000.000003', now(), 1, NULL), \
             ('k-done', 'C0POSTED', '1700000000.000004', now(), 2, now())",
        );
        let store = connect(&db.url).await;
        assert!(history(&db).ends_with(",16:slack_through_outbox,17:slack_message_only"));
        let all = store
            .list_notices(&NoticeQuery {
                limit: 100,
                ..NoticeQuery::default()
            })
            .await
            .expect("the migrated notices read back");
        let mut written: Vec<(String, &str, &str, &str)> = all
            .iter()
            .map(|n| {
                (
                    n.notice.key.clone(),
                    n.notice.event.as_str(),
                    n.notice.channel.as_str(),
                    n.status.as_str(),
                )
            })
            .collect();
        written.sort();
        assert_eq!(
            written,
            vec![
                ("k-settled".into(), "approval.approved", "slack", "pending"),
                (
                    "k-unposted".into(),
                    "approval.requested",
                    "slack",
                    "pending"
                ),
                ("k-unseen".into(), "approval.requested", "slack", "pending"),
                ("k-voting".into(), "approval.voted", "slack", "pending"),
            ],
            "a notice for each message with work left, none for the others"
        );
        for notice in &all {
            let n = &notice.notice;
            assert_eq!(n.body.event, n.event);
            assert_eq!(n.body.data.key, n.key);
            assert_eq!(n.body.data.run_id, format!("run-{}", n.key));
            assert_eq!(n.body.data.agent, "agent");
            assert_eq!(n.body.data.message.as_deref(), Some("Ship?"));
            assert!(n.body.data.payload_preview.contains("A1"));
            assert_eq!(n.id.len(), 36, "a UUID: {}", n.id);
            assert!(notice.next_at <= chrono::Utc::now(), "due at once");
            let posted_in = if n.key == "k-unseen" || n.key == "k-unposted" {
                ""
            } else {
                "C0POSTED"
            };
            assert_eq!(n.target, posted_in);
            let routes = store
                .routes_of(&n.key)
                .await
                .expect("routes")
                .expect("stored");
            assert_eq!(routes.slack.as_deref(), Some(posted_in), "{}", n.key);
            assert!(routes.webhooks.is_empty() && routes.email.is_none());
        }
        for key in ["k-posted", "k-done", "k-quiet"] {
            assert_eq!(
                store.routes_of(key).await.expect("routes"),
                None,
                "{key} is left as it was"
            );
        }
    }

    /// 10,000 PENDING records of one agent and 2,000 settled ones (every
    /// sixth approved a day later), analysed as autovacuum would.
    fn fill(db: &pg::TestDb) {
        db.psql(
            "INSERT INTO tollgate_runs (id, agent_id, spec_hash, status, input, \"trigger\", \
             outputs, created_at, updated_at) \
             SELECT 'run-' || lpad(i::text, 5, '0'), 'agent', 'h', 'awaiting_approval', \
             '{}', '{}', '{}', t, t FROM generate_series(0, 11999) AS i, \
             LATERAL (SELECT timestamptz '2026-01-01 00:00:00+00' + i * interval '1 second' AS t) AS c; \
             INSERT INTO tollgate_approvals (key, run_id, agent_id, spec_hash, step_index, \
             step_id, phase, message, payload, outputs, input, \"trigger\", status, decided_by, \
             decided_at, created_at, expires_at) \
             SELECT 'key-' || lpad(i::text, 5, '0'), 'run-' || lpad(i::text, 5, '0'), 'agent', \
             'h', 0, 'refund', 'before', '\"Refund?\"', '{}', '{}', '{}', '{}', \
             CASE WHEN i % 6 = 0 THEN 'APPROVED' ELSE 'PENDING' END, \
             CASE WHEN i % 6 = 0 THEN '\"alice\"'::json END, \
             CASE WHEN i % 6 = 0 THEN t + interval '1 day' END, t, \
             timestamptz '2027-01-01 00:00:00+00' \
             FROM generate_series(0, 11999) AS i, \
             LATERAL (SELECT timestamptz '2026-01-01 00:00:00+00' + i * interval '1 second' AS t) AS c; \
             ANALYZE tollgate_runs; ANALYZE tollgate_approvals;",
        );
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn approval_pages_read_the_pending_and_settled_indexes() {
        use tollgate_runtime::store::{ApprovalQuery, prelude::*};
        let db = pg::database();
        let store = PostgresStore::connect(&db.url, PostgresOptions::default())
            .await
            .expect("connect");
        fill(&db);
        let now = "2026-06-01T00:00:00Z".parse().expect("time");
        let inbox = ApprovalQuery {
            agent_id: Some("agent".into()),
            statuses: vec![ApprovalStatus::Pending],
            step_id: None,
            text: None,
            now,
            limit: 50,
            cursor: None,
            ..Default::default()
        };
        let settled: Vec<ApprovalStatus> = ApprovalStatus::ALL
            .iter()
            .copied()
            .filter(|s| *s != ApprovalStatus::Pending)
            .collect();
        let history = ApprovalQuery {
            statuses: settled,
            ..inbox.clone()
        };
        let first = store.list_approvals(&inbox).await.expect("inbox page");
        assert_eq!(first.approvals.len(), 50);
        assert_eq!(first.approvals[0].key, "key-11999");
        let later = ApprovalQuery {
            cursor: first.next_cursor.clone(),
            ..inbox.clone()
        };
        let page = store.list_approvals(&history).await.expect("history page");
        assert_eq!(page.approvals[0].key, "key-11994");
        let history_later = ApprovalQuery {
            cursor: page.next_cursor.clone(),
            ..history.clone()
        };
        let everything = ApprovalQuery {
            statuses: Vec::new(),
            ..inbox.clone()
        };
        // A step no approval waits at: its own index finds none at once.
        let by_step = ApprovalQuery {
            step_id: Some("act".into()),
            ..inbox.clone()
        };
        assert!(
            store
                .list_approvals(&by_step)
                .await
                .expect("step page")
                .approvals
                .is_empty()
        );
        for (what, query, uses) in [
            (
                "inbox",
                &inbox,
                vec!["tollgate_approvals_pending_agent_idx"],
            ),
            (
                "inbox, page 2",
                &later,
                vec!["tollgate_approvals_pending_agent_idx"],
            ),
            (
                "history",
                &history,
                vec!["tollgate_approvals_settled_agent_idx"],
            ),
            (
                "history, page 2",
                &history_later,
                vec!["tollgate_approvals_settled_agent_idx"],
            ),
            (
                "inbox, one step",
                &by_step,
                vec!["tollgate_approvals_pending_step_idx"],
            ),
            (
                "every status",
                &everything,
                vec![
                    "tollgate_approvals_pending_agent_idx",
                    "tollgate_approvals_settled_agent_idx",
                ],
            ),
        ] {
            let plan = store
                .explain_list_approvals(query)
                .await
                .expect("explain")
                .join("\n");
            eprintln!("{what}:\n{plan}");
            // Either index of each kind walks the rows in order (with one
            // agent in the table, the planner may take the one without it).
            for index in uses {
                let either = index.replace("_agent_idx", "_idx");
                assert!(
                    plan.contains(&format!("Index Scan using {index}"))
                        || plan.contains(&format!("Index Scan using {either}")),
                    "{what}: {plan}"
                );
            }
            assert!(!plan.contains("Seq Scan"), "{what}: {plan}");
            // The page stops early: the big arm is never sorted whole.
            // Each arm stops at the page's end; the only sort is of the few
            // overdue pending rows, found by their expiry.
            assert!(plan.starts_with("Limit"), "{what}: {plan}");
            assert!(
                plan.matches("Sort  (").count()
                    <= plan
                        .matches("Index Scan using tollgate_approvals_expiry_idx")
                        .count(),
                "{what}: {plan}"
            );
        }

        // A row this build cannot read is named, not allowed to stop the page.
        db.psql("UPDATE tollgate_approvals SET outputs = '[1]' WHERE key = 'key-11998'");
        let page = store
            .list_approvals(&ApprovalQuery { limit: 3, ..inbox })
            .await
            .expect("one bad row does not stop the listing");
        let listed: Vec<_> = page.approvals.iter().map(|r| r.key.as_str()).collect();
        assert_eq!(listed, ["key-11999", "key-11997"]);
        assert_eq!(page.unreadable.len(), 1);
        assert_eq!(page.unreadable[0].key, "key-11998");
    }
}
