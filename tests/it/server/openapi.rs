//! GET /openapi.json on a real `tollgate serve`: an OpenAPI 3.1 document
//! that a real validator (openapi-spec-validator) accepts, that names every
//! route the server answers (and no method it does not), the spec's webhook
//! and each gate's payload; and that the server's live answers, successes
//! and failures alike, conform to the schemas it gives for them.
//!
//! The validator is Python's `openapi-spec-validator`, from a venv at
//! `target/openapi-venv` the first test creates (or the interpreter in
//! `TOLLGATE_OPENAPI_PYTHON`; see `common::openapi`). That the
//! document lists exactly the router's routes is a unit test beside the
//! router (`routes/openapi.rs`), which reads its `.route(...)` lines.

use crate::common;
use crate::common::server;
use crate::common::slack_stub;

use common::Workspace;
use serde_json::{Value, json};
use server::{Api, Served, code};
use tollgate_runtime::server::openapi::schema_errors;
use tollgate_runtime::server::signature;

const TOKEN: &str = "ops-token-5150";
/// The agent's token: it starts the runs that `ops` decides (whoever
/// starts a run may not decide its gates).
const AGENT_TOKEN: &str = "agent-token-5150";
const HOOK_SECRET: &str = "hook-secret-openapi";

/// Gates of every kind the spec can state a payload for, a signed
/// webhook and Slack (so /slack/actions is live, not a 404).
const SPEC: &str = r##"version: 1
agent: openapi-desk
description: Refund orders, asking a person first.
trigger:
  webhook:
    path: /hooks/orders
    secret: ${HOOK_SECRET}
approvals:
  notify:
    slack:
      bot_token: ${SLACK_BOT_TOKEN}
      channel: "#refunds"
      signing_secret: ${SLACK_SIGNING_SECRET}
tools:
  refund:
    http:
      method: POST
      url: "http://127.0.0.1:9/refunds"
    approval: required
steps:
  - id: draft
    set: { amount: "{{ input.amount | default(5) }}" }
  - id: confirm
    approval:
      message: "Refund {{ steps.draft.output.amount }}?"
      payload: { order: "{{ input.order }}", note: "order {{ input.order }}", tries: 3 }
  - id: pay
    tool: refund
    with: { order: "{{ input.order }}", amount: "{{ steps.draft.output.amount }}" }
"##;

struct Live {
    ws: Workspace,
    _slack: common::stub_server::StubServer,
    served: Served,
    api: Api,
    agent: Api,
    document: Value,
}

impl Live {
    /// A server with bearer tokens on, and its document, fetched without one.
    async fn start() -> Live {
        let slack = slack_stub::start_api();
        let ws = Workspace::new(SPEC);
        let mut env = slack_stub::env(slack.port);
        env.push(("HOOK_SECRET", HOOK_SECRET.to_string()));
        env.push((
            "TOLLGATE_API_TOKENS",
            format!("ops:{TOKEN},agent:{AGENT_TOKEN}"),
        ));
        let served = Served::start(
            &ws.spec,
            &ws.path().join("state.db"),
            &slack_stub::env_refs(&env),
            &[],
        );
        let (status, document) = Api::new().get(&served.url("/openapi.json")).await;
        assert_eq!(
            status, 200,
            "no token is needed for the document: {document}"
        );
        Live {
            ws,
            _slack: slack,
            served,
            api: Api::with_token(TOKEN),
            agent: Api::with_token(AGENT_TOKEN),
            document,
        }
    }

    /// The schema the document gives for `status` of `method path`
    /// (`path` as a template, e.g. `/runs/{id}`): its own entry or `default`.
    fn schema(&self, method: &str, path: &str, status: u16) -> &Value {
        let responses = &self.document["paths"][path][method]["responses"];
        assert!(
            responses.is_object(),
            "{method} {path} is not in the document"
        );
        let response = match &responses[status.to_string()] {
            Value::Null => &responses["default"],
            listed => listed,
        };
        let schema = &response["content"]["application/json"]["schema"];
        assert!(
            schema.is_object(),
            "{method} {path} {status}: no JSON schema in {response}"
        );
        schema
    }

    /// `answer` (status, body) to `method path` conforms to the document.
    fn holds(&self, method: &str, path: &str, answer: &(u16, Value)) {
        let (status, body) = answer;
        let errors = schema_errors(&self.document, self.schema(method, path, *status), body);
        assert!(
            errors.is_empty(),
            "{method} {path} answered {status} {body}\nwhich breaks the document: {errors:#?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn the_document_is_openapi_3_1_and_a_real_validator_accepts_it() {
    let live = Live::start().await;
    let doc = &live.document;
    assert_eq!(doc["openapi"], "3.1.0");
    assert_eq!(doc["info"]["title"], "openapi-desk");
    assert_eq!(
        doc["components"]["securitySchemes"]["bearer"]["type"],
        "http"
    );
    assert_eq!(
        doc["components"]["securitySchemes"]["bearer"]["scheme"],
        "bearer"
    );
    assert_eq!(doc["security"], json!([{ "bearer": [] }]));
    for public in ["/healthz", "/openapi.json"] {
        assert_eq!(
            doc["paths"][public]["get"]["security"],
            json!([]),
            "{public}"
        );
    }
    // The spec's webhook, signed, and each gate's payload.
    let hook = &doc["paths"]["/hooks/orders"]["post"];
    assert_eq!(hook["security"], json!([]));
    assert!(
        hook["parameters"]
            .to_string()
            .contains("X-Tollgate-Signature")
    );
    let schemas = &doc["components"]["schemas"];
    assert_eq!(
        schemas["GatePayload.confirm"]["required"],
        json!(["order", "note", "tries"])
    );
    assert_eq!(
        schemas["GatePayload.confirm"]["properties"]["note"]["type"],
        "string"
    );
    assert_eq!(
        schemas["GatePayload.pay"]["required"],
        json!(["order", "amount"])
    );
    assert!(schemas.get("GatePayload.draft").is_none());
    let codes = schemas["Error"]["properties"]["error"]["properties"]["code"]["enum"].to_string();
    for expected in [
        "run_not_found",
        "already_resolved",
        "unauthorized",
        "invalid_request",
    ] {
        assert!(codes.contains(expected), "{expected} in {codes}");
    }

    let file = tempfile::NamedTempFile::new().expect("temp file");
    std::fs::write(file.path(), serde_json::to_vec_pretty(doc).unwrap()).unwrap();
    common::openapi::validate(file.path());
}

/// Every operation of the document is answered by its route (not by the
/// router's `not_found` or `method_not_allowed`), and every other method
/// on a documented path is `method_not_allowed`: the document lists each
/// path's methods, all of them.
#[tokio::test(flavor = "multi_thread")]
async fn every_documented_operation_is_routed_and_no_other_method_is() {
    let live = Live::start().await;
    let paths = live.document["paths"].as_object().expect("paths");
    assert!(paths.len() >= 15, "{:?}", paths.keys().collect::<Vec<_>>());
    let http = reqwest::Client::new();
    for (template, operations) in paths {
        let path = template
            .split('/')
            .map(|s| {
                if s.starts_with('{') {
                    "no-such-thing"
                } else {
                    s
                }
            })
            .collect::<Vec<_>>()
            .join("/");
        let documented: Vec<&str> = operations
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        for method in ["get", "post", "put", "patch", "delete"] {
            let request = http
                .request(
                    method.to_uppercase().parse().unwrap(),
                    live.served.url(&path),
                )
                .bearer_auth(TOKEN)
                .header("content-type", "application/json")
                .body("{}");
            let response = request.send().await.expect("request");
            let status = response.status().as_u16();
            let body: Value = response.json().await.unwrap_or(Value::Null);
            let routed = !matches!(code(&body), "not_found" | "method_not_allowed");
            assert_eq!(
                routed,
                documented.contains(&method),
                "{method} {path}: {status} {body}"
            );
        }
    }
}

/// Answers of every route, successes and failures, against the document.
#[tokio::test(flavor = "multi_thread")]
async fn live_answers_conform_to_the_documented_schemas() {
    let live = Live::start().await;
    let (api, agent, served) = (&live.api, &live.agent, &live.served);
    let url = |p: &str| served.url(p);

    let started = agent
        .post(&url("/runs"), json!({ "input": { "order": "A1" } }))
        .await;
    assert_eq!(started.0, 202, "{:?}", started.1);
    live.holds("post", "/runs", &started);
    let waited = agent
        .post(
            &url("/runs?wait=true"),
            json!({ "input": { "order": "A2", "amount": 7 } }),
        )
        .await;
    assert_eq!(waited.0, 200, "{:?}", waited.1);
    live.holds("post", "/runs", &waited);
    let run_id = waited.1["id"].as_str().unwrap().to_string();
    let key = waited.1["pending_approval"]["key"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(waited.1["pending_approval"]["step_id"], "confirm");

    live.holds("get", "/runs", &api.get(&url("/runs?limit=1")).await);
    live.holds(
        "get",
        "/runs/{id}",
        &api.get(&url(&format!("/runs/{run_id}"))).await,
    );
    live.holds("get", "/approvals", &api.get(&url("/approvals")).await);
    live.holds(
        "get",
        "/approvals/{key}",
        &api.get(&url(&format!("/approvals/{key}"))).await,
    );

    // The agent that started the run may not decide it: 403 forbidden,
    // in the error shape.
    let own = agent
        .post(&url(&format!("/approvals/{key}/approve")), json!({}))
        .await;
    assert_eq!((own.0, code(&own.1)), (403, "forbidden"), "{:?}", own.1);
    live.holds("post", "/approvals/{key}/approve", &own);

    // Approve with an edit, waiting: the run pauses again at the tool gate.
    let decided = api
        .post(
            &url(&format!("/approvals/{key}/approve?wait=true")),
            json!({ "reason": "fine", "payload": { "order": "A2", "note": "edited", "tries": 1 } }),
        )
        .await;
    assert_eq!(decided.0, 200, "{:?}", decided.1);
    live.holds("post", "/approvals/{key}/approve", &decided);
    let at_tool = &decided.1["run"]["pending_approval"];
    assert_eq!(at_tool["step_id"], "pay", "{}", decided.1);
    live.holds("get", "/approvals", &api.get(&url("/approvals")).await);
    // The same decision again: 409 already_resolved, in the error shape.
    let again = api
        .post(
            &url(&format!("/approvals/{key}/reject")),
            json!({ "reason": "late" }),
        )
        .await;
    assert_eq!(
        (again.0, code(&again.1)),
        (409, "already_resolved"),
        "{:?}",
        again.1
    );
    live.holds("post", "/approvals/{key}/reject", &again);

    // Reject the tool gate by run id.
    let rejected = api
        .post(
            &url(&format!("/runs/{run_id}/approve")),
            json!({ "approved": false, "reason": "no" }),
        )
        .await;
    assert_eq!(rejected.0, 200, "{:?}", rejected.1);
    live.holds("post", "/runs/{id_or_key}/approve", &rejected);

    // A batch: each entry's result (here both refused), and a malformed
    // batch in the error shape.
    let batch = api
        .post(
            &url("/approvals/batch"),
            json!({ "decisions": [
                { "key": key, "decision": "approve" },
                { "key": "no-such-key", "decision": "reject", "reason": "x" },
            ] }),
        )
        .await;
    assert_eq!(batch.0, 200, "{:?}", batch.1);
    assert_eq!(batch.1["results"][1]["error"]["code"], "approval_not_found");
    live.holds("post", "/approvals/batch", &batch);
    let empty = api
        .post(&url("/approvals/batch"), json!({ "decisions": [] }))
        .await;
    assert_eq!((empty.0, code(&empty.1)), (400, "invalid_request"));
    live.holds("post", "/approvals/batch", &empty);

    // Cancel a waiting run; retry and fail a run that is not stuck (409).
    let first = started.1["run_id"].as_str().unwrap();
    api.wait_for_status(served, first, "awaiting_approval")
        .await;
    let cancelled = api
        .post(
            &url(&format!("/runs/{first}/cancel")),
            json!({ "reason": "dup" }),
        )
        .await;
    assert_eq!(cancelled.0, 200, "{:?}", cancelled.1);
    live.holds("post", "/runs/{id}/cancel", &cancelled);
    let retry = api
        .post(&url(&format!("/runs/{first}/retry")), json!({}))
        .await;
    assert_eq!(retry.0, 409, "{:?}", retry.1);
    live.holds("post", "/runs/{id}/retry", &retry);
    let fail = api
        .post(
            &url(&format!("/runs/{first}/fail")),
            json!({ "reason": "x" }),
        )
        .await;
    assert_eq!(fail.0, 409, "{:?}", fail.1);
    live.holds("post", "/runs/{id}/fail", &fail);

    // Failures of other kinds.
    let missing = api.get(&url("/runs/no-such-run")).await;
    assert_eq!((missing.0, code(&missing.1)), (404, "run_not_found"));
    live.holds("get", "/runs/{id}", &missing);
    let bad = api.post(&url("/runs"), json!({ "inputs": {} })).await;
    assert_eq!((bad.0, code(&bad.1)), (400, "invalid_request"));
    live.holds("post", "/runs", &bad);
    let no_token = Api::new().get(&url("/approvals")).await;
    assert_eq!((no_token.0, code(&no_token.1)), (401, "unauthorized"));
    live.holds("get", "/approvals", &no_token);
    let unsigned = Api::new()
        .post_raw(&url("/slack/actions"), b"payload=%7B%7D".to_vec(), &[])
        .await;
    assert_eq!(
        (unsigned.0, code(&unsigned.1)),
        (401, "unauthorized"),
        "{:?}",
        unsigned.1
    );
    live.holds("post", "/slack/actions", &unsigned);

    // The webhook, signed.
    let body = br#"{"order": "W1"}"#;
    let signed = signature::sign(HOOK_SECRET.as_bytes(), body);
    let hooked = Api::new()
        .post_raw(
            &url("/hooks/orders"),
            body.to_vec(),
            &[("X-Tollgate-Signature", &signed)],
        )
        .await;
    assert_eq!(hooked.0, 202, "{:?}", hooked.1);
    live.holds("post", "/hooks/orders", &hooked);
    let forged = Api::new()
        .post_raw(
            &url("/hooks/orders"),
            body.to_vec(),
            &[("X-Tollgate-Signature", "sha256=00")],
        )
        .await;
    assert_eq!(forged.0, 401, "{:?}", forged.1);
    live.holds("post", "/hooks/orders", &forged);

    live.holds("get", "/healthz", &Api::new().get(&url("/healthz")).await);
    let doc = Api::new().get(&url("/openapi.json")).await;
    live.holds("get", "/openapi.json", &doc);
}

/// `tollgate export` writes `openapi.json`: the document a server of the
/// same spec serves, to the byte once parsed.
#[tokio::test(flavor = "multi_thread")]
async fn the_export_writes_the_document_the_server_serves() {
    let live = Live::start().await;
    let plan = tollgate::export::command::plan_for(&live.ws.spec).expect("the spec exports");
    let file = plan
        .get("openapi.json")
        .expect("the export has openapi.json");
    assert_eq!(file.role, tollgate::export::Role::Generated);
    let written: Value = serde_json::from_slice(&file.bytes).expect("openapi.json is JSON");
    assert_eq!(written, live.document);
    assert!(
        file.bytes.ends_with(b"}\n"),
        "pretty-printed, one final newline"
    );
}
