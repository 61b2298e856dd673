//! Command-line types. The doc comments are the help text.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

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
    /// Bearer tokens come from TOLLGATE_API_TOKENS=name:token,...; without
    /// them only a loopback address is served.
    Serve(ServeArgs),
}

#[derive(Debug, Args)]
pub struct ServeArgs {
    /// The spec file (YAML).
    pub spec: PathBuf,
    /// Address to listen on (HOST:PORT; port 0 picks a free one).
    #[arg(
        long,
        value_name = "ADDR",
        env = "TOLLGATE_LISTEN",
        default_value = "127.0.0.1:8080"
    )]
    pub listen: String,
    #[command(flatten)]
    pub store: StoreArgs,
    /// Largest request body accepted, in bytes (larger: 413).
    #[arg(long, value_name = "N", env = "TOLLGATE_MAX_BODY_BYTES", default_value_t = 1024 * 1024)]
    pub max_body_bytes: usize,
    /// After SIGTERM or ctrl-c, how long running steps may take to finish.
    #[arg(
        long,
        value_name = "DURATION",
        env = "TOLLGATE_SHUTDOWN_GRACE",
        default_value = "30s"
    )]
    pub shutdown_grace: String,
}

#[derive(Debug, Args)]
pub struct RunArgs {
    /// The spec file (YAML).
    pub spec: PathBuf,
    /// The run's input: inline JSON, or @FILE to read it from a file.
    #[arg(long, default_value = "{}")]
    pub input: String,
    /// Write pauses to the durable store and exit 0 with the approval key,
    /// instead of prompting on stdin.
    #[arg(long)]
    pub persist: bool,
    #[command(flatten)]
    pub store: StoreArgs,
    /// Print one JSON event per line instead of a summary.
    #[arg(long)]
    pub json: bool,
    /// Who answers the interactive prompts (default: $USER).
    #[arg(long, value_name = "NAME")]
    pub by: Option<String>,
}

/// Where the state lives. Default: `.tollgate/state.db` next to the spec.
#[derive(Debug, Args, Clone, Default)]
pub struct StoreArgs {
    /// SQLite state file (wins over --database-url).
    #[arg(long, value_name = "PATH")]
    pub state: Option<PathBuf>,
    /// Database URL (`sqlite://PATH`, `memory:`; also TOLLGATE_DATABASE_URL).
    #[arg(long, value_name = "URL", env = "TOLLGATE_DATABASE_URL")]
    pub database_url: Option<String>,
}

#[derive(Debug, Subcommand)]
pub enum ApprovalsCommand {
    /// List pending approvals, newest first (or, with --stuck, decided
    /// approvals whose run never reached a final state).
    List {
        /// Only this spec's agent; its default state file is used.
        #[arg(long)]
        spec: Option<PathBuf>,
        #[command(flatten)]
        store: StoreArgs,
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
        /// Show claims whose run never finished (a process stopped mid-step).
        #[arg(long)]
        stuck: bool,
        /// At most this many records.
        #[arg(long)]
        limit: Option<usize>,
    },
    /// Show one approval record, whatever its status.
    Show {
        key: String,
        #[arg(long)]
        spec: Option<PathBuf>,
        #[command(flatten)]
        store: StoreArgs,
        #[arg(long)]
        json: bool,
    },
    /// Approve (or, with --payload, modify) and resume the run here.
    Approve(DecideArgs),
    /// Reject; the run ends `rejected` (or goes on, for `on_reject: continue`).
    Reject(DecideArgs),
}

#[derive(Debug, Args)]
pub struct DecideArgs {
    /// The approval key.
    pub key: String,
    /// The spec the run belongs to (the run resumes under it).
    #[arg(long)]
    pub spec: PathBuf,
    #[command(flatten)]
    pub store: StoreArgs,
    /// Why (kept in the audit trail).
    #[arg(long)]
    pub reason: Option<String>,
    /// Who decides (default: $USER).
    #[arg(long, value_name = "NAME")]
    pub by: Option<String>,
    /// Approve with this payload instead (JSON, or @FILE): edited tool
    /// arguments, or a replacement output for an `after` gate.
    #[arg(long)]
    pub payload: Option<String>,
    /// Print one JSON event per line.
    #[arg(long)]
    pub json: bool,
}
