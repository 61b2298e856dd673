//! The PostgreSQL store: runs, events and pending approvals in one database
//! that any number of tollgate servers share.
//!
//! Same contract as the SQLite store (the same conformance cases run against
//! both), same `tollgate_` tables; what differs:
//!
//! - **The claim** is one `UPDATE ... WHERE key = $1 AND status = 'PENDING'
//!   AND expires_at > $2 [AND spec_hash = $3] RETURNING ...` under READ
//!   COMMITTED, in one transaction with the run's update and its
//!   `approval_resolved` event. Concurrent claimers of one key queue on its
//!   row lock and the losers match nothing; claims of different keys never
//!   wait for each other. The sweep skips rows another transaction holds
//!   (`FOR UPDATE SKIP LOCKED`), so each record is expired by one node.
//! - **A vote** ([`Votes::cast_vote`]) takes its approval's row lock first
//!   (`SELECT ... FOR UPDATE`), then reads the ledger, appends the vote and
//!   its event and, when it settles the gate, writes the claim, all in one
//!   transaction: votes of one key are counted one at a time, in the order
//!   of the lock, and a claim, a cancel or a move of the key waits for it.
//! - **Push.** Every pause, decision and expiry also sends `NOTIFY
//!   tollgate_approvals` in its transaction; [`crate::store::watch`] listens on one
//!   dedicated connection (outside the pool) and re-checks what it waits for
//!   after every reconnect, so a decision made while it was disconnected is
//!   not missed.
//! - **Times** are `timestamptz` and travel in binary: stored and returned
//!   as UTC instants whatever the server's or session's `TimeZone`.
//! - **JSON** columns are `json` (schema version 3; `jsonb` before): the
//!   text as written, so values come back as stored, object keys in their
//!   order, and a string holding `\u0000` is kept, as in SQLite (`jsonb` and
//!   `text` cannot hold a NUL). For the same reason the text columns that
//!   carry what people and downstreams wrote (`message`, `decided_by`, a
//!   run's `error`, a notification's `last_error`) hold a JSON string.
//! - **Migrations** (`migrations/postgres/`, history in
//!   `tollgate_schema_history`) run under a transaction-scoped advisory lock,
//!   so nodes starting together migrate once; only `tollgate_` objects are
//!   created, in the connection's current schema (`search_path`; put
//!   `?options=-csearch_path%3Dtollgate` in the URL to use another one).
//! - **Pool**: `TOLLGATE_DB_POOL_SIZE` connections (default 5), plus the one
//!   LISTEN connection per watcher.
//! - **TLS** over rustls, for every connection (pooled, migration, LISTEN):
//!   libpq's `sslmode=disable|prefer|require|verify-ca|verify-full` and
//!   `sslrootcert=PATH` in the URL; see [`tls`].
//!
//! Driver: tokio-postgres, the maintained async driver of the
//! rust-postgres project (sqlx and diesel-async are heavier layers over
//! their own or this protocol code), with deadpool-postgres for the pool:
//! together a handful of small crates, which matters because an exported
//! server that turns the `postgres` feature on compiles this module. sqlx
//! would add its macros, its own runtime abstraction and more than twice the
//! compile time for features (compile-time checked queries, several
//! databases) the store does not use.

mod codec;
mod listen;
mod notifications;
mod notify;
mod ops;
mod pipeline;
mod schema;
mod tls;

use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod, Runtime};

use super::feed::ChangeFeed;
use super::{
    ApprovalPage, ApprovalQuery, Approvals, CancelRun, Cancelled, CastVote, Claimed, FirstWrite,
    Health, KeyClaim, Keys, Notification, NotificationStore, NotificationWrite, Pause, PendingPage,
    PendingQuery, Queries, RunEnd, RunLog, RunQuery, RunTransition, RunsPage, SharedNotifications,
    SpecVersions, StoreError, StoreErrorKind, StoreResult, StuckClaim, VoteOutcome, Votes,
    WRITE_PROBE_KEY, check_cast, check_claim_end, check_lease_end, check_pause, check_spec_version,
    check_started, report_skipped, row_limit,
};
use crate::domain::events::Event;
use crate::domain::pending_approval::{ApprovalMove, ApprovalRecord, Claim, Moved};
use crate::domain::policy::Vote;
use crate::domain::run_state::{JournalEntry, Lease, OwnedRun, RunRecord, RunStatus};
use crate::domain::spec_version::{SpecVersion, SpecVersionUse};

/// Connections in the pool when `TOLLGATE_DB_POOL_SIZE` is not set.
pub const DEFAULT_POOL_SIZE: usize = 5;

/// How a [`PostgresStore`] connects.
#[derive(Debug, Clone)]
pub struct PostgresOptions {
    /// Pooled connections (the LISTEN connection of a watcher is extra).
    pub pool_size: usize,
    /// How long an operation waits for a free pooled connection, and for a
    /// new connection to be made, before it fails.
    pub timeout: Duration,
}

impl Default for PostgresOptions {
    fn default() -> Self {
        PostgresOptions {
            pool_size: DEFAULT_POOL_SIZE,
            timeout: Duration::from_secs(30),
        }
    }
}

impl PostgresOptions {
    /// Defaults, with the pool size from `TOLLGATE_DB_POOL_SIZE` when it is
    /// set to a positive number.
    pub fn from_env() -> StoreResult<PostgresOptions> {
        Ok(PostgresOptions {
            pool_size: pool_size(
                std::env::var(crate::support::env::DB_POOL_SIZE)
                    .ok()
                    .as_deref(),
            )?,
            ..PostgresOptions::default()
        })
    }
}

/// `TOLLGATE_DB_POOL_SIZE`, checked: a typo fails the start instead of
/// quietly running with the default.
fn pool_size(var: Option<&str>) -> StoreResult<usize> {
    let Some(text) = var else {
        return Ok(DEFAULT_POOL_SIZE);
    };
    text.trim()
        .parse::<usize>()
        .ok()
        .filter(|n| *n > 0)
        .ok_or_else(|| StoreError::InvalidLocation {
            location: crate::support::env::DB_POOL_SIZE.into(),
            reason: format!("{text:?} is not a positive number of connections"),
        })
}

pub struct PostgresStore {
    pool: Pool,
    config: tokio_postgres::Config,
    tls: tls::RustlsConnect,
    description: String,
}

impl From<tokio_postgres::Error> for StoreError {
    fn from(e: tokio_postgres::Error) -> Self {
        if e.code() == Some(&tokio_postgres::error::SqlState::READ_ONLY_SQL_TRANSACTION) {
            return StoreError::NotWritable {
                path: String::new(),
                detail: format!(
                    "{} (a read-only server or transaction: point the URL at the primary, \
                     or clear default_transaction_read_only)",
                    describe_error(&e)
                ),
            };
        }
        let text = describe_error(&e);
        match classify(&e) {
            StoreErrorKind::Unavailable => StoreError::Unavailable(text),
            StoreErrorKind::Conflict => StoreError::Conflict(text),
            _ => StoreError::Database(text),
        }
    }
}

/// Which driver errors may pass: a lost or refused connection, a server
/// shutting down, short of resources or cancelling a statement that ran
/// past its timeout, a lock timeout, a serialization failure or deadlock
/// (SQLSTATE classes 08, 53, 57, 40 and 55P03); and which are constraint
/// violations (class 23).
fn classify(e: &tokio_postgres::Error) -> StoreErrorKind {
    let Some(code) = e.code() else {
        // No SQLSTATE: the connection itself failed (I/O, closed, timed out).
        let io = std::error::Error::source(e).is_some_and(|s| s.is::<std::io::Error>());
        return if e.is_closed() || io {
            StoreErrorKind::Unavailable
        } else {
            StoreErrorKind::Other
        };
    };
    let code = code.code();
    if code.starts_with("23") {
        StoreErrorKind::Conflict
    } else if ["08", "53", "57", "40", "55P03"]
        .iter()
        .any(|c| code.starts_with(c))
    {
        StoreErrorKind::Unavailable
    } else {
        StoreErrorKind::Other
    }
}

impl From<deadpool_postgres::PoolError> for StoreError {
    fn from(e: deadpool_postgres::PoolError) -> Self {
        // Timed out waiting for a pooled connection, or could not make one.
        StoreError::Unavailable(format!("no database connection: {}", describe_error(&e)))
    }
}

/// An error with its causes: tokio-postgres puts the server's message (and
/// the reason a connect failed) in the source, not in `Display`.
pub(crate) fn describe_error(e: &(dyn std::error::Error + 'static)) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(cause) = source {
        let more = cause.to_string();
        if !text.contains(&more) {
            text.push_str(": ");
            text.push_str(&more);
        }
        source = cause.source();
    }
    text
}

impl PostgresStore {
    /// The plan PostgreSQL picks (`EXPLAIN`, one line per row) for the
    /// first batch of a [`Queries::list_approvals`] page: for checking
    /// which indexes a listing reads on a real database.
    pub async fn explain_list_approvals(&self, query: &ApprovalQuery) -> StoreResult<Vec<String>> {
        let plan = async { ops::explain_approvals(&self.client().await?, query).await }.await;
        self.context("explaining an approvals listing", plan)
    }
}

impl PostgresStore {
    /// Connect to `url` (`postgres://` or `postgresql://`), bring the schema
    /// up to date and return the store. Needs a tokio runtime.
    pub async fn connect(url: &str, options: PostgresOptions) -> StoreResult<PostgresStore> {
        let invalid = |reason: String| StoreError::InvalidLocation {
            location: redact(url),
            reason,
        };
        // TLS parameters the driver does not know are taken out first.
        let (driver_url, tls_settings) = tls::split_url(url).map_err(invalid)?;
        let mut config = tokio_postgres::Config::from_str(&driver_url)
            .map_err(|e| invalid(describe_error(&e)))?;
        config.ssl_mode(tls_settings.mode.driver_mode());
        let tls = tls::RustlsConnect::new(&tls_settings).map_err(invalid)?;
        if config.get_connect_timeout().is_none() {
            config.connect_timeout(Duration::from_secs(10));
        }
        if config.get_application_name().is_none() {
            config.application_name("tollgate");
        }
        let description = describe(&config);

        let (mut client, connection) = config.connect(tls.clone()).await.map_err(|e| {
            StoreError::from(e).reworded(|m| {
                format!(
                    "cannot connect to {description} ({}): {m}",
                    tls_settings.describe()
                )
            })
        })?;
        let driver = tokio::spawn(connection);
        let migrated = schema::migrate(&mut client).await;
        drop(client);
        let _ = driver.await;
        migrated?;

        let manager = Manager::from_config(
            config.clone(),
            tls.clone(),
            ManagerConfig {
                // A connection the server closed is noticed by the driver at
                // once (is_closed), so no probe query per checkout.
                recycling_method: RecyclingMethod::Fast,
            },
        );
        let pool = Pool::builder(manager)
            .max_size(options.pool_size.max(1))
            .runtime(Runtime::Tokio1)
            .wait_timeout(Some(options.timeout))
            .create_timeout(Some(options.timeout))
            .recycle_timeout(Some(options.timeout))
            .build()
            .map_err(|e| StoreError::Database(format!("cannot build the pool: {e}")))?;
        Ok(PostgresStore {
            pool,
            config,
            tls,
            description,
        })
    }

    /// A pooled connection.
    async fn client(&self) -> StoreResult<deadpool_postgres::Object> {
        Ok(self.pool.get().await?)
    }

    /// Name the operation and the database in an error: a failure in a log
    /// says what failed, where and why (the driver's own message, with the
    /// OS error of a failed connect).
    fn context<T>(&self, what: &str, result: StoreResult<T>) -> StoreResult<T> {
        result.map_err(|e| match e {
            StoreError::NotWritable { path, detail } if path.is_empty() => {
                StoreError::NotWritable {
                    path: self.description.clone(),
                    detail,
                }
            }
            other => other.reworded(|m| format!("{what} in {}: {m}", self.description)),
        })
    }
}

/// Run `$body` with `$tx` bound to a new READ COMMITTED transaction on a
/// pooled connection ($tx is the connection, inside the transaction); commit
/// when it returns Ok, roll back when it returns an error or is dropped
/// unfinished. BEGIN shares a round trip with the body's first statements
/// ([`pipeline::Transaction`]).
macro_rules! in_transaction {
    ($store:expr, |$tx:ident| $body:expr) => {{
        let $tx = $store.client().await?;
        // BEGIN travels with the body's first statements (see `pipeline`).
        let open = pipeline::Transaction::begin(&$tx);
        let out = $body;
        open.finish(out).await
    }};
}

// The impls of each concept use `in_transaction!`, so they are declared
// after it: a macro is in scope from its definition on.
mod approvals;
mod health;
mod keys;
mod outbox;
mod queries;
mod runs;
mod specs;
mod votes;

/// `postgres://user@host:port/db` without the password or query options.
fn describe(config: &tokio_postgres::Config) -> String {
    use tokio_postgres::config::Host;
    let host = match config.get_hosts().first() {
        Some(Host::Tcp(h)) => h.clone(),
        Some(Host::Unix(p)) => p.display().to_string(),
        None => "localhost".into(),
    };
    let port = config.get_ports().first().copied().unwrap_or(5432);
    let user = config
        .get_user()
        .map(|u| format!("{u}@"))
        .unwrap_or_default();
    let db = config.get_dbname().unwrap_or("");
    format!("postgres://{user}{host}:{port}/{db}")
}

/// A URL for an error message: everything up to the first `@` dropped, so a
/// password never reaches a log.
fn redact(url: &str) -> String {
    match url.split_once("://") {
        Some((scheme, rest)) => match rest.rsplit_once('@') {
            Some((_, host)) => format!("{scheme}://…@{host}"),
            None => url.to_string(),
        },
        None => "postgres://…".into(),
    }
}

#[async_trait]
impl NotificationStore for PostgresStore {
    async fn record_notification(&self, key: &str, write: &NotificationWrite) -> StoreResult<()> {
        notifications::record(&self.client().await?, key, write).await
    }

    async fn get_notification(&self, key: &str) -> StoreResult<Option<Notification>> {
        notifications::get(&self.client().await?, key).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pool_size_is_a_positive_number_or_the_default() {
        assert_eq!(pool_size(None).expect("default"), DEFAULT_POOL_SIZE);
        assert_eq!(pool_size(Some(" 12 ")).expect("twelve"), 12);
        for bad in ["0", "-1", "five", ""] {
            let err = pool_size(Some(bad)).expect_err(bad);
            assert!(err.to_string().contains("TOLLGATE_DB_POOL_SIZE"), "{err}");
        }
    }

    #[test]
    fn descriptions_and_errors_never_carry_the_password() {
        let config =
            tokio_postgres::Config::from_str("postgres://app:s3cret@db.internal:6543/tollgate")
                .expect("url");
        assert_eq!(
            describe(&config),
            "postgres://app@db.internal:6543/tollgate"
        );
        assert_eq!(
            redact("postgresql://app:s3cret@db:5432/x"),
            "postgresql://…@db:5432/x"
        );
    }
}
