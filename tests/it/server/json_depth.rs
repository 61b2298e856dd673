//! How deep JSON from outside a run may nest (`MAX_JSON_DEPTH`, 100
//! levels), through a real server on a real SQLite file and the real CLI.
//!
//! The store reads every JSON column back with serde_json, which stops at
//! 127 levels, and a run stores outside data wrapped again (a reply in the
//! step's output, the output in the run's `outputs`, those in events). A
//! reply nested just under serde_json's limit used to be stored unreadable:
//! `GET /runs/{id}` and the event stream answered 500 for good. Now a reply
//! past the limit fails its step visibly, after one call, and the run stays
//! readable; a body past it is a 400; the CLI exits 2.

use crate::common;
use crate::common::assert_stderr_contains;
use crate::common::server;
use crate::common::stub_server;

use std::time::Duration;

use common::{GATED_SPEC, Workspace, assert_exit, stderr};
use serde_json::{Value, json};
use server::{Api, Served, SseStream, code};
use stub_server::{Response, StubServer};
use tollgate_runtime::MAX_JSON_DEPTH;

/// `depth` arrays, one in the other, around `1`.
fn nested(depth: usize) -> Value {
    let mut v = json!(1);
    for _ in 0..depth {
        v = Value::Array(vec![v]);
    }
    v
}

/// Deep enough to be unreadable once stored in a run's outputs, shallow
/// enough for serde_json (and so the old code) to parse it.
const NEAR_SERDE_LIMIT: usize = 126;

/// One tool step calling the stub, gated or not; a webhook starts it too.
fn spec(url: &str, gated: bool) -> String {
    format!(
        r#"version: 1
agent: deep-desk
trigger:
  webhook:
    path: /hooks/deep
tools:
  fetch:
    http:
      method: POST
      url: "{url}"
      json: {{ n: "{{{{ args.n }}}}" }}
{gate}steps:
  - id: fetch
    tool: fetch
    with: {{ n: "{{{{ input.n }}}}" }}
"#,
        gate = if gated {
            "    approval: required\n"
        } else {
            ""
        }
    )
}

fn serve(ws: &Workspace) -> Served {
    Served::start(&ws.spec, &ws.path().join("state.db"), &[], &[])
}

/// The run's stored events, read to the end of its stream.
async fn event_kinds(api: &Api, served: &Served, run_id: &str) -> Vec<String> {
    let mut stream =
        SseStream::open(api, &served.url(&format!("/runs/{run_id}/events")), None).await;
    let events = stream.collect_until_end(Duration::from_secs(30)).await;
    events.iter().map(|e| e.kind().to_string()).collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_reply_nested_past_the_limit_fails_its_step_and_the_run_stays_readable() {
    for gated in [false, true] {
        for depth in [MAX_JSON_DEPTH + 1, NEAR_SERDE_LIMIT] {
            let body = nested(depth);
            let stub = StubServer::start(move |_| Response::json(200, body.clone()));
            let ws = Workspace::new(&spec(&stub.url("/fetch"), gated));
            let served = serve(&ws);
            let api = Api::new();
            let (status, run) = api
                .post(&served.url("/runs?wait=true"), json!({"input": {"n": 1}}))
                .await;
            assert_eq!(status, 200, "{run}\n{}", served.logs());
            let run_id = run["id"].as_str().unwrap().to_string();
            if gated {
                assert_eq!(run["status"], "awaiting_approval", "{run}");
                let key = run["pending_approval"]["key"].as_str().unwrap();
                let (status, body) = api
                    .post(
                        &served.url(&format!("/approvals/{key}/approve?wait=true")),
                        json!({}),
                    )
                    .await;
                assert_eq!(status, 200, "{body}\n{}", served.logs());
            }
            let failed = api.wait_for_status(&served, &run_id, "failed").await;
            let error = failed["error"].as_str().unwrap_or_default();
            assert!(
                error.contains("step \"fetch\"") && error.contains("deeper than 100 levels"),
                "gated {gated}, depth {depth}: {failed}"
            );
            assert_eq!(failed["outputs"], json!({}), "the reply is not kept");
            let kinds = event_kinds(&api, &served, &run_id).await;
            assert_eq!(
                kinds.last().map(String::as_str),
                Some("run_failed"),
                "{kinds:?}"
            );
            let (status, listed) = api.get(&served.url("/approvals")).await;
            assert_eq!(status, 200, "{listed}");
            assert_eq!(stub.count(), 1, "called once, never again");
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_reply_at_the_limit_is_kept_and_read_back() {
    let body = nested(MAX_JSON_DEPTH);
    let reply = body.clone();
    let stub = StubServer::start(move |_| Response::json(200, reply.clone()));
    let ws = Workspace::new(&spec(&stub.url("/fetch"), false));
    let served = serve(&ws);
    let api = Api::new();
    let (status, run) = api
        .post(&served.url("/runs?wait=true"), json!({"input": {"n": 1}}))
        .await;
    assert_eq!(status, 200, "{run}\n{}", served.logs());
    assert_eq!(run["status"], "completed", "{run}");
    let run_id = run["id"].as_str().unwrap();
    let stored = api.wait_for_status(&served, run_id, "completed").await;
    assert_eq!(stored["outputs"]["fetch"]["body"], body);
    let kinds = event_kinds(&api, &served, run_id).await;
    assert_eq!(
        kinds.last().map(String::as_str),
        Some("run_completed"),
        "{kinds:?}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn request_bodies_nested_past_the_limit_answer_400() {
    let stub = StubServer::start(|_| Response::json(200, json!({"ok": true})));
    let ws = Workspace::new(&spec(&stub.url("/fetch"), true));
    let served = serve(&ws);
    let api = Api::new();
    let refused = |status: u16, body: &Value| {
        assert_eq!(status, 400, "{body}");
        assert_eq!(code(body), "invalid_request", "{body}");
        let message = body["error"]["message"].as_str().unwrap_or_default();
        assert!(message.contains("deeper than 100 levels"), "{body}");
    };

    // POST /runs: the body is the document, its input one level down.
    let (status, body) = api
        .post(
            &served.url("/runs"),
            json!({"input": {"n": nested(MAX_JSON_DEPTH - 1)}}),
        )
        .await;
    refused(status, &body);
    let (status, run) = api
        .post(
            &served.url("/runs?wait=true"),
            json!({"input": {"n": nested(MAX_JSON_DEPTH - 2)}}),
        )
        .await;
    assert_eq!(status, 200, "{run}\n{}", served.logs());
    assert_eq!(run["status"], "awaiting_approval", "{run}");
    let run_id = run["id"].as_str().unwrap().to_string();
    let key = run["pending_approval"]["key"].as_str().unwrap().to_string();

    // A webhook: the body is the run's input.
    let (status, body) = api
        .post_raw(
            &served.url("/hooks/deep"),
            nested(MAX_JSON_DEPTH + 1).to_string().into_bytes(),
            &[("Content-Type", "application/json")],
        )
        .await;
    refused(status, &body);

    // An edited payload: refused, and the approval stays pending.
    for url in [
        format!("/approvals/{key}/approve"),
        format!("/runs/{run_id}/approve"),
    ] {
        let (status, body) = api
            .post(
                &served.url(&url),
                json!({"payload": {"n": nested(MAX_JSON_DEPTH - 1)}}),
            )
            .await;
        refused(status, &body);
    }
    let (status, record) = api.get(&served.url(&format!("/approvals/{key}"))).await;
    assert_eq!(status, 200, "{record}");
    assert_eq!(record["status"], "PENDING", "{record}");
    assert_eq!(stub.count(), 0, "nothing was called");

    // The run, its approval and its events all read back.
    let (status, listed) = api.get(&served.url("/approvals")).await;
    assert_eq!(status, 200, "{listed}");
    assert_eq!(listed["approvals"][0]["key"], key.as_str(), "{listed}");
    let mut stream =
        SseStream::open(&api, &served.url(&format!("/runs/{run_id}/events")), None).await;
    let mut kinds = Vec::new();
    while let server::SseNext::Event(e) = stream.next(Duration::from_secs(2)).await {
        kinds.push(e.kind().to_string());
    }
    assert_eq!(kinds, ["run_started", "step_started", "awaiting_approval"]);
}

#[test]
fn the_cli_refuses_input_and_payloads_nested_past_the_limit() {
    let ws = Workspace::new(GATED_SPEC);
    let too_deep = json!({"order_id": nested(MAX_JSON_DEPTH)}).to_string();
    let file = ws.path().join("deep.json");
    std::fs::write(&file, &too_deep).expect("write input");
    for input in [too_deep.clone(), format!("@{}", file.display())] {
        let out = ws
            .tollgate()
            .args(["run", ws.spec_arg(), "--persist", "--input", &input])
            .output()
            .expect("run tollgate");
        assert_exit(&out, 2);
        assert_stderr_contains(&out, "--input");
        assert_stderr_contains(&out, "deeper than 100 levels");
    }
    assert!(!ws.state_db().exists(), "no run was started");

    let key = ws.pause_run(r#"{"order_id": "E1"}"#);
    let out = ws
        .decide("approve", &key)
        .args(["--payload", &too_deep])
        .output()
        .expect("run approve");
    assert_exit(&out, 2);
    assert!(stderr(&out).contains("--payload"), "{}", stderr(&out));
    let listed = ws.list_json();
    assert_eq!(
        listed["approvals"][0]["key"],
        key.as_str(),
        "still pending: {listed}"
    );
}

/// The last line of defence: a spec's own mappings can wrap data that
/// entered at the limit past what the store reads back. The store refuses
/// that write, and the run ends `failed` saying so, before the next step's
/// call is made; everything stays readable.
#[tokio::test(flavor = "multi_thread")]
async fn a_step_output_the_store_cannot_read_back_fails_the_run_before_the_next_call() {
    let stub = StubServer::start(|_| Response::json(200, json!({"ok": true})));
    let wrap = 30;
    let spec = format!(
        r#"version: 1
agent: deep-desk
tools:
  fetch:
    http:
      method: POST
      url: "{url}"
steps:
  - id: wrap
    set: {open}"{{{{ input.n }}}}"{close}
  - id: fetch
    tool: fetch
"#,
        url = stub.url("/fetch"),
        open = "{ a: ".repeat(wrap),
        close = " }".repeat(wrap),
    );
    let ws = Workspace::new(&spec);
    let served = serve(&ws);
    let api = Api::new();
    let (status, run) = api
        .post(
            &served.url("/runs?wait=true"),
            json!({"input": {"n": nested(MAX_JSON_DEPTH - 2)}}),
        )
        .await;
    assert_eq!(status, 200, "{run}\n{}", served.logs());
    let run_id = run["id"].as_str().unwrap();
    let failed = api.wait_for_status(&served, run_id, "failed").await;
    let error = failed["error"].as_str().unwrap_or_default();
    assert!(
        error.contains("could not be stored") && error.contains("deeper than 127 levels"),
        "{failed}"
    );
    let kinds = event_kinds(&api, &served, run_id).await;
    assert_eq!(
        kinds.last().map(String::as_str),
        Some("run_failed"),
        "{kinds:?}"
    );
    assert_eq!(stub.count(), 0, "the next step's call was not made");
}
