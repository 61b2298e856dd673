//! `tollgate runs list|show|cancel` through the real binary: read-only
//! commands never create a store, listing is newest first with a status
//! filter, a cancel ends a waiting run and its approval (CANCELLED, kept in
//! the audit trail), and conflicts, unknown runs and outsiders get their
//! exit statuses (4, 3, 6).

use crate::common;

use common::{GATED_SPEC, Workspace, assert_exit, assert_success, stderr, stdout};
use serde_json::Value;

fn runs(ws: &Workspace, args: &[&str]) -> std::process::Output {
    ws.tollgate()
        .arg("runs")
        .args(args)
        .output()
        .expect("run tollgate")
}

fn run_id_of(ws: &Workspace, key: &str) -> String {
    let out = ws
        .tollgate()
        .args(["approvals", "show", key, "--spec", ws.spec_arg(), "--json"])
        .output()
        .unwrap();
    assert_success(&out);
    let record: Value = serde_json::from_str(&stdout(&out)).unwrap();
    record["run_id"].as_str().unwrap().to_string()
}

#[test]
fn read_only_runs_commands_never_create_a_store() {
    let ws = Workspace::new(GATED_SPEC);
    for args in [
        vec!["list", "--spec", ws.spec_arg()],
        vec!["show", "some-run", "--spec", ws.spec_arg()],
    ] {
        let out = runs(&ws, &args);
        assert_exit(&out, 3);
        let err = stderr(&out);
        assert!(
            err.contains("no state store at") && err.contains(".tollgate"),
            "says where it looked: {err}"
        );
    }
    let elsewhere = ws.path().join("nowhere.db");
    let out = runs(&ws, &["list", "--state", elsewhere.to_str().unwrap()]);
    assert_exit(&out, 3);
    assert!(stderr(&out).contains("nowhere.db"), "{}", stderr(&out));
    assert!(!ws.path().join(".tollgate").exists(), "nothing was created");
    assert!(!elsewhere.exists(), "nothing was created");
}

#[test]
fn runs_list_shows_newest_first_and_filters_by_status() {
    let ws = Workspace::new(GATED_SPEC);
    let first = ws.pause_run(r#"{"order_id": "A-1"}"#);
    let second = ws.pause_run(r#"{"order_id": "A-2"}"#);
    assert_success(&ws.decide("approve", &first).output().unwrap());
    let (first_run, second_run) = (run_id_of(&ws, &first), run_id_of(&ws, &second));

    let out = runs(&ws, &["list", "--spec", ws.spec_arg(), "--json"]);
    assert_success(&out);
    let listed: Value = serde_json::from_str(&stdout(&out)).unwrap();
    let ids: Vec<&str> = listed["runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, vec![second_run.as_str(), first_run.as_str()]);

    let out = runs(
        &ws,
        &["list", "--spec", ws.spec_arg(), "--status", "completed"],
    );
    assert_success(&out);
    let text = stdout(&out);
    assert!(
        text.contains(&first_run) && !text.contains(&second_run),
        "{text}"
    );
    assert!(text.starts_with("RUN"), "a table: {text}");

    let out = runs(&ws, &["list", "--spec", ws.spec_arg(), "--status", "stuck"]);
    assert_success(&out);
    assert_eq!(stdout(&out).trim(), "no runs");

    let out = runs(&ws, &["list", "--spec", ws.spec_arg(), "--status", "done"]);
    assert_exit(&out, 2);
    assert!(
        stderr(&out).contains("not a run status"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn runs_cancel_ends_a_waiting_run_and_cancels_its_approval() {
    let ws = Workspace::new(GATED_SPEC);
    let key = ws.pause_run(r#"{"order_id": "X-1"}"#);
    let run_id = run_id_of(&ws, &key);

    let out = runs(
        &ws,
        &[
            "cancel",
            &run_id,
            "--spec",
            ws.spec_arg(),
            "--reason",
            "duplicate order",
            "--by",
            "ops",
        ],
    );
    assert_success(&out);
    let text = stdout(&out);
    assert!(text.contains("cancelled by ops"), "{text}");
    assert!(
        text.contains(&format!("approval {key} is CANCELLED")),
        "{text}"
    );

    let out = runs(&ws, &["show", &run_id, "--spec", ws.spec_arg()]);
    assert_success(&out);
    let text = stdout(&out);
    assert!(text.contains("status:      cancelled"), "{text}");
    assert!(text.contains("cancelled by ops: duplicate order"), "{text}");
    assert!(text.contains("CANCELLED"), "{text}");
    assert!(text.contains("run_cancelled"), "{text}");

    let out = runs(&ws, &["show", &run_id, "--spec", ws.spec_arg(), "--json"]);
    assert_success(&out);
    let shown: Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(shown["run"]["status"], "cancelled");
    assert_eq!(shown["approval"]["status"], "CANCELLED");
    assert_eq!(shown["approval"]["decided_by"], "ops");
    let last = shown["events"].as_array().unwrap().last().unwrap().clone();
    assert_eq!(last["type"], "run_cancelled");
    assert_eq!(last["by"], "ops");
    assert_eq!(last["reason"], "duplicate order");

    let out = ws
        .tollgate()
        .args(["approvals", "show", &key, "--spec", ws.spec_arg()])
        .output()
        .unwrap();
    assert_success(&out);
    assert!(stdout(&out).contains("CANCELLED"), "{}", stdout(&out));

    // Deciding it now, or cancelling again, is a conflict.
    let out = ws.decide("approve", &key).output().unwrap();
    assert_exit(&out, 4);
    assert!(
        stderr(&out).contains("already_resolved"),
        "{}",
        stderr(&out)
    );
    let out = runs(&ws, &["cancel", &run_id, "--spec", ws.spec_arg()]);
    assert_exit(&out, 4);
    assert!(
        stderr(&out).contains("run_not_cancellable"),
        "{}",
        stderr(&out)
    );
    let out = runs(&ws, &["cancel", "no-such-run", "--spec", ws.spec_arg()]);
    assert_exit(&out, 3);
    let out = runs(&ws, &["show", "no-such-run", "--spec", ws.spec_arg()]);
    assert_exit(&out, 3);
}

#[test]
fn runs_cancel_applies_the_approvers_list_and_prints_its_event_as_json() {
    let ws =
        Workspace::new(&GATED_SPEC.replace("steps:", "approvals:\n  approvers: [alice]\nsteps:"));
    let key = ws.pause_run(r#"{"order_id": "Y-1"}"#);
    let run_id = run_id_of(&ws, &key);
    let out = runs(
        &ws,
        &[
            "cancel",
            &run_id,
            "--spec",
            ws.spec_arg(),
            "--by",
            "mallory",
        ],
    );
    assert_exit(&out, 6);
    assert!(stderr(&out).contains("forbidden"), "{}", stderr(&out));

    let out = runs(
        &ws,
        &[
            "cancel",
            &run_id,
            "--spec",
            ws.spec_arg(),
            "--by",
            "alice",
            "--json",
        ],
    );
    assert_success(&out);
    let event: Value = serde_json::from_str(stdout(&out).trim()).unwrap();
    assert_eq!(event["type"], "run_cancelled");
    assert_eq!(event["by"], "alice");
    assert_eq!(event["run_id"], run_id.as_str());
}

// ------------------------------------------- an operator's fail is final

mod operator_decisions {
    //! `runs fail` of a stuck run is final for `runs retry`: a later retry
    //! is refused (409 `run_conflict`, exit 4) naming who failed the run,
    //! when and why, unless forced; a retry and a fail racing on one run
    //! (over HTTP, or the command line against a server) have exactly one
    //! winner, and the run's events show which.

    use crate::common;
    use crate::common::server::{self, Api, Served};
    use crate::common::stub_server::StubServer;
    use crate::common::stuck::{LEASE, eventually, holding_stub, ship_spec};

    use common::{Workspace, assert_exit, stderr, stdout};
    use serde_json::{Value, json};

    fn start(ws: &Workspace) -> Served {
        Served::start(
            &ws.spec,
            &ws.path().join("state.db"),
            &[("TOLLGATE_RUN_LEASE", LEASE)],
            &[],
        )
    }

    /// `count` ship-desk runs left `stuck`: each approved with its call held
    /// by the stub, the server killed, and a new one started (returned),
    /// which finds every call in doubt.
    async fn stuck_runs(ws: &Workspace, stub: &StubServer, count: usize) -> (Served, Vec<String>) {
        let api = Api::new();
        let mut first = start(ws);
        let mut runs = Vec::new();
        for n in 1..=count {
            let (code, run) = api
                .post(&first.url("/runs?wait=true"), json!({"input": {}}))
                .await;
            assert_eq!(code, 200, "{run}");
            let key = run["pending_approval"]["key"].as_str().unwrap().to_string();
            let (code, body) = api
                .post(&first.url(&format!("/approvals/{key}/approve")), json!({}))
                .await;
            assert_eq!(code, 200, "{body}");
            eventually("the approved call reaches the stub", async || {
                stub.count() >= n
            })
            .await;
            runs.push(run["id"].as_str().unwrap().to_string());
        }
        first.kill();
        let second = start(ws);
        for run_id in &runs {
            api.wait_for_status(&second, run_id, "stuck").await;
        }
        (second, runs)
    }

    fn events(ws: &Workspace, run_id: &str) -> Vec<Value> {
        let out = ws
            .tollgate()
            .args(["runs", "show", run_id, "--spec", ws.spec_arg(), "--json"])
            .args(["--state", ws.path().join("state.db").to_str().unwrap()])
            .output()
            .unwrap();
        common::assert_success(&out);
        let shown: Value = serde_json::from_str(&stdout(&out)).unwrap();
        shown["events"].as_array().unwrap().clone()
    }

    fn calls_for(stub: &StubServer, run_id: &str) -> usize {
        stub.requests_to("/ship")
            .into_iter()
            .filter(|c| c.json()["run"] == run_id)
            .count()
    }

    fn retry_cli(ws: &Workspace, run_id: &str, extra: &[&str]) -> std::process::Output {
        ws.tollgate()
            .args(["runs", "retry", run_id, "--spec", ws.spec_arg()])
            .args(["--state", ws.path().join("state.db").to_str().unwrap()])
            .args(["--by", "alice"])
            .args(extra)
            .output()
            .unwrap()
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn a_retry_after_an_operators_fail_is_refused_naming_who_when_and_why_unless_forced() {
        let stub = holding_stub(1);
        let ws = Workspace::new(&ship_spec(&stub.url("/ship"), None));
        let (served, runs) = stuck_runs(&ws, &stub, 1).await;
        let run_id = &runs[0];
        let api = Api::new();
        let (code, run) = api
            .post(
                &served.url(&format!("/runs/{run_id}/fail")),
                json!({"reason": "refunded by hand"}),
            )
            .await;
        assert_eq!(code, 200, "{run}");
        let failed = events(&ws, run_id).last().cloned().unwrap();
        assert_eq!(failed["type"], "run_failed", "{failed}");
        assert_eq!(failed["by"], "local", "{failed}");
        assert_eq!(failed["reason"], "refunded by hand", "{failed}");
        let when = failed["at"].as_str().unwrap().to_string();

        // HTTP: refused, saying who, when and why; nothing changes.
        for body in [json!({}), json!({"force": false})] {
            let (code, refused) = api
                .post(&served.url(&format!("/runs/{run_id}/retry")), body)
                .await;
            assert_eq!(
                (code, server::code(&refused)),
                (409, "run_conflict"),
                "{refused}"
            );
            let message = refused["error"]["message"].as_str().unwrap();
            for part in ["local", "refunded by hand", "--force", "\"force\": true"] {
                assert!(message.contains(part), "{part:?} in {message}");
            }
            // The time is named as stored (to the second at least).
            assert!(message.contains(&when[..19]), "{when} in {message}");
        }
        let (code, bad) = api
            .post(
                &served.url(&format!("/runs/{run_id}/retry")),
                json!({"force": "yes"}),
            )
            .await;
        assert_eq!(code, 400, "{bad}");
        // The command line: exit 4 with the same story.
        let out = retry_cli(&ws, run_id, &[]);
        assert_exit(&out, 4);
        let err = stderr(&out);
        assert!(
            err.contains("run_conflict")
                && err.contains("local")
                && err.contains("refunded by hand"),
            "{err}"
        );
        let (_, run) = api.get(&served.url(&format!("/runs/{run_id}"))).await;
        assert_eq!(run["status"], "failed", "{run}");
        assert_eq!(calls_for(&stub, run_id), 1, "nothing re-sent");
        assert_eq!(events(&ws, run_id).last().unwrap()["type"], "run_failed");

        // Forced: the call is re-sent (same Idempotency-Key) and the run
        // completes; the audit says the retry was forced, and by whom.
        let out = retry_cli(&ws, run_id, &["--force"]);
        common::assert_success(&out);
        assert!(stdout(&out).contains("completed"), "{}", stdout(&out));
        assert_eq!(calls_for(&stub, run_id), 2);
        let all = events(&ws, run_id);
        // The last one: the restarted server's own recovery came first.
        let recovered = all
            .iter()
            .rfind(|e| e["type"] == "run_recovered")
            .unwrap_or_else(|| panic!("no run_recovered: {all:?}"));
        assert_eq!(recovered["by"], "alice");
        assert_eq!(recovered["forced"], true);
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn a_forced_retry_over_http_drives_an_operator_failed_run_on() {
        let stub = holding_stub(1);
        let ws = Workspace::new(&ship_spec(&stub.url("/ship"), None));
        let (served, runs) = stuck_runs(&ws, &stub, 1).await;
        let run_id = &runs[0];
        let out = ws
            .tollgate()
            .args(["runs", "fail", run_id, "--spec", ws.spec_arg()])
            .args(["--state", ws.path().join("state.db").to_str().unwrap()])
            .args(["--by", "alice", "--reason", "shipped by hand"])
            .output()
            .unwrap();
        common::assert_success(&out);
        let api = Api::new();
        let (code, run) = api
            .post(
                &served.url(&format!("/runs/{run_id}/retry?wait=true")),
                json!({"force": true}),
            )
            .await;
        assert_eq!(code, 200, "{run}");
        assert_eq!(run["status"], "completed", "{run}");
        assert_eq!(calls_for(&stub, run_id), 2);
        let all = events(&ws, run_id);
        let kinds: Vec<&str> = all.iter().filter_map(|e| e["type"].as_str()).collect();
        let failed_at = kinds.iter().position(|k| *k == "run_failed").unwrap();
        let recovered_at = kinds.iter().rposition(|k| *k == "run_recovered").unwrap();
        assert!(failed_at < recovered_at, "{kinds:?}");
        assert_eq!(all[failed_at]["by"], "alice");
        assert_eq!(all[recovered_at]["forced"], true);
    }

    /// What one retry-and-fail pair left: the winner's answer, the loser's
    /// 409, and a run whose events and downstream calls agree with it.
    async fn check_one_winner(
        ws: &Workspace,
        api: &Api,
        served: &Served,
        stub: &StubServer,
        run_id: &str,
        retry_won: bool,
    ) {
        let all = events(ws, run_id);
        let kinds: Vec<&str> = all.iter().filter_map(|e| e["type"].as_str()).collect();
        let stuck_at = kinds.iter().rposition(|k| *k == "run_stuck").unwrap();
        let after = &all[stuck_at + 1..];
        if retry_won {
            let run = api.wait_for_status(served, run_id, "completed").await;
            assert_eq!(run["status"], "completed");
            assert_eq!(after[0]["type"], "run_recovered", "{kinds:?}");
            assert!(
                after.iter().all(|e| e["type"] != "run_failed"),
                "no operator fail after the retry won: {kinds:?}"
            );
            assert_eq!(calls_for(stub, run_id), 2, "re-sent once by the retry");
        } else {
            let (_, run) = api.get(&served.url(&format!("/runs/{run_id}"))).await;
            assert_eq!(run["status"], "failed", "{run}");
            assert_eq!(after.len(), 1, "the fail only: {kinds:?}");
            assert_eq!(after[0]["type"], "run_failed");
            assert!(after[0]["by"].is_string(), "{}", after[0]);
            assert_eq!(calls_for(stub, run_id), 1, "the fail re-sent nothing");
        }
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn a_retry_and_a_fail_racing_on_one_stuck_run_have_exactly_one_winner() {
        const OVER_HTTP: usize = 10;
        const ACROSS_PROCESSES: usize = 4;
        let stub = holding_stub(OVER_HTTP + ACROSS_PROCESSES);
        let ws = Workspace::new(&ship_spec(&stub.url("/ship"), None));
        let (served, runs) = stuck_runs(&ws, &stub, OVER_HTTP + ACROSS_PROCESSES).await;
        let api = Api::new();
        let (http_runs, cli_runs) = runs.split_at(OVER_HTTP);

        // Every pair sent at once over HTTP, all pairs together.
        let mut pairs = Vec::new();
        for run_id in http_runs {
            let (api, retry_url, fail_url) = (
                api.clone(),
                served.url(&format!("/runs/{run_id}/retry")),
                served.url(&format!("/runs/{run_id}/fail")),
            );
            let run_id = run_id.clone();
            pairs.push(tokio::spawn(async move {
                let retry = api.post(&retry_url, json!({}));
                let fail = api.post(&fail_url, json!({"reason": "racing"}));
                let ((r, rbody), (f, fbody)) = tokio::join!(retry, fail);
                (run_id, r, rbody, f, fbody)
            }));
        }
        let mut answers = Vec::new();
        for pair in pairs {
            answers.push(pair.await.unwrap());
        }
        let mut wins = (0, 0);
        for (run_id, r, rbody, f, fbody) in answers {
            let retry_won = match (r, f) {
                (200, 409) => {
                    assert_eq!(server::code(&fbody), "run_conflict", "{fbody}");
                    true
                }
                (409, 200) => {
                    assert_eq!(server::code(&rbody), "run_conflict", "{rbody}");
                    let message = rbody["error"]["message"].as_str().unwrap_or("");
                    assert!(
                        message.contains("racing") || message.contains("changed"),
                        "{message}"
                    );
                    false
                }
                other => panic!(
                    "run {run_id}: expected one 200 and one 409, got {other:?}: {rbody} {fbody}"
                ),
            };
            if retry_won {
                wins.0 += 1;
            } else {
                wins.1 += 1;
            }
            check_one_winner(&ws, &api, &served, &stub, &run_id, retry_won).await;
        }
        eprintln!("over HTTP: retry won {}, fail won {}", wins.0, wins.1);

        // A `runs fail` process against the server's retry.
        // The fail process needs a moment to start: the retry is sent a
        // little later each time, so that the two land in either order
        // (the assertions hold for both).
        for (n, run_id) in cli_runs.iter().enumerate() {
            let fail = ws
                .tollgate()
                .args(["runs", "fail", run_id, "--spec", ws.spec_arg()])
                .args(["--state", ws.path().join("state.db").to_str().unwrap()])
                .args(["--by", "alice", "--reason", "racing"])
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap();
            tokio::time::sleep(std::time::Duration::from_millis(40 * n as u64)).await;
            let (r, rbody) = api
                .post(&served.url(&format!("/runs/{run_id}/retry")), json!({}))
                .await;
            let out = tokio::task::spawn_blocking(move || fail.wait_with_output().unwrap())
                .await
                .unwrap();
            let retry_won = match (r, out.status.code()) {
                (200, Some(4)) => true,
                (409, Some(0)) => false,
                other => panic!(
                    "run {run_id}: expected one winner, got {other:?}: {rbody} {}",
                    stderr(&out)
                ),
            };
            check_one_winner(&ws, &api, &served, &stub, run_id, retry_won).await;
        }
    }
}
