//! A payload too large to show (issue 41): the approval page shows the
//! first part of its tree and text, says so, and links the whole payload
//! as a JSON download, so a page's size is bounded whatever the payload's
//! shape. Before, a payload of 20,000 keys made a page of megabytes (a
//! million keys: 171 MB of HTML, built in memory before it was sent).

use serde_json::{Map, Value, json};

use super::client::Client;
use crate::common::Workspace;
use crate::common::server::{Api, Served};

const SPEC: &str = r#"version: 1
agent: wide-desk
steps:
  - id: review
    approval:
      message: "Import these rows?"
      payload: { rows: "{{ input.rows }}" }
"#;

/// The most a page of this payload may weigh: the tree's first nodes,
/// 64 KiB of raw text and 64 KiB of the run's input, with the page around.
const PAGE_BOUND: usize = 512 * 1024;

#[tokio::test(flavor = "multi_thread")]
async fn a_wide_payload_is_shown_in_part_and_downloaded_whole() {
    let ws = Workspace::new(SPEC);
    let served = Served::start(
        &ws.spec,
        &ws.state_db(),
        &[("TOLLGATE_API_TOKENS", "agent:tok-agent,alice:tok-a")],
        &[],
    );
    let rows: Map<String, Value> = (0..20_000)
        .map(|i| (format!("row-{i}"), json!(i)))
        .collect();
    let paused = Api::with_token("tok-agent")
        .pause(&served, json!({"rows": rows}))
        .await;

    let mut alice = Client::signed_in(&served, "tok-a").await;
    let page = alice.get(&format!("/ui/approvals/{}", paused.key)).await;
    assert_eq!(page.status, 200, "{}", page.body);
    assert!(page.has_id("payload-cut"), "the page says it is cut");
    assert!(page.has_id("download-raw"));
    assert!(
        page.body.len() < PAGE_BOUND,
        "a page of {} bytes for a payload of 20,000 keys",
        page.body.len()
    );
    assert!(page.body.contains("more not shown"));

    let raw = alice
        .get(&format!("/ui/approvals/{}/payload", paused.key))
        .await;
    assert_eq!(raw.status, 200, "{}", raw.body);
    assert_eq!(raw.header("content-type"), "application/json");
    assert!(
        raw.header("content-disposition").starts_with("attachment"),
        "{}",
        raw.header("content-disposition")
    );
    let whole: Value = serde_json::from_str(&raw.body).expect("JSON");
    assert_eq!(whole["rows"].as_object().map(Map::len), Some(20_000));
    assert_eq!(whole["rows"]["row-19999"], 19_999);

    // A small payload is shown whole, with nothing to say.
    let small = Api::with_token("tok-agent")
        .pause(&served, json!({"rows": {"a": 1}}))
        .await;
    let page = alice.get(&format!("/ui/approvals/{}", small.key)).await;
    assert_eq!(page.status, 200);
    assert!(!page.has_id("payload-cut"));

    // Signed out: no payload.
    let mut stranger = Client::new(&served);
    let refused = stranger
        .get(&format!("/ui/approvals/{}/payload", paused.key))
        .await;
    assert_ne!(refused.status, 200, "{}", refused.body);
}
