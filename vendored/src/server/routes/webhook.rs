//! POST (the spec's `trigger.webhook.path`): start a run from a webhook.
//!
//! No bearer token: a webhook sender authenticates with an HMAC signature
//! when the spec sets `secret`. The secret is a `${NAME}` reference resolved
//! from the environment at each request, so rotating it needs no restart.

use std::collections::BTreeMap;

use axum::Json;
use axum::extract::{FromRequest, Query, Request};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{Map, Value};

use crate::server::http::extract::{RawBody, json_content_type, parse_json};
use crate::server::http::state::AppState;
use crate::service::ApiError;
use crate::service::tasks;
use crate::service::views::{RunStarted, Trigger};
use crate::store::KeyClaim;
use crate::support::webhook_signature::{self as signature, SIGNATURE_HEADER, Verified};

pub(crate) async fn receive(state: AppState, request: Request) -> Result<Response, ApiError> {
    let Some(hook) = state.agent.spec().trigger.webhook.clone() else {
        return Err(ApiError::NotFound {
            method: "POST".into(),
            path: request.uri().path().to_string(),
        });
    };
    let headers = request.headers().clone();
    let uri = request.uri().clone();
    let RawBody(body) = RawBody::from_request(request, &()).await?;

    let mut replay_key = None;
    if let Some(secret) = &hook.secret {
        let secret = match crate::support::secrets::resolve_env(secret) {
            Ok(value) if !value.is_empty() => value,
            Ok(_) => {
                tracing::error!("the webhook secret resolves to an empty value; refusing webhooks");
                return Err(ApiError::Unavailable(
                    "the webhook secret is not configured",
                ));
            }
            Err(e) => {
                // Names the variable, never a value.
                tracing::error!(error = %e, "the webhook secret is not set; refusing webhooks");
                return Err(ApiError::Unavailable(
                    "the webhook secret is not configured",
                ));
            }
        };
        let presented = headers.get(SIGNATURE_HEADER).and_then(|v| v.to_str().ok());
        let now = state.agent.clock().now().timestamp();
        let verified = signature::check(secret.as_bytes(), &body, presented, now).map_err(|e| {
            tracing::debug!(path = %hook.path, reason = %e, "webhook refused: bad signature");
            ApiError::WebhookSignature(e)
        })?;
        if let Verified::Timestamped { replay_key: key } = verified {
            replay_key = Some(format!("webhook:{}:{key}", state.agent_id()));
        }
    } else {
        // Unsigned, the JSON type is what keeps a browser page's plain
        // cross-origin POST out (as on every JSON route). A signed webhook
        // takes any type: the signature already proves the sender, and
        // some senders label JSON text/plain.
        json_content_type(&headers)?;
    }

    // Kept as text: a wide body is not built into a tree (see `json_doc`).
    let input = parse_json::<Box<serde_json::value::RawValue>>(&body)?;
    let input = crate::support::json_doc::JsonDoc::from_raw(input)
        .map_err(|e| ApiError::invalid(e.to_string()))?;
    let query = Query::<BTreeMap<String, String>>::try_from_uri(&uri)
        .map(|Query(q)| q)
        .map_err(|e| ApiError::invalid(e.body_text()))?;
    let trigger = Trigger::Webhook {
        path: hook.path.clone(),
        headers: header_object(&headers),
        query,
        received_at: crate::support::time::format_utc(state.agent.clock().now()),
    }
    .into_value()?;
    let started = match replay_key {
        None => tasks::start_run(&state.agent, &state.background, input, trigger)
            .await
            .map(Some),
        // The request's claim and its run are one write: a copy sent again
        // within the window is refused by every server sharing the store,
        // and a failure (or a crash) before the write leaves the sender's
        // retry free to start the run.
        Some(key) => {
            let once = replay_claim(&state, key);
            tasks::start_run_once(&state.agent, &state.background, input, trigger, once).await
        }
    };
    match started? {
        Some((run_id, _driving)) => {
            Ok((StatusCode::ACCEPTED, Json(RunStarted { run_id })).into_response())
        }
        None => Err(ApiError::Replayed),
    }
}

/// The claim of a timestamped request. It outlives the replay window (a
/// `t` up to the window ahead of now, plus the window), after which the
/// timestamp check alone refuses the request.
fn replay_claim(state: &AppState, key: String) -> KeyClaim {
    let now = state.agent.clock().now();
    let hold = std::time::Duration::from_secs(2 * signature::REPLAY_WINDOW_SECS.unsigned_abs() + 1);
    KeyClaim {
        key,
        owner: "webhook".into(),
        now,
        expires_at: crate::support::time::add(now, hold),
    }
}

/// Headers as a JSON object; repeated headers joined with ", ".
fn header_object(headers: &HeaderMap) -> Map<String, Value> {
    let mut out = Map::new();
    for (name, value) in headers {
        let value = String::from_utf8_lossy(value.as_bytes()).into_owned();
        match out.get_mut(name.as_str()) {
            Some(Value::String(existing)) => {
                existing.push_str(", ");
                existing.push_str(&value);
            }
            _ => {
                out.insert(name.as_str().to_string(), Value::String(value));
            }
        }
    }
    out
}
