//! The store side of Slack approvals (schema version 2): every store keeps
//! the same notification contract (`common/notification_cases.rs`).

use std::sync::Arc;

use tollgate_runtime::SharedStore;
use tollgate_runtime::store::{MemoryStore, SqliteOptions, SqliteStore};

macro_rules! notification_tests {
    ($open:path) => {
        notification_tests!(@cases $open;
            lease_is_exclusive_until_released_or_expired,
            lease_of_an_unknown_key_is_not_found,
            the_holder_records_failures_the_message_and_the_decision,
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
