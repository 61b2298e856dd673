//! Dedupe steps, through the real binary and one SQLite state file: a key
//! claimed once skips later runs until its TTL; a run that fails after
//! claiming releases it (so a retry is not silently skipped) unless
//! `release_on_failure: false`; keys are scoped by agent.

use crate::common;
use crate::common::model_stub;
use crate::common::stub_server;

use std::path::Path;
use std::process::Output;

use serde_json::{Value, json};

use common::{Workspace, assert_exit, assert_success};
use model_stub::{event, event_types, json_reply, row_count, run_id, run_persisted, run_status};
use stub_server::{Response, StubServer};

/// `work` fails when the input has no `amount`: rendering an undefined value
/// into text is an error.
const ONCE_SPEC: &str = r#"version: 1
agent: once-only
steps:
  - id: once
    dedupe: { key: "order-{{ input.order_id }}", ttl: 1h }
  - id: work
    set: { amount: "amount {{ input.amount }}" }
"#;

fn run(ws: &Workspace, input: Value) -> Output {
    ws.tollgate()
        .args(["run", ws.spec_arg(), "--persist", "--json", "--input"])
        .arg(input.to_string())
        .output()
        .expect("run tollgate")
}

fn run_with_state(spec: &Path, state: &Path, input: Value) -> Output {
    let mut cmd = std::process::Command::new(common::tollgate_bin());
    cmd.env_remove("TOLLGATE_DATABASE_URL")
        .stdin(std::process::Stdio::null())
        .args(["run"])
        .arg(spec)
        .args(["--persist", "--json", "--state"])
        .arg(state)
        .arg("--input")
        .arg(input.to_string());
    cmd.output().expect("run tollgate")
}

fn assert_completed(ws_db: &Path, out: &Output) {
    assert_success(out);
    assert!(
        event(out, "run_completed").is_some(),
        "completed: {:?}",
        event_types(out)
    );
    assert_eq!(run_status(ws_db, &run_id(out)), "completed");
}

fn assert_skipped(db: &Path, out: &Output, key: &str) {
    assert_exit(out, 0);
    let skipped = event(out, "run_skipped").expect("a run_skipped event");
    assert_eq!(skipped["dedupe_key"], key);
    assert_eq!(skipped["step"], "once");
    assert_eq!(run_status(db, &run_id(out)), "skipped");
    let ran_after: Vec<_> = common::events(&common::stdout(out))
        .into_iter()
        .filter(|e| e["type"] == "step_started" && e["step"] != "once")
        .collect();
    assert!(
        ran_after.is_empty(),
        "nothing after the dedupe step: {ran_after:?}"
    );
}

fn assert_failed(db: &Path, out: &Output) {
    assert_exit(out, 1);
    assert_eq!(run_status(db, &run_id(out)), "failed");
}

/// The claim row of `key` for `agent`, if any: its expiry.
fn claim(db: &Path, agent: &str, key: &str) -> Option<String> {
    let conn = rusqlite::Connection::open(db).expect("open state");
    conn.query_row(
        "SELECT expires_at FROM tollgate_claims WHERE key = ?1",
        [format!("dedupe:{agent}:{key}")],
        |row| row.get(0),
    )
    .ok()
}

#[test]
fn a_second_run_with_the_same_key_is_skipped() {
    let ws = Workspace::new(ONCE_SPEC);
    let db = ws.state_db();
    let first = run(&ws, json!({"order_id": 1, "amount": 5}));
    assert_completed(&db, &first);
    let output = &event(&first, "run_completed").expect("done")["outputs"]["once"];
    assert_eq!(output["key"], "order-1");

    let second = run(&ws, json!({"order_id": 1, "amount": 5}));
    assert_skipped(&db, &second, "order-1");

    let other = run(&ws, json!({"order_id": 2, "amount": 5}));
    assert_completed(&db, &other);
}

#[test]
fn the_claim_is_stored_with_the_step_ttl() {
    let ws = Workspace::new(ONCE_SPEC);
    let db = ws.state_db();
    let before = chrono::Utc::now();
    assert_completed(&db, &run(&ws, json!({"order_id": 1, "amount": 5})));
    let expires = claim(&db, "once-only", "order-1").expect("claimed");
    let expires = chrono::DateTime::parse_from_rfc3339(&expires).expect("UTC timestamp");
    let ttl = expires.signed_duration_since(before);
    assert!(
        ttl > chrono::Duration::minutes(59) && ttl <= chrono::Duration::minutes(61),
        "1h TTL, found {ttl}"
    );
}

#[test]
fn a_failed_run_releases_its_key_so_a_retry_runs() {
    let ws = Workspace::new(ONCE_SPEC);
    let db = ws.state_db();
    let failed = run(&ws, json!({"order_id": 3}));
    assert_failed(&db, &failed);
    assert_eq!(claim(&db, "once-only", "order-3"), None, "released");

    let retry = run(&ws, json!({"order_id": 3, "amount": 5}));
    assert_completed(&db, &retry);
    let again = run(&ws, json!({"order_id": 3, "amount": 5}));
    assert_skipped(&db, &again, "order-3");
}

#[test]
fn release_on_failure_false_keeps_the_key_claimed() {
    let ws =
        Workspace::new(&ONCE_SPEC.replace("ttl: 1h }", "ttl: 1h, release_on_failure: false }"));
    let db = ws.state_db();
    let failed = run(&ws, json!({"order_id": 4}));
    assert_failed(&db, &failed);
    assert!(
        claim(&db, "once-only", "order-4").is_some(),
        "still claimed"
    );

    let retry = run(&ws, json!({"order_id": 4, "amount": 5}));
    assert_skipped(&db, &retry, "order-4");
    let other = run(&ws, json!({"order_id": 5, "amount": 5}));
    assert_completed(&db, &other);
}

#[test]
fn a_failed_model_call_releases_the_key() {
    let stub = StubServer::start(|_| Response::text(500, "overloaded"));
    let ws = Workspace::new(
        r#"version: 1
agent: once-model
model: { base_url: "${MODEL_BASE_URL}", api_key: "${MODEL_API_KEY}", name: gpt-test }
steps:
  - id: once
    dedupe: { key: "order-{{ input.order_id }}", ttl: 1h }
  - id: assess
    model: { prompt: "Assess {{ input.order_id }}", output: json }
"#,
    );
    let db = ws.state_db();
    let input = r#"{"order_id": 9}"#;
    let failed = run_persisted(&ws, &stub, input);
    assert_failed(&db, &failed);

    stub.set_handler(|_| json_reply(json!({"ok": true})));
    let retry = run_persisted(&ws, &stub, input);
    assert_completed(&db, &retry);
    let again = run_persisted(&ws, &stub, input);
    assert_skipped(&db, &again, "order-9");
    assert_eq!(stub.count(), 2, "the skipped run called nothing");
}

/// The claim holds while a run is paused, and a failure after the resume
/// (in another process) still releases it.
#[test]
fn a_paused_run_holds_its_key_and_releases_it_if_it_fails_after_resume() {
    let ws = Workspace::new(
        r#"version: 1
agent: once-gated
steps:
  - id: once
    dedupe: { key: "order-{{ input.order_id }}", ttl: 1h }
  - id: gate
    approval: { message: "Go?" }
  - id: work
    set: { amount: "amount {{ input.amount }}" }
"#,
    );
    let db = ws.state_db();
    let key = ws.pause_run(r#"{"order_id": 6}"#);
    let meanwhile = run(&ws, json!({"order_id": 6}));
    assert_skipped(&db, &meanwhile, "order-6");
    assert_eq!(row_count(&db, "tollgate_approvals"), 1);

    let approved = ws
        .tollgate()
        .args(["approvals", "approve", &key, "--spec", ws.spec_arg()])
        .output()
        .expect("approve");
    assert_exit(&approved, 1);
    assert_eq!(claim(&db, "once-gated", "order-6"), None, "released");

    let retry = run(&ws, json!({"order_id": 6, "amount": 1}));
    assert_success(&retry);
    assert!(event(&retry, "awaiting_approval").is_some(), "not skipped");
}

#[test]
fn two_agents_sharing_a_state_file_keep_their_keys_apart() {
    let dir = tempfile::tempdir().expect("temp dir");
    let state = dir.path().join("shared.db");
    let spec_a = dir.path().join("a.yaml");
    let spec_b = dir.path().join("b.yaml");
    std::fs::write(&spec_a, ONCE_SPEC).expect("write a");
    std::fs::write(
        &spec_b,
        ONCE_SPEC.replace("agent: once-only", "agent: other-desk"),
    )
    .expect("write b");
    let input = json!({"order_id": 7, "amount": 1});

    assert_completed(&state, &run_with_state(&spec_a, &state, input.clone()));
    assert_completed(&state, &run_with_state(&spec_b, &state, input.clone()));
    assert_skipped(
        &state,
        &run_with_state(&spec_a, &state, input.clone()),
        "order-7",
    );
    assert_skipped(&state, &run_with_state(&spec_b, &state, input), "order-7");
    assert_eq!(row_count(&state, "tollgate_claims"), 2);
}
