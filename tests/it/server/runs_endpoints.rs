//! GET /runs and POST /runs/{id}/cancel over real HTTP (`tollgate serve`):
//! listing newest first with a status filter and a cursor, bad input as 400,
//! a cancel that ends a waiting run and its approval (CANCELLED, kept), a
//! cancel of a final run as 409, the approvers list applied to cancels, and
//! cancels racing decisions with exactly one winner per approval.

use crate::common;
use crate::common::server;
use crate::common::stub_server;

use std::collections::BTreeMap;
use std::time::Duration;

use common::{GATED_SPEC, Workspace};
use serde_json::{Value, json};
use server::{Api, Served, code};
use stub_server::{Response, StubServer};

/// `agent` starts runs that others decide: whoever starts a run may not
/// decide its gates.
const TOKENS: &str = "agent:tok-agent,alice:tok-alice,bob:tok-bob,ops:tok-ops,d1:tok-d1,d2:tok-d2,d3:tok-d3,c1:tok-c1,c2:tok-c2";

fn serve(spec: &str) -> (Workspace, Served) {
    let ws = Workspace::new(spec);
    let served = Served::start(
        &ws.spec,
        &ws.state_db(),
        &[("TOLLGATE_API_TOKENS", TOKENS)],
        &[],
    );
    (ws, served)
}

async fn pause(api: &Api, served: &Served, order: &str) -> (String, String) {
    let (status, run) = api
        .post(
            &served.url("/runs?wait=true"),
            json!({"input": {"order_id": order}}),
        )
        .await;
    assert_eq!(status, 200, "{run}");
    assert_eq!(run["status"], "awaiting_approval", "{run}");
    (
        run["id"].as_str().expect("id").to_string(),
        run["pending_approval"]["key"]
            .as_str()
            .expect("key")
            .to_string(),
    )
}

fn ids(page: &Value) -> Vec<String> {
    page["runs"]
        .as_array()
        .expect("runs")
        .iter()
        .map(|r| r["id"].as_str().expect("id").to_string())
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn runs_are_listed_newest_first_filtered_by_status_page_by_page() {
    let (_ws, served) = serve(GATED_SPEC);
    let api = Api::with_token("tok-alice");
    let agent = Api::with_token("tok-agent");
    let mut started = Vec::new();
    for n in 0..5 {
        started.push(pause(&agent, &served, &format!("L-{n}")).await.0);
    }
    let (status, done) = api
        .post(
            &served.url(&format!("/runs/{}/approve?wait=true", started[0])),
            json!({"approved": true}),
        )
        .await;
    assert_eq!(status, 200, "{done}");
    let (status, _) = api
        .post(
            &served.url(&format!("/runs/{}/cancel", started[1])),
            json!({}),
        )
        .await;
    assert_eq!(status, 200);

    let newest_first: Vec<String> = started.iter().rev().cloned().collect();
    let (status, page) = api.get(&served.url("/runs")).await;
    assert_eq!(status, 200, "{page}");
    assert_eq!(ids(&page), newest_first);
    assert_eq!(page["next_cursor"], Value::Null);
    let first = &page["runs"][0];
    for field in ["id", "agent", "status", "error", "created_at", "updated_at"] {
        assert!(first.get(field).is_some(), "{field} in {first}");
    }

    // Two at a time, following next_cursor.
    let mut walked = Vec::new();
    let mut url = served.url("/runs?limit=2");
    loop {
        let (status, page) = api.get(&url).await;
        assert_eq!(status, 200, "{page}");
        walked.extend(ids(&page));
        match page["next_cursor"].as_str() {
            Some(cursor) => url = served.url(&format!("/runs?limit=2&cursor={cursor}")),
            None => break,
        }
    }
    assert_eq!(walked, newest_first);

    for (status, want) in [
        ("completed", vec![started[0].clone()]),
        ("cancelled", vec![started[1].clone()]),
        (
            "awaiting_approval",
            vec![started[4].clone(), started[3].clone(), started[2].clone()],
        ),
        ("stuck", vec![]),
        ("failed", vec![]),
        ("expired", vec![]),
        ("running", vec![]),
    ] {
        let (code, page) = api
            .get(&served.url(&format!("/runs?status={status}")))
            .await;
        assert_eq!(code, 200, "{page}");
        assert_eq!(ids(&page), want, "status {status}");
    }

    for bad in [
        "/runs?status=done",
        "/runs?cursor=nonsense",
        "/runs?limit=0",
    ] {
        let (status, body) = api.get(&served.url(bad)).await;
        assert_eq!(status, 400, "{bad}: {body}");
        assert_eq!(code(&body), "invalid_request", "{bad}: {body}");
    }
    let (status, body) = Api::new().get(&served.url("/runs")).await;
    assert_eq!((status, code(&body)), (401, "unauthorized"));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_cancelled_run_and_its_approval_show_cancelled_everywhere() {
    let (ws, served) = serve(GATED_SPEC);
    let api = Api::with_token("tok-ops");
    let agent = Api::with_token("tok-agent");
    let (run_id, key) = pause(&agent, &served, "C-1").await;

    let (status, cancelled) = api
        .post(
            &served.url(&format!("/runs/{run_id}/cancel")),
            json!({"reason": "customer withdrew"}),
        )
        .await;
    assert_eq!(status, 200, "{cancelled}");
    assert_eq!(cancelled["status"], "cancelled");
    assert_eq!(cancelled["was"], "awaiting_approval");
    assert_eq!(cancelled["cancelled_by"], "ops");
    assert_eq!(cancelled["reason"], "customer withdrew");
    assert_eq!(cancelled["approval"]["status"], "CANCELLED");

    let (_, run) = api.get(&served.url(&format!("/runs/{run_id}"))).await;
    assert_eq!(run["status"], "cancelled", "{run}");
    assert_eq!(run["pending_approval"], Value::Null);
    let (_, record) = api.get(&served.url(&format!("/approvals/{key}"))).await;
    assert_eq!(record["status"], "CANCELLED", "kept in the audit trail");
    assert_eq!(record["decided_by"], "ops");
    assert_eq!(
        record["decision_data"],
        json!({"reason": "customer withdrew"})
    );
    let (_, pending) = api.get(&served.url("/approvals")).await;
    assert_eq!(pending["approvals"], json!([]));

    // The event stream has it, and ends there.
    let mut stream =
        server::SseStream::open(&api, &served.url(&format!("/runs/{run_id}/events")), None).await;
    let events = stream.collect_until_end(Duration::from_secs(30)).await;
    let last = events.last().expect("events");
    assert_eq!(last.kind(), "run_cancelled");
    assert_eq!(last.data["by"], "ops");
    assert_eq!(last.data["reason"], "customer withdrew");

    // A decision now is told it is resolved; a second cancel that the run
    // has ended; an unknown run is not found.
    let (status, body) = api
        .post(&served.url(&format!("/approvals/{key}/approve")), json!({}))
        .await;
    assert_eq!((status, code(&body)), (409, "already_resolved"), "{body}");
    let (status, body) = api
        .post(&served.url(&format!("/runs/{run_id}/cancel")), json!({}))
        .await;
    assert_eq!(
        (status, code(&body)),
        (409, "run_not_cancellable"),
        "{body}"
    );
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("cancelled"),
        "{body}"
    );
    let (status, body) = api
        .post(&served.url("/runs/no-such-run/cancel"), json!({}))
        .await;
    assert_eq!((status, code(&body)), (404, "run_not_found"), "{body}");
    let (status, body) = Api::new()
        .post(&served.url(&format!("/runs/{run_id}/cancel")), json!({}))
        .await;
    assert_eq!((status, code(&body)), (401, "unauthorized"), "{body}");

    // A completed run cannot be cancelled either.
    let (done_id, _) = pause(&agent, &served, "C-2").await;
    let (status, _) = api
        .post(
            &served.url(&format!("/runs/{done_id}/approve?wait=true")),
            json!({"approved": true}),
        )
        .await;
    assert_eq!(status, 200);
    let (status, body) = api
        .post(&served.url(&format!("/runs/{done_id}/cancel")), json!({}))
        .await;
    assert_eq!(
        (status, code(&body)),
        (409, "run_not_cancellable"),
        "{body}"
    );
    drop(ws);
}

#[tokio::test(flavor = "multi_thread")]
async fn only_listed_approvers_may_cancel() {
    let spec = GATED_SPEC.replace("steps:", "approvals:\n  approvers: [alice]\nsteps:");
    let (_ws, served) = serve(&spec);
    let alice = Api::with_token("tok-alice");
    let (run_id, key) = pause(&alice, &served, "P-1").await;
    let (status, body) = Api::with_token("tok-bob")
        .post(&served.url(&format!("/runs/{run_id}/cancel")), json!({}))
        .await;
    assert_eq!((status, code(&body)), (403, "forbidden"), "{body}");
    let (_, record) = alice.get(&served.url(&format!("/approvals/{key}"))).await;
    assert_eq!(
        record["status"], "PENDING",
        "a refused cancel changes nothing"
    );
    let (status, body) = alice
        .post(&served.url(&format!("/runs/{run_id}/cancel")), json!({}))
        .await;
    assert_eq!(status, 200, "{body}");
}

/// A gate, then a POST to the stub: the side effect a cancel must prevent.
fn shipping_spec(url: &str) -> String {
    format!(
        r#"version: 1
agent: shipper
tools:
  ship:
    http: {{ method: POST, url: "{url}", json: {{ order: "{{{{ args.order }}}}" }} }}
steps:
  - id: gate
    approval: {{ message: "Ship {{{{ input.order_id }}}}?" }}
  - id: ship
    tool: ship
    with: {{ order: "{{{{ input.order_id }}}}" }}
"#
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn cancels_racing_decisions_leave_exactly_one_winner_per_approval() {
    const RUNS: usize = 12;
    let stub = StubServer::start(|_| Response::json(200, json!({"ok": true})));
    let (ws, served) = serve(&shipping_spec(&stub.url("/ship")));
    let starter = Api::with_token("tok-alice");
    let mut paused = Vec::new();
    for n in 0..RUNS {
        paused.push(pause(&starter, &served, &format!("R-{n}")).await);
    }
    let mut tasks = Vec::new();
    for (run_id, key) in &paused {
        for who in ["d1", "c1", "d2", "c2", "d3"] {
            let api = Api::with_token(&format!("tok-{who}"));
            let url = if who.starts_with('c') {
                served.url(&format!("/runs/{run_id}/cancel"))
            } else {
                served.url(&format!("/approvals/{key}/approve"))
            };
            let run_id = run_id.clone();
            tasks.push(tokio::spawn(async move {
                let (status, body) = api.post(&url, json!({})).await;
                (run_id, who, status, body)
            }));
        }
    }
    let mut by_run: BTreeMap<String, Vec<(&str, u16, Value)>> = BTreeMap::new();
    for task in tasks {
        let (run_id, who, status, body) = task.await.expect("task");
        by_run.entry(run_id).or_default().push((who, status, body));
    }
    let store = common::open_store(&ws.state_db());
    for (run_id, key) in &paused {
        let answers = &by_run[run_id];
        let won = |prefix: char| {
            answers
                .iter()
                .filter(|(who, s, _)| who.starts_with(prefix) && *s == 200)
                .count()
        };
        for (who, status, body) in answers {
            if *status != 200 {
                let want = if who.starts_with('c') {
                    "run_not_cancellable"
                } else {
                    "already_resolved"
                };
                assert_eq!((*status, code(body)), (409, want), "{who}: {body}");
            }
        }
        let record = store.get_approval(key).await.unwrap().expect("record");
        // Let a winning decision's resume finish before judging the run.
        let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
        let run = loop {
            let run = store.get_run(run_id).await.unwrap().expect("run");
            if run.status.is_final() || tokio::time::Instant::now() > deadline {
                break run;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        };
        let shipped = stub
            .requests_to("/ship")
            .iter()
            .filter(|r| r.json()["order"] == json!(format!("R-{}", order_of(&paused, run_id))))
            .count();
        match record.status.as_str() {
            "CANCELLED" => {
                assert_eq!((won('c'), won('d')), (1, 0), "run {run_id}: {answers:?}");
                assert_eq!(run.status.as_str(), "cancelled");
                assert_eq!(shipped, 0, "a cancelled approval ships nothing");
            }
            "APPROVED" => {
                assert_eq!(won('d'), 1, "run {run_id}: {answers:?}");
                assert!(won('c') <= 1, "run {run_id}: {answers:?}");
                assert!(shipped <= 1, "run {run_id}: shipped {shipped} times");
            }
            other => panic!("run {run_id}: approval ended {other}"),
        }
    }
}

fn order_of(paused: &[(String, String)], run_id: &str) -> usize {
    paused
        .iter()
        .position(|(id, _)| id == run_id)
        .expect("a paused run")
}

/// A running run cancelled while its call is in flight: the call finishes
/// (the driver is not interrupted), and its next write is fenced off (the
/// run is no longer `running` and its own, DESIGN §9): the driver stops,
/// nothing after the step runs, and the run stays `cancelled`.
#[tokio::test(flavor = "multi_thread")]
async fn a_run_cancelled_while_its_call_is_in_flight_stays_cancelled() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};
    let released = Arc::new(AtomicBool::new(false));
    let gate = released.clone();
    let stub = StubServer::start(move |_| {
        // Hold the call until the test has cancelled the run.
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        while !gate.load(Ordering::SeqCst) && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        Response::json(200, json!({"ok": true}))
    });
    let (ws, served) = serve(&shipping_spec(&stub.url("/ship")));
    let api = Api::with_token("tok-ops");
    let (run_id, key) = pause(&Api::with_token("tok-agent"), &served, "F-1").await;
    let (status, body) = api
        .post(&served.url(&format!("/approvals/{key}/approve")), json!({}))
        .await;
    assert_eq!(status, 200, "{body}");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    while stub.count() == 0 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the call never came"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    // While its call is in flight the run shows who drives it, and until
    // when: a live lease, so nobody mistakes it for an orphan.
    let (status, shown) = api.get(&served.url(&format!("/runs/{run_id}"))).await;
    assert_eq!(status, 200, "{shown}");
    assert_eq!(shown["status"], "running");
    let owner = shown["lease"]["owner"].as_str().expect("a lease owner");
    assert_eq!(
        owner.split(':').count(),
        6,
        "owner is host:pid:random:start:boot_id:pid_ns[.time_ns]: {owner}"
    );
    assert!(owner.contains(&format!(":{}:", served.pid())), "{owner}");
    let until = shown["lease"]["until"].as_str().expect("a lease end");
    assert!(
        chrono_after_now(until),
        "a driven run's lease is live: {until}"
    );
    let (_, listed) = api.get(&served.url("/runs?status=running")).await;
    assert_eq!(listed["runs"][0]["lease"]["owner"], owner);
    let (status, cancelled) = api
        .post(
            &served.url(&format!("/runs/{run_id}/cancel")),
            json!({"reason": "stop"}),
        )
        .await;
    released.store(true, Ordering::SeqCst);
    assert_eq!(status, 200, "{cancelled}");
    assert_eq!(cancelled["was"], "running");
    assert_eq!(cancelled["approval"], Value::Null);
    // The driver's next write is fenced off: it stops, and says why.
    served
        .log_line("stopped driving the run", Duration::from_secs(60))
        .await;
    let store = common::open_store(&ws.state_db());
    let run = store.get_run(&run_id).await.unwrap().expect("run");
    assert_eq!(run.status.as_str(), "cancelled", "{:?}", run.error);
    let events = store.run_events(&run_id, 0).await.unwrap();
    assert_eq!(events.last().map(|e| e.kind.name()), Some("run_cancelled"));
    assert_eq!(stub.count(), 1, "the call in flight was made once");
    let (_, shown) = api.get(&served.url(&format!("/runs/{run_id}"))).await;
    assert_eq!(shown["lease"], Value::Null, "an ended run has no driver");
}

/// An RFC 3339 time later than now.
fn chrono_after_now(text: &str) -> bool {
    let at = chrono::DateTime::parse_from_rfc3339(text).expect("an RFC 3339 time");
    at.with_timezone(&chrono::Utc) > chrono::Utc::now()
}
