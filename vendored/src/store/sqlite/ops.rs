//! The SQL of each store operation, run synchronously on one connection.
//!
//! Callers encode values before taking the connection's lock (see
//! [`EventRow`], [`RunRow`], [`ApprovalRow`]), so the lock is held for the
//! SQL alone. Writers are called inside a `BEGIN IMMEDIATE` transaction by
//! the store; nothing here begins or commits.
//!
//! One file per concept (approvals.rs, keys.rs, queries.rs, runs.rs, specs.rs,
//! votes.rs),
//! and what they share in rows.rs; the imports below serve each of them
//! (`use super::*`).

mod approvals;
mod keys;
mod outbox;
mod queries;
mod rows;
mod runs;
mod specs;
mod votes;

use rusqlite::{Connection, ErrorCode, OptionalExtension, Params, Row, Statement, ToSql};

use super::codec::{
    APPROVAL_COLUMN_COUNT, APPROVAL_COLUMNS, ROSTER_COLUMN, RUN_COLUMN_COUNT, RUN_COLUMNS,
    RowReader, SPEC_VERSION_COLUMNS, VOTE_COLUMNS, approval_from_row, event_from_row,
    outbox_from_row, run_from_row, run_outline_columns, spec_version_from_row,
    spec_version_use_from_row, spec_versions_sql, to_i64, to_json, vote_from_row,
};
use crate::domain::events::{Event, EventKind};
use crate::domain::pending_approval::{ApprovalError, ApprovalMove, ApprovalRecord, Claim, Moved};
use crate::domain::run_state::{JournalEntry, OwnedRun, RunRecord, RunStatus};
use crate::domain::spec_version::{SpecVersion, SpecVersionUse};
use crate::store::columns::{Columns, OUTBOX_COLUMNS, StoredEvent};
use crate::store::{
    ApprovalFilter, ApprovalPage, ApprovalPager, ApprovalQuery, CancelRun, Cancelled, Claimed,
    FirstWrite, Nudged, Pause, PendingPage, PendingPager, PendingQuery, RunEnd, RunQuery, RunsPage,
    StoreError, StoreResult, StuckClaim, UnreadableRow, already_exists, cursor, like_pattern,
    resolved_event, run_text_patterns,
};
use crate::support::time::format_utc;

pub(crate) use self::{
    approvals::*, keys::*, outbox::*, queries::*, rows::*, runs::*, specs::*, votes::*,
};
