//! The workload every bench measures: prepare -> human approval -> act.

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
