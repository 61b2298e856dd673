//! Dedupe keys: one owner at a time until released or expired, and a run
//! created with its key in the same write (schedule ticks, signed webhooks).

use super::fixtures::*;
use super::prelude::*;

pub async fn claim_key_is_exclusive_until_released_or_expired(store: SharedStore) {
    assert!(
        store
            .claim_key("dedupe:1", "run-a", at(0), at(60))
            .await
            .expect("first")
    );
    assert!(
        !store
            .claim_key("dedupe:1", "run-b", at(10), at(70))
            .await
            .expect("live claim")
    );
    assert!(
        store
            .claim_key("dedupe:2", "run-b", at(10), at(70))
            .await
            .expect("other key")
    );
    // Expiry is inclusive: at 60 the first claim is over and can be taken.
    assert!(
        store
            .claim_key("dedupe:1", "run-c", at(60), at(120))
            .await
            .expect("takeover")
    );
    assert!(
        !store
            .claim_key("dedupe:1", "run-d", at(100), at(200))
            .await
            .expect("taken over")
    );
    // The first owner's claim expired and was taken over: its release must
    // not free run-c's claim.
    store
        .release_key("dedupe:1", "run-a")
        .await
        .expect("stale release");
    assert!(
        !store
            .claim_key("dedupe:1", "run-d", at(100), at(200))
            .await
            .expect("still held by run-c")
    );
    store
        .release_key("dedupe:1", "run-c")
        .await
        .expect("release");
    assert!(
        store
            .claim_key("dedupe:1", "run-d", at(101), at(200))
            .await
            .expect("after release")
    );
    store
        .release_key("never-claimed", "run-a")
        .await
        .expect("releasing a free key is fine");

    let racers: Vec<_> = (0..16)
        .map(|_| {
            let store = Arc::clone(&store);
            tokio::spawn(async move { store.claim_key("tick", "node", at(0), at(60)).await })
        })
        .collect();
    let mut won = 0;
    for racer in racers {
        won += usize::from(racer.await.expect("task").expect("claim key"));
    }
    assert_eq!(won, 1, "exactly one racer gets a free key");
}

/// A schedule tick or a signed webhook request: the key and the run are
/// one write. Taken, nothing is written; a run that cannot be stored
/// leaves the key free for the sender's retry.
pub async fn a_run_created_once_claims_its_key_in_the_same_write_or_not_at_all(store: SharedStore) {
    let once = |now: u64| KeyClaim {
        key: "tick:agent:0:09:00".into(),
        owner: "scheduler".into(),
        now: at(now),
        expires_at: at(now + 60),
    };
    let first = run_record("tick-run-1", "agent", 0);
    assert!(
        store
            .create_run_once(
                &once(0),
                &first,
                &[event("tick-run-1", 1, 0, started(&first))]
            )
            .await
            .expect("create once")
    );
    let stored = store
        .get_run("tick-run-1")
        .await
        .expect("get")
        .expect("run");
    assert_eq!(stored.status, RunStatus::Running);
    assert_eq!(
        store
            .run_events("tick-run-1", 0)
            .await
            .expect("events")
            .len(),
        1
    );

    // Another server firing the same tick: nothing is written.
    let second = run_record("tick-run-2", "agent", 1);
    assert!(
        !store
            .create_run_once(
                &once(1),
                &second,
                &[event("tick-run-2", 1, 1, started(&second))]
            )
            .await
            .expect("create once")
    );
    assert_eq!(store.get_run("tick-run-2").await.expect("get"), None);
    assert!(
        store
            .run_events("tick-run-2", 0)
            .await
            .expect("events")
            .is_empty()
    );

    // A run that cannot be stored (its id is taken) claims nothing either.
    let other = KeyClaim {
        key: "webhook:agent:abc".into(),
        ..once(2)
    };
    let duplicate = run_record("tick-run-1", "agent", 2);
    store
        .create_run_once(&other, &duplicate, &[])
        .await
        .expect_err("a run id is stored once");
    assert!(
        store
            .claim_key(&other.key, "webhook", at(3), at(63))
            .await
            .expect("claim"),
        "the failed write left the key free"
    );

    // Once the claim is over, the key starts a run again.
    let later = run_record("tick-run-3", "agent", 100);
    assert!(
        store
            .create_run_once(&once(100), &later, &[])
            .await
            .expect("create once")
    );
}
