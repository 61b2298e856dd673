//! `mcp`: the MCP server on stdin and stdout (`server/mcp`), for an MCP
//! client that starts the server itself, as a command of tollgate
//! (`tollgate mcp SPEC`) and of every exported server.
//!
//! Who asks: the process has no token to say so, so it asks as the name
//! `--as` gives (`mcp` unless given), with the `requester` scope a
//! `name/requester:token` has over HTTP: it may request approvals and
//! follow, wait for and cancel its own, and nothing else (another
//! client's keys are not found). The name is recorded as `requested_by`
//! and shown to the approver; it cannot decide (no tool decides), and a
//! policy that bars requesters from voting bars it. This scopes what the
//! tools offer a model, not who may touch the store: whoever can start
//! this command can open the store with the CLI.

use clap::Args;

use super::args::StoreArgs;
use super::common::SpecSource;
use super::exit::{self, ExitFailure};
use crate::engine::tools::CustomTools;
use crate::server::{self, Caller, LogFormat};
use crate::support::env;

/// Serve the spec's gate requests as MCP tools on stdin and stdout.
#[derive(Debug, Args)]
pub struct McpArgs {
    #[command(flatten)]
    pub store: StoreArgs,
    /// The name requests are made as (recorded as `requested_by`; letters,
    /// digits, '-', '_', '.', '@'). Its requests are the only ones this
    /// process sees.
    #[arg(long = "as", value_name = "NAME", default_value = "mcp", value_parser = requester_name)]
    pub requester: String,
    /// Log lines on stderr: `text`, or `json` for one JSON object per line.
    #[arg(
        long,
        value_name = "FORMAT",
        env = env::LOG_FORMAT,
        value_parser = super::serve::log_format_arg,
        default_value = "text"
    )]
    pub log_format: LogFormat,
}

/// A name as a token's is written (`auth.rs`).
fn requester_name(text: &str) -> Result<String, String> {
    if let Some(reserved) = server::reserved_name(text) {
        Err(format!("{text:?} {reserved}"))
    } else if text.len() <= 64 && server::is_token_name(text) {
        Ok(text.to_string())
    } else {
        Err(format!(
            "{text:?}: use 1 to 64 letters, digits, '-', '_', '.' or '@' (as a token's name)"
        ))
    }
}

/// Serve until stdin ends (the client closed it) or SIGTERM or ctrl-c.
/// stdout carries JSON-RPC only; logs go to stderr.
pub async fn run(
    args: McpArgs,
    source: &SpecSource,
    custom: &CustomTools,
) -> Result<i32, ExitFailure> {
    server::init_logging_as(args.log_format);
    let spec = source.load()?;
    let store = super::store_location::open_in_existing_dir(&args.store, Some(source))?;
    // A store that cannot take writes would fail every request_approval
    // after the client was told the server is up.
    store.verify_writable().await.map_err(|e| {
        ExitFailure::bad_input(format!("cannot serve MCP for {}: {e}", store.describe()))
    })?;
    let agent = super::agent(spec, store, custom)?;
    tracing::info!(
        agent = %agent.spec().agent,
        store = %agent.store().describe(),
        requester = %args.requester,
        "MCP on stdio: one JSON-RPC message per line"
    );
    server::serve_mcp_stdio(agent, Caller(args.requester))
        .await
        .map_err(|e| ExitFailure::new(exit::RUN_FAILED, format!("stdio: {e}")))?;
    Ok(exit::OK)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requester_names_are_token_names() {
        assert_eq!(requester_name("claude-desktop").unwrap(), "claude-desktop");
        assert!(requester_name("bot@example.com").is_ok());
        for bad in ["", "two words", "a/b", &"x".repeat(65)] {
            assert!(requester_name(bad).is_err(), "{bad:?}");
        }
    }
}
