//! The inbox a page at a time (25 rows), newest first, forward and back,
//! and filtered by text.

use serde_json::json;

use super::client::{Answer, Client};
use crate::common::{GATED_SPEC, Workspace};

fn keys(page: &Answer) -> Vec<String> {
    let marker = "tr class=\"approval\" data-key=\"";
    page.body
        .match_indices(marker)
        .map(|(i, _)| page.body[i + marker.len()..i + marker.len() + 36].to_string())
        .collect()
}

fn href(page: &Answer, id: &str) -> String {
    let marker = format!("id=\"{id}\" href=\"");
    let at = page
        .body
        .find(&marker)
        .unwrap_or_else(|| panic!("no #{id}:\n{}", page.body))
        + marker.len();
    let end = at + page.body[at..].find('"').unwrap();
    page.body[at..end]
        .replace("&amp;", "&")
        .replace("&#x2f;", "/")
}

#[tokio::test]
async fn the_inbox_pages_forward_and_back_and_filters_by_text() {
    let ws = Workspace::new(GATED_SPEC);
    let (served, api) = super::served_for_alice(&ws);
    let mut paused = Vec::new();
    for i in 0..27 {
        paused.push(
            api.pause(&served, json!({"order_id": format!("ORD-{i:02}")}))
                .await,
        );
    }
    let mut alice = Client::signed_in(&served, "tok-a").await;
    let first = alice.get("/ui").await;
    let first_keys = keys(&first);
    assert_eq!(first_keys.len(), 25);
    assert_eq!(first_keys[0], paused[26].key, "newest first");
    assert!(!first.has_id("prev-page"));
    let second = alice.get(&href(&first, "next-page")).await;
    assert_eq!(second.status, 200);
    let second_keys = keys(&second);
    assert_eq!(second_keys, [paused[1].key.clone(), paused[0].key.clone()]);
    assert!(!second.has_id("next-page"));
    let back = alice.get(&href(&second, "prev-page")).await;
    assert_eq!(keys(&back), first_keys);

    let found = alice.get("/ui?q=ord-07").await;
    assert_eq!(keys(&found), [paused[7].key.clone()]);
    let none = alice.get("/ui?q=nothing-like-this").await;
    assert!(none.has_id("inbox-empty"));
    let by_step = alice.get("/ui?step=gate").await;
    assert_eq!(keys(&by_step).len(), 25);
}
