//! GET /approvals `?step=` and `?q=` over real HTTP (`tollgate serve`), and
//! `tollgate approvals list --step/--query` on the same state file: each
//! filter alone and combined, `%` and `_` taken literally, paging a filtered
//! list with its cursor, the unfiltered listing unchanged, bad input as 400
//! (or exit 2).

use crate::common;
use crate::common::server;

use common::Workspace;
use serde_json::{Value, json};
use server::{Api, Paused, Served, code};

use super::two_gates::{cli_listed, keys};

fn two_gates() -> String {
    super::two_gates::spec("filter-desk", "")
}

async fn listed(api: &Api, served: &Served, query: &str) -> Vec<String> {
    let (status, page) = api.get(&served.url(&format!("/approvals{query}"))).await;
    assert_eq!(status, 200, "{query}: {page}");
    assert_eq!(page["next_cursor"], Value::Null, "{query}: {page}");
    keys(&page)
}

#[tokio::test(flavor = "multi_thread")]
async fn pending_approvals_are_filtered_by_step_and_text_over_http_and_the_cli() {
    let ws = Workspace::new(&two_gates());
    let served = Served::start(
        &ws.spec,
        &ws.state_db(),
        &[("TOLLGATE_API_TOKENS", "agent:tok-agent,alice:tok-alice")],
        &[],
    );
    // The agent starts the runs, alice decides (not who started them).
    let agent = Api::with_token("tok-agent");
    let api = Api::with_token("tok-alice");
    let mut paused: Vec<Paused> = Vec::new();
    for order in ["A-1", "B-50%", "B_2", "C-3"] {
        paused.push(agent.pause(&served, json!({ "order_id": order })).await);
    }
    // C-3 passes its check and waits to ship, under a new key.
    let (status, decided) = api
        .post(
            &served.url(&format!("/approvals/{}/approve?wait=true", paused[3].key)),
            json!({}),
        )
        .await;
    assert_eq!(status, 200, "{decided}");
    let shipping = Paused::from_run(&decided["run"]).key;
    let (a1, b50, b_2) = (
        paused[0].key.clone(),
        paused[1].key.clone(),
        paused[2].key.clone(),
    );

    // Unfiltered: every pending approval, newest first, as before.
    let all = vec![shipping.clone(), b_2.clone(), b50.clone(), a1.clone()];
    assert_eq!(listed(&api, &served, "").await, all);
    assert_eq!(
        listed(&api, &served, "?q=&step=").await,
        all,
        "empty filters nothing"
    );

    // The step alone.
    assert_eq!(
        listed(&api, &served, "?step=ship").await,
        vec![shipping.clone()]
    );
    assert_eq!(
        listed(&api, &served, "?step=check").await,
        vec![b_2.clone(), b50.clone(), a1.clone()]
    );
    assert!(listed(&api, &served, "?step=nowhere").await.is_empty());

    // The text alone: any case, in the message, the key or the run id;
    // `%` and `_` are the characters themselves.
    assert_eq!(listed(&api, &served, "?q=b-50%25").await, vec![b50.clone()]);
    assert_eq!(listed(&api, &served, "?q=%25").await, vec![b50.clone()]);
    assert_eq!(listed(&api, &served, "?q=B_").await, vec![b_2.clone()]);
    assert_eq!(
        listed(&api, &served, "?q=SHIP%20ORDER").await,
        vec![shipping.clone()]
    );
    assert_eq!(
        listed(&api, &served, &format!("?q={}", &a1[..13])).await,
        vec![a1.clone()]
    );

    // Combined.
    assert_eq!(
        listed(&api, &served, "?step=ship&q=c-3").await,
        vec![shipping.clone()]
    );
    assert!(listed(&api, &served, "?step=ship&q=a-1").await.is_empty());
    assert_eq!(
        listed(&api, &served, "?step=check&q=order%20b").await,
        vec![b_2.clone(), b50.clone()]
    );

    // A filtered list pages with its own cursor.
    let (status, first) = api.get(&served.url("/approvals?step=check&limit=2")).await;
    assert_eq!(status, 200, "{first}");
    assert_eq!(keys(&first), vec![b_2.clone(), b50.clone()]);
    let cursor = first["next_cursor"]
        .as_str()
        .expect("a next page")
        .to_string();
    let (status, second) = api
        .get(&served.url(&format!("/approvals?step=check&limit=2&cursor={cursor}")))
        .await;
    assert_eq!(status, 200, "{second}");
    assert_eq!(keys(&second), vec![a1.clone()]);
    assert_eq!(second["next_cursor"], Value::Null);

    // Bad input is 400, filters or not.
    for query in [
        "?step=check&cursor=not-a-cursor",
        "?q=x&limit=0",
        "?q=x&status=PENDING",
    ] {
        let (status, body) = api.get(&served.url(&format!("/approvals{query}"))).await;
        assert_eq!(
            (status, code(&body)),
            (400, "invalid_request"),
            "{query}: {body}"
        );
    }

    // The CLI reads the same store the same way.
    assert_eq!(cli_listed(&ws, &[]), all);
    assert_eq!(cli_listed(&ws, &["--step", "ship"]), vec![shipping.clone()]);
    assert_eq!(cli_listed(&ws, &["--query", "b-50%"]), vec![b50.clone()]);
    assert_eq!(
        cli_listed(
            &ws,
            &["--step", "check", "--query", "ORDER B", "--limit", "1"]
        ),
        vec![b_2.clone()]
    );
    let out = ws
        .tollgate()
        .args([
            "approvals",
            "list",
            "--spec",
            ws.spec_arg(),
            "--stuck",
            "--step",
            "ship",
        ])
        .output()
        .expect("run tollgate");
    common::assert_exit(&out, 2);
}
