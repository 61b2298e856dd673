//! An exported crate grown the way a user grows it, through the runtime's
//! builder (`tollgate_runtime::App`): two `rust:` tools holding state in
//! their fields, one using a dependency added to Cargo.toml, a route of its
//! own with its own state and a tower layer on the same listener; built
//! `--locked` after `cargo update`, served, and called. And a tool whose
//! implementation, `tool` function or file is missing fails the build with
//! a message naming it, not generated code.
//!
//! The builds share `target/export-e2e` with `build.rs`, so the runtime's
//! dependencies compile once for both.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

use serde_json::json;
use sha2::{Digest, Sha256};
use tollgate::export::{self, ExportOptions};

use super::build::{cargo, request, serve, serve_with_env, target_dir, wait_for_run};

const SPEC: &str = r#"version: 1
agent: builder-demo
description: Fingerprint a text, then count it.
tools:
  fingerprint:
    rust: {}
  tally:
    rust: {}
steps:
  - id: print
    tool: fingerprint
    with: { text: "{{ input.text }}" }
  - id: count
    tool: tally
    with: { digest: "{{ steps.print.output.digest }}" }
"#;

/// Holds its salt (configuration, read by its `tool` function from the
/// environment: a secret, kept out of the store) and uses `sha2`, a
/// dependency the user adds.
const FINGERPRINT: &str = r#"use sha2::{Digest, Sha256};
use tollgate_runtime::serde_json::{Value, json};
use tollgate_runtime::tools::{CallContext, CustomTool, ToolEnv, ToolError};

pub fn tool(env: &ToolEnv) -> Result<Fingerprint, ToolError> {
    let salt = match env.optional_var("FINGERPRINT_SALT") {
        Some(_) => env.secret("FINGERPRINT_SALT")?,
        None => "pepper".to_string(),
    };
    Ok(Fingerprint { salt })
}

pub struct Fingerprint {
    salt: String,
}

#[tollgate_runtime::async_trait]
impl CustomTool for Fingerprint {
    async fn call(&self, args: Value, _call: &CallContext) -> Result<Value, ToolError> {
        let text = args["text"]
            .as_str()
            .ok_or_else(|| ToolError::new("text must be a string"))?;
        let digest = Sha256::digest(format!("{}:{text}", self.salt).as_bytes());
        let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
        Ok(json!({ "digest": hex }))
    }
}
"#;

/// Holds state that lives as long as the process: a count, from a start
/// its `tool` function gives it.
const TALLY: &str = r#"use std::sync::atomic::{AtomicU64, Ordering};

use tollgate_runtime::serde_json::{Value, json};
use tollgate_runtime::tools::{CallContext, CustomTool, ToolEnv, ToolError};

pub fn tool(_env: &ToolEnv) -> Result<Tally, ToolError> {
    Ok(Tally::new(41))
}

pub struct Tally {
    start: u64,
    seen: AtomicU64,
}

impl Tally {
    pub fn new(start: u64) -> Tally {
        Tally { start, seen: AtomicU64::new(0) }
    }
}

#[tollgate_runtime::async_trait]
impl CustomTool for Tally {
    async fn call(&self, args: Value, call: &CallContext) -> Result<Value, ToolError> {
        let n = self.start + self.seen.fetch_add(1, Ordering::SeqCst) + 1;
        Ok(json!({ "n": n, "digest": args["digest"], "run": call.run_id }))
    }
}
"#;

/// The user's main.rs: the generated tool registry, a route with its own
/// state, and a layer that tags every response.
const MAIN: &str = r#"mod generated;
mod tools;

use std::sync::Arc;

use tollgate_runtime::axum::extract::State;
use tollgate_runtime::axum::http::HeaderValue;
use tollgate_runtime::axum::response::Response;
use tollgate_runtime::axum::routing::get;
use tollgate_runtime::axum::{Router, middleware};

struct Build {
    version: &'static str,
}

async fn version(State(build): State<Arc<Build>>) -> String {
    format!("{} {}", build.version, generated::SPEC_HASH)
}

async fn tag(mut response: Response) -> Response {
    response
        .headers_mut()
        .insert("x-built-with", HeaderValue::from_static("tollgate-app"));
    response
}

fn main() -> std::process::ExitCode {
    let routes = Router::new()
        .route("/version", get(version))
        .with_state(Arc::new(Build { version: "demo-1.0" }));
    tollgate_runtime::App::new(generated::embedded())
        .tools(tools::register)
        .routes(routes)
        .layer(middleware::map_response(tag))
        .run()
}
"#;

fn export_spec(yaml: &str, dir: &Path, name: &str) -> (PathBuf, String, String) {
    let spec_path = dir.join(format!("{name}.yaml"));
    std::fs::write(&spec_path, yaml).unwrap();
    let plan = export::command::plan_for(&spec_path).unwrap();
    let out = dir.join(name);
    export::export(&plan, &out, &ExportOptions::default()).unwrap();
    (out, plan.package, plan.spec_hash)
}

/// Run cargo in an exported crate and return what it did, passed or not.
pub(super) fn cargo_output(dir: &Path, args: &[&str]) -> Output {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_string());
    Command::new(cargo)
        .args(args)
        .current_dir(dir)
        .env("CARGO_TARGET_DIR", target_dir())
        .env_remove("RUSTFLAGS")
        .output()
        .unwrap()
}

/// A GET over plain HTTP/1.1: the status line and headers, and the body.
fn get_raw(address: &str, path: &str) -> (String, String) {
    let mut stream = TcpStream::connect(address).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: {address}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut raw = String::new();
    stream.read_to_string(&mut raw).unwrap();
    let (head, body) = raw.split_once("\r\n\r\n").unwrap_or((&raw, ""));
    (head.to_ascii_lowercase(), body.to_string())
}

#[test]
fn an_export_grows_stateful_tools_a_dependency_a_route_and_a_layer_through_the_builder() {
    let tmp = tempfile::tempdir().unwrap();
    let (out, package, spec_hash) = export_spec(SPEC, tmp.path(), "builder-demo");
    std::fs::write(out.join("src/tools/fingerprint.rs"), FINGERPRINT).unwrap();
    std::fs::write(out.join("src/tools/tally.rs"), TALLY).unwrap();
    std::fs::write(out.join("src/main.rs"), MAIN).unwrap();
    let manifest = std::fs::read_to_string(out.join("Cargo.toml")).unwrap();
    let manifest = manifest.replace("[dependencies]\n", "[dependencies]\nsha2 = \"0.10\"\n");
    std::fs::write(out.join("Cargo.toml"), manifest).unwrap();

    // The new dependency is not in Cargo.lock yet: --locked refuses, and
    // `cargo update` (offline: sha2 is in the lockfile's tree already)
    // records it.
    let refused = cargo_output(&out, &["build", "--locked"]);
    assert!(!refused.status.success(), "{refused:?}");
    assert!(
        String::from_utf8_lossy(&refused.stderr).contains("--locked"),
        "{}",
        String::from_utf8_lossy(&refused.stderr)
    );
    cargo(&out, &["update", "--offline", "--workspace"]);
    let lock = std::fs::read_to_string(out.join("Cargo.lock")).unwrap();
    assert!(lock.contains("\"sha2 0.10.9\""), "{lock}");
    cargo(&out, &["build", "--locked"]);
    // The export's own tests (smoke, and its workflow test on stubs) pass
    // with the user's code in place.
    cargo(&out, &["test", "--locked"]);

    let binary = target_dir().join("debug").join(&package);
    let salt = "s4lt-from-the-environment";
    let server = serve_with_env(
        &binary,
        &tmp.path().join("state.db"),
        &[("FINGERPRINT_SALT", salt)],
    );

    // The route, with its own state, on the API's listener, and the layer
    // on it and on the API's routes.
    let (head, body) = get_raw(&server.address, "/version");
    assert!(head.starts_with("http/1.1 200"), "{head}");
    assert!(head.contains("x-built-with: tollgate-app"), "{head}");
    assert_eq!(body, format!("demo-1.0 {spec_hash}"));
    let (head, _) = get_raw(&server.address, "/healthz");
    assert!(head.starts_with("http/1.1 200"), "{head}");
    assert!(head.contains("x-built-with: tollgate-app"), "{head}");

    // A run uses both tools; the second shows the tally's state lives on
    // in its value between calls.
    for (text, n) in [("hello", 42), ("again", 43)] {
        let (status, started) = request(
            &server.address,
            "POST",
            "/runs",
            Some(&json!({ "input": { "text": text } })),
        );
        assert_eq!(status, 202, "{started}");
        let run_id = started["run_id"].as_str().unwrap().to_string();
        let run = wait_for_run(&server, &run_id, |r| r["status"] != "running");
        assert_eq!(run["status"], "completed", "{run}");
        let digest: String = Sha256::digest(format!("{salt}:{text}").as_bytes())
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        assert_eq!(run["outputs"]["print"]["digest"], digest.as_str(), "{run}");
        assert_eq!(run["outputs"]["count"]["n"], n, "{run}");
        assert_eq!(run["outputs"]["count"]["digest"], digest.as_str(), "{run}");
        assert_eq!(run["outputs"]["count"]["run"], run_id.as_str(), "{run}");
    }
}

#[test]
fn a_tool_without_its_implementation_fails_the_build_naming_its_file() {
    let tmp = tempfile::tempdir().unwrap();
    let (out, _, _) = export_spec(SPEC, tmp.path(), "missing-tool");
    let tally = out.join("src/tools/tally.rs");
    let written = std::fs::read_to_string(&tally).unwrap();

    // Its type without the `CustomTool` impl: the message comes from the
    // compile-time check and names the user's file.
    let without_impl = &written[..written.find("#[tollgate_runtime::async_trait]").unwrap()];
    std::fs::write(&tally, without_impl).unwrap();
    let failed = cargo_output(&out, &["build", "--locked"]);
    let stderr = String::from_utf8_lossy(&failed.stderr);
    assert!(!failed.status.success(), "{stderr}");
    assert!(
        stderr.contains(
            "error[E0277]: the `rust:` tool `tally` of agent.yaml is not implemented: `tool` in src/tools/tally.rs does not build a `CustomTool`"
        ),
        "{stderr}"
    );
    assert!(
        stderr.contains(
            "implement `tollgate_runtime::tools::CustomTool` for what `tool` in src/tools/tally.rs returns"
        ),
        "{stderr}"
    );

    // Its constructor renamed (or deleted): the generated registry's call
    // to it fails, naming the function and the tool's module.
    let renamed = written.replace("pub fn tool(", "pub fn build(");
    assert_ne!(renamed, written);
    std::fs::write(&tally, &renamed).unwrap();
    let failed = cargo_output(&out, &["build", "--locked"]);
    let stderr = String::from_utf8_lossy(&failed.stderr);
    assert!(!failed.status.success(), "{stderr}");
    assert!(
        stderr.contains("error[E0425]: cannot find value `tool` in module `self::tally`"),
        "{stderr}"
    );

    // The file removed: rustc names the file to create.
    std::fs::remove_file(&tally).unwrap();
    let failed = cargo_output(&out, &["build", "--locked"]);
    let stderr = String::from_utf8_lossy(&failed.stderr);
    assert!(!failed.status.success(), "{stderr}");
    assert!(stderr.contains("src/tools/tally.rs"), "{stderr}");

    // Put back as exported, it builds (the stub fails only when called).
    std::fs::write(&tally, &written).unwrap();
    cargo(&out, &["build", "--locked"]);
}

/// The spec's first version: one `rust:` tool.
const ONE_TOOL: &str = r#"version: 1
agent: growing
tools:
  fingerprint:
    rust: {}
steps:
  - id: print
    tool: fingerprint
    with: { text: "{{ input.text }}" }
"#;

/// The user's fingerprint tool, without dependencies.
const SHORT_FINGERPRINT: &str = r#"use tollgate_runtime::serde_json::{Value, json};
use tollgate_runtime::tools::{CallContext, CustomTool, ToolEnv, ToolError};

pub fn tool(_env: &ToolEnv) -> Result<Fingerprint, ToolError> {
    Ok(Fingerprint {})
}

pub struct Fingerprint {}

#[tollgate_runtime::async_trait]
impl CustomTool for Fingerprint {
    async fn call(&self, args: Value, _call: &CallContext) -> Result<Value, ToolError> {
        Ok(json!({ "digest": format!("fp-{}", args["text"].as_str().unwrap_or("")) }))
    }
}
"#;

#[test]
fn adding_a_second_rust_tool_and_exporting_again_builds_and_keeps_the_first() {
    let tmp = tempfile::tempdir().unwrap();
    let (out, package, _) = export_spec(ONE_TOOL, tmp.path(), "growing");
    std::fs::write(out.join("src/tools/fingerprint.rs"), SHORT_FINGERPRINT).unwrap();
    cargo(&out, &["build", "--locked"]);

    // The spec gains a second tool; exported again over the crate.
    let two_tools = format!(
        "{}  - id: count\n    tool: tally\n    with: {{ digest: \"{{{{ steps.print.output.digest }}}}\" }}\n",
        ONE_TOOL.replace("steps:\n", "  tally:\n    rust: {}\nsteps:\n")
    );
    let spec_path = tmp.path().join("growing.yaml");
    std::fs::write(&spec_path, &two_tools).unwrap();
    let plan = export::command::plan_for(&spec_path).unwrap();
    export::export(&plan, &out, &ExportOptions::default()).unwrap();

    // Its file is new; the first tool's file is the user's still, with
    // nothing beside it; main.rs is as it was, and the generated registry
    // registers both.
    assert_eq!(
        std::fs::read_to_string(out.join("src/tools/fingerprint.rs")).unwrap(),
        SHORT_FINGERPRINT
    );
    assert!(!out.join("src/tools/fingerprint.rs.new").exists());
    let tally = std::fs::read_to_string(out.join("src/tools/tally.rs")).unwrap();
    assert!(tally.contains("pub struct Tally {}"), "{tally}");
    let main = std::fs::read_to_string(out.join("src/main.rs")).unwrap();
    assert!(
        main.contains(".tools(tools::register)") && !main.contains(".tool("),
        "{main}"
    );
    let registry = std::fs::read_to_string(out.join("src/tools/mod.rs")).unwrap();
    assert!(
        registry.contains(".build_tool(\"fingerprint\", self::fingerprint::tool)")
            && registry.contains(".build_tool(\"tally\", self::tally::tool)"),
        "{registry}"
    );
    cargo(&out, &["build", "--locked"]);

    // The new tool's stub fails the run, saying where to implement it.
    let binary = target_dir().join("debug").join(&package);
    let server = serve(&binary, &tmp.path().join("state.db"));
    let (status, started) = request(
        &server.address,
        "POST",
        "/runs",
        Some(&json!({ "input": { "text": "hi" } })),
    );
    assert_eq!(status, 202, "{started}");
    let run_id = started["run_id"].as_str().unwrap().to_string();
    let run = wait_for_run(&server, &run_id, |r| r["status"] != "running");
    assert_eq!(run["status"], "failed", "{run}");
    assert_eq!(run["outputs"]["print"]["digest"], "fp-hi", "{run}");
    assert!(
        run["error"]
            .as_str()
            .is_some_and(|e| e.contains("implement Tally::call in src/tools/tally.rs")),
        "{run}"
    );
}
