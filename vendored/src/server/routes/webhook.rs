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

use crate::server::api::{RunStarted, Trigger};
use crate::server::error::ApiError;
use crate::server::extract::{RawBody, json_content_type, parse_json};
use crate::server::signature::{self, SIGNATURE_HEADER, Verified};
use crate::server::state::AppState;
use crate::server::tasks;

pub(super) async fn receive(state: AppState, request: Request) -> Result<Response, ApiError> {
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
        let secret = match crate::secrets::resolve_env(secret) {
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

    let input: Value = parse_json(&body)?;
    let query = Query::<BTreeMap<String, String>>::try_from_uri(&uri)
        .map(|Query(q)| q)
        .map_err(|e| ApiError::invalid(e.body_text()))?;
    let trigger = Trigger::Webhook {
        path: hook.path.clone(),
        headers: header_object(&headers),
        query,
        received_at: crate::time::format_utc(state.agent.clock().now()),
    }
    .into_value()?;
    if let Some(key) = &replay_key {
        take_once(&state, key).await?;
    }
    match tasks::start_run(&state.agent, &state.background, input, trigger).await {
        Ok((run_id, _driving)) => {
            Ok((StatusCode::ACCEPTED, Json(RunStarted { run_id })).into_response())
        }
        Err(e) => {
            // No run was started: the sender's retry of this very request
            // must not be refused as a replay.
            if let Some(key) = &replay_key {
                let _ = state.agent.store().release_key(key, REPLAY_OWNER).await;
            }
            Err(e.into())
        }
    }
}

const REPLAY_OWNER: &str = "webhook";

/// Claim a timestamped request in the store, so a copy sent again within
/// the window is refused by this server and every other sharing the store.
/// The claim outlives the window (a `t` up to the window ahead of now, plus
/// the window), after which the timestamp check alone refuses it.
async fn take_once(state: &AppState, key: &str) -> Result<(), ApiError> {
    let now = state.agent.clock().now();
    let hold = std::time::Duration::from_secs(2 * signature::REPLAY_WINDOW_SECS.unsigned_abs() + 1);
    let fresh = state
        .agent
        .store()
        .claim_key(key, REPLAY_OWNER, now, crate::time::add(now, hold))
        .await?;
    if fresh {
        Ok(())
    } else {
        Err(ApiError::Replayed)
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
