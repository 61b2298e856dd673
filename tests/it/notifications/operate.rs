//! Operating the outbox (DESIGN §14): `tollgate notifications list|retry`
//! on a real SQLite file, and /notifications, its retries and the outbox's
//! metrics on a real `tollgate serve`, each answer held to the OpenAPI
//! document the server serves.
//!
//! Notices are made as a server makes them: runs of a spec whose
//! `approvals.notify` names a webhook pause through the runtime (each
//! pause writes its `approval.requested` notice in its transaction); then
//! a lease and a settle, as a delivery worker would, leave one failed, one
//! dead and one sent, and one pending.

use crate::common;
use crate::common::server;

use chrono::{TimeDelta, Utc};
use common::{Workspace, assert_exit, assert_success, stderr, stdout};
use serde_json::{Value, json};
use server::{Api, Served, code};
use tollgate_runtime::server::openapi::schema_errors;
use tollgate_runtime::store::NoticeWrite;

const SPEC: &str = r#"version: 1
agent: notify-desk
approvals:
  notify:
    webhooks:
      - url: ${HOOK_OPS}
        secret: ${HOOK_OPS_SECRET}
steps:
  - id: gate
    approval:
      message: "Ship {{ input.order }}?"
"#;

/// What the webhook reference resolves to: it must never be printed.
const HOOK_VALUE: &str = "https://hooks.example/in?token=never-printed-5150";
const TOKEN: &str = "ops-token-notices";

/// The approval keys of the four notices, by what became of them.
struct Outbox {
    failed: String,
    dead: String,
    sent: String,
    pending: String,
}

/// Four pauses, oldest first: failed, dead, sent, pending.
async fn four_notices(ws: &Workspace) -> Outbox {
    let clock = tollgate_runtime::time::system();
    let mut keys = Vec::new();
    for order in ["A1", "A2", "A3", "A4"] {
        let record = ws
            .pause_run_with_clock(json!({ "order": order }), clock.clone())
            .await;
        keys.push(record.key);
    }
    let store = common::open_store(&ws.state_db());
    let now = Utc::now();
    // The oldest three, as a worker takes them (oldest due first); the
    // fourth stays pending.
    let leased = store
        .lease_notices("test-worker", now, now + TimeDelta::minutes(5), 3)
        .await
        .expect("lease");
    let mut leased_keys: Vec<&str> = leased.iter().map(|n| n.notice.key.as_str()).collect();
    leased_keys.sort();
    let mut oldest: Vec<&str> = keys[..3].iter().map(String::as_str).collect();
    oldest.sort();
    assert_eq!(leased_keys, oldest, "one notice per pause, oldest first");
    let id_of = |key: &str| {
        leased
            .iter()
            .find(|n| n.notice.key == key)
            .map(|n| n.notice.id.clone())
            .unwrap_or_else(|| panic!("no notice of {key}"))
    };
    let writes = [
        NoticeWrite::Failed {
            error: "HTTP 503 from the endpoint".into(),
            next_at: now + TimeDelta::hours(1),
        },
        NoticeWrite::Dead {
            error: "HTTP 500 for the whole retry window".into(),
            at: now,
        },
        NoticeWrite::Sent { at: now },
    ];
    for (key, write) in keys.iter().zip(writes.iter()) {
        assert!(
            store
                .settle_notice(&id_of(key), "test-worker", write)
                .await
                .expect("settle"),
            "the worker holds the lease"
        );
    }
    // The fourth stays pending: leased for a day by a worker elsewhere, so
    // the delivery worker of the server under test leaves it alone.
    let held = store
        .lease_notices("elsewhere", now, now + TimeDelta::days(1), 1)
        .await
        .expect("lease");
    assert_eq!(held.len(), 1, "the pending notice");
    Outbox {
        failed: keys[0].clone(),
        dead: keys[1].clone(),
        sent: keys[2].clone(),
        pending: keys[3].clone(),
    }
}

fn notifications(ws: &Workspace, args: &[&str]) -> std::process::Output {
    ws.tollgate()
        .env("HOOK_OPS", HOOK_VALUE)
        .args(["notifications"])
        .args(args)
        .args(["--spec", ws.spec_arg()])
        .output()
        .expect("run tollgate")
}

fn listed(ws: &Workspace, args: &[&str]) -> Vec<Value> {
    let mut all = vec!["list", "--json"];
    all.extend_from_slice(args);
    let out = notifications(ws, &all);
    assert_success(&out);
    let value: Value = serde_json::from_str(&stdout(&out)).expect("JSON");
    value["notifications"].as_array().expect("list").clone()
}

fn keys_of(rows: &[Value]) -> Vec<String> {
    rows.iter()
        .map(|n| n["key"].as_str().expect("key").to_string())
        .collect()
}

fn id_of(rows: &[Value], key: &str) -> String {
    rows.iter()
        .find(|n| n["key"] == key)
        .and_then(|n| n["id"].as_str())
        .unwrap_or_else(|| panic!("no notice of {key} in {rows:?}"))
        .to_string()
}

#[tokio::test(flavor = "multi_thread")]
async fn the_cli_lists_the_outbox_newest_first_and_retries_failed_and_dead_notices() {
    let ws = Workspace::new(SPEC);
    let outbox = four_notices(&ws).await;

    // Newest first, every status; the table names each column and never
    // the webhook's resolved URL.
    let all = listed(&ws, &[]);
    assert_eq!(
        keys_of(&all),
        [
            outbox.pending.as_str(),
            outbox.sent.as_str(),
            outbox.dead.as_str(),
            outbox.failed.as_str()
        ]
    );
    let out = notifications(&ws, &["list"]);
    assert_success(&out);
    let table = stdout(&out);
    let header = table.lines().next().expect("header");
    for column in [
        "ID",
        "CREATED",
        "EVENT",
        "CHANNEL",
        "TARGET",
        "STATUS",
        "ATTEMPTS",
        "NEXT/SENT",
        "LAST ERROR",
    ] {
        assert!(header.contains(column), "{column} in {header:?}");
    }
    let dead_line = table
        .lines()
        .find(|l| l.contains(&id_of(&all, &outbox.dead)))
        .expect("the dead notice's line");
    for part in [
        "approval.requested",
        "webhook",
        "${HOOK_OPS}",
        "dead",
        "HTTP 500 for the whole retry window",
    ] {
        assert!(dead_line.contains(part), "{part} in {dead_line:?}");
    }
    assert!(
        !table.contains("never-printed")
            && !stdout(&notifications(&ws, &["list", "--json"])).contains("never-printed"),
        "the reference is printed as written, never resolved:\n{table}"
    );

    // Filters: repeated statuses, the approval's key, the channel, a limit.
    let stuck = listed(&ws, &["--status", "failed", "--status", "dead"]);
    assert_eq!(
        keys_of(&stuck),
        [outbox.dead.as_str(), outbox.failed.as_str()]
    );
    assert_eq!(stuck[1]["attempts"], 1);
    assert_eq!(stuck[1]["last_error"], "HTTP 503 from the endpoint");
    assert_eq!(stuck[1]["target"], "${HOOK_OPS}");
    assert_eq!(
        keys_of(&listed(&ws, &["--key", &outbox.sent])),
        [outbox.sent.as_str()]
    );
    assert!(listed(&ws, &["--channel", "email"]).is_empty());
    assert_eq!(listed(&ws, &["--channel", "webhook"]).len(), 4);
    assert_eq!(
        keys_of(&listed(&ws, &["--limit", "2"])),
        [outbox.pending.as_str(), outbox.sent.as_str()]
    );
    let sent = listed(&ws, &["--status", "sent"]);
    assert!(sent[0]["sent_at"].is_string(), "{:?}", sent[0]);
    let bad = notifications(&ws, &["list", "--status", "lost"]);
    assert_exit(&bad, 2);
    assert!(
        stderr(&bad).contains("not a notice status"),
        "{}",
        stderr(&bad)
    );

    // Retry one failed notice: due now, pending again.
    let failed_id = id_of(&all, &outbox.failed);
    let out = notifications(&ws, &["retry", &failed_id]);
    assert_success(&out);
    assert!(stdout(&out).contains("is due again"), "{}", stdout(&out));
    let again = listed(&ws, &["--key", &outbox.failed]);
    assert_eq!(again[0]["status"], "pending");

    // Refusals: an unknown id is "not found" (3), a pending or sent
    // notice a conflict (4), each saying why.
    let out = notifications(&ws, &["retry", "no-such-notice"]);
    assert_exit(&out, 3);
    assert!(
        stderr(&out).contains("no notice with id no-such-notice"),
        "{}",
        stderr(&out)
    );
    let out = notifications(&ws, &["retry", &id_of(&all, &outbox.sent)]);
    assert_exit(&out, 4);
    assert!(
        stderr(&out).contains("is sent: only a failed or dead notice can be retried"),
        "{}",
        stderr(&out)
    );
    let out = notifications(&ws, &["retry", &id_of(&all, &outbox.pending)]);
    assert_exit(&out, 4);
    let out = notifications(&ws, &["retry"]);
    assert_exit(&out, 2);

    // Every dead notice: one here, then none.
    let out = notifications(&ws, &["retry", "--all-dead"]);
    assert_success(&out);
    assert_eq!(stdout(&out).trim(), "retried 1 dead notice: due again now");
    assert_eq!(
        listed(&ws, &["--key", &outbox.dead])[0]["status"],
        "pending"
    );
    let out = notifications(&ws, &["retry", "--all-dead", "--json"]);
    assert_success(&out);
    let answer: Value = serde_json::from_str(&stdout(&out)).expect("JSON");
    assert_eq!(answer, json!({ "retried": 0 }));

    // A place with no store: exit 3, nothing created.
    let empty = tempfile::tempdir().expect("dir");
    let nowhere = empty.path().join("state.db");
    let out = ws
        .tollgate()
        .args(["notifications", "list", "--state"])
        .arg(&nowhere)
        .output()
        .expect("run");
    assert_exit(&out, 3);
    assert!(!nowhere.exists());
}

/// A served spec with tokens on, and its OpenAPI document. Its webhook
/// endpoint accepts connections and never answers, so a notice the
/// server's worker takes stays in flight (pending) for the whole test:
/// the statuses the test set stay as it set them.
struct Live {
    ws: Workspace,
    served: Served,
    api: Api,
    document: Value,
    _silent_endpoint: std::net::TcpListener,
}

impl Live {
    async fn start(ws: Workspace) -> Live {
        let silent = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let hook = format!(
            "http://{}/silent",
            silent.local_addr().expect("local address")
        );
        let served = Served::start(
            &ws.spec,
            &ws.state_db(),
            &[
                ("TOLLGATE_API_TOKENS", &format!("ops:{TOKEN}")),
                ("HOOK_OPS", &hook),
                ("HOOK_OPS_SECRET", "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"),
            ],
            &[],
        );
        let (status, document) = Api::new().get(&served.url("/openapi.json")).await;
        assert_eq!(status, 200);
        Live {
            ws,
            served,
            api: Api::with_token(TOKEN),
            document,
            _silent_endpoint: silent,
        }
    }

    async fn get(&self, path: &str, template: &str) -> (u16, Value) {
        let answer = self.api.get(&self.served.url(path)).await;
        self.holds("get", template, &answer);
        answer
    }

    async fn post(&self, path: &str, template: &str, body: Value) -> (u16, Value) {
        let answer = self.api.post(&self.served.url(path), body).await;
        self.holds("post", template, &answer);
        answer
    }

    /// `answer` conforms to what the document says `method template`
    /// answers with that status.
    fn holds(&self, method: &str, template: &str, (status, body): &(u16, Value)) {
        let responses = &self.document["paths"][template][method]["responses"];
        assert!(
            responses.is_object(),
            "{method} {template} is not documented"
        );
        let response = match &responses[status.to_string()] {
            Value::Null => &responses["default"],
            listed => listed,
        };
        let schema = &response["content"]["application/json"]["schema"];
        let errors = schema_errors(&self.document, schema, body);
        assert!(
            errors.is_empty(),
            "{method} {template} answered {status} {body}\nwhich breaks the document: {errors:#?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn the_api_lists_pages_shows_and_retries_notices_as_documented() {
    let ws = Workspace::new(SPEC);
    let outbox = four_notices(&ws).await;
    let live = Live::start(ws).await;

    // Newest first, a page at a time, the cursor continuing the filters.
    let (status, first) = live.get("/notifications?limit=3", "/notifications").await;
    assert_eq!(status, 200, "{first}");
    let rows = first["notifications"].as_array().expect("rows").clone();
    assert_eq!(
        keys_of(&rows),
        [
            outbox.pending.as_str(),
            outbox.sent.as_str(),
            outbox.dead.as_str()
        ]
    );
    let cursor = first["next_cursor"].as_str().expect("a next page");
    let (_, second) = live
        .get(
            &format!("/notifications?limit=3&cursor={}", urlencode(cursor)),
            "/notifications",
        )
        .await;
    let rest = second["notifications"].as_array().expect("rows").clone();
    assert_eq!(keys_of(&rest), [outbox.failed.as_str()]);
    assert_eq!(second["next_cursor"], Value::Null);

    let (_, stuck) = live
        .get("/notifications?status=failed&status=dead", "/notifications")
        .await;
    let stuck = stuck["notifications"].as_array().expect("rows").clone();
    assert_eq!(
        keys_of(&stuck),
        [outbox.dead.as_str(), outbox.failed.as_str()]
    );
    assert_eq!(
        stuck[0]["last_error"],
        "HTTP 500 for the whole retry window"
    );
    assert_eq!(stuck[0]["target"], "${HOOK_OPS}");
    let (_, by_key) = live
        .get(
            &format!("/notifications?key={}&channel=webhook", outbox.sent),
            "/notifications",
        )
        .await;
    assert_eq!(
        keys_of(by_key["notifications"].as_array().unwrap()),
        [outbox.sent.as_str()]
    );
    for bad in [
        "/notifications?status=lost",
        "/notifications?channel=pigeon",
        "/notifications?limit=0",
        "/notifications?cursor=nonsense",
        "/notifications?colour=red",
    ] {
        let answer = live.get(bad, "/notifications").await;
        assert_eq!(
            (answer.0, code(&answer.1)),
            (400, "invalid_request"),
            "{bad}: {}",
            answer.1
        );
    }

    // One notice, with its body; an unknown id is 404 notice_not_found.
    let dead_id = id_of(&rows, &outbox.dead);
    let (status, shown) = live
        .get(&format!("/notifications/{dead_id}"), "/notifications/{id}")
        .await;
    assert_eq!(status, 200, "{shown}");
    assert_eq!(shown["status"], "dead");
    assert_eq!(shown["event"], "approval.requested");
    assert_eq!(shown["body"]["data"]["key"], outbox.dead.as_str());
    let missing = live.get("/notifications/nope", "/notifications/{id}").await;
    assert_eq!((missing.0, code(&missing.1)), (404, "notice_not_found"));

    // Retries: a sent one is 409 notice_not_retriable, an unknown one
    // 404, a dead one due again.
    let sent_id = id_of(&rows, &outbox.sent);
    let refused = live
        .post(
            &format!("/notifications/{sent_id}/retry"),
            "/notifications/{id}/retry",
            json!({}),
        )
        .await;
    assert_eq!(
        (refused.0, code(&refused.1)),
        (409, "notice_not_retriable"),
        "{}",
        refused.1
    );
    let unknown = live
        .post(
            "/notifications/nope/retry",
            "/notifications/{id}/retry",
            json!({}),
        )
        .await;
    assert_eq!((unknown.0, code(&unknown.1)), (404, "notice_not_found"));
    let retried = live
        .post(
            &format!("/notifications/{dead_id}/retry"),
            "/notifications/{id}/retry",
            json!({}),
        )
        .await;
    assert_eq!(retried, (200, json!({ "retried": 1 })));
    let (_, after) = live
        .get(&format!("/notifications/{dead_id}"), "/notifications/{id}")
        .await;
    assert_ne!(after["status"], "dead", "{after}");

    // All dead: none left now; `all_dead` must be true.
    let all = live
        .post(
            "/notifications/retry",
            "/notifications/retry",
            json!({ "all_dead": true }),
        )
        .await;
    assert_eq!(all, (200, json!({ "retried": 0 })));
    let nothing = live
        .post(
            "/notifications/retry",
            "/notifications/retry",
            json!({ "all_dead": false }),
        )
        .await;
    assert_eq!((nothing.0, code(&nothing.1)), (400, "invalid_request"));

    // Behind the token, reads and retries alike.
    for (method, path) in [
        ("get", "/notifications"),
        ("get", "/notifications/x"),
        ("post", "/notifications/x/retry"),
        ("post", "/notifications/retry"),
    ] {
        let answer = if method == "get" {
            Api::new().get(&live.served.url(path)).await
        } else {
            Api::new()
                .post(&live.served.url(path), json!({ "all_dead": true }))
                .await
        };
        assert_eq!(
            (answer.0, code(&answer.1)),
            (401, "unauthorized"),
            "{method} {path}"
        );
    }
    drop(live.ws);
}

#[tokio::test(flavor = "multi_thread")]
async fn metrics_count_the_outbox_by_status_and_the_oldest_undelivered_notice() {
    let ws = Workspace::new(SPEC);
    let outbox = four_notices(&ws).await;
    let live = Live::start(ws).await;
    let response = live
        .api
        .http
        .get(live.served.url("/metrics"))
        .bearer_auth(TOKEN)
        .send()
        .await
        .expect("scrape");
    assert_eq!(response.status(), 200);
    let text = response.text().await.expect("text");
    let value = |series: &str| -> f64 {
        text.lines()
            .find_map(|l| l.strip_prefix(series)?.strip_prefix(' '))
            .unwrap_or_else(|| panic!("no {series} in:\n{text}"))
            .parse()
            .expect("a number")
    };
    // A delivery worker may try the pending one (to an unreachable
    // endpoint: failed at worst), so pending and failed count together.
    assert_eq!(value("tollgate_notifications{status=\"dead\"}"), 1.0);
    assert_eq!(value("tollgate_notifications{status=\"sent\"}"), 1.0);
    let undelivered = value("tollgate_notifications{status=\"pending\"}")
        + value("tollgate_notifications{status=\"failed\"}");
    assert_eq!(undelivered, 2.0, "{text}");
    let age = value("tollgate_notifications_oldest_undelivered_seconds");
    assert!(age > 0.0 && age < 600.0, "{age}");
    for channel in ["webhook", "email", "slack"] {
        for family in ["sent", "retried", "dead"] {
            let series = format!("tollgate_notifications_{family}_total{{channel=\"{channel}\"}}");
            assert!(value(&series) >= 0.0);
        }
    }
    assert!(text.contains("# TYPE tollgate_notifications gauge"));
    assert!(!outbox.pending.is_empty());
}

fn urlencode(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn the_inbox_page_shows_failed_and_dead_deliveries_and_retries_them() {
    use crate::ui::client::Client;
    let ws = Workspace::new(SPEC);
    let outbox = four_notices(&ws).await;
    let all = listed(&ws, &[]);
    // The endpoint answered 410 Gone: the page names it and why.
    common::open_store(&ws.state_db())
        .disable_endpoint(&tollgate_runtime::store::DisabledEndpoint {
            endpoint: "${HOOK_OPS}".into(),
            disabled_at: Utc::now(),
            reason: "HTTP 410 Gone".into(),
        })
        .await
        .expect("disable");
    let live = Live::start(ws).await;

    // Sign-in first, as every page.
    let mut stranger = Client::new(&live.served);
    let away = stranger.get("/ui/notifications").await;
    assert_eq!(away.status, 303);
    assert!(
        away.location().starts_with("/ui/login"),
        "{}",
        away.location()
    );

    let mut ops = Client::signed_in(&live.served, TOKEN).await;
    let page = ops.get("/ui/notifications").await;
    assert_eq!(page.status, 200, "{}", page.body);
    let row = |id: &str| format!("data-id=\"{id}\"");
    let (failed, dead) = (id_of(&all, &outbox.failed), id_of(&all, &outbox.dead));
    assert!(page.body.contains(&row(&failed)) && page.body.contains(&row(&dead)));
    for settled in [&outbox.sent, &outbox.pending] {
        assert!(
            !page.body.contains(&row(&id_of(&all, settled))),
            "only failed and dead are listed"
        );
    }
    // (minijinja writes `/` in attributes as `&#x2f;`.)
    let read = page.body.replace("&#x2f;", "/");
    assert!(read.contains(&format!("href=\"/ui/approvals/{}\"", outbox.dead)));
    assert!(page.body.contains("HTTP 503 from the endpoint"));
    assert!(page.has_id("retry-dead"));
    assert!(page.has_id("disabled-endpoints") && page.body.contains("HTTP 410 Gone"));
    assert!(!page.body.contains("never-printed"));

    // A form without its CSRF token changes nothing.
    let refused = ops
        .post(&format!("/ui/notifications/{failed}/retry"), &[])
        .await;
    assert_eq!(refused.status, 403);
    assert!(refused.body.contains("data-reason=\"csrf\""));
    assert_eq!(
        listed(&live.ws, &["--key", &outbox.failed])[0]["status"],
        "failed"
    );

    // Retry the failed one, then every dead one: back to the page each time.
    let csrf = page.csrf();
    let done = ops
        .post(
            &format!("/ui/notifications/{failed}/retry"),
            &[("csrf", &csrf)],
        )
        .await;
    assert_eq!(
        (done.status, done.location()),
        (303, "/ui/notifications"),
        "{}",
        done.body
    );
    let done = ops
        .post("/ui/notifications/retry", &[("csrf", &csrf)])
        .await;
    assert_eq!(
        (done.status, done.location()),
        (303, "/ui/notifications"),
        "{}",
        done.body
    );
    let after = ops.get("/ui/notifications").await;
    assert!(!after.body.contains(&row(&dead)), "{}", after.body);
    // A retry of a notice to it enabled the endpoint again.
    assert!(after.has_id("disabled-empty"), "{}", after.body);
    assert_ne!(
        listed(&live.ws, &["--key", &outbox.dead])[0]["status"],
        "dead"
    );

    // A notice that is not failed or dead: refused with a page saying why.
    let sent = id_of(&all, &outbox.sent);
    let refused = ops
        .post(
            &format!("/ui/notifications/{sent}/retry"),
            &[("csrf", &csrf)],
        )
        .await;
    assert_eq!(refused.status, 409, "{}", refused.body);
    assert!(
        refused
            .body
            .contains("only a failed or dead notice can be retried")
    );
}
