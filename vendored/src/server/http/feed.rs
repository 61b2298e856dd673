//! A run's events as Server-Sent Events: `GET /runs/{id}/events`, and
//! the inbox's and signed links' run timelines.
//!
//! The stored events first (after `Last-Event-ID`, when the client sends
//! one), then live ones, until the run's final event. The SSE `id` is the
//! event's `seq`, so a reconnecting client resumes where it stopped.
//!
//! Live events come from two sources: this process's broadcast (instant,
//! for runs driven here) and a poll of the store about once a second (for
//! runs resumed by another process sharing the store). Both feed one
//! cursor, `last_seq`, and only the next event in sequence is ever sent, so
//! the stream has no gaps and no repeats whichever source sees it first.
//!
//! With signed links on, an `awaiting_approval` event whose key is still
//! PENDING when it is written to the stream carries `link` (DESIGN §11),
//! the link the caller is shown (links.rs `link_for_viewer`): bound to the
//! caller, and none for a caller the approvers list leaves out. The link
//! is added here, as the event is sent, and is never part of the stored
//! event: a replayed pause that was decided since shows none.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::time::Duration;

use axum::http::HeaderMap;
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use futures_util::Stream;
use tokio::sync::{broadcast, watch};
use tokio::time::{Interval, MissedTickBehavior};

use crate::domain::events::{Event, EventKind};
use crate::domain::links::LinkSigner;
use crate::domain::pending_approval::ApprovalStatus;
use crate::server::http::state::AppState;
use crate::service::ApiError;
use crate::service::runs as view;
use crate::store::SharedStore;
use crate::store::watch::ApprovalChange;
use crate::support::time::SharedClock;

const POLL_EVERY: Duration = Duration::from_secs(1);
const KEEP_ALIVE_EVERY: Duration = Duration::from_secs(15);

/// Who a stream is for.
pub(crate) enum Watcher {
    /// A caller or a signed-in person: pauses carry the link they are shown.
    Viewer(String),
    /// A signed link's page, for approval `key`: no links (the page is
    /// one), and the stream ends once that approval is no longer PENDING
    /// (the link is good only while it is).
    Link { key: String },
}

/// A run's events for `watcher`.
pub(crate) async fn open(
    state: AppState,
    watcher: Watcher,
    run_id: String,
    headers: HeaderMap,
) -> Result<Sse<impl Stream<Item = Result<SseEvent, Infallible>>>, ApiError> {
    let after = match headers.get("last-event-id") {
        None => 0,
        Some(value) => value
            .to_str()
            .ok()
            .and_then(|v| v.trim().parse::<u64>().ok())
            .ok_or_else(|| ApiError::invalid("Last-Event-ID must be an event seq (a number)"))?,
    };
    // Subscribe before reading the store, so nothing falls in between.
    let live = state.agent.subscribe();
    let elsewhere = state.watcher.as_ref().map(|w| w.changes());
    let run = view::load_run(&state, &run_id).await?;
    let mut poll = tokio::time::interval(POLL_EVERY);
    poll.set_missed_tick_behavior(MissedTickBehavior::Delay);
    let feed = Feed {
        store: state.agent.store().clone(),
        links: state.links.clone(),
        spec: state.agent.spec().clone(),
        watcher,
        clock: state.agent.clock().clone(),
        run_id,
        last_seq: after,
        ended_before_connect: run.status.is_final(),
        primed: false,
        done: false,
        queue: VecDeque::new(),
        live,
        elsewhere,
        poll,
        shutdown: state.shutdown.clone(),
    };
    let events = futures_util::stream::unfold(feed, |mut feed| async move {
        let event = feed.next().await?;
        let link = feed.link(&event).await;
        Some((Ok(to_sse(&event, link)), feed))
    });
    Ok(Sse::new(events).keep_alive(KeepAlive::new().interval(KEEP_ALIVE_EVERY)))
}

fn to_sse(event: &Event, link: Option<String>) -> SseEvent {
    let data = match link {
        None => serde_json::to_string(event),
        Some(link) => serde_json::to_value(event).and_then(|mut value| {
            if let Some(fields) = value.as_object_mut() {
                fields.insert("link".into(), link.into());
            }
            serde_json::to_string(&value)
        }),
    }
    .unwrap_or_else(|_| "{}".to_string());
    SseEvent::default()
        .id(event.seq.to_string())
        .event(event.kind.name())
        .data(data)
}

/// One client's position in one run's events.
struct Feed {
    store: SharedStore,
    /// Signs `awaiting_approval` links; `None` when links are off.
    links: Option<LinkSigner>,
    /// The served spec: who is shown a link (its deciders).
    spec: std::sync::Arc<crate::domain::spec::Spec>,
    watcher: Watcher,
    clock: SharedClock,
    run_id: String,
    /// The last seq sent (or the client's Last-Event-ID).
    last_seq: u64,
    /// The run was final when the client connected: once the stored events
    /// are sent there is nothing more to wait for.
    ended_before_connect: bool,
    primed: bool,
    done: bool,
    queue: VecDeque<Event>,
    live: broadcast::Receiver<Event>,
    /// Approval changes pushed by other processes (PostgreSQL): a decision
    /// made on another node wakes the stream at once instead of at the next
    /// poll.
    elsewhere: Option<broadcast::Receiver<ApprovalChange>>,
    poll: Interval,
    shutdown: watch::Receiver<bool>,
}

impl Feed {
    async fn next(&mut self) -> Option<Event> {
        loop {
            if !self.still_linked().await {
                return None;
            }
            if let Some(event) = self.queue.pop_front() {
                if event.seq != self.last_seq + 1 {
                    continue;
                }
                self.last_seq = event.seq;
                self.done = event.kind.is_final();
                return Some(event);
            }
            if self.done || *self.shutdown.borrow() {
                return None;
            }
            if !self.primed {
                if !self.prime().await {
                    // The store failed: try again at the next poll rather
                    // than stream from a cursor that was never checked.
                    self.poll.tick().await;
                    continue;
                }
                self.primed = true;
                if self.queue.is_empty() && self.ended_before_connect {
                    return None;
                }
                continue;
            }
            tokio::select! {
                received = self.live.recv() => match received {
                    Ok(event) if event.run_id == self.run_id => {
                        if event.seq == self.last_seq + 1 {
                            self.queue.push_back(event);
                        } else if event.seq > self.last_seq + 1 {
                            // Something in between was missed: the store has it.
                            self.catch_up().await;
                        }
                    }
                    Ok(_) => {}
                    Err(broadcast::error::RecvError::Lagged(_)) => self.catch_up().await,
                    // The agent outlives every stream; if not, polling carries on.
                    Err(broadcast::error::RecvError::Closed) => {
                        self.poll.tick().await;
                        self.catch_up().await;
                    }
                },
                change = next_change(&mut self.elsewhere) => {
                    if change.is_none_or(|c| c.run_id == self.run_id) {
                        self.catch_up().await;
                    }
                }
                _ = self.poll.tick() => self.catch_up().await,
                _ = self.shutdown.changed() => return None,
            }
        }
    }

    /// False once a link's stream must end: its approval is no longer
    /// PENDING, or the store cannot say (the page reconnects and is told).
    async fn still_linked(&self) -> bool {
        let Watcher::Link { key } = &self.watcher else {
            return true;
        };
        match self.store.approval_as_of(key, self.clock.now()).await {
            Ok(Some(record)) => record.status == ApprovalStatus::Pending,
            Ok(None) => false,
            Err(e) => {
                tracing::warn!(run_id = %self.run_id, error = %e, "cannot read a link's approval for its stream");
                false
            }
        }
    }

    /// The signed link of an `awaiting_approval` event whose key is
    /// PENDING now (unexpired), as the viewer is shown it; `None` for
    /// every other event, when links are off, for a viewer who may not
    /// decide, or when the store cannot say (no link rather than a link
    /// to something that may be decided).
    async fn link(&self, event: &Event) -> Option<String> {
        let links = self.links.as_ref()?;
        let Watcher::Viewer(viewer) = &self.watcher else {
            return None;
        };
        let EventKind::AwaitingApproval { key, .. } = &event.kind else {
            return None;
        };
        match self.store.approval_as_of(key, self.clock.now()).await {
            Ok(Some(record)) if record.status == ApprovalStatus::Pending => {
                links.link_for_viewer(&record, viewer, self.spec.deciders_of(&record))
            }
            Ok(_) => None,
            Err(e) => {
                tracing::warn!(run_id = %self.run_id, error = %e, "cannot read an approval for its link");
                None
            }
        }
    }

    /// The first read. A `Last-Event-ID` beyond the run's last stored
    /// event (a client of another run, a made-up number) is taken as "seen
    /// everything so far": the cursor moves back to the last stored seq.
    /// Otherwise only events numbered past the client's id would ever be
    /// sent, the run's final event among the skipped ones, and the stream
    /// would never end.
    /// False when the store could not be read.
    async fn prime(&mut self) -> bool {
        // Every stored event, to learn the last seq; runs have tens of
        // events, and this is read once per stream.
        match self.store.run_events(&self.run_id, 0).await {
            Ok(events) => {
                let stored = events.last().map_or(0, |e| e.seq);
                self.last_seq = self.last_seq.min(stored);
                let after = self.last_seq;
                self.queue.clear();
                self.queue
                    .extend(events.into_iter().filter(|e| e.seq > after));
                true
            }
            Err(e) => {
                tracing::warn!(run_id = %self.run_id, error = %e, "cannot read run events for a stream");
                false
            }
        }
    }

    /// Queue whatever the store has after `last_seq`.
    async fn catch_up(&mut self) {
        match self.store.run_events(&self.run_id, self.last_seq).await {
            Ok(events) => {
                self.queue.clear();
                self.queue.extend(events);
            }
            Err(e) => {
                tracing::warn!(run_id = %self.run_id, error = %e, "cannot read run events for a stream")
            }
        }
    }
}

/// The next pushed change; `None` when some were missed (look anyway).
/// Never resolves without a watcher, or once its feed closed.
async fn next_change(
    changes: &mut Option<broadcast::Receiver<ApprovalChange>>,
) -> Option<ApprovalChange> {
    let Some(receiver) = changes else {
        return std::future::pending().await;
    };
    match receiver.recv().await {
        Ok(change) => Some(change),
        Err(broadcast::error::RecvError::Lagged(_)) => None,
        Err(broadcast::error::RecvError::Closed) => {
            *changes = None;
            std::future::pending().await
        }
    }
}
