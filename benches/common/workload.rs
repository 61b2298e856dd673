//! The workload every bench measures: prepare -> human approval -> act.

use std::path::Path;
use std::sync::Arc;

use tollgate_runtime::pending_approval::new_key;
use tollgate_runtime::store::{SqliteOptions, SqliteStore, Synchronous};
use tollgate_runtime::{AgentRun, Spec};

/// The 3-step spec: a `set`, an approval gate, a `set` reading the decision.
pub const SPEC: &str = r#"version: 1
agent: bench
steps:
  - id: prepare
    set: { order: "{{ input.order_id }}", amount: "{{ input.amount }}" }
  - id: approve
    approval:
      message: "Refund {{ steps.prepare.output.amount }} on {{ steps.prepare.output.order }}?"
  - id: act
    set: { refunded: "{{ steps.prepare.output.order }}", by: "{{ steps.approve.output.decided_by }}" }
"#;

/// The same workload with one outbound webhook (DESIGN §14): each pause
/// and each decision also writes a notice, in its own transaction.
#[allow(dead_code)]
pub fn spec_with_webhook() -> String {
    SPEC.replacen(
        "agent: bench\n",
        "agent: bench\napprovals:\n  notify:\n    webhooks:\n      - url: \"${BENCH_HOOK_URL}\"\n        secret: \"${BENCH_HOOK_SECRET}\"\n",
        1,
    )
}

/// The workload's agent on a SQLite file at `state`, committing at `sync`.
#[allow(dead_code)] // each bench includes this file and uses what it needs
pub fn agent(state: &Path, sync: Synchronous) -> AgentRun {
    agent_of(SPEC, state, sync)
}

/// The agent of `spec` on a SQLite file at `state`, committing at `sync`.
pub fn agent_of(spec: &str, state: &Path, sync: Synchronous) -> AgentRun {
    preset_page_size(state);
    let store = SqliteStore::open(
        state,
        SqliteOptions {
            synchronous: sync,
            ..SqliteOptions::default()
        },
    )
    .expect("open store");
    let spec = Arc::new(Spec::parse(spec, "agent.yaml").expect("spec"));
    AgentRun::new(spec, Arc::new(store))
}

/// `TOLLGATE_BENCH_PAGE_SIZE`: create the file with that page size before
/// the store opens it (a page size is fixed when a file is first written),
/// to compare page sizes side by side on the same build.
fn preset_page_size(state: &Path) {
    let Ok(size) = std::env::var("TOLLGATE_BENCH_PAGE_SIZE") else {
        return;
    };
    if state.exists() {
        return;
    }
    let conn = rusqlite::Connection::open(state).expect("create the bench's file");
    conn.execute_batch(&format!(
        "PRAGMA page_size = {size}; PRAGMA journal_mode = WAL;"
    ))
    .expect("set the page size");
}

/// `TOLLGATE_BENCH_OUTBOX_NOTICES`: `notices` delivered notices put in the
/// outbox of the store at `state` before a sample, as a long-lived
/// server's outbox holds them (delivered notices are kept as the record of
/// what was sent). Written in bulk with one connection, not through the
/// API, with ids from the runtime's own generator, so a build's id scheme
/// decides where in the table new notices land.
#[allow(dead_code)]
pub fn prefill_outbox(state: &Path, notices: usize) {
    if notices == 0 {
        return;
    }
    let mut conn = rusqlite::Connection::open(state).expect("open the bench's file");
    let tx = conn.transaction().expect("begin");
    {
        let mut insert = tx
            .prepare(
                "INSERT INTO tollgate_outbox (id, key, run_id, event, channel, target, body, \
                 status, attempts, next_at, created_at, window_from, sent_at) \
                 VALUES (?1, ?2, ?3, 'approval.requested', 'webhook', '${BENCH_HOOK_URL}', ?4, \
                 'sent', 1, ?5, ?5, ?5, ?5)",
            )
            .expect("prepare");
        let body = format!(
            r#"{{"type":"approval.requested","timestamp":"2026-12-01T00:00:00Z","data":{{"message":"Refund 120 on A-1?","preview":"{}"}}}}"#,
            "x".repeat(400)
        );
        let start = chrono::Utc::now() - chrono::Duration::days(30);
        for i in 0..notices {
            let at = (start + chrono::Duration::milliseconds(i as i64))
                .to_rfc3339_opts(chrono::SecondsFormat::Micros, true);
            insert
                .execute((
                    tollgate_runtime::store::new_notice_id(),
                    new_key(),
                    format!("run-{i}"),
                    &body,
                    &at,
                ))
                .expect("insert a notice");
        }
    }
    tx.commit().expect("commit");
}
