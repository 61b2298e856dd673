//! The runs pages: the list by status, one run's page, and its operator
//! forms, which go through the API's own retry/fail/cancel functions.

use serde_json::json;

use super::client::Client;
use crate::common::{GATED_SPEC, Workspace};

#[tokio::test]
async fn runs_are_listed_by_status_and_cancelled_from_their_page() {
    let ws = Workspace::new(GATED_SPEC);
    let (served, api) = super::served_for_alice(&ws);
    let waiting = api.pause(&served, json!({"order_id": "A1"})).await;
    let done = api.pause(&served, json!({"order_id": "A2"})).await;
    api.post(
        &served.url(&format!("/approvals/{}/approve", done.key)),
        json!({}),
    )
    .await;
    api.wait_for_status(&served, &done.run_id, "completed")
        .await;

    let mut alice = Client::signed_in(&served, "tok-a").await;
    let all = alice.get("/ui/runs").await;
    for id in [&waiting.run_id, &done.run_id] {
        assert!(
            all.body
                .contains(&format!("tr class=\"run\" data-id=\"{id}\""))
        );
    }
    let completed = alice.get("/ui/runs?status=completed").await;
    assert!(completed.body.contains(&done.run_id) && !completed.body.contains(&waiting.run_id));
    let bad = alice.get("/ui/runs?status=sideways").await;
    assert_eq!(bad.status, 400);

    let path = format!("/ui/runs/{}", waiting.run_id);
    let page = alice.get(&path).await;
    assert!(page.has_id("cancel") && !page.has_id("retry") && !page.has_id("fail"));
    assert!(page.body.contains("data-kind=\"awaiting_approval\""));
    let refused = alice
        .post(&format!("{path}/cancel"), &[("reason", "no")])
        .await;
    assert_eq!(refused.status, 403);
    assert!(refused.body.contains("data-reason=\"csrf\""));
    let csrf = page.csrf();
    let cancelled = alice
        .post(
            &format!("{path}/cancel"),
            &[("reason", "duplicate order"), ("csrf", &csrf)],
        )
        .await;
    assert_eq!(cancelled.status, 303, "{}", cancelled.body);
    assert_eq!(cancelled.location(), path);
    let (_, run) = api
        .get(&served.url(&format!("/runs/{}", waiting.run_id)))
        .await;
    assert_eq!(run["status"], "cancelled");
    let page = alice.get(&path).await;
    assert_eq!(page.text_of("run-status"), "cancelled");
    assert!(
        page.body
            .contains("run cancelled by alice: duplicate order")
    );

    // A retry of a run that is not stuck or failed is refused, as over the API.
    let retry = alice
        .post(&format!("{path}/retry"), &[("csrf", &csrf)])
        .await;
    assert_eq!(retry.status, 409, "{}", retry.body);
    let history = alice.get("/ui/history?status=CANCELLED").await;
    assert!(history.body.contains(&waiting.key));
}
