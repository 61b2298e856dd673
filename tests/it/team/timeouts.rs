//! What a waiting gate does by itself (DESIGN §13): `on_timeout` when its
//! time runs out (settled once, by `timeout`, by whichever of two
//! `tollgate serve` processes sweeps first), and reminders and escalations
//! while it waits, on a manual clock. On a SQLite file and on PostgreSQL.
//!
//! Nothing waits for a TTL: pauses are made through the library with a
//! clock set hours back (so the servers, on the system clock, find them
//! overdue at their start-up sweep), or in-process on a `ManualClock`.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use tollgate_runtime::policy::Channel;
use tollgate_runtime::time::{Clock, ManualClock};
use tollgate_runtime::{
    AgentRun, ApprovalError, ApprovalStatus, Ballot, Decision, DecisionOutcome, EventKind,
    RunError, RunStatus, SharedStore, Spec,
};

use crate::common::server::{Api, Served};
use crate::common::{Workspace, hours_ago, open_store, postgres};

/// A gate with a one-hour TTL and `on_timeout: {action}`, then a `set`.
fn timeout_spec(action: &str) -> String {
    format!(
        r#"version: 1
agent: timeouts
steps:
  - id: check
    approval:
      message: "Refund {{{{ input.amount }}}}?"
      payload: {{ amount: "{{{{ input.amount }}}}" }}
      ttl: 1h
      on_timeout: {action}
  - id: done
    set: {{ after: "{{{{ steps.check.output.approved }}}}" }}
"#
    )
}

/// What each action ends in: the record's status, the run's, and whether
/// the step after the gate ran.
const ACTIONS: [(&str, ApprovalStatus, &str, bool); 4] = [
    ("approve", ApprovalStatus::Approved, "completed", true),
    ("reject", ApprovalStatus::Rejected, "rejected", false),
    ("continue", ApprovalStatus::Rejected, "completed", true),
    ("expire", ApprovalStatus::Expired, "expired", false),
];

/// Pause a run of `spec` two hours ago (its gate ran out an hour ago)
/// in `store`.
async fn overdue_pause(
    spec: &std::path::Path,
    store: SharedStore,
) -> tollgate_runtime::ApprovalRecord {
    let spec = Arc::new(Spec::load(spec).expect("spec"));
    let agent = AgentRun::new(spec, store).with_clock(hours_ago(2));
    let outcome = agent
        .start(json!({ "amount": 40 }), json!({ "kind": "test" }))
        .await
        .expect("start the run");
    outcome.pending.expect("the run paused")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn each_on_timeout_is_applied_once_by_two_servers_on_sqlite() {
    for (action, status, run_status, went_on) in ACTIONS {
        let ws = Workspace::new(&timeout_spec(action));
        let state = ws.state_db();
        let record = overdue_pause(&ws.spec, open_store(&state)).await;
        // Two servers start at once: both sweep at start-up.
        let nodes: Vec<Served> = (0..2)
            .map(|_| Served::start(&ws.spec, &state, &[], &[]))
            .collect();
        check_settled(
            &nodes,
            &open_store(&state),
            &record,
            action,
            status,
            run_status,
            went_on,
        )
        .await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn each_on_timeout_is_applied_once_by_two_servers_on_postgresql() {
    for (action, status, run_status, went_on) in ACTIONS {
        let db = postgres::database();
        let ws = Workspace::new(&timeout_spec(action));
        let store = tollgate_runtime::store::open(&db.url, Default::default()).expect("store");
        let record = overdue_pause(&ws.spec, store.clone()).await;
        let nodes: Vec<Served> = (0..2)
            .map(|_| Served::start_on_database(&ws.spec, &db.url, &[], &[]))
            .collect();
        check_settled(&nodes, &store, &record, action, status, run_status, went_on).await;
    }
}

async fn check_settled(
    nodes: &[Served],
    store: &SharedStore,
    paused: &tollgate_runtime::ApprovalRecord,
    action: &str,
    status: ApprovalStatus,
    run_status: &str,
    went_on: bool,
) {
    let run = Api::new()
        .wait_for_status(&nodes[0], &paused.run_id, run_status)
        .await;
    let record = store.get_approval(&paused.key).await.unwrap().unwrap();
    assert_eq!(record.status, status, "{action}: {record:?}");
    let events = store.run_events(&paused.run_id, 0).await.unwrap();
    let resolved: Vec<&EventKind> = events
        .iter()
        .map(|e| &e.kind)
        .filter(|k| matches!(k, EventKind::ApprovalResolved { .. }))
        .collect();
    let ended = events.iter().filter(|e| e.kind.is_final()).count();
    assert_eq!(ended, 1, "{action}: the run ends once: {events:?}");
    if action == "expire" {
        assert!(resolved.is_empty(), "an expiry decides nothing: {events:?}");
        assert_eq!(record.decided_by, None);
        return;
    }
    assert_eq!(resolved.len(), 1, "{action}: settled once: {events:?}");
    let EventKind::ApprovalResolved {
        decided_by, reason, ..
    } = resolved[0]
    else {
        unreachable!()
    };
    assert_eq!(decided_by, "timeout");
    let reason = reason.as_deref().unwrap_or_default();
    assert!(
        reason.starts_with("no decision by ") && reason.ends_with(&format!("on_timeout: {action}")),
        "{action}: {reason}"
    );
    assert_eq!(record.decided_by.as_deref(), Some("timeout"));
    assert_eq!(
        record.decision_data.as_ref().unwrap()["on_timeout"],
        json!(action),
        "the decision data says which action settled it, so no person named timeout passes for it"
    );
    let output = &run["outputs"]["check"];
    if went_on {
        assert_eq!(output["decided_by"], "timeout", "{run}");
        assert_eq!(output["approved"], json!(action == "approve"), "{run}");
        assert_eq!(output["timed_out"], true, "{run}");
        assert_eq!(
            run["outputs"]["done"]["after"],
            json!(action == "approve"),
            "{run}"
        );
    } else {
        assert_eq!(run["outputs"].get("done"), None, "{run}");
    }
    // Every server said so in its log, but only one settled it.
    let settled_by: usize = nodes
        .iter()
        .filter(|n| n.logs().contains("settled by its on_timeout"))
        .count();
    assert_eq!(settled_by, 1, "one process settles a timeout");
}

/// An approval whose time ran out is not the person's to decide any more,
/// whatever the gate does then: `approval_expired`, and the timeout's
/// settlement stands.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_person_cannot_decide_a_gate_whose_time_ran_out() {
    let ws = Workspace::new(&timeout_spec("approve"));
    let state = ws.state_db();
    let store = open_store(&state);
    let spec = Arc::new(Spec::load(&ws.spec).expect("spec"));
    let clock = Arc::new(ManualClock::starting_now());
    let agent = AgentRun::new(spec, store.clone()).with_clock(clock.clone());
    let paused = agent
        .start(json!({ "amount": 5 }), json!({ "kind": "test" }))
        .await
        .unwrap()
        .pending
        .unwrap();
    assert!(
        agent.settle_timeouts().await.unwrap().is_empty(),
        "not due yet"
    );
    clock.advance(Duration::from_secs(3600));
    let refused = agent
        .vote(
            &paused.key,
            Ballot::new(Decision::Reject { reason: None }, "alice", Channel::Api),
        )
        .await
        .unwrap_err();
    assert!(
        matches!(refused, RunError::Approval(ApprovalError::Expired { .. })),
        "{refused:?}"
    );
    // No sweep expires it: its gate approves instead.
    assert!(store.expire_due(clock.now()).await.unwrap().is_empty());
    let settled = agent.settle_timeouts().await.unwrap();
    assert_eq!(settled.len(), 1);
    let outcome = agent
        .resume_claimed(settled.into_iter().next().unwrap())
        .await
        .unwrap();
    assert_eq!(outcome.status, RunStatus::Completed);
    assert!(agent.settle_timeouts().await.unwrap().is_empty(), "once");
}

/// finance must give 2 votes; after 4h security joins; reminders at 25%
/// and 90% of a 10h gate.
const NUDGE_SPEC: &str = r#"version: 1
agent: nudges
approvals:
  groups: { finance: [alice, bob, carol], security: [dave] }
steps:
  - id: check
    approval:
      message: "Refund?"
      ttl: 10h
      rules: [{ group: finance, min: 2 }]
      remind: [25%, 90%]
      escalate: [{ after: 4h, add: [security] }]
  - id: done
    set: { ok: true }
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn reminders_and_an_escalation_come_at_their_time_on_sqlite() {
    let ws = Workspace::new(NUDGE_SPEC);
    nudges_on_a_manual_clock(&ws, open_store(&ws.state_db())).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn reminders_and_an_escalation_come_at_their_time_on_postgresql() {
    let db = postgres::database();
    let ws = Workspace::new(NUDGE_SPEC);
    let store = tollgate_runtime::store::open(&db.url, Default::default()).expect("store");
    nudges_on_a_manual_clock(&ws, store).await;
}

async fn nudges_on_a_manual_clock(ws: &Workspace, store: SharedStore) {
    let spec = Arc::new(Spec::load(&ws.spec).expect("spec"));
    let clock = Arc::new(ManualClock::starting_now());
    // Two handles on one store: two processes sweeping at the same time.
    let a = AgentRun::new(spec.clone(), store.clone()).with_clock(clock.clone());
    let b = AgentRun::new(spec, store.clone()).with_clock(clock.clone());
    let paused = a
        .start(json!({}), json!({ "kind": "test" }))
        .await
        .unwrap()
        .pending
        .unwrap();
    let hour = Duration::from_secs(3600);
    let vote = |agent: &AgentRun, by: &str| {
        let ballot = Ballot::new(Decision::Approve { reason: None }, by, Channel::Api);
        let (agent, key) = (agent.clone(), paused.key.clone());
        async move { agent.vote(&key, ballot).await }
    };
    let sweep_both = || async {
        let (x, y) = tokio::join!(a.nudge_due(), b.nudge_due());
        let mut events: Vec<EventKind> = Vec::new();
        for nudged in x.unwrap().into_iter().chain(y.unwrap()) {
            events.extend(nudged.events.into_iter().map(|e| e.kind));
        }
        events
    };

    clock.advance(hour);
    assert_eq!(sweep_both().await, vec![], "nothing due at 1h");
    let refused = vote(&a, "dave").await.unwrap_err();
    assert!(
        matches!(
            refused,
            RunError::Approval(ApprovalError::NotInGroups { .. })
        ),
        "security may not vote before the escalation: {refused:?}"
    );

    clock.advance(hour + hour / 2); // 2.5h: 25% of 10h
    let reminded = sweep_both().await;
    assert!(
        matches!(reminded.as_slice(), [EventKind::ApprovalReminded { percent: 25, step, .. }] if step == "check"),
        "one reminder, by one of the two: {reminded:?}"
    );
    assert_eq!(sweep_both().await, vec![], "a reminder is sent once");

    // alice votes before the escalation; it stands after it.
    let first = vote(&a, "alice").await.unwrap();
    let DecisionOutcome::Voted(recorded) = first else {
        panic!("a vote, not a settlement: {first:?}");
    };
    assert_eq!(recorded.tally.summary(), "finance 1 of 2");

    clock.advance(hour + hour / 2); // 4h
    let escalated = sweep_both().await;
    match escalated.as_slice() {
        [EventKind::ApprovalEscalated { groups, added, .. }] => {
            assert_eq!(groups, &["security".to_string()]);
            assert_eq!(added, &["dave".to_string()]);
        }
        other => panic!("one escalation at 4h: {other:?}"),
    }
    let record = store.get_approval(&paused.key).await.unwrap().unwrap();
    let roster = record.roster.expect("roster");
    assert_eq!(roster.added, ["dave"]);
    assert_eq!(roster.rules[0].members, ["alice", "bob", "carol", "dave"]);
    assert_eq!(
        roster.next_nudge_at(),
        Some(record.created_at + chrono::TimeDelta::hours(9)),
        "the 90% reminder is next"
    );

    // dave's vote now counts toward finance, with alice's: settled.
    let settled = vote(&b, "dave").await.unwrap();
    assert!(settled.won(), "dave's vote settles it: {settled:?}");
    let outcome = b.resume_claimed(settled).await.unwrap();
    assert_eq!(outcome.status, RunStatus::Completed);

    clock.advance(5 * hour); // 9h: a decided gate is reminded of nothing
    assert_eq!(sweep_both().await, vec![]);
    let events: Vec<Value> = store
        .run_events(&paused.run_id, 0)
        .await
        .unwrap()
        .into_iter()
        .map(|e| serde_json::to_value(e).unwrap())
        .collect();
    let kinds: Vec<&str> = events.iter().filter_map(|e| e["type"].as_str()).collect();
    assert_eq!(
        kinds
            .iter()
            .filter(|k| k.starts_with("approval_"))
            .copied()
            .collect::<Vec<_>>(),
        [
            "approval_reminded",
            "approval_vote",
            "approval_escalated",
            "approval_vote",
            "approval_resolved"
        ]
    );
}

/// `on_timeout: approve` on a pause of an older spec that the served one
/// refuses to resume (`on_spec_change: refuse`, the default): nothing is
/// approved on steps it was not written for, and the gate does not wait
/// for ever either. It is rejected by `timeout`, saying why.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_approve_the_changed_spec_refuses_rejects_instead() {
    let ws = Workspace::new(&timeout_spec("approve"));
    let store = open_store(&ws.state_db());
    let clock = Arc::new(ManualClock::starting_now());
    let old = Arc::new(Spec::load(&ws.spec).expect("spec"));
    let paused = AgentRun::new(old, store.clone())
        .with_clock(clock.clone())
        .start(json!({ "amount": 5 }), json!({ "kind": "test" }))
        .await
        .unwrap()
        .pending
        .unwrap();
    let changed = timeout_spec("approve").replace("Refund", "Give back");
    let new = Arc::new(Spec::parse(&changed, "spec.yaml").expect("new spec"));
    let served = AgentRun::new(new, store.clone()).with_clock(clock.clone());
    clock.advance(Duration::from_secs(3600));
    let settled = served.settle_timeouts().await.unwrap();
    assert_eq!(settled.len(), 1);
    let record = store.get_approval(&paused.key).await.unwrap().unwrap();
    assert_eq!(record.status, ApprovalStatus::Rejected);
    assert_eq!(record.decided_by.as_deref(), Some("timeout"));
    assert_eq!(
        record.decision_data.as_ref().unwrap()["on_timeout"],
        "reject"
    );
    let reason = record.reason().unwrap();
    assert!(
        reason.contains("on_timeout: approve could not run") && reason.contains("spec"),
        "{reason}"
    );
    let outcome = served
        .resume_claimed(settled.into_iter().next().unwrap())
        .await
        .unwrap();
    assert_eq!(outcome.status, RunStatus::Rejected);
}
