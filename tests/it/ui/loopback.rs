//! Without API tokens (loopback mode): no sign-in, the caller is `local`,
//! forms are CSRF-checked against a pre-session cookie, and the Host and
//! Origin checks of server/http/origin.rs guard the pages too.

use serde_json::json;

use super::client::Client;
use crate::common::server::{Api, Served};
use crate::common::{GATED_SPEC, Workspace};

#[tokio::test]
async fn loopback_mode_decides_as_local_behind_the_host_and_origin_checks() {
    let ws = Workspace::new(GATED_SPEC);
    let served = Served::start(&ws.spec, &ws.state_db(), &[], &[]);
    let api = Api::new();
    let paused = api.pause(&served, json!({"order_id": "A1"})).await;
    let path = format!("/ui/approvals/{}", paused.key);

    let mut local = Client::new(&served);
    let login = local.get("/ui/login").await;
    assert_eq!(login.status, 303, "no sign-in without tokens");
    let inbox = local.get("/ui").await;
    assert_eq!(inbox.status, 200);
    assert_eq!(inbox.text_of("whoami"), "local");
    assert!(!inbox.has_id("sign-out"));
    assert!(local.cookies.contains_key("tollgate_csrf"));
    let page = local.get(&path).await;
    let csrf = page.csrf();

    // Another site's page, or a rebound DNS name, is refused.
    let own = served.base.trim_start_matches("http://").to_string();
    for (header, value) in [
        ("origin", "http://evil.example".to_string()),
        ("host", "evil.example".to_string()),
        ("origin", "null".to_string()),
    ] {
        let mut foreign = Client::new(&served);
        foreign.cookies = local.cookies.clone();
        foreign.extra.push((header.into(), value.clone()));
        let get = foreign.get("/ui").await;
        assert_eq!(get.status, 403, "{header}: {value}");
        let post = foreign
            .post(&path, &[("decision", "approve"), ("csrf", &csrf)])
            .await;
        assert_eq!(post.status, 403, "{header}: {value}");
    }
    let (_, record) = api
        .get(&served.url(&format!("/approvals/{}", paused.key)))
        .await;
    assert_eq!(record["status"], "PENDING");

    // A form without the token, or from a browser without the cookie, is refused.
    let refused = local.post(&path, &[("decision", "approve")]).await;
    assert_eq!(refused.status, 403);
    assert!(refused.body.contains("data-reason=\"csrf\""));
    let mut cookieless = Client::new(&served);
    let refused = cookieless
        .post(&path, &[("decision", "approve"), ("csrf", &csrf)])
        .await;
    assert_eq!(refused.status, 403);

    local.extra.push(("origin".into(), format!("http://{own}")));
    let decided = local
        .post(&path, &[("decision", "approve"), ("csrf", &csrf)])
        .await;
    assert_eq!(decided.status, 303, "{}", decided.body);
    let (_, record) = api
        .get(&served.url(&format!("/approvals/{}", paused.key)))
        .await;
    assert_eq!(record["decided_by"], "local");
}
