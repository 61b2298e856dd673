//! Numbered schema changes, the rule both SQL stores keep.

use super::{StoreError, StoreResult};

/// One numbered schema change of a SQL store: its version and SQL never
/// change once released (a fix is a new migration). Each store keeps its own
/// list, in its own dialect, and records what it applied in
/// `tollgate_schema_history`.
pub(crate) struct Migration {
    pub version: i64,
    pub name: &'static str,
    pub sql: &'static str,
}

impl Migration {
    /// The newest version in a store's list.
    pub fn latest(all: &[Migration]) -> i64 {
        all.last().map_or(0, |m| m.version)
    }

    /// A database migrated by a newer build is refused, never written.
    pub fn check_not_newer(all: &[Migration], found: i64) -> StoreResult<()> {
        let supported = Migration::latest(all);
        if found > supported {
            return Err(StoreError::SchemaTooNew { found, supported });
        }
        Ok(())
    }

    /// This migration could not be applied.
    pub fn failed(&self, cause: &dyn std::fmt::Display) -> StoreError {
        StoreError::Database(format!(
            "migration {:04}_{} failed: {cause}",
            self.version, self.name
        ))
    }

    /// The rule every store's list keeps: numbered from 1 without gaps, in
    /// order (for each store's unit test).
    #[cfg(test)]
    pub fn assert_numbered(all: &[Migration]) {
        for (i, m) in all.iter().enumerate() {
            assert_eq!(
                m.version,
                i as i64 + 1,
                "migration {} is out of order",
                m.name
            );
        }
    }
}
