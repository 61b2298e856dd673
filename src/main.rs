//! tollgate: agent workflows that stop and wait for a person.

mod cli;
mod commands;
mod exit;
mod render;
mod state;

use clap::Parser;

use crate::cli::{Cli, Command};

fn main() {
    let cli = Cli::parse();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            std::process::exit(exit::RUN_FAILED);
        }
    };
    let code = match runtime.block_on(dispatch(cli.command)) {
        Ok(code) => code,
        Err(failure) => {
            eprintln!("error: {failure}");
            failure.code
        }
    };
    std::process::exit(code);
}

async fn dispatch(command: Command) -> Result<i32, exit::Failure> {
    match command {
        Command::Validate { spec } => commands::spec::validate(&spec),
        Command::Hash { spec } => commands::spec::hash(&spec),
        Command::Run(args) => commands::run::run(args).await,
        Command::Approvals(cmd) => commands::approvals::run(cmd).await,
        Command::Serve(args) => commands::serve::run(args).await,
    }
}
