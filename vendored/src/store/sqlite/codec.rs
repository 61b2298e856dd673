//! Rows <-> records. Everything read from the database is checked: a value
//! this build cannot understand (bad JSON, an unknown status, a malformed
//! timestamp) becomes [`StoreError::Corrupt`] naming table, column and row,
//! never a panic.

use chrono::{DateTime, Utc};
use rusqlite::Row;
use rusqlite::types::FromSql;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

use crate::events::Event;
use crate::pending_approval::{ApprovalRecord, ApprovalStatus, Phase};
use crate::run_state::{RunRecord, RunStatus};
use crate::store::{StoreError, StoreResult};

/// The columns of `tollgate_approvals`, in the order [`approval_from_row`]
/// reads them. Used by SELECT and by RETURNING alike.
pub(super) const APPROVAL_COLUMNS: &str = "key, run_id, agent_id, spec_hash, step_index, \
     step_id, phase, message, payload, outputs, input, \"trigger\", status, decision_data, \
     decided_by, decided_at, created_at, expires_at";

/// The number of columns in [`APPROVAL_COLUMNS`]; a query that selects more
/// finds them from this offset on.
pub(super) const APPROVAL_COLUMN_COUNT: usize = 18;

/// The columns of `tollgate_runs`, in the order [`run_from_row`] reads them.
pub(super) const RUN_COLUMNS: &str = "id, agent_id, spec_hash, status, input, \"trigger\", \
     outputs, error, created_at, updated_at, owner, lease_until";

/// Reads the columns of one row, naming the row in every error.
pub(super) struct RowReader<'a, 'r> {
    row: &'a Row<'r>,
    table: &'static str,
    /// The row's primary key, for error messages.
    id: String,
}

impl<'a, 'r> RowReader<'a, 'r> {
    /// Start reading a row whose primary key is the text in column 0.
    pub fn new(
        row: &'a Row<'r>,
        table: &'static str,
        id_column: &'static str,
    ) -> StoreResult<Self> {
        let id = row
            .get::<_, String>(0)
            .map_err(|e| corrupt(table, id_column, "?", &e))?;
        Ok(RowReader { row, table, id })
    }

    /// Read columns of a row that belong to another table's row `id` (a join).
    pub fn with_id(row: &'a Row<'r>, table: &'static str, id: String) -> Self {
        RowReader { row, table, id }
    }

    pub fn id(&self) -> &str {
        &self.id
    }

    pub fn get<T: FromSql>(&self, idx: usize, column: &'static str) -> StoreResult<T> {
        self.row
            .get(idx)
            .map_err(|e| corrupt(self.table, column, &self.id, &e))
    }

    pub fn json<T: DeserializeOwned>(&self, idx: usize, column: &'static str) -> StoreResult<T> {
        let text: String = self.get(idx, column)?;
        serde_json::from_str(&text).map_err(|e| corrupt(self.table, column, &self.id, &e))
    }

    pub fn json_opt(&self, idx: usize, column: &'static str) -> StoreResult<Option<Value>> {
        let text: Option<String> = self.get(idx, column)?;
        text.map(|t| {
            serde_json::from_str(&t).map_err(|e| corrupt(self.table, column, &self.id, &e))
        })
        .transpose()
    }

    pub fn time(&self, idx: usize, column: &'static str) -> StoreResult<DateTime<Utc>> {
        let text: String = self.get(idx, column)?;
        self.parse_time(&text, column)
    }

    pub fn time_opt(&self, idx: usize, column: &'static str) -> StoreResult<Option<DateTime<Utc>>> {
        let text: Option<String> = self.get(idx, column)?;
        text.map(|t| self.parse_time(&t, column)).transpose()
    }

    /// Parse text with `parse`, or report it as an unknown value.
    pub fn parsed<T>(
        &self,
        idx: usize,
        column: &'static str,
        parse: impl FnOnce(&str) -> Option<T>,
    ) -> StoreResult<T> {
        let text: String = self.get(idx, column)?;
        parse(&text).ok_or_else(|| {
            corrupt(
                self.table,
                column,
                &self.id,
                &format!("unknown value {text:?}"),
            )
        })
    }

    fn parse_time(&self, text: &str, column: &'static str) -> StoreResult<DateTime<Utc>> {
        crate::time::parse_utc(text).ok_or_else(|| {
            corrupt(
                self.table,
                column,
                &self.id,
                &format!("not a UTC timestamp: {text:?}"),
            )
        })
    }

    pub fn index(&self, idx: usize, column: &'static str) -> StoreResult<usize> {
        let n: i64 = self.get(idx, column)?;
        usize::try_from(n)
            .map_err(|_| corrupt(self.table, column, &self.id, &format!("negative index {n}")))
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

pub(super) fn approval_from_row(row: &Row<'_>) -> StoreResult<ApprovalRecord> {
    let r = RowReader::new(row, "tollgate_approvals", "key")?;
    Ok(ApprovalRecord {
        key: r.id().to_string(),
        run_id: r.get(1, "run_id")?,
        agent_id: r.get(2, "agent_id")?,
        spec_hash: r.get(3, "spec_hash")?,
        step_index: r.index(4, "step_index")?,
        step_id: r.get(5, "step_id")?,
        phase: r.parsed(6, "phase", Phase::parse)?,
        message: r.get(7, "message")?,
        payload: r.json(8, "payload")?,
        outputs: r.json::<Map<String, Value>>(9, "outputs")?,
        input: r.json(10, "input")?,
        trigger: r.json(11, "trigger")?,
        status: r.parsed(12, "status", ApprovalStatus::parse)?,
        decision_data: r.json_opt(13, "decision_data")?,
        decided_by: r.get(14, "decided_by")?,
        decided_at: r.time_opt(15, "decided_at")?,
        created_at: r.time(16, "created_at")?,
        expires_at: r.time(17, "expires_at")?,
    })
}

pub(super) fn run_from_row(row: &Row<'_>) -> StoreResult<RunRecord> {
    let r = RowReader::new(row, "tollgate_runs", "id")?;
    Ok(RunRecord {
        id: r.id().to_string(),
        agent_id: r.get(1, "agent_id")?,
        spec_hash: r.get(2, "spec_hash")?,
        status: r.parsed(3, "status", RunStatus::parse)?,
        input: r.json(4, "input")?,
        trigger: r.json(5, "trigger")?,
        outputs: r.json::<Map<String, Value>>(6, "outputs")?,
        error: r.get(7, "error")?,
        created_at: r.time(8, "created_at")?,
        updated_at: r.time(9, "updated_at")?,
        owner: r.get(10, "owner")?,
        lease_until: r.time_opt(11, "lease_until")?,
    })
}

/// Decode `SELECT run_id, seq, event`. The columns are authoritative for
/// where the event sits; the JSON carries what happened.
pub(super) fn event_from_row(row: &Row<'_>) -> StoreResult<Event> {
    let r = RowReader::new(row, "tollgate_run_events", "run_id")?;
    let seq: i64 = r.get(1, "seq")?;
    let mut event: Event = r.json(2, "event")?;
    event.run_id = r.id().to_string();
    event.seq = u64::try_from(seq).map_err(|_| {
        corrupt(
            "tollgate_run_events",
            "seq",
            r.id(),
            &format!("negative seq {seq}"),
        )
    })?;
    Ok(event)
}

/// JSON text for a column. Serialising our own values cannot fail in
/// practice (every map key is a string), but it is reported, not unwrapped.
/// Text nested deeper than [`RowReader::json`] can parse back is refused
/// ([`StoreError::TooDeep`]): such a row would be lost to every reader.
pub(super) fn to_json<T: Serialize + ?Sized>(value: &T, what: &str) -> StoreResult<String> {
    let text = serde_json::to_string(value)
        .map_err(|e| StoreError::Database(format!("cannot encode {what} as JSON: {e}")))?;
    crate::store::check_json_text(what, &text)?;
    Ok(text)
}

/// An in-memory count as an SQLite integer.
pub(super) fn to_i64<T: TryInto<i64>>(n: T, what: &str) -> StoreResult<i64> {
    n.try_into()
        .map_err(|_| StoreError::Database(format!("{what} is too large to store")))
}
