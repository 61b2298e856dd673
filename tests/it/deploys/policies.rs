//! Serve v1, pause four runs at four gates, stop, deploy v2 (a message
//! changed, a step removed, a step renamed, an unrelated change), then
//! approve each: `refuse` answers `spec_changed` and lets reject through,
//! `pin` resumes every run on v1 (the stub sees v1's requests), `auto`
//! moves the pause whose gate is unchanged to v2 and pins the others.

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::{Value, json};

use crate::common::server::{self, Api, Served};
use crate::common::stub_server::{Response, StubServer};
use crate::common::{Workspace, open_store};
use tollgate_runtime::EventKind;

/// v1 of the agent: four `if` gates, each pausing only the runs whose input
/// names it, then one call of `ship` that says which version made it.
pub(super) fn v1(policy: &str, ship_url: &str) -> String {
    format!(
        r#"version: 1
agent: deploys
description: Ship an order once a person says so (v1).
approvals:
  on_spec_change: {policy}
tools:
  ship:
    http:
      method: POST
      url: {ship_url}
      json: {{ spec: "v1", order: "{{{{ args.order }}}}", gate: "{{{{ args.gate }}}}" }}
steps:
  - id: prepare
    set: {{ order: "{{{{ input.order }}}}" }}
  - id: audit
    if: "{{{{ input.gate == 'audit' }}}}"
    then: request_human_approval
    message: "Audit {{{{ steps.prepare.output.order }}}}?"
  - id: review
    if: "{{{{ input.gate == 'review' }}}}"
    then: request_human_approval
    message: "Review {{{{ steps.prepare.output.order }}}}?"
  - id: legal
    if: "{{{{ input.gate == 'legal' }}}}"
    then: request_human_approval
    message: "Legal check {{{{ steps.prepare.output.order }}}}?"
  - id: finance
    if: "{{{{ input.gate == 'finance' }}}}"
    then: request_human_approval
    message: "Finance check {{{{ steps.prepare.output.order }}}}?"
  - id: send
    tool: ship
    with: {{ order: "{{{{ steps.prepare.output.order }}}}", gate: "{{{{ input.gate }}}}" }}
"#
    )
}

/// v2: `review`'s message changed, `legal` removed, `finance` renamed
/// `money`, the description and the call's marker changed; `audit` and
/// everything before it as in v1.
pub(super) fn v2(policy: &str, ship_url: &str) -> String {
    deployed(&v1(policy, ship_url))
}

/// What v2 does to a v1 text (one of [`v1`], or v1 with more in it).
pub(super) fn deployed(v1_text: &str) -> String {
    let text = v1_text
        .replace("(v1)", "(v2)")
        .replace(r#"spec: "v1""#, r#"spec: "v2""#)
        .replace("message: \"Review ", "message: \"Please review ")
        .replace("  - id: finance\n", "  - id: money\n");
    let legal = text.find("  - id: legal\n").expect("legal");
    let money = text.find("  - id: money\n").expect("money");
    format!("{}{}", &text[..legal], &text[money..])
}

pub(super) const GATES: [&str; 4] = ["audit", "review", "legal", "finance"];

/// The hash a spec text has.
pub(super) fn hash_of(text: &str) -> String {
    tollgate_runtime::Spec::parse(text, "agent.yaml")
        .expect("spec")
        .hash
        .to_string()
}

/// A deploy under `policy`: v1 served with a pause at each gate, then v2
/// served on the same state file.
struct Deployed {
    ws: Workspace,
    stub: StubServer,
    served: Served,
    api: Api,
    /// Gate -> (run id, approval key).
    paused: BTreeMap<&'static str, (String, String)>,
    v1_hash: String,
    v2_hash: String,
}

impl Deployed {
    async fn new(policy: &str) -> Deployed {
        Deployed::with(policy, |_, _| {}).await
    }

    /// [`Deployed::new`], with `between` done to the state file and v1's
    /// hash once v1 stopped, before v2 starts.
    async fn with(policy: &str, between: impl FnOnce(&Path, &str)) -> Deployed {
        let stub = StubServer::start(|_| Response::json(201, json!({"ok": true})));
        let url = stub.url("/ship");
        let (v1_text, v2_text) = (v1(policy, &url), v2(policy, &url));
        let ws = Workspace::new(&v1_text);
        let state = ws.state_db();
        let api = Api::new();
        let served = Served::start(&ws.spec, &state, &[], &[]);
        let mut paused = BTreeMap::new();
        for gate in GATES {
            let p = api
                .pause(&served, json!({"order": format!("O-{gate}"), "gate": gate}))
                .await;
            paused.insert(gate, (p.run_id, p.key));
        }
        drop(served);
        assert_eq!(stub.count(), 0, "nothing ships before a decision");
        let v1_hash = hash_of(&v1_text);
        between(&state, &v1_hash);
        ws.write_spec(&v2_text);
        let served = Served::start(&ws.spec, &state, &[], &[]);
        Deployed {
            v1_hash,
            v2_hash: hash_of(&v2_text),
            ws,
            stub,
            served,
            api,
            paused,
        }
    }

    fn key(&self, gate: &str) -> &str {
        &self.paused[gate].1
    }

    fn run_id(&self, gate: &str) -> &str {
        &self.paused[gate].0
    }

    async fn decide(&self, gate: &str, verb: &str) -> (u16, Value) {
        let url = self
            .served
            .url(&format!("/approvals/{}/{verb}?wait=true", self.key(gate)));
        self.api.post(&url, json!({})).await
    }

    /// What the stub was sent for `gate`'s run: the version that made
    /// each call.
    fn shipped_by(&self, gate: &str) -> Vec<String> {
        self.stub
            .requests()
            .iter()
            .map(|r| r.json())
            .filter(|body| body["gate"] == gate)
            .map(|body| body["spec"].as_str().unwrap_or_default().to_string())
            .collect()
    }

    async fn events(&self, gate: &str) -> Vec<EventKind> {
        events(&self.ws.state_db(), self.run_id(gate)).await
    }
}

async fn events(state: &Path, run_id: &str) -> Vec<EventKind> {
    open_store(state)
        .run_events(run_id, 0)
        .await
        .expect("events")
        .into_iter()
        .map(|e| e.kind)
        .collect()
}

fn pinned_to(events: &[EventKind]) -> Option<Option<String>> {
    events.iter().find_map(|e| match e {
        EventKind::ApprovalResolved { pinned_to, .. } => Some(pinned_to.clone()),
        _ => None,
    })
}

/// `refuse` (the default): approve and modify answer 409 `spec_changed`
/// with both short hashes and leave the record PENDING; reject ends the
/// run; nothing ships.
#[tokio::test(flavor = "multi_thread")]
async fn under_refuse_approve_is_spec_changed_and_reject_goes_through() {
    let d = Deployed::new("refuse").await;
    for gate in GATES {
        let (status, body) = d.decide(gate, "approve").await;
        assert_eq!(
            (status, server::code(&body)),
            (409, "spec_changed"),
            "{gate}: {body}"
        );
        let message = body["error"]["message"].as_str().expect("message");
        assert!(message.contains(&d.v1_hash[..12]), "{message}");
        assert!(message.contains(&d.v2_hash[..12]), "{message}");
        let (_, record) = d
            .api
            .get(&d.served.url(&format!("/approvals/{}", d.key(gate))))
            .await;
        assert_eq!(record["status"], "PENDING", "{gate}: stays pending");
    }
    for gate in GATES {
        let (status, body) = d.decide(gate, "reject").await;
        assert_eq!(status, 200, "{gate}: {body}");
        assert_eq!(body["status"], "rejected", "{gate}: {body}");
    }
    assert_eq!(d.stub.count(), 0, "nothing approved, nothing shipped");
}

/// `pin`: every pause resumes on v1, whatever v2 did to its gate (changed,
/// removed, renamed): the stub sees v1's request once per run, and each
/// run's `approval_resolved` names the version it resumed on.
#[tokio::test(flavor = "multi_thread")]
async fn under_pin_every_pause_resumes_on_the_version_it_paused_under() {
    let d = Deployed::new("pin").await;
    for gate in GATES {
        let (status, body) = d.decide(gate, "approve").await;
        assert_eq!(status, 200, "{gate}: {body}\n{}", d.served.logs());
        assert_eq!(body["status"], "completed", "{gate}: {body}");
        assert_eq!(d.shipped_by(gate), ["v1"], "{gate}: v1's request, once");
        let events = d.events(gate).await;
        assert_eq!(
            pinned_to(&events),
            Some(Some(d.v1_hash.clone())),
            "{gate}: {events:?}"
        );
        let record = &body["approval"];
        assert_eq!(record["status"], "APPROVED", "{gate}: {body}");
        assert_eq!(record["step_id"], gate, "the v1 step: {body}");
    }
    // A repeat is answered with the stored decision, and ships nothing.
    let (status, again) = d.decide("legal", "approve").await;
    assert_eq!(status, 200, "{again}");
    assert_eq!(again["repeated"], true, "{again}");
    assert_eq!(d.stub.count(), 4, "each side effect ran once");
}

/// `auto`: the `audit` pause (its gate and everything before it unchanged)
/// moves to v2 at its decision (`approval_migrated`, `auto: true`) and
/// ships v2's request; the others resume on v1 as under `pin`.
#[tokio::test(flavor = "multi_thread")]
async fn under_auto_an_unchanged_gate_moves_to_the_new_version_and_the_rest_are_pinned() {
    let d = Deployed::new("auto").await;
    for gate in GATES {
        let (status, body) = d.decide(gate, "approve").await;
        assert_eq!(status, 200, "{gate}: {body}\n{}", d.served.logs());
        assert_eq!(body["status"], "completed", "{gate}: {body}");
    }
    assert_eq!(d.shipped_by("audit"), ["v2"]);
    for gate in ["review", "legal", "finance"] {
        assert_eq!(d.shipped_by(gate), ["v1"], "{gate}");
        assert_eq!(
            pinned_to(&d.events(gate).await),
            Some(Some(d.v1_hash.clone())),
            "{gate}"
        );
    }
    let audit = d.events("audit").await;
    let migrated: Vec<&EventKind> = audit
        .iter()
        .filter(|e| matches!(e, EventKind::ApprovalMigrated { .. }))
        .collect();
    assert_eq!(
        migrated,
        [&EventKind::ApprovalMigrated {
            key: d.key("audit").to_string(),
            from: d.v1_hash.clone(),
            to: d.v2_hash.clone(),
            by: "local".into(),
            map: BTreeMap::new(),
            auto: true,
        }],
        "{audit:?}"
    );
    assert_eq!(pinned_to(&audit), Some(None), "decided on v2 itself");
    let store = open_store(&d.ws.state_db());
    let record = store
        .get_approval(d.key("audit"))
        .await
        .expect("get")
        .expect("record");
    assert_eq!(record.spec_hash, d.v2_hash, "the record moved");
    let run = store
        .get_run(d.run_id("audit"))
        .await
        .expect("run")
        .expect("stored");
    assert_eq!(run.spec_hash, d.v2_hash, "its run too");
}

/// A version that cannot run here refuses with 409 `spec_unavailable`
/// naming what is missing, and the record stays PENDING: here v1 is gone
/// from the store (a pause made before tollgate kept versions).
#[tokio::test(flavor = "multi_thread")]
async fn a_version_that_cannot_run_here_is_spec_unavailable_and_stays_pending() {
    let d = Deployed::with("pin", |state, v1_hash| {
        let db = rusqlite::Connection::open(state).expect("open");
        db.execute("DELETE FROM tollgate_specs WHERE hash = ?1", [v1_hash])
            .expect("delete v1");
    })
    .await;
    let (status, body) = d.decide("review", "approve").await;
    assert_eq!(
        (status, server::code(&body)),
        (409, "spec_unavailable"),
        "{body}"
    );
    let message = body["error"]["message"].as_str().expect("message");
    assert!(message.contains("is not in the store"), "{message}");
    let (_, record) = d
        .api
        .get(&d.served.url(&format!("/approvals/{}", d.key("review"))))
        .await;
    assert_eq!(record["status"], "PENDING", "{record}");
    // Reject needs no version.
    let (status, body) = d.decide("review", "reject").await;
    assert_eq!(
        (status, body["status"].as_str()),
        (200, Some("rejected")),
        "{body}"
    );
    assert_eq!(d.stub.count(), 0);
}
