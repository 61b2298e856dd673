//! Command-line types shared by tollgate and exported servers. The doc
//! comments are the help text.
//!
//! Values are parsed by clap (`value_parser`): a bad duration or JSON
//! argument is a usage error in clap's own format, exit 2, before any
//! command starts.

use std::path::PathBuf;

use clap::{Args, Subcommand};
use serde_json::Value;

use crate::support::env;

/// clap value parser for `JSON` or `@FILE` (the file's contents as JSON).
#[expect(
    clippy::disallowed_methods,
    reason = "arguments are parsed before the command opens any store, so this process holds no SQLite lock yet"
)]
pub fn json_arg(text: &str) -> Result<Value, String> {
    let (source, origin) = match text.strip_prefix('@') {
        Some(path) => (
            std::fs::read_to_string(path).map_err(|e| format!("cannot read {path}: {e}"))?,
            path,
        ),
        None => (text.to_string(), "the argument"),
    };
    super::common::check_depth(&source).map_err(|e| format!("{origin} {e}"))?;
    serde_json::from_str(&source).map_err(|e| format!("{origin} is not valid JSON: {e}"))
}

/// clap value parser for an approval key: an empty one (an unset `$KEY`
/// in a shell) is named as such, not looked up and "not found".
pub fn approval_key_arg(text: &str) -> Result<String, String> {
    non_empty(text, "the approval key is empty")
}

/// clap value parser for a run id, as [`approval_key_arg`].
pub fn run_id_arg(text: &str) -> Result<String, String> {
    non_empty(text, "the run id is empty")
}

fn non_empty(text: &str, empty: &str) -> Result<String, String> {
    if text.trim().is_empty() {
        Err(empty.to_string())
    } else {
        Ok(text.to_string())
    }
}

/// clap value parser for a duration: `30s`, `5m`, `1h30m`, `250ms`.
pub fn duration_arg(text: &str) -> Result<std::time::Duration, String> {
    crate::support::time::parse_duration(text)
}

#[derive(Debug, Args)]
pub struct RunArgs {
    /// The spec file (YAML).
    pub spec: PathBuf,
    /// The run's input: inline JSON, or @FILE to read it from a file.
    #[arg(long, value_name = "JSON", default_value = "{}", value_parser = json_arg)]
    pub input: Value,
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
    #[arg(long, value_name = "URL", env = env::DATABASE_URL)]
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
        /// Show claims whose run never finished: stuck, or running with no live
        /// lease (its process stopped mid-step).
        #[arg(long)]
        stuck: bool,
        /// At most this many records.
        #[arg(long)]
        limit: Option<usize>,
        /// Only approvals paused at this step id.
        #[arg(long, value_name = "STEP_ID", conflicts_with = "stuck")]
        step: Option<String>,
        /// Only approvals whose message, step id, key, run id or decider
        /// holds this text, ignoring case.
        #[arg(long, value_name = "TEXT", conflicts_with = "stuck")]
        query: Option<String>,
        /// Only approvals paused under these spec versions: `current` (the
        /// spec given with --spec, or an exported server's own), `stale`
        /// (any other version), or a spec hash (in full, or its first 8 or
        /// more hex characters).
        #[arg(long, value_name = "current|stale|HASH", conflicts_with = "stuck")]
        spec_version: Option<String>,
        /// Print the keys alone, newest first, one per line, for a shell to
        /// read (`KEY=$(... approvals list --quiet | head -n1)` takes the
        /// newest).
        #[arg(long, short, conflicts_with = "json")]
        quiet: bool,
    },
    /// Show one approval record, whatever its status. With
    /// TOLLGATE_LINK_SECRET set, a PENDING record shows the signed link of
    /// --link-for NAME (absolute under TOLLGATE_PUBLIC_URL), or, without
    /// it, an unbound link only when TOLLGATE_UNBOUND_LINKS is on.
    Show {
        /// The approval key (`approvals list` prints it).
        #[arg(value_parser = approval_key_arg)]
        key: String,
        /// The spec whose default state file holds the approval (and whose
        /// approvers --link-for is checked against).
        #[arg(long)]
        spec: Option<PathBuf>,
        #[command(flatten)]
        store: StoreArgs,
        /// Print the record as JSON (as `GET /approvals/{key}` answers it).
        #[arg(long)]
        json: bool,
        /// Show a signed link bound to this identity: whoever opens it
        /// decides as NAME. Refused (exit 6) for a NAME the spec's
        /// approvals.approvers leaves out.
        #[arg(long, value_name = "NAME")]
        link_for: Option<String>,
    },
    /// Show a gate's votes (DESIGN §13): the ledger, oldest first, each
    /// rule's progress, and who may not vote.
    Votes {
        /// The approval key of the gate.
        #[arg(value_parser = approval_key_arg)]
        key: String,
        /// The spec the gate belongs to (its rules and groups; its default
        /// state file is used).
        #[arg(long)]
        spec: Option<PathBuf>,
        #[command(flatten)]
        store: StoreArgs,
        /// Print the ledger as `GET /approvals/{key}/votes` answers it.
        #[arg(long)]
        json: bool,
    },
    /// Approve (or, with --payload, modify) and resume the run here.
    Approve(ApproveArgs),
    /// Reject; the run ends `rejected` (or goes on, for `on_reject: continue`).
    Reject(DecideArgs),
    /// Move pending approvals made under older versions of the spec, with
    /// their runs, onto the spec given (see docs/changing-a-spec.md).
    Migrate(MigrateArgs),
}

/// `approvals migrate`: which approvals, onto which spec, how.
#[derive(Debug, Args)]
#[command(group(
    clap::ArgGroup::new("which").required(true).args(["key", "all", "step", "from"])
))]
pub struct MigrateArgs {
    /// The spec to move them onto (its default state file is used).
    /// Required by tollgate; an exported server uses the spec built into it.
    #[arg(long, value_name = "SPEC")]
    pub to: Option<PathBuf>,
    #[command(flatten)]
    pub store: StoreArgs,
    /// This pending approval.
    #[arg(long, value_name = "KEY", value_parser = approval_key_arg)]
    pub key: Option<String>,
    /// Every pending approval on another version.
    #[arg(long)]
    pub all: bool,
    /// Those paused at this step (its id in their version).
    #[arg(long, value_name = "STEP_ID")]
    pub step: Option<String>,
    /// Those on the version with this hash (or a prefix of 8+ hex).
    #[arg(long, value_name = "HASH")]
    pub from: Option<String>,
    /// A gate renamed in the new version: OLD=NEW (repeatable).
    #[arg(long = "map", value_name = "OLD=NEW", value_parser = map_arg)]
    pub map: Vec<(String, String)>,
    /// Show what would move and what would not, change nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Move without asking (required when stdin is not a terminal).
    #[arg(long)]
    pub yes: bool,
    /// Who migrates (default: $USER); checked against approvals.approvers.
    #[arg(long, value_name = "NAME")]
    pub by: Option<String>,
    /// Print the report as JSON.
    #[arg(long)]
    pub json: bool,
}

/// clap value parser for `--map OLD=NEW`.
fn map_arg(text: &str) -> Result<(String, String), String> {
    match text.split_once('=') {
        Some((old, new)) if !old.trim().is_empty() && !new.trim().is_empty() => {
            Ok((old.trim().to_string(), new.trim().to_string()))
        }
        _ => Err(format!("{text:?}: give OLD=NEW, two step ids")),
    }
}

/// `approve` is a decision that may carry a payload; `reject` never does, so
/// its help does not offer one.
#[derive(Debug, Args)]
pub struct ApproveArgs {
    #[command(flatten)]
    pub decide: DecideArgs,
    /// Approve with this payload instead (JSON, or @FILE): edited tool
    /// arguments, or a replacement output for an `after` gate.
    #[arg(long, value_name = "JSON", value_parser = payload_arg, conflicts_with = "all")]
    pub payload: Option<Value>,
    /// The approver's input, on a gate with a `form:` (a JSON object, or
    /// @FILE): checked against the form (exit 2, each error with its path,
    /// when it does not fit), and part of the step's output as `input`.
    /// With --all, the same input for each, checked against each gate's
    /// own form.
    #[arg(long, value_name = "JSON", value_parser = json_arg)]
    pub input: Option<Value>,
}

/// clap value parser for `--payload`: JSON, but not `null`, which could mean
/// "no edit" or "replace with null" (the HTTP API refuses it the same way).
pub fn payload_arg(text: &str) -> Result<Value, String> {
    match json_arg(text)? {
        Value::Null => Err(
            "the payload is null: leave --payload out to approve as is, or give the edited payload"
                .into(),
        ),
        payload => Ok(payload),
    }
}

#[derive(Debug, Args)]
pub struct DecideArgs {
    /// The approval key (or --all).
    #[arg(
        required_unless_present = "all",
        conflicts_with = "all",
        value_parser = approval_key_arg
    )]
    pub key: Option<String>,
    /// Decide every pending approval of the spec's agent (narrowed by
    /// --step and --query), after showing them and asking (or --yes).
    #[arg(long)]
    pub all: bool,
    /// With --all: only those paused at this step id.
    #[arg(long, value_name = "STEP_ID", requires = "all")]
    pub step: Option<String>,
    /// With --all: only those whose message, step id, key, run id or
    /// decider holds this text, ignoring case (as `approvals list --query`).
    #[arg(long, value_name = "TEXT", requires = "all")]
    pub query: Option<String>,
    /// With --all: decide without asking (required when stdin is not a
    /// terminal).
    #[arg(long, requires = "all")]
    pub yes: bool,
    /// The spec the run belongs to (the run resumes under it). Required by
    /// tollgate; an exported server uses the spec built into it.
    #[arg(long)]
    pub spec: Option<PathBuf>,
    #[command(flatten)]
    pub store: StoreArgs,
    /// Why (kept in the audit trail).
    #[arg(long)]
    pub reason: Option<String>,
    /// Who decides (default: $USER): recorded as decided_by and checked
    /// like any decider (the approvers, a gate's groups, and never who
    /// started the run: exit 6). A record, not a security boundary: whoever
    /// can write the store can decide anything.
    #[arg(long, value_name = "NAME")]
    pub by: Option<String>,
    /// Decide only if the payload is still the one with this digest (the
    /// `payload_digest` that `approvals show --json` printed): refused with
    /// exit 4 (`payload_changed`) if it was edited since.
    /// (Not with --all, which checks each approval against the digest
    /// its table showed.)
    #[arg(long, value_name = "sha256:HEX", conflicts_with = "all")]
    pub payload_digest: Option<String>,
    /// Print one JSON event per line (with --all: each key's result, as
    /// `POST /approvals/batch` answers).
    #[arg(long)]
    pub json: bool,
}

/// The run an operator acts on (`runs retry`, `runs fail`), and who acts.
#[derive(Debug, Args)]
pub struct RunOpArgs {
    /// The run's id.
    #[arg(value_parser = run_id_arg)]
    pub run_id: String,
    /// The spec the run belongs to: its agent, and the approvers who may
    /// act on its runs. Required by tollgate; an exported server uses the
    /// spec built into it.
    #[arg(long)]
    pub spec: Option<PathBuf>,
    #[command(flatten)]
    pub store: StoreArgs,
    /// Who acts (default: $USER); checked against approvals.approvers.
    #[arg(long, value_name = "NAME")]
    pub by: Option<String>,
    /// Print one JSON event per line.
    #[arg(long)]
    pub json: bool,
}
