//! The store: where runs, their events and pending approvals live.
//!
//! Every pause, decision and resume goes through a store, so there is one
//! code path and one set of guarantees whether a run resumes in the process
//! that paused it or in another one after a restart.
//!
//! Writes happen at durable points only: a run's creation, its pause, the
//! claim of a decision, and its end. Each is one transaction.
//!
//! The contract is split by concept (`traits`): [`RunLog`], [`Approvals`],
//! [`Votes`], [`Queries`], [`Keys`], [`Health`], and [`StateStore`] their sum. Two
//! backends implement it, SQLite (a file, or a private database in memory:
//! `memory:`) and PostgreSQL, each a folder with a file per concept; what
//! both need is written once here: the argument checks (`checks`), paging
//! (`paging`), the read model's types (`query`), the writes' types
//! (`writes`), errors (`error`) and migrations (`migration`).

mod checks;
mod columns;
mod error;
pub mod feed;
mod migration;
mod notifications;
mod outbox;
mod paging;
#[cfg(feature = "postgres")]
mod postgres;
mod query;
mod spec_filter;
mod sqlite;
mod traits;
mod votes;
pub mod watch;
mod writes;

use std::sync::Arc;

pub(crate) use checks::*;
pub(crate) use error::{BUSY_MARKER, TRANSIENT_MARKER};
pub use error::{StoreError, StoreErrorKind, StoreResult};
pub(crate) use migration::Migration;
pub use notifications::{Notification, NotificationStore, NotificationWrite, SharedNotifications};
pub use outbox::{
    DisabledEndpoint, LaneLimits, LaneStats, MAX_NOTICE_PAGE, NoticeQuery, NoticeWrite, Outbox,
    OutboxNotice, OutboxStats, RetryNotices, UnlabelledNotice, new_notice_id,
};
pub(crate) use paging::{
    ApprovalFilter, ApprovalPager, PendingPager, cursor, like_pattern, run_text_patterns,
    settled_statuses_sql,
};
#[cfg(feature = "postgres")]
pub use postgres::{DEFAULT_POOL_SIZE, PostgresOptions, PostgresStore};
pub use query::{
    ApprovalPage, ApprovalQuery, PendingPage, PendingQuery, RunQuery, RunsPage, StuckClaim,
    UnreadableRow, approval_order_at, expired_as_of,
};
pub(crate) use query::{UnreadableKeys, report_skipped};
pub use spec_filter::{
    BadSpecSelector, MIN_HASH_PREFIX, SpecFilter, SpecFilterError, SpecSelector,
};
pub use sqlite::{MemoryStore, SqliteOptions, SqliteStore, Synchronous};
pub use traits::{
    Approvals, Health, Keys, Queries, RunLog, SharedStore, SpecVersions, StateStore, Votes,
    WriterStats,
};
pub(crate) use votes::check_cast;
pub(crate) use writes::resolved_event;
pub use writes::{
    CancelRun, Cancelled, CastVote, Claimed, FirstWrite, KeyClaim, Nudged, Pause, RunEnd,
    RunTransition, VoteOutcome,
};

/// Every store trait in one `use`: `use tollgate_runtime::store::prelude::*`
/// lets code call any store method on a concrete store (`SqliteStore`,
/// `PostgresStore`); through a [`SharedStore`] they need no import.
pub mod prelude {
    pub use super::{
        Approvals, Health, Keys, NotificationStore, Queries, RunLog, SpecVersions, StateStore,
        Votes,
    };
}

/// The most overdue approvals one transaction of the expiry sweep expires
/// ([`Approvals::expire_due`] runs as many as it takes, each committed on
/// its own): a decision that comes while a long pass runs waits for one
/// batch, not for the pass (on SQLite's one writer, which also sizes each
/// batch to a few milliseconds of work), and a pass over many overdue
/// approvals makes a few statements per batch, not per approval
/// (PostgreSQL).
pub const EXPIRE_BATCH: usize = 500;

/// The key the write probes use in `tollgate_claims` (no dedupe or tick key
/// has this form); the probe deletes it in the same transaction.
pub(crate) const WRITE_PROBE_KEY: &str = "tollgate:write-probe";

fn is_postgres_url(location: &str) -> bool {
    location.starts_with("postgres://") || location.starts_with("postgresql://")
}

/// Open a store from a location: `memory:`, `sqlite://PATH`, a plain path
/// to a SQLite file, or `postgres://` / `postgresql://` URL (pool size from
/// `TOLLGATE_DB_POOL_SIZE`; without the `postgres` feature such a URL is
/// [`StoreError::PostgresNotBuilt`]).
///
/// Connecting to PostgreSQL is async: prefer [`open_async`]. This blocking
/// form serves callers on a multi-thread tokio runtime (the CLI) by blocking
/// the current worker in place; elsewhere it refuses a PostgreSQL URL.
pub fn open(location: &str, sqlite: SqliteOptions) -> StoreResult<SharedStore> {
    #[cfg(feature = "postgres")]
    if is_postgres_url(location) {
        use tokio::runtime::{Handle, RuntimeFlavor};
        let handle = Handle::try_current()
            .ok()
            .filter(|h| h.runtime_flavor() == RuntimeFlavor::MultiThread)
            .ok_or_else(|| StoreError::InvalidLocation {
                location: "postgres://…".into(),
                reason: "a PostgreSQL store must be opened inside a multi-thread tokio \
                         runtime (use store::open_async)"
                    .into(),
            })?;
        return tokio::task::block_in_place(|| handle.block_on(open_postgres(location)));
    }
    open_local(location, sqlite)
}

/// [`open`] for async callers: the same locations, without blocking.
pub async fn open_async(location: &str, sqlite: SqliteOptions) -> StoreResult<SharedStore> {
    #[cfg(feature = "postgres")]
    if is_postgres_url(location) {
        return open_postgres(location).await;
    }
    open_local(location, sqlite)
}

#[cfg(feature = "postgres")]
async fn open_postgres(url: &str) -> StoreResult<SharedStore> {
    let options = PostgresOptions::from_env()?;
    Ok(Arc::new(PostgresStore::connect(url, options).await?))
}

/// Memory and SQLite locations. A PostgreSQL URL gets here only in a build
/// without the `postgres` feature.
fn open_local(location: &str, sqlite: SqliteOptions) -> StoreResult<SharedStore> {
    if is_postgres_url(location) {
        return Err(StoreError::PostgresNotBuilt);
    }
    if location == "memory:" || location == "memory://" {
        return Ok(Arc::new(SqliteStore::in_memory()?));
    }
    let path = location.strip_prefix("sqlite://").unwrap_or(location);
    if path.is_empty() {
        return Err(StoreError::InvalidLocation {
            location: location.into(),
            reason: "empty path".into(),
        });
    }
    Ok(Arc::new(SqliteStore::open(
        std::path::Path::new(path),
        sqlite,
    )?))
}

#[cfg(all(test, not(feature = "postgres")))]
mod tests {
    use super::*;

    #[test]
    fn a_postgres_url_without_the_feature_says_how_to_turn_it_on() {
        for url in ["postgres://u:s3cret@db/x", "postgresql://db/x"] {
            let err = open(url, SqliteOptions::default()).err().unwrap();
            assert!(matches!(err, StoreError::PostgresNotBuilt), "{err}");
            let message = err.to_string();
            assert!(message.contains(r#"features = ["postgres"]"#), "{message}");
            assert!(!message.contains("s3cret"), "{message}");
        }
    }
}
