//! The runs pages: the list by status, one run's page, and its operator
//! forms, which go through the API's own retry/fail/cancel functions:
//! cancel a waiting run, retry and fail stuck ones.

use serde_json::json;

use super::client::Client;
use crate::common::server::{Api, Served};
use crate::common::stuck::{LEASE, approve_until_called_by, eventually, holding_stub, ship_spec};
use crate::common::{GATED_SPEC, Workspace};

#[tokio::test]
async fn runs_are_listed_by_status_and_cancelled_from_their_page() {
    let ws = Workspace::new(GATED_SPEC);
    let (served, api) = super::served_for_alice(&ws);
    let agent = super::agent();
    let waiting = agent.pause(&served, json!({"order_id": "A1"})).await;
    let done = agent.pause(&served, json!({"order_id": "A2"})).await;
    let (status, body) = api
        .post(
            &served.url(&format!("/approvals/{}/approve", done.key)),
            json!({}),
        )
        .await;
    assert_eq!(status, 200, "{body}");
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

/// Two approved POSTs in flight when their server is SIGKILLed end `stuck`
/// on the next server; from their pages, one is retried (its call re-sent
/// with the same Idempotency-Key, the run completes) and one failed with a
/// reason.
#[tokio::test(flavor = "multi_thread")]
async fn a_stuck_run_is_retried_or_failed_from_its_page() {
    let stub = holding_stub(2);
    let ws = Workspace::new(&ship_spec(&stub.url("/ship"), None));
    let env = [
        // The agent starts the runs that alice approves.
        ("TOLLGATE_API_TOKENS", "agent:tok-agent,alice:tok-a"),
        ("TOLLGATE_RUN_LEASE", LEASE),
    ];
    let api = Api::with_token("tok-a");
    let agent = super::agent();
    let mut first = Served::start(&ws.spec, &ws.state_db(), &env, &[]);
    let (retried, _) = approve_until_called_by(&agent, &api, &first, &stub).await;
    let (failed, _) = approve_until_called_by(&agent, &api, &first, &stub).await;
    eventually("both approved calls are in flight", async || {
        stub.count() == 2
    })
    .await;
    first.kill();

    let second = Served::start(&ws.spec, &ws.state_db(), &env, &[]);
    for run_id in [&retried, &failed] {
        api.wait_for_status(&second, run_id, "stuck").await;
    }
    let mut alice = Client::signed_in(&second, "tok-a").await;
    let listed = alice.get("/ui/runs?status=stuck").await;
    for run_id in [&retried, &failed] {
        assert!(
            listed
                .body
                .contains(&format!("tr class=\"run\" data-id=\"{run_id}\"")),
            "{}",
            listed.body
        );
    }

    let path = format!("/ui/runs/{retried}");
    let page = alice.get(&path).await;
    assert!(page.has_id("retry") && page.has_id("fail") && !page.has_id("cancel"));
    assert!(page.body.contains("data-kind=\"run_stuck\""));
    let answer = alice
        .post(&format!("{path}/retry"), &[("csrf", &page.csrf())])
        .await;
    assert_eq!(answer.status, 303, "{}", answer.body);
    assert_eq!(answer.location(), path);
    api.wait_for_status(&second, &retried, "completed").await;
    let keys: Vec<String> = stub
        .requests_to("/ship")
        .iter()
        .filter(|call| call.json()["run"] == retried.as_str())
        .map(|call| {
            call.header("idempotency-key")
                .unwrap_or_default()
                .to_string()
        })
        .collect();
    assert_eq!(keys.len(), 2, "called once more by the retry: {keys:?}");
    assert!(!keys[0].is_empty() && keys[0] == keys[1], "{keys:?}");

    let path = format!("/ui/runs/{failed}");
    let page = alice.get(&path).await;
    let answer = alice
        .post(
            &format!("{path}/fail"),
            &[("reason", "shipped by hand"), ("csrf", &page.csrf())],
        )
        .await;
    assert_eq!(answer.status, 303, "{}", answer.body);
    let run = api.wait_for_status(&second, &failed, "failed").await;
    assert!(
        run["error"]
            .as_str()
            .is_some_and(|e| e.contains("shipped by hand")),
        "{run}"
    );
    let page = alice.get(&path).await;
    assert_eq!(page.text_of("run-status"), "failed");
    assert!(!page.has_id("fail"), "a failed run is not failed again");
    // An operator's fail is final here: no retry offered, and a retry
    // posted anyway is refused as over the API, naming who failed it.
    assert!(!page.has_id("retry"), "no retry of an operator's fail");
    let answer = alice
        .post(&format!("{path}/retry"), &[("csrf", &page.csrf())])
        .await;
    assert_eq!(answer.status, 409, "{}", answer.body);
    assert!(answer.body.contains("shipped by hand"), "{}", answer.body);
    assert_eq!(
        stub.requests_to("/ship")
            .iter()
            .filter(|call| call.json()["run"] == failed.as_str())
            .count(),
        1,
        "a failed run's call is never re-sent"
    );
}
