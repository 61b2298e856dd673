//! Error messages that say what to do (issue 42, "Errors and help"): each
//! case is one a new user met and could not act on.

use serde_json::json;
use tollgate_runtime::Spec;

use crate::common::server::{Api, Served, code};
use crate::common::*;

/// GATED_SPEC with the gate's message reworded: its pauses are
/// `message_changed`, refused under the default `on_spec_change: refuse`.
fn reworded() -> String {
    GATED_SPEC.replace("message: \"Ship order", "message: \"Send order")
}

#[test]
fn serve_on_an_address_in_use_names_the_address_and_listen() {
    let ws = Workspace::new(GATED_SPEC);
    let taken = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let address = taken.local_addr().expect("address").to_string();
    let refused = match Served::try_start(&ws.spec, &ws.state_db(), &[], &["--listen", &address]) {
        Ok(_) => panic!("serve started on {address}, which another socket holds"),
        Err(failure) => failure,
    };
    // The exit status it always had for a bind failure.
    assert_eq!(refused.code, Some(1), "{}", refused.stderr);
    assert!(
        refused.stderr.contains(&format!(
            "error: cannot listen on {address}: address already in use"
        )),
        "{}",
        refused.stderr
    );
    assert!(
        refused.stderr.contains("--listen ADDR"),
        "names the option: {}",
        refused.stderr
    );
}

#[test]
fn run_persist_refuses_before_starting_when_the_specs_variables_are_unset() {
    let ws = Workspace::new(
        r#"version: 1
agent: secret-desk
tools:
  notify:
    http:
      method: POST
      url: http://127.0.0.1:9/notify
      headers:
        Authorization: "Bearer ${TG_ERRTEST_TOKEN}"
        X-Team: "${TG_ERRTEST_TEAM}"
        X-Optional: "${TG_ERRTEST_OPTIONAL:-none}"
steps:
  - id: gate
    approval:
      message: "Notify?"
  - id: call
    tool: notify
"#,
    );
    let out = ws
        .tollgate()
        .args(["run", ws.spec_arg(), "--persist"])
        .env_remove("TG_ERRTEST_TOKEN")
        .env("TG_ERRTEST_TEAM", "s3cret-team-value")
        .env_remove("TG_ERRTEST_OPTIONAL")
        .output()
        .expect("run tollgate");
    assert_exit(&out, 2);
    let err = stderr(&out);
    assert!(err.contains("TG_ERRTEST_TOKEN"), "{err}");
    assert!(
        !err.contains("TG_ERRTEST_TEAM") && !err.contains("TG_ERRTEST_OPTIONAL"),
        "only the unset variable without a default: {err}"
    );
    assert!(!err.contains("s3cret-team-value"), "{err}");
    // Refused before anything was stored: no run waits for a person.
    assert!(!ws.state_db().exists(), "{err}");

    // Both unset: both named.
    let out = ws
        .tollgate()
        .args(["run", ws.spec_arg(), "--persist"])
        .env_remove("TG_ERRTEST_TOKEN")
        .env_remove("TG_ERRTEST_TEAM")
        .output()
        .expect("run tollgate");
    assert_exit(&out, 2);
    let err = stderr(&out);
    assert!(
        err.contains("TG_ERRTEST_TOKEN") && err.contains("TG_ERRTEST_TEAM"),
        "{err}"
    );
}

#[test]
fn an_empty_approval_key_is_named_as_empty_on_the_command_line() {
    let ws = Workspace::new(GATED_SPEC);
    ws.pause_run(r#"{"order_id": "E-1"}"#);
    for args in [
        vec!["approvals", "approve", "", "--spec", ws.spec_arg()],
        vec!["approvals", "reject", "", "--spec", ws.spec_arg()],
        vec!["approvals", "show", ""],
        vec!["approvals", "votes", ""],
    ] {
        let out = ws.tollgate().args(&args).output().expect("run tollgate");
        assert_exit(&out, 2);
        let err = stderr(&out);
        assert!(err.contains("the approval key is empty"), "{args:?}: {err}");
        assert!(!err.contains("no approval with key"), "{args:?}: {err}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_changed_spec_points_to_migrate_and_auto_and_an_empty_key_is_a_bad_request() {
    let ws = Workspace::new(GATED_SPEC);
    let key = ws.pause_run(r#"{"order_id": "M-1"}"#);
    ws.write_spec(&reworded());

    // `plan` says how to keep the refused approval decidable.
    let out = ws
        .tollgate()
        .args(["plan", ws.spec_arg()])
        .output()
        .expect("run tollgate");
    assert_success(&out);
    let plan = stdout(&out);
    assert!(plan.contains("tollgate approvals migrate"), "{plan}");
    assert!(plan.contains("on_spec_change: auto"), "{plan}");

    // So does the refusal itself, on the command line ...
    let out = ws.decide("approve", &key).output().expect("run tollgate");
    assert_exit(&out, 4);
    let err = stderr(&out);
    assert!(err.contains("tollgate approvals migrate"), "{err}");
    assert!(err.contains("on_spec_change: auto"), "{err}");

    // ... and over HTTP (409 spec_changed).
    let served = Served::start(&ws.spec, &ws.state_db(), &[], &[]);
    let api = Api::new();
    let (status, body) = api
        .post(&served.url(&format!("/approvals/{key}/approve")), json!({}))
        .await;
    assert_eq!((status, code(&body)), (409, "spec_changed"), "{body}");
    let message = body["error"]["message"].as_str().unwrap_or("");
    assert!(message.contains("tollgate approvals migrate"), "{body}");
    assert!(message.contains("on_spec_change: auto"), "{body}");

    // An empty key is a malformed request, said as such, on every route
    // that takes one.
    for (path, what) in [
        ("/approvals//approve", "the approval key is empty"),
        ("/approvals//reject", "the approval key is empty"),
        ("/runs//approve", "the run id or approval key is empty"),
    ] {
        let (status, body) = api.post(&served.url(path), json!({})).await;
        assert_eq!(
            (status, code(&body)),
            (400, "invalid_request"),
            "{path}: {body}"
        );
        assert_eq!(body["error"]["message"], what, "{path}: {body}");
    }
    let (status, body) = api.get(&served.url("/approvals/")).await;
    assert_ne!(status, 200, "{body}");
}

#[test]
fn migrate_accepts_a_spec_with_a_rust_tool_as_plan_does() {
    let ws = Workspace::new(GATED_SPEC);
    let key = ws.pause_run(r#"{"order_id": "R-1"}"#);
    // The gate is unchanged; a step after it calls a tool only an export
    // implements. Nothing a migration does runs a tool.
    ws.write_spec(&format!(
        "{}  - id: score\n    tool: score_risk\ntools:\n  score_risk:\n    rust: {{}}\n",
        GATED_SPEC
    ));
    let out = ws
        .tollgate()
        .args(["plan", ws.spec_arg(), "--json"])
        .output()
        .expect("run tollgate");
    assert_success(&out);

    let out = ws
        .tollgate()
        .args([
            "approvals",
            "migrate",
            "--to",
            ws.spec_arg(),
            "--all",
            "--yes",
        ])
        .output()
        .expect("run tollgate");
    assert_success(&out);
    let listed = ws
        .tollgate()
        .args(["approvals", "show", &key, "--spec", ws.spec_arg(), "--json"])
        .output()
        .expect("run tollgate");
    assert_success(&listed);
    let record: serde_json::Value = serde_json::from_str(&stdout(&listed)).expect("JSON");
    let migrated_to = Spec::load(&ws.spec).expect("spec").hash.to_string();
    assert_eq!(record["spec_hash"], migrated_to.as_str(), "{record}");
}
