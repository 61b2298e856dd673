//! The SQL of each store operation. Writers run inside the transaction the
//! store opened (READ COMMITTED, the PostgreSQL default); nothing here
//! begins or commits. Statements are prepared once per pooled connection.
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

use chrono::{DateTime, Utc};
use deadpool_postgres::GenericClient;
use serde_json::Value;
use tokio_postgres::Row;
use tokio_postgres::error::SqlState;
use tokio_postgres::types::ToSql;

use super::codec::{
    APPROVAL_COLUMN_COUNT, APPROVAL_COLUMNS, RUN_COLUMN_COUNT, RUN_COLUMNS, RowReader,
    SPEC_VERSION_COLUMNS, VOTE_COLUMNS, approval_from_row, checked, checked_doc, event_from_row,
    run_from_row, run_outline_columns, spec_version_from_row, spec_version_use_from_row,
    spec_versions_sql, text_json, to_i64, to_json, vote_from_row,
};
use super::notify;
use super::pipeline::sent;
use crate::domain::events::{Event, EventKind};
use crate::domain::pending_approval::{
    ApprovalError, ApprovalMove, ApprovalRecord, ApprovalStatus, Claim, Moved,
};
use crate::domain::run_state::{JournalEntry, Lease, OwnedRun, RunRecord, RunStatus};
use crate::domain::spec_version::{SpecVersion, SpecVersionUse};
use crate::store::columns::{Columns, StoredEvent};
use crate::store::{
    ApprovalFilter, ApprovalPage, ApprovalPager, ApprovalQuery, CancelRun, Cancelled, Claimed,
    Nudged, Pause, PendingPage, PendingPager, PendingQuery, RunEnd, RunQuery, RunsPage, StoreError,
    StoreResult, StuckClaim, UnreadableRow, already_exists, cursor, like_pattern, resolved_event,
    run_text_patterns,
};

pub(crate) use self::{
    approvals::*, keys::*, outbox::*, queries::*, rows::*, runs::*, specs::*, votes::*,
};
