//! The store side of Slack approvals (schema versions 2 and 16): every store keeps
//! the same notification contract (`common/notification_cases.rs`).

use std::sync::Arc;

use tollgate_runtime::SharedStore;
use tollgate_runtime::store::{MemoryStore, SqliteOptions, SqliteStore};

macro_rules! notification_tests {
    ($open:path) => {
        notification_tests!(@cases $open;
            a_posted_message_is_kept_then_shows_its_outcome,
            a_post_of_an_unknown_approval_is_not_found,
            an_outcome_needs_a_posted_message,
        );
    };
    (@cases $open:path; $($case:ident),* $(,)?) => {
        $(
            #[tokio::test(flavor = "multi_thread")]
            async fn $case() {
                let (store, _keep) = $open();
                crate::common::notification_cases::$case(store).await;
            }
        )*
    };
}

mod memory {
    use super::*;

    fn open() -> (SharedStore, ()) {
        (Arc::new(MemoryStore::new()), ())
    }

    notification_tests!(open);
}

mod sqlite {
    use super::*;

    fn open() -> (SharedStore, tempfile::TempDir) {
        let dir = tempfile::tempdir().expect("temp dir");
        let store = SqliteStore::open(&dir.path().join("state.db"), SqliteOptions::default())
            .expect("open sqlite store");
        (Arc::new(store), dir)
    }

    notification_tests!(open);
}

use crate::common::postgres as pg;

mod postgres {
    use super::*;
    use tollgate_runtime::store::{PostgresOptions, PostgresStore};

    fn open() -> (SharedStore, pg::TestDb) {
        let db = super::pg::database();
        // The cases' runtime is multi-threaded: connecting in place is fine.
        let store = tokio::task::block_in_place(|| {
            tokio::runtime::Handle::current()
                .block_on(PostgresStore::connect(&db.url, PostgresOptions::default()))
        })
        .expect("connect to the test database");
        (Arc::new(store), db)
    }

    notification_tests!(open);
}
