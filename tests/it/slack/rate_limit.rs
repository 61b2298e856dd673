//! A rate-limited Slack holds its whole lane (issue 43): Slack answers
//! the first `chat.postMessage` with 429 and `Retry-After: 2`, and no
//! other message of the workspace is posted before those 2 s are over,
//! though several approvals pause meanwhile; then every message is
//! posted, each of the held ones at its first attempt (being held is not
//! a try). A webhook receiver of the same approvals, another lane, gets
//! its notices meanwhile.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::json;
use tollgate_runtime::notices::{NoticeChannel, NoticeStatus};
use tollgate_runtime::store::NoticeQuery;

use crate::common;
use crate::common::server::{Api, Served};
use crate::common::slack_stub::*;
use crate::common::stub_server::{Response, StubServer};
use common::Workspace;

/// What Slack asks for in its 429.
const RETRY_AFTER: Duration = Duration::from_secs(2);

/// When each request reached a stub, and what it was answered.
type Arrivals = Arc<Mutex<Vec<(Instant, u16)>>>;

/// The Slack spec, also notifying a webhook (`${HOOK_URL}`).
fn spec_with_webhook(tool_base: &str) -> String {
    let slack = spec(tool_base);
    let anchor = "      signing_secret: ${SLACK_SIGNING_SECRET}\n";
    assert!(slack.contains(anchor), "the Slack spec changed: {slack}");
    slack.replace(
        anchor,
        &format!(
            "{anchor}    webhooks:\n      - url: \"${{HOOK_URL}}\"\n        secret: \"${{HOOK_SECRET}}\"\n"
        ),
    )
}

/// `later` minus `earlier`, to the nearest whole second: the comparisons
/// below are about a 2 s hold, not about milliseconds of scheduling.
fn whole_seconds(earlier: Instant, later: Instant) -> i64 {
    if later >= earlier {
        (later.duration_since(earlier).as_millis() as i64 + 500) / 1000
    } else {
        -((earlier.duration_since(later).as_millis() as i64 + 500) / 1000)
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_rate_limited_slack_holds_its_lane_until_retry_after_and_other_lanes_flow() {
    let tool = StubServer::start(|_| Response::json(200, json!({"id": "rf_1"})));

    let posts: Arrivals = Arc::default();
    let seen = Arc::clone(&posts);
    let answer = api_handler();
    let slack = StubServer::start(move |request| {
        let now = Instant::now();
        if request.path() != POST_PATH {
            return answer(request);
        }
        let mut seen = seen.lock().unwrap();
        let response = if seen.is_empty() {
            Response::json(429, json!({"ok": false, "error": "ratelimited"}))
                .with_header("Retry-After", &RETRY_AFTER.as_secs().to_string())
        } else {
            answer(request)
        };
        seen.push((now, response.status));
        response
    });

    let hooks: Arrivals = Arc::default();
    let got = Arc::clone(&hooks);
    let hook = StubServer::start(move |_| {
        got.lock().unwrap().push((Instant::now(), 204));
        Response::text(204, "")
    });

    let ws = Workspace::new(&spec_with_webhook(&tool.url("")));
    let db = ws.state_db();
    let mut env = env(slack.port);
    env.push(("HOOK_URL", hook.url("/hooks/tollgate")));
    env.push((
        "HOOK_SECRET",
        crate::notifications::webhook::SECRET.to_string(),
    ));
    let served = Served::start(
        &ws.spec,
        &db,
        &env_refs(&env),
        &["--notify-retry-window", "60s"],
    );
    let api = Api::new();

    // The first approval's post is refused with the 429.
    let first = api
        .trigger_and_wait_for_pause(&served, "/hooks/refund", json!({ "order_id": "R-0" }))
        .await;
    let refused_at = eventually(20, "Slack's 429", || {
        posts.lock().unwrap().first().map(|(at, _)| *at)
    })
    .await;

    // Several approvals pause at once while the lane is held.
    let pause = |order: &'static str| {
        api.trigger_and_wait_for_pause(&served, "/hooks/refund", json!({ "order_id": order }))
    };
    let (one, two, three) = tokio::join!(pause("R-1"), pause("R-2"), pause("R-3"));
    let later = [one, two, three];

    let mut keys = vec![first.key.clone()];
    keys.extend(later.iter().map(|p| p.key.clone()));
    for key in &keys {
        eventually(30, "every message posted", || stored_message(&db, key)).await;
    }

    let posts = posts.lock().unwrap().clone();
    assert_eq!(
        posts.len(),
        1 + keys.len(),
        "the refused post, then one post per approval: {posts:?}"
    );
    assert_eq!(posts[0].1, 429);
    for (at, status) in &posts[1..] {
        assert_eq!(*status, 200);
        let after = whole_seconds(refused_at, *at);
        assert!(
            after >= RETRY_AFTER.as_secs() as i64,
            "a post reached Slack {after} s after its 429 asked for {} s",
            RETRY_AFTER.as_secs()
        );
    }

    // The webhook lane was not held: each approval's webhook arrived
    // before Slack's lane opened again.
    let opened_at = posts[1].0;
    let hooks = eventually(20, "a webhook per approval", || {
        let hooks = hooks.lock().unwrap().clone();
        (hooks.len() >= keys.len()).then_some(hooks)
    })
    .await;
    assert_eq!(hooks.len(), keys.len(), "one webhook per approval");
    for (at, _) in &hooks {
        assert!(
            *at < opened_at,
            "a webhook waited for Slack's hold ({} s after the 429)",
            whole_seconds(refused_at, *at)
        );
    }

    // Being held is not a try: only the refused notice counts two.
    let store = common::open_store(&db);
    let notices = store
        .list_notices(&NoticeQuery {
            channel: Some(NoticeChannel::Slack),
            limit: 50,
            ..NoticeQuery::default()
        })
        .await
        .expect("list");
    assert_eq!(notices.len(), keys.len());
    for notice in &notices {
        assert_eq!(notice.status, NoticeStatus::Sent, "{notice:?}");
        let expected = if notice.notice.key == first.key { 2 } else { 1 };
        assert_eq!(notice.attempts, expected, "{notice:?}");
    }
    let scrape = api
        .http
        .get(served.url("/metrics"))
        .send()
        .await
        .expect("GET /metrics")
        .text()
        .await
        .expect("body");
    let retried = scrape
        .lines()
        .find_map(|l| l.strip_prefix("tollgate_notifications_retried_total{channel=\"slack\"} "))
        .unwrap_or_else(|| panic!("no Slack retries in:\n{scrape}"));
    assert_eq!(retried.trim(), "1", "only the refused post is a retry");
}
