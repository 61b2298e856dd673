//! The command line of an exported server: its spec is built in, so no
//! command needs `--spec`. Reached through [`crate::App::run`].

use std::ffi::OsString;
use std::process::ExitCode;

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};

use super::args::ApprovalsCommand;
use super::common::SpecSource;
use crate::engine::tools::CustomTools;
use crate::server::RouterHook;
use crate::support::embedded::Embedded;

#[derive(Debug, Parser)]
#[command(version, about = "A tollgate server with its spec built in.")]
struct ExportedCli {
    #[command(subcommand)]
    command: ExportedCommand,
}

#[derive(Debug, Subcommand)]
enum ExportedCommand {
    /// List, show and decide pending approvals.
    #[command(subcommand)]
    Approvals(ApprovalsCommand),
    /// List, show, cancel, retry or fail runs.
    #[command(subcommand)]
    Runs(super::runs::RunsCommand),
    /// List and show the spec versions runs started under.
    #[command(subcommand)]
    Specs(super::specs::SpecsCommand),
    /// List the outbox's notices (webhook, email, Slack) and retry failed
    /// or dead ones.
    #[command(subcommand)]
    Notifications(super::notifications::NotificationsCommand),
    /// Before deploying SPEC in place of the built-in spec: what it will
    /// do to each pending approval and live run of this server's store.
    Plan(super::plan::PlanArgs),
    /// Check the built-in spec, and that its `rust:` tools, and no others,
    /// are registered and build.
    Validate {
        /// Also check that every `${NAME}` the spec needs without a
        /// default is set in this environment (what `serve` checks before
        /// it binds).
        #[arg(long)]
        env: bool,
    },
    /// Print the built-in spec's 64-hex canonical hash.
    Hash,
    /// Serve the built-in spec over HTTP (runs, approvals, webhook, schedules).
    ///
    /// Bearer tokens come from TOLLGATE_API_TOKENS=name:token,name2:token2 (the
    /// name is who decides); without them only a loopback address is served.
    /// Prints `listening on http://ADDR` on stdout once it accepts requests;
    /// logs go to stderr (RUST_LOG, default info).
    Serve(super::serve::ServeArgs),
    /// Serve the built-in spec's gate requests as MCP tools on stdin and
    /// stdout (request_approval, wait_for_approval, get_approval,
    /// cancel_approval), for an MCP client that starts the server itself.
    ///
    /// One JSON-RPC message per line; logs go to stderr. Requests are made
    /// as --as NAME with the requester scope: this process sees its own.
    Mcp(super::mcp::McpArgs),
}

/// The options through which tollgate's shared commands take another spec
/// than the built-in one: `--spec` (the spec, and its default state file)
/// and `approvals migrate --to`. An exported server serves its own spec
/// only, and given another one it would look for that spec's state file
/// and act under a spec it was not built for; so they are hidden from its
/// help and refused, exit 2, by clap before any command starts. (`plan
/// SPEC` stays: it reads the spec about to be deployed and changes nothing.)
fn without_other_specs(command: clap::Command) -> clap::Command {
    let ids: Vec<String> = command
        .get_arguments()
        .filter(|arg| {
            matches!(arg.get_long(), Some("spec"))
                || (command.get_name() == "migrate" && arg.get_long() == Some("to"))
        })
        .map(|arg| arg.get_id().to_string())
        .collect();
    let mut command = ids.into_iter().fold(command, |command, id| {
        command.mut_arg(id, |arg| arg.hide(true).value_parser(refuse_other_spec))
    });
    let subcommands: Vec<String> = command
        .get_subcommands()
        .map(|sub| sub.get_name().to_string())
        .collect();
    for name in subcommands {
        command = command.mut_subcommand(name, without_other_specs);
    }
    command
}

/// The value parser of a refused `--spec` or `--to`: every value is an
/// error, which clap prints after `invalid value 'X' for '--spec <SPEC>': `.
fn refuse_other_spec(_: &str) -> Result<std::path::PathBuf, String> {
    Err(
        "this server serves the spec built into it (its agent.yaml, embedded when it was built) \
         and its own state, and takes no other: leave the option out, or use `tollgate` with \
         --spec for another spec"
            .to_string(),
    )
}

/// The command line every exported server offers, before its spec's own
/// description is added: what docs/reference/cli-exported.md is made from.
pub fn command() -> clap::Command {
    without_other_specs(ExportedCli::command())
}

/// What builds an exported server's `rust:` tools, or says why it cannot
/// (the message of a usage error, exit 2).
pub(crate) type ToolSetup = Box<dyn FnOnce() -> Result<CustomTools, String> + Send>;

/// The `main` of an exported server: `setup` builds its `rust:` tools, and
/// `extend` adds its own routes and layers to what `serve` serves. Only
/// the commands that run the spec build them, inside the runtime, so a
/// tool's constructor may connect or spawn, and `--help`, `hash`, `specs`,
/// `plan` and `notifications` need none of the tools' configuration.
pub(crate) fn run_exported<I, T>(
    embedded: Embedded,
    setup: ToolSetup,
    extend: Option<RouterHook>,
    args: I,
) -> ExitCode
where
    I: IntoIterator<Item = T>,
    T: Into<OsString> + Clone,
{
    let command = without_other_specs(super::about::describe(ExportedCli::command(), &embedded));
    let matches = command.get_matches_from(args);
    let cli = match ExportedCli::from_arg_matches(&matches) {
        Ok(cli) => cli,
        Err(e) => e.exit(),
    };
    let source = SpecSource::Embedded(embedded);
    let tools = || setup().map_err(super::ExitFailure::bad_input);
    super::block_on_command(async move {
        match cli.command {
            ExportedCommand::Approvals(cmd) => {
                super::approvals::run(cmd, Some(&source), &tools()?).await
            }
            ExportedCommand::Runs(cmd) => super::runs::run(cmd, Some(&source), &tools()?).await,
            ExportedCommand::Specs(cmd) => super::specs::run(cmd, Some(&source)).await,
            ExportedCommand::Notifications(cmd) => {
                super::notifications::run(cmd, Some(&source)).await
            }
            ExportedCommand::Plan(args) => super::plan::run(args, Some(&source)).await,
            ExportedCommand::Validate { env } => {
                let spec = source.load()?;
                tools()?
                    .check(&spec)
                    .map_err(|e| super::ExitFailure::bad_input(e.to_string()))?;
                super::spec_commands::validate(&source, env)
            }
            ExportedCommand::Hash => super::spec_commands::hash(&source),
            ExportedCommand::Serve(args) => {
                super::serve::run_with(args, &source, &tools()?, extend).await
            }
            ExportedCommand::Mcp(args) => super::mcp::run(args, &source, &tools()?).await,
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::notifications::NotificationsCommand;
    use crate::domain::notices::{NoticeChannel, NoticeStatus};

    #[test]
    fn every_command_and_argument_of_an_exported_server_has_help() {
        let undocumented = crate::cli::help::undocumented(&exported_command());
        assert!(
            undocumented.is_empty(),
            "without a help line:\n{}",
            undocumented.join("\n")
        );
    }

    /// The command line exactly as `run_exported` parses it.
    fn exported_command() -> clap::Command {
        command()
    }

    #[test]
    fn an_exported_server_refuses_another_spec_and_does_not_offer_one() {
        for args in [
            &["server", "approvals", "list", "--spec", "other.yaml"][..],
            &[
                "server",
                "approvals",
                "approve",
                "k-1",
                "--spec",
                "other.yaml",
            ][..],
            &["server", "runs", "list", "--spec=other.yaml"][..],
            &[
                "server", "runs", "fail", "r-1", "--reason", "x", "--spec", "o.yaml",
            ][..],
            &["server", "specs", "list", "--spec", "other.yaml"][..],
            &[
                "server",
                "approvals",
                "migrate",
                "--all",
                "--to",
                "other.yaml",
            ][..],
        ] {
            let err = exported_command()
                .try_get_matches_from(args)
                .expect_err("refused");
            assert_eq!(err.exit_code(), 2, "{args:?}");
            let text = err.to_string();
            assert!(
                text.contains("this server serves the spec built into it"),
                "{args:?}: {text}"
            );
        }
        // Not in any help.
        let mut command = exported_command();
        for path in [
            &["approvals", "list"][..],
            &["approvals", "approve"][..],
            &["approvals", "migrate"][..],
            &["runs", "list"][..],
            &["specs", "show"][..],
        ] {
            let mut sub = &mut command;
            for name in path {
                sub = sub.find_subcommand_mut(name).expect("subcommand");
            }
            let help = sub.render_long_help().to_string();
            assert!(!help.contains("--spec <"), "{path:?}:\n{help}");
            assert!(!help.contains("--to <"), "{path:?}:\n{help}");
        }
        // Without them it parses as before; `plan SPEC` keeps its spec.
        for args in [
            &["server", "approvals", "list"][..],
            &["server", "approvals", "migrate", "--all", "--yes"][..],
            &["server", "plan", "next.yaml"][..],
        ] {
            let matches = exported_command()
                .try_get_matches_from(args)
                .unwrap_or_else(|e| panic!("{args:?}: {e}"));
            ExportedCli::from_arg_matches(&matches).unwrap_or_else(|e| panic!("{args:?}: {e}"));
        }
    }

    #[test]
    fn an_exported_server_serves_mcp_on_stdio_as_a_named_requester() {
        let parsed =
            ExportedCli::try_parse_from(["server", "mcp", "--as", "desk-agent"]).expect("parses");
        match parsed.command {
            ExportedCommand::Mcp(args) => assert_eq!(args.requester, "desk-agent"),
            other => panic!("{other:?}"),
        }
        let parsed = ExportedCli::try_parse_from(["server", "mcp"]).expect("parses");
        assert!(matches!(parsed.command, ExportedCommand::Mcp(args) if args.requester == "mcp"));
        assert!(ExportedCli::try_parse_from(["server", "mcp", "--as", "a b"]).is_err());
    }

    #[test]
    fn an_exported_server_lists_and_retries_notifications_as_tollgate_does() {
        let parsed = ExportedCli::try_parse_from([
            "server",
            "notifications",
            "list",
            "--status",
            "failed",
            "--status",
            "dead",
            "--channel",
            "webhook",
        ])
        .expect("parses");
        match parsed.command {
            ExportedCommand::Notifications(NotificationsCommand::List {
                status, channel, ..
            }) => {
                assert_eq!(status, [NoticeStatus::Failed, NoticeStatus::Dead]);
                assert_eq!(channel, Some(NoticeChannel::Webhook));
            }
            other => panic!("{other:?}"),
        }
        let parsed =
            ExportedCli::try_parse_from(["server", "notifications", "retry", "--all-dead"])
                .expect("parses");
        assert!(matches!(
            parsed.command,
            ExportedCommand::Notifications(NotificationsCommand::Retry {
                all_dead: true,
                id: None,
                ..
            })
        ));
        // An id or --all-dead, not both, not neither.
        for args in [
            &["server", "notifications", "retry"][..],
            &["server", "notifications", "retry", "n-1", "--all-dead"][..],
        ] {
            assert!(ExportedCli::try_parse_from(args).is_err(), "{args:?}");
        }
    }
}
