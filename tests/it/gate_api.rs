//! The approval-gate API for Rust code (`tollgate_runtime::gate`): request,
//! wait, decide, list, expire, typed payloads; across two store instances
//! on PostgreSQL (pushed with NOTIFY, caught up after the LISTEN connection
//! is killed) and on SQLite (polled).

use crate::common::postgres as pg;

use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::json;
use tollgate_runtime::gate::{GATE_AGENT_PREFIX, Gate, GateError};
use tollgate_runtime::pending_approval::{ApprovalError, ApprovalStatus, Decision};
use tollgate_runtime::run_state::RunStatus;
use tollgate_runtime::store::{
    PostgresOptions, PostgresStore, SharedStore, SqliteOptions, SqliteStore,
};
use tollgate_runtime::time::ManualClock;
use tollgate_runtime::watch::{FeedState, WatchOptions};
use tollgate_runtime::{AgentRun, RunError, Spec};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Payout {
    account: String,
    cents: u64,
}

fn payout() -> Payout {
    Payout {
        account: "acct-7".into(),
        cents: 12_500,
    }
}

const HOUR: Duration = Duration::from_secs(3600);
/// Long enough that a test resolves only through what it exercises.
const NEVER: Duration = Duration::from_secs(24 * 3600);
const PATIENCE: Duration = Duration::from_secs(10);

async fn pg_store(url: &str) -> SharedStore {
    Arc::new(
        PostgresStore::connect(url, PostgresOptions::default())
            .await
            .expect("connect"),
    )
}

/// Push only: no periodic re-check, so a waiter resolves by NOTIFY or by
/// the catch-up after a reconnect, nothing else.
fn push_only(reconnect_min: Duration) -> WatchOptions {
    WatchOptions {
        recheck_interval: NEVER,
        reconnect_min,
        reconnect_max: reconnect_min,
        ..WatchOptions::default()
    }
}

async fn until_state(gate: &Gate, wanted: impl Fn(&FeedState) -> bool) -> FeedState {
    let mut state = gate.watcher().state();
    tokio::time::timeout(PATIENCE, async {
        loop {
            let now = state.borrow_and_update().clone();
            if wanted(&now) {
                return now;
            }
            state.changed().await.expect("watcher alive");
        }
    })
    .await
    .unwrap_or_else(|_| panic!("watcher state never matched; it is {:?}", state.borrow()))
}

async fn listening(gate: &Gate) -> u64 {
    match until_state(gate, |s| matches!(s, FeedState::Listening { .. })).await {
        FeedState::Listening { connects } => connects,
        _ => unreachable!(),
    }
}

/// A clock that moves only when a test says so; gates built `.with_clock`
/// it wait on it too.
fn manual_clock() -> Arc<ManualClock> {
    Arc::new(ManualClock::starting_now())
}

/// A waiter on `key` in a task of its own, already asleep on `clock` (so a
/// decision or the clock's advance is what wakes it).
async fn waiting(
    gate: &Gate,
    key: &str,
    clock: &ManualClock,
) -> tokio::task::JoinHandle<Result<tollgate_runtime::gate::Outcome, GateError>> {
    let (gate, key) = (gate.clone(), key.to_string());
    let waiter = tokio::spawn(async move { gate.wait(&key).await });
    asleep(clock, 1).await;
    waiter
}

/// Until `n` waiters have registered, read their record (pending) and gone
/// to sleep until its expiry on `clock`: what comes next (a decision, a
/// lost connection, time passing) then happens while they wait.
async fn asleep(clock: &ManualClock, n: usize) {
    tokio::time::timeout(PATIENCE, async {
        while clock.sleepers() < n {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await
    .unwrap_or_else(|_| panic!("{n} waiter(s) never went to sleep"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_waiter_on_one_node_resolves_when_another_node_decides_via_notify() {
    let db = pg::database();
    let clock = manual_clock();
    let node_a =
        Gate::with_options(pg_store(&db.url).await, push_only(HOUR)).with_clock(clock.clone());
    let node_b =
        Gate::with_options(pg_store(&db.url).await, push_only(HOUR)).with_clock(clock.clone());
    listening(&node_a).await;
    let mut changes = node_a.watcher().changes();

    let key = node_a
        .request_with_message(
            "payouts",
            "send_payout",
            Some("Pay acct-7?"),
            &payout(),
            HOUR,
        )
        .await
        .expect("request");
    let waiter = waiting(&node_a, &key, &clock).await;
    assert!(!waiter.is_finished(), "nothing decided yet");

    node_b
        .decide(
            &key,
            Decision::Approve {
                reason: Some("known customer".into()),
            },
            "alice",
        )
        .await
        .expect("decide on node b");
    let outcome = tokio::time::timeout(PATIENCE, waiter)
        .await
        .expect("the waiter resolved")
        .expect("waiter task")
        .expect("decided");
    assert!(outcome.is_approved());
    assert_eq!(outcome.status(), ApprovalStatus::Approved);
    assert_eq!(outcome.decided_by(), Some("alice"));
    assert_eq!(outcome.reason(), Some("known customer"));
    assert_eq!(outcome.payload_as::<Payout>().expect("typed"), payout());

    // Node a heard the pause and the decision, pushed.
    let mut heard = Vec::new();
    while let Ok(change) = changes.try_recv() {
        heard.push((change.key == key, change.status, change.run_id == key));
    }
    assert!(
        heard.contains(&(true, ApprovalStatus::Pending, true)),
        "{heard:?}"
    );
    assert!(
        heard.contains(&(true, ApprovalStatus::Approved, true)),
        "{heard:?}"
    );

    // The request's own run ended with the decision.
    let run = node_a
        .store()
        .get_run(&key)
        .await
        .expect("get")
        .expect("run");
    assert_eq!(run.status, RunStatus::Completed);
    assert_eq!(run.agent_id, format!("{GATE_AGENT_PREFIX}payouts"));
    assert_eq!(
        run.outputs["send_payout"],
        json!({"approved": true, "decided_by": "alice", "reason": "known customer",
               "payload": {"account": "acct-7", "cents": 12500}})
    );
    let events: Vec<String> = node_b
        .store()
        .run_events(&key, 0)
        .await
        .expect("events")
        .iter()
        .map(|e| e.kind.name().to_string())
        .collect();
    assert_eq!(
        events,
        [
            "run_started",
            "awaiting_approval",
            "approval_resolved",
            "run_completed"
        ]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_decision_made_while_the_listen_connection_is_down_still_resolves_the_waiter() {
    let db = pg::database();
    // The database refuses new connections from before the LISTEN connection
    // is cut until after the decision: the watcher cannot reconnect in
    // between (its reconnect delay is jittered, so no delay is long enough
    // for sure), and only the catch-up after reconnecting can deliver it.
    let clock = manual_clock();
    let node_a = Gate::with_options(pg_store(&db.url).await, push_only(Duration::from_secs(1)))
        .with_clock(clock.clone());
    let deciding_store = pg_store(&db.url).await;
    assert_eq!(listening(&node_a).await, 1);

    let key = node_a
        .request("payouts", "send_payout", &payout(), HOUR)
        .await
        .expect("request");
    let waiter = waiting(&node_a, &key, &clock).await;

    // The deciding store opens its connection now, and keeps it.
    deciding_store
        .get_approval(&key)
        .await
        .expect("read")
        .expect("the request");
    // Run from the maintenance database: this one takes no new connection
    // until it is allowed again. The stores keep the connections they hold.
    let maintenance = |sql: String| pg::cluster().psql("postgres", &sql);
    maintenance(format!(
        "ALTER DATABASE {} WITH ALLOW_CONNECTIONS false",
        db.name
    ));
    let killed = maintenance(format!(
        "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity \
         WHERE application_name = 'tollgate-listen' AND datname = '{}'",
        db.name
    ));
    assert_eq!(killed, "1", "the watcher's LISTEN connection");
    until_state(&node_a, |s| matches!(s, FeedState::Disconnected { .. })).await;

    // Decided through another node's plain store, unheard.
    let deciding = Gate::with_watcher(deciding_store, node_a.watcher().clone());
    deciding
        .decide(
            &key,
            Decision::Reject {
                reason: Some("not today".into()),
            },
            "bob",
        )
        .await
        .expect("decide while a is deaf");
    assert!(!waiter.is_finished(), "nobody heard it yet");
    // Closed longer than the watcher's reconnect delay (1s): it meets the
    // refusal (SQLSTATE 55000, as in a maintenance window) at least once,
    // and must keep retrying rather than fall back to polling for good.
    tokio::time::sleep(Duration::from_millis(2500)).await;
    maintenance(format!(
        "ALTER DATABASE {} WITH ALLOW_CONNECTIONS true",
        db.name
    ));

    let outcome = tokio::time::timeout(PATIENCE, waiter)
        .await
        .expect("the catch-up resolved the waiter")
        .expect("waiter task")
        .expect("decided");
    assert_eq!(outcome.status(), ApprovalStatus::Rejected);
    assert_eq!(outcome.decided_by(), Some("bob"));
    assert!(!outcome.is_approved());
    assert_eq!(listening(&node_a).await, 2, "reconnected once");
    let run = node_a
        .store()
        .get_run(&key)
        .await
        .expect("get")
        .expect("run");
    assert_eq!(run.status, RunStatus::Rejected);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn expiry_resolves_the_waiter_as_expired() {
    let db = pg::database();
    let clock = manual_clock();
    let gate =
        Gate::with_options(pg_store(&db.url).await, push_only(HOUR)).with_clock(clock.clone());
    let key = gate
        .request("payouts", "send_payout", &payout(), HOUR)
        .await
        .expect("request");
    let waiter = waiting(&gate, &key, &clock).await;
    // The hour passes on the gate's clock: the waiter wakes, sweeps, and
    // resolves as expired.
    clock.advance(HOUR);
    let outcome = tokio::time::timeout(PATIENCE, waiter)
        .await
        .expect("resolved by expiry")
        .expect("waiter task")
        .expect("expired, not an error");
    assert_eq!(outcome.status(), ApprovalStatus::Expired);
    assert!(!outcome.is_approved());
    let run = gate.store().get_run(&key).await.expect("get").expect("run");
    assert_eq!(run.status, RunStatus::Expired);

    let late = gate
        .decide(&key, Decision::Approve { reason: None }, "alice")
        .await;
    assert!(
        matches!(
            late,
            Err(GateError::Approval(ApprovalError::Expired { .. }))
        ),
        "{late:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn payloads_read_back_typed_as_requested_or_as_edited() {
    let db = pg::database();
    let gate = Gate::with_options(pg_store(&db.url).await, push_only(HOUR));
    let plain = gate
        .request("payouts", "send_payout", &payout(), HOUR)
        .await
        .expect("request");
    let edited = gate
        .request("payouts", "send_payout", &payout(), HOUR)
        .await
        .expect("request");
    gate.request("other-desk", "x", &json!({}), HOUR)
        .await
        .expect("another agent's request");

    let page = gate.list_pending("payouts", 10, None).await.expect("list");
    let listed: Vec<&str> = page.approvals.iter().map(|r| r.key.as_str()).collect();
    assert_eq!(listed, [edited.as_str(), plain.as_str()], "newest first");
    let first: Payout =
        tollgate_runtime::gate::payload_as(&page.approvals[0]).expect("typed listing");
    assert_eq!(first, payout());

    let smaller = Payout {
        cents: 5_000,
        ..payout()
    };
    let outcome = gate
        .decide(
            &edited,
            Decision::Modify {
                payload: serde_json::to_value(&smaller).expect("json"),
                reason: Some("cap it".into()),
            },
            "carol",
        )
        .await
        .expect("modify");
    assert_eq!(outcome.status(), ApprovalStatus::Modified);
    assert!(outcome.is_approved());
    assert_eq!(outcome.payload_as::<Payout>().expect("typed"), smaller);
    let waited = gate.wait(&edited).await.expect("already decided");
    assert_eq!(waited.payload_as::<Payout>().expect("typed"), smaller);
    assert_eq!(
        outcome.record().payload,
        serde_json::to_value(payout()).expect("json"),
        "the original stays for the audit trail"
    );

    #[derive(Debug, Deserialize)]
    #[allow(dead_code)]
    struct Wrong {
        iban: String,
    }
    match waited.payload_as::<Wrong>() {
        Err(GateError::PayloadType { key, reason, .. }) => {
            assert_eq!(key, edited);
            assert!(reason.contains("iban"), "{reason}");
        }
        other => panic!("expected a PayloadType error, got {other:?}"),
    }

    let again = gate
        .decide(&edited, Decision::Approve { reason: None }, "dave")
        .await;
    assert!(
        matches!(
            again,
            Err(GateError::Approval(ApprovalError::AlreadyResolved { .. }))
        ),
        "{again:?}"
    );
    let unknown = gate.wait("no-such-key").await;
    assert!(
        matches!(
            unknown,
            Err(GateError::Approval(ApprovalError::NotFound { .. }))
        ),
        "{unknown:?}"
    );
}

const WORKFLOW: &str = r#"version: 1
agent: payouts
steps:
  - id: gate
    approval: { message: "Pay?" }
"#;

/// Gate requests and workflow gates share the table but never each
/// other's decision path.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn workflows_and_gates_refuse_each_others_keys() {
    let dir = tempfile::tempdir().expect("temp dir");
    let store: SharedStore = Arc::new(
        SqliteStore::open(&dir.path().join("state.db"), SqliteOptions::default()).expect("open"),
    );
    let gate = Gate::new(store.clone());
    // The same agent name on purpose: the prefix still tells them apart.
    let gate_key = gate
        .request("payouts", "send_payout", &payout(), HOUR)
        .await
        .expect("request");
    let spec = Arc::new(Spec::parse(WORKFLOW, "payouts.yaml").expect("spec"));
    let agent = AgentRun::new(spec, store.clone());
    let paused = agent.start(json!({}), json!({})).await.expect("start");
    let workflow_key = paused.pending.expect("paused").key;

    for decision in [
        Decision::Approve { reason: None },
        Decision::Reject { reason: None },
    ] {
        let refused = agent.resume_by_key(&gate_key, decision, "alice").await;
        assert!(
            matches!(&refused, Err(RunError::WrongAgent { found, .. }) if found == "gate:payouts"),
            "{refused:?}"
        );
    }
    let refused = gate
        .decide(&workflow_key, Decision::Approve { reason: None }, "alice")
        .await;
    assert!(
        matches!(&refused, Err(GateError::NotAGate { agent, .. }) if agent == "payouts"),
        "{refused:?}"
    );
    for key in [&gate_key, &workflow_key] {
        let record = store.get_approval(key).await.expect("get").expect("record");
        assert_eq!(record.status, ApprovalStatus::Pending, "{key} untouched");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_same_api_works_on_sqlite_by_polling() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("state.db");
    let open = || -> SharedStore {
        Arc::new(SqliteStore::open(&path, SqliteOptions::default()).expect("open"))
    };
    let polling = WatchOptions {
        poll_interval: Duration::from_millis(50),
        ..WatchOptions::default()
    };
    // Two store instances on one file, as two processes would have.
    let clock = manual_clock();
    let node_a = Gate::with_options(open(), polling.clone()).with_clock(clock.clone());
    let node_b = Gate::with_options(open(), polling).with_clock(clock.clone());
    assert_eq!(*node_a.watcher().state().borrow(), FeedState::Polling);

    let key = node_a
        .request("payouts", "send_payout", &payout(), HOUR)
        .await
        .expect("request");
    let waiter = waiting(&node_a, &key, &clock).await;
    node_b
        .decide(&key, Decision::Approve { reason: None }, "alice")
        .await
        .expect("decide");
    let outcome = tokio::time::timeout(PATIENCE, waiter)
        .await
        .expect("polled")
        .expect("waiter task")
        .expect("decided");
    assert_eq!(outcome.decided_by(), Some("alice"));
    assert_eq!(outcome.payload_as::<Payout>().expect("typed"), payout());

    // Expiry, and the sweep a waiter runs: it expires every overdue request.
    let never_waited = node_a
        .request("payouts", "send_payout", &payout(), HOUR)
        .await
        .expect("request");
    let short_lived = node_a
        .request("payouts", "send_payout", &payout(), 2 * HOUR)
        .await
        .expect("request");
    let waiter = waiting(&node_b, &short_lived, &clock).await;
    clock.advance(2 * HOUR);
    let expired = tokio::time::timeout(PATIENCE, waiter)
        .await
        .expect("resolved by expiry")
        .expect("waiter task")
        .expect("expired");
    assert_eq!(expired.status(), ApprovalStatus::Expired);
    let record = node_b
        .store()
        .get_approval(&never_waited)
        .await
        .expect("get");
    assert_eq!(
        record.map(|r| r.status),
        Some(ApprovalStatus::Expired),
        "the waiter's sweep expired every overdue request"
    );
    assert!(node_a.recover_expired().await.expect("sweep").is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn recover_expired_at_startup_ends_overdue_requests_once() {
    let db = pg::database();
    let clock = manual_clock();
    let gate =
        Gate::with_options(pg_store(&db.url).await, push_only(HOUR)).with_clock(clock.clone());
    let key = gate
        .request("payouts", "send_payout", &payout(), HOUR)
        .await
        .expect("request");
    // Down for two hours.
    clock.advance(2 * HOUR);
    let restarted =
        Gate::with_options(pg_store(&db.url).await, push_only(HOUR)).with_clock(clock.clone());
    let other_node =
        Gate::with_options(pg_store(&db.url).await, push_only(HOUR)).with_clock(clock.clone());
    let (a, b) = tokio::join!(restarted.recover_expired(), other_node.recover_expired());
    let mut expired: Vec<String> = a.expect("sweep a").into_iter().map(|r| r.key).collect();
    expired.extend(b.expect("sweep b").into_iter().map(|r| r.key));
    assert_eq!(
        expired,
        std::slice::from_ref(&key),
        "expired exactly once across nodes"
    );
    let outcome = gate.wait(&key).await.expect("already expired");
    assert_eq!(outcome.status(), ApprovalStatus::Expired);
}

const DESK: &str = r#"version: 1
agent: desk
approvals:
  approvers: [alice, ann, bo]
  groups:
    finance: [ann, bo]
steps:
  - id: check
    approval: { message: "Check?" }
"#;

/// A gate request made through a server (`POST /gates`, MCP) is that
/// agent's approval: its own workflow handle decides it, with its
/// approvers, on any version of its spec, and the claim's write ends the
/// request's run; a request's policy counts votes as a YAML gate's does.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_served_agent_decides_the_gate_requests_made_through_it() {
    use tollgate_runtime::gate::{GateRequest, ListedWith};
    use tollgate_runtime::policy::{GatePolicy, Groups, RuleSpec};

    let dir = tempfile::tempdir().expect("temp dir");
    let store: SharedStore = Arc::new(
        SqliteStore::open(&dir.path().join("state.db"), SqliteOptions::default()).expect("open"),
    );
    let gate = Gate::new(store.clone());
    let served = |payload: serde_json::Value| {
        let mut request = GateRequest::for_program("desk", "send_payout", payload, HOUR);
        request.listed_with = ListedWith::ServedAgent;
        request.requesters = vec!["bot".into()];
        request
    };
    let opened = gate
        .open(served(json!({"cents": 100})))
        .await
        .expect("open");
    assert!(opened.created);
    let key = opened.record.key.clone();
    assert_eq!(opened.record.agent_id, "desk", "listed with the agent");
    assert!(opened.record.is_gate_request());
    let stored = store
        .get_approval(&key)
        .await
        .expect("get")
        .expect("stored");
    assert_eq!(
        stored.origin,
        tollgate_runtime::pending_approval::ApprovalOrigin::Request {
            requested_by: None,
            fingerprint: None
        },
        "a program's request: nobody asked through a server"
    );
    assert_eq!(stored.paused_under(), None, "a request belongs to no spec");
    let run = store.get_run(&key).await.expect("get").expect("run");
    assert_eq!(run.agent_id, "gate:desk", "never a workflow run to drive");

    // Another version of the spec than any: a request has none to change.
    let edited = DESK.replace("Check?", "Check twice?");
    let spec = Arc::new(Spec::parse(&edited, "desk.yaml").expect("spec"));
    let agent = AgentRun::new(spec, store.clone());
    let refused = agent
        .claim(&key, Decision::Approve { reason: None }, "mallory")
        .await;
    assert!(
        matches!(
            &refused,
            Err(RunError::Approval(ApprovalError::Forbidden { .. }))
        ),
        "not an approver: {refused:?}"
    );
    let decided = agent
        .claim(
            &key,
            Decision::Modify {
                payload: json!({"cents": 90}),
                reason: Some("less".into()),
            },
            "alice",
        )
        .await
        .expect("decided");
    assert_eq!(decided.record().status, ApprovalStatus::Modified);
    let outcome = agent.resume_claimed(decided).await.expect("answered");
    assert_eq!(outcome.status, RunStatus::Completed);
    let run = store.get_run(&key).await.expect("get").expect("run");
    assert_eq!(
        run.status,
        RunStatus::Completed,
        "ended by the claim's write"
    );
    assert_eq!(
        run.outputs["send_payout"],
        json!({"approved": true, "decided_by": "alice", "reason": "less", "payload": {"cents": 90}})
    );
    let waited = gate.wait(&key).await.expect("wait");
    assert_eq!(
        waited.payload_as::<serde_json::Value>().unwrap(),
        json!({"cents": 90})
    );

    // Two votes from finance; a rejection ends the run `rejected`.
    let mut with_rules = served(json!({"cents": 5}));
    let policy = GatePolicy {
        rules: vec![RuleSpec {
            group: "finance".into(),
            min: 2,
        }],
        ..GatePolicy::plain()
    };
    let groups = Groups::from([("finance".to_string(), vec!["ann".into(), "bo".into()])]);
    with_rules.policy = Some((policy, groups));
    let key = gate.open(with_rules).await.expect("open").record.key;
    let first = agent
        .claim(&key, Decision::Approve { reason: None }, "ann")
        .await
        .expect("vote");
    assert!(
        matches!(first, tollgate_runtime::DecisionOutcome::Voted(_)),
        "one vote of two: {first:?}"
    );
    let record = store
        .get_approval(&key)
        .await
        .expect("get")
        .expect("record");
    assert_eq!(record.status, ApprovalStatus::Pending);
    let second = agent
        .claim(&key, Decision::Approve { reason: None }, "bo")
        .await
        .expect("settled");
    assert_eq!(second.record().status, ApprovalStatus::Approved);
    let run = store.get_run(&key).await.expect("get").expect("run");
    assert_eq!(run.status, RunStatus::Completed);

    let key = gate.open(served(json!({}))).await.expect("open").record.key;
    agent
        .claim(
            &key,
            Decision::Reject {
                reason: Some("no".into()),
            },
            "alice",
        )
        .await
        .expect("rejected");
    let run = store.get_run(&key).await.expect("get").expect("run");
    assert_eq!(run.status, RunStatus::Rejected);

    // `on_timeout: approve`: the served agent's sweep settles an overdue
    // request, once, and the run completes.
    let clock = manual_clock();
    let timed_gate = Gate::new(store.clone()).with_clock(clock.clone());
    let timed_agent = agent.clone().with_clock(clock.clone());
    let mut timed = served(json!({"cents": 1}));
    let policy = GatePolicy {
        on_timeout: tollgate_runtime::policy::OnTimeout::Approve,
        ..GatePolicy::plain()
    };
    timed.policy = Some((policy, Groups::new()));
    let key = timed_gate.open(timed).await.expect("open").record.key;
    assert!(
        timed_agent
            .settle_timeouts()
            .await
            .expect("sweep")
            .is_empty()
    );
    clock.advance(2 * HOUR);
    let settled = timed_agent.settle_timeouts().await.expect("sweep");
    assert_eq!(settled.len(), 1);
    assert_eq!(settled[0].record().status, ApprovalStatus::Approved);
    assert_eq!(settled[0].record().decided_by.as_deref(), Some("timeout"));
    assert!(
        timed_agent
            .settle_timeouts()
            .await
            .expect("sweep")
            .is_empty()
    );
    let run = store.get_run(&key).await.expect("get").expect("run");
    assert_eq!(run.status, RunStatus::Completed);
}
