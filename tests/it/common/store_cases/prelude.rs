//! Every import the case modules share, in one place: each case module
//! glob-imports this and `fixtures`, so a new trait the cases call through
//! is one line here.

pub use std::collections::HashSet;
pub use std::sync::Arc;

pub use serde_json::{Map, json};
pub use tollgate_runtime::events::{Event, EventKind};
pub use tollgate_runtime::json_depth::READABLE_DEPTH;
pub use tollgate_runtime::notices::NoticeRoutes;
pub use tollgate_runtime::pending_approval::{
    AfterClaim, ApprovalError, ApprovalRecord, ApprovalStatus, Claim, Decision, Phase,
};
pub use tollgate_runtime::run_state::{JournalEntry, Lease, RunRecord, RunStatus};
pub use tollgate_runtime::spec_version::SpecVersion;
pub use tollgate_runtime::store::{
    ApprovalQuery, CancelRun, EXPIRE_BATCH, FirstWrite, KeyClaim, Pause, PendingQuery, RunEnd,
    RunQuery, RunTransition, SharedStore, SpecFilter, StateStore, StoreError, StoreErrorKind,
};
