//! The environment variables tollgate reads, each named once.
//!
//! clap's `env = ...` attributes, every `std::env::var` and every message
//! that names a variable use these constants, so the name in the help text,
//! in an error and in the code cannot drift apart. Their readers re-export
//! some under a local name (`links::LINK_SECRET_ENV`); this module is a
//! support helper and refers to no other module.

/// The signed-link secret (DESIGN §11); unset turns signed links off.
pub const LINK_SECRET: &str = "TOLLGATE_LINK_SECRET";
/// The server's address as people reach it, e.g. `https://approvals.example.com`:
/// links shown outside the server (Slack, `approvals show`) need it to be absolute.
pub const PUBLIC_URL: &str = "TOLLGATE_PUBLIC_URL";
/// Unbound signed links (deciding as `link` for whoever holds one): off
/// unless set to 1/true/yes/on.
pub const UNBOUND_LINKS: &str = "TOLLGATE_UNBOUND_LINKS";
/// Overrides the Slack API base URL (tests point it at a local stub).
pub const SLACK_API_BASE: &str = "TOLLGATE_SLACK_API_BASE";
/// `name:token,name2:token2`: read by hand (never through clap), so no help
/// or error text can show a token.
pub const API_TOKENS: &str = "TOLLGATE_API_TOKENS";

/// `TOLLGATE_GROUP_<NAME>=a,b`: replaces the members of the spec's
/// approval group `name` (`approvals.groups`), so an exported server can
/// change who decides without a rebuild. See [`group_members`].
pub const GROUP_PREFIX: &str = "TOLLGATE_GROUP_";

/// The variable that overrides the members of approval group `group`:
/// `TOLLGATE_GROUP_` + the name upper-cased (group names are lowercase
/// identifiers, so every group has its own variable).
pub fn group_members(group: &str) -> String {
    format!("{GROUP_PREFIX}{}", group.to_ascii_uppercase())
}

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
/// How long a failing notice is retried before it is dead (DESIGN §14).
pub const NOTIFY_RETRY_WINDOW: &str = "TOLLGATE_NOTIFY_RETRY_WINDOW";
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
