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

/// The workload's agent on a SQLite file at `state`, committing at `sync`.
pub fn agent(state: &Path, sync: Synchronous) -> AgentRun {
    let store = SqliteStore::open(
        state,
        SqliteOptions {
            synchronous: sync,
            ..SqliteOptions::default()
        },
    )
    .expect("open store");
    let spec = Arc::new(Spec::parse(SPEC, "agent.yaml").expect("spec"));
    AgentRun::new(spec, Arc::new(store))
}
