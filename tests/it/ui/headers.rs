//! Every inbox response carries the CSP and the other security headers,
//! pages, fragments, refusals and assets alike; no page has inline script,
//! style or event handlers (the CSP would block them anyway).

use serde_json::json;

use super::client::{Answer, Client};
use crate::common::server::{Api, Served};
use crate::common::{GATED_SPEC, Workspace};

const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'";

fn assert_headers(what: &str, answer: &Answer) {
    assert_eq!(answer.header("content-security-policy"), CSP, "{what}");
    assert_eq!(answer.header("x-content-type-options"), "nosniff", "{what}");
    assert_eq!(answer.header("referrer-policy"), "same-origin", "{what}");
    assert!(!answer.header("cache-control").is_empty(), "{what}");
    let lower = answer.body.to_ascii_lowercase();
    for inline in [
        "<script>",
        "<style",
        " onerror=",
        " onclick=",
        " onload=",
        "style=\"",
    ] {
        assert!(
            !lower.contains(inline),
            "{what} has {inline:?}:\n{}",
            answer.body
        );
    }
}

#[tokio::test]
async fn every_page_and_refusal_has_the_security_headers() {
    let ws = Workspace::new(GATED_SPEC);
    let link_secret = "a-link-secret-of-at-least-32-bytes!!";
    let served = Served::start(
        &ws.spec,
        &ws.state_db(),
        &[
            // The agent starts the run; alice, who did not, is shown its
            // link (the requester never is).
            ("TOLLGATE_API_TOKENS", "agent:tok-agent,alice:tok-a"),
            ("TOLLGATE_LINK_SECRET", link_secret),
        ],
        &[],
    );
    let api = Api::with_token("tok-a");
    let paused = Api::with_token("tok-agent")
        .pause(&served, json!({"order_id": "A1"}))
        .await;
    let (_, shown) = api
        .get(&served.url(&format!("/approvals/{}", paused.key)))
        .await;
    let link = shown["link"].as_str().expect("link").to_string();

    let mut anonymous = Client::new(&served);
    let login = anonymous.get("/ui/login").await;
    assert_eq!(login.status, 200);
    assert_headers("login", &login);
    assert_eq!(login.header("cache-control"), "no-store");
    let redirect = anonymous.get("/ui").await;
    assert_eq!(redirect.status, 303);
    assert_headers("redirect to login", &redirect);
    let link_page = anonymous.get(&link).await;
    assert_eq!(link_page.status, 200, "{}", link_page.body);
    assert_headers("link page", &link_page);
    let bad_link = anonymous.get(&format!("/a/{}/forged", paused.key)).await;
    assert!(bad_link.has_id("bad-link"));
    assert_headers("bad link", &bad_link);

    let mut alice = Client::signed_in(&served, "tok-a").await;
    for path in [
        "/ui".to_string(),
        "/ui?fragment=rows".to_string(),
        format!("/ui/approvals/{}", paused.key),
        "/ui/history".to_string(),
        "/ui/runs".to_string(),
        format!("/ui/runs/{}", paused.run_id),
        "/ui/notifications".to_string(),
    ] {
        let page = alice.get(&path).await;
        assert_eq!(page.status, 200, "{path}: {}", page.body);
        assert_headers(&path, &page);
        assert_eq!(page.header("cache-control"), "no-store", "{path}");
    }
    let missing = alice.get("/ui/approvals/no-such-key").await;
    assert_eq!(missing.status, 404);
    assert!(missing.has_id("not-found"));
    assert_headers("404", &missing);
    let unknown = alice.get("/ui/nothing/here").await;
    assert_eq!(unknown.status, 404);
    assert!(unknown.has_id("not-found"), "{}", unknown.body);
    assert_headers("unknown path", &unknown);
    let refused = alice
        .post(
            &format!("/ui/approvals/{}", paused.key),
            &[("decision", "approve")],
        )
        .await;
    assert_eq!(refused.status, 403);
    assert_headers("csrf refusal", &refused);

    // A method a page does not answer gets the HTML 405 page; the API's
    // own paths keep their JSON error.
    for (method, path) in [
        (reqwest::Method::DELETE, "/ui".to_string()),
        (
            reqwest::Method::PUT,
            format!("/ui/approvals/{}", paused.key),
        ),
        (reqwest::Method::DELETE, link.clone()),
    ] {
        let refused = alice.call(method.clone(), &path).await;
        assert_eq!(refused.status, 405, "{method} {path}: {}", refused.body);
        assert!(refused.header("content-type").starts_with("text/html"));
        assert!(refused.body.contains(&format!("does not answer {method}")));
        assert_headers(&format!("{method} {path}"), &refused);
    }
    let api_refusal = alice.call(reqwest::Method::DELETE, "/approvals").await;
    assert_eq!(api_refusal.status, 405);
    assert!(
        api_refusal.body.contains("\"method_not_allowed\""),
        "{}",
        api_refusal.body
    );

    // Assets: same-origin files, content-hashed and cached for good.
    let inbox = alice.get("/ui").await;
    for kind in ["app.css?v=", "app.js?v="] {
        let at = inbox.body.find(kind).expect("asset link");
        let start = inbox.body[..at].rfind('"').unwrap() + 1;
        let end = at + inbox.body[at..].find('"').unwrap();
        let url = inbox.body[start..end].replace("&#x2f;", "/");
        let asset = alice.get(&url).await;
        assert_eq!(asset.status, 200, "{url}");
        assert_eq!(asset.header("x-content-type-options"), "nosniff");
        assert!(asset.header("cache-control").contains("immutable"), "{url}");
        assert!(!asset.header("etag").is_empty());
    }
}
