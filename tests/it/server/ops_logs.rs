//! JSON logs on request (`TOLLGATE_LOG_FORMAT=json`, `serve --log-format
//! json`) from a real `tollgate serve`: every stderr line is one JSON
//! object with timestamp, level, target, message and fields, from start-up
//! through a pause, a failing call that quotes a secret (redacted, in
//! every form) and the shutdown. An unknown format is a configuration
//! error (exit 2) that names the choices.

use crate::common;
use crate::common::server;
use crate::common::stub_server;

use std::time::Duration;

use common::{GATED_SPEC, Workspace};
use serde_json::{Value, json};
use server::{Api, Served};
use stub_server::{Response, StubServer};

/// Has a quote and a backslash, so its JSON-escaped form differs from it.
const SECRET: &str = "s3cr\"et\\shop-token-42";

fn spec(stub_url: &str) -> String {
    format!(
        r#"version: 1
agent: logged-desk
tools:
  ship:
    http:
      method: POST
      url: "{stub_url}"
      json: {{ token: "${{SHOP_TOKEN}}" }}
steps:
  - id: gate
    approval:
      message: "Ship?"
  - id: ship
    tool: ship
    with: {{}}
"#
    )
}

/// Every line of `logs` parsed as a JSON object with the fixed keys.
fn parse_lines(logs: &str) -> Vec<Value> {
    assert!(!logs.is_empty(), "nothing logged");
    logs.lines()
        .map(|line| {
            let value: Value = serde_json::from_str(line)
                .unwrap_or_else(|e| panic!("not JSON ({e}): {line:?}\n{logs}"));
            let object = value
                .as_object()
                .unwrap_or_else(|| panic!("not an object: {line}"));
            let at = object["timestamp"].as_str().expect("timestamp");
            assert!(
                chrono::DateTime::parse_from_rfc3339(at).is_ok(),
                "timestamp {at:?} is not RFC 3339"
            );
            assert!(
                ["TRACE", "DEBUG", "INFO", "WARN", "ERROR"]
                    .contains(&object["level"].as_str().expect("level")),
                "{line}"
            );
            assert!(
                object["target"].as_str().is_some_and(|t| !t.is_empty()),
                "{line}"
            );
            assert!(object["message"].is_string(), "{line}");
            assert!(object["fields"].is_object(), "{line}");
            value
        })
        .collect()
}

fn find<'a>(lines: &'a [Value], message: &str) -> &'a Value {
    lines
        .iter()
        .find(|l| l["message"].as_str().is_some_and(|m| m.contains(message)))
        .unwrap_or_else(|| panic!("no line with {message:?} in {lines:#?}"))
}

#[tokio::test(flavor = "multi_thread")]
async fn every_line_is_a_json_object_and_secrets_stay_out() {
    // The downstream refuses, quoting the token it was sent.
    let stub = StubServer::start(|req| {
        let sent = req.json()["token"].as_str().unwrap_or("").to_string();
        Response::text(
            500,
            &format!("refused token {sent} (json: {})", json!(sent)),
        )
    });
    let ws = Workspace::new(&spec(&stub.url("/ship")));
    let mut served = Served::start(
        &ws.spec,
        &ws.path().join("state.db"),
        &[
            ("TOLLGATE_LOG_FORMAT", "json"),
            // The agent starts the run, alice decides it: whoever starts
            // a run may not decide its gates.
            (
                "TOLLGATE_API_TOKENS",
                "agent:api-token-for-agent,alice:api-token-for-alice",
            ),
            ("SHOP_TOKEN", SECRET),
        ],
        &[],
    );
    let api = Api::with_token("api-token-for-alice");
    let paused = Api::with_token("api-token-for-agent")
        .pause(&served, json!({}))
        .await;
    let (status, body) = api
        .post(
            &served.url(&format!("/approvals/{}/approve", paused.key)),
            json!({}),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    let failed = api.wait_for_status(&served, &paused.run_id, "failed").await;
    assert!(
        failed["error"]
            .as_str()
            .is_some_and(|e| e.contains("[redacted]")),
        "{failed}"
    );
    served.log_line("run failed", Duration::from_secs(30)).await;
    assert_eq!(served.terminate(), Some(0));

    let logs = served.logs();
    let lines = parse_lines(&logs);
    let serving = find(&lines, "serving");
    assert_eq!(serving["level"], "INFO");
    assert!(
        serving["target"]
            .as_str()
            .unwrap()
            .starts_with("tollgate_runtime"),
        "{serving}"
    );
    assert_eq!(serving["fields"]["agent"], "logged-desk");
    assert_eq!(
        serving["fields"]["spec"].as_str().map(str::len),
        Some(12),
        "{serving}"
    );
    let tokens = find(&lines, "bearer tokens required");
    assert_eq!(tokens["fields"]["tokens"], "agent,alice");
    let run_failed = find(&lines, "run failed");
    assert_eq!(run_failed["level"], "WARN");
    assert_eq!(run_failed["fields"]["run_id"], paused.run_id.as_str());
    let error = run_failed["fields"]["error"].as_str().expect("error field");
    assert!(error.contains("refused token [redacted]"), "{error}");
    find(&lines, "stopped; paused runs stay in the store");

    // No form of a secret anywhere: as is, JSON-escaped (as a JSON log
    // line would write it), or escaped twice (a quoted body inside).
    let escaped = json!(SECRET).to_string();
    let escaped = escaped.trim_matches('"');
    let twice = json!(escaped).to_string();
    let twice = twice.trim_matches('"');
    for form in [
        SECRET,
        escaped,
        twice,
        "api-token-for-alice",
        "api-token-for-agent",
    ] {
        assert!(!logs.contains(form), "the log holds {form:?}:\n{logs}");
    }
}

#[test]
fn the_flag_asks_for_json_too_and_text_stays_the_default() {
    let ws = Workspace::new(GATED_SPEC);
    let mut json_served = Served::start(
        &ws.spec,
        &ws.path().join("a.db"),
        &[],
        &["--log-format", "json"],
    );
    json_served.log_line_blocking("\"message\":\"serving\"", Duration::from_secs(30));
    assert_eq!(json_served.terminate(), Some(0));
    let lines = parse_lines(&json_served.logs());
    find(&lines, "no API tokens");

    // The flag wins over the variable; without either, text.
    let mut text = Served::start(
        &ws.spec,
        &ws.path().join("b.db"),
        &[("TOLLGATE_LOG_FORMAT", "json")],
        &["--log-format", "text"],
    );
    let line = text.log_line_blocking("serving agent=", Duration::from_secs(30));
    assert!(serde_json::from_str::<Value>(&line).is_err(), "{line}");
    assert!(line.contains(" INFO "), "{line}");
    assert_eq!(text.terminate(), Some(0));
}

#[test]
fn an_unknown_log_format_is_a_configuration_error() {
    let ws = Workspace::new(GATED_SPEC);
    for (env, args) in [
        (vec![("TOLLGATE_LOG_FORMAT", "yaml")], vec![]),
        (vec![], vec!["--log-format", "yaml"]),
    ] {
        let failure = Served::try_start(&ws.spec, &ws.path().join("state.db"), &env, &args)
            .err()
            .expect("the server must refuse an unknown log format");
        assert_eq!(failure.code, Some(2), "{}", failure.stderr);
        for needle in ["\"yaml\"", "TOLLGATE_LOG_FORMAT", "`text` and `json`"] {
            assert!(
                failure.stderr.contains(needle),
                "{needle}: {}",
                failure.stderr
            );
        }
    }
}
