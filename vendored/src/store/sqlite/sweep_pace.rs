//! How many overdue approvals one batch of an expiry pass takes on SQLite.
//!
//! SQLite has one writer, so a decision that arrives while a batch runs
//! waits for the rest of that batch. A fixed row count does not bound that
//! wait, because what a row costs grows with the file: on a million-row file
//! a row's pages lie scattered and few of them are cached. With 500 rows per
//! batch, decisions during a pass had a p99 of 216-382 ms, against 11-17 ms
//! around it (`cargo bench --bench pending`, BENCHMARKS.md).
//!
//! So a pass paces itself. Each batch is sized from the rate of the one
//! before it, to spend about [`BATCH_WORK`] inside its transaction. That
//! is about one commit's worth of waiting for a decision that lands behind
//! it. (Timing the batch with its commit, tried too, made the batches
//! smaller and the pass's decisions slower at the median, for no clear
//! gain at the p99: BENCHMARKS.md.)

use std::time::Duration;

use crate::store::EXPIRE_BATCH;

/// The work one batch aims at: of the order of a commit at FULL on an
/// ordinary disk, so a decision behind a batch waits about as long as it
/// would behind another decision's commit.
const BATCH_WORK: Duration = Duration::from_millis(10);

/// The first batch's size, before any rate is known: small, because the
/// first rows of a pass are the least likely to be cached.
const FIRST_BATCH: usize = 32;

/// The fewest rows a batch takes, however slow they come: each batch costs a
/// commit, so a pass must still move when rows are dear.
const FEWEST: usize = 8;

/// The size of an expiry pass's next batch on SQLite.
#[derive(Debug)]
pub(super) struct SweepPace {
    rows: usize,
}

impl SweepPace {
    pub fn new() -> SweepPace {
        SweepPace {
            rows: FIRST_BATCH.min(EXPIRE_BATCH),
        }
    }

    /// How many rows the next batch takes.
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// A batch of `rows` rows took `took` inside its transaction. The next
    /// one takes as many as fit [`BATCH_WORK`] at that rate. It grows to
    /// at most twice this size, so one batch of cached rows does not make
    /// the next one long, and it stays within [`FEWEST`] and
    /// [`EXPIRE_BATCH`].
    pub fn record(&mut self, rows: usize, took: Duration) {
        if rows == 0 {
            return;
        }
        let per_row = took.as_nanos() / rows as u128;
        let fit = BATCH_WORK
            .as_nanos()
            .checked_div(per_row)
            .map_or(EXPIRE_BATCH, |n| usize::try_from(n).unwrap_or(EXPIRE_BATCH));
        let most = self.rows.saturating_mul(2).min(EXPIRE_BATCH);
        self.rows = fit.clamp(FEWEST.min(most), most);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn the_first_batch_is_small() {
        assert_eq!(SweepPace::new().rows(), FIRST_BATCH);
    }

    #[test]
    fn slow_rows_make_the_next_batch_fit_the_work_aimed_at() {
        let mut pace = SweepPace::new();
        // 32 rows in 32 ms: 1 ms a row, so 10 fit 10 ms.
        pace.record(32, 32 * MS);
        assert_eq!(pace.rows(), 10);
        // Slower still: never fewer than the floor.
        pace.record(10, 100 * MS);
        assert_eq!(pace.rows(), FEWEST);
    }

    #[test]
    fn fast_rows_at_most_double_the_batch_up_to_the_ceiling() {
        let mut pace = SweepPace::new();
        pace.record(32, Duration::from_micros(32));
        assert_eq!(pace.rows(), 64);
        for _ in 0..10 {
            let rows = pace.rows();
            pace.record(rows, Duration::ZERO);
        }
        assert_eq!(pace.rows(), EXPIRE_BATCH);
    }

    #[test]
    fn an_empty_batch_changes_nothing() {
        let mut pace = SweepPace::new();
        pace.record(0, 500 * MS);
        assert_eq!(pace.rows(), FIRST_BATCH);
    }
}
