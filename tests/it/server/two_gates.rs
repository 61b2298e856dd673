//! The two-gate fixture the approval-list tests share: a run waits at
//! `check`, then at `ship`, each asking about the order; and reading the
//! keys of a page of approvals, over HTTP or from `approvals list`.

use serde_json::Value;

use crate::common;
use crate::common::Workspace;

/// Two gates in a row for agent `agent`; `approvals` is the body of an
/// `approvals:` section (empty for none), e.g. `approvers: [alice, bob]`.
pub fn spec(agent: &str, approvals: &str) -> String {
    let approvals = if approvals.is_empty() {
        String::new()
    } else {
        format!("approvals:\n  {approvals}\n")
    };
    format!(
        r#"version: 1
agent: {agent}
description: Check, then ship, an order once a person says so.
{approvals}steps:
  - id: check
    approval:
      message: "Check order {{{{ input.order_id }}}}?"
      payload: {{ order: "{{{{ input.order_id }}}}" }}
  - id: ship
    approval:
      message: "Ship order {{{{ input.order_id }}}}?"
      payload: {{ order: "{{{{ input.order_id }}}}" }}
"#
    )
}

/// The keys of a page of approvals (`GET /approvals`, `approvals list
/// --json`), in the page's order.
pub fn keys(page: &Value) -> Vec<String> {
    page["approvals"]
        .as_array()
        .unwrap_or_else(|| panic!("approvals in {page}"))
        .iter()
        .map(|r| r["key"].as_str().expect("key").to_string())
        .collect()
}

/// `approvals list --spec SPEC --json ARGS...` on the workspace's state
/// file: the keys listed, in order.
pub fn cli_listed(ws: &Workspace, args: &[&str]) -> Vec<String> {
    let out = ws
        .tollgate()
        .args(["approvals", "list", "--spec", ws.spec_arg(), "--json"])
        .args(args)
        .output()
        .expect("run tollgate");
    common::assert_success(&out);
    let page: Value = serde_json::from_str(&common::stdout(&out)).expect("JSON");
    keys(&page)
}
