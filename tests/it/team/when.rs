//! `when:` on a gated tool (DESIGN §13): the gate fires only for the calls
//! its predicate holds for; a call it does not hold for goes out at once,
//! as an ungated one, and the run says so (`gate_skipped`, with the
//! predicate's value), never silently.

use serde_json::json;

use crate::common::server::{Api, Served};
use crate::common::stub_server::{Response, StubServer};
use crate::common::{Workspace, open_store};

fn spec(pay_url: &str) -> String {
    format!(
        r#"version: 1
agent: pay-desk
tools:
  pay:
    http:
      method: POST
      url: "{pay_url}"
      json: {{ amount: "{{{{ args.amount }}}}" }}
    approval: {{ when: "{{{{ args.amount > 100 }}}}", message: "Pay {{{{ args.amount }}}}?" }}
steps:
  - id: refund
    tool: pay
    with: {{ amount: "{{{{ input.amount }}}}" }}
"#
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_gate_fires_only_when_its_predicate_holds_and_says_when_it_did_not() {
    let pay = StubServer::start(|_| Response::json(200, json!({ "paid": true })));
    let ws = Workspace::new(&spec(&pay.url("/pay")));
    let state = ws.path().join("state.db");
    let served = Served::start(&ws.spec, &state, &[], &[]);
    let api = Api::new();

    // 50: no gate; the call goes out and the run completes.
    let (status, small) = api
        .post(
            &served.url("/runs?wait=true"),
            json!({ "input": { "amount": 50 } }),
        )
        .await;
    assert_eq!(status, 200, "{small}");
    assert_eq!(small["status"], "completed", "{small}");
    assert_eq!(pay.requests().len(), 1);
    let store = open_store(&state);
    let events = store
        .run_events(small["id"].as_str().unwrap(), 0)
        .await
        .unwrap();
    let names: Vec<&str> = events.iter().map(|e| e.kind.name()).collect();
    assert_eq!(
        names,
        [
            "run_started",
            "step_started",
            "gate_skipped",
            "step_completed",
            "run_completed"
        ]
    );
    let skipped = serde_json::to_value(&events[2]).unwrap();
    assert_eq!(skipped["step"], "refund");
    assert_eq!(skipped["when"], "{{ args.amount > 100 }}");
    assert_eq!(skipped["value"], json!(false));

    // 500: the gate fires; nothing is paid until it is approved.
    let (status, large) = api
        .post(
            &served.url("/runs?wait=true"),
            json!({ "input": { "amount": 500 } }),
        )
        .await;
    assert_eq!(status, 200, "{large}");
    assert_eq!(large["status"], "awaiting_approval", "{large}");
    assert_eq!(large["pending_approval"]["message"], "Pay 500?");
    assert_eq!(pay.requests().len(), 1, "no call before the approval");
    let key = large["pending_approval"]["key"].as_str().unwrap();
    let (status, decided) = api
        .post(
            &served.url(&format!("/approvals/{key}/approve?wait=true")),
            json!({}),
        )
        .await;
    assert_eq!(status, 200, "{decided}");
    assert_eq!(decided["run"]["status"], "completed", "{decided}");
    assert_eq!(pay.requests().len(), 2);
    let events = store
        .run_events(large["id"].as_str().unwrap(), 0)
        .await
        .unwrap();
    assert!(events.iter().all(|e| e.kind.name() != "gate_skipped"));
}
