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
