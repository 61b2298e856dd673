//! Checks every store applies before a write (times and JSON it could not
//! read back), and the errors of fenced and conditional writes, written
//! once so that each backend refuses the same writes with the same words.

use chrono::{DateTime, Utc};
#[cfg(feature = "postgres")]
use serde_json::Value;

use super::{Pause, RunTransition, StoreError, StoreResult};
use crate::domain::events::{Event, EventKind};
use crate::domain::run_state::{JournalEntry, RunRecord, RunStatus};
use crate::domain::spec_version::SpecVersion;

/// The error of a fenced write that found the run held otherwise.
pub(crate) fn not_owner(
    run_id: &str,
    owner: &str,
    status: &str,
    holder: Option<&str>,
) -> StoreError {
    let detail = match (status, holder) {
        ("running", Some(holder)) => format!("process {holder} recovered it"),
        ("running", None) => "its lease was given up".to_string(),
        (status, _) => format!("it is {status} now"),
    };
    StoreError::NotOwner {
        run_id: run_id.to_string(),
        owner: owner.to_string(),
        detail,
    }
}

/// The error of a transition whose run has another status.
pub(crate) fn wrong_status(change: &RunTransition, status: RunStatus) -> StoreError {
    let expected: Vec<&str> = change.from.iter().map(|s| s.as_str()).collect();
    StoreError::WrongRunStatus {
        run_id: change.run_id.clone(),
        status,
        expected: format!(
            "this applies only to a run that is {}",
            expected.join(" or ")
        ),
    }
}

/// The error of a transition whose run changed since the caller read it
/// ([`RunTransition::if_last_seq`]): another operator's change won.
pub(crate) fn changed_since(change: &RunTransition, status: RunStatus) -> StoreError {
    StoreError::WrongRunStatus {
        run_id: change.run_id.clone(),
        status,
        expected: "it changed while this was being done (another operator's retry or fail \
                   won); look at it again"
            .into(),
    }
}

/// Whether `next_seq`, the seq the transition's event would get, is what
/// [`RunTransition::if_last_seq`] asks for.
pub(crate) fn unchanged(change: &RunTransition, next_seq: u64) -> bool {
    change.if_last_seq.is_none_or(|last| last + 1 == next_seq)
}

/// How a journal entry's state is stored (`tollgate_run_steps.status`).
pub(crate) fn journal_status(entry: &JournalEntry) -> &'static str {
    if entry.output.is_some() {
        "completed"
    } else {
        "started"
    }
}

/// Refuse a timestamp a store could not read back (see
/// [`crate::support::time::is_storable`]), before any write.
pub(crate) fn check_storable(what: &str, t: DateTime<Utc>) -> StoreResult<()> {
    if crate::support::time::is_storable(t) {
        Ok(())
    } else {
        Err(StoreError::OutOfRange(format!(
            "{what} {t}: it lies past 9999-12-31T23:59:59Z, the latest time a store can hold"
        )))
    }
}

/// Refuse JSON text nested deeper than a store can read back (see
/// [`crate::support::json_depth`]), before any write. A scan of the text, not a parse.
pub(crate) fn check_json_text(what: &str, text: &str) -> StoreResult<()> {
    let limit = crate::support::json_depth::READABLE_DEPTH;
    if crate::support::json_depth::text_depth(text.as_bytes()) > limit {
        return Err(StoreError::TooDeep {
            what: what.to_string(),
            limit,
        });
    }
    Ok(())
}

/// [`check_json_text`] for a value that is stored as it is (PostgreSQL's
/// json and jsonb parameters), without serialising it.
#[cfg(feature = "postgres")]
pub(crate) fn check_json_value(what: &str, value: &Value) -> StoreResult<()> {
    let limit = crate::support::json_depth::READABLE_DEPTH;
    if crate::support::json_depth::value_depth(value, limit) > limit {
        return Err(StoreError::TooDeep {
            what: what.to_string(),
            limit,
        });
    }
    Ok(())
}

/// A `run_started` event is stored without its input: the run's row holds
/// the one copy, and readers put it back (`columns::into_events`). So it is
/// written only with its run (`run`, the run being created; `None` for a
/// write to a run that exists) and carries that run's input: anything
/// else would read back differently, and is refused before any write.
pub(crate) fn check_started(run: Option<&RunRecord>, events: &[Event]) -> StoreResult<()> {
    for event in events {
        let EventKind::RunStarted { input, .. } = &event.kind else {
            continue;
        };
        let with_its_run = run.is_some_and(|run| run.id == event.run_id && run.input == *input);
        if !with_its_run {
            return Err(StoreError::Conflict(format!(
                "run {}: a run_started event is written with its run, and carries the \
                 run's input",
                event.run_id
            )));
        }
    }
    Ok(())
}

/// The timestamps of a pause, checked (see [`check_storable`]).
pub(crate) fn check_pause(pause: &Pause) -> StoreResult<()> {
    check_storable("expires_at", pause.record.expires_at)?;
    check_storable("created_at", pause.record.created_at)
}

/// Refuse a lease (a run's or a message's) that ends later than a store
/// can hold.
pub(crate) fn check_lease_end(until: DateTime<Utc>) -> StoreResult<()> {
    check_storable("a lease's end", until)
}

/// Refuse a key claim that expires later than a store can hold.
pub(crate) fn check_claim_end(expires_at: DateTime<Utc>) -> StoreResult<()> {
    check_storable("a claim's expires_at", expires_at)
}

/// A spec version as a store may record it: a 64-hex hash (what every
/// reader takes for a full hash), an agent, and times it can hold.
pub(crate) fn check_spec_version(version: &SpecVersion) -> StoreResult<()> {
    let hex = version.hash.len() == 64 && version.hash.bytes().all(|b| b.is_ascii_hexdigit());
    if !hex {
        return Err(StoreError::Database(format!(
            "a spec version's hash must be 64 hex digits, not {:?}",
            version.hash
        )));
    }
    if version.agent_id.is_empty() {
        return Err(StoreError::Database(format!(
            "spec version {} has no agent",
            version.hash
        )));
    }
    check_storable("a spec version's first_seen", version.first_seen)?;
    check_storable("a spec version's last_seen", version.last_seen)
}

/// A caller's row count as SQL's `LIMIT` takes it: at least one row, and
/// any count past `i64` as no limit at all.
pub(crate) fn row_limit(limit: usize) -> i64 {
    i64::try_from(limit.max(1)).unwrap_or(i64::MAX)
}

/// The error of an insert: when it broke a unique constraint, `what` was
/// already stored ([`StoreError::Conflict`]: retrying cannot help);
/// otherwise the backend's own classification of `e`.
pub(crate) fn already_exists(
    unique_violation: bool,
    e: impl Into<StoreError>,
    what: impl FnOnce() -> String,
) -> StoreError {
    if unique_violation {
        StoreError::Conflict(format!("{} already exists", what()))
    } else {
        e.into()
    }
}
