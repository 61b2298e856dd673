//! Signing in with an API token, the session cookie it sets, signing out.

use crate::common::{contains_bytes, sqlite_bytes};

use super::desk::{Desk, WAIT, order};

#[tokio::test(flavor = "multi_thread")]
async fn sign_in_with_a_token_then_sign_out() {
    let desk = Desk::start().await;
    let paused = desk.pause(order("A-1001", 42.0, "Ada", "")).await;
    let session = desk.browser().await;

    // Not signed in: the inbox sends people to the login form.
    session.goto(&desk.url("/ui")).await;
    session.wait_for("form#login", WAIT).await;
    assert!(
        session.try_find("#inbox").await.is_none(),
        "no inbox before signing in"
    );

    // A wrong token is refused on the page, and signs nobody in.
    session.find("#token").await.send_keys("not-a-token").await;
    session.find("#sign-in").await.click().await;
    let error = session.wait_for("#login-error", WAIT).await;
    assert!(!error.text().await.is_empty(), "the error says something");
    assert!(session.try_find("#whoami").await.is_none());

    desk.sign_in(&session, "alice-token", "alice").await;
    session.goto(&desk.url("/ui")).await;
    let row = session
        .wait_for(&format!("tr.approval[data-key=\"{}\"]", paused.key), WAIT)
        .await;
    assert!(row.text().await.contains("A-1001"), "{}", row.text().await);
    // The session cookie is HttpOnly: page scripts never see it.
    let cookies = session.execute("return document.cookie;", vec![]).await;
    assert_eq!(cookies, "", "no cookie readable by scripts");

    session
        .find("form#sign-out button, form#sign-out [type=submit]")
        .await
        .click()
        .await;
    session.wait_for("form#login", WAIT).await;
    session.goto(&desk.url("/ui")).await;
    session.wait_for("form#login", WAIT).await;

    // Signing in and out wrote nothing about the token or the session to
    // the store, and decided nothing.
    let bytes = sqlite_bytes(&desk.state);
    assert!(
        !contains_bytes(&bytes, "alice-token"),
        "the token is not stored"
    );
    assert!(!contains_bytes(&bytes, "not-a-token"));
    assert_eq!(desk.record(&paused.key).await["status"], "PENDING");
}
