//! GET never changes state: a sweep of every GET route (with no expiry
//! sweep due) leaves the SQLite file byte for byte as it was.

use crate::common;
use crate::common::server;

use std::path::Path;
use std::time::Duration;

use common::{GATED_SPEC, Workspace};
use serde_json::json;
use server::{Api, Served, SseNext, SseStream};

/// The database and its write-ahead log. (The -shm file is left out: it is
/// the WAL index, where readers record their read marks.)
fn bytes(db: &Path) -> Vec<u8> {
    let mut out = std::fs::read(db).expect("db");
    let mut wal = db.as_os_str().to_owned();
    wal.push("-wal");
    out.extend(std::fs::read(wal).unwrap_or_default());
    out
}

#[tokio::test(flavor = "multi_thread")]
async fn gets_leave_the_store_untouched() {
    let ws = Workspace::new(GATED_SPEC);
    let state = ws.path().join("state.db");
    let served = Served::start(&ws.spec, &state, &[], &[]);
    let api = Api::new();

    // One paused run, one completed, a few more pending for pagination.
    let mut paused = Vec::new();
    for i in 0..3 {
        let (_, run) = api
            .post(
                &served.url("/runs?wait=true"),
                json!({"input": {"order_id": i}}),
            )
            .await;
        paused.push((
            run["id"].as_str().unwrap().to_string(),
            run["pending_approval"]["key"].as_str().unwrap().to_string(),
        ));
    }
    let (done_run, done_key) = paused.pop().unwrap();
    let (status, _) = api
        .post(
            &served.url(&format!("/approvals/{done_key}/approve?wait=true")),
            json!({}),
        )
        .await;
    assert_eq!(status, 200);
    let (paused_run, paused_key) = paused[0].clone();
    // `?wait=true` answers once the run's end is stored, the last write
    // anything here makes: no wait for writes to settle.
    let (_, done) = api.get(&served.url(&format!("/runs/{done_run}"))).await;
    assert_eq!(done["status"], "completed", "{done}");

    let before = bytes(&state);
    for _ in 0..3 {
        for path in [
            "/healthz".to_string(),
            format!("/runs/{paused_run}"),
            format!("/runs/{done_run}"),
            "/approvals".to_string(),
            "/approvals?limit=1".to_string(),
            format!("/approvals/{paused_key}"),
            format!("/approvals/{done_key}"),
            "/approvals/00000000-0000-4000-8000-000000000000".to_string(),
            "/runs/00000000-0000-4000-8000-000000000000".to_string(),
            "/no/such/route".to_string(),
        ] {
            api.get(&served.url(&path)).await;
        }
        let (_, page) = api.get(&served.url("/approvals?limit=1")).await;
        let cursor = page["next_cursor"].as_str().unwrap().to_string();
        api.get(&served.url(&format!(
            "/approvals?limit=1&cursor={}",
            cursor.replace(':', "%3A").replace('|', "%7C")
        )))
        .await;
        // Event streams: a finished run's (ends), a paused run's (stays open).
        let mut done =
            SseStream::open(&api, &served.url(&format!("/runs/{done_run}/events")), None).await;
        done.collect_until_end(Duration::from_secs(5)).await;
        let mut open = SseStream::open(
            &api,
            &served.url(&format!("/runs/{paused_run}/events")),
            None,
        )
        .await;
        loop {
            match open.next(Duration::from_millis(1500)).await {
                SseNext::Event(_) => continue,
                SseNext::TimedOut => break,
                SseNext::Ended => panic!("a paused run's stream stays open"),
            }
        }
    }
    assert!(before == bytes(&state), "a GET changed the state file");
}
