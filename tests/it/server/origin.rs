//! A browser page of another origin can start, list or decide nothing, in
//! either auth mode: cross-origin `Origin`s are refused (403
//! `forbidden_origin`), and without tokens a `Host` that is not a loopback
//! name is refused too (403 `bad_host`, DNS rebinding). `/healthz` and
//! `/readyz` stay reachable. Raw HTTP over loopback, so the test sets
//! `Host` and `Origin` exactly as a browser would.

use crate::common;
use crate::common::server;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use common::{GATED_SPEC, Workspace};
use serde_json::{Value, json};
use server::{Api, Served, code};

/// `METHOD path` with exactly these headers (Host included, or not), and
/// `Connection: close`; the answer's status and JSON body.
fn raw(
    served: &Served,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> (u16, Value) {
    let addr = served.base.trim_start_matches("http://");
    let mut stream = TcpStream::connect(addr).expect("connect");
    stream
        .set_read_timeout(Some(Duration::from_secs(60)))
        .unwrap();
    let mut request = format!("{method} {path} HTTP/1.1\r\nConnection: close\r\n");
    for (name, value) in headers {
        request.push_str(&format!("{name}: {value}\r\n"));
    }
    request.push_str(&format!("Content-Length: {}\r\n\r\n{body}", body.len()));
    stream.write_all(request.as_bytes()).expect("send");
    let mut answer = Vec::new();
    let _ = stream.read_to_end(&mut answer);
    let text = String::from_utf8_lossy(&answer).into_owned();
    let (head, body) = text
        .split_once("\r\n\r\n")
        .unwrap_or_else(|| panic!("no answer: {text:?}"));
    let status = head[9..12].parse().expect("status");
    let body = serde_json::from_str(body).unwrap_or(Value::String(body.to_string()));
    (status, body)
}

fn port(served: &Served) -> String {
    served.base.rsplit(':').next().unwrap().to_string()
}

/// The server's own `Host` value.
fn own_host(served: &Served) -> String {
    served.base.trim_start_matches("http://").to_string()
}

async fn status_of(served: &Served, api: &Api, key: &str) -> String {
    let (status, body) = api.get(&served.url(&format!("/approvals/{key}"))).await;
    assert_eq!(status, 200, "{body}");
    body["status"].as_str().unwrap_or("").to_string()
}

/// `raw(...)` is refused as a request from another origin.
fn assert_forbidden_origin(
    served: &Served,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) {
    let (status, answer) = raw(served, method, path, headers, body);
    assert_eq!(
        (status, code(&answer)),
        (403, "forbidden_origin"),
        "{method} {path}: {answer}"
    );
}

#[tokio::test]
async fn without_tokens_a_page_of_another_origin_can_start_list_or_decide_nothing() {
    let ws = Workspace::new(GATED_SPEC);
    let served = Served::start(&ws.spec, &ws.path().join("state.db"), &[], &[]);
    let api = Api::new();
    let key = api.pause(&served, json!({"order_id": "A1"})).await.key;
    let host = own_host(&served);
    let evil = [("Host", host.as_str()), ("Origin", "http://evil.example")];

    // The CORS-simple POST a page can send without a preflight.
    let simple = [
        ("Host", host.as_str()),
        ("Origin", "http://evil.example"),
        ("Content-Type", "text/plain"),
    ];
    assert_forbidden_origin(
        &served,
        "POST",
        "/runs",
        &simple,
        r#"{"input": {"order_id": "B2"}}"#,
    );
    // The same through an ordinary HTTP client.
    let (status, body) = api
        .post_raw(
            &served.url("/runs"),
            br#"{"input": {"order_id": "B2"}}"#.to_vec(),
            &[
                ("Origin", "http://evil.example"),
                ("Content-Type", "text/plain"),
            ],
        )
        .await;
    assert_eq!((status, code(&body)), (403, "forbidden_origin"), "{body}");
    assert_forbidden_origin(&served, "GET", "/approvals", &evil, "");
    assert_forbidden_origin(&served, "GET", &format!("/approvals/{key}"), &evil, "");
    for path in [
        format!("/approvals/{key}/approve"),
        format!("/approvals/{key}/reject"),
        format!("/runs/{key}/approve"),
    ] {
        let (status, body) = raw(&served, "POST", &path, &simple, r#"{"approved": true}"#);
        assert_eq!(
            (status, code(&body)),
            (403, "forbidden_origin"),
            "{path}: {body}"
        );
    }
    // Sandboxed frames and file: pages send `Origin: null`.
    let null = [("Host", host.as_str()), ("Origin", "null")];
    assert_forbidden_origin(&served, "GET", "/approvals", &null, "");
    // Another port on the same host is another origin.
    let other_port = format!(
        "http://127.0.0.1:{}",
        port(&served).parse::<u16>().unwrap() ^ 1
    );
    let (status, _) = raw(
        &served,
        "GET",
        "/approvals",
        &[("Host", &host), ("Origin", &other_port)],
        "",
    );
    assert_eq!(status, 403);

    assert_eq!(status_of(&served, &api, &key).await, "PENDING");
    let (_, list) = api.get(&served.url("/approvals")).await;
    assert_eq!(
        list["approvals"].as_array().map(Vec::len),
        Some(1),
        "{list}"
    );
}

#[tokio::test]
async fn without_tokens_a_rebound_host_name_is_refused() {
    let ws = Workspace::new(GATED_SPEC);
    let served = Served::start(&ws.spec, &ws.path().join("state.db"), &[], &[]);
    let api = Api::new();
    let key = api.pause(&served, json!({"order_id": "A1"})).await.key;
    // After DNS rebinding the page is same-origin with the attacker's name.
    let rebound = format!("rebind.evil.example:{}", port(&served));
    let origin = format!("http://{rebound}");
    let page = [("Host", rebound.as_str()), ("Origin", origin.as_str())];
    let (status, body) = raw(&served, "GET", "/approvals", &page, "");
    assert_eq!((status, code(&body)), (403, "bad_host"), "{body}");
    let json_page = [
        ("Host", rebound.as_str()),
        ("Origin", origin.as_str()),
        ("Content-Type", "application/json"),
    ];
    let (status, body) = raw(
        &served,
        "POST",
        &format!("/approvals/{key}/approve"),
        &json_page,
        "{}",
    );
    assert_eq!((status, code(&body)), (403, "bad_host"), "{body}");
    let (status, body) = raw(&served, "POST", "/runs", &json_page, r#"{"input": {}}"#);
    assert_eq!((status, code(&body)), (403, "bad_host"), "{body}");
    // No Origin at all (a rebound page's GET, or a script): still refused.
    let (status, body) = raw(&served, "GET", "/approvals", &[("Host", &rebound)], "");
    assert_eq!((status, code(&body)), (403, "bad_host"), "{body}");
    // Absolute-form request targets name the host too.
    let absolute = format!("http://{rebound}/approvals");
    let (status, _) = raw(
        &served,
        "GET",
        &absolute,
        &[("Host", &own_host(&served))],
        "",
    );
    assert_eq!(status, 403);
    // No Host at all.
    let (status, body) = raw(&served, "GET", "/approvals", &[], "");
    assert_eq!((status, code(&body)), (403, "bad_host"), "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap_or("")
            .contains("Host"),
        "{body}"
    );

    assert_eq!(status_of(&served, &api, &key).await, "PENDING");
}

#[tokio::test]
async fn without_tokens_loopback_names_and_the_own_origin_are_served() {
    let ws = Workspace::new(GATED_SPEC);
    let served = Served::start(&ws.spec, &ws.path().join("state.db"), &[], &[]);
    let p = port(&served);
    for host in [
        format!("127.0.0.1:{p}"),
        format!("localhost:{p}"),
        format!("LocalHost:{p}"),
    ] {
        let (status, body) = raw(&served, "GET", "/approvals", &[("Host", &host)], "");
        assert_eq!(status, 200, "{host}: {body}");
    }
    // A page served by this server itself (same origin) may call it.
    let host = own_host(&served);
    let own = format!("http://{host}");
    let headers = [
        ("Host", host.as_str()),
        ("Origin", own.as_str()),
        ("Content-Type", "application/json"),
    ];
    let (status, body) = raw(
        &served,
        "POST",
        "/runs",
        &headers,
        r#"{"input": {"order_id": "C3"}}"#,
    );
    assert_eq!(status, 202, "{body}");
}

/// `raw(...)` is refused for its Host, with the message naming what passes.
fn assert_bad_host(served: &Served, host: Option<&str>, serves: &str) {
    let headers: Vec<(&str, &str)> = host.map(|h| ("Host", h)).into_iter().collect();
    let (status, body) = raw(served, "GET", "/approvals", &headers, "");
    assert_eq!((status, code(&body)), (403, "bad_host"), "{host:?}: {body}");
    let message = body["error"]["message"].as_str().unwrap_or("");
    if host.is_some_and(|h| !h.is_empty() && !h.starts_with(':')) {
        assert!(message.contains(serves), "{host:?}: {message}");
    }
}

#[tokio::test]
async fn without_tokens_only_the_names_the_server_is_reachable_by_pass() {
    let ws = Workspace::new(GATED_SPEC);
    let served = Served::start(&ws.spec, &ws.path().join("state.db"), &[], &[]);
    let api = Api::new();
    let key = api.pause(&served, json!({"order_id": "A1"})).await.key;
    let p = port(&served);
    let other = p.parse::<u16>().unwrap() ^ 1;
    let serves = format!("localhost:{p} and 127.0.0.1:{p}");
    for host in [
        // Another loopback address: the server is not listening there.
        format!("127.0.0.2:{p}"),
        format!("127.8.9.10:{p}"),
        // The same address spelled otherwise.
        format!("[::ffff:127.0.0.1]:{p}"),
        format!("[::ffff:7f00:1]:{p}"),
        format!("127.1:{p}"),
        format!("2130706433:{p}"),
        // IPv6 loopback, where this server (bound to 127.0.0.1) is not.
        format!("[::1]:{p}"),
        // Names some clients send to DNS, which can answer anything.
        format!("agent.localhost:{p}"),
        format!("localhost.:{p}"),
        // Another port, an empty one, none (port 80).
        format!("localhost:{other}"),
        format!("127.0.0.1:{other}"),
        "localhost:".to_string(),
        "localhost".to_string(),
        "127.0.0.1".to_string(),
    ] {
        assert_bad_host(&served, Some(&host), &serves);
    }
    // An empty Host, a port without a host, no Host at all.
    for host in [Some(""), Some(&format!(":{p}")[..]), None] {
        assert_bad_host(&served, host, &serves);
    }
    // Refused before anything runs: deciding through an odd Host is too.
    let mapped = format!("[::ffff:127.0.0.1]:{p}");
    let (status, body) = raw(
        &served,
        "POST",
        &format!("/approvals/{key}/approve"),
        &[("Host", &mapped), ("Content-Type", "application/json")],
        "{}",
    );
    assert_eq!((status, code(&body)), (403, "bad_host"), "{body}");
    assert_eq!(status_of(&served, &api, &key).await, "PENDING");
}

#[tokio::test]
async fn without_tokens_a_server_on_another_loopback_address_answers_that_address() {
    let ws = Workspace::new(GATED_SPEC);
    let served = Served::start(
        &ws.spec,
        &ws.path().join("state.db"),
        &[],
        &["--listen", "127.0.0.2:0"],
    );
    assert!(
        served.base.starts_with("http://127.0.0.2:"),
        "{}",
        served.base
    );
    let p = port(&served);
    for host in [format!("127.0.0.2:{p}"), format!("localhost:{p}")] {
        let (status, body) = raw(&served, "GET", "/approvals", &[("Host", &host)], "");
        assert_eq!(status, 200, "{host}: {body}");
    }
    let serves = format!("localhost:{p} and 127.0.0.2:{p}");
    for host in [format!("127.0.0.1:{p}"), format!("[::1]:{p}")] {
        assert_bad_host(&served, Some(&host), &serves);
    }
}

#[tokio::test]
async fn the_probes_answer_whatever_the_host_and_origin() {
    let ws = Workspace::new(GATED_SPEC);
    let served = Served::start(&ws.spec, &ws.path().join("state.db"), &[], &[]);
    for path in ["/healthz", "/readyz"] {
        for headers in [
            &[("Host", "evil.example"), ("Origin", "http://evil.example")][..],
            &[("Origin", "null")][..],
            &[][..],
        ] {
            let (status, body) = raw(&served, "GET", path, headers, "");
            assert_eq!(status, 200, "{path} {headers:?}: {body}");
        }
    }
}

#[tokio::test]
async fn with_tokens_any_host_is_served_but_cross_origin_is_refused() {
    let ws = Workspace::new(GATED_SPEC);
    let served = Served::start(
        &ws.spec,
        &ws.path().join("state.db"),
        &[("TOLLGATE_API_TOKENS", "alice:alice-token-1")],
        &[],
    );
    let api = Api::with_token("alice-token-1");
    let key = api.pause(&served, json!({"order_id": "A1"})).await.key;
    let auth = "Bearer alice-token-1";
    // Behind a proxy the Host is the public name.
    let public = [("Host", "approvals.example.com"), ("Authorization", auth)];
    let (status, body) = raw(&served, "GET", "/approvals", &public, "");
    assert_eq!(status, 200, "{body}");
    // A page of that public origin (TLS ends at the proxy) is same-origin.
    let own_page = [
        ("Host", "approvals.example.com"),
        ("Origin", "https://approvals.example.com"),
        ("Authorization", auth),
    ];
    let (status, body) = raw(&served, "GET", "/approvals", &own_page, "");
    assert_eq!(status, 200, "{body}");
    // Another origin, even holding a token, decides nothing.
    let other = [
        ("Host", "approvals.example.com"),
        ("Origin", "https://evil.example"),
        ("Authorization", auth),
        ("Content-Type", "application/json"),
    ];
    assert_forbidden_origin(
        &served,
        "POST",
        &format!("/approvals/{key}/approve"),
        &other,
        "{}",
    );
    assert_forbidden_origin(&served, "GET", "/approvals", &other, "");
    assert_eq!(status_of(&served, &api, &key).await, "PENDING");
}

#[tokio::test]
async fn the_webhook_and_slack_actions_refuse_a_cross_origin_page() {
    let ws = Workspace::new(&GATED_SPEC.replace(
        "steps:",
        "trigger:\n  webhook:\n    path: /hooks/orders\nsteps:",
    ));
    let served = Served::start(&ws.spec, &ws.path().join("state.db"), &[], &[]);
    let host = own_host(&served);
    let page = [
        ("Host", host.as_str()),
        ("Origin", "http://evil.example"),
        ("Content-Type", "text/plain"),
    ];
    assert_forbidden_origin(
        &served,
        "POST",
        "/hooks/orders",
        &page,
        r#"{"order_id": "D4"}"#,
    );
    assert_forbidden_origin(&served, "POST", "/slack/actions", &page, "payload=%7B%7D");
    // Server to server (no Origin), the webhook works as before.
    let sender = [
        ("Host", host.as_str()),
        ("Content-Type", "application/json"),
    ];
    let (status, body) = raw(
        &served,
        "POST",
        "/hooks/orders",
        &sender,
        r#"{"order_id": "D4"}"#,
    );
    assert_eq!(status, 202, "{body}");
}
