//! The pages for every approver: with JavaScript off, on a phone, and on a
//! server without tokens (loopback only, decisions by `local`).

use tollgate_runtime::links::LinkSigner;

use crate::common::webdriver::SessionOptions;

use super::desk::{
    Desk, LINK_SECRET, WAIT, approve_from_inbox, assert_no_horizontal_scroll, order, outcome,
    screenshot,
};

#[tokio::test(flavor = "multi_thread")]
async fn approve_and_reject_with_javascript_off() {
    let desk = Desk::start().await;
    let approve = desk.pause(order("A-5001", 44.0, "Ada Lovelace", "")).await;
    let reject = desk.pause(order("A-5002", 45.0, "Grace Hopper", "")).await;
    let session = desk
        .driver
        .session(SessionOptions {
            javascript: false,
            ..SessionOptions::default()
        })
        .await;
    desk.sign_in(&session, "alice-token", "alice").await;
    session.goto(&desk.url("/ui")).await;
    let text = approve_from_inbox(&session, &approve.key).await;
    assert!(
        text.contains("APPROVED") && text.contains("alice"),
        "{text}"
    );

    session
        .goto(&desk.url(&format!("/ui/approvals/{}", reject.key)))
        .await;
    // Without the page's script, the server checks an edited payload.
    let before = desk.stored(&reject);
    session.find("#payload-edit").await.send_keys("}").await;
    session.find("#modify-button").await.click().await;
    let error = session.wait_for("#payload-error", WAIT).await;
    assert!(error.is_displayed().await && !error.text().await.is_empty());
    assert_eq!(
        desk.stored(&reject),
        before,
        "a broken edit decides nothing"
    );
    session.find("#reason").await.send_keys("no receipt").await;
    session.find("#reject-button").await.click().await;
    let text = outcome(&session).await;
    assert!(text.contains("REJECTED"), "{text}");

    let approved = desk.record(&approve.key).await;
    assert_eq!(
        (approved["status"].as_str(), approved["decided_by"].as_str()),
        (Some("APPROVED"), Some("alice"))
    );
    let rejected = desk.record(&reject.key).await;
    assert_eq!(rejected["status"], "REJECTED");
    assert_eq!(rejected["decision_data"]["reason"], "no receipt");
    desk.run_when(&approve.run_id, "completed").await;
    desk.run_when(&reject.run_id, "rejected").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_phone_sees_every_page_without_sideways_scrolling() {
    let desk = Desk::start().await;
    let paused = desk
        .pause(order(
            "A-5003",
            129.5,
            "Ada Lovelace",
            "A long note from the customer explaining at length why the keyboard arrived with a cracked case and two missing keycaps",
        ))
        .await;
    // One decided with an edit, so the history has a row and a diff.
    let decided = desk.pause(order("A-5004", 18.0, "Grace Hopper", "")).await;
    let mut edited = desk.record(&decided.key).await["payload"].clone();
    edited["amount"] = serde_json::json!(9.0);
    let (status, body) = desk
        .api
        .post(
            &desk.url(&format!("/approvals/{}/approve", decided.key)),
            serde_json::json!({"payload": edited, "reason": "half: the box was opened"}),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    desk.pause(order("A-5006", 240.0, "Alan Turing", "")).await;
    let session = desk
        .driver
        .session(SessionOptions {
            window: (390, 844),
            ..SessionOptions::default()
        })
        .await;
    session.set_window_size(390, 844).await;
    desk.sign_in(&session, "alice-token", "alice").await;
    let link = LinkSigner::new(LINK_SECRET, Some(&desk.served.base))
        .expect("signer")
        .url(&paused.key, Some("bob"));
    for path in [
        "/ui",
        "/ui/history",
        &format!("/ui/approvals/{}", paused.key),
    ] {
        session.goto(&desk.url(path)).await;
        session.wait_for("#whoami", WAIT).await;
        // Unfold what is folded: the history's diff is the widest thing.
        for summary in session.find_all("details summary").await {
            summary.click().await;
        }
        assert_no_horizontal_scroll(&session, path).await;
    }
    // Approvers open links from chat and mail on their phones.
    session.goto(&link).await;
    session.wait_for("#approve-button", WAIT).await;
    assert!(session.inner_width().await <= 390);
    assert_no_horizontal_scroll(&session, "a signed link").await;
    screenshot(&session, "phone").await;

    session.find("#approve-button").await.click().await;
    let text = outcome(&session).await;
    assert!(text.contains("APPROVED"), "{text}");
    assert_no_horizontal_scroll(&session, "the outcome").await;
    let record = desk.record(&paused.key).await;
    assert_eq!(record["status"], "APPROVED");
    assert_eq!(record["decided_by"], "bob", "the link's identity");
}

#[tokio::test(flavor = "multi_thread")]
async fn loopback_mode_needs_no_sign_in_and_decides_as_local() {
    let desk = Desk::start_loopback().await;
    let paused = desk.pause(order("A-5005", 27.0, "Alan Turing", "")).await;
    let session = desk.browser().await;
    session.goto(&desk.url("/ui")).await;
    let whoami = session.wait_for("#whoami", WAIT).await.text().await;
    assert!(whoami.contains("local"), "{whoami}");
    let text = approve_from_inbox(&session, &paused.key).await;
    assert!(
        text.contains("APPROVED") && text.contains("local"),
        "{text}"
    );

    let record = desk.record(&paused.key).await;
    assert_eq!(record["status"], "APPROVED");
    assert_eq!(record["decided_by"], "local");
    desk.run_when(&paused.run_id, "completed").await;
}
