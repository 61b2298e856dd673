//! GET /readyz on a real `tollgate serve`: ready (200) while the store
//! answers reads, `not_ready` (503) while its PostgreSQL cluster is
//! stopped (and /metrics fails the scrape), ready again once it is back;
//! no token needed, as for /healthz. And neither probe path, nor
//! /metrics, may be a webhook's.
//!
//! The outage test stops its database, so it runs on a cluster of its own.

use crate::common;
use crate::common::postgres;
use crate::common::server;

use std::time::Duration;

use common::{GATED_SPEC, Workspace};
use serde_json::json;
use server::{Api, Served, code};

const TOKENS: &str = "alice:token-for-alice";

/// Poll `GET url` until it answers `status` (for up to 60 s): the body.
async fn until_status(api: &Api, url: &str, status: u16) -> serde_json::Value {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        let (got, body) = api.get(url).await;
        if got == status {
            return body;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{url} never answered {status}; last {got} {body}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn ready_without_a_token_while_the_store_answers() {
    let ws = Workspace::new(GATED_SPEC);
    let served = Served::start(
        &ws.spec,
        &ws.path().join("state.db"),
        &[("TOLLGATE_API_TOKENS", TOKENS)],
        &[],
    );
    let anonymous = Api::new();
    let (status, body) = anonymous.get(&served.url("/readyz")).await;
    assert_eq!((status, body), (200, json!({"status": "ready"})));
    // The liveness check is unchanged beside it.
    let (status, body) = anonymous.get(&served.url("/healthz")).await;
    assert_eq!((status, body), (200, json!({"status": "ok"})));
    // Readiness is a GET: anything else is refused like any route's.
    let (status, body) = anonymous.post(&served.url("/readyz"), json!({})).await;
    assert_eq!(status, 405, "{body}");
    assert_eq!(code(&body), "method_not_allowed", "{body}");
}

#[tokio::test(flavor = "multi_thread")]
async fn not_ready_while_postgres_is_stopped_and_ready_once_it_is_back() {
    let cluster = postgres::private_cluster();
    let db = cluster.database();
    let ws = Workspace::new(GATED_SPEC);
    let served = Served::start_on_database(&ws.spec, &db.url, &[], &[]);
    let api = Api::new();
    let (status, body) = api.get(&served.url("/readyz")).await;
    assert_eq!((status, body), (200, json!({"status": "ready"})));

    cluster.stop();
    let body = until_status(&api, &served.url("/readyz"), 503).await;
    assert_eq!(body["status"], "not_ready", "{body}");
    assert_eq!(code(&body), "not_ready", "{body}");
    let message = body["error"]["message"].as_str().unwrap_or("");
    assert!(
        message.starts_with("the store does not answer reads")
            || message.contains("did not answer"),
        "{message}"
    );
    assert!(
        message.contains("PostgreSQL") || message.contains("postgres"),
        "names the store: {message}"
    );
    served
        .log_line("readiness check: not ready", Duration::from_secs(10))
        .await;
    // A scrape fails too (Prometheus marks the target down) rather than
    // leave the store's gauges out.
    let (status, body) = api.get(&served.url("/metrics")).await;
    assert_eq!(status, 503, "{body}");
    assert_eq!(code(&body), "store_unavailable", "{body}");

    cluster.start_again();
    let body = until_status(&api, &served.url("/readyz"), 200).await;
    assert_eq!(body, json!({"status": "ready"}));
    // And it serves again: a run pauses.
    api.pause(&served, json!({"order_id": "after-outage"}))
        .await;
}

#[test]
fn the_probe_and_metrics_paths_are_not_a_webhook_s() {
    for path in ["/readyz", "/metrics", "/metrics/hook"] {
        let ws = Workspace::new(&GATED_SPEC.replace(
            "steps:",
            &format!("trigger:\n  webhook:\n    path: {path}\nsteps:"),
        ));
        let failure = Served::try_start(&ws.spec, &ws.path().join("state.db"), &[], &[])
            .err()
            .expect("the server must refuse the webhook path");
        assert_eq!(failure.code, Some(2), "{}", failure.stderr);
        assert!(failure.stderr.contains("clashes"), "{}", failure.stderr);
        assert!(failure.stderr.contains(path), "{}", failure.stderr);
    }
}
