//! Signed approval links: open one without signing in and decide; a GET
//! (what a link preview or a mail scanner does) changes nothing.

use tollgate_runtime::links::LinkSigner;

use super::desk::{Desk, LINK_SECRET, WAIT, order, outcome};

#[tokio::test(flavor = "multi_thread")]
async fn a_bound_link_decides_as_its_identity_without_signing_in() {
    let desk = Desk::start().await;
    let paused = desk.pause(order("A-3001", 64.0, "Ada Lovelace", "")).await;
    // What `approvals show --link-for carol` prints, signed with the
    // server's secret and public URL.
    let signer = LinkSigner::new(LINK_SECRET, Some(&desk.served.base)).expect("signer");
    let link = signer.url(&paused.key, Some("carol"));
    assert!(link.starts_with(&desk.served.base), "{link}");

    let session = desk.browser().await;
    session.goto(&link).await;
    let message = session.wait_for("#message", WAIT).await.text().await;
    assert!(message.contains("A-3001"), "{message}");
    assert!(
        session.try_find("form#login").await.is_none(),
        "no sign-in needed"
    );
    session.find("#approve-button").await.click().await;
    let text = outcome(&session).await;
    assert!(
        text.contains("APPROVED") && text.contains("carol"),
        "{text}"
    );

    let record = desk.record(&paused.key).await;
    assert_eq!(record["status"], "APPROVED", "{record}");
    assert_eq!(record["decided_by"], "carol", "the bound identity decided");
    let run = desk.run_when(&paused.run_id, "completed").await;
    assert_eq!(run["outputs"]["result"]["by"], "carol");

    // The link was a capability for a pending approval only: now it shows
    // it is spent, and the session it came from cannot reach the inbox.
    session.goto(&link).await;
    session
        .wait_for("#bad-link, #outcome, #already-decided", WAIT)
        .await;
    assert!(
        session.try_find("#approve-button").await.is_none(),
        "nothing left to decide"
    );
    session.goto(&desk.url("/ui")).await;
    session.wait_for("form#login", WAIT).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn opening_a_link_changes_nothing() {
    let desk = Desk::start().await;
    let paused = desk.pause(order("A-3002", 19.0, "Grace Hopper", "")).await;
    let link = desk.link(&paused.key).await;
    assert!(
        link.starts_with(&desk.served.base),
        "an absolute link: {link}"
    );
    let before = desk.stored(&paused);

    // A browser opens it (scripts and the live timeline included) ...
    let session = desk.browser().await;
    session.goto(&link).await;
    session.wait_for("#message", WAIT).await;
    session.find("#approve-button").await;
    session
        .wait_for("#timeline li.event[data-kind=\"awaiting_approval\"]", WAIT)
        .await;
    session.goto(&link).await;
    session.wait_for("#message", WAIT).await;
    // ... and so do a preview bot and a scanner, with GET and HEAD.
    let http = reqwest::Client::new();
    for request in [
        http.get(&link)
            .header("User-Agent", "Slackbot-LinkExpanding 1.0"),
        http.head(&link),
    ] {
        let answer = request.send().await.expect("request");
        assert_eq!(answer.status().as_u16(), 200, "{link}");
    }

    // Not a byte of the approval changed, and the run got no event.
    assert_eq!(desk.stored(&paused), before);
    let record = desk.record(&paused.key).await;
    assert_eq!(record["status"], "PENDING", "{record}");
    assert_eq!(record["decided_by"], serde_json::Value::Null);
    desk.run_when(&paused.run_id, "awaiting_approval").await;

    // A tampered signature is a refused link, not a page.
    let tampered = format!("{}x", link.trim_end_matches(|c: char| c != '/'));
    session.goto(&tampered).await;
    session.wait_for("#bad-link", WAIT).await;
    assert!(session.try_find("#approve-button").await.is_none());
    assert_eq!(desk.stored(&paused), before);
}
