//! tollgate: agent workflows that stop and wait for a person.

mod cli;

use std::process::ExitCode;

use clap::Parser;
use tollgate_runtime::cli::{self as shared, ExitFailure, SpecSource};
use tollgate_runtime::tools::CustomTools;

use crate::cli::{Cli, Command};

fn main() -> ExitCode {
    let cli = Cli::parse();
    shared::block_on_command(dispatch(cli.command))
}

async fn dispatch(command: Command) -> Result<i32, ExitFailure> {
    // tollgate itself has no custom tools: a spec with `rust:` tools must be
    // exported to implement them.
    let custom = CustomTools::new();
    match command {
        Command::Validate { spec, env } => {
            shared::spec_commands::validate(&SpecSource::File(spec), env)
        }
        Command::Hash { spec } => shared::spec_commands::hash(&SpecSource::File(spec)),
        Command::Run(args) => shared::run::run(args, &custom).await,
        Command::Approvals(cmd) => shared::approvals::run(cmd, None, &custom).await,
        Command::Runs(cmd) => shared::runs::run(cmd, None, &custom).await,
        Command::Specs(cmd) => shared::specs::run(cmd, None).await,
        Command::Notifications(cmd) => shared::notifications::run(cmd, None).await,
        Command::Plan(args) => shared::plan::run(args, None).await,
        Command::Serve { spec, args } => {
            shared::serve::run(args, &SpecSource::File(spec), &custom).await
        }
        Command::Mcp { spec, args } => {
            shared::mcp::run(args, &SpecSource::File(spec), &custom).await
        }
        Command::Export(args) => Ok(tollgate::export::command::run(args).await),
        Command::Reference { out, check } => {
            use clap::CommandFactory as _;
            Ok(tollgate::reference::run(cli::Cli::command(), &out, check))
        }
    }
}
