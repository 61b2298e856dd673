//! Team approval policy (DESIGN §13) end to end: `tollgate serve`
//! processes over loopback HTTP with API tokens for each person, on a real
//! SQLite file and on PostgreSQL; votes counted per rule, separation of
//! duties, rejection rules, the digest of the payload a vote was cast on,
//! edits superseding votes, the ledger over HTTP and the CLI.

mod form;
mod inbox;
mod page;
mod quorum;
mod slack;
mod timeouts;
mod votes;
mod when;

use serde_json::{Value, json};

use crate::common::server::{Api, Served};

/// A token per person: `NAME:token-NAME`.
pub const PEOPLE: [&str; 6] = ["alice", "bob", "carol", "dave", "erin", "bot"];

pub fn tokens() -> String {
    PEOPLE
        .iter()
        .map(|p| format!("{p}:token-{p}"))
        .collect::<Vec<_>>()
        .join(",")
}

pub fn as_person(name: &str) -> Api {
    Api::with_token(&format!("token-{name}"))
}

/// finance 2 of {alice, bob, carol} and security 1 of {dave}; `extra`
/// adds gate keys (`reject: when_unreachable`).
pub fn spec(extra: &str) -> String {
    format!(
        r#"version: 1
agent: team-desk
approvals:
  groups: {{ finance: [alice, bob, carol], security: [dave] }}
steps:
  - id: check
    approval:
      message: "Refund {{{{ input.amount }}}}?"
      payload: {{ amount: "{{{{ input.amount }}}}" }}
      rules: [{{ group: finance, min: 2 }}, {{ group: security, min: 1 }}]
{extra}
  - id: done
    set: {{ paid: "{{{{ steps.check.output.payload.amount }}}}" }}
"#
    )
}

/// Start a run as `bot` and wait for its pause: `(run id, key, approval)`.
pub async fn paused(served: &Served, amount: u64) -> (String, String, Value) {
    let (status, run) = as_person("bot")
        .post(
            &served.url("/runs?wait=true"),
            json!({ "input": { "amount": amount } }),
        )
        .await;
    assert_eq!(status, 200, "{run}");
    assert_eq!(run["status"], "awaiting_approval", "{run}");
    let approval = run["pending_approval"].clone();
    (
        run["id"].as_str().unwrap().to_string(),
        approval["key"].as_str().unwrap().to_string(),
        approval,
    )
}

/// `name` approves `key` on `served` (with `body` merged in).
pub async fn approve(served: &Served, key: &str, name: &str, body: Value) -> (u16, Value) {
    as_person(name)
        .post(&served.url(&format!("/approvals/{key}/approve")), body)
        .await
}

pub async fn reject(served: &Served, key: &str, name: &str, reason: &str) -> (u16, Value) {
    as_person(name)
        .post(
            &served.url(&format!("/approvals/{key}/reject")),
            json!({ "reason": reason }),
        )
        .await
}
