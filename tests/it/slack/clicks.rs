//! Clicks in Slack: the same click delivered five times at once decides
//! once, and the repeats are told their decision stands; a click that cannot decide (already resolved, not an approver,
//! expired) changes nothing and the clicker is told why, only them.

use crate::common;
use crate::common::server;
use crate::common::slack_stub;
use crate::common::stub_server;

use common::Workspace;
use serde_json::json;
use server::{Api, Paused, Served};
use slack_stub::*;
use stub_server::{Response, StubServer};

/// A served spec with Slack, paused on one order with its message posted:
/// the stubs (the tool, Slack's API, Slack's response_url), the server and
/// the pause. `edit` changes the spec text first.
struct Posted {
    tool: StubServer,
    slack: StubServer,
    replies: StubServer,
    _ws: Workspace,
    db: std::path::PathBuf,
    api: Api,
    served: Served,
    run_id: String,
    key: String,
}

async fn posted(order: &str, edit: impl FnOnce(String) -> String) -> Posted {
    let tool = StubServer::start(|_| Response::json(200, json!({"id": "rf_1"})));
    let slack = start_api();
    let replies = StubServer::start(|_| Response::text(200, "ok"));
    let ws = Workspace::new(&edit(spec(&tool.url(""))));
    let db = ws.path().join("state.db");
    let env = env(slack.port);
    let api = Api::new();
    let served = Served::start(&ws.spec, &db, &env_refs(&env), &[]);
    let Paused { run_id, key } = api
        .trigger_and_wait_for_pause(&served, "/runs", json!({ "input": { "order_id": order } }))
        .await;
    eventually(15, "the message posted", || stored_message(&db, &key)).await;
    Posted {
        tool,
        slack,
        replies,
        _ws: ws,
        db,
        api,
        served,
        run_id,
        key,
    }
}

fn ephemeral_texts(replies: &StubServer) -> Vec<String> {
    replies
        .requests_to("/respond")
        .iter()
        .map(|r| {
            let body = r.json();
            assert_eq!(body["response_type"], "ephemeral", "{body}");
            assert_eq!(body["replace_original"], false, "{body}");
            body["text"].as_str().unwrap_or("").to_string()
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn the_same_click_five_times_at_once_decides_once() {
    let Posted {
        tool,
        slack,
        replies,
        db,
        api,
        served,
        run_id,
        key,
        _ws,
    } = posted("D-4", |text| text).await;

    let http = reqwest::Client::new();
    let body = click_body(&key, "tollgate_approve", USER, &replies.url("/respond"));
    let clicks: Vec<_> = (0..5)
        .map(|_| {
            let (http, base, body) = (http.clone(), served.base.clone(), body.clone());
            tokio::spawn(async move { send_click(&http, &base, body).await })
        })
        .collect();
    for click in clicks {
        let (status, text) = click.await.expect("click task");
        assert_eq!(status, 200, "every click is answered 200: {text}");
    }

    api.wait_for_status(&served, &run_id, "completed").await;
    eventually(15, "four ephemeral replies", || {
        (replies.requests_to("/respond").len() >= 4).then_some(())
    })
    .await;
    eventually(15, "the message updated", || {
        decision_posted(&db, &key).then_some(())
    })
    .await;
    // No waiting for a stray second update: one decision (checked below,
    // from the store) means one settle, and the message's decision is
    // recorded only after that settle's update succeeded. Any other settle
    // (a repair pass) finds it recorded and leaves the message alone. So
    // the counts are final once `decision_posted` is set.
    assert_eq!(tool.requests_to("/refunds").len(), 1, "one side effect");
    assert_eq!(slack.requests_to(UPDATE_PATH).len(), 1, "one chat.update");
    let texts = ephemeral_texts(&replies);
    assert_eq!(texts.len(), 4, "the four repeats are told: {texts:?}");
    for text in &texts {
        // The same person's same decision: a repeat, not a conflict.
        assert!(text.contains("already approved"), "{text}");
        assert!(text.contains("your decision stands"), "{text}");
        assert!(!text.contains("already resolved"), "{text}");
        assert!(text.contains(&format!("slack:{USER}")), "says who: {text}");
    }
    let events = common::open_store(&db)
        .run_events(&run_id, 0)
        .await
        .expect("events");
    let resolved = events
        .iter()
        .filter(|e| e.kind.name() == "approval_resolved")
        .count();
    assert_eq!(resolved, 1, "one decision");
}

#[tokio::test(flavor = "multi_thread")]
async fn only_listed_approvers_decide_from_slack() {
    let Posted {
        tool,
        slack: _slack,
        replies,
        db: _db,
        api,
        served,
        run_id,
        key,
        _ws,
    } = posted("E-5", |text| {
        text.replace(
            "approvals:\n",
            "approvals:\n  approvers: [\"slack:U0APPROVER\"]\n",
        )
    })
    .await;
    let http = reqwest::Client::new();

    let outsider = click_body(&key, "tollgate_approve", USER, &replies.url("/respond"));
    let (status, _) = send_click(&http, &served.base, outsider).await;
    assert_eq!(status, 200);
    eventually(15, "the outsider told", || {
        (!replies.requests().is_empty()).then_some(())
    })
    .await;
    let texts = ephemeral_texts(&replies);
    assert!(texts[0].contains("not allowed"), "{texts:?}");
    let (_, record) = api.get(&served.url(&format!("/approvals/{key}"))).await;
    assert_eq!(record["status"], "PENDING");

    let approver = click_body(
        &key,
        "tollgate_reject",
        "U0APPROVER",
        &replies.url("/respond"),
    );
    let (status, _) = send_click(&http, &served.base, approver).await;
    assert_eq!(status, 200);
    api.wait_for_status(&served, &run_id, "rejected").await;
    let (_, record) = api.get(&served.url(&format!("/approvals/{key}"))).await;
    assert_eq!(record["decided_by"], "slack:U0APPROVER");
    assert!(tool.requests().is_empty());
}

#[tokio::test(flavor = "multi_thread")]
async fn a_click_on_an_expired_approval_is_refused_and_the_message_says_expired() {
    let slack = start_api();
    let replies = StubServer::start(|_| Response::text(200, "ok"));
    let tool = StubServer::start(|_| Response::json(200, json!({"id": "rf_1"})));
    let text = spec(&tool.url("")).replace("approvals:\n", "approvals:\n  ttl: 1h\n");
    let ws = Workspace::new(&text);
    let db = ws.path().join("state.db");
    let env = env(slack.port);
    let api = Api::new();
    let mut served = Served::start(&ws.spec, &db, &env_refs(&env), &[]);
    // Answered only after the startup sweep and repair: what follows is
    // the server's to find later.
    assert_eq!(api.get(&served.url("/approvals")).await.0, 200);
    // Paused two hours ago with a one-hour TTL (through the library, on a
    // clock set back), its message posted then: what the server stores
    // when it posts, written as it would have been. No TTL is waited out.
    let clock = common::hours_ago(2);
    let paused_at = tollgate_runtime::time::Clock::now(&*clock);
    let key = ws
        .pause_run_in(&db, json!({"order_id": "F-6"}), clock)
        .await
        .key;
    let notifications = common::open_store(&db)
        .notifications()
        .expect("notifications");
    notifications
        .record_notification(
            &key,
            &tollgate_runtime::store::NotificationWrite::Posted {
                channel: CHANNEL_ID.into(),
                ts: "1700000000.000001".into(),
                at: paused_at,
            },
        )
        .await
        .expect("record the post");
    assert!(stored_message(&db, &key).is_some());

    let http = reqwest::Client::new();
    let click = click_body(&key, "tollgate_approve", USER, &replies.url("/respond"));
    let (status, _) = send_click(&http, &served.base, click).await;
    assert_eq!(status, 200);
    eventually(15, "the clicker told", || {
        (!replies.requests().is_empty()).then_some(())
    })
    .await;
    assert!(ephemeral_texts(&replies)[0].contains("expired"));

    // The expiry sweep (at startup, then periodically) settles the message.
    served.kill();
    let _served = Served::start(&ws.spec, &db, &env_refs(&env), &[]);
    eventually(15, "the message updated", || {
        decision_posted(&db, &key).then_some(())
    })
    .await;
    let update = slack.requests_to(UPDATE_PATH)[0].json();
    assert!(update.to_string().contains("Expired"), "{update}");
    assert!(tool.requests().is_empty());
}

#[tokio::test(flavor = "multi_thread")]
async fn a_repeated_click_is_told_it_stands_another_decision_is_already_resolved() {
    let Posted {
        tool,
        slack: _slack,
        replies,
        db,
        api,
        served,
        run_id,
        key,
        _ws,
    } = posted("R-1", |text| text).await;
    let http = reqwest::Client::new();
    let respond = replies.url("/respond");

    let first = click_body(&key, "tollgate_approve", USER, &respond);
    assert_eq!(send_click(&http, &served.base, first.clone()).await.0, 200);
    api.wait_for_status(&served, &run_id, "completed").await;
    assert!(replies.requests().is_empty(), "the winner gets no reply");

    // The same click again (Slack retried, or a double click).
    assert_eq!(send_click(&http, &served.base, first).await.0, 200);
    eventually(15, "the repeat told", || {
        (replies.requests_to("/respond").len() == 1).then_some(())
    })
    .await;
    // The same person, another decision; then another person.
    let reject = click_body(&key, "tollgate_reject", USER, &respond);
    assert_eq!(send_click(&http, &served.base, reject).await.0, 200);
    eventually(15, "the reject told", || {
        (replies.requests_to("/respond").len() == 2).then_some(())
    })
    .await;
    let other = click_body(&key, "tollgate_approve", "U0SOMEONEELSE", &respond);
    assert_eq!(send_click(&http, &served.base, other).await.0, 200);
    eventually(15, "the other person told", || {
        (replies.requests_to("/respond").len() == 3).then_some(())
    })
    .await;

    let texts = ephemeral_texts(&replies);
    assert!(
        texts[0].contains("already approved") && texts[0].contains("your decision stands"),
        "{texts:?}"
    );
    for text in &texts[1..] {
        assert!(text.contains("already resolved"), "{texts:?}");
    }
    assert_eq!(tool.requests_to("/refunds").len(), 1, "one side effect");
    let events = common::open_store(&db)
        .run_events(&run_id, 0)
        .await
        .expect("events");
    let resolved = events
        .iter()
        .filter(|e| e.kind.name() == "approval_resolved")
        .count();
    assert_eq!(resolved, 1, "one decision");
}

/// A gate with a form (DESIGN §13) before the refund's: a button cannot
/// fill it in. `form` is the form's schema.
fn with_form(form: &str) -> impl FnOnce(String) -> String {
    let step = format!(
        "steps:\n  - id: details\n    approval:\n      message: \"Details for {{{{ input.order_id }}}}?\"\n      form: {form}\n"
    );
    move |text: String| text.replace("steps:\n", &step)
}

#[tokio::test(flavor = "multi_thread")]
async fn approve_in_slack_on_a_form_with_required_fields_says_where_to_give_them() {
    let Posted {
        tool,
        slack: _slack,
        replies,
        db: _db,
        api,
        served,
        run_id: _,
        key,
        _ws,
    } = posted(
        "F-6",
        with_form("{ type: object, properties: { note: { type: string } }, required: [note] }"),
    )
    .await;
    let http = reqwest::Client::new();
    let click = click_body(&key, "tollgate_approve", USER, &replies.url("/respond"));
    let (status, _) = send_click(&http, &served.base, click).await;
    assert_eq!(status, 200);
    eventually(15, "the clicker told", || {
        (!replies.requests().is_empty()).then_some(())
    })
    .await;
    let texts = ephemeral_texts(&replies);
    assert!(
        texts[0].contains("asks for input a button cannot give (/note: is required)")
            && texts[0].contains(&format!("/ui/approvals/{key}")),
        "{texts:?}"
    );
    let (_, record) = api.get(&served.url(&format!("/approvals/{key}"))).await;
    assert_eq!(record["status"], "PENDING", "nothing recorded: {record}");
    let (_, ledger) = api
        .get(&served.url(&format!("/approvals/{key}/votes")))
        .await;
    assert_eq!(ledger["votes"], json!([]), "{ledger}");
    assert!(tool.requests().is_empty());
}

#[tokio::test(flavor = "multi_thread")]
async fn approve_in_slack_on_a_form_without_required_fields_gives_its_defaults() {
    let Posted {
        tool: _tool,
        slack: _slack,
        replies,
        db: _db,
        api,
        served,
        run_id,
        key,
        _ws,
    } = posted(
        "G-7",
        with_form("{ type: object, properties: { note: { type: string }, rush: { type: boolean, default: false } } }"),
    )
    .await;
    let http = reqwest::Client::new();
    let click = click_body(&key, "tollgate_approve", USER, &replies.url("/respond"));
    let (status, _) = send_click(&http, &served.base, click).await;
    assert_eq!(status, 200);
    // The click's claim is made before Slack is answered.
    let (_, record) = api.get(&served.url(&format!("/approvals/{key}"))).await;
    assert_eq!(record["status"], "APPROVED", "{record}");
    assert_eq!(
        record["decision_data"]["input"],
        json!({ "rush": false }),
        "{record}"
    );
    assert!(ephemeral_texts(&replies).is_empty());
    // The run goes on to the refund's own gate, the input in its output.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(15);
    loop {
        let (_, run) = api.get(&served.url(&format!("/runs/{run_id}"))).await;
        if run["outputs"]["details"].is_object() {
            assert_eq!(
                run["outputs"]["details"]["input"],
                json!({ "rush": false }),
                "{run}"
            );
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the run did not go on: {run}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}
