//! tollgate-runtime: everything a tollgate server needs at run time.
//!
//! This crate is copied byte for byte into every exported server, so it
//! depends on nothing in the generator and refers only to its own modules.

pub mod app;
pub mod backoff;
pub mod cli;
pub mod durable;
pub mod embedded;
pub mod env;
pub mod events;
pub mod expr;
#[cfg(unix)]
pub mod fatal;
pub mod gate;
pub mod hex;
pub mod json_depth;
mod json_kind;
pub mod links;
pub mod metrics;
pub mod names;
pub mod notify;
pub mod pending_approval;
pub mod run;
pub mod run_state;
pub mod secrets;
pub mod server;
pub mod spec;
pub mod store;
pub mod support;
pub mod testing;
pub mod time;
pub mod tools;
pub mod watch;
pub mod workflow;

pub use async_trait::async_trait;
/// The axum the server is built with: routes and layers given to [`App`]
/// are of this version.
pub use axum;
pub use serde_json;

pub use app::{App, AppError};
pub use events::{Event, EventKind};
pub use json_depth::MAX_JSON_DEPTH;
pub use pending_approval::{ApprovalError, ApprovalRecord, ApprovalStatus, Decision, Phase};
pub use run::{AgentRun, ClaimedDecision, OperatorFail, RunError, RunOutcome};
pub use run_state::{JournalEntry, Lease, OwnedRun, RunRecord, RunStatus};
pub use spec::{Spec, SpecError, SpecHash};
pub use store::{SharedStore, StateStore, StoreError, StoreErrorKind};
