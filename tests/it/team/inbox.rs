//! The inbox list of gates with rules, over loopback HTTP: each row shows
//! its rules' progress, and the rows its viewer may not vote on (their own
//! run, a gate of groups they are not in, a vote already cast) say so and
//! are marked `barred`; the live fragment shows a vote as it lands.

use serde_json::json;

use super::{approve, paused, spec, tokens};
use crate::common::Workspace;
use crate::common::server::Served;
use crate::ui::client::Client;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_inbox_lists_each_gates_progress_and_marks_rows_its_viewer_may_not_vote_on() {
    let ws = Workspace::new(&spec(""));
    let tokens = tokens();
    let served = Served::start(
        &ws.spec,
        &ws.state_db(),
        &[
            ("TOLLGATE_API_TOKENS", tokens.as_str()),
            ("TOLLGATE_SESSION_SECRET", "team-secret"),
        ],
        &[],
    );
    let (_, key, _) = paused(&served, 30).await;
    let row = |body: &str| -> String {
        let marker = format!(r#"data-key="{key}""#);
        let at = body
            .find(&marker)
            .unwrap_or_else(|| panic!("no row: {body}"));
        let start = body[..at].rfind("<tr").expect("row start");
        let end = at + body[at..].find("</tr>").expect("row end");
        body[start..end].to_string()
    };

    let mut bot = Client::signed_in(&served, "token-bot").await;
    let listed = row(&bot.get("/ui").await.body);
    assert!(
        listed.contains(r#"<span class="progress">finance 0 of 2; security 0 of 1</span>"#),
        "{listed}"
    );
    assert!(listed.contains(r#"class="approval barred""#), "{listed}");
    assert!(listed.contains("your run: you may not vote"), "{listed}");

    let mut erin = Client::signed_in(&served, "token-erin").await;
    let listed = row(&erin.get("/ui").await.body);
    assert!(listed.contains("not in finance or security"), "{listed}");

    let (status, body) = approve(&served, &key, "alice", json!({})).await;
    assert_eq!(status, 200, "{body}");
    let mut alice = Client::signed_in(&served, "token-alice").await;
    let listed = row(&alice.get("/ui?fragment=rows").await.body);
    assert!(
        listed.contains("finance 1 of 2; security 0 of 1"),
        "{listed}"
    );
    assert!(listed.contains("you voted approve"), "{listed}");

    // bob may vote: his row offers the gate, unmarked.
    let mut bob = Client::signed_in(&served, "token-bob").await;
    let listed = row(&bob.get("/ui").await.body);
    assert!(listed.contains(r#"<tr class="approval" "#), "{listed}");
    assert!(!listed.contains("barred"), "{listed}");
    assert!(
        listed.contains("finance 1 of 2; security 0 of 1"),
        "{listed}"
    );
}
