//! The approvals inbox (DESIGN §11): server-rendered pages for the people
//! who decide, built into every server.
//!
//! - `/ui/login`, `/ui/logout`: sign in with an API token; a signed session
//!   cookie after that (auth/session.rs). Without API tokens (loopback mode)
//!   there is no sign-in: everyone is `local`, behind the Host and Origin
//!   checks of server/http/origin.rs.
//! - `/ui` (inbox), `/ui/approvals/{key}` (one approval, its decisions),
//!   `/ui/history`, `/ui/runs`, `/ui/runs/{id}`, `/ui/notifications` (the
//!   outbox's failed and dead deliveries, with retries): the pages.
//! - `/a/{key}/{signature}`: a signed approval link (pages/link.rs), no
//!   sign-in.
//! - `/ui/stream`, `/ui/runs/{id}/stream`: live updates (stream.rs).
//! - `/ui/assets/...`: the CSS and JavaScript, embedded (assets.rs).
//!
//! The folders: auth/ (sessions, CSRF tokens, the viewer), pages/ (one
//! module per page: its typed context and handlers), render/ (templates,
//! formats, payloads, the timeline, headers) and templates/. Every form
//! POST carries a CSRF token (auth/csrf.rs); every response carries the
//! security headers of render/headers.rs. Decisions go through the API's own
//! path (service/decide.rs `decide`), so the approvers allow-list and the
//! claim rules are the API's.

mod assets;
mod auth;
mod form;
mod listing;
mod pages;
mod render;
mod staleness;
mod stream;

use std::sync::Arc;

use axum::routing::{get, post};
use axum::{Extension, Router, middleware};

use super::http::state::AppState;
use super::http::throttle::{Policy, Throttle};
use auth::session::{self, SessionKey};
use pages::{approval, history, inbox, link, login, notifications, refusal, runs};
use render::{headers, templates};

/// What every page handler shares besides [`AppState`].
pub(crate) struct Ui {
    /// Signs session cookies and CSRF tokens.
    pub key: SessionKey,
    /// `TOLLGATE_PUBLIC_URL` is https: session cookies are `Secure` even
    /// when the proxy in front says nothing.
    pub public_https: bool,
    /// Wrong tokens at /ui/login, per client address.
    pub sign_in: Throttle,
    /// Bad signatures at /a/..., per client address.
    pub bad_links: Throttle,
}

pub(crate) type SharedUi = Arc<Ui>;

/// The inbox's routes, with their headers and shared state.
pub(crate) fn router(state: &AppState) -> Router<AppState> {
    let key = session::key_for(state);
    let public_https = std::env::var(crate::domain::links::PUBLIC_URL_ENV)
        .map(|url| url.trim().to_ascii_lowercase().starts_with("https://"))
        .unwrap_or(false);
    // Loaded (and checked) now rather than at the first request.
    templates::templates();
    let ui: SharedUi = Arc::new(Ui {
        key,
        public_https,
        sign_in: Throttle::new(Policy::GUESSES),
        bad_links: Throttle::new(Policy::GUESSES),
    });
    Router::new()
        .route("/ui", get(inbox::page))
        .route("/ui/", get(inbox::page))
        .route("/ui/login", get(login::form).post(login::submit))
        .route("/ui/logout", post(login::logout))
        .route("/ui/stream", get(stream::inbox))
        .route(
            "/ui/approvals/{key}",
            get(approval::page).post(approval::decide),
        )
        .route("/ui/approvals/{key}/payload", get(approval::raw_payload))
        .route("/ui/history", get(history::page))
        .route("/ui/runs", get(runs::list))
        .route("/ui/runs/{id}", get(runs::page))
        .route("/ui/runs/{id}/stream", get(stream::timeline))
        .route("/ui/runs/{id}/{action}", post(runs::act))
        .route("/ui/notifications", get(notifications::page))
        .route("/ui/notifications/retry", post(notifications::retry_dead))
        .route("/ui/notifications/{id}/retry", post(notifications::retry))
        .route("/ui/assets/{file}", get(assets::serve))
        .route("/a/{key}/{signature}", get(link::page).post(link::decide))
        .route("/a/{key}/{signature}/payload", get(link::raw_payload))
        .route("/a/{key}/{signature}/stream", get(link::timeline))
        .layer(Extension(ui))
        .layer(middleware::from_fn(headers::secure))
}

/// True for the paths the inbox owns: an unknown one gets the HTML 404
/// page rather than the API's JSON error.
pub(crate) fn owns(path: &str) -> bool {
    path == "/ui" || path.starts_with("/ui/") || path == "/a" || path.starts_with("/a/")
}

/// The 405 page, with the inbox's headers: a page asked for with a method
/// it does not answer (a form posted to a page that only shows).
pub(crate) fn method_not_allowed(method: &str) -> axum::response::Response {
    headers::with_headers(refusal::method_not_allowed(method))
}

/// The 404 page, with the inbox's headers (the API's fallback answers with
/// it for paths under /ui and /a).
pub(crate) fn not_found() -> axum::response::Response {
    headers::with_headers(refusal::not_found())
}
