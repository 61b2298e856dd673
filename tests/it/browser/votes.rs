//! A gate with rules in the browser (DESIGN §13): the page shows each
//! rule's progress and the ledger; whoever started the run is told why
//! they cannot vote and is offered no button; a member's vote is recorded
//! and shown, and the vote that meets the rule settles the gate.

use super::desk::{Desk, SPEC, WAIT, order};

/// The desk's spec with a rule: 2 of finance {alice, bob, mallory}.
fn team_spec() -> String {
    let team = SPEC.replace(
        "approvals:\n  approvers: [alice, bob, carol, local]\n",
        "approvals:\n  groups: { finance: [alice, bob, mallory] }\n",
    );
    let team = team.replace(
        "    approval:\n      message:",
        "    approval:\n      rules: [{ group: finance, min: 2 }]\n      message:",
    );
    assert_ne!(team, SPEC, "the desk's spec changed shape");
    team
}

#[tokio::test(flavor = "multi_thread")]
async fn a_gate_with_rules_shows_progress_and_offers_votes_only_to_those_who_may() {
    let mut desk = Desk::start().await;
    desk.redeploy(&team_spec()).await;
    // alice asks, so she may not vote.
    let paused = desk
        .pause_as_alice(order("T-1", 900.0, "Ada", "Needs two"))
        .await;
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

#[tokio::test(flavor = "multi_thread")]
async fn the_inbox_list_shows_progress_and_offers_the_requester_nothing_to_decide() {
    let mut desk = Desk::start().await;
    desk.redeploy(&team_spec()).await;
    // alice asks, so she may not vote.
    let paused = desk
        .pause_as_alice(order("T-2", 400.0, "Ada", "List me"))
        .await;
    let row = format!("tr.approval[data-key=\"{}\"]", paused.key);

    let alice = desk.browser().await;
    desk.sign_in(&alice, "alice-token", "alice").await;
    alice.goto(&desk.url("/ui")).await;
    let listed = alice.wait_for(&row, WAIT).await;
    let progress = listed.find_all(".progress").await;
    assert_eq!(progress.len(), 1);
    assert_eq!(progress[0].text().await, "finance 0 of 2");
    let class = listed.attribute("class").await.unwrap_or_default();
    assert!(class.contains("barred"), "{class}");
    let barred = listed.find_all(".barred").await;
    assert_eq!(barred.len(), 1);
    assert_eq!(barred[0].text().await, "your run: you may not vote");
    assert!(
        listed.find_all("button, input").await.is_empty(),
        "no control in her row"
    );

    // bob may vote: his row is not marked; he votes from it.
    let bob = desk.browser().await;
    desk.sign_in(&bob, "bob-token", "bob").await;
    bob.goto(&desk.url("/ui")).await;
    let his = bob.wait_for(&row, WAIT).await;
    let class = his.attribute("class").await.unwrap_or_default();
    assert!(!class.contains("barred"), "{class}");
    assert!(his.find_all(".barred").await.is_empty());
    bob.wait_for(&format!("{row} a.open"), WAIT)
        .await
        .click()
        .await;
    bob.wait_for("#approve-button", WAIT).await.click().await;
    let recorded = bob.wait_for("#vote-recorded", WAIT).await.text().await;
    assert!(recorded.contains("finance 1 of 2"), "{recorded}");
    bob.goto(&desk.url("/ui")).await;
    let his = bob.wait_for(&row, WAIT).await;
    assert_eq!(
        his.find_all(".barred").await[0].text().await,
        "you voted approve"
    );

    // alice's list, left open, follows the vote without a reload.
    let deadline = std::time::Instant::now() + WAIT;
    loop {
        let text = match alice.try_find(&format!("{row} .progress")).await {
            Some(e) => e.text().await,
            None => String::new(),
        };
        if text == "finance 1 of 2" {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "alice's list still shows {text:?}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert_eq!(desk.record(&paused.key).await["status"], "PENDING");
}
