//! Rows <-> records. Everything read is checked: a value this build cannot
//! understand (JSON of the wrong shape, an unknown status, a negative index)
//! becomes [`StoreError::Corrupt`] naming table, column and row, never a
//! panic.

use chrono::{DateTime, Utc};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};
use tokio_postgres::Row;
use tokio_postgres::types::FromSql;

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
pub(super) struct RowReader<'a> {
    row: &'a Row,
    table: &'static str,
    id: String,
}

impl<'a> RowReader<'a> {
    /// Start reading a row whose primary key is the text in column 0.
    pub fn new(row: &'a Row, table: &'static str, id_column: &'static str) -> StoreResult<Self> {
        let id = row
            .try_get::<_, String>(0)
            .map_err(|e| corrupt(table, id_column, "?", &e))?;
        Ok(RowReader { row, table, id })
    }

    /// Read columns of a row that belong to another table's row `id` (a join).
    pub fn with_id(row: &'a Row, table: &'static str, id: String) -> Self {
        RowReader { row, table, id }
    }

    pub fn id(&self) -> &str {
        &self.id
    }

    pub fn get<T: FromSql<'a>>(&self, idx: usize, column: &'static str) -> StoreResult<T> {
        self.row
            .try_get(idx)
            .map_err(|e| corrupt(self.table, column, &self.id, &e))
    }

    /// A JSON column decoded into `T`: the database guarantees JSON, not
    /// its shape.
    pub fn json<T: DeserializeOwned>(&self, idx: usize, column: &'static str) -> StoreResult<T> {
        let value: Value = self.get(idx, column)?;
        serde_json::from_value(value).map_err(|e| corrupt(self.table, column, &self.id, &e))
    }

    /// A text a person or a downstream wrote, kept as a JSON string (a
    /// `json` column: PostgreSQL text cannot hold NUL; see migration 3).
    pub fn text_opt(&self, idx: usize, column: &'static str) -> StoreResult<Option<String>> {
        match self.get::<Option<Value>>(idx, column)? {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => Ok(Some(s)),
            Some(other) => Err(corrupt(
                self.table,
                column,
                &self.id,
                &format!("expected a JSON string, found {other}"),
            )),
        }
    }

    pub fn time(&self, idx: usize, column: &'static str) -> StoreResult<DateTime<Utc>> {
        self.get(idx, column)
    }

    /// Parse text with `parse`, or report it as an unknown value.
    pub fn parsed<T>(
        &self,
        idx: usize,
        column: &'static str,
        parse: impl FnOnce(&str) -> Option<T>,
    ) -> StoreResult<T> {
        let text: &str = self.get(idx, column)?;
        parse(text).ok_or_else(|| {
            corrupt(
                self.table,
                column,
                &self.id,
                &format!("unknown value {text:?}"),
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

pub(super) fn approval_from_row(row: &Row) -> StoreResult<ApprovalRecord> {
    let r = RowReader::new(row, "tollgate_approvals", "key")?;
    Ok(ApprovalRecord {
        key: r.id().to_string(),
        run_id: r.get(1, "run_id")?,
        agent_id: r.get(2, "agent_id")?,
        spec_hash: r.get(3, "spec_hash")?,
        step_index: r.index(4, "step_index")?,
        step_id: r.get(5, "step_id")?,
        phase: r.parsed(6, "phase", Phase::parse)?,
        message: r.text_opt(7, "message")?,
        payload: r.get(8, "payload")?,
        outputs: r.json::<Map<String, Value>>(9, "outputs")?,
        input: r.get(10, "input")?,
        trigger: r.get(11, "trigger")?,
        status: r.parsed(12, "status", ApprovalStatus::parse)?,
        decision_data: r.get(13, "decision_data")?,
        decided_by: r.text_opt(14, "decided_by")?,
        decided_at: r.get(15, "decided_at")?,
        created_at: r.time(16, "created_at")?,
        expires_at: r.time(17, "expires_at")?,
    })
}

pub(super) fn run_from_row(row: &Row) -> StoreResult<RunRecord> {
    let r = RowReader::new(row, "tollgate_runs", "id")?;
    Ok(RunRecord {
        id: r.id().to_string(),
        agent_id: r.get(1, "agent_id")?,
        spec_hash: r.get(2, "spec_hash")?,
        status: r.parsed(3, "status", RunStatus::parse)?,
        input: r.get(4, "input")?,
        trigger: r.get(5, "trigger")?,
        outputs: r.json::<Map<String, Value>>(6, "outputs")?,
        error: r.text_opt(7, "error")?,
        created_at: r.time(8, "created_at")?,
        updated_at: r.time(9, "updated_at")?,
        owner: r.get(10, "owner")?,
        lease_until: r.get(11, "lease_until")?,
    })
}

/// Decode `SELECT run_id, seq, event`. The columns are authoritative for
/// where the event sits; the JSON carries what happened.
pub(super) fn event_from_row(row: &Row) -> StoreResult<Event> {
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

/// A value as jsonb. Serialising our own values cannot fail in practice
/// (every map key is a string), but it is reported, not unwrapped. A value
/// nested deeper than serde_json parses back is refused (see [`checked`]).
pub(super) fn to_json<T: Serialize + ?Sized>(value: &T, what: &str) -> StoreResult<Value> {
    let value = serde_json::to_value(value)
        .map_err(|e| StoreError::Database(format!("cannot encode {what} as JSON: {e}")))?;
    checked(&value, what)?;
    Ok(value)
}

/// A value for a json/jsonb column as it is, refused when it nests deeper
/// than serde_json (which decodes every column read back) can parse: such
/// a row would be lost to every reader ([`StoreError::TooDeep`]).
pub(super) fn checked<'v>(value: &'v Value, what: &str) -> StoreResult<&'v Value> {
    crate::store::check_json_value(what, value)?;
    Ok(value)
}

/// A text for a column that keeps it as a JSON string (see
/// [`RowReader::text_opt`]).
pub(super) fn text_json(text: Option<&str>) -> Option<Value> {
    text.map(|t| Value::String(t.to_string()))
}

/// An in-memory count as a bigint.
pub(super) fn to_i64<T: TryInto<i64>>(n: T, what: &str) -> StoreResult<i64> {
    n.try_into()
        .map_err(|_| StoreError::Database(format!("{what} is too large to store")))
}
