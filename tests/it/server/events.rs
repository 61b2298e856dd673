//! Event streams: a client on a paused run's stream sees the stored events,
//! stays open, and sees approval_resolved ... run_completed when the run is
//! approved: through the same server (live broadcast) or through another
//! server sharing the store (the stream polls the store).

use crate::common;
use crate::common::server;

use std::time::Duration;

use common::{GATED_SPEC, Workspace};
use serde_json::json;
use server::{Api, Paused, Served, SseEvent, SseNext, SseStream};

/// Read the stored events up to the pause, then check the stream stays open.
async fn read_until_paused(stream: &mut SseStream) -> Vec<SseEvent> {
    let mut seen = Vec::new();
    loop {
        match stream.next(Duration::from_secs(5)).await {
            SseNext::Event(e) => {
                let paused = e.kind() == "awaiting_approval";
                seen.push(e);
                if paused {
                    break;
                }
            }
            other => panic!("expected the stored events, got {other:?} after {seen:?}"),
        }
    }
    match stream.next(Duration::from_millis(1500)).await {
        SseNext::TimedOut => seen,
        other => panic!("a paused run's stream stays open and quiet, got {other:?}"),
    }
}

fn kinds(events: &[SseEvent]) -> Vec<&str> {
    events.iter().map(SseEvent::kind).collect()
}

/// Approve `key` on `served`, then read `stream` to the run's end: the
/// resume, from the decision to the run's completion.
async fn approve_and_read_to_the_end(
    api: &Api,
    served: &Served,
    key: &str,
    stream: &mut SseStream,
) -> Vec<SseEvent> {
    let (status, body) = api
        .post(&served.url(&format!("/approvals/{key}/approve")), json!({}))
        .await;
    assert_eq!(status, 200, "{body}");
    let after = stream.collect_until_end(Duration::from_secs(10)).await;
    let after_kinds = kinds(&after);
    assert_eq!(
        after_kinds.first(),
        Some(&"approval_resolved"),
        "{after_kinds:?}"
    );
    assert_eq!(
        after_kinds.last(),
        Some(&"run_completed"),
        "{after_kinds:?}"
    );
    after
}

async fn approve_and_watch(watch_on: &Served, approve_on: &Served) {
    let api = Api::new();
    let Paused { run_id, key } = api.pause(watch_on, json!({"order_id": "E1"})).await;
    let mut stream =
        SseStream::open(&api, &watch_on.url(&format!("/runs/{run_id}/events")), None).await;
    let before = read_until_paused(&mut stream).await;
    assert_eq!(kinds(&before)[0], "run_started");

    let after = approve_and_read_to_the_end(&api, approve_on, &key, &mut stream).await;
    let all: Vec<&SseEvent> = before.iter().chain(after.iter()).collect();
    for (i, event) in all.iter().enumerate() {
        assert_eq!(
            event.data["seq"],
            json!(i + 1),
            "in order, no gaps, no repeats"
        );
        assert_eq!(event.id.as_deref(), Some((i + 1).to_string().as_str()));
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_paused_stream_shows_the_resume_in_the_same_server() {
    let ws = Workspace::new(GATED_SPEC);
    let state = ws.path().join("state.db");
    let a = Served::start(&ws.spec, &state, &[], &[]);
    approve_and_watch(&a, &a).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_paused_stream_shows_a_resume_by_another_server() {
    let ws = Workspace::new(GATED_SPEC);
    let state = ws.path().join("state.db");
    let a = Served::start(&ws.spec, &state, &[], &[]);
    let b = Served::start(&ws.spec, &state, &[], &[]);
    approve_and_watch(&a, &b).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn last_event_id_resumes_after_that_event() {
    let ws = Workspace::new(GATED_SPEC);
    let a = Served::start(&ws.spec, &ws.path().join("state.db"), &[], &[]);
    let api = Api::new();
    let Paused { run_id, key } = api.pause(&a, json!({"order_id": "E1"})).await;
    api.post(
        &a.url(&format!("/approvals/{key}/approve?wait=true")),
        json!({}),
    )
    .await;
    let url = a.url(&format!("/runs/{run_id}/events"));
    let everything = SseStream::open(&api, &url, None)
        .await
        .collect_until_end(Duration::from_secs(5))
        .await;
    let rest = SseStream::open(&api, &url, Some(3))
        .await
        .collect_until_end(Duration::from_secs(5))
        .await;
    assert_eq!(rest.len(), everything.len() - 3);
    assert_eq!(rest[0].id.as_deref(), Some("4"));
    // A client that already saw the final event gets an empty, closed stream.
    let last = everything.len() as u64;
    let none = SseStream::open(&api, &url, Some(last))
        .await
        .collect_until_end(Duration::from_secs(5))
        .await;
    assert!(none.is_empty());
}

/// A `Last-Event-ID` past the run's last event (another run's id, a
/// made-up number, u64::MAX) is taken as "seen everything so far": an
/// ended run's stream closes, and a paused run's stream stays open and
/// still shows the resume through to the run's end.
#[tokio::test(flavor = "multi_thread")]
async fn a_last_event_id_beyond_the_run_still_ends_with_the_run() {
    let ws = Workspace::new(GATED_SPEC);
    let a = Served::start(&ws.spec, &ws.path().join("state.db"), &[], &[]);
    let api = Api::new();

    // Paused: the stream is quiet, then shows the resume and ends.
    let Paused { run_id, key } = api.pause(&a, json!({"order_id": "E1"})).await;
    let url = a.url(&format!("/runs/{run_id}/events"));
    let mut stream = SseStream::open(&api, &url, Some(1_000_000)).await;
    match stream.next(Duration::from_millis(1500)).await {
        SseNext::TimedOut => {}
        other => panic!("nothing new on a paused run, got {other:?}"),
    }
    approve_and_read_to_the_end(&api, &a, &key, &mut stream).await;

    // Ended: nothing to send, and the stream closes.
    for id in [1_000_000, u64::MAX] {
        let none = SseStream::open(&api, &url, Some(id))
            .await
            .collect_until_end(Duration::from_secs(5))
            .await;
        assert!(none.is_empty(), "{none:?}");
    }
}
