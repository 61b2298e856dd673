//! A NUL character (`\u0000`) over HTTP on a PostgreSQL store: in a run's
//! input, a webhook body, a reason, an edited payload and a downstream's
//! reply after an approved call. PostgreSQL's jsonb and text cannot hold
//! one; the store keeps it losslessly (json columns), as SQLite does, so
//! nothing answers 500 and no run is left stranded with its call made.

use crate::common;
use crate::common::postgres;
use crate::common::server;
use crate::common::stub_server;

use std::time::Duration;

use common::Workspace;
use serde_json::json;
use server::{Api, Served};
use stub_server::{Response, StubServer};

const NUL: &str = "a\u{0}b";

fn spec(stub_url: &str) -> String {
    format!(
        r#"version: 1
agent: nul-desk
trigger:
  webhook:
    path: /hooks/nul
tools:
  ship:
    http:
      method: POST
      url: "{stub_url}"
      json: {{ note: "{{{{ args.note }}}}" }}
    approval: required
    message: "Ship {{{{ args.note }}}}?"
steps:
  - id: ship
    tool: ship
    with: {{ note: "{{{{ input.note }}}}" }}
"#
    )
}

#[tokio::test(flavor = "multi_thread")]
async fn nul_characters_are_kept_end_to_end_on_postgres() {
    let db = postgres::database();
    let stub = StubServer::start(|_| Response::json(200, json!({"echo": NUL, NUL: [NUL]})));
    let ws = Workspace::new(&spec(&stub.url("/ship")));
    let served = Served::start_on_database(&ws.spec, &db.url, &[], &[]);
    let api = Api::new();

    // A run's input.
    let (code, run) = api
        .post(
            &served.url("/runs?wait=true"),
            json!({"input": {"note": NUL}}),
        )
        .await;
    assert_eq!(code, 200, "{run}");
    assert_eq!(run["status"], "awaiting_approval", "{run}");
    let run_id = run["id"].as_str().unwrap().to_string();
    let key = run["pending_approval"]["key"].as_str().unwrap().to_string();
    assert_eq!(run["pending_approval"]["payload"]["note"], NUL);
    assert_eq!(
        run["pending_approval"]["message"],
        format!("Ship {NUL}?"),
        "the message keeps it too"
    );

    // An edited payload and a reason, then the call and its reply.
    let (code, body) = api
        .post(
            &served.url(&format!("/approvals/{key}/approve?wait=true")),
            json!({"reason": NUL, "payload": {"note": format!("{NUL}!")}}),
        )
        .await;
    assert_eq!(code, 200, "{body}");
    let done = api.wait_for_status(&served, &run_id, "completed").await;
    assert_eq!(done["outputs"]["ship"]["body"]["echo"], NUL, "{done}");
    assert_eq!(stub.count(), 1, "called once");
    assert_eq!(stub.requests()[0].json()["note"], format!("{NUL}!"));
    let (_, record) = api.get(&served.url(&format!("/approvals/{key}"))).await;
    assert_eq!(record["status"], "MODIFIED");
    assert_eq!(record["decision_data"]["reason"], NUL, "{record}");

    // A webhook body, and a rejection's reason.
    let (code, body) = api
        .post_raw(
            &served.url("/hooks/nul"),
            json!({"note": NUL}).to_string().into_bytes(),
            &[("Content-Type", "application/json")],
        )
        .await;
    assert_eq!(code, 202, "{body}");
    let hooked = body["run_id"].as_str().unwrap().to_string();
    let paused = api
        .wait_for_status(&served, &hooked, "awaiting_approval")
        .await;
    let key = paused["pending_approval"]["key"]
        .as_str()
        .unwrap()
        .to_string();
    let (code, body) = api
        .post(
            &served.url(&format!("/approvals/{key}/reject?wait=true")),
            json!({"reason": NUL}),
        )
        .await;
    assert_eq!(code, 200, "{body}");
    api.wait_for_status(&served, &hooked, "rejected").await;
    assert_eq!(stub.count(), 1, "the rejected call was never made");
}

/// A downstream reply the database will not take (here a trigger refuses
/// it, as a size limit or another program's constraint would) after an
/// approved call: the run is not left `running` with its call made; it ends
/// `failed`, saying its state could not be stored, and the call is not
/// repeated.
#[tokio::test(flavor = "multi_thread")]
async fn a_reply_the_store_refuses_fails_the_run_visibly() {
    let db = postgres::database();
    let stub = StubServer::start(|_| Response::json(200, json!({"data": "poison-value"})));
    let ws = Workspace::new(&spec(&stub.url("/ship")));
    let served = Served::start_on_database(&ws.spec, &db.url, &[], &[]);
    db.psql(
        "CREATE FUNCTION refuse_marked() RETURNS trigger LANGUAGE plpgsql AS $$ \
         BEGIN \
           IF to_jsonb(NEW)::text LIKE '%poison-value%' THEN \
             RAISE EXCEPTION 'this value cannot be stored'; \
           END IF; \
           RETURN NEW; \
         END $$; \
         CREATE TRIGGER refuse BEFORE INSERT OR UPDATE ON tollgate_runs \
           FOR EACH ROW EXECUTE FUNCTION refuse_marked(); \
         CREATE TRIGGER refuse BEFORE INSERT ON tollgate_run_events \
           FOR EACH ROW EXECUTE FUNCTION refuse_marked();",
    );
    let api = Api::new();
    let (code, run) = api
        .post(
            &served.url("/runs?wait=true"),
            json!({"input": {"note": "x"}}),
        )
        .await;
    assert_eq!(code, 200, "{run}\n{}", served.logs());
    let run_id = run["id"].as_str().unwrap().to_string();
    let key = run["pending_approval"]["key"].as_str().unwrap().to_string();
    let (code, body) = api
        .post(
            &served.url(&format!("/approvals/{key}/approve?wait=true")),
            json!({}),
        )
        .await;
    assert_eq!(code, 200, "{body}\n{}", served.logs());
    let failed = api.wait_for_status(&served, &run_id, "failed").await;
    let error = failed["error"].as_str().unwrap_or_default();
    assert!(error.contains("could not be stored"), "{failed}");
    assert!(
        error.contains("this value cannot be stored"),
        "the cause: {failed}"
    );
    assert_eq!(stub.count(), 1, "called once, never again");
    served
        .log_line("ending it failed", Duration::from_secs(30))
        .await;
}
