//! The server's router: the API's routes behind their auth, gate requests
//! and MCP behind theirs, the inbox, the spec's webhook, and the answers
//! for unknown paths and methods.

use axum::extract::{Request, State};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::{Extension, Router, middleware};

use super::http::auth;
use super::http::extract::BodyLimit;
use super::http::state::AppState;
use super::{mcp, routes, ui};
use crate::service::ApiError;

pub(crate) fn router(state: AppState, max_body_bytes: usize) -> Router {
    // route_layer: only matched routes ask for a token, so an unknown
    // path is a 404 whoever asks.
    let api = routes::api().route_layer(middleware::from_fn_with_state(
        state.clone(),
        auth::require_caller,
    ));
    // Gate requests: any token may ask for approvals (a requester token
    // only this), so they have their own auth layer.
    let requests = routes::requests()
        // MCP's Streamable HTTP transport, stateless: POST only (a GET
        // stream or a DELETE of a session is 405; see server/mcp/http.rs).
        .route("/mcp", post(mcp::post))
        .route_layer(middleware::from_fn_with_state(
            state.clone(),
            auth::require_requester,
        ));
    routes::open()
        .merge(api)
        .merge(requests)
        // The approvals inbox: HTML pages for people, with their own
        // sign-in (a session cookie) and CSRF checks; not part of the
        // JSON API's document (see openapi.rs).
        .merge(ui::router(&state))
        // The webhook is dispatched from the fallback rather than routed:
        // its path comes from the spec, and axum would read `{...}` or `*`
        // in it as parameters (or panic on a clash with an API route).
        .fallback(fallback)
        .method_not_allowed_fallback(method_not_allowed)
        // Bodies are read by `extract::RawBody`, which applies the limit.
        .layer(Extension(BodyLimit(max_body_bytes)))
        .with_state(state)
}
async fn fallback(State(state): State<AppState>, request: Request) -> Response {
    let is_webhook = state
        .agent
        .spec()
        .trigger
        .webhook
        .as_ref()
        .is_some_and(|hook| hook.path == request.uri().path());
    if !is_webhook {
        if ui::owns(request.uri().path()) {
            return ui::not_found();
        }
        return not_found(&request).into_response();
    }
    if request.method() != axum::http::Method::POST {
        return method_not_allowed(request).await.into_response();
    }
    routes::receive_webhook(state, request)
        .await
        .into_response()
}

fn not_found(request: &Request) -> ApiError {
    ApiError::NotFound {
        method: request.method().to_string(),
        path: request.uri().path().to_string(),
    }
}

async fn method_not_allowed(request: Request) -> Response {
    if ui::owns(request.uri().path()) {
        return ui::method_not_allowed(request.method().as_str());
    }
    ApiError::MethodNotAllowed {
        method: request.method().to_string(),
        path: request.uri().path().to_string(),
    }
    .into_response()
}
