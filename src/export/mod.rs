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
mod layout;
pub mod lock;
pub mod lockfile;
pub mod manifest;
mod model;
pub mod names;
mod openapi;
mod plan;
mod reconcile;
mod templates;
pub mod vendored;
mod writer;

pub use apply::{CheckFinding, CheckReport, ExportOptions, ExportReport, check, export};
pub use error::ExportError;
pub use plan::{Plan, PlannedFile, Role, plan, sha256_hex};
pub use reconcile::Problem;

/// Where the manifest lives in an export.
pub const MANIFEST_PATH: &str = ".tollgate/export.json";

/// The spec's file name inside an export.
pub const SPEC_FILE: &str = "agent.yaml";
