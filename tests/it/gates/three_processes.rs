//! Create, wait and decide from three processes: server A stores the
//! request, a waiter long-polls server B on the same store, and the CLI
//! decides from a third process. The waiter hears the decision within a
//! second of the CLI's exit (issue 27), on a SQLite file (B polls) and on
//! PostgreSQL (B is pushed).

use std::time::Duration;

use serde_json::json;

use super::{
    SPEC, TOKENS, create, decide_by_cli, key_of, let_it_wait, requester, run_status, waiter,
};
use crate::common::postgres;
use crate::common::server::Served;
use crate::common::{Workspace, open_store};
use tollgate_runtime::SharedStore;

/// The issue's bound: a waiter sees a decision within a second of it.
const WITHIN: Duration = Duration::from_secs(1);

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_servers_on_one_sqlite_file_and_the_cli_deciding() {
    let ws = Workspace::new(SPEC);
    let state = ws.path().join("shared.db");
    let env = [("TOLLGATE_API_TOKENS", TOKENS)];
    let a = Served::start(&ws.spec, &state, &env, &[]);
    let b = Served::start(&ws.spec, &state, &env, &[]);
    let location = ["--state", state.to_str().expect("utf-8")];
    decided_across_processes(&ws, &a, &b, &location, &open_store(&state)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_servers_on_one_postgresql_database_and_the_cli_deciding() {
    let db = postgres::database();
    let ws = Workspace::new(SPEC);
    let env = [("TOLLGATE_API_TOKENS", TOKENS)];
    let a = Served::start_on_database(&ws.spec, &db.url, &env, &[]);
    let b = Served::start_on_database(&ws.spec, &db.url, &env, &[]);
    let location = ["--database-url", db.url.as_str()];
    let store = tollgate_runtime::store::open(&db.url, Default::default()).expect("store");
    decided_across_processes(&ws, &a, &b, &location, &store).await;
}

/// One request approved with an edit, one rejected, each decided by the
/// CLI while a waiter on `b` waits for the request `a` stored.
async fn decided_across_processes(
    ws: &Workspace,
    a: &Served,
    b: &Served,
    location: &[&str],
    store: &SharedStore,
) {
    let bot = requester();

    // Approved with an edited payload: the waiter acts on the edit.
    let asked = create(
        a,
        &bot,
        json!({
            "message": "Pay 120 EUR to ACME?",
            "payload": {"amount": 120, "to": "ACME"},
            "step": "send_payout",
        }),
    )
    .await;
    let key = key_of(&asked);
    assert_eq!(asked["requested_by"], "bot");
    let waiting = waiter(b, &bot, &key, "30s");
    let_it_wait().await;
    assert!(
        !waiting.is_finished(),
        "the waiter answered before any decision"
    );
    let decided_at = decide_by_cli(
        ws,
        "approve",
        &key,
        location,
        &[
            "--payload",
            r#"{"amount": 100, "to": "ACME"}"#,
            "--reason",
            "capped",
        ],
    )
    .await;
    let (status, view, heard_at) = waiting.await.expect("the waiter");
    assert_eq!(status, 200, "{view}\n{}", b.logs());
    let lag = heard_at.saturating_duration_since(decided_at);
    eprintln!("the waiter heard the approval {lag:?} after the CLI exited");
    assert!(
        lag < WITHIN,
        "the waiter heard the decision {lag:?} after the CLI exited: {view}"
    );
    assert_eq!(view["state"], "decided", "{view}");
    assert_eq!(view["status"], "MODIFIED");
    assert_eq!(view["approved"], true);
    assert_eq!(view["decision"]["outcome"], "modified");
    assert_eq!(view["decision"]["by"], "dana");
    assert_eq!(view["decision"]["reason"], "capped");
    assert_eq!(
        view["decision"]["payload"],
        json!({"amount": 100, "to": "ACME"})
    );
    assert_eq!(
        view["payload"],
        json!({"amount": 120, "to": "ACME"}),
        "as asked"
    );
    assert_eq!(view["step"], "send_payout");
    assert_eq!(
        run_status(store, &key).await,
        "completed",
        "the decision ended its run"
    );

    // Rejected: nothing to act on.
    let asked = create(
        a,
        &bot,
        json!({"message": "Delete the staging database?", "payload": {"db": "staging"}}),
    )
    .await;
    let key = key_of(&asked);
    let waiting = waiter(b, &bot, &key, "30s");
    let_it_wait().await;
    let decided_at =
        decide_by_cli(ws, "reject", &key, location, &["--reason", "not this week"]).await;
    let (status, view, heard_at) = waiting.await.expect("the waiter");
    assert_eq!(status, 200, "{view}");
    let lag = heard_at.saturating_duration_since(decided_at);
    eprintln!("the waiter heard the rejection {lag:?} after the CLI exited");
    assert!(lag < WITHIN, "heard {lag:?} after the CLI exited: {view}");
    assert_eq!(view["state"], "decided", "{view}");
    assert_eq!(view["status"], "REJECTED");
    assert_eq!(view["approved"], false);
    assert_eq!(view["decision"]["outcome"], "rejected");
    assert_eq!(view["decision"]["by"], "dana");
    assert_eq!(view["decision"]["reason"], "not this week");
    assert_eq!(view["decision"]["payload"], serde_json::Value::Null);

    assert_eq!(run_status(store, &key).await, "rejected");

    // Server A, which stored it, reads the same decision.
    let (status, again) = super::gate(a, &bot, &key, None).await;
    assert_eq!(status, 200);
    assert_eq!(again["status"], "REJECTED", "{again}");
}
