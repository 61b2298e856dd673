//! A version that cannot run in the deciding process (DESIGN §12, issue
//! 24 item 2): under `pin`, approving a pause of v1 where v1 needs a
//! variable that is unset there, or a `rust:` tool that binary lacks,
//! answers `spec_unavailable` naming what is missing (never a secret's
//! value), decides nothing, and leaves the record PENDING for a process
//! that has it.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use serde_json::{Value, json};

use super::policies::{deployed, hash_of, v1};
use crate::common::server::{self, Api, Served};
use crate::common::stub_server::{Response, StubServer};
use crate::common::{
    Workspace, assert_exit, assert_success, awaiting_key, contains_bytes, open_store, sqlite_bytes,
    stderr, stdout,
};
use tollgate_runtime::tools::{CallContext, CustomTool, CustomTools, ToolError, Toolbox};
use tollgate_runtime::{AgentRun, ApprovalStatus, Decision, Spec};

const TOKEN: &str = "ship-tok-51c0ffee";
const ACCOUNT: &str = "acct-7d3e-private";

/// v1 whose `ship` call authenticates with two variables.
fn with_credentials(v1_text: &str) -> String {
    let text = v1_text.replace(
        "      method: POST\n",
        "      method: POST\n      headers: { Authorization: \"Bearer ${SHIP_TOKEN}\", X-Account: \"${SHIP_ACCOUNT}\" }\n",
    );
    assert_ne!(text, v1_text);
    text
}

/// v1 with a `rust:` tool `stamp` called after the gates, before `ship`.
fn with_stamp(v1_text: &str) -> String {
    let text = v1_text
        .replace("tools:\n", "tools:\n  stamp:\n    rust: {}\n")
        .replace(
            "  - id: send\n",
            "  - id: stamp\n    tool: stamp\n    with: { order: \"{{ steps.prepare.output.order }}\" }\n  - id: send\n",
        );
    assert_ne!(text, v1_text);
    text
}

async fn status_of(ws: &Workspace, key: &str) -> (ApprovalStatus, String) {
    let record = open_store(&ws.state_db())
        .get_approval(key)
        .await
        .expect("get")
        .expect("record");
    (record.status, record.spec_hash)
}

/// The `legal` gate (removed by v2: only v1 can resume it) is paused by a
/// process without the variables (the call comes after the gate). v2 is
/// deployed without them. Approving from a process where SHIP_TOKEN is
/// unset exits 4 `spec_unavailable` naming SHIP_TOKEN (and not the
/// variable that is set, nor its value); once it is set, the same approve
/// resumes the run on v1, whose request carries the token.
#[tokio::test(flavor = "multi_thread")]
async fn an_unset_variable_the_pinned_version_needs_is_named_and_the_approval_waits() {
    let stub = StubServer::start(|_| Response::json(201, json!({"ok": true})));
    let plain = v1("pin", &stub.url("/ship"));
    let v1_text = with_credentials(&plain);
    let ws = Workspace::new(&v1_text);
    // `run --persist` needs v1's variables set (to anything: no step before
    // the gate calls out).
    let paused = ws
        .tollgate()
        .args(["run", ws.spec_arg(), "--persist", "--json", "--input"])
        .arg(json!({"order": "O-legal", "gate": "legal"}).to_string())
        .env("SHIP_TOKEN", "pause-time")
        .env("SHIP_ACCOUNT", "pause-time")
        .output()
        .expect("run tollgate");
    assert_success(&paused);
    let key = awaiting_key(&stdout(&paused)).expect("paused");
    ws.write_spec(&deployed(&plain));
    let v1_hash = hash_of(&v1_text);
    let approve = |env: &[(&str, &str)]| {
        ws.decide("approve", &key)
            .env_remove("SHIP_TOKEN")
            .env_remove("SHIP_ACCOUNT")
            .envs(env.iter().copied())
            .output()
            .expect("run tollgate")
    };

    let out = approve(&[("SHIP_ACCOUNT", ACCOUNT)]);
    assert_exit(&out, 4);
    let err = stderr(&out);
    for needle in [
        "spec_unavailable: ",
        &format!("approval {key} waits on spec version {}", &v1_hash[..12]),
        "environment variable SHIP_TOKEN is not set",
        "nothing was decided",
    ] {
        assert!(err.contains(needle), "{needle:?} not in:\n{err}");
    }
    assert!(!err.contains("SHIP_ACCOUNT"), "it is set: {err}");
    assert!(
        !err.contains(ACCOUNT) && !stdout(&out).contains(ACCOUNT),
        "a value is never shown"
    );
    assert_eq!(
        status_of(&ws, &key).await,
        (ApprovalStatus::Pending, v1_hash.clone()),
        "nothing was decided or moved"
    );
    assert_eq!(stub.count(), 0);

    let out = approve(&[("SHIP_ACCOUNT", ACCOUNT), ("SHIP_TOKEN", TOKEN)]);
    assert_success(&out);
    assert_eq!(status_of(&ws, &key).await.0, ApprovalStatus::Approved);
    let sent = stub.requests();
    assert_eq!(sent.len(), 1, "one call");
    assert_eq!(
        sent[0].json(),
        json!({"spec": "v1", "order": "O-legal", "gate": "legal"}),
        "made by v1"
    );
    assert_eq!(
        sent[0].header("authorization"),
        Some(format!("Bearer {TOKEN}").as_str())
    );
    for secret in [TOKEN, ACCOUNT] {
        assert!(!stdout(&out).contains(secret) && !stderr(&out).contains(secret));
        assert!(!contains_bytes(&sqlite_bytes(&ws.state_db()), secret));
    }
}

/// The `rust:` tool of v1, as an exported server implements it: counts
/// its calls.
struct Stamp(Arc<AtomicUsize>);

#[tollgate_runtime::async_trait]
impl CustomTool for Stamp {
    async fn call(&self, args: Value, _call: &CallContext) -> Result<Value, ToolError> {
        self.0.fetch_add(1, Ordering::SeqCst);
        Ok(json!({"stamped": args["order"]}))
    }
}

/// A handle on `spec_text` over the workspace's state whose binary has
/// `stamp`, as the exported server of v1 is.
fn with_stamp_registered(ws: &Workspace, spec_text: &str, calls: &Arc<AtomicUsize>) -> AgentRun {
    let mut custom = CustomTools::new();
    custom.register("stamp", Arc::new(Stamp(calls.clone())));
    let tools = Toolbox::new().expect("toolbox").with_custom_tools(custom);
    let spec = Arc::new(Spec::parse(spec_text, "agent.yaml").expect("spec"));
    AgentRun::new(spec, open_store(&ws.state_db())).with_tools(Arc::new(tools))
}

/// v1 (with a `rust:` tool after its gates) paused by a binary that
/// implements it; v2 (without it) served by plain `tollgate serve`, which
/// has no custom tools. Approve over HTTP answers 409 `spec_unavailable`
/// naming the tool, as does the CLI (exit 4); the record stays PENDING on
/// v1, and a binary that has the tool approves it on v1.
#[tokio::test(flavor = "multi_thread")]
async fn a_rust_tool_this_binary_lacks_is_named_and_the_approval_waits() {
    let stub = StubServer::start(|_| Response::json(201, json!({"ok": true})));
    let plain = v1("pin", &stub.url("/ship"));
    let v1_text = with_stamp(&plain);
    let v2_text = deployed(&plain);
    let ws = Workspace::new(&v1_text);
    let calls = Arc::new(AtomicUsize::new(0));
    let paused = with_stamp_registered(&ws, &v1_text, &calls)
        .start(
            json!({"order": "O-review", "gate": "review"}),
            json!({"kind": "test"}),
        )
        .await
        .expect("start")
        .pending
        .expect("paused at review");
    let key = paused.key;
    let v1_hash = hash_of(&v1_text);
    ws.write_spec(&v2_text);

    let served = Served::start(&ws.spec, &ws.state_db(), &[], &[]);
    let api = Api::new();
    let (status, body) = api
        .post(
            &served.url(&format!("/approvals/{key}/approve?wait=true")),
            json!({}),
        )
        .await;
    assert_eq!(
        (status, server::code(&body)),
        (409, "spec_unavailable"),
        "{body}"
    );
    let message = body["error"]["message"].as_str().expect("message");
    for needle in [
        &format!("spec version {}", &v1_hash[..12]),
        "rust: tool \"stamp\" is not registered in this binary",
    ] {
        assert!(message.contains(needle), "{needle:?} not in {message}");
    }
    let (_, record) = api.get(&served.url(&format!("/approvals/{key}"))).await;
    assert_eq!(record["status"], "PENDING", "{record}");

    let out = ws.decide("approve", &key).output().expect("run tollgate");
    assert_exit(&out, 4);
    let err = stderr(&out);
    assert!(
        err.contains("spec_unavailable: ") && err.contains("rust: tool \"stamp\""),
        "{err}"
    );
    drop(served);
    assert_eq!(
        status_of(&ws, &key).await,
        (ApprovalStatus::Pending, v1_hash.clone())
    );
    assert_eq!((calls.load(Ordering::SeqCst), stub.count()), (0, 0));

    // A binary serving v2 that still has `stamp` runs v1 to its end.
    let outcome = with_stamp_registered(&ws, &v2_text, &calls)
        .resume_by_key(&key, Decision::Approve { reason: None }, "ops")
        .await
        .expect("approve where the tool is");
    assert_eq!(outcome.status, tollgate_runtime::RunStatus::Completed);
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    assert_eq!(
        stub.requests()[0].json(),
        json!({"spec": "v1", "order": "O-review", "gate": "review"})
    );
}
