//! A rolling deploy on PostgreSQL: two servers share one database, one
//! still serving v1, one already serving v2, both under `pin`. Each
//! decides the other's pauses, and every run resumes on the version it
//! paused under, whichever node got the decision.

use serde_json::json;

use super::policies::{v1, v2};
use crate::common::server::{Api, Served};
use crate::common::stub_server::{Response, StubServer};
use crate::common::{Workspace, postgres};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_nodes_on_two_versions_decide_each_others_pauses_under_pin() {
    let db = postgres::database();
    let stub = StubServer::start(|_| Response::json(201, json!({"ok": true})));
    let old = Workspace::new(&v1("pin", &stub.url("/ship")));
    let new = Workspace::new(&v2("pin", &stub.url("/ship")));
    let on_v1 = Served::start_on_database(&old.spec, &db.url, &[], &[]);
    let on_v2 = Served::start_on_database(&new.spec, &db.url, &[], &[]);
    let api = Api::new();

    // `review` exists in both (its message differs); `finance` only in v1.
    let by_v1 = api
        .pause(&on_v1, json!({"order": "O-1", "gate": "review"}))
        .await;
    let by_v1_finance = api
        .pause(&on_v1, json!({"order": "O-2", "gate": "finance"}))
        .await;
    let by_v2 = api
        .pause(&on_v2, json!({"order": "O-3", "gate": "review"}))
        .await;

    // v2's node decides v1's pauses, v1's node decides v2's.
    for (node, key) in [
        (&on_v2, &by_v1.key),
        (&on_v2, &by_v1_finance.key),
        (&on_v1, &by_v2.key),
    ] {
        let (status, body) = api
            .post(
                &node.url(&format!("/approvals/{key}/approve?wait=true")),
                json!({}),
            )
            .await;
        assert_eq!(status, 200, "{body}\n{}", node.logs());
        assert_eq!(body["status"], "completed", "{body}");
    }
    let mut sent: Vec<(String, String)> = stub
        .requests()
        .iter()
        .map(|r| r.json())
        .map(|b| {
            (
                b["order"].as_str().unwrap_or_default().to_string(),
                b["spec"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect();
    sent.sort();
    assert_eq!(
        sent,
        [
            ("O-1".to_string(), "v1".to_string()),
            ("O-2".to_string(), "v1".to_string()),
            ("O-3".to_string(), "v2".to_string()),
        ],
        "each run's one request, made by the version it paused under"
    );
}
