//! PostgreSQL rows <-> records: how PostgreSQL's columns read
//! ([`RowReader`]: json and timestamptz columns, free text kept as JSON
//! strings) and how values are written. Which column holds which field is
//! shared with SQLite, in [`crate::store::columns`].

use chrono::{DateTime, Utc};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use tokio_postgres::Row;
use tokio_postgres::types::FromSql;

use crate::domain::pending_approval::ApprovalRecord;
use crate::domain::policy::Vote;
use crate::domain::run_state::RunRecord;
use crate::domain::spec_version::{SpecVersion, SpecVersionUse};
use crate::store::columns::{self, Columns};
use crate::store::{StoreError, StoreResult};

pub(super) use crate::store::columns::{
    APPROVAL_COLUMN_COUNT, APPROVAL_COLUMNS, RUN_COLUMN_COUNT, RUN_COLUMNS, SPEC_VERSION_COLUMNS,
    VOTE_COLUMNS, corrupt, run_outline_columns, spec_versions_sql, to_i64,
};

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

    pub fn get<T: FromSql<'a>>(&self, idx: usize, column: &'static str) -> StoreResult<T> {
        self.row.try_get(idx).map_err(|e| self.corrupt(column, &e))
    }
}

impl Columns for RowReader<'_> {
    fn table(&self) -> &'static str {
        self.table
    }

    fn id(&self) -> &str {
        &self.id
    }

    fn string(&self, idx: usize, column: &'static str) -> StoreResult<String> {
        self.get(idx, column)
    }

    fn string_opt(&self, idx: usize, column: &'static str) -> StoreResult<Option<String>> {
        self.get(idx, column)
    }

    /// A text a person or a downstream wrote, kept as a JSON string (a
    /// `json` column: PostgreSQL text cannot hold NUL; see migration 3).
    fn text_opt(&self, idx: usize, column: &'static str) -> StoreResult<Option<String>> {
        match self.get::<Option<Value>>(idx, column)? {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => Ok(Some(s)),
            Some(other) => {
                Err(self.corrupt(column, &format!("expected a JSON string, found {other}")))
            }
        }
    }

    fn int(&self, idx: usize, column: &'static str) -> StoreResult<i64> {
        self.get(idx, column)
    }

    /// The database guarantees JSON, not its shape.
    fn json<T: DeserializeOwned>(&self, idx: usize, column: &'static str) -> StoreResult<T> {
        let value: Value = self.get(idx, column)?;
        serde_json::from_value(value).map_err(|e| self.corrupt(column, &e))
    }

    fn doc(
        &self,
        idx: usize,
        column: &'static str,
    ) -> StoreResult<crate::support::json_doc::JsonDoc> {
        // jsonb arrives as a tree whatever is asked for.
        let value: Value = self.get(idx, column)?;
        Ok(crate::support::json_doc::JsonDoc::from_value(&value))
    }

    fn json_opt<T: DeserializeOwned>(
        &self,
        idx: usize,
        column: &'static str,
    ) -> StoreResult<Option<T>> {
        self.get::<Option<Value>>(idx, column)?
            .map(|value| serde_json::from_value(value).map_err(|e| self.corrupt(column, &e)))
            .transpose()
    }

    fn flag(&self, idx: usize, column: &'static str) -> StoreResult<bool> {
        self.get(idx, column)
    }

    fn time(&self, idx: usize, column: &'static str) -> StoreResult<DateTime<Utc>> {
        self.get(idx, column)
    }

    fn time_opt(&self, idx: usize, column: &'static str) -> StoreResult<Option<DateTime<Utc>>> {
        self.get(idx, column)
    }
}

pub(super) fn approval_from_row(row: &Row) -> StoreResult<ApprovalRecord> {
    columns::approval(&RowReader::new(row, "tollgate_approvals", "key")?)
}

pub(super) fn run_from_row(row: &Row) -> StoreResult<RunRecord> {
    columns::run(&RowReader::new(row, "tollgate_runs", "id")?)
}

pub(super) fn spec_version_from_row(row: &Row) -> StoreResult<SpecVersion> {
    columns::spec_version(&RowReader::new(row, "tollgate_specs", "hash")?)
}

pub(super) fn spec_version_use_from_row(row: &Row) -> StoreResult<SpecVersionUse> {
    columns::spec_version_use(&RowReader::new(row, "tollgate_specs", "hash")?)
}

pub(super) fn vote_from_row(row: &Row) -> StoreResult<Vote> {
    columns::vote(&RowReader::new(row, "tollgate_votes", "key")?)
}

pub(super) fn outbox_from_row(row: &Row) -> StoreResult<crate::store::OutboxNotice> {
    columns::outbox_notice(&RowReader::new(row, "tollgate_outbox", "id")?)
}

pub(super) fn event_from_row(row: &Row) -> StoreResult<columns::EventRead> {
    columns::event(&RowReader::new(row, "tollgate_run_events", "run_id")?)
}

/// A value as jsonb. Serialising our own values cannot fail in practice
/// (every map key is a string), but it is reported, not unwrapped. A value
/// nested deeper than serde_json parses back is refused (see [`checked`]).
pub(super) fn to_json<T: Serialize + ?Sized>(value: &T, what: &str) -> StoreResult<Value> {
    let tree = serde_json::to_value(value).map_err(|e| {
        // A document kept as text (`json_doc`) too deep to parse into a
        // tree fails here rather than at the depth check: say so the same.
        let too_deep = serde_json::to_string(value)
            .ok()
            .and_then(|text| crate::store::check_json_text(what, &text).err());
        too_deep
            .unwrap_or_else(|| StoreError::Database(format!("cannot encode {what} as JSON: {e}")))
    })?;
    checked(&tree, what)?;
    Ok(tree)
}

/// A value for a json/jsonb column as it is, refused when it nests deeper
/// than serde_json (which decodes every column read back) can parse: such
/// a row would be lost to every reader ([`StoreError::TooDeep`]).
pub(super) fn checked<'v>(value: &'v Value, what: &str) -> StoreResult<&'v Value> {
    crate::store::check_json_value(what, value)?;
    Ok(value)
}

/// A document for a jsonb parameter: its depth checked on its text first
/// (a tree too deep to read could not be built).
pub(super) fn checked_doc(
    doc: &crate::support::json_doc::JsonDoc,
    what: &str,
) -> StoreResult<Value> {
    crate::store::check_json_text(what, doc.as_str())?;
    doc.try_to_value()
        .map_err(|e| StoreError::Database(format!("cannot encode {what} as JSON: {e}")))
}

/// A text for a column that keeps it as a JSON string (see
/// [`Columns::text_opt`]).
pub(super) fn text_json(text: Option<&str>) -> Option<Value> {
    text.map(|t| Value::String(t.to_string()))
}
