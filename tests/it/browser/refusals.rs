//! What the pages refuse: a POST without its CSRF token, a signed-in
//! person who is no approver, and markup smuggled in a payload or message.

use super::desk::{Desk, WAIT, order};

fn page(key: &str) -> String {
    format!("/ui/approvals/{key}")
}

#[tokio::test(flavor = "multi_thread")]
async fn a_post_without_the_csrf_token_is_refused() {
    let desk = Desk::start().await;
    let paused = desk.pause(order("A-4001", 33.0, "Ada Lovelace", "")).await;
    let before = desk.stored(&paused);
    let session = desk.browser().await;
    desk.sign_in(&session, "alice-token", "alice").await;
    session.goto(&desk.url(&page(&paused.key))).await;

    let removed = session
        .execute(
            "const i = document.querySelector('form#approve input[name=csrf]'); \
             if (!i) { return false; } i.remove(); return true;",
            vec![],
        )
        .await;
    assert_eq!(removed, true, "form#approve carries a hidden csrf input");
    session.find("#approve-button").await.click().await;
    let forbidden = session.wait_for("main#forbidden", WAIT).await;
    assert_eq!(
        forbidden.attribute("data-reason").await.as_deref(),
        Some("csrf")
    );

    assert_eq!(desk.stored(&paused), before, "nothing was decided");
    assert_eq!(desk.record(&paused.key).await["status"], "PENDING");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_non_approver_gets_403() {
    let desk = Desk::start().await;
    let paused = desk.pause(order("A-4002", 58.0, "Grace Hopper", "")).await;
    let before = desk.stored(&paused);
    let session = desk.browser().await;
    // mallory has a token, so she may sign in and look ...
    desk.sign_in(&session, "mallory-token", "mallory").await;
    session.goto(&desk.url(&page(&paused.key))).await;
    session.wait_for("#message", WAIT).await;
    // ... but not decide.
    session.find("#approve-button").await.click().await;
    let forbidden = session.wait_for("main#forbidden", WAIT).await.text().await;
    assert!(
        forbidden.contains("mallory may not decide: not in approvals.approvers"),
        "{forbidden}"
    );

    assert_eq!(desk.stored(&paused), before, "nothing was decided");
    assert_eq!(desk.record(&paused.key).await["status"], "PENDING");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_hostile_payload_and_message_render_as_text() {
    let script = "<script>window.__pwned=1</script>";
    let img = "\"><img src=x onerror=\"window.__pwned=1\">";
    let desk = Desk::start().await;
    let mut input = order("A-4003", 1.0, img, script);
    input["lines"][0]["item"] = serde_json::json!(format!("{img}{script}"));
    let paused = desk.pause(input).await;
    let session = desk.browser().await;
    desk.sign_in(&session, "alice-token", "alice").await;

    for path in ["/ui".to_string(), page(&paused.key)] {
        session.goto(&desk.url(&path)).await;
        if path == "/ui" {
            let row = session
                .wait_for(&format!("tr.approval[data-key=\"{}\"]", paused.key), WAIT)
                .await
                .text()
                .await;
            assert!(
                row.contains(script),
                "the message as text in the inbox: {row}"
            );
        } else {
            let message = session.wait_for("#message", WAIT).await.text().await;
            assert!(
                message.contains(script) && message.contains(img),
                "{message}"
            );
            let payload = session.find("#payload").await.text().await;
            assert!(
                payload.contains(script) && payload.contains(img),
                "{payload}"
            );
            assert!(
                session
                    .find_all("#payload img, #message img")
                    .await
                    .is_empty()
            );
        }
        let pwned = session
            .execute("return typeof window.__pwned;", vec![])
            .await;
        assert_eq!(pwned, "undefined", "no injected script ran on {path}");
        assert!(
            session
                .find_all("img[src=x], body script:not([src])")
                .await
                .is_empty(),
            "no injected element on {path}"
        );
        // The headers that would stop an injection that got through.
        let answer = reqwest::Client::new()
            .get(desk.url(&path))
            .send()
            .await
            .expect("GET");
        let csp = answer
            .headers()
            .get("content-security-policy")
            .and_then(|v| v.to_str().ok())
            .unwrap_or("");
        assert!(
            csp.contains("script-src 'self'") && !csp.contains("unsafe-inline"),
            "{csp}"
        );
        assert!(csp.contains("frame-ancestors 'none'"), "{csp}");
    }
    // The text reached the store unchanged: the page escaped it, nothing
    // rewrote it.
    let record = desk.record(&paused.key).await;
    assert_eq!(record["payload"]["note"], script);
    assert_eq!(record["payload"]["customer"], img);
    assert_eq!(record["status"], "PENDING");
}
