//! The inbox lists pending approvals and follows the store live; the
//! history lists decisions.

use serde_json::json;

use super::desk::{Desk, WAIT, order, screenshot};

fn row(key: &str) -> String {
    format!("tr.approval[data-key=\"{key}\"]")
}

#[tokio::test(flavor = "multi_thread")]
async fn a_new_approval_appears_and_a_decided_one_disappears_without_reload() {
    let desk = Desk::start().await;
    let first = desk.pause(order("A-1040", 129.5, "Ada Lovelace", "")).await;
    let second = desk
        .pause(order("A-1041", 310.0, "Grace Hopper", "Damaged in transit"))
        .await;
    let session = desk.browser().await;
    desk.sign_in(&session, "alice-token", "alice").await;
    session.goto(&desk.url("/ui")).await;
    session.wait_for(&row(&first.key), WAIT).await;
    session.wait_for(&row(&second.key), WAIT).await;
    // A mark on this very page: a reload would drop it.
    session
        .execute("window.__sameDocument = true;", vec![])
        .await;

    // A run started after the page loaded shows up as a new row.
    let live = desk
        .pause(order("A-1042", 86.0, "Alan Turing", "Wrong size"))
        .await;
    let new_row = session.wait_for(&row(&live.key), WAIT).await;
    assert!(
        new_row.text().await.contains("A-1042"),
        "{}",
        new_row.text().await
    );
    assert!(
        new_row
            .find_all(&format!("a.open[href=\"/ui/approvals/{}\"]", live.key))
            .await
            .len()
            == 1,
        "the row links to its approval page"
    );

    // Someone else decides one: its row goes.
    let bob = crate::common::server::Api::with_token("bob-token");
    let (status, body) = bob
        .post(
            &desk.url(&format!("/approvals/{}/approve", first.key)),
            json!({"reason": "ok"}),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    session.wait_gone(&row(&first.key), WAIT).await;
    assert!(session.try_find(&row(&second.key)).await.is_some());

    let same = session
        .execute("return window.__sameDocument === true;", vec![])
        .await;
    assert_eq!(same, true, "the page was never reloaded");
    screenshot(&session, "inbox").await;

    // The page followed the store.
    assert_eq!(desk.record(&live.key).await["status"], "PENDING");
    let decided = desk.record(&first.key).await;
    assert_eq!(decided["status"], "APPROVED");
    assert_eq!(decided["decided_by"], "bob");
    let (_, pending) = desk.api.get(&desk.url("/approvals")).await;
    let keys: Vec<&str> = pending["approvals"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|a| a["key"].as_str())
        .collect();
    assert_eq!(
        keys,
        [live.key.as_str(), second.key.as_str()],
        "newest first"
    );
    let rows = session.find_all("#inbox tr.approval").await;
    let mut shown = Vec::new();
    for r in &rows {
        shown.push(r.attribute("data-key").await.unwrap_or_default());
    }
    assert_eq!(
        shown, keys,
        "the inbox shows what the API lists, in its order"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn history_shows_who_decided_what_and_the_edit() {
    let desk = Desk::start().await;
    let approved = desk.pause(order("A-2001", 129.5, "Ada Lovelace", "")).await;
    let rejected = desk
        .pause(order(
            "A-2002",
            980.0,
            "Grace Hopper",
            "Third refund this month",
        ))
        .await;
    let modified = desk.pause(order("A-2003", 250.0, "Alan Turing", "")).await;
    let pending = desk
        .pause(order("A-2004", 12.0, "Edsger Dijkstra", ""))
        .await;
    let bob = crate::common::server::Api::with_token("bob-token");
    let decide = |path: String, body| {
        let bob = bob.clone();
        let url = desk.url(&path);
        async move {
            let (status, answer) = bob.post(&url, body).await;
            assert_eq!(status, 200, "{answer}");
        }
    };
    decide(
        format!("/approvals/{}/approve", approved.key),
        json!({"reason": "receipt checked"}),
    )
    .await;
    decide(
        format!("/approvals/{}/reject", rejected.key),
        json!({"reason": "over the monthly limit"}),
    )
    .await;
    let mut edited = desk.record(&modified.key).await["payload"].clone();
    edited["amount"] = json!(199.0);
    decide(
        format!("/approvals/{}/approve", modified.key),
        json!({"payload": edited}),
    )
    .await;

    let session = desk.browser().await;
    desk.sign_in(&session, "alice-token", "alice").await;
    session.goto(&desk.url("/ui/history")).await;
    session.wait_for("table#history", WAIT).await;
    for (paused, status, reason) in [
        (&approved, "APPROVED", "receipt checked"),
        (&rejected, "REJECTED", "over the monthly limit"),
        (&modified, "MODIFIED", ""),
    ] {
        let text = session.find(&row(&paused.key)).await.text().await;
        assert!(text.contains(status), "{status} in {text}");
        assert!(text.contains("bob"), "who decided, in {text}");
        assert!(text.contains(reason), "{reason:?} in {text}");
    }
    screenshot(&session, "history").await;
    // The edit, unfolded as a person would.
    session
        .find(&format!("{} details summary", row(&modified.key)))
        .await
        .click()
        .await;
    let diff = session
        .find(&format!("{} .payload-diff", row(&modified.key)))
        .await
        .text()
        .await;
    let line = |sign: char, text: &str| {
        diff.lines()
            .any(|l| l.trim_start().starts_with(sign) && l.contains(text))
    };
    assert!(
        line('-', "\"amount\": 250") && line('+', "\"amount\": 199"),
        "the edit as a diff: {diff}"
    );
    assert!(
        session.try_find(&row(&pending.key)).await.is_none(),
        "a pending approval is not history"
    );

    // The status filter narrows it to what the store says was rejected.
    session
        .find("#filters select[name=status] option[value=REJECTED]")
        .await
        .click()
        .await;
    session
        .find("#filters button[type=submit]")
        .await
        .click()
        .await;
    session.wait_for("table#history", WAIT).await;
    assert!(session.current_url().await.contains("status=REJECTED"));
    let rows = session.find_all("#history tr.approval").await;
    assert_eq!(rows.len(), 1);
    assert_eq!(
        rows[0].attribute("data-key").await.as_deref(),
        Some(rejected.key.as_str())
    );
    assert_eq!(desk.record(&rejected.key).await["status"], "REJECTED");
    assert_eq!(desk.record(&pending.key).await["status"], "PENDING");
}
