//! The live streams the pages' script listens to: the inbox's stream says
//! `inbox` when a pause arrives or a decision takes one away (the script
//! then refetches `?fragment=rows`); a timeline's stream carries the run's
//! events; both need a session.

use std::time::Duration;

use serde_json::json;

use super::client::Client;
use crate::common::server::Served;
use crate::common::{GATED_SPEC, Workspace};

/// Reads a cookie-authenticated event stream until `needle` shows up.
struct Stream(reqwest::Response, String);

impl Stream {
    async fn open(served: &Served, client: &Client, path: &str) -> Stream {
        let cookie = client
            .cookies
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join("; ");
        let response = reqwest::Client::new()
            .get(served.url(path))
            .header("cookie", cookie)
            .header("accept", "text/event-stream")
            .send()
            .await
            .expect("open stream");
        assert_eq!(response.status().as_u16(), 200, "{path}");
        assert!(
            response.headers()["content-type"]
                .to_str()
                .unwrap()
                .starts_with("text/event-stream")
        );
        Stream(response, String::new())
    }

    async fn wait_for(&mut self, needle: &str, within: Duration) {
        let deadline = tokio::time::Instant::now() + within;
        while !self.1.contains(needle) {
            match tokio::time::timeout_at(deadline, self.0.chunk()).await {
                Ok(Ok(Some(chunk))) => self.1.push_str(&String::from_utf8_lossy(&chunk)),
                other => panic!("no {needle:?} before {other:?}; so far:\n{}", self.1),
            }
        }
        self.1.clear();
    }
}

#[tokio::test]
async fn the_inbox_and_timeline_streams_follow_pauses_and_decisions() {
    let ws = Workspace::new(GATED_SPEC);
    let (served, api) = super::served_for_alice(&ws);
    let mut alice = Client::signed_in(&served, "tok-a").await;
    let mut inbox = Stream::open(&served, &alice, "/ui/stream").await;

    let paused = super::agent()
        .pause(&served, json!({"order_id": "A1"}))
        .await;
    inbox
        .wait_for("event: inbox", Duration::from_secs(10))
        .await;
    let rows = alice.get("/ui?fragment=rows").await;
    assert!(rows.body.contains(&format!("data-key=\"{}\"", paused.key)));
    assert!(!rows.body.contains("<html"), "a fragment, not a page");

    let mut timeline = Stream::open(
        &served,
        &alice,
        &format!("/ui/runs/{}/stream", paused.run_id),
    )
    .await;
    timeline
        .wait_for("event: awaiting_approval", Duration::from_secs(10))
        .await;
    let (status, _) = api
        .post(
            &served.url(&format!("/approvals/{}/approve", paused.key)),
            json!({}),
        )
        .await;
    assert_eq!(status, 200);
    inbox
        .wait_for("event: inbox", Duration::from_secs(10))
        .await;
    timeline
        .wait_for("event: run_completed", Duration::from_secs(10))
        .await;
    let rows = alice.get("/ui?fragment=rows").await;
    assert!(rows.body.contains("id=\"inbox-empty\""), "{}", rows.body);

    // Not signed in: sent to the login page, no stream.
    let mut stranger = Client::new(&served);
    let refused = stranger.get("/ui/stream").await;
    assert_eq!(refused.status, 303);
}
