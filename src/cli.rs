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
        /// Also check that every `${NAME}` the spec needs without a
        /// default is set in this environment (what `serve` checks before
        /// it binds); exit 2 naming each one that is not.
        #[arg(long)]
        env: bool,
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
    /// List, show, cancel, retry or fail runs.
    #[command(subcommand)]
    Runs(tollgate_runtime::cli::runs::RunsCommand),
    /// List and show the spec versions runs started under.
    #[command(subcommand)]
    Specs(tollgate_runtime::cli::specs::SpecsCommand),
    /// List the outbox's notices (webhook, email, Slack) and retry failed
    /// or dead ones.
    #[command(subcommand)]
    Notifications(tollgate_runtime::cli::notifications::NotificationsCommand),
    /// Before a deploy: what SPEC will do to every pending approval and
    /// live run on another version of its agent (each pause classified,
    /// with the outcome under SPEC's on_spec_change).
    Plan(tollgate_runtime::cli::plan::PlanArgs),
    /// Serve the spec over HTTP: runs, approvals, the webhook, schedules.
    ///
    /// Bearer tokens come from TOLLGATE_API_TOKENS=name:token,name2:token2 (the
    /// name is who decides); without them only a loopback address is served.
    /// Prints `listening on http://ADDR` on stdout once it accepts requests;
    /// logs go to stderr (RUST_LOG, default info).
    Serve {
        /// The spec file (YAML).
        spec: PathBuf,
        #[command(flatten)]
        args: ServeArgs,
    },
    /// Serve the spec's gate requests as MCP tools on stdin and stdout
    /// (request_approval, wait_for_approval, get_approval, cancel_approval),
    /// for an MCP client that starts the server itself.
    ///
    /// One JSON-RPC message per line; logs go to stderr. Requests are made
    /// as --as NAME with the requester scope: this process sees its own.
    /// Over HTTP, `tollgate serve` answers MCP at /mcp.
    Mcp {
        /// The spec file (YAML).
        spec: PathBuf,
        #[command(flatten)]
        args: tollgate_runtime::cli::mcp::McpArgs,
    },
    /// Export the spec as a standalone, deployable Rust server crate.
    Export(tollgate::export::command::ExportArgs),
    /// Write the reference pages (docs/reference/) from the code. For
    /// contributors (`scripts/reference`), so hidden.
    #[command(hide = true)]
    Reference {
        /// The directory to write the pages into.
        #[arg(long, value_name = "DIR")]
        out: PathBuf,
        /// Write nothing; exit 1 naming each page that differs.
        #[arg(long)]
        check: bool,
    },
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    use super::*;

    #[test]
    fn every_command_and_argument_has_help() {
        let undocumented = tollgate_runtime::cli::help::undocumented(&Cli::command());
        assert!(
            undocumented.is_empty(),
            "without a help line:\n{}",
            undocumented.join("\n")
        );
    }

    /// The help of `SUBCOMMAND... --LONG` (short or long, as given).
    fn help_of(path: &[&str], long: &str) -> String {
        let mut command = Cli::command();
        for name in path {
            command = command
                .find_subcommand(name)
                .unwrap_or_else(|| panic!("no subcommand {name}"))
                .clone();
        }
        let arg = command
            .get_arguments()
            .find(|a| a.get_long() == Some(long))
            .unwrap_or_else(|| panic!("{path:?} has no --{long}"));
        arg.get_long_help()
            .or(arg.get_help())
            .map(ToString::to_string)
            .unwrap_or_default()
    }

    #[test]
    fn runs_fail_spec_says_what_fail_does_with_it() {
        let fail = help_of(&["runs", "fail"], "spec");
        assert!(!fail.contains("retry"), "{fail}");
        let retry = help_of(&["runs", "retry"], "spec");
        assert!(retry.contains("retry"), "{retry}");
    }
}
