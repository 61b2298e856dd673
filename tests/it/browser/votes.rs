//! A gate with rules in the browser (DESIGN §13): the page shows each
//! rule's progress and the ledger; whoever started the run is told why
//! they cannot vote and is offered no button; a member's vote is recorded
//! and shown, and the vote that meets the rule settles the gate.

use super::desk::{Desk, SPEC, WAIT, order};

#[tokio::test(flavor = "multi_thread")]
async fn a_gate_with_rules_shows_progress_and_offers_votes_only_to_those_who_may() {
    let mut desk = Desk::start().await;
    let team = SPEC.replace(
        "approvals:\n  approvers: [alice, bob, carol, local]\n",
        "approvals:\n  groups: { finance: [alice, bob, mallory] }\n",
    );
    let team = team.replace(
        "    approval:\n      message:",
        "    approval:\n      rules: [{ group: finance, min: 2 }]\n      message:",
    );
    assert_ne!(team, SPEC, "the desk's spec changed shape");
    desk.redeploy(&team).await;
    // The desk's API client is alice's: she asks, so she may not vote.
    let paused = desk.pause(order("T-1", 900.0, "Ada", "Needs two")).await;
    let page = desk.url(&format!("/ui/approvals/{}", paused.key));

    let alice = desk.browser().await;
    desk.sign_in(&alice, "alice-token", "alice").await;
    alice.goto(&page).await;
    let why = alice.wait_for("#may-not-vote", WAIT).await.text().await;
    assert!(why.contains("separation of duties"), "{why}");
    assert!(alice.try_find("#approve-button").await.is_none());
    let progress = alice.find("#vote-progress").await.text().await;
    assert_eq!(progress, "finance 0 of 2");

    let bob = desk.browser().await;
    desk.sign_in(&bob, "bob-token", "bob").await;
    bob.goto(&page).await;
    bob.wait_for("#approve-button", WAIT).await.click().await;
    let recorded = bob.wait_for("#vote-recorded", WAIT).await.text().await;
    assert!(recorded.contains("finance 1 of 2"), "{recorded}");
    bob.goto(&page).await;
    let mine = bob.wait_for("#may-not-vote", WAIT).await.text().await;
    assert!(mine.contains("You voted approve"), "{mine}");
    let ledger = bob.find("#ledger").await.text().await;
    assert!(ledger.contains("bob voted approve (finance)"), "{ledger}");
    assert!(ledger.contains("inbox"), "{ledger}");

    let mallory = desk.browser().await;
    desk.sign_in(&mallory, "mallory-token", "mallory").await;
    mallory.goto(&page).await;
    mallory
        .wait_for("#approve-button", WAIT)
        .await
        .click()
        .await;
    let outcome = mallory.wait_for("#outcome", WAIT).await.text().await;
    assert!(
        outcome.contains("APPROVED") && outcome.contains("mallory"),
        "{outcome}"
    );

    // The store agrees: decided once, by the vote that met the rule.
    let record = desk.record(&paused.key).await;
    assert_eq!(record["status"], "APPROVED");
    assert_eq!(record["decided_by"], "mallory");
    desk.run_when(&paused.run_id, "completed").await;
}
