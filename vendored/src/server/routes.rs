//! The JSON API's routes, grouped by resource, one module each. The
//! server's router (`server/router.rs`) puts them behind their auth and
//! beside the inbox and MCP.

mod approvals;
mod batch;
mod events;
mod gates;
mod health;
mod metrics;
mod migrate;
mod notifications;
mod openapi;
mod runs;
mod slack;
mod specs;
mod votes;
mod webhook;

use axum::Router;
use axum::routing::{get, post};

use crate::server::http::state::AppState;

pub(crate) use openapi::operations;

/// Paths the API owns; a webhook path may not start with one of them. The
/// list lives with the spec, whose validation refuses such a path first.
pub(crate) use crate::domain::spec::RESERVED_PATHS as RESERVED_PREFIXES;

/// The API behind a full token: runs, approvals, notifications, specs,
/// metrics.
pub(crate) fn api() -> Router<AppState> {
    Router::new()
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
}

/// Gate requests, which any token may make (a requester token only
/// these).
pub(crate) fn requests() -> Router<AppState> {
    Router::new()
        .route("/gates", post(gates::create))
        .route("/gates/{key}", get(gates::show).delete(gates::cancel))
}

/// What needs no token: health, readiness, the OpenAPI document, and
/// Slack's actions (signed by Slack).
pub(crate) fn open() -> Router<AppState> {
    Router::new()
        .route("/healthz", get(health::check))
        .route("/readyz", get(health::ready))
        .route("/openapi.json", get(openapi::document))
        .route("/slack/actions", post(slack::actions))
}

/// The spec's webhook, which the router dispatches from its fallback.
pub(crate) use webhook::receive as receive_webhook;
