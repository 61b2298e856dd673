//! Slack for the tests: a stub of the Web API (`chat.postMessage`,
//! `chat.update`) and of `response_url`, a spec with
//! `approvals.notify.slack`, and clicks signed the way Slack signs them
//! (HMAC computed here with sha2 alone, independently of the runtime).
//! Include with `#[path = "common/slack_stub.rs"] mod slack_stub;` next to
//! `mod common;` and `mod stub_server;`.
#![allow(dead_code)]

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use crate::common::stub_server::{Request, Response, StubServer};

pub const BOT_TOKEN: &str = "xoxb-test-4815162342-bottoken-q9z";
pub const SIGNING_SECRET: &str = "slack-signing-secret-7c1e55d0a9";
pub const CHANNEL_ID: &str = "C0TOLLGATE";
pub const USER: &str = "U024BE7LH";

pub const POST_PATH: &str = "/api/chat.postMessage";
pub const UPDATE_PATH: &str = "/api/chat.update";

/// A spec whose one tool call needs approval, announced in Slack. The tool
/// is an HTTP call to `tool_base` (a stub counting side effects).
pub fn spec(tool_base: &str) -> String {
    format!(
        r##"version: 1
agent: refund-desk
trigger:
  webhook:
    path: /hooks/refund
approvals:
  notify:
    slack:
      bot_token: ${{SLACK_BOT_TOKEN}}
      channel: "#refunds"
      signing_secret: ${{SLACK_SIGNING_SECRET}}
tools:
  issue_refund:
    http:
      method: POST
      url: "{tool_base}/refunds"
      json: {{ order: "{{{{ args.order_id }}}}" }}
    approval: required
    message: "Refund order {{{{ args.order_id }}}}?"
steps:
  - id: refund
    tool: issue_refund
    with: {{ order_id: "{{{{ input.order_id }}}}" }}
"##
    )
}

/// The server's environment for Slack at `api_port`.
pub fn env(api_port: u16) -> Vec<(&'static str, String)> {
    vec![
        ("SLACK_BOT_TOKEN", BOT_TOKEN.to_string()),
        ("SLACK_SIGNING_SECRET", SIGNING_SECRET.to_string()),
        (
            "TOLLGATE_SLACK_API_BASE",
            format!("http://127.0.0.1:{api_port}/api"),
        ),
    ]
}

/// Borrow `env(...)` as the `&[(&str, &str)]` that `Served::start` takes.
pub fn env_refs<'a>(env: &'a [(&'static str, String)]) -> Vec<(&'static str, &'a str)> {
    env.iter().map(|(k, v)| (*k, v.as_str())).collect()
}

/// Answers like Slack: every post gets a new ts in [`CHANNEL_ID`].
pub fn api_handler() -> impl Fn(&Request) -> Response + Send + Sync + 'static {
    let next = Arc::new(AtomicU64::new(1));
    move |request: &Request| {
        let body = request.json();
        match request.path() {
            POST_PATH => {
                let n = next.fetch_add(1, Ordering::SeqCst);
                Response::json(
                    200,
                    json!({"ok": true, "channel": CHANNEL_ID, "ts": format!("1700000000.{n:06}"), "message": {}}),
                )
            }
            UPDATE_PATH => Response::json(
                200,
                json!({"ok": true, "channel": body["channel"], "ts": body["ts"], "text": body["text"]}),
            ),
            _ => Response::json(200, json!({"ok": false, "error": "unknown_method"})),
        }
    }
}

pub fn start_api() -> StubServer {
    StubServer::start(api_handler())
}

/// A free loopback port (for a stub started later on it).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("free port")
}

/// The buttons of a `chat.postMessage` body: `(action_id, style, value)`.
pub fn buttons(post: &Value) -> Vec<(String, String, String)> {
    post["blocks"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|b| b["type"] == "actions")
        .flat_map(|b| b["elements"].as_array().cloned().unwrap_or_default())
        .map(|e| {
            (
                e["action_id"].as_str().unwrap_or("").to_string(),
                e["style"].as_str().unwrap_or("").to_string(),
                e["value"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect()
}

/// A `block_actions` form body for a click on `action_id` carrying `key`.
pub fn click_body(key: &str, action_id: &str, user: &str, response_url: &str) -> Vec<u8> {
    let payload = json!({
        "type": "block_actions",
        "user": {"id": user, "username": "ana", "team_id": "T0001"},
        "team": {"id": "T0001", "domain": "example"},
        "channel": {"id": CHANNEL_ID, "name": "refunds"},
        "container": {"type": "message", "channel_id": CHANNEL_ID, "message_ts": "1700000000.000001"},
        "response_url": response_url,
        "trigger_id": "1.2.3",
        "actions": [{
            "type": "button",
            "block_id": "tollgate_decision",
            "action_id": action_id,
            "value": key,
            "action_ts": "1700000001.000000",
        }],
    });
    format!("payload={}", form_encode(&payload.to_string())).into_bytes()
}

/// `(X-Slack-Request-Timestamp, X-Slack-Signature)` for `body` at `timestamp`.
pub fn sign(secret: &str, timestamp: i64, body: &[u8]) -> (String, String) {
    let ts = timestamp.to_string();
    let mut message = format!("v0:{ts}:").into_bytes();
    message.extend_from_slice(body);
    let mac = hmac_sha256(secret.as_bytes(), &message);
    let hex: String = mac.iter().map(|b| format!("{b:02x}")).collect();
    (ts, format!("v0={hex}"))
}

pub fn now_unix() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0)
}

/// POST a click to `/slack/actions`, signed now with [`SIGNING_SECRET`].
pub async fn send_click(http: &reqwest::Client, server_base: &str, body: Vec<u8>) -> (u16, String) {
    let (ts, sig) = sign(SIGNING_SECRET, now_unix(), &body);
    let response = http
        .post(format!("{server_base}/slack/actions"))
        .header("Content-Type", "application/x-www-form-urlencoded")
        .header("X-Slack-Request-Timestamp", ts)
        .header("X-Slack-Signature", sig)
        .body(body)
        .send()
        .await
        .expect("POST /slack/actions");
    let status = response.status().as_u16();
    (status, response.text().await.unwrap_or_default())
}

fn form_encode(text: &str) -> String {
    let mut out = String::new();
    for b in text.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'*' => {
                out.push(b as char)
            }
            b' ' => out.push('+'),
            _ => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}

/// HMAC-SHA256 (RFC 2104) over sha2, so the tests do not sign with the
/// code they test.
fn hmac_sha256(key: &[u8], message: &[u8]) -> [u8; 32] {
    let mut block = [0u8; 64];
    if key.len() > 64 {
        block[..32].copy_from_slice(&Sha256::digest(key));
    } else {
        block[..key.len()].copy_from_slice(key);
    }
    let mut inner = Sha256::new();
    inner.update(block.map(|b| b ^ 0x36));
    inner.update(message);
    let inner = inner.finalize();
    let mut outer = Sha256::new();
    outer.update(block.map(|b| b ^ 0x5c));
    outer.update(inner);
    outer.finalize().into()
}

/// Wait until `check` holds, polling; panics with `what` after `secs`.
pub async fn eventually<T>(secs: u64, what: &str, mut check: impl FnMut() -> Option<T>) -> T {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(secs);
    loop {
        if let Some(v) = check() {
            return v;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "timed out waiting for {what}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

/// Where the store says the message of `key` is: `(channel, ts)`, once posted.
pub fn stored_message(db: &std::path::Path, key: &str) -> Option<(String, String)> {
    let conn = rusqlite::Connection::open(db).ok()?;
    conn.query_row(
        "SELECT channel, ts FROM tollgate_notifications WHERE key = ?1 AND ts IS NOT NULL",
        [key],
        |row| Ok((row.get(0)?, row.get(1)?)),
    )
    .ok()
}

/// True when the store records that the message of `key` shows the decision.
pub fn decision_posted(db: &std::path::Path, key: &str) -> bool {
    rusqlite::Connection::open(db)
        .and_then(|conn| {
            conn.query_row(
                "SELECT decision_posted_at IS NOT NULL FROM tollgate_notifications WHERE key = ?1",
                [key],
                |row| row.get(0),
            )
        })
        .unwrap_or(false)
}
