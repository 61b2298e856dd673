//! The outbox end to end: a real `tollgate serve` pauses and decides, its
//! delivery worker sends the notices to a real receiver that verifies
//! them with the official Standard Webhooks library, and the store says
//! what became of each. Failures are retried with the same id, a 410
//! disables the endpoint, and two servers on one store send each notice
//! once.

use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tollgate_runtime::notices::NoticeStatus;
use tollgate_runtime::store::NoticeQuery;

use super::webhook::{Receiver, SECRET};
use crate::common::Workspace;
use crate::common::server::{Api, Served};

const SPEC: &str = r#"version: 1
agent: refunds
approvals:
  notify:
    webhooks:
      - url: "${HOOK_URL}"
        secret: "${HOOK_SECRET}"
steps:
  - id: refund
    approval:
      message: "Refund {{ input.amount }} EUR?"
      payload: { amount: "{{ input.amount }}" }
"#;

fn served(ws: &Workspace, receiver: &Receiver, extra_env: &[(&str, &str)]) -> Served {
    let url = receiver.url();
    let mut env = vec![("HOOK_URL", url.as_str()), ("HOOK_SECRET", SECRET)];
    env.extend_from_slice(extra_env);
    Served::start(
        &ws.spec,
        &ws.state_db(),
        &env,
        &["--notify-retry-window", "60s"],
    )
}

/// Wait up to 30 s for `done` over the receiver's requests.
fn wait_for(receiver: &Receiver, what: &str, done: impl Fn(&[Value]) -> bool) -> Vec<Value> {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let requests = receiver.requests();
        if done(&requests) {
            return requests;
        }
        assert!(
            Instant::now() < deadline,
            "timed out waiting for {what}; the receiver saw {requests:#?}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn verified(requests: &[Value]) -> Vec<&Value> {
    requests
        .iter()
        .filter(|r| r["verified"] == json!(true))
        .collect()
}

fn body_of(request: &Value) -> Value {
    let body = request["body"].as_str().expect("body text");
    serde_json::from_str(body).expect("a JSON body")
}

/// Every notice the store holds, newest first.
async fn notices(ws: &Workspace) -> Vec<tollgate_runtime::store::OutboxNotice> {
    let store = tollgate_runtime::store::open_async(
        ws.state_db().to_str().expect("utf-8"),
        Default::default(),
    )
    .await
    .expect("open the store");
    store
        .list_notices(&NoticeQuery {
            limit: 500,
            ..NoticeQuery::default()
        })
        .await
        .expect("list notices")
}

/// The store's notices (newest first) once `done` holds for them, within
/// `within`; fails naming `what` otherwise.
async fn stored_when(
    ws: &Workspace,
    what: &str,
    within: Duration,
    done: impl Fn(&[tollgate_runtime::store::OutboxNotice]) -> bool,
) -> Vec<tollgate_runtime::store::OutboxNotice> {
    let deadline = Instant::now() + within;
    loop {
        let stored = notices(ws).await;
        if done(&stored) {
            return stored;
        }
        assert!(Instant::now() < deadline, "{what}: {stored:#?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_pause_and_its_decision_reach_the_webhook_signed_once_each() {
    let ws = Workspace::new(SPEC);
    let receiver = Receiver::start(&[]);
    let served = served(&ws, &receiver, &[]);
    let api = Api::new();
    let paused = api.pause(&served, json!({"amount": 30})).await;
    let requested = wait_for(&receiver, "the request's notice", |r| {
        verified(r).len() == 1
    });
    let body = body_of(verified(&requested)[0]);
    assert_eq!(body["type"], "approval.requested");
    assert_eq!(body["data"]["key"], paused.key.as_str());
    assert_eq!(body["data"]["message"], "Refund 30 EUR?");
    assert_eq!(body["data"]["status"], "PENDING");
    assert!(
        body["data"]["payload_digest"]
            .as_str()
            .is_some_and(|d| d.starts_with("sha256:")),
        "{body}"
    );
    assert!(body["data"].get("link").is_none(), "links are off: {body}");

    let (status, _) = api
        .post(
            &served.url(&format!("/approvals/{}/approve", paused.key)),
            json!({"reason": "fine"}),
        )
        .await;
    assert_eq!(status, 200);
    let both = wait_for(&receiver, "the decision's notice", |r| {
        verified(r).len() == 2
    });
    let decided = body_of(verified(&both)[1]);
    assert_eq!(decided["type"], "approval.approved");
    assert_eq!(decided["data"]["status"], "APPROVED");
    assert_eq!(decided["data"]["reason"], "fine");
    let ids: Vec<&str> = both.iter().map(|r| r["id"].as_str().expect("id")).collect();
    assert_ne!(ids[0], ids[1], "each notice has its own id");
    assert_eq!(both.len(), 2, "nothing sent twice: {both:#?}");

    // The store says both were sent, once each.
    let stored = stored_when(&ws, "not recorded as sent", Duration::from_secs(10), |s| {
        s.len() == 2 && s.iter().all(|n| n.status == NoticeStatus::Sent)
    })
    .await;
    assert!(stored.iter().all(|n| n.attempts == 1));
    let mut stored_ids: Vec<&str> = stored.iter().map(|n| n.notice.id.as_str()).collect();
    stored_ids.sort();
    let mut sent_ids = ids.clone();
    sent_ids.sort();
    assert_eq!(stored_ids, sent_ids, "the webhook-id is the notice's id");
    let url = receiver.url();
    let rows = format!("{:?}", notices(&ws).await);
    assert!(!rows.contains(SECRET), "no secret in the outbox");
    assert!(!rows.contains(&url), "no resolved URL in the outbox");
    assert!(!served.logs().contains(SECRET), "no secret in the logs");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_receiver_that_fails_then_recovers_gets_the_notice_again_with_the_same_id() {
    let ws = Workspace::new(SPEC);
    let receiver = Receiver::start(&["--fail-first", "2"]);
    let served = served(&ws, &receiver, &[]);
    Api::new().pause(&served, json!({"amount": 5})).await;
    let requests = wait_for(&receiver, "a delivery after two failures", |r| {
        !verified(r).is_empty() && r.len() >= 3
    });
    let ids: Vec<&str> = requests
        .iter()
        .map(|r| r["id"].as_str().expect("id"))
        .collect();
    assert_eq!(
        ids.len(),
        3,
        "two failures, then one delivery: {requests:#?}"
    );
    assert!(
        ids.iter().all(|id| *id == ids[0]),
        "one id across retries: {ids:?}"
    );
    let deduplicated: std::collections::HashSet<&str> = ids.iter().copied().collect();
    assert_eq!(
        deduplicated.len(),
        1,
        "a receiver de-duplicating on it keeps one"
    );
    let stored = stored_when(&ws, "not recorded as sent", Duration::from_secs(10), |s| {
        s[0].status == NoticeStatus::Sent
    })
    .await;
    assert_eq!(stored[0].attempts, 3);
    assert!(
        served.logs().contains("notification failed; will retry"),
        "{}",
        served.logs()
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_410_disables_the_endpoint_and_its_later_notices_are_dead_unsent() {
    let ws = Workspace::new(SPEC);
    let receiver = Receiver::start(&["--mode", "gone"]);
    let served = served(&ws, &receiver, &[]);
    let api = Api::new();
    let paused = api.pause(&served, json!({"amount": 5})).await;
    wait_for(&receiver, "the first notice", |r| r.len() == 1);
    let (status, _) = api
        .post(
            &served.url(&format!("/approvals/{}/reject", paused.key)),
            json!({"reason": "no"}),
        )
        .await;
    assert_eq!(status, 200);
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let stored = notices(&ws).await;
        if stored.len() == 2 && stored.iter().all(|n| n.status == NoticeStatus::Dead) {
            let rejected = &stored[0];
            assert!(
                rejected
                    .last_error
                    .as_deref()
                    .is_some_and(|e| e.contains("disabled")),
                "{rejected:?}"
            );
            break;
        }
        assert!(Instant::now() < deadline, "not dead: {stored:#?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(
        receiver.requests().len(),
        1,
        "nothing more sent to a gone endpoint"
    );
    assert!(served.logs().contains("410 Gone"), "{}", served.logs());
    assert!(
        served.logs().contains("notification dead"),
        "{}",
        served.logs()
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn two_servers_on_one_store_send_each_notice_once() {
    let ws = Workspace::new(SPEC);
    let receiver = Receiver::start(&[]);
    let first = served(&ws, &receiver, &[]);
    let second = served(&ws, &receiver, &[]);
    let api = Api::new();
    let mut keys = Vec::new();
    for amount in 0..8 {
        let server = if amount % 2 == 0 { &first } else { &second };
        keys.push(api.pause(server, json!({"amount": amount})).await.key);
    }
    for (i, key) in keys.iter().enumerate() {
        let server = if i % 2 == 0 { &second } else { &first };
        let (status, _) = api
            .post(&server.url(&format!("/approvals/{key}/approve")), json!({}))
            .await;
        assert_eq!(status, 200);
    }
    let requests = wait_for(&receiver, "16 notices", |r| verified(r).len() >= 16);
    // A moment more, for any duplicate on its way.
    std::thread::sleep(Duration::from_secs(2));
    let requests = if receiver.requests().len() > requests.len() {
        receiver.requests()
    } else {
        requests
    };
    let ids: Vec<&str> = requests
        .iter()
        .map(|r| r["id"].as_str().expect("id"))
        .collect();
    let unique: std::collections::HashSet<&str> = ids.iter().copied().collect();
    assert_eq!(ids.len(), 16, "each notice sent once: {ids:?}");
    assert_eq!(unique.len(), 16);
}

/// A server killed (SIGKILL) while a notice is on its way loses nothing:
/// once its lease runs out, the next server sends the notice again, with
/// the same id, and records it sent.
#[tokio::test(flavor = "multi_thread")]
async fn a_server_killed_mid_send_leaves_the_notice_to_the_next_with_the_same_id() {
    let ws = Workspace::new(SPEC);
    let receiver = Receiver::start(&["--hang-first", "1"]);
    let mut first = served(&ws, &receiver, &[]);
    Api::new().pause(&first, json!({"amount": 7})).await;
    let hung = wait_for(&receiver, "the first attempt", |r| r.len() == 1);
    first.kill();
    let second = served(&ws, &receiver, &[]);
    let lease = tollgate_runtime::notify::outbox::LEASE;
    let deadline = Instant::now() + lease + Duration::from_secs(30);
    let both = loop {
        let requests = receiver.requests();
        if requests.len() >= 2 {
            break requests;
        }
        assert!(Instant::now() < deadline, "never sent again: {requests:#?}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert_eq!(
        both[1]["id"], hung[0]["id"],
        "a duplicate carries the same id"
    );
    assert_eq!(both[1]["verified"], json!(true));
    stored_when(&ws, "not recorded as sent", Duration::from_secs(10), |s| {
        s.len() == 1 && s[0].status == NoticeStatus::Sent
    })
    .await;
    drop(second);
}

const MAIL_SPEC: &str = r#"version: 1
agent: refunds
approvals:
  approvers: [alice, bob]
  notify:
    email:
      smtp_url: "${SMTP_URL}"
      from: "Tollgate <tollgate@example.com>"
      to: { alice: alice@example.com, zed: zed@example.com }
steps:
  - id: refund
    approval:
      message: "Refund {{ input.amount }} EUR?"
      payload: { amount: "{{ input.amount }}" }
"#;

/// A pause mails each decider mail reaches, through a real SMTP server,
/// with a link bound to them that opens the approval; nobody who may not
/// decide gets mail, and no secret is in it.
#[tokio::test(flavor = "multi_thread")]
async fn a_pause_mails_each_decider_a_link_bound_to_them() {
    let ws = Workspace::new(MAIL_SPEC);
    let port = super::email::free_port();
    let smtp = super::email::SmtpServer::plain(port);
    let smtp_url = format!("smtp://127.0.0.1:{port}?tls=none");
    let link_secret = "a-link-secret-of-at-least-32-characters!!";
    let served = Served::start(
        &ws.spec,
        &ws.state_db(),
        &[
            ("SMTP_URL", smtp_url.as_str()),
            ("TOLLGATE_LINK_SECRET", link_secret),
            ("TOLLGATE_PUBLIC_URL", "http://approvals.example"),
        ],
        &["--notify-retry-window", "60s"],
    );
    let paused = Api::new().pause(&served, json!({"amount": 12})).await;
    let deadline = Instant::now() + Duration::from_secs(30);
    let saved = loop {
        let saved = smtp.saved();
        if !saved.is_empty() {
            break saved;
        }
        assert!(Instant::now() < deadline, "no mail arrived");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    std::thread::sleep(Duration::from_secs(2));
    let saved = if smtp.saved().len() > saved.len() {
        smtp.saved()
    } else {
        saved
    };
    assert_eq!(
        saved.len(),
        1,
        "alice only: bob has no address, zed may not decide"
    );
    let mail = &saved[0];
    assert_eq!(mail["rcpt_tos"], json!(["alice@example.com"]));
    let raw = mail["raw"].as_str().expect("raw");
    assert!(!raw.contains(link_secret));
    let text = mail["parts"]
        .as_array()
        .expect("parts")
        .iter()
        .find(|p| p["content_type"] == "text/plain")
        .and_then(|p| p["content"].as_str())
        .expect("a text part")
        .to_string();
    assert!(text.contains("Refund 12 EUR?"), "{text}");
    let start = text.find("http://approvals.example/a/").expect("a link");
    let link: String = text[start..]
        .chars()
        .take_while(|c| !c.is_whitespace())
        .collect();
    assert!(link.contains(&paused.key), "{link}");
    assert!(link.ends_with("?as=alice"), "bound to alice: {link}");
    // The link works on the server: its page shows the approval.
    let path = link.trim_start_matches("http://approvals.example");
    let page = reqwest::get(served.url(path)).await.expect("open the link");
    assert_eq!(page.status().as_u16(), 200);
    let html = page.text().await.expect("page");
    assert!(html.contains("Refund 12 EUR?"), "{html}");
}
