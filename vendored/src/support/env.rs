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
/// The approvals inbox's session key (read by `server::ui::auth::session`).
pub const SESSION_SECRET: &str = "TOLLGATE_SESSION_SECRET";

/// One environment variable as the reference (docs/reference/env.md)
/// describes it. A variable that is also a command-line flag (clap's
/// `env = ...`) leaves `default` empty: the reference takes the flag and
/// its default from clap, so the two cannot disagree.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Variable {
    /// The name, or for [`GROUP_PREFIX`] the prefix (`TOLLGATE_GROUP_<NAME>`).
    pub name: &'static str,
    /// What it does, for a person.
    pub what: &'static str,
    /// What applies when it is unset, when no flag says so.
    pub default: &'static str,
}

/// Every variable tollgate reads (beside a spec's own `${NAME}`s): the registry a test holds the code to
/// (each `TOLLGATE_` name a source file spells in quotes must be here) and that
/// docs/reference/env.md is generated from.
pub const ALL: &[Variable] = &[
    Variable {
        name: API_TOKENS,
        what: "Bearer tokens of the HTTP API, `name:token,name2:token2`; a token's name is `decided_by`. Without it the server binds loopback only and takes no token.",
        default: "unset: no tokens, loopback only",
    },
    Variable {
        name: BODY_TIMEOUT,
        what: "How long a request body may take to arrive after its headers.",
        default: "30s",
    },
    Variable {
        name: DATABASE_URL,
        what: "Where the state lives: `sqlite://PATH`, `postgres://...`, `memory:`.",
        default: "",
    },
    Variable {
        name: DB_POOL_SIZE,
        what: "PostgreSQL connections per process.",
        default: "5",
    },
    Variable {
        name: GROUP_PREFIX,
        what: "`TOLLGATE_GROUP_<NAME>=a,b` replaces the members of the spec's approval group `name` (`approvals.groups`), so an exported server can change who decides without a rebuild.",
        default: "the members the spec lists",
    },
    Variable {
        name: HEADER_TIMEOUT,
        what: "How long a client may take to send a request's line and headers.",
        default: "10s",
    },
    Variable {
        name: IDLE_TIMEOUT,
        what: "How long an idle keep-alive connection stays open.",
        default: "60s",
    },
    Variable {
        name: LINK_SECRET,
        what: "The signed-link secret (DESIGN §11); also keys inbox sessions when TOLLGATE_SESSION_SECRET is unset.",
        default: "unset: signed links are off",
    },
    Variable {
        name: LISTEN,
        what: "The address `serve` listens on.",
        default: "",
    },
    Variable {
        name: LOG_FORMAT,
        what: "`text` or `json` (one JSON object per log line).",
        default: "text",
    },
    Variable {
        name: MAX_BODY_BYTES,
        what: "The largest request body accepted, in bytes.",
        default: "",
    },
    Variable {
        name: MAX_CONNECTIONS,
        what: "How many connections are served at once.",
        default: "",
    },
    Variable {
        name: NOTIFY_RETRY_WINDOW,
        what: "How long a failing notice is retried before it is dead (DESIGN §14).",
        default: "24h",
    },
    Variable {
        name: PUBLIC_URL,
        what: "The server's address as people reach it, e.g. `https://approvals.example.com`: links shown outside the server (Slack, email, `approvals show`) need it to be absolute.",
        default: "unset: links are relative",
    },
    Variable {
        name: RUN_LEASE,
        what: "How long a process holds a run it drives before another may recover it; read by every command that drives runs.",
        default: "30s",
    },
    Variable {
        name: SESSION_SECRET,
        what: "The key the approvals inbox signs its sessions and CSRF tokens with.",
        default: "derived from TOLLGATE_LINK_SECRET, else random per process (sessions end at a restart)",
    },
    Variable {
        name: SHUTDOWN_GRACE,
        what: "How long a stopping server lets requests and runs in flight finish.",
        default: "30s",
    },
    Variable {
        name: SLACK_API_BASE,
        what: "The Slack API base URL (tests point it at a local stub).",
        default: "https://slack.com/api",
    },
    Variable {
        name: SQLITE_BUSY_TIMEOUT,
        what: "How long a SQLite write waits for another connection's lock before it fails as busy (`serve` answers 503 with Retry-After).",
        default: "30s",
    },
    Variable {
        name: SQLITE_SYNCHRONOUS,
        what: "`normal` trades the last commits before a power loss for speed.",
        default: "full",
    },
    Variable {
        name: LOG_FILTER,
        what: "The log filter (`tracing`'s syntax, e.g. `info,tollgate_runtime=debug`).",
        default: "info",
    },
    Variable {
        name: USER,
        what: "Who decides at the command line when `--by` is not given.",
        default: "",
    },
    Variable {
        name: UNBOUND_LINKS,
        what: "Unbound signed links (deciding as `link` for whoever holds one): on when set to 1/true/yes/on.",
        default: "off",
    },
];
