//! GET /healthz: liveness, no auth, and whether the store can take writes
//! (503 when it cannot: a read-only file, a full disk, a damaged file, a
//! database that is down). Changes nothing in the store while it is healthy.
//!
//! GET /readyz: readiness, no auth: whether this process should get
//! traffic now. 200 when the store answers a read, every background task
//! runs and the server is not shutting down; 503 `not_ready` otherwise, so
//! a load balancer drains it during the shutdown grace, while its database
//! is away, and while a background task that died waits to restart (see
//! `server/workers/supervisor.rs`).

use std::time::Duration;

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;

use crate::server::http::state::AppState;
use crate::service::views::{Health, HealthError};

/// Longest a readiness read may take: a database that hangs is not ready
/// either, and a probe must answer before its own timeout.
const READ_TIMEOUT: Duration = Duration::from_secs(5);

pub(super) async fn check(State(state): State<AppState>) -> (StatusCode, Json<Health>) {
    match state.agent.store().check_writable().await {
        Ok(()) => (
            StatusCode::OK,
            Json(Health {
                status: "ok",
                error: None,
            }),
        ),
        Err(e) => {
            tracing::error!(error = %e, "health check: the store cannot take writes");
            (
                StatusCode::SERVICE_UNAVAILABLE,
                Json(Health {
                    status: "unavailable",
                    error: Some(HealthError {
                        code: "store_unavailable",
                        message: e.to_string(),
                    }),
                }),
            )
        }
    }
}

pub(super) async fn ready(State(state): State<AppState>) -> (StatusCode, Json<Health>) {
    if *state.shutdown.borrow() {
        return readiness(Err(
            "the server is shutting down: it takes no new requests".into()
        ));
    }
    let down = state.tasks.down();
    if !down.is_empty() {
        return readiness(Err(format!(
            "background task(s) {} died and are restarting: notifications, timers or recovery wait until they run",
            down.join(", ")
        )));
    }
    // A read by primary key of a run that cannot exist: one round trip
    // through the store's connection (or pool), nothing scanned.
    let read = tokio::time::timeout(READ_TIMEOUT, state.agent.store().get_run("readyz-probe"));
    let outcome = match read.await {
        Ok(Ok(_)) => Ok(()),
        Ok(Err(e)) => Err(format!("the store does not answer reads: {e}")),
        Err(_) => Err(format!(
            "the store did not answer a read within {READ_TIMEOUT:?}"
        )),
    };
    if let Err(why) = &outcome {
        tracing::warn!(reason = %why, "readiness check: not ready");
    }
    readiness(outcome)
}

/// The answer for a readiness check that found `outcome`.
fn readiness(outcome: Result<(), String>) -> (StatusCode, Json<Health>) {
    match outcome {
        Ok(()) => (
            StatusCode::OK,
            Json(Health {
                status: "ready",
                error: None,
            }),
        ),
        Err(message) => (
            StatusCode::SERVICE_UNAVAILABLE,
            Json(Health {
                status: "not_ready",
                error: Some(HealthError {
                    code: crate::service::NOT_READY,
                    message,
                }),
            }),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    /// The handler on a real agent and store: ready, then not from the
    /// moment shutdown begins (a probe on a still-open connection, or the
    /// router mounted in an app that keeps serving).
    #[tokio::test]
    async fn a_server_that_is_shutting_down_is_not_ready() {
        let spec = crate::Spec::parse(
            "version: 1\nagent: probe\nsteps:\n  - id: s\n    set: { a: 1 }\n",
            "probe.yaml",
        )
        .unwrap();
        let store: crate::SharedStore = Arc::new(crate::store::MemoryStore::new());
        let (stop, shutdown) = tokio::sync::watch::channel(false);
        let agent = crate::AgentRun::new(Arc::new(spec), store);
        let state: AppState = crate::server::standalone_state(agent, shutdown);
        let (status, _) = ready(State(state.clone())).await;
        assert_eq!(status, StatusCode::OK);
        stop.send(true).unwrap();
        let (status, Json(body)) = ready(State(state)).await;
        assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
        let body = serde_json::to_value(body).unwrap();
        assert_eq!(body["error"]["code"], "not_ready");
        assert!(
            body["error"]["message"]
                .as_str()
                .is_some_and(|m| m.contains("shutting down")),
            "{body}"
        );
    }

    /// A background task that died is named by `/readyz` until its
    /// restart, after which the server is ready again.
    #[tokio::test(start_paused = true)]
    async fn a_server_whose_background_task_died_is_not_ready_until_it_restarts() {
        let spec = crate::Spec::parse(
            "version: 1\nagent: probe\nsteps:\n  - id: s\n    set: { a: 1 }\n",
            "probe.yaml",
        )
        .unwrap();
        let store: crate::SharedStore = Arc::new(crate::store::MemoryStore::new());
        let (_stop, shutdown) = tokio::sync::watch::channel(false);
        let agent = crate::AgentRun::new(Arc::new(spec), store);
        let mut supervisor = crate::server::workers::supervisor::Supervisor::new(shutdown.clone());
        let runs = Arc::new(std::sync::atomic::AtomicU32::new(0));
        let counted = Arc::clone(&runs);
        supervisor.spawn("outbox".into(), move |mut stop| {
            let first = counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst) == 0;
            async move {
                assert!(!first, "the first run dies");
                let _ = stop.wait_for(|stopped| *stopped).await;
            }
        });
        let mut state: AppState = crate::server::standalone_state(agent, shutdown);
        state.tasks = supervisor.health();
        // Yielding keeps the paused clock still: the restart is not due.
        while state.tasks.down().is_empty() {
            tokio::task::yield_now().await;
        }
        let (status, Json(body)) = ready(State(state.clone())).await;
        assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
        let body = serde_json::to_value(body).unwrap();
        assert_eq!(
            body["error"]["message"],
            "background task(s) outbox died and are restarting: notifications, timers or recovery wait until they run"
        );
        tokio::time::sleep(Duration::from_secs(2)).await;
        while runs.load(std::sync::atomic::Ordering::SeqCst) < 2 {
            tokio::task::yield_now().await;
        }
        let (status, _) = ready(State(state)).await;
        assert_eq!(status, StatusCode::OK);
    }

    #[test]
    fn not_ready_is_a_503_with_a_stable_code_and_the_reason() {
        let (status, Json(body)) = readiness(Err("the server is shutting down".into()));
        assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
        let body = serde_json::to_value(body).unwrap();
        assert_eq!(body["status"], "not_ready");
        assert_eq!(body["error"]["code"], "not_ready");
        assert_eq!(body["error"]["message"], "the server is shutting down");

        let (status, Json(body)) = readiness(Ok(()));
        assert_eq!(status, StatusCode::OK);
        assert_eq!(
            serde_json::to_value(body).unwrap(),
            serde_json::json!({"status": "ready"})
        );
    }
}
