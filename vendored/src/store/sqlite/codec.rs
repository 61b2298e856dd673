//! SQLite rows <-> records: how SQLite's columns read ([`RowReader`]:
//! JSON and timestamps are text) and how values are written. Which column
//! holds which field is shared with PostgreSQL, in [`crate::store::columns`].

use chrono::{DateTime, Utc};
use rusqlite::Row;
use rusqlite::types::FromSql;
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::domain::pending_approval::ApprovalRecord;
use crate::domain::policy::Vote;
use crate::domain::run_state::RunRecord;
use crate::domain::spec_version::{SpecVersion, SpecVersionUse};
use crate::store::columns::{self, Columns};
use crate::store::{StoreError, StoreResult};

pub(super) use crate::store::columns::{
    APPROVAL_COLUMN_COUNT, APPROVAL_COLUMNS, ROSTER_COLUMN, RUN_COLUMN_COUNT, RUN_COLUMNS,
    SPEC_VERSION_COLUMNS, VOTE_COLUMNS, corrupt, run_outline_columns, spec_versions_sql, to_i64,
};

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

    pub fn get<T: FromSql>(&self, idx: usize, column: &'static str) -> StoreResult<T> {
        self.row.get(idx).map_err(|e| self.corrupt(column, &e))
    }

    fn parse_time(&self, text: &str, column: &'static str) -> StoreResult<DateTime<Utc>> {
        crate::support::time::parse_utc(text)
            .ok_or_else(|| self.corrupt(column, &format!("not a UTC timestamp: {text:?}")))
    }
}

impl Columns for RowReader<'_, '_> {
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

    fn text_opt(&self, idx: usize, column: &'static str) -> StoreResult<Option<String>> {
        self.get(idx, column)
    }

    fn int(&self, idx: usize, column: &'static str) -> StoreResult<i64> {
        self.get(idx, column)
    }

    fn json<T: DeserializeOwned>(&self, idx: usize, column: &'static str) -> StoreResult<T> {
        let text: String = self.get(idx, column)?;
        serde_json::from_str(&text).map_err(|e| self.corrupt(column, &e))
    }

    fn doc(
        &self,
        idx: usize,
        column: &'static str,
    ) -> StoreResult<crate::support::json_doc::JsonDoc> {
        // Read where SQLite holds it: no `String` copy of a wide input.
        let value = self
            .row
            .get_ref(idx)
            .map_err(|e| self.corrupt(column, &e))?;
        let text = value.as_str().map_err(|e| self.corrupt(column, &e))?;
        crate::support::json_doc::JsonDoc::parse(text).map_err(|e| self.corrupt(column, &e))
    }

    fn json_opt<T: DeserializeOwned>(
        &self,
        idx: usize,
        column: &'static str,
    ) -> StoreResult<Option<T>> {
        let text: Option<String> = self.get(idx, column)?;
        text.map(|t| serde_json::from_str(&t).map_err(|e| self.corrupt(column, &e)))
            .transpose()
    }

    /// 0 or 1 (SQLite has no boolean type).
    fn flag(&self, idx: usize, column: &'static str) -> StoreResult<bool> {
        match self.int(idx, column)? {
            0 => Ok(false),
            1 => Ok(true),
            n => Err(self.corrupt(column, &format!("{n} is not 0 or 1"))),
        }
    }

    fn time(&self, idx: usize, column: &'static str) -> StoreResult<DateTime<Utc>> {
        let text: String = self.get(idx, column)?;
        self.parse_time(&text, column)
    }

    fn time_opt(&self, idx: usize, column: &'static str) -> StoreResult<Option<DateTime<Utc>>> {
        let text: Option<String> = self.get(idx, column)?;
        text.map(|t| self.parse_time(&t, column)).transpose()
    }
}

pub(super) fn approval_from_row(row: &Row<'_>) -> StoreResult<ApprovalRecord> {
    columns::approval(&RowReader::new(row, "tollgate_approvals", "key")?)
}

pub(super) fn run_from_row(row: &Row<'_>) -> StoreResult<RunRecord> {
    columns::run(&RowReader::new(row, "tollgate_runs", "id")?)
}

pub(super) fn spec_version_from_row(row: &Row<'_>) -> StoreResult<SpecVersion> {
    columns::spec_version(&RowReader::new(row, "tollgate_specs", "hash")?)
}

pub(super) fn spec_version_use_from_row(row: &Row<'_>) -> StoreResult<SpecVersionUse> {
    columns::spec_version_use(&RowReader::new(row, "tollgate_specs", "hash")?)
}

pub(super) fn vote_from_row(row: &Row<'_>) -> StoreResult<Vote> {
    columns::vote(&RowReader::new(row, "tollgate_votes", "key")?)
}

pub(super) fn outbox_from_row(row: &Row<'_>) -> StoreResult<crate::store::OutboxNotice> {
    columns::outbox_notice(&RowReader::new(row, "tollgate_outbox", "id")?)
}

pub(super) fn event_from_row(row: &Row<'_>) -> StoreResult<columns::EventRead> {
    columns::event(&RowReader::new(row, "tollgate_run_events", "run_id")?)
}

/// JSON text for a column. Serialising our own values cannot fail in
/// practice (every map key is a string), but it is reported, not unwrapped.
/// Text nested deeper than [`Columns::json`] can parse back is refused
/// ([`StoreError::TooDeep`]): such a row would be lost to every reader.
pub(super) fn to_json<T: Serialize + ?Sized>(value: &T, what: &str) -> StoreResult<String> {
    let text = serde_json::to_string(value)
        .map_err(|e| StoreError::Database(format!("cannot encode {what} as JSON: {e}")))?;
    crate::store::check_json_text(what, &text)?;
    Ok(text)
}
