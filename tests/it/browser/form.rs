//! A gate's form in the browser (DESIGN §13): typed controls, not a JSON
//! box; what the browser can check it checks, what it cannot the server
//! refuses next to its field, keeping what was typed; once it fits, the
//! approval carries the input (with a comment) into the run's output.

use serde_json::json;

use super::desk::{Desk, SPEC, WAIT, order};

#[tokio::test(flavor = "multi_thread")]
async fn a_form_is_filled_in_refused_next_to_its_field_fixed_and_approved() {
    let mut desk = Desk::start().await;
    let with_form = SPEC.replace(
        "    approval:\n      message:",
        "    approval:\n      form:\n        title: Refund details\n        type: object\n        properties:\n          ticket: { type: string, title: Ticket, description: The support ticket, minLength: 3 }\n          units: { type: integer, title: Units returned, minimum: 1, exclusiveMaximum: 10 }\n          restock: { type: boolean, title: Restock }\n          reason: { type: string, enum: [damaged, late, other] }\n        required: [ticket, units]\n      message:",
    );
    let with_form = with_form.replace(
        "      by: \"{{ steps.refund.output.decided_by }}\"\n",
        "      by: \"{{ steps.refund.output.decided_by }}\"\n      details: \"{{ steps.refund.output.input }}\"\n",
    );
    assert_ne!(with_form, SPEC, "the desk's spec changed shape");
    desk.redeploy(&with_form).await;
    let paused = desk
        .pause(order("F-1", 120.0, "Ada", "Two units back"))
        .await;
    let page = desk.url(&format!("/ui/approvals/{}", paused.key));

    let bob = desk.browser().await;
    desk.sign_in(&bob, "bob-token", "bob").await;
    bob.goto(&page).await;
    bob.wait_for("#approve-button", WAIT).await;
    // Typed controls, the required ones marked and checked by the browser.
    assert_eq!(
        bob.find("#input-units")
            .await
            .attribute("type")
            .await
            .as_deref(),
        Some("number")
    );
    assert_eq!(
        bob.find("#input-units")
            .await
            .attribute("min")
            .await
            .as_deref(),
        Some("1")
    );
    assert!(
        bob.find("#input-ticket")
            .await
            .attribute("required")
            .await
            .is_some()
    );
    assert_eq!(
        bob.find("#input-restock")
            .await
            .attribute("type")
            .await
            .as_deref(),
        Some("checkbox")
    );
    let options = bob.find_all("#input-reason option").await.len();
    assert_eq!(options, 4, "none, then the three choices");
    let legend = bob.find("#input-fields legend").await.text().await;
    assert_eq!(legend, "Refund details");

    // 10 passes the browser (HTML has no exclusive maximum); the server
    // refuses it next to the field and keeps what was typed.
    bob.find("#input-ticket").await.send_keys("T-77").await;
    bob.find("#input-units").await.send_keys("10").await;
    bob.find("#approve-reason")
        .await
        .send_keys("ticket checked")
        .await;
    bob.find("#approve-button").await.click().await;
    let error = bob.wait_for("#input-units-error", WAIT).await.text().await;
    assert_eq!(error, "must be less than 10");
    assert_eq!(
        bob.find("#input-ticket").await.property("value").await,
        json!("T-77"),
        "what was typed is kept"
    );
    assert_eq!(
        desk.record(&paused.key).await["status"],
        "PENDING",
        "nothing decided"
    );

    // Fixed: approved, the input in the run's output.
    let units = bob.find("#input-units").await;
    units.clear().await;
    units.send_keys("2").await;
    bob.find("#input-restock").await.click().await;
    bob.find("#approve-reason")
        .await
        .send_keys("ticket checked")
        .await;
    bob.find("#approve-button").await.click().await;
    let outcome = bob.wait_for("#outcome", WAIT).await.text().await;
    assert!(
        outcome.contains("APPROVED") && outcome.contains("bob"),
        "{outcome}"
    );
    let shown = bob.find("#outcome-input").await.text().await;
    assert!(
        shown.contains("\"units\": 2") && shown.contains("\"ticket\": \"T-77\""),
        "{shown}"
    );

    let input = json!({ "ticket": "T-77", "units": 2, "restock": true });
    let record = desk.record(&paused.key).await;
    assert_eq!(record["decision_data"]["input"], input, "{record}");
    assert_eq!(
        record["decision_data"]["reason"], "ticket checked",
        "a comment on approve"
    );
    let run = desk.run_when(&paused.run_id, "completed").await;
    assert_eq!(run["outputs"]["refund"]["input"], input, "{run}");
    assert_eq!(run["outputs"]["result"]["details"], input, "{run}");
}
