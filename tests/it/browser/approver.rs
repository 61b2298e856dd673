//! What an approver sees (issue 42 item 4), in one browser session at
//! 1280 x 800 against a real `tollgate serve` on a real SQLite file: the
//! inbox and the runs list give each run its context (agent, step,
//! message, who started it, its input) and find it by free text; who may
//! decide is said truthfully (never the agent that asked); an edited
//! payload is shown as edited, the original beside it; a gate that needs a
//! reason says so, and a reject without one is answered on the approval
//! page; the notifications table fits, its Retry buttons within reach.

use std::time::Duration;

use serde_json::{Value, json};

use super::desk::{WAIT, screenshot};
use crate::common::Workspace;
use crate::common::server::{Api, Paused, Served};
use crate::common::webdriver::{Driver, Session, SessionOptions};

const SPEC: &str = r#"version: 1
agent: parcel-desk
approvals:
  notify:
    webhooks:
      - url: ${FINANCE_APPROVALS_WEBHOOK_URL_EU_WEST_1}
        secret: ${FINANCE_APPROVALS_WEBHOOK_SECRET}
steps:
  - id: refund
    approval:
      message: "Refund {{ input.amount }} EUR to {{ input.customer }}?"
      payload:
        amount: "{{ input.amount }}"
        customer: "{{ input.customer }}"
  - id: ship
    approval:
      message: "Ship the replacement to {{ input.customer }}?"
      payload:
        address: "{{ input.address }}"
      require_reason: true
"#;

const TOKENS: &str = "agent:agent-token,alice:alice-token";

fn parcel(customer: &str, address: &str) -> Value {
    json!({"amount": 120, "customer": customer, "address": address, "order": "P-2291"})
}

/// The text of every element `css` selects, joined by newlines.
async fn texts(session: &Session, css: &str) -> String {
    let mut all = Vec::new();
    for element in session.find_all(css).await {
        all.push(element.text().await);
    }
    all.join("\n")
}

/// Submit the page's filter form with `q` typed into its text field.
async fn search(session: &Session, q: &str) {
    let field = session.find("#filter-q").await;
    field.clear().await;
    field.send_keys(q).await;
    session
        .find("#filters button[type=submit]")
        .await
        .click()
        .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn an_approver_finds_runs_reads_who_decides_and_edits_reasons_and_retries_at_1280() {
    let ws = Workspace::new(SPEC);
    // Nothing listens here: every webhook delivery fails (connection
    // refused) and waits in the notifications table for a retry.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let hook = format!("http://{}/hook", closed.local_addr().expect("address"));
    drop(closed);
    let (spec, db) = (ws.spec.clone(), ws.state_db());
    let server = tokio::task::spawn_blocking(move || {
        Served::start(
            &spec,
            &db,
            &[
                ("TOLLGATE_API_TOKENS", TOKENS),
                ("FINANCE_APPROVALS_WEBHOOK_URL_EU_WEST_1", hook.as_str()),
                (
                    "FINANCE_APPROVALS_WEBHOOK_SECRET",
                    "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
                ),
            ],
            &[],
        )
    });
    let driver = Driver::start().await;
    let served = server.await.expect("the server started");
    let (agent, alice) = (
        Api::with_token("agent-token"),
        Api::with_token("alice-token"),
    );
    let ada = agent
        .pause(&served, parcel("Ada Lovelace", "12 Analytical Row, London"))
        .await;
    let grace = agent
        .pause(
            &served,
            parcel("Grace Hopper", "7 Compiler Lane, Arlington"),
        )
        .await;

    let session = driver
        .session(SessionOptions {
            window: (1280, 800),
            ..SessionOptions::default()
        })
        .await;
    session.goto(&served.url("/ui/login")).await;
    session.find("#token").await.send_keys("alice-token").await;
    session.find("#sign-in").await.click().await;
    session.wait_for("#whoami", WAIT).await;

    // The inbox: each row's context, and who may decide it, truthfully:
    // the agent that started the run may not.
    session.goto(&served.url("/ui")).await;
    let row = format!("tr.approval[data-key=\"{}\"]", ada.key);
    let ada_row = session.wait_for(&row, WAIT).await.text().await;
    for context in [
        "parcel-desk",
        "refund",
        "Ada Lovelace",
        "Analytical Row",
        "agent",
    ] {
        assert!(
            ada_row.contains(context),
            "{context:?} in the row: {ada_row}"
        );
    }
    assert!(
        ada_row.contains("not agent (separation of duties)"),
        "who may decide, per row: {ada_row}"
    );
    let deciders = session.find(".deciders").await.text().await;
    assert!(
        deciders.contains("separation of duties"),
        "the page's line says who may not: {deciders}"
    );
    let asked = session
        .find(&format!("{row} time"))
        .await
        .attribute("title")
        .await
        .unwrap_or_default();
    assert!(
        asked.contains('T') && asked.ends_with('Z'),
        "full time: {asked}"
    );
    // Free text over the input: only Ada's parcel goes to Analytical Row.
    search(&session, "analytical row").await;
    session.wait_for(&row, WAIT).await;
    let keys = session.find_all("tr.approval").await.len();
    assert_eq!(keys, 1, "{}", texts(&session, "tr.approval").await);

    // An edit: the decided page shows what was approved, labelled as
    // edited, and the original beside it.
    session
        .goto(&served.url(&format!("/ui/approvals/{}", ada.key)))
        .await;
    let edit = session.wait_for("#payload-edit", WAIT).await;
    edit.clear().await;
    edit.send_keys(r#"{"amount": 95, "customer": "Ada Lovelace"}"#)
        .await;
    session.find("#modify-button").await.click().await;
    session.wait_for("#outcome", WAIT).await;
    let heading = session.find("#payload-heading").await.text().await;
    assert!(heading.contains("edited"), "{heading}");
    let shown = session.find("#payload").await.text().await;
    assert!(shown.contains("95") && !shown.contains("120"), "{shown}");
    let original = session.find("#original-payload").await;
    assert!(
        original.text().await.contains("Original payload"),
        "{}",
        original.text().await
    );
    let before = session
        .execute(
            "return document.querySelector('#original-payload pre').textContent;",
            vec![],
        )
        .await;
    assert!(
        before.as_str().is_some_and(|t| t.contains("120")),
        "{before}"
    );

    // The next gate needs a reason: its field says so, and a reject with
    // only spaces is answered on the approval page, not a bare error.
    let run = alice
        .wait_for_status(&served, &ada.run_id, "awaiting_approval")
        .await;
    let ship = Paused::from_run(&run);
    let page = served.url(&format!("/ui/approvals/{}", ship.key));
    session.goto(&page).await;
    let label = session
        .wait_for("label[for=reason]", WAIT)
        .await
        .text()
        .await;
    assert!(
        label.contains("(required)") && !label.contains("optional"),
        "{label}"
    );
    let reason = session.find("#reason").await;
    assert!(reason.attribute("required").await.is_some(), "required");
    reason.send_keys("   ").await;
    session.find("#reject-button").await.click().await;
    let error = session.wait_for("#reason-error", WAIT).await.text().await;
    assert!(error.contains("reason"), "{error}");
    assert!(
        session.try_find("#reject-button").await.is_some(),
        "still the page"
    );
    assert_eq!(
        alice
            .get(&served.url(&format!("/approvals/{}", ship.key)))
            .await
            .1["status"],
        "PENDING"
    );
    let reason = session.find("#reason").await;
    reason.send_keys("wrong address").await;
    session.find("#reject-button").await.click().await;
    let outcome = session.wait_for("#outcome", WAIT).await.text().await;
    assert!(
        outcome.contains("REJECTED") && outcome.contains("wrong address"),
        "{outcome}"
    );

    // The runs list: context per run, and a search over it.
    session.goto(&served.url("/ui/runs")).await;
    let grace_row = session
        .wait_for(&format!("tr.run[data-id=\"{}\"]", grace.run_id), WAIT)
        .await
        .text()
        .await;
    for context in [
        "parcel-desk",
        "refund",
        "Refund 120 EUR to Grace Hopper?",
        "Compiler Lane",
        "agent",
    ] {
        assert!(
            grace_row.contains(context),
            "{context:?} in the row: {grace_row}"
        );
    }
    let started = session
        .find(&format!("tr.run[data-id=\"{}\"] time", grace.run_id))
        .await;
    let (shown, title) = (started.text().await, started.attribute("title").await);
    assert_eq!(shown.matches(':').count(), 2, "to the second: {shown}");
    assert!(title.is_some_and(|t| t.contains('T')), "the full time");
    search(&session, "compiler lane").await;
    session
        .wait_for(&format!("tr.run[data-id=\"{}\"]", grace.run_id), WAIT)
        .await;
    assert_eq!(session.find_all("tr.run").await.len(), 1);
    screenshot(&session, "runs-search").await;

    // Notifications at 1280 px: every Retry button within the viewport.
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        session.goto(&served.url("/ui/notifications")).await;
        if !session.find_all("tr.notice").await.is_empty() {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "no failed notice");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let reach = session
        .execute(
            "return [...document.querySelectorAll('form.retry button')].map(b => { \
             const r = b.getBoundingClientRect(); return [r.left, r.right]; }) \
             .concat([[document.documentElement.scrollWidth, window.innerWidth]]);",
            vec![],
        )
        .await;
    let reach = reach.as_array().expect("rects").clone();
    let (page_width, inner) = (
        reach[reach.len() - 1][0].as_f64(),
        reach[reach.len() - 1][1].as_f64(),
    );
    let inner = inner.expect("innerWidth");
    screenshot(&session, "notifications-1280").await;
    assert!(
        page_width.is_some_and(|w| w <= inner),
        "the page scrolls sideways: {page_width:?} > {inner}"
    );
    for rect in &reach[..reach.len() - 1] {
        let (left, right) = (
            rect[0].as_f64().unwrap_or(-1.0),
            rect[1].as_f64().unwrap_or(f64::MAX),
        );
        assert!(
            left >= 0.0 && right <= inner,
            "a Retry button at {left}..{right}, the viewport {inner} wide"
        );
    }
    let id = session
        .find("tr.notice")
        .await
        .attribute("data-id")
        .await
        .expect("a notice id");
    session.find("form.retry button").await.click().await;
    session.wait_for("#notices, #notices-empty", WAIT).await;
    assert!(
        session.current_url().await.ends_with("/ui/notifications"),
        "back on the page after the retry"
    );
    let (status, notice) = alice
        .get(&served.url(&format!("/notifications/{id}")))
        .await;
    assert_eq!(status, 200, "{notice}");
}
