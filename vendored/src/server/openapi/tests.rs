//! The schemas cannot drift from the types: a value of every response type
//! is serialized by serde and checked against the document, and request
//! bodies that serde accepts (and refuses) are accepted (and refused) by
//! their schemas.

use chrono::{TimeZone, Utc};
use serde_json::{Map, Value, json};

use super::{Components, document, schema_errors};
use crate::domain::pending_approval::{ApprovalRecord, ApprovalStatus, Phase};
use crate::domain::run_state::RunStatus;
use crate::domain::spec::{OnSpecChange, Spec};
use crate::engine::deploy_plan::{
    ApprovalPlan, DeployPlan, LiveRunOutcome, LiveRuns, PlanSummary, VersionPlan,
};
use crate::service::batch::{BatchError, BatchResult, BatchResults};
use crate::service::schema::Schema;
use crate::service::views::{
    ApprovalView, ApprovalsPage, CancelView, DecisionView, Health, HealthError, LeaseView,
    RunStarted, RunSummary, RunView, RunsPage, VoteView,
};
use crate::service::votes::VotesView;

const SPEC: &str = r#"
version: 1
agent: refunds
description: Refund orders.
trigger:
  webhook: { path: /hooks/refund, secret: "${HOOK_SECRET}" }
tools:
  pay:
    http: { method: POST, url: "https://pay.example/refunds" }
    approval: required
steps:
  - id: draft
    set: { amount: 5 }
  - id: confirm
    approval:
      payload: { greeting: "Hello {{ input.name }}", amount: "{{ steps.draft.output.amount }}", tries: 3, tags: [a, 1.5] }
  - id: refund
    tool: pay
    with: { order: "{{ input.order }}", note: "fixed" }
  - id: close
    approval: { message: "Close?" }
"#;

fn spec() -> Spec {
    Spec::parse(SPEC, "refunds.yaml").expect("the test spec parses")
}

/// `value` against the document's component `name`, every error listed.
fn check(document: &Value, name: &str, value: &Value) -> Vec<String> {
    let schema = json!({ "$ref": format!("#/components/schemas/{name}") });
    schema_errors(document, &schema, value)
}

fn at(seconds: i64) -> chrono::DateTime<Utc> {
    Utc.timestamp_opt(1_780_000_000 + seconds, 123_000_000)
        .single()
        .expect("a valid time")
}

/// A record of a gate with rules, as a run pauses it.
fn voted_record() -> crate::domain::pending_approval::ApprovalRecord {
    use crate::domain::policy::{GatePolicy, Roster, RuleSpec};
    let groups = [(
        "finance".to_string(),
        vec!["alice".to_string(), "bob".to_string()],
    )]
    .into_iter()
    .collect();
    let policy = GatePolicy {
        rules: vec![RuleSpec {
            group: "finance".into(),
            min: 2,
        }],
        ..GatePolicy::plain()
    };
    crate::domain::pending_approval::ApprovalRecord {
        roster: Some(Roster::resolve(&policy, &groups, vec!["bot".into()]).expect("roster")),
        ..crate::domain::pending_approval::sample_record("k", "r")
    }
}

/// One approval cast on [`voted_record`].
fn sample_votes() -> Vec<crate::domain::policy::Vote> {
    use crate::domain::policy::{BallotVote, Channel, VoteChoice, VoteDecision, payload_digest};
    let ballot = BallotVote {
        input: None,
        voter: "alice".into(),
        choice: VoteChoice {
            decision: VoteDecision::Approve,
            reason: Some("fine".into()),
            payload: None,
            channel: Channel::Inbox,
            payload_digest: payload_digest(&json!({})),
        },
        at: crate::support::time::now(),
    };
    vec![ballot.to_vote(1, Some("finance".into()))]
}

fn approval(spec: &Spec, step_id: &str, payload: Value, status: ApprovalStatus) -> ApprovalView {
    let decided = status != ApprovalStatus::Pending;
    let served = spec.hash.as_str();
    ApprovalView::new(
        ApprovalRecord {
            key: "0b5d1c1e-6d2f-4f0e-9a51-52cbb1cba5a5".into(),
            run_id: "019a7f3e-0000-7000-8000-000000000001".into(),
            agent_id: spec.agent.clone(),
            spec_hash: spec.hash.as_str().to_string(),
            step_index: spec.step_index(step_id).expect("a step of the spec"),
            step_id: step_id.into(),
            phase: Phase::Before,
            message: Some("Send it?".into()),
            payload,
            outputs: Map::from_iter([("draft".to_string(), json!({ "amount": 5 }))]),
            input: json!({ "name": "Ada" }).into(),
            trigger: json!({ "kind": "api", "started_by": "local", "received_at": "x" }),
            status,
            decision_data: decided.then(|| json!({ "reason": "fine" })),
            decided_by: decided.then(|| "alice".to_string()),
            decided_at: decided.then(|| at(60)),
            created_at: at(0),
            expires_at: at(3600),
            roster: None,
            origin: crate::domain::pending_approval::ApprovalOrigin::Pause,
        },
        served,
    )
}

fn run_view(spec: &Spec, pending: Option<ApprovalView>) -> RunView {
    RunView {
        id: "019a7f3e-0000-7000-8000-000000000001".into(),
        agent: spec.agent.clone(),
        spec_hash: spec.hash.as_str().to_string(),
        spec_current: true,
        status: if pending.is_some() {
            RunStatus::AwaitingApproval
        } else {
            RunStatus::Completed
        },
        outputs: Map::new(),
        error: None,
        created_at: at(0),
        updated_at: at(5),
        lease: None,
        pending_approval: pending,
    }
}

fn confirm_payload() -> Value {
    json!({ "greeting": "Hello Ada", "amount": 5, "tries": 3, "tags": ["a", 1.5] })
}

/// Every response type, in each of its forms, serialized by serde.
/// Every form a batch result takes: decided, repeated, a vote that left
/// the gate open, refused.
fn batch_results() -> BatchResults {
    let result = |key: &str, status: &str| BatchResult {
        key: key.into(),
        status: status.into(),
        repeated: false,
        progress: None,
        error: None,
    };
    BatchResults {
        results: vec![
            result("a", "APPROVED"),
            BatchResult {
                repeated: true,
                ..result("b", "REJECTED")
            },
            BatchResult {
                progress: Some("finance 1 of 2".into()),
                ..result("c", "PENDING")
            },
            BatchResult {
                error: Some(BatchError {
                    code: "already_resolved".into(),
                    message: "approval d is already APPROVED".into(),
                }),
                ..result("d", "refused")
            },
        ],
    }
}

fn responses(spec: &Spec) -> Vec<(&'static str, Value)> {
    let pending = || approval(spec, "confirm", confirm_payload(), ApprovalStatus::Pending);
    let decided = approval(
        spec,
        "refund",
        json!({ "order": 7, "note": "fixed" }),
        ApprovalStatus::Approved,
    );
    let to = |v: &dyn erased::Ser| v.value();
    vec![
        ("RunView", to(&run_view(spec, Some(pending())))),
        (
            "RunView",
            to(&RunView {
                status: RunStatus::Running,
                lease: Some(LeaseView {
                    owner: "host:42:9f3a".into(),
                    until: at(30),
                }),
                ..run_view(spec, None)
            }),
        ),
        (
            "RunView",
            to(&RunView {
                error: Some("boom".into()),
                ..run_view(spec, None)
            }),
        ),
        (
            "RunSummary",
            to(&RunSummary {
                id: "r".into(),
                agent: spec.agent.clone(),
                status: RunStatus::Failed,
                error: Some("boom".into()),
                created_at: at(0),
                updated_at: at(1),
                lease: None,
            }),
        ),
        (
            "RunsPage",
            to(&RunsPage {
                runs: vec![],
                next_cursor: Some("c".into()),
            }),
        ),
        (
            "CancelView",
            to(&CancelView {
                run_id: "r".into(),
                status: RunStatus::Cancelled,
                was: RunStatus::AwaitingApproval,
                cancelled_by: "alice".into(),
                reason: None,
                approval: Some(approval(
                    spec,
                    "close",
                    Value::Null,
                    ApprovalStatus::Cancelled,
                )),
            }),
        ),
        ("ApprovalView", to(&pending())),
        ("ApprovalView", to(&decided)),
        ("ApprovalView", to(&ApprovalView::new(voted_record(), "x"))),
        (
            "VotesView",
            to(&VotesView::new(&voted_record(), sample_votes())),
        ),
        (
            "VotesView",
            to(&VotesView::new(
                &crate::domain::pending_approval::sample_record("k", "r"),
                vec![],
            )),
        ),
        (
            "ApprovalsPage",
            to(&ApprovalsPage {
                approvals: vec![pending()],
                next_cursor: None,
            }),
        ),
        (
            "DecisionView",
            to(&DecisionView {
                approval: decided,
                run_id: "r".into(),
                status: RunStatus::Running,
                repeated: false,
                vote: None,
                run: None,
            }),
        ),
        (
            "DecisionView",
            to(&DecisionView {
                approval: pending(),
                run_id: "r".into(),
                status: RunStatus::AwaitingApproval,
                repeated: false,
                vote: Some(VoteView {
                    voter: "alice".into(),
                    decision: "approve".into(),
                    rule: Some("finance".into()),
                    progress: "finance 1 of 2; security 0 of 1".into(),
                    input: Some(serde_json::json!({ "note": "checked" })),
                    repeated: true,
                }),
                run: None,
            }),
        ),
        (
            "DecisionView",
            to(&DecisionView {
                approval: approval(spec, "confirm", confirm_payload(), ApprovalStatus::Modified),
                run_id: "r".into(),
                status: RunStatus::Completed,
                repeated: true,
                vote: None,
                run: Some(run_view(spec, None)),
            }),
        ),
        ("DeployPlan", to(&deploy_plan(spec))),
        (
            "DeployPlan",
            to(&DeployPlan {
                versions: vec![],
                approvals: vec![],
                ..deploy_plan(spec)
            }),
        ),
        ("BatchResults", to(&batch_results())),
        ("RunStarted", to(&RunStarted { run_id: "r".into() })),
        (
            "Health",
            to(&Health {
                status: "ok",
                error: None,
            }),
        ),
        (
            "Health",
            to(&Health {
                status: "unavailable",
                error: Some(HealthError {
                    code: "store_unavailable",
                    message: "read-only".into(),
                }),
            }),
        ),
    ]
}

/// A plan with every field set, and one of each optional form: a version
/// with its diff, one that cannot be read.
fn deploy_plan(spec: &Spec) -> DeployPlan {
    let old = Spec::parse(
        &SPEC
            .replace("tries: 3", "tries: 4")
            .replace("  - id: close\n    approval: { message: \"Close?\" }\n", "")
            .replace("description: Refund orders.", "description: Refunds."),
        "old.yaml",
    )
    .expect("the old spec parses");
    let readable = VersionPlan {
        hash: old.hash.to_string(),
        first_seen: Some(at(0)),
        last_seen: Some(at(10)),
        pending_approvals: 1,
        running_runs: 1,
        stuck_runs: 0,
        problem: None,
        diff: Some(crate::domain::spec::diff(&old, spec)),
        required_env: vec!["HOOK_SECRET".into()],
    };
    let diff = readable.diff.as_ref().expect("a diff");
    assert!(
        !diff.added.is_empty() && !diff.changed.is_empty() && !diff.top_level.is_empty(),
        "the sample shows every part of a diff: {diff:?}"
    );
    let mut diff_with_kinds = diff.clone();
    diff_with_kinds.changed[0].old_kind = Some("set".into());
    diff_with_kinds.removed = diff_with_kinds.added.clone();
    diff_with_kinds.renamed = vec![crate::domain::spec::RenamedStep {
        from: "a".into(),
        to: "b".into(),
        kind: "set".into(),
    }];
    DeployPlan {
        agent: spec.agent.clone(),
        spec_hash: spec.hash.to_string(),
        policy: OnSpecChange::Pin,
        stored_versions: 2,
        versions: vec![
            VersionPlan {
                diff: Some(diff_with_kinds),
                ..readable
            },
            VersionPlan {
                hash: "0".repeat(64),
                first_seen: None,
                last_seen: None,
                pending_approvals: 1,
                running_runs: 0,
                stuck_runs: 2,
                problem: Some("not in the store".into()),
                diff: None,
                required_env: vec![],
            },
        ],
        approvals: vec![
            ApprovalPlan {
                key: "k1".into(),
                run_id: "r1".into(),
                spec_hash: old.hash.to_string(),
                step: "close".into(),
                phase: Phase::Before,
                new_step: Some("close".into()),
                classification: Some(crate::domain::spec::Classification::MessageChanged),
                policy: OnSpecChange::Pin,
                outcome: crate::domain::spec::Outcome::Pinned,
                stranded: false,
                created_at: at(0),
                expires_at: at(3600),
            },
            ApprovalPlan {
                key: "k2".into(),
                run_id: "r2".into(),
                spec_hash: "0".repeat(64),
                step: "gone".into(),
                phase: Phase::After,
                new_step: None,
                classification: None,
                policy: OnSpecChange::Refuse,
                outcome: crate::domain::spec::Outcome::Refused,
                stranded: true,
                created_at: at(1),
                expires_at: at(3601),
            },
        ],
        live_runs: LiveRuns {
            running: 1,
            stuck: 2,
            outcome: LiveRunOutcome::ContinuesOnItsVersion,
        },
        summary: PlanSummary {
            pending: 3,
            current: 1,
            pinned: 1,
            moves_to_new: 0,
            refused: 1,
            stranded: 1,
        },
    }
}

/// Serialize through a trait object, so one list holds every type.
mod erased {
    pub trait Ser {
        fn value(&self) -> serde_json::Value;
    }
    impl<T: serde::Serialize> Ser for T {
        fn value(&self) -> serde_json::Value {
            serde_json::to_value(self).expect("API types always serialize")
        }
    }
}

#[test]
fn every_response_type_serializes_to_its_schema() {
    let spec = spec();
    let document = document(&spec);
    for (name, value) in responses(&spec) {
        let errors = check(&document, name, &value);
        assert!(errors.is_empty(), "{name} {value}: {errors:?}");
    }
}

#[test]
fn a_field_the_schema_lacks_or_a_wrong_type_is_caught() {
    let spec = spec();
    let document = document(&spec);
    let mut run = serde_json::to_value(run_view(&spec, None)).unwrap();
    run["extra"] = json!(1);
    assert_eq!(
        check(&document, "RunView", &run),
        ["/extra: no value is allowed here"]
    );
    let mut run = serde_json::to_value(run_view(&spec, None)).unwrap();
    run["status"] = json!("napping");
    assert_eq!(check(&document, "RunView", &run).len(), 1);
    run.as_object_mut().unwrap().remove("status");
    assert_eq!(
        check(&document, "RunView", &run),
        [": the required field \"status\" is missing"]
    );
}

#[test]
fn fields_skipped_when_empty_are_optional_and_nulls_are_required() {
    let mut components = Components::default();
    DecisionView::schema(&mut components);
    let decision = components.get("DecisionView").unwrap();
    let required: Vec<&str> = decision["required"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert_eq!(required, ["approval", "run_id", "status"]);
    let run = components.get("RunView").unwrap();
    assert!(
        run["required"]
            .as_array()
            .unwrap()
            .contains(&json!("error"))
    );
    assert_eq!(
        run["properties"]["error"]["type"],
        json!(["string", "null"])
    );
    // Doc comments become descriptions.
    assert!(
        run["properties"]["pending_approval"]["anyOf"].is_array()
            && run["properties"]["pending_approval"]
                .to_string()
                .contains("waits on")
    );
}

#[test]
fn each_gate_has_its_payload_shape_and_records_are_held_to_it() {
    let spec = spec();
    let document = document(&spec);
    let schemas = &document["components"]["schemas"];
    let confirm = &schemas["GatePayload.confirm"];
    assert_eq!(confirm["properties"]["greeting"]["type"], "string");
    assert_eq!(
        confirm["properties"]["amount"],
        json!({}),
        "a lone {{ }} keeps its value's type"
    );
    assert_eq!(confirm["properties"]["tries"]["type"], "integer");
    assert_eq!(
        schemas["GatePayload.refund"]["required"],
        json!(["order", "note"])
    );
    assert_eq!(schemas["GatePayload.close"]["type"], "null");
    assert!(
        schemas.get("GatePayload.draft").is_none(),
        "a set step is no gate"
    );

    let wrong = approval(
        &spec,
        "confirm",
        json!({ "greeting": 1 }),
        ApprovalStatus::Pending,
    );
    let wrong = serde_json::to_value(wrong).unwrap();
    assert!(!check(&document, "ApprovalView", &wrong).is_empty());
    // A record of another version of the spec may have any payload.
    let mut older = wrong;
    older["spec_hash"] = json!("0".repeat(64));
    older["spec_current"] = json!(false);
    assert_eq!(
        check(&document, "ApprovalView", &older),
        Vec::<String>::new()
    );
    // `spec_current` says whether `spec_hash` is the served one: the two
    // never disagree.
    let mut disagreeing = older.clone();
    disagreeing["spec_current"] = json!(true);
    assert!(!check(&document, "ApprovalView", &disagreeing).is_empty());
}

#[test]
fn every_error_code_is_listed() {
    let document = document(&spec());
    let listed = &document["components"]["schemas"]["Error"]["properties"]["error"]["properties"]["code"]
        ["enum"];
    for code in super::errors::codes() {
        assert!(listed.as_array().unwrap().contains(&json!(code)), "{code}");
    }
    for code in [
        "run_not_found",
        "already_resolved",
        "approval_expired",
        "store_busy",
    ] {
        assert!(listed.as_array().unwrap().contains(&json!(code)), "{code}");
    }
}

#[test]
fn the_document_is_openapi_3_1_and_every_reference_resolves() {
    let spec = spec();
    let document = document(&spec);
    assert_eq!(document["openapi"], "3.1.0");
    assert_eq!(document["info"]["version"], spec.hash.as_str());
    assert_eq!(
        document["components"]["securitySchemes"]["bearer"]["scheme"],
        "bearer"
    );
    let hook = &document["paths"]["/hooks/refund"]["post"];
    assert_eq!(hook["security"], json!([]));
    assert!(
        hook["parameters"]
            .to_string()
            .contains("X-Tollgate-Signature")
    );
    let mut refs = Vec::new();
    collect_refs(&document, &mut refs);
    assert!(!refs.is_empty());
    for target in refs {
        let pointer = target.strip_prefix('#').expect("a local reference");
        assert!(
            document.pointer(pointer).is_some(),
            "{target} does not resolve"
        );
    }
    // Deterministic: an export writes the same bytes every time.
    assert_eq!(document.to_string(), super::document(&spec).to_string());
}

fn collect_refs(value: &Value, out: &mut Vec<String>) {
    match value {
        Value::Object(map) => {
            if let Some(Value::String(target)) = map.get("$ref") {
                out.push(target.clone());
            }
            map.values().for_each(|v| collect_refs(v, out));
        }
        Value::Array(items) => items.iter().for_each(|v| collect_refs(v, out)),
        _ => {}
    }
}

#[test]
fn doc_comments_of_every_literal_form_are_read() {
    use super::schema::doc_text;
    assert_eq!(
        doc_text(&[
            r#"doc = r" First line""#,
            r#"doc = r" second.""#,
            r#"doc = r"""#,
            r##"doc = r#" Then "quoted"."#"##
        ]),
        Some("First line second.\n\nThen \"quoted\".".to_string())
    );
    assert_eq!(
        doc_text(&[r#"doc = " a \"b\"""#]),
        Some("a \"b\"".to_string())
    );
    assert_eq!(doc_text(&["serde(default)"]), None);
}

#[test]
fn a_webhook_path_with_braces_is_literal_not_a_template() {
    let text = SPEC.replace("path: /hooks/refund", "path: \"/hooks/{id}\"");
    let spec = Spec::parse(&text, "refunds.yaml").expect("braces are allowed in a webhook path");
    let document = document(&spec);
    let hook = &document["paths"]["/hooks/%7Bid%7D"]["post"];
    assert_eq!(hook["operationId"], "webhook", "{}", document["paths"]);
    assert!(!hook["parameters"].to_string().contains("\"in\":\"path\""));
}
