//! Idempotent decisions, over real HTTP (`tollgate serve`) and the real CLI:
//! the same decider repeating the same decision for a key it already won
//! gets 200 (exit 0) with the stored outcome, `repeated: true`; any other
//! repeat (another decider, another decision, another reason or payload)
//! still gets `already_resolved` (409, exit 4). One decision is stored.

use crate::common;
use crate::common::server;

use common::{GATED_SPEC, Workspace, assert_exit, assert_success, stderr, stdout};
use serde_json::{Value, json};
use server::{Api, Served, code};

/// The agent starts the runs that alice and bob decide: whoever starts a
/// run may not decide its gates.
const TOKENS: &str = "agent:tok-agent,alice:tok-alice,bob:tok-bob";

struct Setup {
    ws: Workspace,
    served: Served,
    agent: Api,
    alice: Api,
    bob: Api,
}

fn serve() -> Setup {
    let ws = Workspace::new(GATED_SPEC);
    let served = Served::start(
        &ws.spec,
        &ws.state_db(),
        &[("TOLLGATE_API_TOKENS", TOKENS)],
        &[],
    );
    Setup {
        ws,
        served,
        agent: Api::with_token("tok-agent"),
        alice: Api::with_token("tok-alice"),
        bob: Api::with_token("tok-bob"),
    }
}

impl Setup {
    /// The agent starts a run and waits for its pause: (run id, key).
    async fn pause(&self, order: &str) -> (String, String) {
        let (status, run) = self
            .agent
            .post(
                &self.served.url("/runs?wait=true"),
                json!({"input": {"order_id": order}}),
            )
            .await;
        assert_eq!(status, 200, "{run}");
        assert_eq!(run["status"], "awaiting_approval", "{run}");
        let key = run["pending_approval"]["key"].as_str().expect("key");
        (run["id"].as_str().expect("id").to_string(), key.to_string())
    }

    async fn post(&self, who: &Api, path: &str, body: Value) -> (u16, Value) {
        who.post(&self.served.url(path), body).await
    }

    async fn resolved_events(&self, run_id: &str) -> usize {
        common::open_store(&self.ws.state_db())
            .run_events(run_id, 0)
            .await
            .expect("events")
            .iter()
            .filter(|e| e.kind.name() == "approval_resolved")
            .count()
    }
}

fn assert_conflict(answer: (u16, Value)) {
    let (status, body) = answer;
    assert_eq!(status, 409, "{body}");
    assert_eq!(code(&body), "already_resolved", "{body}");
}

#[tokio::test(flavor = "multi_thread")]
async fn the_same_approval_repeated_by_its_decider_answers_200_with_the_stored_outcome() {
    let s = serve();
    let (run_id, key) = s.pause("A-1").await;
    let approve = format!("/approvals/{key}/approve?wait=true");

    let (status, first) = s.post(&s.alice, &approve, json!({"reason": "ok"})).await;
    assert_eq!(status, 200, "{first}");
    assert_eq!(first.get("repeated"), None, "the first answer is no repeat");
    assert_eq!(first["run"]["status"], "completed", "{first}");

    let (status, again) = s.post(&s.alice, &approve, json!({"reason": "ok"})).await;
    assert_eq!(status, 200, "{again}");
    assert_eq!(again["repeated"], true, "{again}");
    assert_eq!(again["approval"], first["approval"], "the stored decision");
    assert_eq!(again["status"], "completed");
    assert_eq!(again["run"]["outputs"], first["run"]["outputs"]);

    // By run id, the same decision: a repeat too.
    let (status, by_run) = s
        .post(
            &s.alice,
            &format!("/runs/{run_id}/approve"),
            json!({"approved": true, "reason": "ok"}),
        )
        .await;
    assert_eq!(status, 200, "{by_run}");
    assert_eq!(by_run["repeated"], true);

    // Anything else is a conflict.
    let plain = format!("/approvals/{key}/approve");
    assert_conflict(s.post(&s.bob, &plain, json!({"reason": "ok"})).await);
    assert_conflict(s.post(&s.alice, &plain, json!({"reason": "fine"})).await);
    assert_conflict(s.post(&s.alice, &plain, json!({})).await);
    assert_conflict(
        s.post(
            &s.alice,
            &plain,
            json!({"reason": "ok", "payload": {"order": "A-1"}}),
        )
        .await,
    );
    assert_conflict(
        s.post(
            &s.alice,
            &format!("/approvals/{key}/reject"),
            json!({"reason": "ok"}),
        )
        .await,
    );
    assert_eq!(s.resolved_events(&run_id).await, 1, "one decision stored");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_modify_repeats_with_an_equal_payload_and_a_reject_with_the_same_reason() {
    let s = serve();
    let (modified_run, key) = s.pause("M-1").await;
    let approve = format!("/approvals/{key}/approve");
    let payload = json!({"order": "M-1", "note": "gift wrap"});
    let (status, first) = s
        .post(&s.alice, &approve, json!({"payload": payload}))
        .await;
    assert_eq!(status, 200, "{first}");
    assert_eq!(first["approval"]["status"], "MODIFIED");
    // Equal JSON, other key order: the same payload.
    let reordered: Value =
        serde_json::from_str(r#"{"note": "gift wrap", "order": "M-1"}"#).unwrap();
    let (status, again) = s
        .post(&s.alice, &approve, json!({"payload": reordered}))
        .await;
    assert_eq!(status, 200, "{again}");
    assert_eq!(again["repeated"], true);
    assert_eq!(
        again["approval"]["decision_data"],
        first["approval"]["decision_data"]
    );
    assert_conflict(
        s.post(
            &s.alice,
            &approve,
            json!({"payload": {"order": "M-1", "note": "no wrap"}}),
        )
        .await,
    );
    assert_conflict(s.post(&s.alice, &approve, json!({})).await);
    assert_eq!(s.resolved_events(&modified_run).await, 1);

    let (rejected_run, key) = s.pause("R-1").await;
    let reject = format!("/approvals/{key}/reject");
    let (status, first) = s.post(&s.bob, &reject, json!({"reason": "no stock"})).await;
    assert_eq!(status, 200, "{first}");
    let (status, again) = s.post(&s.bob, &reject, json!({"reason": "no stock"})).await;
    assert_eq!(status, 200, "{again}");
    assert_eq!(again["repeated"], true);
    assert_eq!(again["approval"]["status"], "REJECTED");
    assert_conflict(
        s.post(&s.bob, &reject, json!({"reason": "out of stock"}))
            .await,
    );
    assert_conflict(s.post(&s.bob, &reject, json!({})).await);
    assert_conflict(
        s.post(&s.alice, &reject, json!({"reason": "no stock"}))
            .await,
    );
    assert_eq!(s.resolved_events(&rejected_run).await, 1);
}

#[tokio::test(flavor = "multi_thread")]
async fn one_decider_sending_the_same_decision_eight_times_at_once_gets_eight_200s() {
    let s = serve();
    let (run_id, key) = s.pause("C-1").await;
    let url = s.served.url(&format!("/approvals/{key}/approve"));
    let tasks: Vec<_> = (0..8)
        .map(|_| {
            let (api, url) = (s.alice.clone(), url.clone());
            tokio::spawn(async move { api.post(&url, json!({"reason": "ok"})).await })
        })
        .collect();
    let mut won = 0;
    for task in tasks {
        let (status, body) = task.await.expect("task");
        assert_eq!(status, 200, "{body}");
        if body.get("repeated").is_none() {
            won += 1;
        }
        assert_eq!(body["approval"]["decided_by"], "alice");
    }
    assert_eq!(won, 1, "one request decided, the others are repeats");
    assert_eq!(s.resolved_events(&run_id).await, 1);
}

#[test]
fn the_cli_repeating_a_decision_exits_0_with_the_stored_outcome_anything_else_exits_4() {
    let ws = Workspace::new(GATED_SPEC);
    let key = ws.pause_run(r#"{"order_id": "L-1"}"#);
    let decide = |verb: &str, args: &[&str]| ws.decide(verb, &key).args(args).output().unwrap();

    assert_success(&decide("approve", &["--by", "alice", "--reason", "ok"]));
    let again = decide("approve", &["--by", "alice", "--reason", "ok"]);
    assert_success(&again);
    assert!(
        stderr(&again).contains("already approved by alice"),
        "{}",
        stderr(&again)
    );
    assert!(
        stdout(&again).contains("completed"),
        "the stored outcome: {}",
        stdout(&again)
    );

    let json = decide("approve", &["--by", "alice", "--reason", "ok", "--json"]);
    assert_success(&json);
    let line: Value = serde_json::from_str(stdout(&json).trim()).expect("one JSON line");
    assert_eq!(line["repeated"], true);
    assert_eq!(line["approval"]["status"], "APPROVED");
    assert_eq!(line["run"]["status"], "completed");

    for (verb, args) in [
        ("approve", &["--by", "bob", "--reason", "ok"][..]),
        ("approve", &["--by", "alice", "--reason", "fine"][..]),
        ("approve", &["--by", "alice"][..]),
        ("reject", &["--by", "alice", "--reason", "ok"][..]),
    ] {
        let out = decide(verb, args);
        assert_exit(&out, 4);
        assert!(
            stderr(&out).contains("already_resolved"),
            "{}",
            stderr(&out)
        );
    }

    // A reject that won exits 5 (the run ended rejected); its repeat is
    // done, exit 0.
    let key = ws.pause_run(r#"{"order_id": "L-2"}"#);
    let reject = |by: &str| {
        ws.decide("reject", &key)
            .args(["--by", by, "--reason", "no"])
            .output()
            .unwrap()
    };
    assert_exit(&reject("alice"), 5);
    let again = reject("alice");
    assert_success(&again);
    assert!(
        stderr(&again).contains("already rejected"),
        "{}",
        stderr(&again)
    );
    assert_exit(&reject("bob"), 4);
}
