//! A bounded fuzz of the HTTP API's extractors against a real `tollgate
//! serve` over loopback: random and mutated bodies, content types, headers,
//! query strings, path segments (keys and run ids with odd bytes, very long
//! ones), `Last-Event-ID` values and webhook signatures. After a fixed corpus
//! of every hostile HTTP case from review, a deterministic generator runs.
//!
//! Every answer must be below 500, and every error must be
//! `{"error": {"code", "message"}}` with a code from the documented list; the
//! server must stay up, and must never log a panic.
//!
//! `TOLLGATE_FUZZ_CASES` (default 300) sets the number of generated requests
//! and `TOLLGATE_FUZZ_SEED` the seed (a failure prints both, to replay it).

use crate::common;
use crate::common::server;

use std::time::Duration;

use common::Workspace;
use common::rng::Rng;
use serde_json::{Value, json};
use server::{Api, Paused, Served};
use tollgate_runtime::server::signature;

const SECRET: &str = "fuzz-hook-secret";
const BODY_LIMIT: usize = 64 * 1024;

/// Every code a client may see from these routes (docs/reference/errors.md).
const CODES: [&str; 13] = [
    "invalid_request",
    "unauthorized",
    "forbidden",
    "approval_not_found",
    "run_not_found",
    "not_found",
    "method_not_allowed",
    "already_resolved",
    "spec_changed",
    "approval_expired",
    "payload_too_large",
    "unsupported_media_type",
    "replayed",
];

const SPEC: &str = r#"version: 1
agent: fuzz-desk
trigger:
  webhook:
    path: /hooks/in
    secret: ${FUZZ_HOOK_SECRET}
steps:
  - id: gate
    approval:
      message: "Go?"
      payload: { order: "{{ input.order_id }}" }
  - id: act
    set: { done: "{{ steps.gate.output.payload }}" }
"#;

/// One request. `content_type` and friends are sent only when `Some`.
#[derive(Debug, Clone, Default)]
struct Case {
    method: &'static str,
    /// Path and query, already percent-encoded where needed.
    target: String,
    content_types: Vec<String>,
    last_event_id: Option<String>,
    signature: Option<String>,
    /// Sign the body just before sending (a valid signature, to get past
    /// the check to the parsing behind it).
    sign_body: bool,
    body: Vec<u8>,
    /// The exact status, for the fixed corpus.
    expect: Option<u16>,
    /// Which case this is, to replay a failure.
    label: String,
}

impl Case {
    fn post(target: &str, content_type: Option<&str>, body: &[u8]) -> Case {
        Case {
            method: "POST",
            target: target.to_string(),
            content_types: content_type.map(str::to_string).into_iter().collect(),
            body: body.to_vec(),
            ..Case::default()
        }
    }

    fn get(target: &str) -> Case {
        Case {
            method: "GET",
            target: target.to_string(),
            ..Case::default()
        }
    }

    fn expect(mut self, status: u16) -> Case {
        self.expect = Some(status);
        self
    }

    fn describe(&self) -> String {
        let body = String::from_utf8_lossy(&self.body);
        let body: String = body.chars().take(200).collect();
        format!(
            "[{}] {} {} content-type={:?} last-event-id={:?} signature={:?} sign_body={} body({} bytes)={body:?}",
            self.label,
            self.method,
            self.target.chars().take(200).collect::<String>(),
            self.content_types,
            self.last_event_id,
            self.signature,
            self.sign_body,
            self.body.len()
        )
    }
}

/// Every hostile HTTP case from the review (issue 12), with the answer it
/// must get.
fn corpus(p: &Paused, now: i64) -> Vec<Case> {
    let key = &p.key;
    let run = &p.run_id;
    let approve = format!("/approvals/{key}/approve");
    let reject = format!("/approvals/{key}/reject");
    let decide = format!("/runs/{run}/approve");
    let events = format!("/runs/{run}/events");
    let good = br#"{"order_id": "W1"}"#;
    let mut cases = vec![
        // A web page's CORS-simple POST: text/plain, a form, no type.
        Case::post("/runs", Some("text/plain"), br#"{"input": {}}"#).expect(415),
        Case::post(
            "/runs",
            Some("application/x-www-form-urlencoded"),
            b"input=1",
        )
        .expect(415),
        Case::post("/runs", None, br#"{"input": {}}"#).expect(415),
        Case::post(&approve, Some("text/plain"), b"").expect(415),
        Case::post(&approve, None, b"").expect(415),
        Case::post(&reject, Some("multipart/form-data; boundary=x"), b"").expect(415),
        Case::post(
            &decide,
            Some("text/plain;charset=UTF-8"),
            br#"{"approved": true}"#,
        )
        .expect(415),
        // An array (or any non-object) body.
        Case::post("/runs", Some("application/json"), br#"[{"input": {}}]"#).expect(400),
        Case::post("/runs", Some("application/json"), b"null").expect(400),
        Case::post("/runs", Some("application/json"), b"\"x\"").expect(400),
        Case::post(&approve, Some("application/json"), b"[]").expect(400),
        // `{"payload": null}` on both approve routes.
        Case::post(&approve, Some("application/json"), br#"{"payload": null}"#).expect(400),
        Case::post(
            &decide,
            Some("application/json"),
            br#"{"approved": true, "payload": null}"#,
        )
        .expect(400),
        // NULs: escaped inside JSON (stored losslessly or refused, never a
        // 500), and raw in the body (not JSON at all).
        Case::post(
            "/runs",
            Some("application/json"),
            br#"{"input": {"order_id": "A\u0000B", "k\u0000": 1}}"#,
        ),
        Case::post(
            &reject,
            Some("application/json"),
            br#"{"reason": "no\u0000pe"}"#,
        ),
        Case::post("/runs", Some("application/json"), b"{\"input\": \"\0\"}").expect(400),
        // Nesting past serde's limit, truncated and invalid UTF-8 JSON.
        Case::post(
            "/runs",
            Some("application/json"),
            format!("{{\"input\": {}{}}}", "[".repeat(5000), "]".repeat(5000)).as_bytes(),
        )
        .expect(400),
        Case::post("/runs", Some("application/json"), b"{\"input\": ").expect(400),
        Case::post(
            "/runs",
            Some("application/json"),
            b"{\"input\": \"\xff\xfe\"}",
        )
        .expect(400),
        // A body over the limit.
        Case::post(
            "/runs",
            Some("application/json"),
            format!("{{\"input\": \"{}\"}}", "x".repeat(BODY_LIMIT)).as_bytes(),
        )
        .expect(413),
        // Huge and malformed Last-Event-ID values.
        Case::get(&events).expect(200),
        Case::get("/healthz").expect(200),
    ];
    for id in [
        "18446744073709551615",
        "9223372036854775808",
        "1000000",
        "3",
    ] {
        let mut case = Case::get(&events).expect(200);
        case.last_event_id = Some(id.to_string());
        cases.push(case);
    }
    for id in ["18446744073709551616", "-1", "abc", "1e3", "", "0x10"] {
        let mut case = Case::get(&events).expect(400);
        case.last_event_id = Some(id.to_string());
        cases.push(case);
    }
    // Bad webhook signatures: missing, wrong, malformed, stale, another
    // body's, the time moved.
    let stale = signature::sign_at(SECRET.as_bytes(), good, now - 3600);
    let moved = stale.replace(&format!("t={}", now - 3600), &format!("t={now}"));
    for sig in [
        None,
        Some(signature::sign(b"wrong-secret", good)),
        Some("sha256=zz".to_string()),
        Some("sha256=".to_string()),
        Some(format!("t={now}")),
        Some(format!("t=soon,v1={}", "0".repeat(64))),
        Some(format!("t={now},v1={}", "0".repeat(64))),
        Some(stale),
        Some(moved),
        Some(signature::sign_at(SECRET.as_bytes(), b"{}", now)),
        Some("x".repeat(8000)),
    ] {
        let mut case = Case::post("/hooks/in", Some("application/json"), good).expect(401);
        case.signature = sig;
        cases.push(case);
    }
    // Right signatures: both forms, any content type on a signed hook.
    let mut plain = Case::post("/hooks/in", Some("text/plain"), good).expect(202);
    plain.signature = Some(signature::sign(SECRET.as_bytes(), good));
    cases.push(plain);
    let mut stamped = Case::post("/hooks/in", None, good).expect(202);
    stamped.signature = Some(signature::sign_at(SECRET.as_bytes(), good, now));
    cases.push(stamped.clone());
    // The same timestamped request again: a replay inside the window.
    cases.push(stamped.expect(409));
    // A signed body that is not JSON, or an array (a webhook's input may be
    // any JSON).
    let mut not_json = Case::post("/hooks/in", None, b"not json").expect(400);
    not_json.sign_body = true;
    cases.push(not_json);
    let mut array = Case::post("/hooks/in", None, b"[1, 2]").expect(202);
    array.sign_body = true;
    cases.push(array);
    // Keys and run ids with odd bytes, very long ones.
    for segment in [
        "%00".to_string(),
        "%FF%FE".to_string(),
        "a%2Fb".to_string(),
        "%E2%80%AE".to_string(),
        "x".repeat(20_000),
        format!("{key}%00"),
        key.to_uppercase(),
    ] {
        cases.push(Case::get(&format!("/approvals/{segment}")));
        cases.push(Case::get(&format!("/runs/{segment}")));
        cases.push(Case::post(
            &format!("/approvals/{segment}/approve"),
            Some("application/json"),
            b"{}",
        ));
    }
    cases
}

const CONTENT_TYPES: [&str; 14] = [
    "application/json",
    "application/json; charset=utf-8",
    "APPLICATION/JSON",
    "application/vnd.api+json",
    "application/+json",
    "application/json5",
    "text/json",
    "text/plain",
    "application/x-www-form-urlencoded",
    "multipart/form-data; boundary=----x",
    "",
    ";",
    "application/json;;;",
    "*/*",
];

const LAST_EVENT_IDS: [&str; 10] = [
    "0",
    "1",
    "2",
    "5",
    "999999999",
    "18446744073709551615",
    "99999999999999999999999999",
    "-5",
    " 7 ",
    "seven",
];

/// A valid body for the route, to mutate.
fn seed_body(rng: &mut Rng, route: &str) -> Value {
    match route {
        "runs" => json!({"input": {"order_id": format!("G{}", rng.below(1000))}}),
        "decide" => json!({"approved": rng.percent(50), "reason": "fuzz"}),
        "approve" => {
            if rng.percent(30) {
                json!({"payload": {"order": "edited"}, "reason": "fuzz"})
            } else {
                json!({"reason": "fuzz"})
            }
        }
        "reject" => json!({"reason": "fuzz"}),
        _ => json!({"order_id": "H1"}),
    }
}

/// Byte-level damage: flips, inserts, deletions, truncation, splices of
/// JSON-significant characters.
fn mutate(rng: &mut Rng, body: &mut Vec<u8>) {
    const TOKENS: [&[u8]; 14] = [
        b"null",
        b"[",
        b"]",
        b"{",
        b"}",
        b"\"",
        b",",
        b":",
        b"\\u0000",
        b"\0",
        b"\xff",
        b"1e999",
        b"-0",
        b"\"payload\": null",
    ];
    for _ in 0..1 + rng.below(4) {
        let at = if body.is_empty() {
            0
        } else {
            rng.below(body.len() + 1)
        };
        match rng.below(5) {
            0 if !body.is_empty() && at < body.len() => body[at] ^= 1 << rng.below(8),
            1 => {
                let token = rng.pick(&TOKENS).to_vec();
                body.splice(at..at, token);
            }
            2 if at < body.len() => {
                body.remove(at);
            }
            3 => body.truncate(at),
            _ => {
                let noise = rng.bytes(1, 9);
                body.splice(at..at, noise);
            }
        }
    }
}

/// An odd path segment: a real id or key (maybe damaged), percent-encoded
/// random bytes, or a very long one.
fn segment(rng: &mut Rng, pool: &[Paused]) -> String {
    let real = rng.pick(pool);
    match rng.below(7) {
        0 => real.key.clone(),
        1 => real.run_id.clone(),
        2 => {
            let mut s = real.key.clone();
            s.truncate(rng.below(s.len() + 1));
            s
        }
        3 => rng
            .bytes(1, 41)
            .iter()
            .map(|b| format!("%{b:02X}"))
            .collect(),
        4 => "k".repeat(1 + rng.below(30_000)),
        5 => format!("{}%00{}", real.key, "%FF".repeat(rng.below(3))),
        _ => "00000000-0000-4000-8000-000000000000".to_string(),
    }
}

fn query(rng: &mut Rng) -> String {
    let mut parts: Vec<String> = Vec::new();
    for _ in 0..rng.below(4) {
        parts.push(match rng.below(8) {
            0 => "wait=true".to_string(),
            1 => format!("wait={}", rng.pick(&["false", "maybe", "", "1", "%00"])),
            2 => format!(
                "limit={}",
                rng.pick(&[
                    "0",
                    "1",
                    "50",
                    "500",
                    "501",
                    "-1",
                    "99999999999999999999",
                    "x"
                ])
            ),
            3 => format!("cursor={}", rng.pick(&["garbage", "", "%FF%00", "MTIz"])),
            4 => "token=leak&api_key=leak".to_string(),
            5 => rng
                .bytes(1, 13)
                .iter()
                .map(|b| format!("%{b:02X}"))
                .collect::<String>(),
            6 => format!("{}={}", "q".repeat(rng.below(5000)), "v"),
            _ => "=&&=&".to_string(),
        });
    }
    if parts.is_empty() {
        String::new()
    } else {
        format!("?{}", parts.join("&"))
    }
}

fn generate(rng: &mut Rng, pool: &[Paused], now: i64) -> Case {
    let seg = segment(rng, pool);
    let (method, path, route) = match rng.below(12) {
        0 => ("POST", "/runs".to_string(), "runs"),
        1 => ("GET", format!("/runs/{seg}"), "none"),
        2 => ("GET", format!("/runs/{seg}/events"), "events"),
        3 => ("POST", format!("/runs/{seg}/approve"), "decide"),
        4 => ("GET", "/approvals".to_string(), "none"),
        5 => ("GET", format!("/approvals/{seg}"), "none"),
        6 => ("POST", format!("/approvals/{seg}/approve"), "approve"),
        7 => ("POST", format!("/approvals/{seg}/reject"), "reject"),
        8 => ("POST", "/hooks/in".to_string(), "hook"),
        9 => (
            *rng.pick(&["PUT", "DELETE", "PATCH", "GET", "OPTIONS"]),
            rng.pick(&[
                "/runs",
                "/approvals",
                "/hooks/in",
                "/healthz",
                "/slack/actions",
            ])
            .to_string(),
            "none",
        ),
        10 => ("POST", format!("/{seg}"), "none"),
        _ => ("GET", "/healthz".to_string(), "none"),
    };
    let mut case = Case {
        method,
        target: format!("{path}{}", query(rng)),
        ..Case::default()
    };
    if method != "GET" {
        let mut body = serde_json::to_vec(&seed_body(rng, route)).unwrap_or_default();
        match rng.below(10) {
            0 => body.clear(),
            1..=4 => mutate(rng, &mut body),
            5 => body = rng.bytes(0, 300),
            6 => {
                body = format!("[{}]", String::from_utf8_lossy(&body)).into_bytes();
            }
            _ => {}
        }
        case.body = body;
        // Mostly JSON, so the parsing behind the check is reached.
        for _ in 0..usize::from(!rng.percent(15)) + usize::from(rng.percent(5)) {
            case.content_types.push(if rng.percent(60) {
                "application/json".to_string()
            } else {
                rng.pick(&CONTENT_TYPES).to_string()
            });
        }
    }
    if (route == "events" || rng.percent(5)) && rng.percent(70) {
        case.last_event_id = Some(rng.pick(&LAST_EVENT_IDS).to_string());
    }
    if route == "hook" {
        match rng.below(4) {
            0 | 1 => case.sign_body = true,
            2 => {
                let t = now + rng.pick(&[-100_000i64, -301, 0, 299, 100_000]);
                case.signature = Some(signature::sign_at(SECRET.as_bytes(), &case.body, t));
            }
            _ => {
                case.signature = Some(
                    String::from_utf8_lossy(&rng.bytes(0, 80))
                        .chars()
                        .filter(|c| c.is_ascii_graphic())
                        .collect(),
                )
            }
        }
    }
    case
}

/// Send one case; check the answer. Returns the status.
async fn send(http: &reqwest::Client, served: &Served, case: &Case, now: i64) -> u16 {
    let method = reqwest::Method::from_bytes(case.method.as_bytes()).expect("method");
    let mut request = http
        .request(method, format!("{}{}", served.base, case.target))
        .body(case.body.clone());
    for content_type in &case.content_types {
        request = request.header("Content-Type", content_type.as_str());
    }
    if let Some(id) = &case.last_event_id {
        request = request.header("Last-Event-ID", id.as_str());
    }
    let signature_header = if case.sign_body {
        Some(signature::sign_at(SECRET.as_bytes(), &case.body, now))
    } else {
        case.signature.clone()
    };
    if let Some(sig) = signature_header {
        request = request.header("X-Tollgate-Signature", sig);
    }
    let response = request
        .send()
        .await
        .unwrap_or_else(|e| panic!("no answer (is the server down?): {e}\n{}", case.describe()));
    let status = response.status().as_u16();
    let is_stream = response
        .headers()
        .get("content-type")
        .is_some_and(|v| v.as_bytes().starts_with(b"text/event-stream"));
    if is_stream {
        // A paused run's stream stays open: the status is the answer.
        assert_eq!(status, 200, "{}", case.describe());
        return status;
    }
    let bytes = tokio::time::timeout(Duration::from_secs(30), response.bytes())
        .await
        .unwrap_or_else(|_| panic!("the body never ended: {}", case.describe()))
        .unwrap_or_else(|e| panic!("cannot read the body: {e}\n{}", case.describe()));
    assert!(
        status < 500,
        "{status} {}\n{}",
        String::from_utf8_lossy(&bytes),
        case.describe()
    );
    if status >= 400 {
        let body: Value = serde_json::from_slice(&bytes).unwrap_or_else(|_| {
            panic!(
                "{status} is not JSON: {:?}\n{}",
                String::from_utf8_lossy(&bytes),
                case.describe()
            )
        });
        let code = body["error"]["code"].as_str().unwrap_or("");
        assert!(
            CODES.contains(&code),
            "{status} with an unknown code: {body}\n{}",
            case.describe()
        );
        assert!(
            body["error"]["message"]
                .as_str()
                .is_some_and(|m| !m.is_empty()),
            "{status} without a message: {body}\n{}",
            case.describe()
        );
        assert_eq!(
            body.as_object().map(|o| o.len()),
            Some(1),
            "{body}\n{}",
            case.describe()
        );
    }
    if let Some(want) = case.expect {
        assert_eq!(
            status,
            want,
            "{}\n{}",
            String::from_utf8_lossy(&bytes),
            case.describe()
        );
    }
    status
}

fn env_number(name: &str, default: u64) -> u64 {
    match std::env::var(name) {
        Ok(text) => text
            .trim()
            .parse()
            .unwrap_or_else(|_| panic!("{name} must be a number, found {text:?}")),
        Err(_) => default,
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn hostile_and_random_requests_get_json_errors_and_never_a_5xx() {
    let cases = env_number("TOLLGATE_FUZZ_CASES", 300);
    let seed = env_number("TOLLGATE_FUZZ_SEED", 0x7011_6a7e);
    let ws = Workspace::new(SPEC);
    let served = Served::start(
        &ws.spec,
        &ws.path().join("state.db"),
        &[("FUZZ_HOOK_SECRET", SECRET), ("RUST_LOG", "warn")],
        &["--max-body-bytes", &BODY_LIMIT.to_string()],
    );
    let api = Api::new();
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(60))
        .build()
        .expect("client");
    let now = || {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs() as i64)
    };

    // The fixed corpus, aimed at one paused run.
    let first = api.pause(&served, json!({"order_id": "F0"})).await;
    for (n, mut case) in corpus(&first, now()).into_iter().enumerate() {
        case.label = format!("corpus case {n}");
        send(&http, &served, &case, now()).await;
    }

    // Generated cases, with fresh paused runs now and then so some
    // decisions land on a real pending key.
    let mut rng = Rng::new(seed);
    let mut pool = vec![first, api.pause(&served, json!({"order_id": "F1"})).await];
    let mut seen = std::collections::BTreeMap::<u16, usize>::new();
    for i in 0..cases {
        if i % 50 == 49 {
            let order = format!("F{}", pool.len());
            pool.push(api.pause(&served, json!({ "order_id": order })).await);
        }
        let mut case = generate(&mut rng, &pool, now());
        case.label = format!("generated case {i}, TOLLGATE_FUZZ_SEED={seed}");
        let status =
            tokio::time::timeout(Duration::from_secs(90), send(&http, &served, &case, now()))
                .await
                .unwrap_or_else(|_| panic!("case {i} never answered: {}", case.describe()));
        assert!(
            status < 500,
            "case {i} (TOLLGATE_FUZZ_SEED={seed}) answered {status}"
        );
        *seen.entry(status).or_default() += 1;
    }
    eprintln!("{cases} generated requests (TOLLGATE_FUZZ_SEED={seed}), by status: {seen:?}");

    // Still up, still serving, and nothing panicked.
    let (status, body) = api.get(&served.url("/healthz")).await;
    assert_eq!((status, &body["status"]), (200, &json!("ok")));
    let (status, _) = api.get(&served.url("/approvals")).await;
    assert_eq!(status, 200);
    let logs = served.logs();
    assert!(!logs.contains("panicked"), "the server panicked:\n{logs}");
}
