//! tollgate-runtime: everything a tollgate server needs at run time.
//!
//! This crate is copied byte for byte into every exported server, so it
//! depends on nothing in the generator and refers only to its own modules.

// The layers, lowest first; each refers only to its own and those below
// (tests/it/layers.rs checks it; CONTRIBUTING.md "Layout" describes them).
pub mod app;
pub mod cli;
pub mod domain;
pub mod engine;
pub mod notify;
pub mod server;
pub mod service;
pub mod store;
pub mod support;
pub mod testing;

// Each module keeps the path it had before the layers had folders:
// `tollgate_runtime::spec`, `::run`, `::watch` and the rest.
pub use domain::{
    durable, events, expr, form, links, notices, pending_approval, policy, run_state, spec,
    spec_version,
};
pub use engine::{gate, metrics, run, tools, workflow};
pub use store::watch;
#[cfg(unix)]
pub use support::fatal;
pub use support::{
    backoff, embedded, env, hex, json_depth, json_doc, json_keys, json_scan, names, secrets, time,
};

pub use async_trait::async_trait;
/// The axum the server is built with: routes and layers given to [`App`]
/// are of this version.
pub use axum;
pub use serde_json;

pub use app::{App, AppError};
pub use events::{Event, EventKind};
pub use json_depth::MAX_JSON_DEPTH;
pub use pending_approval::{ApprovalError, ApprovalRecord, ApprovalStatus, Decision, Phase};
pub use run::{
    AgentRun, Ballot, DecisionOutcome, MigrateOutcome, MigrateReport, MigrateRequest,
    MigrateResult, MigrateSelection, OperatorFail, RunError, RunOutcome, VersionMissingEnv,
    check_from_prefix,
};
pub use run_state::{JournalEntry, Lease, OwnedRun, RunRecord, RunStatus};
pub use spec::{Spec, SpecError, SpecHash};
pub use store::{SharedStore, StateStore, StoreError, StoreErrorKind};
