//! A request's `policy` is a YAML gate's team policy (DESIGN §13): two
//! of finance must agree, one vote leaves it pending, the second settles
//! it; whoever asked (the token, or the `requester` named) cannot vote;
//! a group the served spec does not define is refused, naming the field.

use serde_json::{Value, json};

use super::{ask, error_of, gate, requester};
use crate::common::Workspace;
use crate::common::server::{Api, Served};

const SPEC: &str = r#"version: 1
agent: payouts-desk
approvals:
  groups: { finance: [ann, bo, cy] }
steps:
  - id: note
    set: { ok: true }
"#;

const TOKENS: &str = "ann:tok-ann,bo:tok-bo,cy:tok-cy,bot/requester:tok-bot";

fn person(name: &str) -> Api {
    Api::with_token(&format!("tok-{name}"))
}

fn two_of_finance(message: &str, requester: Option<&str>) -> Value {
    let mut body = json!({
        "message": message,
        "payload": {"amount": 900},
        "policy": {"rules": [{"group": "finance", "min": 2}]},
    });
    if let Some(name) = requester {
        body["requester"] = json!(name);
    }
    body
}

async fn vote(served: &Served, key: &str, name: &str) -> (u16, Value) {
    person(name)
        .post(
            &served.url(&format!("/approvals/{key}/approve")),
            json!({"reason": format!("{name} agrees")}),
        )
        .await
}

/// `name`'s vote counts, and the request still waits.
async fn counted_and_still_pending(served: &Served, key: &str, name: &str) {
    let (status, answer) = vote(served, key, name).await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["approval"]["status"], "PENDING", "{answer}");
    assert_eq!(answer["vote"]["rule"], "finance", "{answer}");
    let (_, view) = gate(served, &person(name), key, None).await;
    assert_eq!(view["state"], "pending", "one vote of two: {view}");
    assert_eq!(view["decision"], Value::Null);
}

/// `name`'s vote settles it: approved, by them.
async fn settles(served: &Served, key: &str, name: &str, asker: &Api) {
    let (status, answer) = vote(served, key, name).await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["approval"]["status"], "APPROVED", "{answer}");
    let (_, view) = gate(served, asker, key, Some("5s")).await;
    assert_eq!(view["state"], "decided", "{view}");
    assert_eq!(view["approved"], true);
    assert_eq!(view["decision"]["by"], name);
    assert_eq!(view["decision"]["payload"], json!({"amount": 900}));
}

/// `name` may not vote: they asked for it.
async fn barred(served: &Served, key: &str, name: &str) {
    let (status, answer) = vote(served, key, name).await;
    assert_eq!(status, 403, "{answer}");
    let (code, message) = error_of(&answer);
    assert_eq!(code, "forbidden", "{answer}");
    assert!(message.contains(name), "{message}");
}

#[tokio::test(flavor = "multi_thread")]
async fn two_of_finance_settle_it_and_no_one_votes_on_their_own_request() {
    let ws = Workspace::new(SPEC);
    let served = Served::start(
        &ws.spec,
        &ws.state_db(),
        &[("TOLLGATE_API_TOKENS", TOKENS)],
        &[],
    );
    let bot = requester();

    // Asked by a bot: any two of finance.
    let key = ask(&served, &bot, two_of_finance("Pay 900 EUR?", None)).await;
    counted_and_still_pending(&served, &key, "ann").await;
    settles(&served, &key, "cy", &bot).await;

    // Asked by ann's own (full) token: ann cannot vote; bo and cy can.
    let ann = person("ann");
    let key = ask(&served, &ann, two_of_finance("Pay 900 EUR again?", None)).await;
    barred(&served, &key, "ann").await;
    counted_and_still_pending(&served, &key, "bo").await;
    settles(&served, &key, "cy", &ann).await;

    // Asked by a bot on cy's behalf: cy cannot vote.
    let key = ask(
        &served,
        &bot,
        two_of_finance("Pay cy's 900 EUR?", Some("cy")),
    )
    .await;
    barred(&served, &key, "cy").await;
    counted_and_still_pending(&served, &key, "ann").await;
    settles(&served, &key, "bo", &bot).await;

    // A group the spec does not define: refused, naming the field.
    let (status, answer) = bot
        .post(
            &served.url("/gates"),
            json!({
                "message": "Pay 900 EUR?",
                "payload": {"amount": 900},
                "policy": {"rules": [{"group": "legal", "min": 1}]},
            }),
        )
        .await;
    assert_eq!(status, 400, "{answer}");
    let (code, message) = error_of(&answer);
    assert_eq!(code, "invalid_request");
    assert!(message.contains("policy.rules[0].group"), "{message}");
    assert!(message.contains("legal"), "{message}");
    let (status, page) = person("bo").get(&served.url("/approvals")).await;
    assert_eq!(status, 200);
    assert_eq!(page["approvals"], json!([]), "nothing stored: {page}");
}
