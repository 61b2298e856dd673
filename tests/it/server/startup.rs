//! What `tollgate serve` refuses to start with, and how it stops.

use crate::common;
use crate::common::server;
use crate::common::stub_server;

use std::time::Duration;

use common::{GATED_SPEC, Workspace, open_store};
use serde_json::json;
use server::{Api, Served};
use stub_server::{Response, StubServer};
use tollgate_runtime::RunStatus;

fn refused(ws: &Workspace, env: &[(&str, &str)], args: &[&str]) -> String {
    let failure = Served::try_start(&ws.spec, &ws.path().join("state.db"), env, args)
        .err()
        .expect("the server must refuse to start");
    assert_eq!(failure.code, Some(2), "{}", failure.stderr);
    failure.stderr
}

#[test]
fn no_tokens_means_loopback_only() {
    let ws = Workspace::new(GATED_SPEC);
    let err = refused(&ws, &[], &["--listen", "0.0.0.0:0"]);
    assert!(err.contains("TOLLGATE_API_TOKENS"), "{err}");
    // With tokens the same address is fine.
    let served = Served::start(
        &ws.spec,
        &ws.path().join("state.db"),
        &[("TOLLGATE_API_TOKENS", "alice:a-token")],
        &["--listen", "0.0.0.0:0"],
    );
    assert!(
        served.base.starts_with("http://0.0.0.0:"),
        "{}",
        served.base
    );
    // Without tokens on loopback: a warning, and the caller is `local`.
    let local = Served::start(&ws.spec, &ws.path().join("state2.db"), &[], &[]);
    local.log_line_blocking("no API tokens", Duration::from_secs(30));
}

#[test]
fn malformed_tokens_are_named_by_entry_never_by_value() {
    let ws = Workspace::new(GATED_SPEC);
    let err = refused(
        &ws,
        &[("TOLLGATE_API_TOKENS", "alice:very-secret-token,bob")],
        &[],
    );
    assert!(err.contains("entry 2"), "{err}");
    assert!(!err.contains("very-secret-token"), "{err}");
}

#[test]
fn a_webhook_path_may_not_shadow_the_api() {
    let ws = Workspace::new(&GATED_SPEC.replace(
        "steps:",
        "trigger:\n  webhook:\n    path: /approvals/hook\nsteps:",
    ));
    let err = refused(&ws, &[], &[]);
    assert!(err.contains("clashes"), "{err}");
}

#[test]
fn unregistered_rust_tools_are_refused() {
    let ws = Workspace::new(
        r#"version: 1
agent: rusty
tools:
  score:
    rust: {}
steps:
  - id: s
    tool: score
    with: {}
"#,
    );
    let err = refused(&ws, &[], &[]);
    assert!(err.contains("score"), "{err}");
}

#[tokio::test(flavor = "multi_thread")]
async fn sigterm_lets_a_running_step_finish_and_keeps_pauses() {
    let stub = StubServer::start(|_| {
        Response::json(200, json!({"ok": true})).delayed(Duration::from_millis(1500))
    });
    let ws = Workspace::new(&format!(
        r#"version: 1
agent: slow-desk
tools:
  slow:
    http:
      method: POST
      url: "{}"
      json: {{ n: "{{{{ input.n }}}}" }}
steps:
  - id: first
    if: "{{{{ input.gate }}}}"
    then: request_human_approval
    message: "Go?"
  - id: call
    tool: slow
    with: {{}}
"#,
        stub.url("/slow")
    ));
    let state = ws.path().join("state.db");
    let mut served = Served::start(&ws.spec, &state, &[], &[]);
    let api = Api::new();
    let (_, paused) = api
        .post(
            &served.url("/runs?wait=true"),
            json!({"input": {"gate": true, "n": 1}}),
        )
        .await;
    assert_eq!(paused["status"], "awaiting_approval", "{paused}");
    let (status, running) = api
        .post(
            &served.url("/runs"),
            json!({"input": {"gate": false, "n": 2}}),
        )
        .await;
    assert_eq!(status, 202);
    // Let the slow call start, then ask the server to stop.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while stub.count() == 0 {
        assert!(
            std::time::Instant::now() < deadline,
            "the call never started"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(served.terminate(), Some(0), "{}", served.logs());

    let store = open_store(&state);
    let run = store
        .get_run(running["run_id"].as_str().unwrap())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        run.status,
        RunStatus::Completed,
        "the running step finished"
    );
    let still = store
        .get_run(paused["id"].as_str().unwrap())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        still.status,
        RunStatus::AwaitingApproval,
        "the pause is kept"
    );
}

/// The start-up preflight (issue 24 item 6): every `${NAME}` the spec
/// needs without a default must be set before the server binds; a missing
/// one exits 2 naming each variable and where the spec needs it, and never
/// prints a value. The same check offline: `tollgate validate --env`.
#[test]
fn a_missing_variable_the_spec_needs_stops_serve_before_it_binds() {
    let ws = Workspace::new(
        r#"version: 1
agent: preflight
tools:
  charge:
    http:
      method: POST
      url: ${PREFLIGHT_TEST_URL:-http://127.0.0.1:9/charge}
      headers:
        Authorization: Bearer ${PREFLIGHT_TEST_TOKEN}
        X-Account: ${PREFLIGHT_TEST_ACCOUNT}
steps:
  - id: pay
    tool: charge
    with: {}
"#,
    );
    let state = ws.path().join("state.db");

    let err = refused(&ws, &[("PREFLIGHT_TEST_ACCOUNT", "acct-value-42")], &[]);
    assert!(err.contains("cannot serve preflight"), "{err}");
    assert!(err.contains("PREFLIGHT_TEST_TOKEN"), "{err}");
    assert!(
        err.contains("tools.charge.http.headers.Authorization"),
        "{err}"
    );
    assert!(
        !err.contains("PREFLIGHT_TEST_URL"),
        "a default satisfies it: {err}"
    );
    assert!(!err.contains("PREFLIGHT_TEST_ACCOUNT"), "it is set: {err}");
    assert!(!err.contains("acct-value-42"), "never a value: {err}");
    assert!(!state.exists(), "refused before opening the store");

    // Both missing: each is named.
    let err = refused(&ws, &[], &[]);
    assert!(err.contains("2 environment variables"), "{err}");
    assert!(
        err.contains("PREFLIGHT_TEST_TOKEN") && err.contains("PREFLIGHT_TEST_ACCOUNT"),
        "{err}"
    );

    // `validate --env` says the same offline, and plain `validate` does not
    // look at the environment.
    let out = ws
        .tollgate()
        .args(["validate", "--env", ws.spec_arg()])
        .env_remove("PREFLIGHT_TEST_TOKEN")
        .env_remove("PREFLIGHT_TEST_ACCOUNT")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("PREFLIGHT_TEST_TOKEN"), "{stderr}");
    assert!(ws.validate().status.success());
    let out = ws
        .tollgate()
        .args(["validate", "--env", ws.spec_arg()])
        .env("PREFLIGHT_TEST_TOKEN", "token-value-17")
        .env("PREFLIGHT_TEST_ACCOUNT", "")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}");
    assert!(stdout.contains("environment ok (2 variables"), "{stdout}");
    assert!(!stdout.contains("token-value-17"), "{stdout}");

    // Set (the empty string counts as set, as when a call resolves it):
    // the server starts.
    let served = Served::start(
        &ws.spec,
        &state,
        &[
            ("PREFLIGHT_TEST_TOKEN", "token-value-17"),
            ("PREFLIGHT_TEST_ACCOUNT", ""),
        ],
        &[],
    );
    assert!(
        served.base.starts_with("http://127.0.0.1:"),
        "{}",
        served.base
    );
}

/// Under `pin`, `serve` also checks the variables of the older versions
/// that pending approvals wait on (issue 24 item 6): approving one resumes
/// it on its version, so a deploy that dropped a variable only that
/// version needs exits 2 naming it and the version, never a value. Under
/// `refuse` those pauses cannot be approved anyway, so nothing is checked.
#[test]
fn a_variable_an_older_version_needs_stops_serve_under_pin() {
    let v1 = r#"version: 1
agent: preflight-versions
approvals:
  on_spec_change: pin
tools:
  ship:
    http:
      method: POST
      url: http://127.0.0.1:9/ship
      headers:
        Authorization: Bearer ${OLD_VERSION_TEST_TOKEN}
steps:
  - id: gate
    approval:
      message: "Ship?"
  - id: send
    tool: ship
    with: {}
"#;
    let ws = Workspace::new(v1);
    // A paused run stores v1 (`run --persist` needs v1's variable set).
    let paused = ws
        .tollgate()
        .args(["run", ws.spec_arg(), "--persist", "--json"])
        .env("OLD_VERSION_TEST_TOKEN", "pause-time-value")
        .output()
        .expect("run tollgate");
    crate::common::assert_success(&paused);
    let state = ws.state_db();
    let old_hash = tollgate_runtime::Spec::parse(v1, "agent.yaml")
        .expect("v1")
        .hash
        .short()
        .to_string();
    // v2 no longer needs the variable.
    ws.write_spec(&v1.replace(
        "        Authorization: Bearer ${OLD_VERSION_TEST_TOKEN}\n",
        "        X-Version: \"2\"\n",
    ));
    let failure = Served::try_start(&ws.spec, &state, &[], &[])
        .err()
        .expect("serve must refuse");
    assert_eq!(failure.code, Some(2), "{}", failure.stderr);
    let err = failure.stderr;
    assert!(err.contains("OLD_VERSION_TEST_TOKEN"), "{err}");
    assert!(err.contains(&old_hash), "names the version: {err}");
    assert!(err.contains("1 pending approvals"), "{err}");
    assert!(
        err.contains("tools.ship.http.headers.Authorization"),
        "{err}"
    );

    // Set (to anything): it serves.
    let served = Served::start(
        &ws.spec,
        &state,
        &[("OLD_VERSION_TEST_TOKEN", "old-secret-value-7")],
        &[],
    );
    drop(served);

    // Under refuse, nothing of v1 is needed.
    ws.write_spec(
        &v1.replace("on_spec_change: pin", "on_spec_change: refuse")
            .replace(
                "        Authorization: Bearer ${OLD_VERSION_TEST_TOKEN}\n",
                "        X-Version: \"2\"\n",
            ),
    );
    Served::start(&ws.spec, &state, &[], &[]);
}

/// `serve` stores the version it serves before any run starts (its
/// `last_seen` then says when it was last served); the runs it starts,
/// however many, add no row.
#[tokio::test(flavor = "multi_thread")]
async fn serve_stores_its_spec_version_at_start_once() {
    let ws = Workspace::new(GATED_SPEC);
    let state = ws.path().join("state.db");
    let served = Served::start(&ws.spec, &state, &[], &[]);
    // `listening` is printed as the socket is bound; start-up ends with
    // `serving agent=...` (the no-tokens warning's "serving loopback only"
    // comes earlier, before the version is stored).
    served
        .log_line("serving agent=", Duration::from_secs(20))
        .await;
    let store = open_store(&state);
    let hash = tollgate_runtime::Spec::parse(GATED_SPEC, "agent.yaml")
        .expect("spec")
        .hash;
    let stored = store
        .get_spec_version(hash.as_str())
        .await
        .expect("get")
        .expect("stored at start, before any run");
    assert_eq!(stored.agent_id, "shipping-desk");
    assert_eq!(stored.source, GATED_SPEC);

    let api = Api::new();
    for order in ["S-1", "S-2"] {
        api.pause(&served, json!({"order_id": order})).await;
    }
    let listed = store
        .list_spec_versions(None, tollgate_runtime::time::now())
        .await
        .expect("list");
    assert_eq!(listed.len(), 1, "{listed:?}");
    assert_eq!(listed[0].pending_approvals, 2);
    assert_eq!(listed[0].last_seen, stored.last_seen, "no write per run");
}
