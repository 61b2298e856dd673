//! GET /healthz: liveness, no auth, touches nothing.

use axum::Json;
use serde_json::{Value, json};

pub(super) async fn check() -> Json<Value> {
    Json(json!({ "status": "ok" }))
}
