//! Rows -> records, once for every SQL store. Each dialect's row reader
//! implements [`Columns`]: how it reads a column of each kind (SQLite keeps
//! JSON and times as text; PostgreSQL has json and timestamptz columns and
//! keeps free text as JSON strings). Which column holds which field, and
//! the checks on what is read, live here. Everything read is checked: a
//! value this build cannot understand (bad JSON, an unknown status, a
//! malformed timestamp, a negative index) becomes [`StoreError::Corrupt`]
//! naming table, column and row, never a panic.

use chrono::{DateTime, Utc};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::domain::events::{Event, EventKind};
use crate::domain::pending_approval::{ApprovalOrigin, ApprovalRecord, ApprovalStatus, Phase};
use crate::domain::policy::{Channel, Vote, VoteDecision};
use crate::domain::run_state::{RunRecord, RunStatus};
use crate::domain::spec_version::{LIVE_RUN_STATUSES, SpecVersion, SpecVersionUse};
use crate::store::{StoreError, StoreResult};

/// The columns of `tollgate_approvals`, in the order [`approval`] reads
/// them. Used by SELECT and by RETURNING alike.
pub(super) const APPROVAL_COLUMNS: &str = "key, run_id, agent_id, spec_hash, step_index, \
     step_id, phase, message, payload, outputs, input, \"trigger\", status, decision_data, \
     decided_by, decided_at, created_at, expires_at, roster, origin";

/// The number of columns in [`APPROVAL_COLUMNS`]; a query that selects more
/// finds them from this offset on.
pub(super) const APPROVAL_COLUMN_COUNT: usize = 20;

/// Where `roster` is in [`APPROVAL_COLUMNS`]: a cast probes it alone to
/// tell a plain gate's record without decoding the rest.
pub(super) const ROSTER_COLUMN: usize = 18;

/// The columns of `tollgate_runs`, in the order [`run`] reads them.
pub(super) const RUN_COLUMNS: &str = "id, agent_id, spec_hash, status, input, \"trigger\", \
     outputs, error, created_at, updated_at, owner, lease_until";

/// [`RUN_COLUMNS`] with `empty_object` (the store's literal for `{}`) in
/// place of the input: a run's outline, for readers that do not show its
/// input (a run view), which may be wide.
pub(super) fn run_outline_columns(empty_object: &str) -> String {
    RUN_COLUMNS.replacen("input", &format!("{empty_object} AS input"), 1)
}

/// The number of columns in [`RUN_COLUMNS`].
pub(super) const RUN_COLUMN_COUNT: usize = 12;

/// One row as a dialect reads it. Every error names the table, the column
/// and the row ([`Columns::corrupt`]).
pub(super) trait Columns {
    /// The table, for messages.
    fn table(&self) -> &'static str;
    /// The row's key, for messages.
    fn id(&self) -> &str;
    fn string(&self, idx: usize, column: &'static str) -> StoreResult<String>;
    /// A name this build wrote (an owner), absent when NULL.
    fn string_opt(&self, idx: usize, column: &'static str) -> StoreResult<Option<String>>;
    /// Text a person or a downstream wrote, absent when NULL.
    fn text_opt(&self, idx: usize, column: &'static str) -> StoreResult<Option<String>>;
    fn int(&self, idx: usize, column: &'static str) -> StoreResult<i64>;
    /// A JSON column decoded into `T`.
    fn json<T: DeserializeOwned>(&self, idx: usize, column: &'static str) -> StoreResult<T>;
    /// A JSON column kept as text (a run's input: see [`crate::support::json_doc`]).
    fn doc(
        &self,
        idx: usize,
        column: &'static str,
    ) -> StoreResult<crate::support::json_doc::JsonDoc>;
    /// A nullable JSON column decoded into `T`, absent when NULL.
    fn json_opt<T: DeserializeOwned>(
        &self,
        idx: usize,
        column: &'static str,
    ) -> StoreResult<Option<T>>;
    fn flag(&self, idx: usize, column: &'static str) -> StoreResult<bool>;
    fn time(&self, idx: usize, column: &'static str) -> StoreResult<DateTime<Utc>>;
    fn time_opt(&self, idx: usize, column: &'static str) -> StoreResult<Option<DateTime<Utc>>>;

    fn corrupt(&self, column: &str, cause: &dyn std::fmt::Display) -> StoreError {
        corrupt(self.table(), column, self.id(), cause)
    }

    /// Text parsed with `parse`, or reported as an unknown value.
    fn parsed<T>(
        &self,
        idx: usize,
        column: &'static str,
        parse: impl FnOnce(&str) -> Option<T>,
    ) -> StoreResult<T> {
        let text = self.string(idx, column)?;
        parse(&text).ok_or_else(|| self.corrupt(column, &format!("unknown value {text:?}")))
    }

    /// Text a person wrote that every row has ([`Columns::text_opt`], not NULL).
    fn text(&self, idx: usize, column: &'static str) -> StoreResult<String> {
        self.text_opt(idx, column)?
            .ok_or_else(|| self.corrupt(column, &"NULL where a text is required"))
    }

    fn index(&self, idx: usize, column: &'static str) -> StoreResult<usize> {
        let n = self.int(idx, column)?;
        usize::try_from(n).map_err(|_| self.corrupt(column, &format!("negative index {n}")))
    }
}

pub(super) fn corrupt(
    table: &str,
    column: &str,
    id: &str,
    cause: &dyn std::fmt::Display,
) -> StoreError {
    StoreError::Corrupt(format!("{table}.{column} of row {id:?}: {cause}"))
}

/// Decode [`APPROVAL_COLUMNS`].
pub(super) fn approval(r: &impl Columns) -> StoreResult<ApprovalRecord> {
    let trigger: Value = r.json(11, "trigger")?;
    let origin = r.parsed(19, "origin", |kind| {
        ApprovalOrigin::from_stored(kind, &trigger)
    })?;
    Ok(ApprovalRecord {
        key: r.id().to_string(),
        run_id: r.string(1, "run_id")?,
        agent_id: r.string(2, "agent_id")?,
        spec_hash: r.string(3, "spec_hash")?,
        step_index: r.index(4, "step_index")?,
        step_id: r.string(5, "step_id")?,
        phase: r.parsed(6, "phase", Phase::parse)?,
        message: r.text_opt(7, "message")?,
        payload: r.json(8, "payload")?,
        outputs: r.json::<Map<String, Value>>(9, "outputs")?,
        input: r.doc(10, "input")?,
        trigger,
        status: r.parsed(12, "status", ApprovalStatus::parse)?,
        decision_data: r.json_opt(13, "decision_data")?,
        decided_by: r.text_opt(14, "decided_by")?,
        decided_at: r.time_opt(15, "decided_at")?,
        created_at: r.time(16, "created_at")?,
        expires_at: r.time(17, "expires_at")?,
        roster: r.json_opt(ROSTER_COLUMN, "roster")?,
        origin,
    })
}

/// The columns of `tollgate_votes`, in the order [`vote`] reads them.
pub(super) const VOTE_COLUMNS: &str = "key, seq, voter, rule, decision, reason, payload, \
     channel, payload_digest, superseded, at, input";

/// Decode [`VOTE_COLUMNS`].
pub(super) fn vote(r: &impl Columns) -> StoreResult<Vote> {
    let seq = r.int(1, "seq")?;
    Ok(Vote {
        seq: u32::try_from(seq).map_err(|_| r.corrupt("seq", &format!("bad seq {seq}")))?,
        voter: r.text(2, "voter")?,
        rule: r.string_opt(3, "rule")?,
        decision: r.parsed(4, "decision", VoteDecision::parse)?,
        reason: r.text_opt(5, "reason")?,
        payload: r.json_opt(6, "payload")?,
        channel: r.parsed(7, "channel", Channel::parse)?,
        payload_digest: r.string(8, "payload_digest")?,
        superseded: r.flag(9, "superseded")?,
        at: r.time(10, "at")?,
        input: r.json_opt(11, "input")?,
    })
}

/// Decode [`RUN_COLUMNS`].
pub(super) fn run(r: &impl Columns) -> StoreResult<RunRecord> {
    Ok(RunRecord {
        id: r.id().to_string(),
        agent_id: r.string(1, "agent_id")?,
        spec_hash: r.string(2, "spec_hash")?,
        status: r.parsed(3, "status", RunStatus::parse)?,
        input: r.doc(4, "input")?,
        trigger: r.json(5, "trigger")?,
        outputs: r.json::<Map<String, Value>>(6, "outputs")?,
        error: r.text_opt(7, "error")?,
        created_at: r.time(8, "created_at")?,
        updated_at: r.time(9, "updated_at")?,
        owner: r.string_opt(10, "owner")?,
        lease_until: r.time_opt(11, "lease_until")?,
    })
}

/// An event as its row's `event` column holds it: when and what, without
/// `run_id` and `seq`, which are the row's own columns. Repeating them cost
/// about a quarter of every stored event (issue 28's write breakdown).
#[derive(Serialize)]
pub(super) struct StoredEvent<'a> {
    at: &'a DateTime<Utc>,
    #[serde(flatten)]
    kind: StoredKind<'a>,
}

/// What an event's row holds besides its time.
#[derive(Serialize)]
#[serde(untagged)]
enum StoredKind<'a> {
    /// `run_started` without the run's input: the run's row holds it, and
    /// a wide input stored twice cost its size again in pages and in the
    /// writer's memory (issue 41). Read back by [`into_events`].
    RunStarted {
        #[serde(rename = "type")]
        kind: &'static str,
        agent: &'a str,
        spec_hash: &'a str,
    },
    Other(&'a EventKind),
}

impl<'a> StoredEvent<'a> {
    pub fn of(event: &'a Event) -> StoredEvent<'a> {
        let kind = match &event.kind {
            EventKind::RunStarted {
                agent, spec_hash, ..
            } => StoredKind::RunStarted {
                kind: "run_started",
                agent,
                spec_hash,
            },
            other => StoredKind::Other(other),
        };
        StoredEvent {
            at: &event.at,
            kind,
        }
    }
}

/// What [`StoredEvent`] decodes into. Rows written before it still carry
/// `run_id` and `seq` in their JSON; those keys are ignored.
#[derive(Deserialize)]
struct StoredEventRead {
    at: DateTime<Utc>,
    #[serde(flatten)]
    kind: EventKind,
}

/// The event in `text`, and whether it is a `run_started` stored without
/// its input (every one written since schema version 13 on SQLite, 14 on
/// PostgreSQL; older rows hold the input). That event is read on its own:
/// its input, when present, is kept as text ([`crate::support::json_doc`]), which
/// serde's buffering of a tagged enum cannot do.
fn decode_event(text: &str) -> Result<(StoredEventRead, bool), serde_json::Error> {
    /// Only the event's type: the rest is skipped unparsed.
    #[derive(Deserialize)]
    struct TypeOnly<'a> {
        #[serde(rename = "type", borrow)]
        kind: std::borrow::Cow<'a, str>,
    }
    #[derive(Deserialize)]
    struct RunStartedRead {
        at: DateTime<Utc>,
        agent: String,
        spec_hash: String,
        #[serde(default, deserialize_with = "some_raw")]
        input: Option<crate::support::json_doc::JsonDoc>,
    }
    fn some_raw<'de, D: serde::Deserializer<'de>>(
        d: D,
    ) -> Result<Option<crate::support::json_doc::JsonDoc>, D::Error> {
        crate::support::json_doc::raw(d).map(Some)
    }
    if serde_json::from_str::<TypeOnly<'_>>(text)?.kind == "run_started" {
        let started: RunStartedRead = serde_json::from_str(text)?;
        let input_in_run = started.input.is_none();
        let read = StoredEventRead {
            at: started.at,
            kind: EventKind::RunStarted {
                agent: started.agent,
                spec_hash: started.spec_hash,
                input: started.input.unwrap_or_default(),
            },
        };
        return Ok((read, input_in_run));
    }
    Ok((serde_json::from_str(text)?, false))
}

/// An event as its row holds it: a `run_started` event may still need its
/// run's input ([`into_events`]).
pub(super) struct EventRead {
    event: Event,
    input_in_run: bool,
}

/// Decode `SELECT run_id, seq, event`. The columns say where the event
/// sits; the JSON carries what happened.
pub(super) fn event(r: &impl Columns) -> StoreResult<EventRead> {
    let seq = r.int(1, "seq")?;
    let text = r.doc(2, "event")?;
    let (stored, input_in_run) = decode_event(text.as_str()).map_err(|e| r.corrupt("event", &e))?;
    let event = Event {
        run_id: r.id().to_string(),
        seq: u64::try_from(seq).map_err(|_| r.corrupt("seq", &format!("negative seq {seq}")))?,
        at: stored.at,
        kind: stored.kind,
    };
    Ok(EventRead {
        event,
        input_in_run,
    })
}

/// Whether any of one run's events needs the run's input read.
pub(super) fn needs_run_input(read: &[EventRead]) -> bool {
    read.iter().any(|e| e.input_in_run)
}

/// One run's events, with the run's `input` (read when
/// [`needs_run_input`] said so; `None` when the run's row is missing) put
/// into each `run_started` event stored without it.
pub(super) fn into_events(
    read: Vec<EventRead>,
    input: Option<crate::support::json_doc::JsonDoc>,
) -> StoreResult<Vec<Event>> {
    read.into_iter()
        .map(|mut read| {
            if read.input_in_run {
                let Some(doc) = &input else {
                    return Err(corrupt(
                        "tollgate_run_events",
                        "event",
                        &read.event.run_id,
                        &"a run_started event without its input, and no run row holds it",
                    ));
                };
                if let EventKind::RunStarted { input, .. } = &mut read.event.kind {
                    *input = doc.clone();
                }
            }
            Ok(read.event)
        })
        .collect()
}

/// The columns of `tollgate_specs`, in the order [`spec_version`] reads them.
pub(super) const SPEC_VERSION_COLUMNS: &str =
    "hash, agent_id, canonical, source, first_seen, last_seen";

/// Decode [`SPEC_VERSION_COLUMNS`].
pub(super) fn spec_version(r: &impl Columns) -> StoreResult<SpecVersion> {
    Ok(SpecVersion {
        hash: r.id().to_string(),
        agent_id: r.string(1, "agent_id")?,
        canonical: r.string(2, "canonical")?,
        source: r.string(3, "source")?,
        first_seen: r.time(4, "first_seen")?,
        last_seen: r.time(5, "last_seen")?,
    })
}

/// Decode a listed version: `hash, agent_id, first_seen, last_seen`, then
/// its count of pending approvals and of live runs.
pub(super) fn spec_version_use(r: &impl Columns) -> StoreResult<SpecVersionUse> {
    let count = |idx, column| {
        let n = r.int(idx, column)?;
        u64::try_from(n).map_err(|_| r.corrupt(column, &format!("negative count {n}")))
    };
    Ok(SpecVersionUse {
        hash: r.id().to_string(),
        agent_id: r.string(1, "agent_id")?,
        first_seen: r.time(2, "first_seen")?,
        last_seen: r.time(3, "last_seen")?,
        pending_approvals: count(4, "pending_approvals")?,
        live_runs: count(5, "live_runs")?,
    })
}

/// The listing of versions with their use, in either dialect: `now` and
/// `agent` are its two parameters, spelled as the dialect spells them.
pub(super) fn spec_versions_sql(now: &str, agent: &str) -> String {
    let live: Vec<String> = LIVE_RUN_STATUSES
        .iter()
        .map(|s| format!("'{}'", s.as_str()))
        .collect();
    format!(
        "SELECT s.hash, s.agent_id, s.first_seen, s.last_seen, \
           (SELECT count(*) FROM tollgate_approvals a WHERE a.spec_hash = s.hash \
              AND a.status = 'PENDING' AND a.expires_at > {now}), \
           (SELECT count(*) FROM tollgate_runs r WHERE r.spec_hash = s.hash \
              AND r.status IN ({live})) \
         FROM tollgate_specs s WHERE ({agent} IS NULL OR s.agent_id = {agent}) \
         ORDER BY s.first_seen DESC, s.hash",
        live = live.join(", ")
    )
}

/// An in-memory count as a database integer.
pub(super) fn to_i64<T: TryInto<i64>>(n: T, what: &str) -> StoreResult<i64> {
    n.try_into()
        .map_err(|_| StoreError::Database(format!("{what} is too large to store")))
}

/// The columns of `tollgate_outbox`, in the order [`outbox_notice`] reads
/// them.
pub(super) const OUTBOX_COLUMNS: &str = "id, key, run_id, event, channel, target, body, status, \
     attempts, next_at, last_error, created_at, window_from, sent_at";

/// Decode [`OUTBOX_COLUMNS`].
pub(super) fn outbox_notice(r: &impl Columns) -> StoreResult<crate::store::OutboxNotice> {
    use crate::domain::notices::{Notice, NoticeChannel, NoticeEvent, NoticeStatus};
    let attempts = r.int(8, "attempts")?;
    Ok(crate::store::OutboxNotice {
        notice: Notice {
            id: r.id().to_string(),
            key: r.string(1, "key")?,
            run_id: r.string(2, "run_id")?,
            event: r.parsed(3, "event", NoticeEvent::parse)?,
            channel: r.parsed(4, "channel", NoticeChannel::parse)?,
            target: r.string(5, "target")?,
            body: r.json(6, "body")?,
            created_at: r.time(11, "created_at")?,
        },
        status: r.parsed(7, "status", NoticeStatus::parse)?,
        attempts: u32::try_from(attempts)
            .map_err(|_| r.corrupt("attempts", &format!("{attempts} is out of range")))?,
        next_at: r.time(9, "next_at")?,
        last_error: r.string_opt(10, "last_error")?,
        window_from: r.time(12, "window_from")?,
        sent_at: r.time_opt(13, "sent_at")?,
    })
}
