//! GET /runs/{id}/events: the run's events as Server-Sent Events (the
//! feed is `server/http/feed.rs`, shared with the inbox).

use std::convert::Infallible;

use axum::Extension;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::sse::{Event as SseEvent, Sse};
use futures_util::Stream;

use crate::server::http::extract::PathParam;
use crate::server::http::feed::{self, Watcher};
use crate::server::http::state::AppState;
use crate::service::{ApiError, Caller};

pub(super) async fn stream(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    PathParam(run_id): PathParam,
    headers: HeaderMap,
) -> Result<Sse<impl Stream<Item = Result<SseEvent, Infallible>>>, ApiError> {
    feed::open(state, Watcher::Viewer(caller.0), run_id, headers).await
}
