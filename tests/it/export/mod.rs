//! `tollgate export`: the generated crate, its vendored runtime, re-exports, and builds of the result.

mod build;
mod builder;
mod cli;
mod concurrency;
mod deploys;
mod dockerfile;
mod docs;
mod errors;
mod generated_files;
mod lockfile;
mod old_export;
mod parity;
mod plan;
mod reexport;
mod reexport_merge;
mod reexport_refusals;
mod tool_registration;
