//! tollgate's top-level command line. The doc comments are the help text;
//! the shared commands live in the runtime (`tollgate_runtime::cli`) so that
//! exported servers offer the very same ones.

use std::path::PathBuf;

use clap::{Parser, Subcommand};
use tollgate_runtime::cli::args::{ApprovalsCommand, RunArgs};
use tollgate_runtime::cli::serve::ServeArgs;

/// Agent workflows that stop and wait for a person.
#[derive(Debug, Parser)]
#[command(name = "tollgate", version, about, max_term_width = 100)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Check a spec; exit 2 with `error: SPEC:LINE:COL: ...` when it is invalid.
    Validate {
        /// The spec file (YAML).
        spec: PathBuf,
    },
    /// Print the spec's 64-hex canonical hash.
    Hash {
        /// The spec file (YAML).
        spec: PathBuf,
    },
    /// Run a spec once. Without --persist, gates are answered on stdin.
    Run(RunArgs),
    /// List, show and decide pending approvals.
    #[command(subcommand)]
    Approvals(ApprovalsCommand),
    /// Serve the spec over HTTP: runs, approvals, the webhook, schedules.
    Serve {
        /// The spec file (YAML).
        spec: PathBuf,
        #[command(flatten)]
        args: ServeArgs,
    },
}
