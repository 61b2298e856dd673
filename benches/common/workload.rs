//! The workload every bench measures: prepare -> human approval -> act.

use std::path::Path;
use std::sync::Arc;

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
