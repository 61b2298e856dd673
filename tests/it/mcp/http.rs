//! `/mcp` on a real `tollgate serve`, through the official MCP Python
//! client (and, for the transport's refusals, raw HTTP).

use serde_json::{Value, json};

use super::{DESK_SPEC, PythonRun, TOKENS, client_script};
use crate::common::Workspace;
use crate::common::server::{Api, Served};

fn serve(ws: &Workspace) -> Served {
    Served::start(
        &ws.spec,
        &ws.state_db(),
        &[("TOLLGATE_API_TOKENS", TOKENS)],
        &[],
    )
}

fn script(served: &Served, command: &str, token: Option<&str>) -> PythonRun {
    let url = served.url("/mcp");
    let mut args = vec![command, url.as_str()];
    args.extend(token);
    PythonRun::start(&client_script(), &args, &[])
}

#[test]
fn the_tools_are_listed_with_self_contained_schemas() {
    let ws = Workspace::new(DESK_SPEC);
    let served = serve(&ws);
    let mut client = script(&served, "list", Some("tok-bot"));
    let listed = client.next_json();
    assert_eq!(listed["protocol"], "2025-06-18", "{listed}");
    let tools = listed["tools"].as_array().unwrap();
    let names: Vec<&str> = tools.iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert_eq!(
        names,
        [
            "request_approval",
            "wait_for_approval",
            "get_approval",
            "cancel_approval"
        ]
    );
    let request = &tools[0]["inputSchema"];
    assert_eq!(
        request["required"],
        json!(["message", "payload"]),
        "{request}"
    );
    for argument in ["ttl", "step", "requester", "idempotency_key", "policy"] {
        assert!(request["properties"].get(argument).is_some(), "{argument}");
    }
    assert_eq!(tools[1]["inputSchema"]["required"], json!(["key"]));
    assert!(tools[1]["inputSchema"]["properties"]["timeout_seconds"].is_object());
    for tool in tools {
        let output = &tool["outputSchema"];
        for field in [
            "key",
            "state",
            "approved",
            "decision",
            "payload",
            "expires_at",
        ] {
            assert!(
                output["properties"].get(field).is_some(),
                "{field}: {output}"
            );
        }
        // MCP clients resolve no references: every schema stands alone.
        assert!(!tool.to_string().contains("$ref"), "{tool}");
    }
    let (code, stderr) = client.finish();
    assert_eq!(code, Some(0), "{stderr}");
}

#[test]
fn a_wait_returns_the_decision_made_by_another_process() {
    let ws = Workspace::new(DESK_SPEC);
    let served = serve(&ws);
    let mut client = script(&served, "ask-and-wait", Some("tok-bot"));
    let asked = client.next_json();
    let key = asked["asked"]["key"].as_str().expect("a key").to_string();
    assert_eq!(asked["asked"]["state"], "pending");
    assert_eq!(asked["asked"]["requested_by"], "bot");
    // The client waits now; the CLI decides, from its own process.
    let out = ws
        .decide("approve", &key)
        .args(["--state", ws.state_db().to_str().unwrap(), "--by", "alice"])
        .output()
        .expect("run tollgate");
    crate::common::assert_success(&out);
    let last = client.next_json();
    let last = &last["final"];
    assert_eq!(last["state"], "decided", "{last}");
    assert_eq!(last["approved"], true);
    assert_eq!(last["decision"]["outcome"], "approved");
    assert_eq!(last["decision"]["by"], "alice");
    assert_eq!(last["decision"]["payload"], json!({ "cents": 500 }));
    let (code, stderr) = client.finish();
    assert_eq!(code, Some(0), "{stderr}");
}

#[tokio::test]
async fn a_bad_argument_is_a_json_rpc_error_naming_it_and_stores_nothing() {
    let ws = Workspace::new(DESK_SPEC);
    let served = serve(&ws);
    let mut client = script(&served, "bad-arguments", Some("tok-bot"));
    let ttl = client.next_json();
    assert_eq!(ttl["code"], -32602, "{ttl}");
    assert_eq!(
        ttl["message"],
        "request_approval: ttl must be a string or null, not a number"
    );
    let missing = client.next_json();
    assert_eq!(missing["code"], -32602, "{missing}");
    assert!(
        missing["message"]
            .as_str()
            .unwrap()
            .starts_with("request_approval: missing required argument message"),
        "{missing}"
    );
    let unknown = client.next_json();
    assert_eq!(unknown["code"], -32602, "{unknown}");
    assert!(
        unknown["message"]
            .as_str()
            .unwrap()
            .contains("unknown tool \"approve\"")
    );
    // Not found is the tool's answer, with the API's error code.
    let not_found = client.next_json();
    assert_eq!(not_found["is_error"], true, "{not_found}");
    let error: Value = serde_json::from_str(not_found["text"].as_str().unwrap()).unwrap();
    assert_eq!(error["error"]["code"], "approval_not_found");
    let (code, stderr) = client.finish();
    assert_eq!(code, Some(0), "{stderr}");

    let (status, listed) = Api::with_token("tok-alice")
        .get(&served.url("/approvals"))
        .await;
    assert_eq!(status, 200, "{listed}");
    assert_eq!(listed["approvals"], json!([]), "nothing was stored");
}

/// Before, `request_approval` with `policy.on_timeout: approve` and a
/// short ttl was stored, and read `approved: true, by: timeout` once its
/// time ran out: no person decided. Now the service refuses it, naming
/// the field, and stores nothing.
#[tokio::test]
async fn a_request_that_would_approve_itself_is_refused_naming_the_field() {
    let ws = Workspace::new(DESK_SPEC);
    let served = serve(&ws);
    let mut client = script(&served, "overreach", Some("tok-bot"));
    for field in ["policy.on_timeout", "policy.allow_self_approval"] {
        let answer = client.next_json();
        assert_eq!(answer["is_error"], true, "{answer}");
        let error: Value = serde_json::from_str(answer["text"].as_str().unwrap()).unwrap();
        assert_eq!(error["error"]["code"], "invalid_request", "{error}");
        let message = error["error"]["message"].as_str().unwrap();
        assert!(message.starts_with(field), "{message}");
    }
    let (code, stderr) = client.finish();
    assert_eq!(code, Some(0), "{stderr}");
    let (status, listed) = Api::with_token("tok-alice")
        .get(&served.url("/approvals"))
        .await;
    assert_eq!(status, 200, "{listed}");
    assert_eq!(listed["approvals"], json!([]), "nothing was stored");
}

#[tokio::test]
async fn a_missing_or_wrong_token_is_401() {
    let ws = Workspace::new(DESK_SPEC);
    let served = serve(&ws);
    let mut client = script(&served, "no-token", None);
    let refused = client.next_json();
    // The client fails with its own error for the 401 (its words); the
    // status and the challenge are checked below, raw.
    assert!(
        refused["refused"][0]
            .as_str()
            .is_some_and(|e| e.starts_with("MCPError")),
        "the client must fail: {refused}"
    );
    drop(client);

    let http = reqwest::Client::new();
    for token in [None, Some("wrong")] {
        let mut request = http
            .post(served.url("/mcp"))
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .body(r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#);
        if let Some(token) = token {
            request = request.bearer_auth(token);
        }
        let response = request.send().await.unwrap();
        assert_eq!(response.status(), 401, "{token:?}");
        let challenge = response.headers()["www-authenticate"].to_str().unwrap();
        assert!(challenge.starts_with("Bearer"), "{challenge}");
    }
}

/// POST `body` to /mcp with the requester token and `headers`.
async fn post(served: &Served, body: &str, headers: &[(&str, &str)]) -> (u16, String, Value) {
    let mut request = reqwest::Client::new()
        .post(served.url("/mcp"))
        .bearer_auth("tok-bot")
        .body(body.to_string());
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let response = request.send().await.unwrap();
    let status = response.status().as_u16();
    let content_type = response
        .headers()
        .get("content-type")
        .map(|v| v.to_str().unwrap().to_string())
        .unwrap_or_default();
    let text = response.text().await.unwrap();
    let body = serde_json::from_str(&text).unwrap_or(Value::String(text));
    (status, content_type, body)
}

const JSON: (&str, &str) = ("content-type", "application/json");
const ACCEPT: (&str, &str) = ("accept", "application/json, text/event-stream");
const PING: &str = r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#;

#[tokio::test]
async fn a_page_of_another_origin_is_refused() {
    let ws = Workspace::new(DESK_SPEC);
    let served = serve(&ws);
    let (status, _, body) = post(
        &served,
        PING,
        &[JSON, ACCEPT, ("origin", "https://evil.example")],
    )
    .await;
    assert_eq!(status, 403, "{body}");
    assert_eq!(body["error"]["code"], "forbidden_origin");
    // The server's own origin passes.
    let own = served.base.clone();
    let (status, _, body) = post(&served, PING, &[JSON, ACCEPT, ("origin", own.as_str())]).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body, json!({"jsonrpc": "2.0", "id": 1, "result": {}}));
}

#[tokio::test]
async fn the_transport_answers_as_streamable_http_says() {
    let ws = Workspace::new(DESK_SPEC);
    let served = serve(&ws);
    // A request: JSON, and no session id (the server is stateless).
    let response = reqwest::Client::new()
        .post(served.url("/mcp"))
        .bearer_auth("tok-bot")
        .header(JSON.0, JSON.1)
        .header(ACCEPT.0, ACCEPT.1)
        .body(r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-03-26","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    assert!(response.headers().get("mcp-session-id").is_none());
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["result"]["protocolVersion"], "2025-03-26");
    assert_eq!(body["result"]["serverInfo"]["name"], "tollgate");

    // A notification: 202, no body.
    let (status, _, body) = post(
        &served,
        r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
        &[JSON, ACCEPT],
    )
    .await;
    assert_eq!((status, body), (202, Value::String(String::new())));

    // A version header we do not speak: 400, a JSON-RPC error.
    let (status, content_type, body) = post(
        &served,
        PING,
        &[JSON, ACCEPT, ("mcp-protocol-version", "1999-01-01")],
    )
    .await;
    assert_eq!(status, 400, "{body}");
    assert!(content_type.starts_with("application/json"));
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("1999-01-01"),
        "{body}"
    );
    let (status, _, _) = post(
        &served,
        PING,
        &[JSON, ACCEPT, ("mcp-protocol-version", "2025-03-26")],
    )
    .await;
    assert_eq!(status, 200);

    // Not JSON: a parse error. An unknown method: -32601.
    let (status, _, body) = post(&served, "{nope", &[JSON, ACCEPT]).await;
    assert_eq!(
        (status, &body["error"]["code"]),
        (400, &json!(-32700)),
        "{body}"
    );
    let (status, _, body) = post(
        &served,
        r#"{"jsonrpc":"2.0","id":9,"method":"resources/list"}"#,
        &[JSON, ACCEPT],
    )
    .await;
    assert_eq!(
        (status, &body["error"]["code"]),
        (200, &json!(-32601)),
        "{body}"
    );

    // Not JSON content, or an Accept without JSON: refused before reading.
    let (status, _, _) = post(&served, PING, &[("content-type", "text/plain"), ACCEPT]).await;
    assert_eq!(status, 415);
    let (status, _, _) = post(&served, PING, &[JSON, ("accept", "text/event-stream")]).await;
    assert_eq!(status, 406);

    // No stream from the server and no session to end.
    let api = Api::with_token("tok-bot");
    let (status, _) = api.get(&served.url("/mcp")).await;
    assert_eq!(status, 405);
    let response = api
        .http
        .delete(served.url("/mcp"))
        .bearer_auth("tok-bot")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 405);
}
