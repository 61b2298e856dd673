//! Versioned migrations: numbered `.sql` files embedded in the binary and
//! recorded in `tollgate_schema_history`.
//!
//! Applying them is idempotent and safe when several processes open the same
//! new file at once: the check and the changes happen inside one
//! `BEGIN IMMEDIATE` transaction, so the second opener waits for the first
//! and then finds nothing left to do.

use rusqlite::{Connection, OptionalExtension, TransactionBehavior};

use crate::store::{Migration, StoreResult};

/// Every migration this build knows, in version order. Append only: a
/// released migration never changes, a fix is a new file.
pub(super) const MIGRATIONS: &[Migration] = &[
    Migration {
        version: 1,
        name: "initial",
        sql: include_str!("../migrations/sqlite/0001_initial.sql"),
    },
    Migration {
        version: 2,
        name: "notifications",
        sql: include_str!("../migrations/sqlite/0002_notifications.sql"),
    },
    Migration {
        version: 3,
        name: "durable_runs",
        sql: include_str!("../migrations/sqlite/0003_durable_runs.sql"),
    },
    Migration {
        version: 4,
        name: "runs_by_age",
        sql: include_str!("../migrations/sqlite/0004_runs_by_age.sql"),
    },
    Migration {
        version: 5,
        name: "approvals_settled",
        sql: include_str!("../migrations/sqlite/0005_approvals_settled.sql"),
    },
    Migration {
        version: 6,
        name: "spec_versions",
        sql: include_str!("../migrations/sqlite/0006_spec_versions.sql"),
    },
    Migration {
        version: 7,
        name: "votes",
        sql: include_str!("../migrations/sqlite/0007_votes.sql"),
    },
    Migration {
        version: 8,
        name: "gate_timers",
        sql: include_str!("../migrations/sqlite/0008_gate_timers.sql"),
    },
    Migration {
        version: 9,
        name: "vote_input",
        sql: include_str!("../migrations/sqlite/0009_vote_input.sql"),
    },
    Migration {
        version: 10,
        name: "outbox",
        sql: include_str!("../migrations/sqlite/0010_outbox.sql"),
    },
    Migration {
        version: 11,
        name: "pending_by_step",
        sql: include_str!("../migrations/sqlite/0011_pending_by_step.sql"),
    },
    Migration {
        version: 12,
        name: "outbox_lanes",
        sql: include_str!("../migrations/sqlite/0012_outbox_lanes.sql"),
    },
    Migration {
        version: 13,
        name: "started_without_input",
        sql: include_str!("../migrations/sqlite/0013_started_without_input.sql"),
    },
    Migration {
        version: 14,
        name: "approval_origin",
        sql: include_str!("../migrations/sqlite/0014_approval_origin.sql"),
    },
    Migration {
        version: 15,
        name: "slack_through_outbox",
        sql: include_str!("../migrations/sqlite/0015_slack_through_outbox.sql"),
    },
    Migration {
        version: 16,
        name: "slack_message_only",
        sql: include_str!("../migrations/sqlite/0016_slack_message_only.sql"),
    },
];

const CREATE_HISTORY: &str = "CREATE TABLE IF NOT EXISTS tollgate_schema_history (
    version     INTEGER PRIMARY KEY NOT NULL,
    name        TEXT NOT NULL,
    applied_at  TEXT NOT NULL
)";

/// The newest schema version this build understands.
pub(super) fn latest_version() -> i64 {
    Migration::latest(MIGRATIONS)
}

/// Bring the database up to [`latest_version`], or refuse a newer schema.
pub(super) fn migrate(conn: &mut Connection) -> StoreResult<()> {
    // Fast path without the write lock: every open after the first (each CLI
    // invocation opens the store) finds the schema current and moves on.
    if let Some(found) = applied_version(conn)? {
        check_not_newer(found)?;
        if found == latest_version() {
            return Ok(());
        }
    }
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    tx.execute_batch(CREATE_HISTORY)?;
    let found = applied_version(&tx)?.unwrap_or(0);
    check_not_newer(found)?;
    for migration in MIGRATIONS.iter().filter(|m| m.version > found) {
        apply(&tx, migration)?;
    }
    tx.commit()?;
    Ok(())
}

/// The highest applied version; `None` when the history table does not exist.
fn applied_version(conn: &Connection) -> StoreResult<Option<i64>> {
    let has_history = conn
        .query_row(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'tollgate_schema_history'",
            [],
            |_| Ok(()),
        )
        .optional()?
        .is_some();
    if !has_history {
        return Ok(None);
    }
    let version = conn.query_row(
        "SELECT COALESCE(MAX(version), 0) FROM tollgate_schema_history",
        [],
        |row| row.get(0),
    )?;
    Ok(Some(version))
}

fn check_not_newer(found: i64) -> StoreResult<()> {
    Migration::check_not_newer(MIGRATIONS, found)
}

fn apply(conn: &Connection, migration: &Migration) -> StoreResult<()> {
    conn.execute_batch(migration.sql)
        .map_err(|e| migration.failed(&e))?;
    // When the migration really ran (an operator's audit trail, never
    // compared with anything): the system clock, not a run's clock.
    conn.execute(
        "INSERT INTO tollgate_schema_history (version, name, applied_at) VALUES (?1, ?2, ?3)",
        (
            migration.version,
            migration.name,
            crate::support::time::format_utc(crate::support::time::now()),
        ),
    )?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn migrations_are_numbered_from_one_without_gaps() {
        Migration::assert_numbered(MIGRATIONS);
    }
}
