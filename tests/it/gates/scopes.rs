//! A requester token asks, and nothing more: every way to decide or list
//! answers 403 `insufficient_scope`, the inbox refuses it, and another
//! requester's request is not found. carol's full token decides.

use serde_json::{Value, json};

use super::{
    SPEC, TOKENS, cancel_gate, create, error_of, full, gate, key_of, other_requester, requester,
};
use crate::common::Workspace;
use crate::common::server::{Api, Served};
use crate::ui::client::Client;

#[tokio::test(flavor = "multi_thread")]
async fn a_requester_token_cannot_decide_list_or_sign_in() {
    let ws = Workspace::new(SPEC);
    let served = Served::start(
        &ws.spec,
        &ws.state_db(),
        &[
            ("TOLLGATE_API_TOKENS", TOKENS),
            (
                "TOLLGATE_SESSION_SECRET",
                "session-secret-for-the-gate-tests",
            ),
        ],
        &[],
    );
    let bot = requester();
    let asked = create(
        &served,
        &bot,
        json!({"message": "Rotate the API keys?", "payload": {"service": "api"}}),
    )
    .await;
    let key = key_of(&asked);
    let (status, record) = full().get(&served.url(&format!("/approvals/{key}"))).await;
    assert_eq!(status, 200, "{record}");
    let run_id = record["run_id"].as_str().expect("run_id").to_string();

    let decisions: [(String, Value); 6] = [
        (format!("/approvals/{key}/approve"), json!({})),
        (format!("/approvals/{key}/reject"), json!({"reason": "no"})),
        (
            "/approvals/batch".to_string(),
            json!({"decisions": [{"key": key, "decision": "approve"}]}),
        ),
        (format!("/runs/{run_id}/approve"), json!({"approved": true})),
        (format!("/runs/{key}/approve"), json!({"approved": true})),
        (format!("/runs/{run_id}/cancel"), json!({})),
    ];
    for (path, body) in decisions {
        let (status, answer) = bot.post(&served.url(&path), body).await;
        assert_eq!(status, 403, "POST {path}: {answer}");
        let (code, message) = error_of(&answer);
        assert_eq!(code, "insufficient_scope", "POST {path}: {answer}");
        assert!(message.contains("bot"), "names the token: {message}");
    }
    for path in [
        "/approvals".to_string(),
        format!("/approvals/{key}"),
        format!("/approvals/{key}/votes"),
        "/runs".to_string(),
        format!("/runs/{run_id}"),
    ] {
        let (status, answer) = bot.get(&served.url(&path)).await;
        assert_eq!(status, 403, "GET {path}: {answer}");
        assert_eq!(error_of(&answer).0, "insufficient_scope", "GET {path}");
    }

    // The inbox refuses it (a right token, but one that may only ask).
    let mut browser = Client::new(&served);
    let answer = browser.sign_in("tok-bot").await;
    assert_eq!(answer.status, 403, "{}", answer.body);
    assert!(
        answer.body.contains("may only ask for approvals"),
        "{}",
        answer.body
    );
    assert!(!browser.cookies.contains_key("tollgate_session"));
    // carol's token signs in.
    Client::signed_in(&served, "tok-carol").await;

    // Another requester does not see it, cannot wait on it or cancel it.
    let stranger = other_requester();
    for wait in [None, Some("1s")] {
        let (status, answer) = gate(&served, &stranger, &key, wait).await;
        assert_eq!(status, 404, "{answer}");
        assert_eq!(error_of(&answer).0, "approval_not_found");
    }
    let (status, answer) = cancel_gate(&served, &stranger, &key, None).await;
    assert_eq!(status, 404, "{answer}");
    assert_eq!(error_of(&answer).0, "approval_not_found");

    // No token, or an unknown one: not even asking.
    for api in [Api::new(), Api::with_token("tok-nobody")] {
        let (status, answer) = api
            .post(
                &served.url("/gates"),
                json!({"message": "Go?", "payload": {}}),
            )
            .await;
        assert_eq!(status, 401, "{answer}");
        assert_eq!(error_of(&answer).0, "unauthorized");
        let (status, _) = gate(&served, &api, &key, None).await;
        assert_eq!(status, 401);
    }

    // Still pending after all that; carol decides it.
    let (status, view) = gate(&served, &bot, &key, None).await;
    assert_eq!(
        (status, view["status"].as_str()),
        (200, Some("PENDING")),
        "{view}"
    );
    let (status, seen) = gate(&served, &full(), &key, None).await;
    assert_eq!(status, 200, "a full token sees every request: {seen}");
    let (status, answer) = full()
        .post(
            &served.url(&format!("/approvals/{key}/approve")),
            json!({"reason": "rotated"}),
        )
        .await;
    assert_eq!(status, 200, "{answer}");
    let (_, view) = gate(&served, &bot, &key, None).await;
    assert_eq!(view["status"], "APPROVED", "{view}");
    assert_eq!(view["decision"]["by"], "carol");
}
