//! Deciding on the approval page: approve, modify with an edited payload,
//! reject with a reason, and losing a race to another decider.

use serde_json::{Value, json};

use crate::common::server::Api;

use super::desk::{Desk, WAIT, order, outcome, screenshot};

fn page(key: &str) -> String {
    format!("/ui/approvals/{key}")
}

#[tokio::test(flavor = "multi_thread")]
async fn approve_on_the_approval_page() {
    let desk = Desk::start().await;
    let paused = desk
        .pause(order(
            "A-1042",
            129.5,
            "Ada Lovelace",
            "Arrived with a cracked case",
        ))
        .await;
    let session = desk.browser().await;
    desk.sign_in(&session, "alice-token", "alice").await;
    session.goto(&desk.url(&page(&paused.key))).await;

    let message = session.find("#message").await.text().await;
    assert!(
        message.contains("Refund 129.5 EUR on order A-1042"),
        "{message}"
    );
    let payload = session.find("#payload").await.text().await;
    assert!(
        payload.contains("Ada Lovelace") && payload.contains("Mechanical keyboard"),
        "{payload}"
    );
    // The raw JSON is there, behind its toggle, and is the stored payload.
    let raw = session.find("#payload-raw").await;
    let raw_text = raw.property("textContent").await;
    let raw_json: Value =
        serde_json::from_str(raw_text.as_str().unwrap_or("")).expect("#payload-raw is JSON");
    assert_eq!(raw_json, desk.record(&paused.key).await["payload"]);
    let shown_before = raw.is_displayed().await;
    let toggle = session.find("#toggle-raw").await;
    toggle.click().await;
    assert_ne!(
        raw.is_displayed().await,
        shown_before,
        "#toggle-raw shows or hides it"
    );
    toggle.click().await;
    assert_eq!(raw.is_displayed().await, shown_before, "and back");
    assert!(
        session
            .find("#run-input")
            .await
            .property("textContent")
            .await
            .as_str()
            .unwrap()
            .contains("A-1042")
    );
    session
        .wait_for("#timeline li.event[data-kind=\"awaiting_approval\"]", WAIT)
        .await;
    // Tall enough to show the page down to its decision forms.
    session.set_window_size(1280, 1700).await;
    session.execute("window.scrollTo(0, 0);", vec![]).await;
    screenshot(&session, "approval").await;

    session.find("#approve-button").await.click().await;
    let text = outcome(&session).await;
    assert!(
        text.contains("APPROVED") && text.contains("alice"),
        "{text}"
    );

    let record = desk.record(&paused.key).await;
    assert_eq!(record["status"], "APPROVED", "{record}");
    assert_eq!(record["decided_by"], "alice");
    let run = desk.run_when(&paused.run_id, "completed").await;
    assert_eq!(run["outputs"]["result"]["by"], "alice", "{run}");
    // The page follows the run to its end.
    session
        .wait_for("#timeline li.event[data-kind=\"run_completed\"]", WAIT)
        .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn modify_with_an_edited_payload() {
    let desk = Desk::start().await;
    let paused = desk.pause(order("A-1043", 250.0, "Grace Hopper", "")).await;
    let session = desk.browser().await;
    desk.sign_in(&session, "alice-token", "alice").await;
    session.goto(&desk.url(&page(&paused.key))).await;

    let edit = session.find("#payload-edit").await;
    let prefilled: Value = serde_json::from_str(edit.property("value").await.as_str().unwrap())
        .expect("prefilled with JSON");
    assert_eq!(
        prefilled,
        desk.record(&paused.key).await["payload"],
        "prefilled with the payload"
    );
    // A broken edit is caught on the page before anything is sent.
    let before = desk.stored(&paused);
    edit.send_keys(",").await;
    session.find("#modify-button").await.click().await;
    let error = session.find("#payload-error").await;
    assert!(
        error.is_displayed().await,
        "the page says the JSON is broken"
    );
    assert!(
        error.text().await.contains("not valid JSON"),
        "{}",
        error.text().await
    );
    assert!(session.try_find("#outcome").await.is_none());
    assert_eq!(desk.stored(&paused), before, "nothing was sent");

    let mut edited = prefilled.clone();
    edited["amount"] = json!(180.0);
    edited["note"] = json!("partial refund: the cable stays");
    edit.clear().await;
    edit.send_keys(&serde_json::to_string_pretty(&edited).unwrap())
        .await;
    session.find("#modify-button").await.click().await;
    let text = outcome(&session).await;
    assert!(
        text.contains("MODIFIED") && text.contains("alice"),
        "{text}"
    );

    let record = desk.record(&paused.key).await;
    assert_eq!(record["status"], "MODIFIED", "{record}");
    assert_eq!(record["decided_by"], "alice");
    let run = desk.run_when(&paused.run_id, "completed").await;
    assert_eq!(
        run["outputs"]["result"]["refunded"], edited,
        "the run went on with the edit: {run}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn reject_with_a_reason() {
    let desk = Desk::start().await;
    let paused = desk.pause(order("A-1044", 980.0, "Alan Turing", "")).await;
    let session = desk.browser().await;
    desk.sign_in(&session, "alice-token", "alice").await;
    session.goto(&desk.url(&page(&paused.key))).await;

    let reason = "Over the monthly limit; ask finance";
    session.find("#reason").await.send_keys(reason).await;
    session.find("#reject-button").await.click().await;
    let text = outcome(&session).await;
    assert!(
        text.contains("REJECTED") && text.contains("alice"),
        "{text}"
    );

    let record = desk.record(&paused.key).await;
    assert_eq!(record["status"], "REJECTED", "{record}");
    assert_eq!(record["decided_by"], "alice");
    assert_eq!(record["decision_data"]["reason"], reason, "{record}");
    desk.run_when(&paused.run_id, "rejected").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn losing_a_race_shows_who_won() {
    let desk = Desk::start().await;
    let paused = desk
        .pause(order("A-1045", 75.0, "Edsger Dijkstra", ""))
        .await;
    let session = desk.browser().await;
    desk.sign_in(&session, "alice-token", "alice").await;
    session.goto(&desk.url(&page(&paused.key))).await;
    session.find("#approve-button").await;

    // bob decides over the API while alice's page is open ...
    let (status, body) = Api::with_token("bob-token")
        .post(
            &desk.url(&format!("/approvals/{}/reject", paused.key)),
            json!({"reason": "duplicate request"}),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    // ... then alice submits the form she still has.
    session.find("#approve-button").await.click().await;
    let already = session
        .wait_for("#already-decided", WAIT)
        .await
        .text()
        .await;
    assert!(already.contains("already decided by bob at"), "{already}");

    let record = desk.record(&paused.key).await;
    assert_eq!(
        record["status"], "REJECTED",
        "bob's decision stands: {record}"
    );
    assert_eq!(record["decided_by"], "bob");
    desk.run_when(&paused.run_id, "rejected").await;
}
