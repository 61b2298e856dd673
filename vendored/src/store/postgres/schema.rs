//! Versioned migrations for PostgreSQL, recorded in `tollgate_schema_history`.
//!
//! Safe when several nodes start at once: the whole migration runs in one
//! transaction that first takes a transaction-scoped advisory lock, so one
//! node migrates and the others wait, then find the schema current. Safe in
//! a database other software migrates too: only `tollgate_` objects are
//! created, in the connection's current schema, and nothing else is
//! inspected or assumed.

use tokio_postgres::Client;

use crate::store::{Migration, StoreResult};

/// Every migration this build knows, in version order. Append only.
pub(super) const MIGRATIONS: &[Migration] = &[
    Migration {
        version: 1,
        name: "initial",
        sql: include_str!("../migrations/postgres/0001_initial.sql"),
    },
    Migration {
        version: 2,
        name: "notifications",
        sql: include_str!("../migrations/postgres/0002_notifications.sql"),
    },
    Migration {
        version: 3,
        name: "lossless_text",
        sql: include_str!("../migrations/postgres/0003_lossless_text.sql"),
    },
    Migration {
        version: 4,
        name: "durable_runs",
        sql: include_str!("../migrations/postgres/0004_durable_runs.sql"),
    },
    Migration {
        version: 5,
        name: "runs_by_age",
        sql: include_str!("../migrations/postgres/0005_runs_by_age.sql"),
    },
    Migration {
        version: 6,
        name: "approvals_settled",
        sql: include_str!("../migrations/postgres/0006_approvals_settled.sql"),
    },
    Migration {
        version: 7,
        name: "spec_versions",
        sql: include_str!("../migrations/postgres/0007_spec_versions.sql"),
    },
    Migration {
        version: 8,
        name: "votes",
        sql: include_str!("../migrations/postgres/0008_votes.sql"),
    },
    Migration {
        version: 9,
        name: "gate_timers",
        sql: include_str!("../migrations/postgres/0009_gate_timers.sql"),
    },
    Migration {
        version: 10,
        name: "vote_input",
        sql: include_str!("../migrations/postgres/0010_vote_input.sql"),
    },
    Migration {
        version: 11,
        name: "outbox",
        sql: include_str!("../migrations/postgres/0011_outbox.sql"),
    },
    Migration {
        version: 12,
        name: "pending_by_step",
        sql: include_str!("../migrations/postgres/0012_pending_by_step.sql"),
    },
    Migration {
        version: 13,
        name: "outbox_lanes",
        sql: include_str!("../migrations/postgres/0013_outbox_lanes.sql"),
    },
    Migration {
        version: 14,
        name: "started_without_input",
        sql: include_str!("../migrations/postgres/0014_started_without_input.sql"),
    },
    Migration {
        version: 15,
        name: "approval_origin",
        sql: include_str!("../migrations/postgres/0015_approval_origin.sql"),
    },
    Migration {
        version: 16,
        name: "slack_through_outbox",
        sql: include_str!("../migrations/postgres/0016_slack_through_outbox.sql"),
    },
    Migration {
        version: 17,
        name: "slack_message_only",
        sql: include_str!("../migrations/postgres/0017_slack_message_only.sql"),
    },
];

/// The advisory lock every tollgate node takes while migrating: an
/// arbitrary constant ("tollgate" in ASCII), shared by all versions.
const MIGRATION_LOCK: i64 = 0x746f_6c6c_6761_7465;

const CREATE_HISTORY: &str = "CREATE TABLE IF NOT EXISTS tollgate_schema_history (
    version     bigint PRIMARY KEY,
    name        text NOT NULL,
    applied_at  timestamptz NOT NULL
)";

/// The newest schema version this build understands.
pub(super) fn latest_version() -> i64 {
    Migration::latest(MIGRATIONS)
}

/// Bring the schema up to [`latest_version`], or refuse a newer one.
pub(super) async fn migrate(client: &mut Client) -> StoreResult<()> {
    // Fast path without the lock: every start after the first finds the
    // schema current.
    if let Some(found) = applied_version(client).await? {
        check_not_newer(found)?;
        if found == latest_version() {
            return Ok(());
        }
    }
    let tx = client.transaction().await?;
    tx.execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK])
        .await?;
    tx.batch_execute(CREATE_HISTORY).await?;
    let found: i64 = tx
        .query_one(
            "SELECT COALESCE(MAX(version), 0) FROM tollgate_schema_history",
            &[],
        )
        .await?
        .try_get(0)?;
    check_not_newer(found)?;
    for migration in MIGRATIONS.iter().filter(|m| m.version > found) {
        tx.batch_execute(migration.sql)
            .await
            .map_err(|e| migration.failed(&super::describe_error(&e)))?;
        // When the migration really ran (an operator's audit trail, never
        // compared with anything): the system clock, not a run's clock.
        tx.execute(
            "INSERT INTO tollgate_schema_history (version, name, applied_at) \
             VALUES ($1, $2, $3)",
            &[
                &migration.version,
                &migration.name,
                &crate::support::time::now(),
            ],
        )
        .await?;
    }
    tx.commit().await?;
    Ok(())
}

/// The highest applied version; `None` when the history table does not
/// exist (in the current search path) yet.
async fn applied_version(client: &Client) -> StoreResult<Option<i64>> {
    let exists: bool = client
        .query_one(
            "SELECT to_regclass('tollgate_schema_history') IS NOT NULL",
            &[],
        )
        .await?
        .try_get(0)?;
    if !exists {
        return Ok(None);
    }
    let version: i64 = client
        .query_one(
            "SELECT COALESCE(MAX(version), 0) FROM tollgate_schema_history",
            &[],
        )
        .await?
        .try_get(0)?;
    Ok(Some(version))
}

fn check_not_newer(found: i64) -> StoreResult<()> {
    Migration::check_not_newer(MIGRATIONS, found)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn migrations_are_numbered_from_one_without_gaps() {
        Migration::assert_numbered(MIGRATIONS);
    }
}
