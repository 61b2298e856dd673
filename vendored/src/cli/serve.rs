//! `serve`: the HTTP server of DESIGN §5 (`crate::server`), as a command of
//! tollgate (`tollgate serve SPEC`) and of every exported server.

use std::time::Duration;

use clap::Args;

use super::args::{StoreArgs, duration_arg};
use super::common::SpecSource;
use super::exit::{self, ExitFailure};
use crate::domain::links::LinkSigner;
use crate::engine::tools::CustomTools;
use crate::server::{self, ApiTokens, Limits, LogFormat, Server, ServerConfig};
use crate::support::env;

/// How to serve. Bearer tokens come from TOLLGATE_API_TOKENS=name:token,...;
/// without them only a loopback address is served. Signed approval links
/// are on when TOLLGATE_LINK_SECRET is set (32 bytes or more), absolute
/// under TOLLGATE_PUBLIC_URL when that is set.
#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Address to listen on (HOST:PORT; port 0 picks a free one).
    #[arg(
        long,
        value_name = "ADDR",
        env = env::LISTEN,
        default_value = server::DEFAULT_LISTEN
    )]
    pub listen: String,
    #[command(flatten)]
    pub store: StoreArgs,
    /// Largest request body accepted, in bytes (larger: 413 payload_too_large).
    #[arg(
        long,
        value_name = "N",
        env = env::MAX_BODY_BYTES,
        default_value_t = server::DEFAULT_MAX_BODY_BYTES
    )]
    pub max_body_bytes: usize,
    /// After SIGTERM or ctrl-c, how long running steps may take to finish.
    #[arg(
        long,
        value_name = "DURATION",
        env = env::SHUTDOWN_GRACE,
        value_parser = duration_arg,
        default_value = "30s"
    )]
    pub shutdown_grace: Duration,
    /// How long a notice (a webhook, a mail) that fails is retried, from
    /// its creation, before it is dead and waits for `notifications retry`.
    #[arg(
        long,
        value_name = "DURATION",
        env = env::NOTIFY_RETRY_WINDOW,
        value_parser = duration_arg,
        default_value = "24h"
    )]
    pub notify_retry_window: Duration,
    /// Longest wait for a request's line and headers, from the connection's
    /// start or the request's first byte; then the connection is closed.
    #[arg(
        long,
        value_name = "DURATION",
        env = env::HEADER_TIMEOUT,
        value_parser = duration_arg,
        default_value = "10s"
    )]
    pub header_timeout: Duration,
    /// Longest wait for a request's whole body, from the end of its headers
    /// (later: 408 request_timeout).
    #[arg(
        long,
        value_name = "DURATION",
        env = env::BODY_TIMEOUT,
        value_parser = duration_arg,
        default_value = "30s"
    )]
    pub body_timeout: Duration,
    /// How long a kept-alive connection may wait for its next request.
    #[arg(
        long,
        value_name = "DURATION",
        env = env::IDLE_TIMEOUT,
        value_parser = duration_arg,
        default_value = "60s"
    )]
    pub idle_timeout: Duration,
    /// Most connections open at once; more wait until one closes.
    #[arg(
        long,
        value_name = "N",
        env = env::MAX_CONNECTIONS,
        default_value_t = server::DEFAULT_MAX_CONNECTIONS
    )]
    pub max_connections: usize,
    /// How long this server holds a run it drives before another server
    /// may recover it (renewed every third of it while a step runs). A
    /// crashed server's runs resume within about one and a half leases.
    #[arg(
        long,
        value_name = "DURATION",
        env = env::RUN_LEASE,
        value_parser = run_lease_arg,
        default_value = "30s"
    )]
    pub run_lease: Duration,
    /// Log lines on stderr: `text`, or `json` for one JSON object per line
    /// (timestamp, level, target, message, fields).
    #[arg(
        long,
        value_name = "FORMAT",
        env = env::LOG_FORMAT,
        value_parser = log_format_arg,
        default_value = "text"
    )]
    pub log_format: LogFormat,
}

/// `--log-format` (also `tollgate mcp`'s).
pub(crate) fn log_format_arg(text: &str) -> Result<LogFormat, String> {
    LogFormat::parse(text).map_err(|e| e.to_string())
}

fn run_lease_arg(text: &str) -> Result<Duration, String> {
    crate::domain::durable::parse_lease(text)
}

/// Serve until SIGTERM or ctrl-c. Prints `listening on http://ADDR` (one
/// line on stdout) once it accepts connections; logs go to stderr.
pub async fn run(
    args: ServeArgs,
    source: &SpecSource,
    custom: &CustomTools,
) -> Result<i32, ExitFailure> {
    run_with(args, source, custom, None).await
}

/// [`run`], serving the router `extend` makes of the API's (an exported
/// server's own routes and layers, from [`crate::App`]).
pub async fn run_with(
    args: ServeArgs,
    source: &SpecSource,
    custom: &CustomTools,
    extend: Option<server::RouterHook>,
) -> Result<i32, ExitFailure> {
    server::init_logging_as(args.log_format);
    let spec = source.load()?;
    super::preflight::require_env(&spec, &format!("cannot serve {}", spec.agent))?;
    let limits = Limits {
        header_timeout: args.header_timeout,
        body_timeout: args.body_timeout,
        idle_timeout: args.idle_timeout,
        max_connections: args.max_connections,
    };
    // Read by hand, not through clap's `env`, so no help or error text can
    // ever show a token.
    let tokens = ApiTokens::from_env().map_err(|e| ExitFailure::bad_input(e.to_string()))?;
    // Also by hand: the link secret must never reach clap's messages.
    let links = LinkSigner::from_env().map_err(|e| ExitFailure::bad_input(e.to_string()))?;
    let store = super::store_location::open(&args.store, Some(source))?;
    // Never serve a store that cannot take writes (or a damaged SQLite
    // file, checked in full here whatever its size): every run and decision
    // would fail after the server said it was up.
    store
        .verify_writable()
        .await
        .map_err(|e| ExitFailure::bad_input(format!("cannot serve {}: {e}", store.describe())))?;
    let agent = super::agent(spec, store, custom)?.with_lease(args.run_lease);
    super::preflight::require_older_versions_env(
        &agent,
        &format!("cannot serve {}", agent.spec().agent),
    )
    .await?;
    let config = ServerConfig {
        listen: args.listen,
        tokens,
        max_body_bytes: args.max_body_bytes,
        shutdown_grace: args.shutdown_grace,
        limits,
        links,
        notify_retry_window: args.notify_retry_window,
        ..ServerConfig::default()
    };
    let mut server = Server::bind(agent, config).await.map_err(failure)?;
    if let Some(extend) = extend {
        server = server.with_router(extend);
    }
    server::announce(server.local_addr().map_err(failure)?);
    server.run().await.map_err(failure)?;
    Ok(exit::OK)
}

fn failure(e: server::ServerError) -> ExitFailure {
    let code = if e.is_config() {
        exit::BAD_INPUT
    } else {
        exit::RUN_FAILED
    };
    ExitFailure::new(code, e.to_string())
}
