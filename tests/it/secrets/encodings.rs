//! Secrets echoed back encoded: a downstream that returns a secret it was
//! sent in any common encoding (URL-encoded, base64, hex, JSON-escaped,
//! another letter case, an equal JSON number, inside a `Basic` blob) gets
//! none of those forms into any sink: the SQLite file (db and -wal), the
//! event stream, `GET /runs/{id}`, `GET /approvals` and the server's log,
//! including its `run failed` line. A model key echoed in a model's output
//! never becomes an approval payload; Slack's answer quoting the bot token
//! is not kept in the failure record; a custom tool's output is redacted
//! like an HTTP reply.

use crate::common;
use crate::common::model_stub;
use crate::common::server;
use crate::common::slack_stub;
use crate::common::stub_server;

use std::time::Duration;

use common::{Workspace, contains_bytes, sqlite_bytes};
use serde_json::{Value, json};
use server::{Api, Served, SseNext, SseStream};
use stub_server::{Request, Response, StubServer};

/// Each secret holds characters every encoding treats differently.
const TOKEN: &str = "Tk/9+q\"z\\Ünï 7&x=y#Qm%";
const PIN: &str = "4815162342";
const MODEL_KEY: &str = "sk-Mdl/key+With\"Odd\\chars";
/// Header values are ASCII: the Slack token has the ASCII specials only.
const SLACK_TOKEN: &str = "xoxb-Slk/tok+en\"q\\9 z&w=1";

fn base64(bytes: &[u8], url_safe: bool, pad: bool) -> String {
    use base64::Engine as _;
    use base64::engine::general_purpose::{STANDARD, STANDARD_NO_PAD, URL_SAFE, URL_SAFE_NO_PAD};
    match (url_safe, pad) {
        (false, true) => STANDARD.encode(bytes),
        (false, false) => STANDARD_NO_PAD.encode(bytes),
        (true, true) => URL_SAFE.encode(bytes),
        (true, false) => URL_SAFE_NO_PAD.encode(bytes),
    }
}

fn percent(text: &str, keep: &str, space_plus: bool, lower: bool) -> String {
    let mut out = String::new();
    for b in text.bytes() {
        if b.is_ascii_alphanumeric() || keep.as_bytes().contains(&b) {
            out.push(char::from(b));
        } else if b == b' ' && space_plus {
            out.push('+');
        } else if lower {
            out.push_str(&format!("%{b:02x}"));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Every form the README promises to redact, written the way common
/// libraries write it.
fn forms(secret: &str) -> Vec<String> {
    let bytes = secret.as_bytes();
    let serde = serde_json::to_string(secret).unwrap();
    // JSON with every non-alphanumeric character escaped, in both cases of
    // hex digit (serializers differ).
    let ascii_json = |upper: bool| -> String {
        secret
            .chars()
            .map(|c| match c {
                '"' => "\\\"".to_string(),
                '\\' => "\\\\".to_string(),
                '/' => "\\/".to_string(),
                c if c.is_ascii_alphanumeric() => c.to_string(),
                c if upper => format!("\\u{:04X}", c as u32),
                c => format!("\\u{:04x}", c as u32),
            })
            .collect()
    };
    let mut forms = vec![
        secret.to_string(),
        secret.to_uppercase(),
        secret.to_lowercase(),
        percent(secret, "-._~", false, false),
        percent(secret, "-._~", false, true),
        percent(secret, "*-._", true, false),
        percent(secret, "-._~!*'()", false, false),
        percent(secret, "-._~!*'()", false, true),
        serde[1..serde.len() - 1].to_string(),
        ascii_json(false),
        ascii_json(true),
        hex(bytes),
        hex(bytes).to_uppercase(),
    ];
    for url_safe in [false, true] {
        for pad in [false, true] {
            forms.push(base64(bytes, url_safe, pad));
        }
    }
    forms.dedup();
    forms
}

/// [`forms`], plus the secret base64-encoded inside a longer blob (a
/// `Basic` credential) at each of the three alignments.
fn echoed_forms(secret: &str) -> Vec<String> {
    let mut forms = forms(secret);
    for user in ["u", "us", "usr"] {
        forms.push(base64(format!("{user}:{secret}").as_bytes(), false, true));
    }
    forms
}

/// The redactor alone, before any sink: each form, inside other text, is
/// replaced whole.
#[test]
fn the_redactor_replaces_every_form_inside_other_text() {
    for secret in [TOKEN, PIN, MODEL_KEY, SLACK_TOKEN] {
        let redactor = tollgate_runtime::secrets::Redactor::new(vec![secret.to_string()]);
        for form in forms(secret) {
            assert_eq!(
                redactor.text(&format!("echo: <{form}> done")),
                "echo: <[redacted]> done",
                "{secret:?} as {form:?}"
            );
        }
    }
}

fn all_forms() -> Vec<(String, String)> {
    let mut all = Vec::new();
    for (name, secret) in [
        ("SHOP_TOKEN", TOKEN),
        ("SHOP_PIN", PIN),
        ("MODEL_API_KEY", MODEL_KEY),
    ] {
        for form in echoed_forms(secret) {
            all.push((name.to_string(), form));
        }
    }
    all
}

/// What the downstream echoes: every form of every secret it was sent.
fn echo_forms(secrets: &[&str]) -> Vec<String> {
    secrets.iter().flat_map(|s| echoed_forms(s)).collect()
}

/// The echo API: it reads the secrets from the request (nothing is told to
/// it in advance) and sends every form back.
fn downstream(req: &Request) -> Response {
    let sent = req.json();
    let token = sent["token"].as_str().unwrap_or("").to_string();
    let pin = sent["pin"].as_str().unwrap_or("").to_string();
    let key = req
        .header("authorization")
        .and_then(|a| a.strip_prefix("Bearer "))
        .unwrap_or("")
        .to_string();
    match req.path() {
        "/text" => Response::text(200, &echo_forms(&[&token, &pin]).join("\n")),
        "/json" => {
            let keyed: serde_json::Map<String, Value> = echo_forms(&[&token])
                .into_iter()
                .map(|f| (f, json!(1)))
                .collect();
            let number: u64 = pin.parse().unwrap_or(0);
            Response::json(
                200,
                json!({
                    "forms": echo_forms(&[&token, &pin]),
                    "keyed": keyed,
                    "pin": number,
                    "pin_float": number as f64,
                    "pin_text": json!({"pin": number}).to_string(),
                    "nested": json!({"token": token}).to_string(),
                }),
            )
        }
        "/v1/chat/completions" => {
            model_stub::json_reply(json!({"confidence": 0.1, "echo": echo_forms(&[&key])}))
        }
        _ => {
            // A failure quoting the secrets: the run's error and its log line.
            let mut quoted = echo_forms(&[&token, &pin]);
            quoted.rotate_left(3);
            Response::text(500, &format!("refused: {}", quoted.join(" ")))
        }
    }
}

fn spec(stub: &StubServer) -> String {
    r#"version: 1
agent: echo-desk
model:
  base_url: ${MODEL_BASE_URL}
  api_key: ${MODEL_API_KEY}
  name: gpt-test
tools:
  echo_text:
    http: { method: POST, url: "@STUB@/text", json: { token: "${SHOP_TOKEN}", pin: "${SHOP_PIN}" } }
  echo_json:
    http: { method: POST, url: "@STUB@/json", json: { token: "${SHOP_TOKEN}", pin: "${SHOP_PIN}" } }
  echo_fail:
    http: { method: POST, url: "@STUB@/fail", json: { token: "${SHOP_TOKEN}", pin: "${SHOP_PIN}" } }
steps:
  - id: text
    tool: echo_text
  - id: json
    tool: echo_json
  - id: assess
    model:
      prompt: "Assess."
      output: json
    guardrail: { min_confidence: 0.8 }
  - id: fail
    tool: echo_fail
"#
    .replace("@STUB@", &stub.url(""))
}

/// Panics naming the first form of a secret found in `what`.
fn assert_no_form(sink: &str, what: &[u8]) {
    for (name, form) in all_forms() {
        assert!(
            !contains_bytes(what, &form),
            "{sink} holds {name} as {form:?}:\n{}",
            String::from_utf8_lossy(what)
        );
    }
}

async fn sse_text(api: &Api, served: &Served, run_id: &str, until: &str) -> String {
    let url = served.url(&format!("/runs/{run_id}/events"));
    let mut stream = SseStream::open(api, &url, None).await;
    let mut text = String::new();
    loop {
        match stream.next(Duration::from_secs(30)).await {
            SseNext::Event(e) => {
                text.push_str(&e.data.to_string());
                if e.kind() == until {
                    return text;
                }
            }
            other => panic!("stream ended before {until}: {other:?}\n{text}"),
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn no_encoded_form_of_a_secret_reaches_any_sink() {
    let stub = StubServer::start(downstream);
    let ws = Workspace::new(&spec(&stub));
    let model_url = stub.url("/v1");
    let served = Served::start(
        &ws.spec,
        &ws.state_db(),
        &[
            ("SHOP_TOKEN", TOKEN),
            ("SHOP_PIN", PIN),
            ("MODEL_API_KEY", MODEL_KEY),
            ("MODEL_BASE_URL", &model_url),
        ],
        &[],
    );
    let api = Api::new();
    let (status, run) = api
        .post(&served.url("/runs?wait=true"), json!({"input": {}}))
        .await;
    assert_eq!(status, 200, "{run}");
    assert_eq!(run["status"], "awaiting_approval", "{run}");
    let run_id = run["id"].as_str().unwrap().to_string();
    let key = run["pending_approval"]["key"].as_str().unwrap().to_string();

    // The downstream really was sent the secrets and echoed them.
    let sent = stub.requests_to("/text")[0].json();
    assert_eq!(sent, json!({"token": TOKEN, "pin": PIN}));
    assert_eq!(
        stub.requests_to("/v1/chat/completions")[0].header("authorization"),
        Some(format!("Bearer {MODEL_KEY}").as_str())
    );

    // While paused: the run, the approval payload (the model's output),
    // the events.
    let (_, shown) = api.get(&served.url(&format!("/runs/{run_id}"))).await;
    assert_no_form("GET /runs/{id}", shown.to_string().as_bytes());
    let json_output = &shown["outputs"]["json"]["body"];
    assert_eq!(json_output["pin"], "[redacted]", "{json_output}");
    assert_eq!(json_output["pin_float"], "[redacted]", "{json_output}");
    assert!(
        json_output["forms"].as_array().is_some_and(|f| f
            .iter()
            .all(|v| v.as_str().is_some_and(|v| v.contains("[redacted]")))),
        "every echoed form is redacted: {json_output}"
    );
    let (_, approvals) = api.get(&served.url("/approvals")).await;
    assert!(approvals.to_string().contains(&key), "{approvals}");
    assert_no_form("GET /approvals", approvals.to_string().as_bytes());
    let (_, approval) = api.get(&served.url(&format!("/approvals/{key}"))).await;
    assert_no_form("GET /approvals/{key}", approval.to_string().as_bytes());
    assert!(approval.to_string().contains("[redacted]"), "{approval}");
    let events = sse_text(&api, &served, &run_id, "awaiting_approval").await;
    assert_no_form("the event stream", events.as_bytes());

    // Approve: the next call fails quoting the secrets.
    let (status, body) = api
        .post(&served.url(&format!("/approvals/{key}/approve")), json!({}))
        .await;
    assert!(status < 300, "{status} {body}");
    let failed = api.wait_for_status(&served, &run_id, "failed").await;
    assert!(
        failed["error"]
            .as_str()
            .is_some_and(|e| e.contains("refused: [redacted]")),
        "{failed}"
    );
    assert_no_form(
        "GET /runs/{id} of the failed run",
        failed.to_string().as_bytes(),
    );
    let events = sse_text(&api, &served, &run_id, "run_failed").await;
    assert_no_form("the event stream", events.as_bytes());

    // The log line of the failure, and everything else logged.
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while !served.logs().contains("run failed") {
        assert!(
            std::time::Instant::now() < deadline,
            "no run failed line:\n{}",
            served.logs()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_no_form("the server log", served.logs().as_bytes());

    // The SQLite file and its WAL, byte for byte.
    assert_no_form("the SQLite file", &sqlite_bytes(&ws.state_db()));
}

#[tokio::test(flavor = "multi_thread")]
async fn slack_quoting_the_bot_token_leaves_no_form_in_the_failure_record_or_the_log() {
    let tool = StubServer::start(|_| Response::json(200, json!({"id": "rf_1"})));
    // Slack refuses the post and quotes the token it got, every way.
    let slack = StubServer::start(|req| {
        let token = req
            .header("authorization")
            .and_then(|a| a.strip_prefix("Bearer "))
            .unwrap_or("")
            .to_string();
        let quoted = echo_forms(&[&token]).join(" ");
        Response::json(
            200,
            json!({"ok": false, "error": format!("invalid_auth {quoted}")}),
        )
    });
    let ws = Workspace::new(&slack_stub::spec(&tool.url("")));
    let db = ws.path().join("state.db");
    let mut env = slack_stub::env(slack.port);
    for (name, value) in &mut env {
        if *name == "SLACK_BOT_TOKEN" {
            *value = SLACK_TOKEN.to_string();
        }
    }
    let served = Served::start(&ws.spec, &db, &slack_stub::env_refs(&env), &[]);
    let api = Api::new();
    let (status, body) = api
        .post(
            &served.url("/runs?wait=true"),
            json!({"input": {"order_id": "S-1"}}),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    let key = body["pending_approval"]["key"]
        .as_str()
        .expect("key")
        .to_string();
    let error = slack_stub::eventually(30, "the failed post recorded", || {
        rusqlite::Connection::open(&db)
            .and_then(|c| {
                c.query_row(
                    "SELECT last_error FROM tollgate_outbox WHERE key = ?1 AND channel = 'slack'",
                    [&key],
                    |r| r.get::<_, Option<String>>(0),
                )
            })
            .ok()
            .flatten()
    })
    .await;
    assert_eq!(
        slack.requests()[0].header("authorization"),
        Some(format!("Bearer {SLACK_TOKEN}").as_str())
    );
    assert!(error.contains("invalid_auth [redacted]"), "{error}");
    assert_no_form("the Slack failure record", error.as_bytes());
    slack_stub::eventually(30, "the failure logged", || {
        served.logs().contains("Slack message").then_some(())
    })
    .await;
    assert_no_form("the server log", served.logs().as_bytes());
    assert_no_form("the SQLite file", &sqlite_bytes(&db));
}

/// A custom tool that returns what it read from the environment, encoded.
struct Leaky;

#[tollgate_runtime::async_trait]
impl tollgate_runtime::tools::CustomTool for Leaky {
    async fn call(
        &self,
        _args: Value,
        _call: &tollgate_runtime::tools::CallContext,
    ) -> Result<Value, tollgate_runtime::tools::ToolError> {
        Ok(json!({"echo": echo_forms(&[TOKEN]), "pin": PIN.parse::<u64>().unwrap()}))
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_custom_tools_output_is_redacted_like_an_http_reply() {
    use std::sync::Arc;
    use tollgate_runtime::store::MemoryStore;
    use tollgate_runtime::tools::{CustomTools, Toolbox};
    // What the process resolved for its `${NAME}`s (here told directly: this
    // test process's environment is shared by its other tests).
    tollgate_runtime::secrets::remember(TOKEN);
    tollgate_runtime::secrets::remember(PIN);
    let spec = tollgate_runtime::Spec::parse(
        "version: 1\nagent: leaky\ntools:\n  leak:\n    rust: {}\nsteps:\n  - id: leak\n    tool: leak\n",
        "agent.yaml",
    )
    .expect("valid spec");
    let mut custom = CustomTools::new();
    custom.register("leak", Arc::new(Leaky));
    let agent = tollgate_runtime::AgentRun::new(Arc::new(spec), Arc::new(MemoryStore::new()))
        .with_tools(Arc::new(Toolbox::new().unwrap().with_custom_tools(custom)));
    let outcome = agent
        .start(json!({}), json!({"kind": "test"}))
        .await
        .expect("run");
    let output = serde_json::to_string(&outcome.outputs).unwrap();
    assert!(output.contains("[redacted]"), "{output}");
    assert_no_form("a custom tool's output", output.as_bytes());
}
