//! A team gate in Slack: the message shows each rule's progress and who
//! voted, and is edited after every vote, not only when the gate settles.
//! Two `tollgate serve` processes share one store (a SQLite file, then
//! PostgreSQL) and one Slack stub: the run pauses on server A, which posts
//! the message; a vote cast through server B edits A's message (B finds
//! where it is in the store); the votes after it edit it again, and the
//! settling vote leaves it without buttons, still showing the votes. A
//! vote cast by the CLI (no Slack in that process) is shown by a server's
//! repair sweep.

use std::sync::Arc;

use serde_json::{Value, json};
use tollgate_runtime::SharedStore;

use super::{approve, paused, tokens};
use crate::common::server::Served;
use crate::common::slack_stub::{self, POST_PATH, UPDATE_PATH, eventually};
use crate::common::stub_server::StubServer;
use crate::common::{Workspace, open_store, postgres};

/// The team spec (finance 2 of {alice, bob, carol}, security 1 of
/// {dave}) with its approvals announced in Slack.
fn slack_team_spec() -> String {
    super::spec("").replace(
        "approvals:\n",
        "approvals:\n  notify:\n    slack:\n      bot_token: ${SLACK_BOT_TOKEN}\n      channel: \"#refunds\"\n      signing_secret: ${SLACK_SIGNING_SECRET}\n",
    )
}

fn text_of(body: &Value) -> String {
    body["blocks"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|b| b["text"]["text"].as_str().unwrap_or("").to_string())
        .collect::<Vec<_>>()
        .join("\n")
}

fn has_buttons(body: &Value) -> bool {
    !slack_stub::buttons(body).is_empty()
}

/// The one store two servers share.
enum Shared<'a> {
    Sqlite(&'a std::path::Path),
    Postgres(&'a str),
}

/// Two `tollgate serve` processes of `ws`'s spec on `shared`, with API
/// tokens for each person, both posting to one Slack stub.
fn two_servers(ws: &Workspace, shared: &Shared<'_>) -> (Served, Served, StubServer) {
    let slack = slack_stub::start_api();
    let mut env = slack_stub::env(slack.port);
    env.push(("TOLLGATE_API_TOKENS", tokens()));
    let env = slack_stub::env_refs(&env);
    let start = || match shared {
        Shared::Sqlite(state) => Served::start(&ws.spec, state, &env, &[]),
        Shared::Postgres(url) => Served::start_on_database(&ws.spec, url, &env, &[]),
    };
    (start(), start(), slack)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_vote_through_another_server_on_sqlite_edits_the_message_with_the_progress() {
    let ws = Workspace::new(&slack_team_spec());
    let state = ws.path().join("state.db");
    let (a, b, slack) = two_servers(&ws, &Shared::Sqlite(&state));
    votes_edit_the_message(&a, &b, &slack, &open_store(&state)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_vote_through_another_server_on_postgresql_edits_the_message_with_the_progress() {
    let db = postgres::database();
    let ws = Workspace::new(&slack_team_spec());
    let (a, b, slack) = two_servers(&ws, &Shared::Postgres(&db.url));
    let store = tollgate_runtime::store::open(&db.url, Default::default()).expect("store");
    votes_edit_the_message(&a, &b, &slack, &store).await;
}

async fn votes_edit_the_message(a: &Served, b: &Served, slack: &StubServer, store: &SharedStore) {
    let (_, key, _) = paused(a, 100).await;
    let notifications = Arc::clone(store).notifications().expect("notifications");
    // A posts the message, showing no votes yet and who may cast them.
    let posted = eventually(15, "the message posted", || {
        slack.requests_to(POST_PATH).first().map(|r| r.json())
    })
    .await;
    let text = text_of(&posted);
    assert!(
        text.contains("*Votes* finance 0 of 2; security 0 of 1"),
        "{text}"
    );
    assert!(
        text.contains("may still vote: `alice`, `bob`, `carol`"),
        "{text}"
    );
    assert!(text.contains("started or edited the run): `bot`"), "{text}");
    assert!(has_buttons(&posted), "{posted}");
    let ts = loop {
        let stored = notifications.get_notification(&key).await.expect("read");
        if let Some(ts) = stored.and_then(|n| n.ts) {
            break ts;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    };

    // alice votes through B: B edits A's message; the buttons stay.
    let (status, body) = approve(b, &key, "alice", json!({})).await;
    assert_eq!(status, 200, "{body}");
    let edit = latest_update_showing(slack, "finance 1 of 2; security 0 of 1").await;
    assert_eq!(edit["ts"], ts.as_str(), "A's message, edited: {edit}");
    let text = text_of(&edit);
    assert!(text.contains("approved by `alice`"), "{text}");
    assert!(text.contains("may still vote: `bob`, `carol`"), "{text}");
    assert!(has_buttons(&edit), "still open: {edit}");

    // bob through A, then dave through B settles it.
    let (status, body) = approve(a, &key, "bob", json!({})).await;
    assert_eq!(status, 200, "{body}");
    latest_update_showing(slack, "finance 2 of 2; security 0 of 1").await;
    let (status, body) = approve(b, &key, "dave", json!({})).await;
    assert_eq!(status, 200, "{body}");
    let settled = eventually(15, "the settled message", || {
        slack
            .requests_to(UPDATE_PATH)
            .into_iter()
            .map(|r| r.json())
            .find(|u| !has_buttons(u))
    })
    .await;
    let text = text_of(&settled);
    assert!(text.contains("Approved"), "{text}");
    assert!(
        text.contains("finance 2 of 2; security 1 of 1"),
        "the votes stay on the settled message: {text}"
    );
    // Whatever order the edits ran in, the message ends settled: no edit
    // with buttons comes after it.
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    let last = slack
        .requests_to(UPDATE_PATH)
        .last()
        .map(|r| r.json())
        .expect("edits");
    assert!(
        !has_buttons(&last),
        "the last edit is the settlement: {last}"
    );
    assert_eq!(slack.requests_to(POST_PATH).len(), 1, "posted once");
}

/// The newest `chat.update` once one shows `progress`, and no later edit
/// shows older progress.
async fn latest_update_showing(slack: &StubServer, progress: &str) -> Value {
    eventually(15, progress, || {
        let updates = slack.requests_to(UPDATE_PATH);
        let last = updates.last()?.json();
        text_of(&last).contains(progress).then_some(last)
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_vote_cast_by_the_cli_on_sqlite_is_shown_by_the_servers_repair() {
    let ws = Workspace::new(&slack_team_spec());
    let state = ws.path().join("state.db");
    let state_arg = state.to_str().unwrap().to_string();
    cli_vote_is_repaired(&ws, &["--state", &state_arg], &open_store(&state), |env| {
        Served::start(&ws.spec, &state, env, &[])
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_vote_cast_by_the_cli_on_postgresql_is_shown_by_the_servers_repair() {
    let db = postgres::database();
    let ws = Workspace::new(&slack_team_spec());
    let store = tollgate_runtime::store::open(&db.url, Default::default()).expect("store");
    cli_vote_is_repaired(&ws, &["--database-url", &db.url], &store, |env| {
        Served::start_on_database(&ws.spec, &db.url, env, &[])
    })
    .await;
}

/// A server posts the message and stops once its notice is sent; alice
/// votes with the CLI; the next server's outbox edits the message to show
/// her vote. (A server killed between the post and settling its notice
/// holds that notice's lease, and the approval's later Slack notices wait
/// behind it until the lease runs out: that is the lease tests' case.)
async fn cli_vote_is_repaired(
    ws: &Workspace,
    store_args: &[&str],
    store: &SharedStore,
    serve: impl Fn(&[(&str, &str)]) -> Served,
) {
    let slack = slack_stub::start_api();
    let tokens = tokens();
    let mut env = slack_stub::env(slack.port);
    env.push(("TOLLGATE_API_TOKENS", tokens));
    let env = slack_stub::env_refs(&env);
    let mut first = serve(&env);
    let (_, key, _) = paused(&first, 100).await;
    let notifications = Arc::clone(store).notifications().expect("notifications");
    let ts = loop {
        let stored = notifications.get_notification(&key).await.expect("read");
        let sent = store
            .list_notices(&tollgate_runtime::store::NoticeQuery {
                key: Some(key.clone()),
                limit: 10,
                ..Default::default()
            })
            .await
            .expect("notices")
            .iter()
            .any(|n| {
                n.notice.channel == tollgate_runtime::notices::NoticeChannel::Slack
                    && n.status == tollgate_runtime::notices::NoticeStatus::Sent
            });
        if let Some(ts) = stored.and_then(|n| n.ts).filter(|_| sent) {
            break ts;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    };
    first.kill();

    let voted = ws
        .tollgate()
        .args(["approvals", "approve", &key, "--by", "alice", "--spec"])
        .arg(&ws.spec)
        .args(store_args)
        .output()
        .unwrap();
    crate::common::assert_exit(&voted, 0);
    assert!(
        slack.requests_to(UPDATE_PATH).is_empty(),
        "the CLI edits nothing"
    );

    let _second = serve(&env);
    let edit = latest_update_showing(&slack, "finance 1 of 2; security 0 of 1").await;
    assert_eq!(edit["ts"], ts.as_str(), "{edit}");
    assert!(text_of(&edit).contains("approved by `alice`"), "{edit}");
    assert!(has_buttons(&edit), "still open: {edit}");
    assert_eq!(slack.requests_to(POST_PATH).len(), 1, "posted once");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 6)]
async fn votes_at_once_through_two_servers_leave_the_newest_progress_shown_sqlite() {
    let ws = Workspace::new(&slack_team_spec());
    let state = ws.path().join("state.db");
    let (a, b, slack) = two_servers(&ws, &Shared::Sqlite(&state));
    votes_at_once_end_on_the_newest(&a, &b, &slack).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 6)]
async fn votes_at_once_through_two_servers_leave_the_newest_progress_shown_postgresql() {
    let db = postgres::database();
    let ws = Workspace::new(&slack_team_spec());
    let (a, b, slack) = two_servers(&ws, &Shared::Postgres(&db.url));
    votes_at_once_end_on_the_newest(&a, &b, &slack).await;
}

/// alice, bob and carol vote at once through A and B: each edit renders
/// the store as it is then, so whatever order the edits run in, the last
/// one shows all three votes (finance is met, security is not).
async fn votes_at_once_end_on_the_newest(a: &Served, b: &Served, slack: &StubServer) {
    let (_, key, _) = paused(a, 100).await;
    eventually(15, "the message posted", || {
        slack.requests_to(POST_PATH).first().map(|_| ())
    })
    .await;
    let (first, second, third) = tokio::join!(
        approve(a, &key, "alice", json!({})),
        approve(b, &key, "bob", json!({})),
        approve(b, &key, "carol", json!({})),
    );
    for (status, body) in [first, second, third] {
        assert_eq!(status, 200, "{body}");
    }
    latest_update_showing(slack, "finance 2 of 2; security 0 of 1").await;
    // Settled edits, late or repeated, never bring older progress back.
    tokio::time::sleep(std::time::Duration::from_secs(1)).await;
    let last = slack
        .requests_to(UPDATE_PATH)
        .last()
        .map(|r| r.json())
        .expect("edits");
    let text = text_of(&last);
    assert!(
        text.contains("finance 2 of 2; security 0 of 1"),
        "the last edit shows the newest progress: {text}"
    );
    for voter in ["alice", "bob", "carol"] {
        assert!(
            text.contains(&format!("`{voter}`")),
            "{voter} shown: {text}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_vote_cast_by_the_cli_on_postgresql_reaches_a_running_server_at_once() {
    let db = postgres::database();
    let ws = Workspace::new(&slack_team_spec());
    let slack = slack_stub::start_api();
    let tokens = tokens();
    let mut env = slack_stub::env(slack.port);
    env.push(("TOLLGATE_API_TOKENS", tokens));
    let env = slack_stub::env_refs(&env);
    let served = Served::start_on_database(&ws.spec, &db.url, &env, &[]);
    let (_, key, _) = paused(&served, 100).await;
    eventually(15, "the message posted", || {
        slack.requests_to(POST_PATH).first().map(|_| ())
    })
    .await;
    let voted = ws
        .tollgate()
        .args(["approvals", "approve", &key, "--by", "alice", "--spec"])
        .arg(&ws.spec)
        .args(["--database-url", &db.url])
        .output()
        .unwrap();
    crate::common::assert_exit(&voted, 0);
    // The vote's NOTIFY, not the repair sweep (every 30 s): well before it.
    let started = std::time::Instant::now();
    let edit = latest_update_showing(&slack, "finance 1 of 2; security 0 of 1").await;
    assert!(
        started.elapsed() < std::time::Duration::from_secs(10),
        "shown after {:?}",
        started.elapsed()
    );
    assert!(text_of(&edit).contains("approved by `alice`"), "{edit}");
    // Once: the change and the event-less repair do not edit it again.
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    assert_eq!(slack.requests_to(UPDATE_PATH).len(), 1, "one edit per vote");
}
