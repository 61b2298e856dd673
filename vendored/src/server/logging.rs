//! Logs: `tracing` to stderr, filtered by `RUST_LOG` (default `info`).
//! Nothing logged carries a secret or a token: handlers log ids, keys,
//! step names and who decided, never headers or bodies.

/// Install the subscriber once; later calls (or one installed by an
/// embedding program) are left alone.
pub fn init_logging() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .try_init();
}
