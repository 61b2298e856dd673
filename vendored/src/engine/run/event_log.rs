//! A run's events between two durable writes.

use std::collections::BTreeMap;
use std::sync::Arc;

use chrono::{DateTime, Utc};
use serde_json::{Map, Value};
use tokio::sync::broadcast;

use super::outage::{LeaseWatch, Renewer};
use crate::domain::events::{Event, EventKind};
use crate::domain::run_state::{JournalEntry, RunRecord};
use crate::support::time::SharedClock;

/// Events of one run: numbered, buffered until the next durable write, and
/// broadcast to live listeners only once stored, so a listener never sees an
/// event (such as a pause and its key) that a crash could still lose.
pub(super) struct EventLog {
    pub(super) run_id: String,
    pub(super) next_seq: u64,
    pub(super) buffer: Vec<Event>,
    pub(super) live: broadcast::Sender<Event>,
    /// A run started by [`AgentRun::start`] and not stored yet: the next
    /// write stores it together with the buffered events.
    pub(super) unstored: Option<RunRecord>,
    /// The run's outputs as the store holds them (written at its creation
    /// and at each pause): what a run whose state could not be stored is
    /// ended with.
    pub(super) stored_outputs: Map<String, Value>,
    /// The run's clock: each event is stamped when it is emitted.
    pub(super) clock: SharedClock,
    /// This process, once it owns the stored run: every write is fenced on
    /// it. `None` while the run is not stored.
    pub(super) owner: Option<String>,
    /// The run's journal of side effects, by step index.
    pub(super) journal: BTreeMap<usize, JournalEntry>,
    /// Re-send steps found in flight whatever their `on_crash` (an
    /// operator's `runs retry`).
    pub(super) retry_in_doubt: bool,
    /// Keeps the lease while a step is in flight.
    pub(super) renewer: Option<Renewer>,
    /// Until when the lease is known to hold (see [`outage`]).
    pub(super) lease: LeaseWatch,
    /// The run is worked out in memory before its decision's claim (see
    /// `AgentRun::plan_finish`): nothing may be written, and the step loop
    /// stops before any step that would write.
    pub(super) planning: bool,
}

impl EventLog {
    pub(super) fn new(
        run_id: &str,
        next_seq: u64,
        live: broadcast::Sender<Event>,
        clock: &SharedClock,
    ) -> EventLog {
        EventLog {
            run_id: run_id.to_string(),
            next_seq,
            buffer: Vec::new(),
            live,
            unstored: None,
            stored_outputs: Map::new(),
            clock: Arc::clone(clock),
            owner: None,
            journal: BTreeMap::new(),
            retry_in_doubt: false,
            renewer: None,
            lease: LeaseWatch::holding_until(None),
            planning: false,
        }
    }

    /// The journaled output of step `index`, if it completed.
    pub(super) fn completed(&self, index: usize) -> Option<&Value> {
        self.journal.get(&index).and_then(|e| e.output.as_ref())
    }

    /// True when step `index`'s start was journaled and its end was not.
    pub(super) fn in_doubt(&self, index: usize) -> bool {
        self.journal.get(&index).is_some_and(|e| e.output.is_none())
    }

    /// The seq of the first event not stored yet.
    pub(super) fn first_unstored_seq(&self) -> u64 {
        self.buffer.first().map_or(self.next_seq, |e| e.seq)
    }

    pub(super) fn emit(&mut self, kind: EventKind) {
        self.buffer.push(Event {
            run_id: self.run_id.clone(),
            seq: self.next_seq,
            at: self.clock.now(),
            kind,
        });
        self.next_seq += 1;
    }

    pub(super) fn last_at(&self) -> Option<DateTime<Utc>> {
        self.buffer.last().map(|e| e.at)
    }

    pub(super) fn pending(&self) -> &[Event] {
        &self.buffer
    }

    /// Call after the buffered events were written: announce and forget them.
    pub(super) fn published(&mut self) {
        for event in self.buffer.drain(..) {
            // No listener is fine: events are also stored.
            let _ = self.live.send(event);
        }
    }
}
