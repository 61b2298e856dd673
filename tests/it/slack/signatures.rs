//! POST /slack/actions accepts only requests Slack signed: a wrong, stale,
//! future, missing or v1 signature is a 401 and changes nothing. (The
//! signature arithmetic against Slack's published example is a unit test
//! in `notify::slack::signature`.)

use crate::common;
use crate::common::server;
use crate::common::slack_stub;

use common::{GATED_SPEC, Workspace};
use serde_json::{Value, json};
use server::{Api, Served, code};
use slack_stub::*;

/// Request headers: `(name, value)`.
type Headers = Vec<(&'static str, String)>;

async fn post(served: &Served, body: Vec<u8>, headers: &[(&str, String)]) -> (u16, Value) {
    let pairs: Vec<(&str, &str)> = headers.iter().map(|(k, v)| (*k, v.as_str())).collect();
    Api::new()
        .post_raw(&served.url("/slack/actions"), body, &pairs)
        .await
}

#[tokio::test(flavor = "multi_thread")]
async fn unsigned_stale_future_and_forged_requests_are_refused() {
    let slack = start_api();
    let ws = Workspace::new(&spec("http://127.0.0.1:9"));
    let db = ws.path().join("state.db");
    let env = env(slack.port);
    // Bearer tokens are on: /slack/actions must not need one.
    let mut env_with_tokens = env.clone();
    env_with_tokens.push(("TOLLGATE_API_TOKENS", "ops:ops-token-1234".to_string()));
    let served = Served::start(&ws.spec, &db, &env_refs(&env_with_tokens), &[]);
    let api = Api::with_token("ops-token-1234");
    let (status, body) = api
        .post(&served.url("/runs"), json!({"input": {"order_id": "S-1"}}))
        .await;
    assert_eq!(status, 202, "{body}");
    let run_id = body["run_id"].as_str().expect("run id").to_string();
    let key = loop {
        let (_, run) = api.get(&served.url(&format!("/runs/{run_id}"))).await;
        if let Some(key) = run["pending_approval"]["key"].as_str() {
            break key.to_string();
        }
        tokio::time::sleep(std::time::Duration::from_millis(25)).await;
    };

    let body = click_body(&key, "tollgate_approve", USER, "http://127.0.0.1:9/respond");
    let now = now_unix();
    let with = |ts: i64, secret: &str, body: &[u8]| {
        let (ts, sig) = sign(secret, ts, body);
        vec![
            ("X-Slack-Request-Timestamp", ts),
            ("X-Slack-Signature", sig),
        ]
    };
    let mut tampered = body.clone();
    let last = tampered.len() - 1;
    tampered[last] ^= 0x01;
    let v1 = {
        let mut h = with(now, SIGNING_SECRET, &body);
        h[1].1 = h[1].1.replacen("v0=", "v1=", 1);
        h
    };
    let cases: Vec<(&str, Vec<u8>, Headers)> = vec![
        ("no headers", body.clone(), vec![]),
        (
            "another secret",
            body.clone(),
            with(now, "not-the-secret", &body),
        ),
        (
            "a changed byte",
            tampered.clone(),
            with(now, SIGNING_SECRET, &body),
        ),
        (
            "301 s old",
            body.clone(),
            with(now - 301, SIGNING_SECRET, &body),
        ),
        // Well past the 300 s window: the server reads its clock a moment
        // after `now`, which brings a stamp only 301 s ahead back inside it
        // on a loaded machine (the exact boundary is the unit test's).
        (
            "360 s ahead",
            body.clone(),
            with(now + 360, SIGNING_SECRET, &body),
        ),
        ("v1 prefix", body.clone(), v1),
        (
            "no timestamp",
            body.clone(),
            vec![(
                "X-Slack-Signature",
                with(now, SIGNING_SECRET, &body)[1].1.clone(),
            )],
        ),
    ];
    for (what, body, headers) in cases {
        let (status, answer) = post(&served, body, &headers).await;
        assert_eq!(status, 401, "{what}: {answer}");
        assert_eq!(code(&answer), "unauthorized", "{what}: {answer}");
    }
    let (_, record) = api.get(&served.url(&format!("/approvals/{key}"))).await;
    assert_eq!(record["status"], "PENDING", "nothing changed");

    // Signed properly it goes through, without a bearer token.
    let (status, answer) = post(&served, body.clone(), &with(now, SIGNING_SECRET, &body)).await;
    assert_eq!(status, 200, "{answer}");
    let logs = served.logs();
    assert!(!logs.contains(SIGNING_SECRET), "{logs}");
}

#[tokio::test(flavor = "multi_thread")]
async fn an_empty_signing_secret_refuses_everything_and_no_slack_means_no_route() {
    let slack = start_api();
    let ws = Workspace::new(&spec("http://127.0.0.1:9"));
    let mut env = env(slack.port);
    env.retain(|(k, _)| *k != "SLACK_SIGNING_SECRET");
    env.push(("SLACK_SIGNING_SECRET", String::new()));
    let served = Served::start(&ws.spec, &ws.path().join("state.db"), &env_refs(&env), &[]);
    let body = click_body("k", "tollgate_approve", USER, "http://127.0.0.1:9/respond");
    let (ts, sig) = sign("", now_unix(), &body);
    let (status, answer) = post(
        &served,
        body,
        &[
            ("X-Slack-Request-Timestamp", ts),
            ("X-Slack-Signature", sig),
        ],
    )
    .await;
    assert_eq!(status, 503, "{answer}");
    assert!(
        served
            .logs()
            .contains("signing_secret resolves to an empty value")
    );

    let plain = Workspace::new(GATED_SPEC);
    let served = Served::start(&plain.spec, &plain.path().join("state.db"), &[], &[]);
    let (status, answer) = post(&served, b"payload=%7B%7D".to_vec(), &[]).await;
    assert_eq!(status, 404, "{answer}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_body_over_64_kib_is_refused() {
    let slack = start_api();
    let ws = Workspace::new(&spec("http://127.0.0.1:9"));
    let env = env(slack.port);
    let served = Served::start(&ws.spec, &ws.path().join("state.db"), &env_refs(&env), &[]);
    let body = vec![b'a'; 64 * 1024 + 1];
    let (ts, sig) = sign(SIGNING_SECRET, now_unix(), &body);
    let (status, answer) = post(
        &served,
        body,
        &[
            ("X-Slack-Request-Timestamp", ts),
            ("X-Slack-Signature", sig),
        ],
    )
    .await;
    assert_eq!(status, 413, "{answer}");
}
