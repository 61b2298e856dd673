//! The environment variables tollgate reads, each named once.
//!
//! clap's `env = ...` attributes, every `std::env::var` and every message
//! that names a variable use these constants, so the name in the help text,
//! in an error and in the code cannot drift apart. Some live next to their
//! only reader and are re-exported here.

/// Unbound signed links (deciding as `link` for whoever holds one): off
/// unless set to 1/true/yes/on.
pub use crate::links::UNBOUND_LINKS_ENV as UNBOUND_LINKS;
/// The signed-link secret and the server's public address (DESIGN §11).
pub use crate::links::{LINK_SECRET_ENV as LINK_SECRET, PUBLIC_URL_ENV as PUBLIC_URL};
pub use crate::notify::slack::api::API_BASE_ENV as SLACK_API_BASE;
/// `name:token,name2:token2`: read by hand (never through clap), so no help
/// or error text can show a token.
pub use crate::server::TOKENS_ENV as API_TOKENS;

/// Where the state lives (`sqlite://PATH`, `postgres://...`, `memory:`).
pub const DATABASE_URL: &str = "TOLLGATE_DATABASE_URL";
/// PostgreSQL pool size.
pub const DB_POOL_SIZE: &str = "TOLLGATE_DB_POOL_SIZE";
/// `normal` trades the last commits before a power loss for speed.
pub const SQLITE_SYNCHRONOUS: &str = "TOLLGATE_SQLITE_SYNCHRONOUS";
/// How long a SQLite write waits for another connection's lock.
pub const SQLITE_BUSY_TIMEOUT: &str = "TOLLGATE_SQLITE_BUSY_TIMEOUT";

/// `serve` settings, each also a flag of the same name.
pub const LISTEN: &str = "TOLLGATE_LISTEN";
pub const MAX_BODY_BYTES: &str = "TOLLGATE_MAX_BODY_BYTES";
pub const SHUTDOWN_GRACE: &str = "TOLLGATE_SHUTDOWN_GRACE";
pub const HEADER_TIMEOUT: &str = "TOLLGATE_HEADER_TIMEOUT";
pub const BODY_TIMEOUT: &str = "TOLLGATE_BODY_TIMEOUT";
pub const IDLE_TIMEOUT: &str = "TOLLGATE_IDLE_TIMEOUT";
pub const MAX_CONNECTIONS: &str = "TOLLGATE_MAX_CONNECTIONS";
/// How long a process holds a run it drives before another may recover it
/// (also `serve --run-lease`; read by every command that drives runs).
pub const RUN_LEASE: &str = "TOLLGATE_RUN_LEASE";

/// The log filter (the `tracing` convention's name).
pub const LOG_FILTER: &str = "RUST_LOG";
/// `text` (default) or `json`: one JSON object per log line (also `serve --log-format`).
pub const LOG_FORMAT: &str = "TOLLGATE_LOG_FORMAT";
/// Who decides at the command line when `--by` is not given.
pub const USER: &str = "USER";
