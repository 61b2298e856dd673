//! A gate request (`POST /gates`, made by an agent with a requester token)
//! is one of the inbox's approvals: listed with the others, shown with its
//! message and payload, decided from its page, and the agent's wait reads
//! the decision as made there.

use serde_json::json;

use super::client::Client;
use crate::common::server::{Api, Served};
use crate::common::{GATED_SPEC, Workspace};

#[tokio::test]
async fn the_inbox_lists_shows_and_decides_a_gate_request() {
    let ws = Workspace::new(GATED_SPEC);
    let served = Served::start(
        &ws.spec,
        &ws.state_db(),
        &[
            ("TOLLGATE_API_TOKENS", "alice:tok-a,bot/requester:tok-r"),
            ("TOLLGATE_SESSION_SECRET", "gate-requests-secret"),
        ],
        &[],
    );
    let bot = Api::with_token("tok-r");
    let (status, asked) = bot
        .post(
            &served.url("/gates"),
            json!({
                "message": "Refund order Z9 to Ada?",
                "payload": {"order": "Z9", "cents": 4900},
                "step": "refund",
                "requester": "ada@example.com",
            }),
        )
        .await;
    assert_eq!(status, 201, "{asked}");
    let key = asked["key"].as_str().expect("key").to_string();

    let mut alice = Client::signed_in(&served, "tok-a").await;
    let inbox = alice.get("/ui").await;
    assert_eq!(inbox.status, 200, "{}", inbox.body);
    assert!(inbox.body.contains(&key), "listed in the inbox");
    assert!(inbox.body.contains("Refund order Z9 to Ada?"));

    let path = format!("/ui/approvals/{key}");
    let page = alice.get(&path).await;
    assert_eq!(page.status, 200, "{}", page.body);
    assert!(page.body.contains("Refund order Z9 to Ada?"));
    assert!(page.text_of("payload").contains("Z9"));
    assert!(
        !page.has_id("stale") && !inbox.body.contains("stale (spec"),
        "a gate request belongs to no spec version: never shown as stale"
    );
    let csrf = page.csrf();
    let answer = alice
        .post(
            &path,
            &[
                ("decision", "modify"),
                ("payload", r#"{"order": "Z9", "cents": 2450}"#),
                ("csrf", &csrf),
            ],
        )
        .await;
    assert_eq!(answer.status, 303, "{}", answer.body);
    let page = alice.get(&path).await;
    let outcome = page.text_of("outcome");
    assert!(
        outcome.contains("MODIFIED") && outcome.contains("alice"),
        "{outcome}"
    );

    let (status, view) = bot.get(&served.url(&format!("/gates/{key}?wait=5s"))).await;
    assert_eq!(status, 200, "{view}");
    assert_eq!(view["state"], "decided");
    assert_eq!(view["approved"], true);
    assert_eq!(view["decision"]["by"], "alice");
    assert_eq!(
        view["decision"]["payload"],
        json!({"order": "Z9", "cents": 2450})
    );
    assert_eq!(view["requester"], "ada@example.com");
    assert_eq!(view["requested_by"], "bot");
}
