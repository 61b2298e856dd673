//! `tollgate export`: spec -> in-memory file plan -> disk.
//!
//! [`plan()`] is pure and deterministic: the same spec gives the same bytes.
//! Everything that touches the disk (reading the last manifest, deciding what
//! to replace, keep or remove, writing atomically) lives in [`apply`], and
//! the command-line edge in [`command`].

pub mod apply;
mod codegen;
pub mod command;
mod env_refs;
mod error;
mod gates;
mod guard;
mod layout;
pub mod lock;
pub mod lockfile;
pub mod manifest;
mod markers;
mod merge;
mod model;
pub mod names;
mod openapi;
mod plan;
mod reconcile;
mod server_reference;
mod templates;
mod upgrade;
pub mod vendored;
mod waiting;
mod writer;

pub use apply::{
    CheckFinding, CheckReport, ExportOptions, ExportReport, Preview, check, export, preview,
};
pub use error::ExportError;
pub use plan::{Plan, PlannedFile, Role, plan, sha256_hex};
pub use reconcile::{Action, Problem};

/// Where the manifest lives in an export.
pub const MANIFEST_PATH: &str = ".tollgate/export.json";

/// Where an export keeps the pristine generated content of each file of
/// yours: the base of the next re-export's three-way merge.
pub const PRISTINE_DIR: &str = ".tollgate/pristine";

/// The spec's file name inside an export.
pub const SPEC_FILE: &str = "agent.yaml";
