//! The preview over a real (in-memory SQLite) store: runs paused by the
//! engine under one version, planned against another.

use std::sync::Arc;

use serde_json::json;

use super::*;
use crate::domain::spec::{Change, TopLevel};
use crate::engine::run::AgentRun;
use crate::store::{SharedStore, SqliteOptions};

/// Four `if` gates, each taken when `input.gate` names it, so one run
/// pauses at exactly the gate a test asks for.
const V1: &str = r#"version: 1
agent: desk
description: Ship orders.
steps:
  - id: prepare
    set: { order: "{{ input.order }}" }
  - id: check
    if: "{{ input.gate == 'check' }}"
    then: request_human_approval
    message: "Check {{ steps.prepare.output.order }}"
  - id: confirm
    if: "{{ input.gate == 'confirm' }}"
    then: request_human_approval
    message: "Ship {{ steps.prepare.output.order }}?"
  - id: review
    if: "{{ input.gate == 'review' }}"
    then: request_human_approval
    message: "Review {{ steps.prepare.output.order }}"
  - id: sign_off
    if: "{{ input.gate == 'sign_off' }}"
    then: request_human_approval
    message: "Sign off"
  - id: done
    set: { shipped: true, token: "${SHIP_TOKEN}" }
"#;

/// V1 deployed again with a message changed (confirm), a step removed
/// (review), a step renamed (sign_off -> final_check) and an unrelated
/// change (the description); `check` stays as it was.
fn v2(policy: &str) -> Spec {
    let text = V1
        .replace("description: Ship orders.", "description: Ship orders, carefully.")
        .replace("\"Ship {{", "\"Really ship {{")
        .replace(
            "  - id: review\n    if: \"{{ input.gate == 'review' }}\"\n    then: request_human_approval\n    message: \"Review {{ steps.prepare.output.order }}\"\n",
            "",
        )
        .replace("id: sign_off", "id: final_check")
        .replace(
            "steps:\n",
            &format!("approvals: {{ on_spec_change: {policy} }}\nsteps:\n"),
        );
    Spec::parse(&text, "v2.yaml").expect("v2 parses")
}

fn v1() -> Arc<Spec> {
    Arc::new(Spec::parse(V1, "v1.yaml").expect("v1 parses"))
}

async fn paused_at(store: &SharedStore, gates: &[&str]) -> Vec<ApprovalRecord> {
    let agent = AgentRun::new(v1(), store.clone());
    let mut records = Vec::new();
    for (n, gate) in gates.iter().enumerate() {
        let outcome = agent
            .start(
                json!({ "order": n, "gate": gate }),
                json!({ "kind": "test" }),
            )
            .await
            .expect("the run starts");
        records.push(outcome.pending.expect("the run paused"));
    }
    records
}

fn memory() -> SharedStore {
    crate::store::open("memory:", SqliteOptions::default()).expect("a memory store")
}

fn by_step<'p>(plan: &'p DeployPlan, step: &str) -> &'p ApprovalPlan {
    plan.approvals
        .iter()
        .find(|a| a.step == step)
        .unwrap_or_else(|| panic!("no approval at {step}: {plan:#?}"))
}

#[tokio::test]
async fn each_pause_is_classified_and_refused_under_refuse() {
    let store = memory();
    paused_at(&store, &["check", "confirm", "review", "sign_off"]).await;
    let new = v2("refuse");
    let plan = plan_deploy(&*store, &new, crate::support::time::now())
        .await
        .unwrap();

    assert_eq!(plan.agent, "desk");
    assert_eq!(plan.spec_hash, new.hash.as_str());
    assert_eq!(plan.stored_versions, 1);
    let expected = [
        ("check", Classification::IdenticalGate, Some("check")),
        ("confirm", Classification::MessageChanged, Some("confirm")),
        ("review", Classification::StepRemoved, None),
        ("sign_off", Classification::StepRemoved, None),
    ];
    for (step, classification, new_step) in expected {
        let a = by_step(&plan, step);
        assert_eq!(a.classification, Some(classification), "{step}");
        assert_eq!(a.new_step.as_deref(), new_step, "{step}");
        assert_eq!(
            (a.policy, a.outcome, a.stranded),
            (OnSpecChange::Refuse, Outcome::Refused, true)
        );
    }
    assert_eq!(
        plan.summary,
        PlanSummary {
            pending: 4,
            current: 0,
            pinned: 0,
            moves_to_new: 0,
            refused: 4,
            stranded: 4,
        }
    );

    let [version] = plan.versions.as_slice() else {
        panic!("one older version: {plan:#?}");
    };
    assert_eq!(version.hash, v1().hash.as_str());
    assert_eq!(version.pending_approvals, 4);
    assert!(version.first_seen.is_some() && version.problem.is_none());
    assert!(
        version.required_env.is_empty(),
        "nothing resumes on v1 under refuse"
    );
    let diff = version.diff.as_ref().expect("v1 is readable");
    assert_eq!(
        diff.removed
            .iter()
            .map(|s| s.id.as_str())
            .collect::<Vec<_>>(),
        ["review"]
    );
    assert_eq!(
        (diff.renamed[0].from.as_str(), diff.renamed[0].to.as_str()),
        ("sign_off", "final_check")
    );
    assert_eq!(diff.changed[0].id, "confirm");
    assert_eq!(diff.changed[0].changes, [Change::Message]);
    assert_eq!(diff.top_level, [TopLevel::Description]);
    assert_eq!(plan.live_runs.outcome, LiveRunOutcome::EndsStuck);
}

#[tokio::test]
async fn pin_keeps_every_pause_on_its_version_and_names_what_it_needs() {
    let store = memory();
    paused_at(&store, &["check", "confirm", "review"]).await;
    let plan = plan_deploy(&*store, &v2("pin"), crate::support::time::now())
        .await
        .unwrap();
    assert!(
        plan.approvals
            .iter()
            .all(|a| a.outcome == Outcome::Pinned && !a.stranded)
    );
    assert_eq!((plan.summary.pinned, plan.summary.stranded), (3, 0));
    assert_eq!(plan.versions[0].required_env, ["SHIP_TOKEN"]);
    assert_eq!(
        plan.live_runs.outcome,
        LiveRunOutcome::ContinuesOnItsVersion
    );
}

#[tokio::test]
async fn auto_moves_an_unchanged_gate_and_pins_the_others() {
    let store = memory();
    paused_at(&store, &["check", "confirm", "sign_off"]).await;
    let plan = plan_deploy(&*store, &v2("auto"), crate::support::time::now())
        .await
        .unwrap();
    assert_eq!(by_step(&plan, "check").outcome, Outcome::MovesToNew);
    assert_eq!(by_step(&plan, "confirm").outcome, Outcome::Pinned);
    assert_eq!(by_step(&plan, "sign_off").outcome, Outcome::Pinned);
    assert_eq!(
        (plan.summary.moves_to_new, plan.summary.pinned),
        (1, 2),
        "{:?}",
        plan.summary
    );
}

#[tokio::test]
async fn the_deployed_version_itself_is_current_and_another_agent_has_nothing() {
    let store = memory();
    paused_at(&store, &["confirm", "review"]).await;
    let plan = plan_deploy(&*store, &v1(), crate::support::time::now())
        .await
        .unwrap();
    assert_eq!((plan.summary.pending, plan.summary.current), (2, 2));
    assert!(plan.approvals.is_empty() && plan.versions.is_empty());

    let other = Spec::parse(&V1.replace("agent: desk", "agent: other"), "o.yaml").unwrap();
    let plan = plan_deploy(&*store, &other, crate::support::time::now())
        .await
        .unwrap();
    assert_eq!(plan.stored_versions, 0);
    assert_eq!(plan.summary, PlanSummary::default());
}

/// A pause or run on a version the store does not hold: pinned there it
/// is stranded; a live run on it is counted.
#[tokio::test]
async fn a_version_the_store_does_not_hold_strands_its_pinned_pauses() {
    let store = memory();
    let [record] = paused_at(&store, &["confirm"]).await.try_into().unwrap();
    // A run of a version that was never stored (an older tollgate), running.
    let unknown = "ab".repeat(32);
    let now = crate::support::time::now();
    let run = RunRecord {
        id: "r-unknown".into(),
        agent_id: "desk".into(),
        spec_hash: unknown.clone(),
        status: RunStatus::Running,
        input: json!({}).into(),
        trigger: json!({}),
        outputs: Default::default(),
        error: None,
        created_at: now,
        updated_at: now,
        owner: None,
        lease_until: None,
    };
    store.create_run(&run, &[]).await.unwrap();
    let plan = plan_deploy(&*store, &v2("pin"), now).await.unwrap();
    let stored = plan
        .versions
        .iter()
        .find(|v| v.hash == record.spec_hash)
        .unwrap();
    assert!(stored.problem.is_none());
    let missing = plan.versions.iter().find(|v| v.hash == unknown).unwrap();
    assert!(
        missing
            .problem
            .as_deref()
            .unwrap()
            .contains("not in the store"),
        "{missing:?}"
    );
    assert_eq!((missing.running_runs, missing.first_seen), (1, None));
    assert_eq!(plan.live_runs.running, 1);

    // A pause whose version cannot be read: no classification, and
    // stranded wherever it is pinned.
    let orphan = ApprovalRecord {
        spec_hash: unknown.clone(),
        ..record
    };
    let plan_of = approval_plan(&orphan, None, &v2("pin"), &BTreeMap::new());
    assert_eq!(
        (plan_of.classification, plan_of.outcome, plan_of.stranded),
        (None, Outcome::Pinned, true)
    );
    let plan_of = approval_plan(&orphan, None, &v2("auto"), &BTreeMap::new());
    assert_eq!((plan_of.outcome, plan_of.stranded), (Outcome::Pinned, true));
}

/// A run of v1 left stuck (no pause): counted on its version; under
/// `refuse` a process serving v2 ends such runs stuck, under `pin` they
/// go on under v1, which then needs its variables.
#[tokio::test]
async fn live_runs_on_an_older_version_are_counted_with_what_happens_to_them() {
    let store = memory();
    let agent = AgentRun::new(v1(), store.clone());
    agent.record_spec().await.unwrap();
    let now = crate::support::time::now();
    for (id, status) in [
        ("r-stuck", RunStatus::Stuck),
        ("r-running", RunStatus::Running),
    ] {
        let run = RunRecord {
            id: id.into(),
            agent_id: "desk".into(),
            spec_hash: v1().hash.to_string(),
            status,
            input: json!({}).into(),
            trigger: json!({}),
            outputs: Default::default(),
            error: None,
            created_at: now,
            updated_at: now,
            owner: None,
            lease_until: None,
        };
        store.create_run(&run, &[]).await.unwrap();
    }

    let refused = plan_deploy(&*store, &v2("refuse"), now).await.unwrap();
    assert_eq!(
        refused.live_runs,
        LiveRuns {
            running: 1,
            stuck: 1,
            outcome: LiveRunOutcome::EndsStuck
        }
    );
    let [version] = refused.versions.as_slice() else {
        panic!("v1 is listed for its runs: {refused:#?}");
    };
    assert_eq!((version.running_runs, version.stuck_runs), (1, 1));
    assert!(version.required_env.is_empty());
    assert_eq!(refused.summary, PlanSummary::default());

    let pinned = plan_deploy(&*store, &v2("pin"), now).await.unwrap();
    assert_eq!(
        pinned.live_runs.outcome,
        LiveRunOutcome::ContinuesOnItsVersion
    );
    assert_eq!(pinned.versions[0].required_env, ["SHIP_TOKEN"]);
}
