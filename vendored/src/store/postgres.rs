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
//! - **Push.** Every pause, decision and expiry also sends `NOTIFY
//!   tollgate_approvals` in its transaction; [`crate::watch`] listens on one
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
    ApprovalPage, ApprovalQuery, CancelRun, Cancelled, Claimed, FirstWrite, KeyClaim, Notification,
    NotificationStore, NotificationWrite, NotificationsDue, Pause, PendingPage, PendingQuery,
    RunEnd, RunQuery, RunTransition, RunsPage, SharedNotifications, StateStore, StoreError,
    StoreErrorKind, StoreResult, StuckClaim, WRITE_PROBE_KEY, check_pause, check_storable,
    report_skipped,
};
use crate::events::Event;
use crate::pending_approval::{ApprovalRecord, Claim};
use crate::run_state::{JournalEntry, Lease, OwnedRun, RunRecord, RunStatus};

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
            pool_size: pool_size(std::env::var(crate::env::DB_POOL_SIZE).ok().as_deref())?,
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
            location: crate::env::DB_POOL_SIZE.into(),
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
    /// first batch of a [`StateStore::list_approvals`] page: for checking
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
/// pooled connection; commit when it returns Ok, roll back (on drop) when it
/// returns an error.
macro_rules! in_transaction {
    ($store:expr, |$tx:ident| $body:expr) => {{
        let mut client = $store.client().await?;
        let $tx = client.transaction().await?;
        let out = $body;
        match out {
            Ok(value) => {
                $tx.commit().await?;
                Ok(value)
            }
            Err(e) => Err(e),
        }
    }};
}

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
impl StateStore for PostgresStore {
    fn describe(&self) -> String {
        self.description.clone()
    }

    async fn create_run(&self, run: &RunRecord, events: &[Event]) -> StoreResult<()> {
        let result: StoreResult<_> = async {
            in_transaction!(self, |tx| {
                async {
                    ops::insert_run(&tx, run).await?;
                    ops::insert_events(&tx, &run.id, events).await
                }
                .await
            })
        }
        .await;
        self.context(&format!("storing run {}", run.id), result)
    }

    async fn create_run_once(
        &self,
        once: &KeyClaim,
        run: &RunRecord,
        events: &[Event],
    ) -> StoreResult<bool> {
        check_storable("a claim's expires_at", once.expires_at)?;
        let result: StoreResult<_> = async {
            in_transaction!(self, |tx| {
                async {
                    let claimed =
                        ops::claim_key(&tx, &once.key, &once.owner, &once.now, &once.expires_at)
                            .await?;
                    if claimed {
                        ops::insert_run(&tx, run).await?;
                        ops::insert_events(&tx, &run.id, events).await?;
                    }
                    Ok(claimed)
                }
                .await
            })
        }
        .await;
        self.context(
            &format!("storing run {} once for {}", run.id, once.key),
            result,
        )
    }

    async fn append_events(&self, run_id: &str, events: &[Event]) -> StoreResult<()> {
        let result: StoreResult<_> = async {
            in_transaction!(self, |tx| {
                async {
                    ops::require_run(&tx, run_id).await?;
                    ops::insert_events(&tx, run_id, events).await
                }
                .await
            })
        }
        .await;
        self.context(&format!("appending events of run {run_id}"), result)
    }

    async fn record_step(
        &self,
        owner: &str,
        entry: &JournalEntry,
        events: &[Event],
    ) -> StoreResult<()> {
        let result: StoreResult<_> = async {
            in_transaction!(self, |tx| {
                async {
                    ops::record_step(&tx, owner, entry).await?;
                    ops::insert_events(&tx, &entry.run_id, events).await
                }
                .await
            })
        }
        .await;
        self.context(
            &format!("journaling step {} of run {}", entry.step_id, entry.run_id),
            result,
        )
    }

    async fn run_journal(&self, run_id: &str) -> StoreResult<Vec<JournalEntry>> {
        let read = async { ops::run_journal(&self.client().await?, run_id).await }.await;
        self.context(&format!("reading the journal of run {run_id}"), read)
    }

    async fn renew_lease(&self, run_id: &str, lease: &Lease) -> StoreResult<bool> {
        check_storable("a lease's end", lease.until)?;
        let renewed = async { ops::renew_lease(&self.client().await?, run_id, lease).await }.await;
        self.context(&format!("renewing the lease of run {run_id}"), renewed)
    }

    async fn claim_orphans(
        &self,
        agent_id: &str,
        lease: &Lease,
        now: DateTime<Utc>,
        limit: usize,
    ) -> StoreResult<Vec<OwnedRun>> {
        check_storable("a lease's end", lease.until)?;
        let limit = i64::try_from(limit.max(1)).unwrap_or(i64::MAX);
        let claimed =
            async { ops::claim_orphans(&self.client().await?, agent_id, lease, &now, limit).await }
                .await;
        self.context("claiming orphaned runs", claimed)
    }

    async fn leased_owners(&self, agent_id: &str, now: DateTime<Utc>) -> StoreResult<Vec<String>> {
        let read = async { ops::leased_owners(&self.client().await?, agent_id, &now).await }.await;
        self.context("listing the owners of leased runs", read)
    }

    async fn take_over_runs(
        &self,
        agent_id: &str,
        from: &str,
        lease: &Lease,
        limit: usize,
    ) -> StoreResult<Vec<OwnedRun>> {
        check_storable("a lease's end", lease.until)?;
        let limit = i64::try_from(limit.max(1)).unwrap_or(i64::MAX);
        let taken = async {
            ops::take_over_runs(&self.client().await?, agent_id, from, lease, limit).await
        }
        .await;
        self.context(&format!("taking over the runs of {from}"), taken)
    }

    async fn transition_run(&self, change: &RunTransition) -> StoreResult<(RunRecord, Event)> {
        if let Some(lease) = &change.lease {
            check_storable("a lease's end", lease.until)?;
        }
        let result: StoreResult<_> =
            async { in_transaction!(self, |tx| ops::transition_run(&tx, change).await) }.await;
        self.context(&format!("changing run {}", change.run_id), result)
    }

    async fn count_runs(&self, agent_id: &str, status: RunStatus) -> StoreResult<u64> {
        let counted =
            async { ops::count_runs(&self.client().await?, agent_id, status).await }.await;
        self.context("counting runs", counted)
    }

    async fn count_runs_by_status(&self, agent_id: &str) -> StoreResult<Vec<(RunStatus, u64)>> {
        let counted =
            async { ops::count_runs_by_status(&self.client().await?, agent_id).await }.await;
        self.context("counting runs by status", counted)
    }

    async fn pause_run(&self, pause: &Pause, events: &[Event]) -> StoreResult<()> {
        check_pause(pause)?;
        let result: StoreResult<_> = async {
            in_transaction!(self, |tx| {
                async {
                    ops::pause_run(&tx, pause).await?;
                    ops::insert_events(&tx, &pause.record.run_id, events).await
                }
                .await
            })
        }
        .await;
        self.context(
            &format!("storing the pause of run {}", pause.record.run_id),
            result,
        )
    }

    async fn end_run(&self, end: &RunEnd, events: &[Event]) -> StoreResult<()> {
        let result: StoreResult<_> = async {
            in_transaction!(self, |tx| {
                async {
                    ops::end_run(&tx, end).await?;
                    ops::insert_events(&tx, &end.run_id, events).await
                }
                .await
            })
        }
        .await;
        self.context(&format!("storing the end of run {}", end.run_id), result)
    }

    async fn create_run_at(
        &self,
        run: &RunRecord,
        first: FirstWrite<'_>,
        events: &[Event],
    ) -> StoreResult<()> {
        if let FirstWrite::Pause(pause) = first {
            check_pause(pause)?;
        }
        let result: StoreResult<_> = async {
            in_transaction!(self, |tx| {
                async {
                    ops::insert_run(&tx, run).await?;
                    match first {
                        FirstWrite::Pause(pause) => ops::pause_run(&tx, pause).await?,
                        FirstWrite::End(end) => ops::end_run(&tx, end).await?,
                    }
                    ops::insert_events(&tx, &run.id, events).await
                }
                .await
            })
        }
        .await;
        self.context(&format!("storing run {}", run.id), result)
    }

    async fn claim(&self, claim: &Claim) -> StoreResult<Claimed> {
        let result: StoreResult<_> =
            async { in_transaction!(self, |tx| ops::claim(&tx, claim).await) }.await;
        self.context(&format!("deciding approval {}", claim.key), result)
    }

    async fn get_approval(&self, key: &str) -> StoreResult<Option<ApprovalRecord>> {
        let read = async { ops::get_approval(&self.client().await?, key).await }.await;
        self.context(&format!("reading approval {key}"), read)
    }

    async fn approvals_by_key(&self, keys: &[String]) -> StoreResult<Vec<ApprovalRecord>> {
        if keys.is_empty() {
            return Ok(Vec::new());
        }
        ops::approvals_by_key(&self.client().await?, keys).await
    }

    async fn pending_for_run(
        &self,
        run_id: &str,
        now: DateTime<Utc>,
    ) -> StoreResult<Option<ApprovalRecord>> {
        let read = async { ops::pending_for_run(&self.client().await?, run_id, &now).await }.await;
        self.context(
            &format!("reading the pending approval of run {run_id}"),
            read,
        )
    }

    async fn latest_approval_key(&self, run_id: &str) -> StoreResult<Option<String>> {
        let read = async { ops::latest_approval_key(&self.client().await?, run_id).await }.await;
        self.context(
            &format!("finding the latest approval of run {run_id}"),
            read,
        )
    }

    async fn list_pending(&self, query: &PendingQuery) -> StoreResult<PendingPage> {
        let page = async { ops::list_pending(&self.client().await?, query).await }.await;
        let page = self.context("listing pending approvals", page)?;
        report_skipped(&self.description, "approval", &page.unreadable);
        Ok(page)
    }

    async fn list_approvals(&self, query: &ApprovalQuery) -> StoreResult<ApprovalPage> {
        let page = async { ops::list_approvals(&self.client().await?, query).await }.await;
        let page = self.context("listing approvals", page)?;
        report_skipped(&self.description, "approval", &page.unreadable);
        Ok(page)
    }

    async fn count_pending_by_step(
        &self,
        agent_id: &str,
        now: DateTime<Utc>,
    ) -> StoreResult<std::collections::BTreeMap<String, u64>> {
        let counted =
            async { ops::count_pending_by_step(&self.client().await?, agent_id, &now).await }.await;
        self.context("counting pending approvals", counted)
    }

    async fn list_stuck(
        &self,
        agent_id: Option<&str>,
        now: DateTime<Utc>,
    ) -> StoreResult<Vec<StuckClaim>> {
        let listed = async { ops::list_stuck(&self.client().await?, agent_id, &now).await }.await;
        let (stuck, unreadable) = self.context("listing stuck runs", listed)?;
        report_skipped(&self.description, "approval", &unreadable);
        Ok(stuck)
    }

    async fn expire_due(&self, now: DateTime<Utc>) -> StoreResult<Vec<ApprovalRecord>> {
        // Every CLI command sweeps first; a read spares them a write
        // transaction when nothing is due.
        let due = async { ops::any_due(&self.client().await?, &now).await }.await;
        if !self.context("looking for overdue approvals", due)? {
            return Ok(Vec::new());
        }
        let result: StoreResult<_> =
            async { in_transaction!(self, |tx| ops::expire_due(&tx, &now).await) }.await;
        let (expired, unreadable) = self.context("expiring overdue approvals", result)?;
        report_skipped(&self.description, "approval", &unreadable);
        Ok(expired)
    }

    async fn get_run(&self, run_id: &str) -> StoreResult<Option<RunRecord>> {
        let read = async { ops::get_run(&self.client().await?, run_id).await }.await;
        self.context(&format!("reading run {run_id}"), read)
    }

    async fn list_runs(&self, query: &RunQuery) -> StoreResult<RunsPage> {
        let read = async { ops::list_runs(&self.client().await?, query).await }.await;
        self.context("listing runs", read)
    }

    async fn cancel_run(&self, cancel: &CancelRun) -> StoreResult<Cancelled> {
        let result: StoreResult<_> =
            async { in_transaction!(self, |tx| ops::cancel_run(&tx, cancel).await) }.await;
        self.context(&format!("cancelling run {}", cancel.run_id), result)
    }

    async fn run_events(&self, run_id: &str, after_seq: u64) -> StoreResult<Vec<Event>> {
        let read = async { ops::run_events(&self.client().await?, run_id, after_seq).await }.await;
        self.context(&format!("reading the events of run {run_id}"), read)
    }

    async fn claim_key(
        &self,
        key: &str,
        owner: &str,
        now: DateTime<Utc>,
        expires_at: DateTime<Utc>,
    ) -> StoreResult<bool> {
        check_storable("a claim's expires_at", expires_at)?;
        let claimed =
            async { ops::claim_key(&self.client().await?, key, owner, &now, &expires_at).await }
                .await;
        self.context(&format!("claiming key {key}"), claimed)
    }

    async fn release_key(&self, key: &str, owner: &str) -> StoreResult<()> {
        let released = async { ops::release_key(&self.client().await?, key, owner).await }.await;
        self.context(&format!("releasing key {key}"), released)
    }

    async fn check_writable(&self) -> StoreResult<()> {
        // Reachable, and a primary that takes writes: nothing is written.
        let client = self.context("checking the store can take writes", self.client().await)?;
        let row = client
            .query_one(
                "SELECT pg_is_in_recovery() OR current_setting('transaction_read_only') = 'on'",
                &[],
            )
            .await;
        let read_only: bool = self
            .context(
                "checking the store can take writes",
                row.map_err(Into::into),
            )?
            .try_get(0)
            .map_err(StoreError::from)?;
        if read_only {
            return Err(StoreError::NotWritable {
                path: self.description.clone(),
                detail: "the server is read-only (a standby, or default_transaction_read_only \
                         is on): point the URL at the primary"
                    .into(),
            });
        }
        Ok(())
    }

    async fn verify_writable(&self) -> StoreResult<()> {
        // Bookkeeping, not a decision: the probe row is deleted in the same
        // transaction, so its time is never read (no clock needed).
        let now = crate::time::now();
        let result: StoreResult<()> = async {
            in_transaction!(self, |tx| {
                async {
                    ops::execute(
                    &tx,
                    "INSERT INTO tollgate_claims (key, owner, expires_at) VALUES ($1, 'probe', $2) \
                     ON CONFLICT (key) DO UPDATE SET expires_at = excluded.expires_at",
                    &[&WRITE_PROBE_KEY, &now],
                )
                .await?;
                    ops::execute(
                        &tx,
                        "DELETE FROM tollgate_claims WHERE key = $1",
                        &[&WRITE_PROBE_KEY],
                    )
                    .await?;
                    Ok(())
                }
                .await
            })
        }
        .await;
        self.context("probing the store with a write", result)
    }

    fn change_feed(&self) -> Option<Arc<dyn ChangeFeed>> {
        Some(Arc::new(listen::Listener::new(
            self.config.clone(),
            self.tls.clone(),
        )))
    }

    fn notifications(self: Arc<Self>) -> Option<SharedNotifications> {
        Some(self)
    }
}

#[async_trait]
impl NotificationStore for PostgresStore {
    async fn lease_notification(
        &self,
        key: &str,
        now: DateTime<Utc>,
        until: DateTime<Utc>,
    ) -> StoreResult<Option<Notification>> {
        check_storable("a lease's end", until)?;
        notifications::lease(&self.client().await?, key, &now, &until).await
    }

    async fn record_notification(&self, key: &str, write: &NotificationWrite) -> StoreResult<()> {
        notifications::record(&self.client().await?, key, write).await
    }

    async fn get_notification(&self, key: &str) -> StoreResult<Option<Notification>> {
        notifications::get(&self.client().await?, key).await
    }

    async fn notifications_due(
        &self,
        agent_id: &str,
        now: DateTime<Utc>,
        limit: usize,
    ) -> StoreResult<NotificationsDue> {
        let limit = i64::try_from(limit.max(1)).unwrap_or(i64::MAX);
        let client = self.client().await?;
        Ok(NotificationsDue {
            to_post: notifications::due_to_post(&client, agent_id, &now, limit).await?,
            to_settle: notifications::due_to_settle(&client, agent_id, &now, limit).await?,
        })
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
