//! Issue 22 item 4: sign-in is throttled per client address. A real
//! `tollgate serve`: after 5 wrong tokens from one address, a 429 with
//! `Retry-After`, the right token refused too while locked out (else the
//! lockout would still tell a guesser which guess was right); another
//! address signs in; one log line per lockout, never the token.

use std::net::{IpAddr, Ipv4Addr};
use std::time::Duration;

use super::client::Client;
use crate::common::Workspace;
use crate::common::server::Served;

const TOKENS: &str = "alice:right-token-5d1c";

/// A client from 127.0.0.N, with the login form's pre-session cookie and
/// CSRF token.
async fn login_client(served: &Served, n: u8) -> (Client, String) {
    let mut client = Client::from_address(served, Some(IpAddr::V4(Ipv4Addr::new(127, 0, 0, n))));
    let form = client.get("/ui/login").await;
    assert_eq!(form.status, 200, "{}", form.body);
    let csrf = form.csrf();
    (client, csrf)
}

async fn try_token(client: &mut Client, csrf: &str, token: &str) -> super::client::Answer {
    client
        .post(
            "/ui/login",
            &[("token", token), ("csrf", csrf), ("next", "/ui")],
        )
        .await
}

#[tokio::test]
async fn wrong_tokens_lock_out_one_address_with_retry_after() {
    let ws = Workspace::new(crate::common::GATED_SPEC);
    let served = Served::start(
        &ws.spec,
        &ws.state_db(),
        &[("TOLLGATE_API_TOKENS", TOKENS)],
        &[],
    );
    let (mut guesser, csrf) = login_client(&served, 7).await;
    for i in 0..5 {
        let answer = try_token(&mut guesser, &csrf, &format!("guess-{i}-hunter2")).await;
        assert_eq!(answer.status, 401, "guess {i}: {}", answer.body);
    }
    let locked = try_token(&mut guesser, &csrf, "guess-5-hunter2").await;
    assert_eq!(locked.status, 429, "{}", locked.body);
    let retry: u64 = locked
        .header("retry-after")
        .parse()
        .expect("Retry-After in seconds");
    assert!((1..=5).contains(&retry), "{retry}");
    assert!(
        locked.body.contains("data-reason=\"throttled\""),
        "{}",
        locked.body
    );
    // The right token is refused too while the lockout lasts.
    let right = try_token(&mut guesser, &csrf, "right-token-5d1c").await;
    assert_eq!(right.status, 429, "{}", right.body);
    assert!(!guesser.cookies.contains_key("tollgate_session"));

    // Another address is not affected.
    let (mut other, csrf) = login_client(&served, 8).await;
    let signed_in = try_token(&mut other, &csrf, "right-token-5d1c").await;
    assert_eq!(signed_in.status, 303, "{}", signed_in.body);
    assert!(other.cookies.contains_key("tollgate_session"));

    let line = served
        .log_line("too many wrong tokens", Duration::from_secs(10))
        .await;
    assert!(line.contains("127.0.0.7"), "{line}");
    let logs = served.logs();
    assert_eq!(logs.matches("too many wrong tokens").count(), 1, "{logs}");
    assert!(!logs.contains("hunter2"), "a token reached the log: {logs}");
    assert!(!logs.contains("right-token-5d1c"), "{logs}");
}

#[tokio::test]
async fn a_successful_sign_in_forgets_the_failures() {
    let ws = Workspace::new(crate::common::GATED_SPEC);
    let served = Served::start(
        &ws.spec,
        &ws.state_db(),
        &[("TOLLGATE_API_TOKENS", TOKENS)],
        &[],
    );
    let (mut client, csrf) = login_client(&served, 9).await;
    for round in 0..3 {
        for i in 0..4 {
            let answer = try_token(&mut client, &csrf, &format!("typo-{round}-{i}")).await;
            assert_eq!(answer.status, 401, "round {round}, typo {i}");
        }
        // A fresh pre-session per round: the session cookie replaces it.
        let (mut fresh, fresh_csrf) = login_client(&served, 9).await;
        let signed_in = try_token(&mut fresh, &fresh_csrf, "right-token-5d1c").await;
        assert_eq!(signed_in.status, 303, "round {round}: {}", signed_in.body);
    }
    assert!(!served.logs().contains("too many wrong tokens"));
}
