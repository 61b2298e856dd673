//! Live updates, as Server-Sent Events the page's script listens to.
//!
//! - `/ui/stream` (the inbox): an `inbox` event whenever the first page of
//!   pending approvals changes; the script then fetches the rows again
//!   (`/ui?fragment=rows`) and swaps them in. It looks on this process's
//!   pauses, decisions, expiries and cancels, on every change another
//!   process pushes through the store (PostgreSQL), and once a second.
//! - `/ui/runs/{id}/stream` (a timeline): the run's events, exactly as
//!   GET /runs/{id}/events streams them (routes/events.rs, server/http/feed.rs).

use std::convert::Infallible;
use std::time::Duration;

use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures_util::Stream;
use tokio::sync::broadcast;

use super::auth::viewer::Viewer;
use crate::domain::pending_approval::ApprovalStatus;
use crate::server::http::extract::PathParam;
use crate::server::http::feed;
use crate::server::http::state::AppState;
use crate::service::votes::ListedLedgers;

const POLL_EVERY: Duration = Duration::from_secs(1);

/// GET /ui/runs/{id}/stream.
pub(super) async fn timeline(
    State(state): State<AppState>,
    viewer: Viewer,
    PathParam(run_id): PathParam,
    headers: HeaderMap,
) -> Response {
    // The Viewer extractor is the check: a session (or loopback mode).
    run_events(state, feed::Watcher::Viewer(viewer.name), run_id, headers).await
}

/// A run's events, as GET /runs/{id}/events streams them, for `watcher`
/// (the page's own check, a session or a signed link, has been made).
pub(crate) async fn run_events(
    state: AppState,
    watcher: feed::Watcher,
    run_id: String,
    headers: HeaderMap,
) -> Response {
    feed::open(state, watcher, run_id, headers)
        .await
        .into_response()
}

/// What the inbox's first page shows: when it changes, the page refetches.
/// Each row's vote count is part of it (a vote changes the row's progress;
/// the page's ledgers are one read).
async fn fingerprint(state: &AppState) -> Option<Vec<(String, ApprovalStatus, usize)>> {
    let listed = super::listing::approvals(
        state,
        super::listing::Listing {
            statuses: vec![ApprovalStatus::Pending],
            step: None,
            text: None,
            limit: crate::server::http::paging::UI_PAGE,
            cursor: None,
        },
    )
    .await
    .ok()?;
    let ledgers = ListedLedgers::read(state.agent.store().as_ref(), &listed.approvals)
        .await
        .ok()?;
    Some(
        listed
            .approvals
            .into_iter()
            .map(|r| {
                let votes = ledgers.count(&r.key);
                (r.key, r.status, votes)
            })
            .collect(),
    )
}

struct InboxFeed {
    state: AppState,
    last: Option<Vec<(String, ApprovalStatus, usize)>>,
    live: broadcast::Receiver<crate::domain::events::Event>,
    elsewhere: Option<broadcast::Receiver<crate::store::watch::ApprovalChange>>,
    poll: tokio::time::Interval,
}

impl InboxFeed {
    async fn next(&mut self) -> Option<()> {
        loop {
            if *self.state.shutdown.borrow() {
                return None;
            }
            let mut shutdown = self.state.shutdown.clone();
            tokio::select! {
                _ = next_inbox_event(&mut self.live) => {}
                _ = next_change(&mut self.elsewhere) => {}
                _ = self.poll.tick() => {}
                _ = shutdown.changed() => return None,
            }
            let now = fingerprint(&self.state).await;
            if now.is_some() && now != self.last {
                self.last = now;
                return Some(());
            }
        }
    }
}

/// The next event of this process that can change the pending set or its
/// progress: a pause, a vote, a decision, an expiry or a cancel. Step events, the bulk of a
/// busy server's, wake no inbox (each wake re-reads the first page).
async fn next_inbox_event(live: &mut broadcast::Receiver<crate::domain::events::Event>) {
    use crate::domain::events::EventKind;
    loop {
        match live.recv().await {
            Ok(event)
                if !matches!(
                    event.kind,
                    EventKind::AwaitingApproval { .. }
                        | EventKind::ApprovalVote { .. }
                        | EventKind::ApprovalResolved { .. }
                        | EventKind::ApprovalMigrated { .. }
                        | EventKind::RunExpired { .. }
                        | EventKind::RunCancelled { .. }
                ) => {}
            // Missed some: look again.
            Ok(_) | Err(broadcast::error::RecvError::Lagged(_)) => return,
            // No more events from this process: the poll goes on.
            Err(broadcast::error::RecvError::Closed) => std::future::pending().await,
        }
    }
}

async fn next_change(
    changes: &mut Option<broadcast::Receiver<crate::store::watch::ApprovalChange>>,
) {
    match changes {
        Some(receiver) => {
            if let Err(broadcast::error::RecvError::Closed) = receiver.recv().await {
                *changes = None;
            }
        }
        None => std::future::pending().await,
    }
}

/// GET /ui/stream.
pub(super) async fn inbox(
    State(state): State<AppState>,
    viewer: Viewer,
) -> Sse<impl Stream<Item = Result<SseEvent, Infallible>>> {
    // The Viewer extractor is the check: a session (or loopback mode).
    let _ = viewer;
    let live = state.agent.subscribe();
    let elsewhere = state.watcher.as_ref().map(|w| w.changes());
    let last = fingerprint(&state).await;
    let mut poll = tokio::time::interval(POLL_EVERY);
    poll.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let feed = InboxFeed {
        state,
        last,
        live,
        elsewhere,
        poll,
    };
    let events = futures_util::stream::unfold(feed, |mut feed| async move {
        feed.next().await?;
        Some((Ok(SseEvent::default().event("inbox").data("changed")), feed))
    });
    Sse::new(events).keep_alive(KeepAlive::new().interval(Duration::from_secs(15)))
}
