//! Helpers for the HTTP tool and secrets tests: scripted stub answers,
//! specs aimed at a stub, and runs in this process or through the binary.
//! Include with `#[path = "common/http.rs"] mod http;` next to `mod common;`
//! and `#[path = "common/stub_server.rs"] mod stub_server;`.
#![allow(dead_code)]

use std::process::Output;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use serde_json::Value;
use tollgate_runtime::store::MemoryStore;
use tollgate_runtime::tools::Toolbox;
use tollgate_runtime::{AgentRun, RunOutcome, Spec};

use crate::common::stub_server::{Request, Response};
use crate::common::{Workspace, awaiting_key, stdout};

/// A handler that answers with `answers` in order, then repeats the last.
pub fn scripted(answers: Vec<Response>) -> impl Fn(&Request) -> Response + Send + Sync + 'static {
    let next = AtomicUsize::new(0);
    move |_req| {
        let i = next.fetch_add(1, Ordering::SeqCst);
        answers[i.min(answers.len() - 1)].clone()
    }
}

/// The usual downstream answer: 201 with a JSON body.
pub fn created() -> Response {
    Response::json(201, serde_json::json!({"id": "rf_1", "ok": true}))
}

/// A refund desk whose only tool is a POST to `url` that needs approval.
/// `http_extra` is added (indented) inside the tool's `http:` block.
pub fn gated_post_spec(url: &str, http_extra: &str) -> String {
    r#"version: 1
agent: refund-desk
tools:
  issue_refund:
    http:
      method: POST
      url: "@URL@"
      json: { order: "{{ args.order_id }}", amount: "{{ args.amount }}" }
@EXTRA@    approval: required
    message: "Refund {{ args.amount }} on order {{ args.order_id }}?"
steps:
  - id: refund
    tool: issue_refund
    with: { order_id: "{{ input.order_id }}", amount: "{{ input.amount }}" }
  - id: result
    set: { refund: "{{ steps.refund.output.body.id }}" }
"#
    .replace("@URL@", url)
    .replace("@EXTRA@", &indent(http_extra, 6))
}

/// One ungated step calling tool `call_it`, defined by `tool_yaml` (its
/// `http:` block and anything else, written unindented).
pub fn one_tool_spec(tool_yaml: &str, with: &str) -> String {
    r#"version: 1
agent: http-desk
tools:
  call_it:
@TOOL@steps:
  - id: call
    tool: call_it
    with: @WITH@
"#
    .replace("@TOOL@", &indent(tool_yaml, 4))
    .replace("@WITH@", with)
}

fn indent(text: &str, by: usize) -> String {
    let pad = " ".repeat(by);
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| format!("{pad}{l}\n"))
        .collect()
}

/// Run a spec in this process with the real toolbox and a memory store.
pub async fn run_in_process(spec_text: &str, input: Value) -> RunOutcome {
    let spec = Spec::parse(spec_text, "agent.yaml").expect("valid spec");
    let agent = AgentRun::new(Arc::new(spec), Arc::new(MemoryStore::new()))
        .with_tools(Arc::new(Toolbox::new().expect("toolbox")));
    agent
        .start(input, serde_json::json!({"kind": "test"}))
        .await
        .expect("start")
}

/// `tollgate run SPEC --persist --json --input INPUT` with extra environment.
pub fn run_persisted(ws: &Workspace, input: &str, env: &[(&str, &str)]) -> Output {
    run_persisted_on(ws, &[], input, env)
}

/// [`run_persisted`] with `store_args` naming its store
/// (`--database-url URL`); none: the state file beside the spec.
pub fn run_persisted_on(
    ws: &Workspace,
    store_args: &[&str],
    input: &str,
    env: &[(&str, &str)],
) -> Output {
    let mut cmd = ws.tollgate();
    cmd.args(["run", ws.spec_arg(), "--persist", "--json"])
        .args(store_args)
        .args(["--input", input]);
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().expect("run tollgate")
}

/// The key of the pause a persisted run printed.
pub fn paused_key(out: &Output) -> String {
    awaiting_key(&stdout(out)).unwrap_or_else(|| panic!("no pause in:\n{}", stdout(out)))
}

/// `tollgate approvals approve KEY --spec SPEC [extra...]`.
pub fn approve(ws: &Workspace, key: &str, extra: &[&str]) -> Output {
    ws.tollgate()
        .args([
            "approvals",
            "approve",
            key,
            "--spec",
            ws.spec_arg(),
            "--by",
            "alice",
        ])
        .args(extra)
        .output()
        .expect("run approve")
}

/// A loopback port with nothing listening on it.
pub fn closed_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    listener.local_addr().expect("addr").port()
}
