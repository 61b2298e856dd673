//! `POST /mcp`: MCP's Streamable HTTP transport, stateless.
//!
//! Each POST carries one JSON-RPC message (or a batch): a request is
//! answered in the response body as `application/json`, a notification
//! or a client's response gets 202 and no body. The server opens no
//! stream of its own (GET is 405) and issues no `Mcp-Session-Id`: no tool
//! needs anything held between calls, since every request lives in the
//! store. So any server on the store answers any call, a restart loses
//! nothing, and nodes behind a load balancer need no affinity. (A session
//! id a client sends anyway is ignored.)
//!
//! Before the message is read: the bearer token (`auth::require_requester`,
//! the route's layer: 401 with `WWW-Authenticate: Bearer`), the Origin
//! (`server/http/origin.rs`, every route's: 403 for another site's page), a JSON
//! `Content-Type` (415) and, leniently, an `Accept` that takes JSON (406).
//! A request's `MCP-Protocol-Version` header, when present on anything but
//! `initialize`, must name a version this server speaks (400).

use axum::Extension;
use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::Value;

use super::jsonrpc::{self, INVALID_REQUEST, Parsed, RpcError};
use super::protocol::{self, Context};
use crate::server::http::extract::{RawBody, json_content_type};
use crate::server::http::state::AppState;
use crate::service::{Caller, Scope};

/// The header a client names its negotiated protocol version in.
const PROTOCOL_VERSION_HEADER: &str = "mcp-protocol-version";

/// POST /mcp.
pub(crate) async fn post(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    Extension(scope): Extension<Scope>,
    headers: HeaderMap,
    RawBody(body): RawBody,
) -> Response {
    // Refusals of the transport are JSON-RPC errors too (id null: the
    // message is not read), which MCP clients surface as such.
    if let Err(e) = json_content_type(&headers) {
        return refusal(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            format!("{e}: send the JSON-RPC message as application/json"),
            None,
        );
    }
    if !accepts_json(&headers) {
        return refusal(
            StatusCode::NOT_ACCEPTABLE,
            "Accept must include application/json: this server answers MCP in JSON".into(),
            None,
        );
    }
    let parsed = match jsonrpc::parse(&body) {
        Ok(parsed) => parsed,
        Err(error) => return json(StatusCode::BAD_REQUEST, error),
    };
    if !is_initialize(&parsed)
        && let Some(version) = headers.get(PROTOCOL_VERSION_HEADER)
    {
        let version = String::from_utf8_lossy(version.as_bytes());
        if !protocol::is_supported(version.trim()) {
            return refusal(
                StatusCode::BAD_REQUEST,
                format!(
                    "MCP-Protocol-Version {:?} is not spoken here; this server speaks {}",
                    version.chars().take(40).collect::<String>(),
                    protocol::VERSIONS.join(" and ")
                ),
                Some(serde_json::json!({ "supported": protocol::VERSIONS })),
            );
        }
    }
    let context = Context {
        state: &state,
        caller: &caller,
        scope,
    };
    match parsed {
        Parsed::Single(message) => match protocol::handle(&context, message).await {
            Some(answer) => json(StatusCode::OK, answer),
            None => StatusCode::ACCEPTED.into_response(),
        },
        Parsed::Batch(messages) => match super::batch::handle(&context, messages).await {
            Some(answers) => json(StatusCode::OK, answers),
            None => StatusCode::ACCEPTED.into_response(),
        },
    }
}

fn refusal(status: StatusCode, message: String, data: Option<Value>) -> Response {
    let mut error = RpcError::new(INVALID_REQUEST, message);
    error.data = data;
    json(status, jsonrpc::failure(Value::Null, error))
}

fn json(status: StatusCode, body: Value) -> Response {
    (
        status,
        [(header::CONTENT_TYPE, "application/json")],
        Body::from(body.to_string()),
    )
        .into_response()
}

fn is_initialize(parsed: &Parsed) -> bool {
    matches!(parsed, Parsed::Single(message) if message.get("method").and_then(Value::as_str) == Some("initialize"))
}

/// MCP clients send `Accept: application/json, text/event-stream`; this
/// server answers JSON only, so it needs JSON to be acceptable. Lenient:
/// no header, `*/*`, `application/*`, and any q-value pass.
fn accepts_json(headers: &HeaderMap) -> bool {
    let mut values = headers.get_all(header::ACCEPT).iter().peekable();
    if values.peek().is_none() {
        return true;
    }
    values.any(|value| {
        String::from_utf8_lossy(value.as_bytes())
            .split(',')
            .map(|range| {
                range
                    .split(';')
                    .next()
                    .unwrap_or("")
                    .trim()
                    .to_ascii_lowercase()
            })
            .any(|range| range == "application/json" || range == "application/*" || range == "*/*")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with_accept(values: &[&str]) -> HeaderMap {
        let mut headers = HeaderMap::new();
        for value in values {
            headers.append(header::ACCEPT, value.parse().unwrap());
        }
        headers
    }

    #[test]
    fn accept_is_read_leniently_but_must_take_json() {
        for ok in [
            &[][..],
            &["application/json, text/event-stream"][..],
            &["text/event-stream", "application/json"][..],
            &["*/*"][..],
            &["application/*;q=0.5"][..],
            &["Application/JSON"][..],
        ] {
            assert!(accepts_json(&with_accept(ok)), "{ok:?}");
        }
        for refused in [&["text/event-stream"][..], &["text/html"][..]] {
            assert!(!accepts_json(&with_accept(refused)), "{refused:?}");
        }
    }
}
