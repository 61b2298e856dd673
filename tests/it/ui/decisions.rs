//! Deciding from the approval page with plain form POSTs (no JavaScript):
//! approve, reject with a reason, modify with an edited payload, each a
//! 303 back to the page that then shows the outcome; CSRF refusals and a
//! non-approver change nothing; a lost race says who won; hostile text is
//! shown escaped.

use serde_json::{Value, json};

use super::client::{Answer, Client};
use crate::common::server::{Api, Paused, Served};
use crate::common::{GATED_SPEC, Workspace};

fn start(ws: &Workspace) -> Served {
    Served::start(
        &ws.spec,
        &ws.state_db(),
        &[
            // The agent starts the runs that alice and bob decide: whoever
            // starts a run may not decide its gates.
            (
                "TOLLGATE_API_TOKENS",
                "agent:tok-agent,alice:tok-a,bob:tok-b",
            ),
            ("TOLLGATE_SESSION_SECRET", "decisions-secret"),
        ],
        &[],
    )
}

async fn record(api: &Api, served: &Served, key: &str) -> Value {
    let (status, body) = api.get(&served.url(&format!("/approvals/{key}"))).await;
    assert_eq!(status, 200, "{body}");
    body
}

/// Open the page, post `fields` (plus its CSRF token), follow the 303.
async fn decide(client: &mut Client, paused: &Paused, fields: &[(&str, &str)]) -> Answer {
    let path = format!("/ui/approvals/{}", paused.key);
    let page = client.get(&path).await;
    assert_eq!(page.status, 200, "{}", page.body);
    let csrf = page.csrf();
    let mut all = fields.to_vec();
    all.push(("csrf", &csrf));
    let answer = client.post(&path, &all).await;
    assert_eq!(answer.status, 303, "{}", answer.body);
    assert_eq!(answer.location(), path);
    client.get(&path).await
}

#[tokio::test]
async fn approve_reject_and_modify_by_form_post() {
    let ws = Workspace::new(GATED_SPEC);
    let served = start(&ws);
    let api = Api::with_token("tok-agent");
    let mut alice = Client::signed_in(&served, "tok-a").await;

    let first = api.pause(&served, json!({"order_id": "A1"})).await;
    // The agent asked for it: its page offers it no decision, and says why.
    let mut agent = Client::signed_in(&served, "tok-agent").await;
    let asked = agent.get(&format!("/ui/approvals/{}", first.key)).await;
    assert_eq!(asked.status, 200, "{}", asked.body);
    assert!(!asked.has_id("approve"), "{}", asked.body);
    assert!(
        asked
            .text_of("may-not-vote")
            .contains("You (agent) asked for this approval, so you may not decide it"),
        "{}",
        asked.body
    );
    let page = decide(&mut alice, &first, &[("decision", "approve")]).await;
    let outcome = page.text_of("outcome");
    assert!(
        outcome.contains("APPROVED") && outcome.contains("alice"),
        "{outcome}"
    );
    assert!(!page.has_id("approve"), "no forms once decided");
    let run = api
        .wait_for_status(&served, &first.run_id, "completed")
        .await;
    assert_eq!(run["outputs"]["act"]["by"], "alice");

    let second = api.pause(&served, json!({"order_id": "A2"})).await;
    let page = decide(
        &mut alice,
        &second,
        &[("decision", "reject"), ("reason", "wrong address")],
    )
    .await;
    let outcome = page.text_of("outcome");
    assert!(
        outcome.contains("REJECTED") && outcome.contains("wrong address"),
        "{outcome}"
    );
    assert_eq!(
        record(&api, &served, &second.key).await["decision_data"]["reason"],
        "wrong address"
    );

    let third = api.pause(&served, json!({"order_id": "A3"})).await;
    // Invalid JSON is refused with the error beside the box, nothing decided.
    let path = format!("/ui/approvals/{}", third.key);
    let page = alice.get(&path).await;
    let csrf = page.csrf();
    let bad = alice
        .post(
            &path,
            &[
                ("decision", "modify"),
                ("payload", "{not json"),
                ("csrf", &csrf),
            ],
        )
        .await;
    assert_eq!(bad.status, 422);
    assert!(
        bad.text_of("payload-error").contains("not valid JSON"),
        "{}",
        bad.body
    );
    assert!(bad.body.contains("{not json"), "the edit is kept");
    assert_eq!(record(&api, &served, &third.key).await["status"], "PENDING");
    let page = decide(
        &mut alice,
        &third,
        &[("decision", "modify"), ("payload", r#"{"order": "B3"}"#)],
    )
    .await;
    let outcome = page.text_of("outcome");
    assert!(
        outcome.contains("MODIFIED") && outcome.contains("alice"),
        "{outcome}"
    );
    assert!(page.body.contains("class=\"payload-diff\""));
    let run = api
        .wait_for_status(&served, &third.run_id, "completed")
        .await;
    assert_eq!(run["outputs"]["act"]["shipped"], "B3");

    // History lists all three, newest first, with the diff for the edit.
    let history = alice.get("/ui/history").await;
    assert_eq!(history.status, 200);
    let keys: Vec<&str> = history
        .body
        .match_indices("tr class=\"approval\" data-key=\"")
        .map(|(i, m)| &history.body[i + m.len()..i + m.len() + 36])
        .collect();
    assert_eq!(
        keys,
        [third.key.as_str(), second.key.as_str(), first.key.as_str()]
    );
    let rejected = alice.get("/ui/history?status=REJECTED").await;
    assert!(rejected.body.contains(&second.key) && !rejected.body.contains(&first.key));
}

#[tokio::test]
async fn csrf_failures_and_non_approvers_change_nothing() {
    let spec = GATED_SPEC.replace("steps:\n", "approvals:\n  approvers: [alice]\nsteps:\n");
    let ws = Workspace::new(&spec);
    let served = start(&ws);
    let api = Api::with_token("tok-agent");
    let paused = api.pause(&served, json!({"order_id": "A1"})).await;
    let path = format!("/ui/approvals/{}", paused.key);
    let mut alice = Client::signed_in(&served, "tok-a").await;
    let page = alice.get(&path).await;
    let alices_csrf = page.csrf();

    let mut bob = Client::signed_in(&served, "tok-b").await;
    let bobs_page = bob.get(&path).await;
    let bobs_csrf = bobs_page.csrf();
    for csrf in [None, Some(""), Some("00"), Some(bobs_csrf.as_str())] {
        let mut fields = vec![("decision", "approve")];
        if let Some(csrf) = csrf {
            fields.push(("csrf", csrf));
        }
        let refused = alice.post(&path, &fields).await;
        assert_eq!(refused.status, 403, "{csrf:?}");
        assert!(refused.body.contains("id=\"forbidden\""));
        assert!(refused.body.contains("data-reason=\"csrf\""), "{csrf:?}");
    }
    assert_eq!(
        record(&api, &served, &paused.key).await["status"],
        "PENDING"
    );

    // Bob is signed in but not an approver.
    let refused = bob
        .post(&path, &[("decision", "approve"), ("csrf", &bobs_csrf)])
        .await;
    assert_eq!(refused.status, 403);
    assert!(refused.has_id("forbidden"));
    assert!(
        refused
            .body
            .contains("bob may not decide: not in approvals.approvers"),
        "{}",
        refused.body
    );
    assert!(!refused.body.contains("data-reason"));
    assert_eq!(
        record(&api, &served, &paused.key).await["status"],
        "PENDING"
    );

    let answer = alice
        .post(&path, &[("decision", "approve"), ("csrf", &alices_csrf)])
        .await;
    assert_eq!(answer.status, 303);
}

#[tokio::test]
async fn a_lost_race_says_who_won_and_a_repeat_shows_the_outcome() {
    let ws = Workspace::new(GATED_SPEC);
    let served = start(&ws);
    let api = Api::with_token("tok-b");
    let paused = Api::with_token("tok-agent")
        .pause(&served, json!({"order_id": "A1"}))
        .await;
    let path = format!("/ui/approvals/{}", paused.key);
    let mut alice = Client::signed_in(&served, "tok-a").await;
    let page = alice.get(&path).await;
    let csrf = page.csrf();
    let (status, body) = api
        .post(
            &served.url(&format!("/approvals/{}/reject", paused.key)),
            json!({}),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    let lost = alice
        .post(&path, &[("decision", "approve"), ("csrf", &csrf)])
        .await;
    assert_eq!(lost.status, 409);
    let text = lost.text_of("already-decided");
    assert!(text.contains("already decided by bob at "), "{text}");
    assert!(lost.text_of("outcome").contains("REJECTED"));

    // Bob repeating his own decision gets the outcome, not a conflict.
    let mut bob = Client::signed_in(&served, "tok-b").await;
    let page = bob.get(&path).await;
    let csrf = page.csrf();
    let repeat = bob
        .post(&path, &[("decision", "reject"), ("csrf", &csrf)])
        .await;
    assert_eq!(repeat.status, 303, "{}", repeat.body);
}

#[tokio::test]
async fn hostile_messages_payloads_and_reasons_are_escaped() {
    let hostile = r#"<script>alert(1)</script>"><img src=x onerror=alert(1)>"#;
    let ws = Workspace::new(GATED_SPEC);
    let served = start(&ws);
    let api = Api::with_token("tok-agent");
    let paused = api.pause(&served, json!({"order_id": hostile})).await;
    let mut alice = Client::signed_in(&served, "tok-a").await;
    let inbox = alice.get("/ui").await;
    let page = alice.get(&format!("/ui/approvals/{}", paused.key)).await;
    for (what, html) in [("inbox", &inbox.body), ("approval", &page.body)] {
        assert!(!html.contains("<script>alert"), "{what}:\n{html}");
        assert!(!html.contains("<img src=x"), "{what}:\n{html}");
        assert!(
            html.contains("&lt;script&gt;alert(1)&lt;"),
            "{what}:\n{html}"
        );
    }
    // Shown as text: message, payload table, raw JSON and the run's input.
    assert!(page.text_of("message").contains("alert(1)"));
    assert!(page.text_of("payload").contains("alert(1)"));
    let page = decide(
        &mut alice,
        &paused,
        &[("decision", "reject"), ("reason", hostile)],
    )
    .await;
    assert!(!page.body.contains("<img src=x"));
    assert!(page.text_of("outcome").contains("onerror=alert(1)"));
    let history = alice.get("/ui/history").await;
    assert!(!history.body.contains("<img src=x") && !history.body.contains("<script>alert"));
}

#[tokio::test]
async fn an_edit_that_does_not_fit_the_gate_is_shown_with_the_reason() {
    // A tool gate: the edited payload is the tool's arguments, an object.
    // The tool is never called here (the port is closed): nothing is approved.
    let url = format!(
        "http://127.0.0.1:{}/refunds",
        crate::common::http::closed_port()
    );
    let ws = Workspace::new(&crate::common::http::gated_post_spec(&url, ""));
    let served = start(&ws);
    let api = Api::with_token("tok-agent");
    let paused = api
        .pause(&served, json!({"order_id": "A1", "amount": 5}))
        .await;
    let mut alice = Client::signed_in(&served, "tok-a").await;
    let path = format!("/ui/approvals/{}", paused.key);
    let page = alice.get(&path).await;
    let csrf = page.csrf();
    let refused = alice
        .post(
            &path,
            &[
                ("decision", "modify"),
                ("payload", "[1, 2]"),
                ("csrf", &csrf),
            ],
        )
        .await;
    assert_eq!(refused.status, 422, "{}", refused.body);
    assert!(
        refused
            .text_of("payload-error")
            .contains("edited tool arguments must be a JSON object"),
        "{}",
        refused.body
    );
    assert_eq!(
        record(&api, &served, &paused.key).await["status"],
        "PENDING"
    );
}
