//! GET /healthz: liveness, no auth, and whether the store can take writes
//! (503 when it cannot: a read-only file, a full disk, a damaged file, a
//! database that is down). Changes nothing in the store while it is healthy.

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;

use crate::server::api::{Health, HealthError};
use crate::server::state::AppState;

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
