//! A gate request is an approval like any other: `GET /approvals` lists
//! it with its step and message, `tollgate approvals list` from another
//! process lists it, and the spec's webhooks get its
//! `approval.requested` notice (verified by the official Standard
//! Webhooks library in the receiver).

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::{TOKENS, ask, create, full, key_of, requester};
use crate::common::Workspace;
use crate::common::server::Served;
use crate::notifications::webhook::{Receiver, SECRET};

const SPEC: &str = r#"version: 1
agent: payouts-desk
approvals:
  notify:
    webhooks:
      - url: "${HOOK_URL}"
        secret: "${HOOK_SECRET}"
steps:
  - id: note
    set: { ok: true }
"#;

#[tokio::test(flavor = "multi_thread")]
async fn listed_over_http_and_by_the_cli_and_announced_by_webhook() {
    let ws = Workspace::new(SPEC);
    let receiver = Receiver::start(&[]);
    let url = receiver.url();
    let served = Served::start(
        &ws.spec,
        &ws.state_db(),
        &[
            ("TOLLGATE_API_TOKENS", TOKENS),
            ("HOOK_URL", url.as_str()),
            ("HOOK_SECRET", SECRET),
        ],
        &["--notify-retry-window", "60s"],
    );
    let asked = create(
        &served,
        &requester(),
        json!({
            "message": "Refund 30 EUR to order 12?",
            "payload": {"order": 12, "amount": 30},
            "step": "refund",
            "requester": "erin",
        }),
    )
    .await;
    let key = key_of(&asked);
    assert_eq!(asked["requester"], "erin");

    let (status, page) = full().get(&served.url("/approvals")).await;
    assert_eq!(status, 200, "{page}");
    let listed = &page["approvals"][0];
    assert_eq!(listed["key"], key.as_str(), "{page}");
    assert_eq!(listed["step_id"], "refund", "{listed}");
    assert_eq!(listed["message"], "Refund 30 EUR to order 12?");
    assert_eq!(listed["payload"], json!({"order": 12, "amount": 30}));
    assert_eq!(listed["agent_id"], "payouts-desk");
    assert_eq!(listed["status"], "PENDING");

    let cli = ws.list_json();
    let rows = cli["approvals"].as_array().expect("approvals");
    assert_eq!(rows.len(), 1, "{cli}");
    assert_eq!(rows[0]["key"], key.as_str(), "{cli}");
    assert_eq!(rows[0]["message"], "Refund 30 EUR to order 12?", "{cli}");

    let notice = requested_notice(&receiver, &key);
    assert_eq!(notice["type"], "approval.requested", "{notice}");
    assert_eq!(notice["data"]["step"], "refund", "{notice}");
    assert_eq!(notice["data"]["message"], "Refund 30 EUR to order 12?");
    assert_eq!(notice["data"]["agent"], "payouts-desk");
}

/// The verified `approval.requested` body for `key`, within 30 s.
fn requested_notice(receiver: &Receiver, key: &str) -> Value {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let requests = receiver.requests();
        let found = requests
            .iter()
            .filter(|r| r["verified"] == json!(true))
            .filter_map(|r| r["body"].as_str())
            .filter_map(|b| serde_json::from_str::<Value>(b).ok())
            .find(|b| b["data"]["key"] == key);
        if let Some(body) = found {
            return body;
        }
        assert!(
            Instant::now() < deadline,
            "no verified notice for {key}; the receiver saw {requests:#?}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Gate requests are stored under no spec version (their `spec_hash` is
/// the gate API's zeros), so they must never read as stale: the inbox
/// must offer Approve, the API say `spec_current`, the CLI list them
/// without a stale mark.
#[tokio::test(flavor = "multi_thread")]
async fn a_gate_request_is_never_stale_and_the_inbox_offers_approve() {
    let ws = Workspace::new(super::SPEC);
    let served = Served::start(
        &ws.spec,
        &ws.state_db(),
        &[
            ("TOLLGATE_API_TOKENS", TOKENS),
            (
                "TOLLGATE_SESSION_SECRET",
                "session-secret-for-the-gate-tests",
            ),
        ],
        &[],
    );
    let key = ask(
        &served,
        &requester(),
        json!({"message": "Refund 30 EUR?", "payload": {"amount": 30}}),
    )
    .await;
    let (_, record) = full().get(&served.url(&format!("/approvals/{key}"))).await;
    assert_eq!(record["spec_current"], true, "{record}");

    let mut browser = crate::ui::client::Client::signed_in(&served, "tok-carol").await;
    let page = browser.get(&format!("/ui/approvals/{key}")).await;
    assert_eq!(page.status, 200, "{}", page.body);
    assert!(!page.has_id("stale"), "{}", page.body);
    assert!(page.has_id("approve-button"), "{}", page.body);

    let out = ws
        .tollgate()
        .args(["approvals", "list", "--spec", ws.spec_arg()])
        .output()
        .expect("run tollgate");
    crate::common::assert_success(&out);
    let listed = crate::common::stdout(&out);
    assert!(listed.contains(&key), "{listed}");
    assert!(!listed.contains("stale"), "{listed}");
}
