//! The command line shared by `tollgate` and every exported server: the
//! `approvals`, `runs`, `specs`, `plan`, `validate`, `hash`, `run` (and, in exported servers, `serve`)
//! commands, their output and exit statuses (DESIGN §6).
//!
//! Living in the runtime keeps an exported binary's commands, flags and exit
//! codes identical to tollgate's.

/// `println!` that never panics: a closed stdout (`tollgate ... | head`)
/// is not an error worth a panic; the output is simply no longer wanted.
macro_rules! say {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stdout().lock(), $($arg)*);
    }};
}

pub mod about;
pub mod approvals;
pub mod args;
mod batch;
mod common;
pub mod exit;
mod exported;
pub mod help;
pub mod mcp;
mod migrate;
pub mod notifications;
pub mod plan;
pub mod preflight;
pub mod render;
pub mod run;
pub mod runs;
pub mod serve;
pub mod spec_commands;
pub mod specs;
pub mod store_location;

/// Exported servers' generated code names it here (`cli::Embedded`); it
/// lives in [`crate::support::embedded`], which the server reads too.
pub use crate::support::embedded::Embedded;
pub use common::{SpecSource, agent, decider};
pub use exit::ExitFailure;
pub use exported::command as exported_command;
pub(crate) use exported::run_exported;

/// Run an async command on a fresh multi-thread runtime and turn its result
/// into an exit status, printing `error: ...` for failures.
pub fn block_on_command(
    command: impl std::future::Future<Output = Result<i32, ExitFailure>>,
) -> std::process::ExitCode {
    // A process that dies of SIGBUS or SIGSEGV says so in its log.
    #[cfg(unix)]
    crate::support::fatal::install();
    // A wide request's buffers go back to the system once it is answered.
    crate::support::large_blocks::return_to_the_system_when_freed();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return exit_code(exit::RUN_FAILED);
        }
    };
    let code = match runtime.block_on(command) {
        Ok(code) => code,
        Err(failure) => {
            eprintln!("error: {failure}");
            failure.code
        }
    };
    exit_code(code)
}

fn exit_code(code: i32) -> std::process::ExitCode {
    match u8::try_from(code) {
        Ok(code) => std::process::ExitCode::from(code),
        Err(_) => std::process::ExitCode::FAILURE,
    }
}
