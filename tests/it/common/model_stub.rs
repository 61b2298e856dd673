//! A chat-completions endpoint on the loopback stub server, and the CLI
//! plumbing around it: the spec's `${MODEL_BASE_URL}` / `${MODEL_API_KEY}`
//! references are set on each child process only, never in the test's own
//! environment, so the key reaches tollgate the way a real deployment's does.
//!
//! Include next to `common` and `stub_server`:
//! `#[path = "common/model_stub.rs"] mod model_stub;`
#![allow(dead_code)]

use std::path::Path;
use std::process::{Command, Output};

use serde_json::{Value, json};

use crate::common::stub_server::{Response, StubServer};
use crate::common::{self, Workspace};

/// The model API key the child processes get. Distinctive, so finding it
/// anywhere (store bytes, output) is unambiguous.
pub const API_KEY: &str = "sk-tollgate-test-7f3c9a21e4b8d6";

/// Token counts every stub reply reports.
pub const USAGE: (u64, u64, u64) = (21, 9, 30);

/// A successful chat-completions reply whose message content is `content`.
pub fn chat_reply(content: &str) -> Response {
    Response::json(
        200,
        json!({
            "id": "chatcmpl-stub",
            "object": "chat.completion",
            "model": "gpt-test",
            "choices": [{
                "index": 0,
                "message": { "role": "assistant", "content": content },
                "finish_reason": "stop",
            }],
            "usage": {
                "prompt_tokens": USAGE.0,
                "completion_tokens": USAGE.1,
                "total_tokens": USAGE.2,
            },
        }),
    )
}

/// A reply whose content is `value` serialised as JSON.
pub fn json_reply(value: Value) -> Response {
    chat_reply(&value.to_string())
}

/// `_usage` as the model step records it for a stub reply.
pub fn usage() -> Value {
    json!({
        "prompt_tokens": USAGE.0,
        "completion_tokens": USAGE.1,
        "total_tokens": USAGE.2,
    })
}

/// Point the child at the stub and give it the key.
pub fn with_model_env<'a>(cmd: &'a mut Command, stub: &StubServer) -> &'a mut Command {
    cmd.env("MODEL_BASE_URL", stub.url("/v1"))
        .env("MODEL_API_KEY", API_KEY)
}

/// `tollgate run SPEC --persist --json --input INPUT` with the model env.
pub fn run_persisted(ws: &Workspace, stub: &StubServer, input: &str) -> Output {
    let mut cmd = ws.tollgate();
    with_model_env(&mut cmd, stub)
        .args([
            "run",
            ws.spec_arg(),
            "--persist",
            "--json",
            "--input",
            input,
        ])
        .output()
        .expect("run tollgate")
}

/// `tollgate approvals approve|reject KEY --spec SPEC --json [extra...]`.
pub fn decide(ws: &Workspace, stub: &StubServer, verb: &str, key: &str, extra: &[&str]) -> Output {
    let mut cmd = ws.tollgate();
    with_model_env(&mut cmd, stub)
        .args(["approvals", verb, key, "--spec", ws.spec_arg(), "--json"])
        .args(extra)
        .output()
        .expect("decide")
}

/// The first event of `kind` in `--json` output.
pub fn event(out: &Output, kind: &str) -> Option<Value> {
    common::events(&common::stdout(out))
        .into_iter()
        .find(|e| e["type"] == kind)
}

/// The event types in `--json` output, in order.
pub fn event_types(out: &Output) -> Vec<String> {
    common::events(&common::stdout(out))
        .iter()
        .filter_map(|e| e["type"].as_str().map(str::to_string))
        .collect()
}

/// The run id every `--json` event carries.
pub fn run_id(out: &Output) -> String {
    common::events(&common::stdout(out))
        .first()
        .and_then(|e| e["run_id"].as_str().map(str::to_string))
        .expect("an event with a run_id")
}

/// A run's stored status, read straight from the SQLite file.
pub fn run_status(db: &Path, run_id: &str) -> String {
    let conn = rusqlite::Connection::open(db).expect("open state");
    conn.query_row(
        "SELECT status FROM tollgate_runs WHERE id = ?1",
        [run_id],
        |row| row.get(0),
    )
    .expect("the run is stored")
}

/// Rows in a table of the state file (0 when the file was never created).
pub fn row_count(db: &Path, table: &str) -> i64 {
    if !db.exists() {
        return 0;
    }
    let conn = rusqlite::Connection::open(db).expect("open state");
    conn.query_row(&format!("SELECT COUNT(*) FROM {table}"), [], |row| {
        row.get(0)
    })
    .expect("count rows")
}

/// Every stored event of a run, as JSON.
pub fn stored_events(db: &Path, run_id: &str) -> Vec<Value> {
    let conn = rusqlite::Connection::open(db).expect("open state");
    let mut stmt = conn
        .prepare("SELECT event FROM tollgate_run_events WHERE run_id = ?1 ORDER BY seq")
        .expect("prepare");
    let rows = stmt
        .query_map([run_id], |row| row.get::<_, String>(0))
        .expect("query");
    rows.map(|r| serde_json::from_str(&r.expect("row")).expect("event JSON"))
        .collect()
}
