//! Exported crates build and run without this repository: every example's
//! export passes `cargo clippy --locked -D warnings` and `cargo fmt --check`,
//! and an exported server pauses at a gate, survives SIGKILL, resumes on a
//! decision made after a restart, completes, and passes its own smoke test.
//!
//! The exports build with their own CARGO_TARGET_DIR (`target/export-e2e`):
//! a nested cargo on the target directory running these tests would block
//! on its lock. It is shared by the tests here, so the runtime's
//! dependencies are compiled once.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tollgate::export::{self, ExportOptions};

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

pub(super) fn target_dir() -> PathBuf {
    repo().join("target").join("export-e2e")
}

pub(super) fn export_example(name: &str, into: &Path) -> (PathBuf, String) {
    let plan = export::command::plan_for(&repo().join(format!("examples/{name}.yaml"))).unwrap();
    let out = into.join(name);
    export::export(&plan, &out, &ExportOptions::default()).unwrap();
    (out, plan.package)
}

/// Run cargo in an exported crate; panics with its output when it fails.
pub(super) fn cargo(dir: &Path, args: &[&str]) {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_string());
    let output = Command::new(cargo)
        .args(args)
        .current_dir(dir)
        .env("CARGO_TARGET_DIR", target_dir())
        .env_remove("RUSTFLAGS")
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "cargo {args:?} in {}:\n{}{}",
        dir.display(),
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}

/// Rust keywords `validate` accepts as tool names (`^[a-z_][a-z0-9_]*$`),
/// strict, reserved and weak.
const KEYWORDS: &[&str] = &[
    "abstract", "as", "async", "await", "become", "box", "break", "const", "continue", "crate",
    "do", "dyn", "else", "enum", "extern", "false", "final", "fn", "for", "gen", "if", "impl",
    "in", "let", "loop", "macro", "match", "mod", "move", "mut", "override", "priv", "pub", "ref",
    "return", "self", "static", "struct", "super", "trait", "true", "try", "type", "typeof",
    "union", "unsafe", "unsized", "use", "virtual", "where", "while", "yield",
];

/// `CallContext` -> `call_context`.
fn snake_case(camel: &str) -> String {
    let mut out = String::new();
    for (i, c) in camel.chars().enumerate() {
        if c.is_ascii_uppercase() && i > 0 {
            out.push('_');
        }
        out.push(c.to_ascii_lowercase());
    }
    out
}

/// A spec whose `rust:` tools are named after every name the generated code
/// imports or relies on (`result`, `value`, `custom_tool`, `tool_error`,
/// `call_context`, the prelude), every keyword, and `_`: each must export to
/// a crate that compiles.
fn clashing_names_spec() -> String {
    let mut names: Vec<String> = export::names::RESERVED_TYPE_NAMES
        .iter()
        .map(|n| snake_case(n))
        .chain(KEYWORDS.iter().map(|k| k.to_string()))
        .chain(["_".to_string(), "_1".to_string()])
        // Names the registry's code uses: `tools::register`, `App`, the
        // runtime's crate (a module of that name must not shadow it). (`tool`
        // would share `_`'s type, `Tool`: the export refuses that pair.)
        .chain(["register", "tools", "app", "tollgate_runtime"].map(String::from))
        .collect();
    names.sort();
    names.dedup();
    let mut spec = String::from("version: 1\nagent: clashing-names\ntools:\n");
    for name in &names {
        // Quoted: `true` and `false` are YAML booleans.
        spec.push_str(&format!("  \"{name}\":\n    rust: {{}}\n"));
    }
    spec.push_str("steps:\n");
    for (i, name) in names.iter().enumerate() {
        spec.push_str(&format!("  - id: s{i}\n    tool: \"{name}\"\n"));
    }
    spec
}

#[test]
fn every_example_export_passes_clippy_and_fmt() {
    let tmp = tempfile::tempdir().unwrap();
    // Tool names that clash with generated code build too; checked here, in
    // the examples' shared build, to cost no build of its own.
    let clashing = tmp.path().join("clashing-names.yaml");
    std::fs::write(&clashing, clashing_names_spec()).unwrap();
    let plan = export::command::plan_for(&clashing).unwrap();
    let out = tmp.path().join("clashing-names");
    export::export(&plan, &out, &ExportOptions::default()).unwrap();
    let tools = std::fs::read_to_string(out.join("src/tools/mod.rs")).unwrap();
    assert!(
        tools.contains(".build_tool(\"result\", self::result::tool)")
            && tools.contains("mod r#type;")
            && tools.contains(".build_tool(\"register\", self::register::tool)"),
        "{tools}"
    );
    let mut dirs = vec![out];
    for name in ["refund-desk", "no-gate", "with-rust-tools"] {
        dirs.push(export_example(name, tmp.path()).0);
    }
    for out in dirs {
        cargo(
            &out,
            &[
                "clippy",
                "--locked",
                "--all-targets",
                "--",
                "-D",
                "warnings",
            ],
        );
        cargo(&out, &["fmt", "--check"]);
    }
}

/// Real implementations of the example's `rust:` tools, as a user would
/// write them, one file each, built by their `tool` functions (which the
/// generated registry calls): score_risk reads its threshold from the
/// environment through its `ToolEnv`.
const SCORE_RISK: &str = r#"use tollgate_runtime::serde_json::{Value, json};
use tollgate_runtime::tools::{CallContext, CustomTool, ToolEnv, ToolError};

pub fn tool(env: &ToolEnv) -> Result<ScoreRisk, ToolError> {
    let threshold = env.optional_var("SCORE_RISK_THRESHOLD").unwrap_or_else(|| "100".into());
    let threshold = threshold
        .parse()
        .map_err(|_| ToolError::new("SCORE_RISK_THRESHOLD must be a number"))?;
    Ok(ScoreRisk { threshold })
}

pub struct ScoreRisk {
    threshold: f64,
}

#[tollgate_runtime::async_trait]
impl CustomTool for ScoreRisk {
    async fn call(&self, args: Value, _call: &CallContext) -> Result<Value, ToolError> {
        let amount = args["amount"].as_f64().unwrap_or(0.0);
        Ok(json!({ "risk": if amount > self.threshold { 0.9 } else { 0.1 } }))
    }
}
"#;

const FILE_CASE: &str = r#"use tollgate_runtime::serde_json::{Value, json};
use tollgate_runtime::tools::{CallContext, CustomTool, ToolEnv, ToolError};

pub fn tool(_env: &ToolEnv) -> Result<FileCase, ToolError> {
    Ok(FileCase {})
}

pub struct FileCase {}

#[tollgate_runtime::async_trait]
impl CustomTool for FileCase {
    async fn call(&self, args: Value, _call: &CallContext) -> Result<Value, ToolError> {
        let payment = args["payment_id"].as_str().unwrap_or("unknown");
        Ok(json!({ "case_id": format!("case-{payment}") }))
    }
}
"#;

/// The server process; killed when dropped.
pub(super) struct Server {
    pub(super) child: Child,
    pub(super) address: String,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub(super) fn serve(binary: &Path, state: &Path) -> Server {
    serve_with_env(binary, state, &[])
}

/// [`serve`] with these variables set (a tool's configuration).
pub(super) fn serve_with_env(binary: &Path, state: &Path, vars: &[(&str, &str)]) -> Server {
    let mut child = Command::new(binary)
        .args(["serve", "--listen", "127.0.0.1:0", "--state"])
        .arg(state)
        .envs(vars.iter().copied())
        .env_remove("TOLLGATE_API_TOKENS")
        .env_remove("TOLLGATE_DATABASE_URL")
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let mut lines = BufReader::new(stdout).lines();
    let address = loop {
        match lines.next() {
            Some(line) => {
                let line = line.unwrap();
                if let Some(rest) = line.trim().strip_prefix("listening on http://") {
                    break rest.trim_end_matches('/').to_string();
                }
            }
            None => panic!("the server exited before printing `listening on http://ADDR`"),
        }
    };
    // Keep draining stdout so the server never blocks on a full pipe.
    std::thread::spawn(move || for _ in lines {});
    Server { child, address }
}

/// A plain HTTP/1.1 request; returns the status and the JSON body.
pub(super) fn request(
    address: &str,
    method: &str,
    path: &str,
    body: Option<&Value>,
) -> (u16, Value) {
    let (status, payload) = request_text(address, method, path, body);
    (
        status,
        serde_json::from_str(&payload).unwrap_or(Value::Null),
    )
}

/// [`request`], the answer's body as text (`/metrics` is not JSON).
fn request_text(address: &str, method: &str, path: &str, body: Option<&Value>) -> (u16, String) {
    let mut stream = TcpStream::connect(address).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let body = body.map(Value::to_string).unwrap_or_default();
    write!(
        stream,
        "{method} {path} HTTP/1.1\r\nHost: {address}\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw).unwrap();
    let text = String::from_utf8_lossy(&raw);
    let (head, payload) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let payload = if head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked")
    {
        dechunk(payload)
    } else {
        payload.to_string()
    };
    (status, payload)
}

fn dechunk(mut body: &str) -> String {
    let mut out = String::new();
    while let Some((size, rest)) = body.split_once("\r\n") {
        let size = usize::from_str_radix(size.trim(), 16).unwrap_or(0);
        if size == 0 || rest.len() < size {
            break;
        }
        out.push_str(&rest[..size]);
        body = rest[size..].trim_start_matches("\r\n");
    }
    out
}

/// Poll the run until `done` says so (at most 30 s).
pub(super) fn wait_for_run(server: &Server, run_id: &str, done: impl Fn(&Value) -> bool) -> Value {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let (status, run) = request(&server.address, "GET", &format!("/runs/{run_id}"), None);
        if status == 200 && done(&run) {
            return run;
        }
        assert!(
            Instant::now() < deadline,
            "run {run_id} never got there: {run}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn pending_key(run: &Value) -> String {
    run["pending_approval"]["key"].as_str().unwrap().to_string()
}

#[test]
fn exported_server_pauses_survives_sigkill_resumes_and_completes() {
    let tmp = tempfile::tempdir().unwrap();
    let (out, package) = export_example("with-rust-tools", tmp.path());
    std::fs::write(out.join("src/tools/score_risk.rs"), SCORE_RISK).unwrap();
    std::fs::write(out.join("src/tools/file_case.rs"), FILE_CASE).unwrap();
    cargo(&out, &["build", "--locked"]);
    let binary = target_dir().join("debug").join(&package);
    let state = tmp.path().join("state.db");

    // The export leaves PostgreSQL out unless asked: a postgres:// store is
    // refused at start, as a usage error that says how to turn it on, and
    // without repeating the URL's password.
    let refused = Command::new(&binary)
        .args([
            "serve",
            "--database-url",
            "postgres://tg:s3cret@127.0.0.1:9/db",
        ])
        .env_remove("TOLLGATE_API_TOKENS")
        .env_remove("TOLLGATE_DATABASE_URL")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert_eq!(refused.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains(
            r#"add `features = ["postgres"]` to the tollgate-runtime dependency in Cargo.toml"#
        ),
        "{stderr}"
    );
    assert!(!stderr.contains("s3cret"), "{stderr}");

    // Read commands share tollgate's code: pointed at no store, they create
    // none, say where they looked, and exit 3 (the Docker image's
    // `approvals list` in the wrong directory).
    let nowhere = tmp.path().join("nowhere");
    std::fs::create_dir(&nowhere).unwrap();
    let listed = Command::new(&binary)
        .args(["approvals", "list"])
        .current_dir(&nowhere)
        .env_remove("TOLLGATE_DATABASE_URL")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&listed.stderr);
    assert_eq!(listed.status.code(), Some(3), "{stderr}");
    assert!(
        stderr.contains("no state store at .tollgate/state.db"),
        "{stderr}"
    );
    assert!(!nowhere.join(".tollgate").exists());
    // It serves its own spec only: `--spec` (which would point it at
    // another spec's state file) is refused before anything runs, exit 2.
    let other_spec = Command::new(&binary)
        .args(["approvals", "list", "--spec", "other.yaml"])
        .current_dir(&nowhere)
        .env_remove("TOLLGATE_DATABASE_URL")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&other_spec.stderr);
    assert_eq!(other_spec.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("this server serves the spec built into it"),
        "{stderr}"
    );
    assert!(!nowhere.join(".tollgate").exists());

    // A webhook starts the run; it pauses at the review step. score_risk's
    // `tool` reads its threshold from the environment (250 is not above 300).
    let threshold = [("SCORE_RISK_THRESHOLD", "300")];
    let server = serve_with_env(&binary, &state, &threshold);
    // A second server on its address is refused naming the address and
    // --listen (exit 1, as for any bind failure).
    let second = Command::new(&binary)
        .args(["serve", "--listen", &server.address, "--state"])
        .arg(tmp.path().join("second.db"))
        .env_remove("TOLLGATE_API_TOKENS")
        .env_remove("TOLLGATE_DATABASE_URL")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&second.stderr);
    assert_eq!(second.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "cannot listen on {}: address already in use",
            server.address
        )) && stderr.contains("--listen ADDR"),
        "{stderr}"
    );
    // The running export serves the document it was exported with, and a
    // real validator accepts it.
    let (status, served) = request(&server.address, "GET", "/openapi.json", None);
    assert_eq!(status, 200, "{served}");
    let written: Value =
        serde_json::from_slice(&std::fs::read(out.join("openapi.json")).unwrap()).unwrap();
    assert_eq!(
        served, written,
        "GET /openapi.json is the exported openapi.json"
    );
    crate::common::openapi::validate(&out.join("openapi.json"));
    let (status, started) = request(
        &server.address,
        "POST",
        "/hooks/payment",
        Some(&json!({"payment_id": "p-1", "amount": 250})),
    );
    assert_eq!(status, 202, "{started}");
    let run_id = started["run_id"].as_str().unwrap().to_string();
    let run = wait_for_run(&server, &run_id, |r| r["status"] == "awaiting_approval");
    assert_eq!(run["outputs"]["score"]["risk"], 0.1, "{run}");
    let review_key = pending_key(&run);
    // Operations on the running export: ready, and the pause counted.
    let (status, ready) = request(&server.address, "GET", "/readyz", None);
    assert_eq!(
        (status, &ready["status"]),
        (200, &json!("ready")),
        "{ready}"
    );
    let (status, metrics) = request_text(&server.address, "GET", "/metrics", None);
    assert_eq!(status, 200, "{metrics}");
    assert!(
        metrics
            .lines()
            .any(|l| l == "tollgate_pending_approvals{step=\"review\"} 1"),
        "one approval pending at review:\n{metrics}"
    );
    assert!(
        metrics.contains("tollgate_build_info{"),
        "the build is named:\n{metrics}"
    );
    // The approvals inbox is part of every export: without tokens (loopback)
    // it needs no sign-in, lists the pause and shows its decide forms.
    let (status, inbox) = request_text(&server.address, "GET", "/ui", None);
    assert_eq!(status, 200, "{inbox}");
    assert!(
        inbox.contains(&format!("data-key=\"{review_key}\"")),
        "the inbox lists the pause:\n{inbox}"
    );
    let (status, page) = request_text(
        &server.address,
        "GET",
        &format!("/ui/approvals/{review_key}"),
        None,
    );
    assert_eq!(status, 200, "{page}");
    assert!(page.contains("id=\"approve\""), "{page}");

    // SIGKILL: no shutdown, no flush. The pause is in the store.
    let mut server = server;
    server.child.kill().unwrap();
    server.child.wait().unwrap();
    drop(server);

    let server = serve_with_env(&binary, &state, &threshold);
    let (status, list) = request(&server.address, "GET", "/approvals", None);
    assert_eq!(status, 200, "{list}");
    assert!(
        list["approvals"]
            .as_array()
            .unwrap()
            .iter()
            .any(|a| a["key"] == review_key.as_str()),
        "the pause survived the kill: {list}"
    );
    let (status, decided) = request(
        &server.address,
        "POST",
        &format!("/approvals/{review_key}/approve"),
        Some(&json!({"reason": "looks risky"})),
    );
    assert_eq!(status, 200, "{decided}");

    // The run goes on to the tool gate of file_case, then completes.
    let run = wait_for_run(&server, &run_id, |r| {
        r["status"] == "awaiting_approval" && r["pending_approval"]["key"] != review_key.as_str()
    });
    let file_key = pending_key(&run);
    let (status, decided) = request(
        &server.address,
        "POST",
        &format!("/approvals/{file_key}/approve"),
        Some(&json!({})),
    );
    assert_eq!(status, 200, "{decided}");
    let run = wait_for_run(&server, &run_id, |r| r["status"] == "completed");
    assert_eq!(run["outputs"]["result"]["case"], "case-p-1", "{run}");
    drop(server);

    // The export's own smoke test passes too.
    cargo(&out, &["test", "--locked"]);
}
