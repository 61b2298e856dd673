//! The router: routes grouped by resource, one module each.

mod approvals;
mod batch;
// The approvals inbox (server/ui) streams a run's timeline with this
// module's feed and runs the operators' actions of `runs`.
pub(crate) mod events;
mod gates;
mod health;
mod metrics;
mod migrate;
mod notifications;
mod openapi;
pub(crate) mod runs;
mod slack;
mod specs;
mod votes;
mod webhook;

use axum::Router;
use axum::extract::{Request, State};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Extension, middleware};

use super::auth;
use super::extract::BodyLimit;
use super::state::AppState;
use crate::service::ApiError;

pub(crate) use openapi::operations;

/// Paths the API owns; a webhook path may not start with one of them. The
/// list lives with the spec, whose validation refuses such a path first.
pub(crate) use crate::spec::RESERVED_PATHS as RESERVED_PREFIXES;

pub(crate) fn router(state: AppState, max_body_bytes: usize) -> Router {
    let api = Router::new()
        .route("/runs", post(runs::create).get(runs::list))
        .route("/runs/{id}/cancel", post(runs::cancel))
        .route("/runs/{id}", get(runs::show))
        .route("/runs/{id}/events", get(events::stream))
        .route("/runs/{id_or_key}/approve", post(runs::decide))
        .route("/runs/{id}/retry", post(runs::retry))
        .route("/runs/{id}/fail", post(runs::fail))
        .route("/approvals", get(approvals::list))
        .route("/approvals/migrate", post(migrate::migrate))
        .route("/approvals/batch", post(batch::decide))
        .route("/approvals/{key}", get(approvals::show))
        .route("/approvals/{key}/approve", post(approvals::approve))
        .route("/approvals/{key}/reject", post(approvals::reject))
        .route("/approvals/{key}/votes", get(votes::list))
        .route("/notifications", get(notifications::list))
        .route("/notifications/retry", post(notifications::retry_all))
        .route("/notifications/{id}", get(notifications::show))
        .route("/notifications/{id}/retry", post(notifications::retry))
        .route(
            "/specs/plan",
            get(specs::plan_served).post(specs::plan_posted),
        )
        // Behind the token like the API: see routes/metrics.rs.
        .route("/metrics", get(metrics::render))
        // route_layer: only matched routes ask for a token, so an unknown
        // path is a 404 whoever asks.
        .route_layer(middleware::from_fn_with_state(
            state.clone(),
            auth::require_caller,
        ));
    // Gate requests: any token may ask for approvals (a requester token
    // only this), so they have their own auth layer.
    let requests = Router::new()
        .route("/gates", post(gates::create))
        .route("/gates/{key}", get(gates::show).delete(gates::cancel))
        // MCP's Streamable HTTP transport, stateless: POST only (a GET
        // stream or a DELETE of a session is 405; see server/mcp/http.rs).
        .route("/mcp", post(super::mcp::post))
        .route_layer(middleware::from_fn_with_state(
            state.clone(),
            auth::require_requester,
        ));
    Router::new()
        .route("/healthz", get(health::check))
        .route("/readyz", get(health::ready))
        .route("/openapi.json", get(openapi::document))
        // Signed by Slack, not bearer-authenticated.
        .route("/slack/actions", post(slack::actions))
        .merge(api)
        .merge(requests)
        // The approvals inbox: HTML pages for people, with their own
        // sign-in (a session cookie) and CSRF checks; not part of the
        // JSON API's document (see openapi.rs).
        .merge(super::ui::router(&state))
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
        if super::ui::owns(request.uri().path()) {
            return super::ui::not_found();
        }
        return not_found(&request).into_response();
    }
    if request.method() != axum::http::Method::POST {
        return method_not_allowed(request).await.into_response();
    }
    webhook::receive(state, request).await.into_response()
}

fn not_found(request: &Request) -> ApiError {
    ApiError::NotFound {
        method: request.method().to_string(),
        path: request.uri().path().to_string(),
    }
}

async fn method_not_allowed(request: Request) -> Response {
    if super::ui::owns(request.uri().path()) {
        return super::ui::method_not_allowed(request.method().as_str());
    }
    ApiError::MethodNotAllowed {
        method: request.method().to_string(),
        path: request.uri().path().to_string(),
    }
    .into_response()
}
