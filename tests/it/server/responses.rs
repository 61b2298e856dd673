//! What the HTTP API answers with (vendored/src/service/views.rs): every body
//! shape pinned by a snapshot of a real response over loopback, ids and
//! times redacted; and the run status a decision reports.
//!
//! The server runs in this test's runtime on a memory store. A 202 answers
//! once a run is stored, before its steps run, and a decision answers once
//! it is claimed, while the run resumes: the store's work goes to tokio's
//! blocking pool on a current-thread runtime, so how far the run got by the
//! time of an answer differs from one run of the test to the next. The
//! tests wait for the status they read (`run_reaching`, `?wait=true`) and
//! never pin a status that depends on that race.

use crate::common;
use crate::common::http;
use crate::common::server;
use crate::common::stub_server;

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Map, Value, json};
use server::Api;
use stub_server::StubServer;
use tokio::sync::oneshot;
use tollgate_runtime::server::{Server, ServerConfig};
use tollgate_runtime::store::MemoryStore;
use tollgate_runtime::tools::Toolbox;
use tollgate_runtime::{AgentRun, Spec};

use common::GATED_SPEC;

/// A server in this runtime; stops when dropped.
struct InProcess {
    base: String,
    _stop: oneshot::Sender<()>,
}

impl InProcess {
    async fn start(spec_text: &str) -> InProcess {
        let spec = Spec::parse(spec_text, "agent.yaml").expect("valid spec");
        let agent = AgentRun::new(Arc::new(spec), Arc::new(MemoryStore::new()))
            .with_tools(Arc::new(Toolbox::new().expect("toolbox")));
        let config = ServerConfig {
            listen: "127.0.0.1:0".into(),
            ..ServerConfig::default()
        };
        let server = Server::bind(agent, config).await.expect("bind");
        let addr = server.local_addr().expect("address");
        let (stop, stopped) = oneshot::channel::<()>();
        tokio::spawn(server.run_until(async move {
            let _ = stopped.await;
        }));
        InProcess {
            base: format!("http://{addr}"),
            _stop: stop,
        }
    }

    fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }
}

/// `value` pretty-printed in the order the server wrote it, with every UUID
/// named by its first appearance (`[id 1]`, ...), every timestamp `[time]`,
/// the spec hash `[spec hash]` and the loopback address `[address]`.
fn redacted(value: &Value) -> String {
    fn walk(value: &Value, ids: &mut Vec<String>) -> Value {
        match value {
            Value::String(s) if is_uuid(s) => {
                let n = match ids.iter().position(|id| id == s) {
                    Some(i) => i + 1,
                    None => {
                        ids.push(s.clone());
                        ids.len()
                    }
                };
                Value::String(format!("[id {n}]"))
            }
            Value::String(s) if is_time(s) => Value::String("[time]".into()),
            Value::String(s) if s.len() == 64 && s.bytes().all(|b| b.is_ascii_hexdigit()) => {
                Value::String("[spec hash]".into())
            }
            Value::String(s) if s.starts_with("127.0.0.1:") => Value::String("[address]".into()),
            Value::Array(items) => Value::Array(items.iter().map(|v| walk(v, ids)).collect()),
            Value::Object(fields) => Value::Object(
                fields
                    .iter()
                    .map(|(k, v)| (k.clone(), walk(v, ids)))
                    .collect::<Map<_, _>>(),
            ),
            other => other.clone(),
        }
    }
    serde_json::to_string_pretty(&walk(value, &mut Vec::new())).expect("JSON")
}

fn is_uuid(s: &str) -> bool {
    s.len() == 36
        && s.char_indices().all(|(i, c)| match i {
            8 | 13 | 18 | 23 => c == '-',
            _ => c.is_ascii_hexdigit(),
        })
}

fn is_time(s: &str) -> bool {
    let b = s.as_bytes();
    b.len() >= 20 && b[4] == b'-' && b[7] == b'-' && b[10] == b'T' && s.ends_with('Z')
}

/// The snapshots show fields in the order the server sent them only if
/// `serde_json` keeps object order in this build (the runtime turns
/// `preserve_order` on for the whole workspace); make sure it does.
fn assert_order_is_kept() {
    let parsed: Value = serde_json::from_str(r#"{"b": 1, "a": 2}"#).expect("JSON");
    let keys: Vec<&String> = parsed.as_object().expect("object").keys().collect();
    assert_eq!(keys, ["b", "a"], "serde_json must keep object order");
}

/// The body of a response that has `status`.
fn body(status: u16, response: (u16, Value)) -> Value {
    let (got, body) = response;
    assert_eq!(got, status, "{body}");
    body
}

/// The run `run_id` once it has `status` (GET /runs/{id}, polled).
async fn run_reaching(api: &Api, served: &InProcess, run_id: &str, status: &str) -> Value {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        let run = body(200, api.get(&served.url(&format!("/runs/{run_id}"))).await);
        if run["status"] == status {
            return run;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the run never reached {status}: {run}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// A decision whose run resumes through pure steps reports `running` or,
/// when the resume was quicker than the answer, `completed`: either is
/// right. Checked here, then masked so the snapshot pins the shape.
fn mask_resume_status(mut decided: Value) -> Value {
    let status = decided["status"].clone();
    assert!(
        status == "running" || status == "completed",
        "a decision of a resuming run reports running or completed: {decided}"
    );
    decided["status"] = Value::String("[running or completed]".into());
    decided
}

#[tokio::test]
async fn every_response_body_keeps_its_shape() {
    assert_order_is_kept();
    let served = InProcess::start(GATED_SPEC).await;
    let api = Api::new();

    let health = body(200, api.get(&served.url("/healthz")).await);
    insta::assert_snapshot!("health", redacted(&health));

    // 202 {run_id}: the run is stored; its steps run in the background.
    let started = body(
        202,
        api.post(&served.url("/runs"), json!({"input": {"order_id": "A-1"}}))
            .await,
    );
    insta::assert_snapshot!("run_started", redacted(&started));
    let run_id = started["run_id"].as_str().expect("run_id").to_string();

    let run = run_reaching(&api, &served, &run_id, "awaiting_approval").await;
    insta::assert_snapshot!("run_awaiting_approval", redacted(&run));
    let key = run["pending_approval"]["key"]
        .as_str()
        .expect("pending key")
        .to_string();

    let page = body(200, api.get(&served.url("/approvals?limit=1")).await);
    insta::assert_snapshot!("approvals_page", redacted(&page));

    let record = body(
        200,
        api.get(&served.url(&format!("/approvals/{key}"))).await,
    );
    insta::assert_snapshot!("approval_record", redacted(&record));

    let decided = body(
        200,
        api.post(
            &served.url(&format!("/approvals/{key}/approve")),
            json!({"reason": "fine", "payload": {"order": "A-1", "note": "edited"}}),
        )
        .await,
    );
    insta::assert_snapshot!("decision", redacted(&mask_resume_status(decided)));

    // The same decider repeating the same decision (a retry after a lost
    // answer): 200, the stored decision, `repeated: true`.
    let repeated = body(
        200,
        api.post(
            &served.url(&format!("/approvals/{key}/approve")),
            json!({"reason": "fine", "payload": {"order": "A-1", "note": "edited"}}),
        )
        .await,
    );
    insta::assert_snapshot!("decision_repeated", redacted(&mask_resume_status(repeated)));

    let run = run_reaching(&api, &served, &run_id, "completed").await;
    insta::assert_snapshot!("run_completed", redacted(&run));

    // With ?wait=true the decision carries the run at its end.
    let started = body(
        202,
        api.post(&served.url("/runs"), json!({"input": {"order_id": "B-2"}}))
            .await,
    );
    let run_id = started["run_id"].as_str().expect("run_id");
    run_reaching(&api, &served, run_id, "awaiting_approval").await;
    let decided = body(
        200,
        api.post(
            &served.url(&format!("/runs/{run_id}/approve?wait=true")),
            json!({"approved": false, "reason": "no"}),
        )
        .await,
    );
    insta::assert_snapshot!("decision_waited", redacted(&decided));
}

#[tokio::test]
async fn a_webhook_answers_with_the_run_id_and_stores_its_trigger() {
    assert_order_is_kept();
    let served = InProcess::start(&GATED_SPEC.replace(
        "steps:",
        "trigger:\n  webhook:\n    path: /hooks/ship\nsteps:",
    ))
    .await;
    let api = Api::new();
    let started = body(
        202,
        api.post_raw(
            &served.url("/hooks/ship?source=shop&token=leaked"),
            br#"{"order_id": "W1"}"#.to_vec(),
            &[
                ("Content-Type", "application/json"),
                ("Authorization", "Bearer leaked"),
                ("X-Request-Id", "req-1"),
            ],
        )
        .await,
    );
    insta::assert_snapshot!("webhook_started", redacted(&started));
    let run_id = started["run_id"].as_str().expect("run_id");
    let run = run_reaching(&api, &served, run_id, "awaiting_approval").await;
    insta::assert_snapshot!(
        "webhook_trigger",
        redacted(&run["pending_approval"]["trigger"])
    );

    // A run the API starts names its caller.
    let started = body(
        202,
        api.post(&served.url("/runs"), json!({"input": {"order_id": "C-3"}}))
            .await,
    );
    let run_id = started["run_id"].as_str().expect("run_id");
    let run = run_reaching(&api, &served, run_id, "awaiting_approval").await;
    insta::assert_snapshot!("api_trigger", redacted(&run["pending_approval"]["trigger"]));
}

/// Not a hard-coded `running`: a reject whose run ends at once reports the
/// run `rejected`, by key and by run id, as GET /runs/{id} does.
#[tokio::test]
async fn a_decision_reports_the_runs_status_in_the_store() {
    let served = InProcess::start(GATED_SPEC).await;
    let api = Api::new();
    for by_run_id in [false, true] {
        let started = body(
            202,
            api.post(&served.url("/runs"), json!({"input": {"order_id": "C-3"}}))
                .await,
        );
        let run_id = started["run_id"].as_str().expect("run_id").to_string();
        run_reaching(&api, &served, &run_id, "awaiting_approval").await;
        let decided = if by_run_id {
            api.post(
                &served.url(&format!("/runs/{run_id}/approve")),
                json!({"approved": false}),
            )
            .await
        } else {
            let (_, page) = api.get(&served.url("/approvals")).await;
            let key = page["approvals"][0]["key"]
                .as_str()
                .expect("key")
                .to_string();
            api.post(&served.url(&format!("/approvals/{key}/reject")), json!({}))
                .await
        };
        let decided = body(200, decided);
        assert_eq!(decided["approval"]["status"], "REJECTED", "{decided}");
        assert_eq!(decided["status"], "rejected", "{decided}");
        assert_eq!(decided.get("run"), None, "no run without ?wait: {decided}");
        let (_, run) = api.get(&served.url(&format!("/runs/{run_id}"))).await;
        assert_eq!(run["status"], decided["status"], "{run}");
    }

    // An approve reports the run as the store has it: running while it
    // resumes or, once the resume is done, completed; with ?wait=true it
    // is read at the run's end.
    let started = body(
        202,
        api.post(&served.url("/runs"), json!({"input": {"order_id": "C-3"}}))
            .await,
    );
    let run_id = started["run_id"].as_str().expect("run_id");
    run_reaching(&api, &served, run_id, "awaiting_approval").await;
    let decided = body(
        200,
        api.post(
            &served.url(&format!("/runs/{run_id}/approve?wait=true")),
            json!({"approved": true}),
        )
        .await,
    );
    assert_eq!(decided["status"], "completed", "{decided}");
    assert_eq!(decided["run"]["status"], "completed", "{decided}");
}

/// A resume that calls out is at work when the answer is made: `running`,
/// and the run goes on to its end.
#[tokio::test]
async fn a_decision_reports_running_while_the_resume_calls_out() {
    let stub = StubServer::start(|_| http::created().delayed(Duration::from_millis(300)));
    let served = InProcess::start(&http::gated_post_spec(&stub.url("/refunds"), "")).await;
    let api = Api::new();
    let started = body(
        202,
        api.post(
            &served.url("/runs"),
            json!({"input": {"order_id": "A-1", "amount": 30}}),
        )
        .await,
    );
    let run_id = started["run_id"].as_str().expect("run_id");
    run_reaching(&api, &served, run_id, "awaiting_approval").await;
    let decided = body(
        200,
        api.post(
            &served.url(&format!("/runs/{run_id}/approve")),
            json!({"approved": true}),
        )
        .await,
    );
    assert_eq!(decided["status"], "running", "{decided}");
    run_reaching(&api, &served, run_id, "completed").await;
    assert_eq!(stub.count(), 1);
}

/// A run id decides the run's latest approval (found by the store, not in
/// the run's events): each gate in turn, then the last one answers a repeat
/// with itself and another decision with `already_resolved`; a run that
/// never paused has none.
#[tokio::test]
async fn a_decision_by_run_id_takes_the_runs_latest_approval() {
    let two_gates = GATED_SPEC.replace(
        "  - id: act\n",
        "  - id: second\n    approval:\n      message: \"Really ship?\"\n  - id: act\n",
    );
    let served = InProcess::start(&two_gates).await;
    let api = Api::new();
    // Each call waits for the run's next pause: a 202 answers once the run
    // is stored, before its steps reach the gate, and a run id names the
    // latest gate reached so far.
    let started = body(
        200,
        api.post(
            &served.url("/runs?wait=true"),
            json!({"input": {"order_id": "D-4"}}),
        )
        .await,
    );
    assert_eq!(started["status"], "awaiting_approval", "{started}");
    let run_id = started["id"].as_str().expect("run id");
    let approve_url = served.url(&format!("/runs/{run_id}/approve"));
    let wait_url = format!("{approve_url}?wait=true");
    let first = body(200, api.post(&wait_url, json!({"approved": true})).await);
    assert_eq!(first["approval"]["step_id"], "gate", "{first}");
    assert_eq!(first["status"], "awaiting_approval", "{first}");
    let second = body(200, api.post(&wait_url, json!({"approved": true})).await);
    assert_eq!(second["approval"]["step_id"], "second", "{second}");
    assert_eq!(second["status"], "completed", "{second}");
    // The same decision again is a repeat of the one that won the last gate;
    // another decision is told that gate is resolved.
    let repeated = body(200, api.post(&approve_url, json!({"approved": true})).await);
    assert_eq!(repeated["repeated"], true, "{repeated}");
    assert_eq!(repeated["approval"]["key"], second["approval"]["key"]);
    let (status, again) = api.post(&approve_url, json!({"approved": false})).await;
    assert_eq!((status, server::code(&again)), (409, "already_resolved"));
    let second_key = second["approval"]["key"].as_str().expect("key");
    let message = again["error"]["message"].as_str().expect("message");
    assert!(message.contains(second_key), "{message}");

    let ungated = InProcess::start(
        "version: 1\nagent: no-gate\nsteps:\n  - id: only\n    set: { done: true }\n",
    )
    .await;
    let started = body(202, api.post(&ungated.url("/runs"), json!({})).await);
    let run_id = started["run_id"].as_str().expect("run_id");
    let (status, refused) = api
        .post(
            &ungated.url(&format!("/runs/{run_id}/approve")),
            json!({"approved": true}),
        )
        .await;
    assert_eq!(
        (status, server::code(&refused)),
        (404, "approval_not_found")
    );
}
