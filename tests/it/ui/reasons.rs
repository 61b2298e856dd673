//! A gate with `require_reason: true` through a signed link (the inbox's
//! page is driven in browser/approver.rs): its reason field says
//! "(required)" and is required, and a reject without a reason (spaces
//! pass the browser's check; a page without JavaScript checks nothing)
//! comes back as the approval page with the error by the field, nothing
//! decided, rather than a bare "Not done" page with no way back.

use serde_json::json;

use super::client::Client;
use crate::common::server::{Api, Served};
use crate::common::{GATED_SPEC, Workspace};

const LINK_SECRET: &str = "a-link-secret-of-at-least-32-bytes!!";

#[tokio::test]
async fn a_signed_links_page_asks_for_the_reason_its_gate_requires() {
    let spec = GATED_SPEC
        .replace("steps:\n", "approvals:\n  approvers: [carol]\nsteps:\n")
        .replace(
            "      payload: { order: \"{{ steps.prepare.output.order }}\" }\n",
            "      payload: { order: \"{{ steps.prepare.output.order }}\" }\n      require_reason: true\n",
        );
    assert!(spec.contains("require_reason: true"), "{spec}");
    let ws = Workspace::new(&spec);
    let served = Served::start(
        &ws.spec,
        &ws.state_db(),
        &[
            ("TOLLGATE_API_TOKENS", "agent:tok-agent,carol:tok-c"),
            ("TOLLGATE_LINK_SECRET", LINK_SECRET),
        ],
        &[],
    );
    let carol = Api::with_token("tok-c");
    let paused = Api::with_token("tok-agent")
        .pause(&served, json!({"order_id": "A7"}))
        .await;
    let record_url = served.url(&format!("/approvals/{}", paused.key));
    let (_, record) = carol.get(&record_url).await;
    let link = record["link"].as_str().expect("carol's link").to_string();

    let mut browser = Client::new(&served);
    let page = browser.get(&link).await;
    assert_eq!(page.status, 200, "{}", page.body);
    assert!(
        page.body.contains(
            r#"<label for="reason">Reason for rejecting <span class="required">(required)</span></label>"#
        ),
        "{}",
        page.body
    );
    assert!(
        page.body
            .contains(r#"<textarea name="reason" id="reason" rows="2" required>"#)
    );

    let refused = browser
        .post(
            &link,
            &[
                ("decision", "reject"),
                ("reason", "   "),
                ("csrf", &page.csrf()),
                (
                    "payload_digest",
                    record["payload_digest"].as_str().unwrap_or(""),
                ),
            ],
        )
        .await;
    assert_eq!(refused.status, 422, "{}", refused.body);
    assert!(!refused.body.contains("Not done"), "{}", refused.body);
    assert!(
        refused
            .text_of("reason-error")
            .contains("needs a reason to reject"),
        "{}",
        refused.body
    );
    assert!(refused.has_id("reject-button") && refused.has_id("message"));
    let (_, record) = carol.get(&record_url).await;
    assert_eq!(record["status"], "PENDING", "nothing was decided");

    let decided = browser
        .post(
            &link,
            &[
                ("decision", "reject"),
                ("reason", "address unknown"),
                ("csrf", &refused.csrf()),
            ],
        )
        .await;
    assert_eq!(decided.status, 200, "{}", decided.body);
    let (_, record) = carol.get(&record_url).await;
    assert_eq!(record["status"], "REJECTED", "{record}");
    assert_eq!(record["decided_by"], "carol");
}
