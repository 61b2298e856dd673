//! Runs left `stuck`, for the tests that need one: a POST tool gated by
//! an approval, a stub that holds the first calls until the test has killed
//! the server, and the helpers to get a call in flight.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use serde_json::json;

use super::server::{Api, Served};
use super::stub_server::{Response, StubServer};

/// Short, so the tests wait about a second for a dead server's lease.
pub const LEASE: &str = "1s";

/// The stub holds the first `slow` calls this long: long enough for the
/// test to kill the server while the call is in flight, and to never
/// answer it (the caller is dead by then).
pub const HOLD: Duration = Duration::from_secs(20);

/// A stub that holds its first `slow` calls for [`HOLD`] and answers the
/// rest at once; every arrival is recorded.
pub fn holding_stub(slow: usize) -> StubServer {
    let seen = Arc::new(AtomicUsize::new(0));
    StubServer::start(move |_| {
        let n = seen.fetch_add(1, Ordering::SeqCst);
        let response = Response::json(200, json!({"id": format!("call-{n}")}));
        if n < slow {
            response.delayed(HOLD)
        } else {
            response
        }
    })
}

/// Poll `check` every 50 ms for up to 60 s.
pub async fn eventually(what: &str, mut check: impl AsyncFnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    while !check().await {
        assert!(tokio::time::Instant::now() < deadline, "never: {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// An approved POST; `on_crash` as given (or the default). `local` is the
/// HTTP caller without tokens; `alice` operates from the command line.
pub fn ship_spec(stub_url: &str, on_crash: Option<&str>) -> String {
    let on_crash = on_crash
        .map(|c| format!("\n    on_crash: {c}"))
        .unwrap_or_default();
    format!(
        r#"version: 1
agent: ship-desk
approvals:
  approvers: [local, alice]
tools:
  ship:
    http:
      method: POST
      url: "{stub_url}"
      json: {{ run: "{{{{ run.id }}}}" }}
    approval: required{on_crash}
steps:
  - id: ship
    tool: ship
    with: {{}}
  - id: done
    set: {{ shipped: "{{{{ steps.ship.output.body.id }}}}" }}
"#
    )
}

/// Pause a ship-desk run at its gate, approve it, and wait until the stub
/// holds the approved call. One caller both starts and decides: for a
/// server without tokens (every caller is `local`, exempt from separation
/// of duties); with tokens, use [`approve_until_called_by`].
pub async fn approve_until_called(
    api: &Api,
    served: &Served,
    stub: &StubServer,
) -> (String, String) {
    approve_until_called_by(api, api, served, stub).await
}

/// [`approve_until_called`] with the run started by `starter` and decided
/// by `decider`: whoever starts a run may not decide its gate.
pub async fn approve_until_called_by(
    starter: &Api,
    api: &Api,
    served: &Served,
    stub: &StubServer,
) -> (String, String) {
    let (code, run) = starter
        .post(&served.url("/runs?wait=true"), json!({"input": {}}))
        .await;
    assert_eq!(code, 200, "{run}");
    assert_eq!(run["status"], "awaiting_approval", "{run}");
    let run_id = run["id"].as_str().unwrap().to_string();
    let key = run["pending_approval"]["key"].as_str().unwrap().to_string();
    let (code, body) = api
        .post(&served.url(&format!("/approvals/{key}/approve")), json!({}))
        .await;
    assert_eq!(code, 200, "{body}");
    eventually("the approved call reaches the stub", async || {
        stub.count() >= 1
    })
    .await;
    (run_id, key)
}
