//! Signing in and out, and the sessions the server refuses: expired,
//! tampered, signed under another secret, or opened with a token that was
//! removed or rotated since. `next=` never leads off the server.

use sha2::{Digest, Sha256};

use super::client::Client;
use crate::common::server::Served;
use crate::common::{GATED_SPEC, Workspace};

const SECRET: &str = "session-secret-for-the-tests";

fn start(ws: &Workspace, tokens: &str, secret: &str) -> Served {
    Served::start(
        &ws.spec,
        &ws.state_db(),
        &[
            ("TOLLGATE_API_TOKENS", tokens),
            ("TOLLGATE_SESSION_SECRET", secret),
        ],
        &[],
    )
}

/// The inbox answers this cookie jar (200), or sends it to sign in (303).
async fn inbox_status(client: &mut Client) -> u16 {
    client.get("/ui").await.status
}

#[tokio::test]
async fn sign_in_sign_out_and_bad_tokens() {
    let ws = Workspace::new(GATED_SPEC);
    let served = start(&ws, "alice:tok-a", SECRET);
    let mut client = Client::new(&served);
    let before = client.get("/ui/approvals/some-key").await;
    assert_eq!(before.status, 303);
    assert_eq!(
        before.location(),
        "/ui/login?next=%2Fui%2Fapprovals%2Fsome%2Dkey"
    );

    let wrong = client.sign_in("not-a-token").await;
    assert_eq!(wrong.status, 401);
    assert!(wrong.has_id("login-error"), "{}", wrong.body);
    assert!(!client.cookies.contains_key("tollgate_session"));

    let answer = client.sign_in("tok-a").await;
    assert_eq!(answer.status, 303);
    assert_eq!(answer.location(), "/ui");
    let cookie = answer.header("set-cookie");
    for attribute in ["HttpOnly", "SameSite=Strict", "Path=/", "Max-Age=43200"] {
        assert!(cookie.contains(attribute), "{cookie}");
    }
    assert!(!cookie.contains("Secure"), "plain HTTP: {cookie}");
    assert!(
        !cookie.contains("tok-a"),
        "the token is never in the cookie"
    );
    let inbox = client.get("/ui").await;
    assert_eq!(inbox.status, 200);
    assert_eq!(inbox.text_of("whoami"), "alice");
    assert!(inbox.has_id("sign-out"));
    assert!(!inbox.body.contains("tok-a"));

    // Logout needs the page's CSRF token, then clears the cookie.
    let refused = client.post("/ui/logout", &[]).await;
    assert_eq!(refused.status, 403);
    assert_eq!(inbox_status(&mut client).await, 200);
    let csrf = inbox.csrf();
    let out = client.post("/ui/logout", &[("csrf", &csrf)]).await;
    assert_eq!(out.status, 303);
    assert!(out.header("set-cookie").contains("Max-Age=0"));
    assert_eq!(inbox_status(&mut client).await, 303);

    // The login form itself is CSRF-protected.
    let mut fresh = Client::new(&served);
    let no_csrf = fresh.post("/ui/login", &[("token", "tok-a")]).await;
    assert_eq!(no_csrf.status, 403);
    assert!(no_csrf.body.contains("data-reason=\"csrf\""));

    // Behind a TLS proxy the cookie is Secure.
    let mut proxied = Client::new(&served);
    proxied
        .extra
        .push(("x-forwarded-proto".into(), "https".into()));
    let answer = proxied.sign_in("tok-a").await;
    assert!(answer.header("set-cookie").contains("; Secure"));
}

#[tokio::test]
async fn next_never_leaves_the_inbox() {
    let ws = Workspace::new(GATED_SPEC);
    let served = start(&ws, "alice:tok-a", SECRET);
    for next in [
        "https://evil.example/",
        "//evil.example/ui",
        "/\\evil.example",
        "/ui//evil.example",
        "/runs",
    ] {
        let mut client = Client::new(&served);
        let form = client.get("/ui/login").await;
        let csrf = form.csrf();
        let answer = client
            .post(
                "/ui/login",
                &[("token", "tok-a"), ("csrf", &csrf), ("next", next)],
            )
            .await;
        assert_eq!(answer.status, 303, "{next}");
        assert_eq!(answer.location(), "/ui", "{next}");
    }
    let mut client = Client::new(&served);
    let form = client.get("/ui/login").await;
    let csrf = form.csrf();
    let answer = client
        .post(
            "/ui/login",
            &[
                ("token", "tok-a"),
                ("csrf", &csrf),
                ("next", "/ui/history?status=REJECTED"),
            ],
        )
        .await;
    assert_eq!(answer.location(), "/ui/history?status=REJECTED");
}

fn hmac_sha256(key: &[u8], message: &[u8]) -> Vec<u8> {
    let mut block = [0u8; 64];
    block[..key.len()].copy_from_slice(key);
    let inner_key: Vec<u8> = block.iter().map(|b| b ^ 0x36).collect();
    let outer_key: Vec<u8> = block.iter().map(|b| b ^ 0x5c).collect();
    let inner = Sha256::new()
        .chain_update(&inner_key)
        .chain_update(message)
        .finalize();
    Sha256::new()
        .chain_update(&outer_key)
        .chain_update(inner)
        .finalize()
        .to_vec()
}

/// A cookie signed exactly as the server signs one (server/ui/session.rs),
/// with an expiry of our choosing.
fn forge_with_the_secret(name: &str, token: &str, expiry: i64) -> String {
    let key = Sha256::new()
        .chain_update(b"tollgate-session-secret-v1\0")
        .chain_update(SECRET.as_bytes())
        .finalize();
    let expiry = expiry.to_string();
    let digest = Sha256::digest(token.as_bytes());
    let mut message = Vec::new();
    for part in [
        b"session".as_slice(),
        name.as_bytes(),
        expiry.as_bytes(),
        digest.as_slice(),
    ] {
        message.extend_from_slice(&(part.len() as u64).to_be_bytes());
        message.extend_from_slice(part);
    }
    let mac: String = hmac_sha256(&key, &message)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    format!("{name}.{expiry}.{mac}")
}

#[tokio::test]
async fn expired_and_tampered_sessions_are_refused() {
    let ws = Workspace::new(GATED_SPEC);
    let served = start(&ws, "alice:tok-a,bob:tok-b", SECRET);
    let now = chrono::Utc::now().timestamp();
    let mut client = Client::new(&served);
    // Correctly signed: the forgery matches the server's format...
    client.cookies.insert(
        "tollgate_session".into(),
        forge_with_the_secret("alice", "tok-a", now + 600),
    );
    assert_eq!(inbox_status(&mut client).await, 200);
    // ...so only the expiry refuses this one.
    client.cookies.insert(
        "tollgate_session".into(),
        forge_with_the_secret("alice", "tok-a", now - 1),
    );
    assert_eq!(inbox_status(&mut client).await, 303);

    let alice = Client::signed_in(&served, "tok-a").await;
    let real = alice.cookies["tollgate_session"].clone();
    let (name_and_expiry, mac) = real.rsplit_once('.').unwrap();
    let (_, expiry) = name_and_expiry.rsplit_once('.').unwrap();
    for tampered in [
        format!("bob.{expiry}.{mac}"),
        format!("alice.{}.{mac}", expiry.parse::<i64>().unwrap() + 3600),
        format!("{name_and_expiry}.{}", "0".repeat(64)),
        format!("{name_and_expiry}.{}", &mac[..10]),
        "alice".to_string(),
        String::new(),
    ] {
        let mut client = Client::new(&served);
        client
            .cookies
            .insert("tollgate_session".into(), tampered.clone());
        assert_eq!(inbox_status(&mut client).await, 303, "{tampered:?}");
    }
}

#[tokio::test]
async fn rotating_the_secret_or_a_token_ends_sessions() {
    let ws = Workspace::new(GATED_SPEC);
    let mut served = start(&ws, "alice:tok-a,bob:tok-b", SECRET);
    let mut alice = Client::signed_in(&served, "tok-a").await;
    let mut bob = Client::signed_in(&served, "tok-b").await;
    served.terminate();

    // Same secret, bob's token removed: bob's session ends, alice's holds
    // across the restart (nothing of a session is kept in the process).
    let mut served = start(&ws, "alice:tok-a", SECRET);
    alice.base = served.base.clone();
    bob.base = served.base.clone();
    assert_eq!(inbox_status(&mut alice).await, 200);
    assert_eq!(inbox_status(&mut bob).await, 303);
    served.terminate();

    // Alice's token rotated: her session ends.
    let mut served = start(&ws, "alice:tok-a2", SECRET);
    alice.base = served.base.clone();
    assert_eq!(inbox_status(&mut alice).await, 303);
    let mut again = Client::signed_in(&served, "tok-a2").await;
    served.terminate();

    // The secret rotated: every session ends.
    let served = start(&ws, "alice:tok-a2", "another-secret");
    again.base = served.base.clone();
    assert_eq!(inbox_status(&mut again).await, 303);
}
