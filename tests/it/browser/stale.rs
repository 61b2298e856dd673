//! A deploy leaves an approval waiting on the old spec: the inbox marks
//! it, its page says so and, under `on_spec_change: refuse` (the default),
//! offers Reject only, which decides it.

use super::desk::{Desk, SPEC, WAIT, order, outcome, screenshot};

#[tokio::test(flavor = "multi_thread")]
async fn a_stale_approval_is_marked_and_offers_reject_only_under_refuse() {
    let mut desk = Desk::start().await;
    let old = desk
        .pause(order(
            "A-7",
            80.0,
            "Grace Hopper",
            "Paused before the deploy",
        ))
        .await;
    // The new version asks in other words: the old pause is stale.
    desk.redeploy(&SPEC.replace("Refund {{", "Please refund {{"))
        .await;
    let new = desk
        .pause(order("B-8", 20.0, "Alan Turing", "Paused after the deploy"))
        .await;
    let old_hash = desk.record(&old.key).await["spec_hash"]
        .as_str()
        .expect("spec_hash")
        .to_string();

    let session = desk.browser().await;
    desk.sign_in(&session, "alice-token", "alice").await;
    session.goto(&desk.url("/ui")).await;
    let marker = session
        .wait_for(
            &format!("tr.approval[data-key=\"{}\"] small.stale", old.key),
            WAIT,
        )
        .await
        .text()
        .await;
    assert!(
        marker.contains(&format!("stale (spec {})", &old_hash[..12])),
        "{marker}"
    );
    assert!(marker.contains("approve is not possible"), "{marker}");
    session
        .wait_for(&format!("tr.approval[data-key=\"{}\"]", new.key), WAIT)
        .await;
    assert!(
        session
            .try_find(&format!(
                "tr.approval[data-key=\"{}\"] small.stale",
                new.key
            ))
            .await
            .is_none(),
        "the new version's approval is current"
    );

    session
        .find(&format!("tr.approval[data-key=\"{}\"] a.open", old.key))
        .await
        .click()
        .await;
    let notice = session.wait_for("#stale", WAIT).await.text().await;
    assert!(
        notice.contains(&format!(
            "Requested under an older version of the spec ({})",
            &old_hash[..12]
        )),
        "{notice}"
    );
    assert!(
        notice.contains("approve is not possible until the spec is restored; reject is"),
        "{notice}"
    );
    session.find("#reject-button").await;
    for gone in ["#approve-button", "#modify-button", "#payload-edit"] {
        assert!(session.try_find(gone).await.is_none(), "{gone} is offered");
    }
    session.set_window_size(1280, 1300).await;
    screenshot(&session, "stale-approval").await;

    session
        .find("#reason")
        .await
        .send_keys("asked under the old wording")
        .await;
    session.find("#reject-button").await.click().await;
    let text = outcome(&session).await;
    assert!(
        text.contains("REJECTED") && text.contains("alice"),
        "{text}"
    );
    let record = desk.record(&old.key).await;
    assert_eq!(record["status"], "REJECTED", "{record}");
    assert_eq!(record["spec_current"], false, "{record}");
    // The current one is untouched, and approvable on its page.
    assert_eq!(desk.record(&new.key).await["status"], "PENDING");
    session
        .goto(&desk.url(&format!("/ui/approvals/{}", new.key)))
        .await;
    session.wait_for("#approve-button", WAIT).await;
    assert!(session.try_find("#stale").await.is_none());
}
