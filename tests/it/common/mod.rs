//! Shared helpers for the integration tests: temp workspaces with a spec,
//! running the real `tollgate` binary, reading its output.
#![allow(dead_code)]

pub mod chaos;
pub mod fuzz;
pub mod http;
pub mod model_stub;
pub mod notification_cases;
pub mod openapi;
pub mod postgres;
pub mod rng;
pub mod server;
pub mod slack_stub;
#[macro_use]
pub mod store_cases;
pub mod stub_server;
pub mod stuck;
pub mod webdriver;

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use serde_json::Value;

/// The three-step spec used across the CLI tests: prepare -> approval -> act.
pub const GATED_SPEC: &str = r#"version: 1
agent: shipping-desk
description: Ship an order once a person says so.
steps:
  - id: prepare
    set:
      order: "{{ input.order_id }}"
  - id: gate
    approval:
      message: "Ship order {{ steps.prepare.output.order }}?"
      payload: { order: "{{ steps.prepare.output.order }}" }
  - id: act
    set:
      shipped: "{{ steps.gate.output.payload.order }}"
      by: "{{ steps.gate.output.decided_by }}"
"#;

/// A temporary directory holding a spec file and its default state.
pub struct Workspace {
    pub dir: tempfile::TempDir,
    pub spec: PathBuf,
}

impl Workspace {
    pub fn new(spec_text: &str) -> Workspace {
        let dir = tempfile::tempdir().expect("temp dir");
        let spec = dir.path().join("agent.yaml");
        std::fs::write(&spec, spec_text).expect("write spec");
        Workspace { dir, spec }
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// The default state file next to the spec.
    pub fn state_db(&self) -> PathBuf {
        self.dir.path().join(".tollgate").join("state.db")
    }

    pub fn write_spec(&self, text: &str) {
        std::fs::write(&self.spec, text).expect("write spec");
    }

    /// `tollgate ARGS...` run in the workspace directory.
    pub fn tollgate(&self) -> Command {
        let mut cmd = Command::new(tollgate_bin());
        cmd.current_dir(self.dir.path());
        cmd.env_remove("TOLLGATE_DATABASE_URL");
        // Links on or off only when a test says so (`approvals show` prints them).
        cmd.env_remove("TOLLGATE_LINK_SECRET");
        cmd.env_remove("TOLLGATE_PUBLIC_URL");
        cmd.stdin(Stdio::null());
        cmd
    }

    /// `tollgate approvals VERB KEY --spec SPEC` (add flags, then run it).
    /// `tollgate validate SPEC`, run.
    pub fn validate(&self) -> Output {
        self.tollgate()
            .args(["validate", self.spec_arg()])
            .output()
            .expect("run tollgate")
    }

    pub fn decide(&self, verb: &str, key: &str) -> Command {
        let mut cmd = self.tollgate();
        cmd.args(["approvals", verb, key, "--spec", self.spec_arg()]);
        cmd
    }

    /// `tollgate approvals list --spec SPEC --json`, parsed.
    pub fn list_json(&self) -> Value {
        let out = self
            .tollgate()
            .args(["approvals", "list", "--spec", self.spec_arg(), "--json"])
            .output()
            .expect("run tollgate");
        assert_success(&out);
        serde_json::from_str(&stdout(&out)).expect("list prints JSON")
    }

    pub fn spec_arg(&self) -> &str {
        self.spec.to_str().expect("utf-8 temp path")
    }

    /// `tollgate run SPEC --persist --json --input INPUT`: returns the key
    /// of the pause it printed.
    pub fn pause_run(&self, input: &str) -> String {
        self.pause_run_of(self.spec_arg(), input)
    }

    /// [`Workspace::pause_run`] of another spec file `spec` (its default
    /// state is the workspace's when it sits beside the workspace's spec).
    pub fn pause_run_of(&self, spec: &str, input: &str) -> String {
        let out = self
            .tollgate()
            .args(["run", spec, "--persist", "--json", "--input", input])
            .output()
            .expect("run tollgate");
        assert_success(&out);
        awaiting_key(&stdout(&out)).expect("an awaiting_approval event with a key")
    }

    /// Pause a run of the workspace's spec in its state file through the
    /// library, reading every time from `clock`. A `tollgate` process reads
    /// the system clock, so a pause dated [`hours_ago`] with a shorter TTL
    /// is already expired for it: no test waits for a TTL to run out.
    pub async fn pause_run_with_clock(
        &self,
        input: Value,
        clock: tollgate_runtime::time::SharedClock,
    ) -> tollgate_runtime::ApprovalRecord {
        self.pause_run_in(&self.state_db(), input, clock).await
    }

    /// [`Workspace::pause_run_with_clock`] into the state file `state`.
    pub async fn pause_run_in(
        &self,
        state: &Path,
        input: Value,
        clock: tollgate_runtime::time::SharedClock,
    ) -> tollgate_runtime::ApprovalRecord {
        let spec = std::sync::Arc::new(tollgate_runtime::Spec::load(&self.spec).expect("spec"));
        let agent = tollgate_runtime::AgentRun::new(spec, open_store(state)).with_clock(clock);
        let outcome = agent
            .start(input, serde_json::json!({"kind": "test"}))
            .await
            .expect("start the run");
        outcome.pending.expect("the run paused")
    }
}

/// A clock standing `hours` hours before now.
pub fn hours_ago(hours: u64) -> std::sync::Arc<tollgate_runtime::time::ManualClock> {
    let then = tollgate_runtime::time::now() - chrono::TimeDelta::hours(hours as i64);
    std::sync::Arc::new(tollgate_runtime::time::ManualClock::new(then))
}

pub fn tollgate_bin() -> &'static str {
    env!("CARGO_BIN_EXE_tollgate")
}

/// `tollgate serve SPEC` with its output piped, none of the caller's
/// `TOLLGATE_*` settings, `RUST_LOG=info`, then `env` on top: a test's
/// server depends only on what the test says.
pub fn serve_command<S: AsRef<std::ffi::OsStr>>(
    spec: &std::path::Path,
    env: impl IntoIterator<Item = (S, S)>,
) -> std::process::Command {
    let mut cmd = std::process::Command::new(tollgate_bin());
    cmd.arg("serve").arg(spec);
    for var in [
        "TOLLGATE_DATABASE_URL",
        "TOLLGATE_API_TOKENS",
        "TOLLGATE_LISTEN",
        "TOLLGATE_MAX_BODY_BYTES",
        "TOLLGATE_SHUTDOWN_GRACE",
        "TOLLGATE_NOTIFY_RETRY_WINDOW",
        "TOLLGATE_HEADER_TIMEOUT",
        "TOLLGATE_BODY_TIMEOUT",
        "TOLLGATE_IDLE_TIMEOUT",
        "TOLLGATE_MAX_CONNECTIONS",
        "TOLLGATE_RUN_LEASE",
        "TOLLGATE_LOG_FORMAT",
        "TOLLGATE_LINK_SECRET",
        "TOLLGATE_PUBLIC_URL",
        "TOLLGATE_SESSION_SECRET",
    ] {
        cmd.env_remove(var);
    }
    cmd.env("RUST_LOG", "info");
    cmd.envs(env);
    cmd.stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    cmd
}

pub fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

pub fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

pub fn assert_success(out: &Output) {
    assert!(
        out.status.success(),
        "exit {:?}\nstdout:\n{}\nstderr:\n{}",
        out.status.code(),
        stdout(out),
        stderr(out)
    );
}

pub fn assert_exit(out: &Output, code: i32) {
    assert_eq!(
        out.status.code(),
        Some(code),
        "stdout:\n{}\nstderr:\n{}",
        stdout(out),
        stderr(out)
    );
}

/// The process wrote `needle` to stderr; the failure shows all it wrote.
pub fn assert_stderr_contains(out: &Output, needle: &str) {
    let text = stderr(out);
    assert!(text.contains(needle), "{needle:?} not in stderr:\n{text}");
}

/// The process wrote `needle` to stdout; the failure shows all it wrote.
pub fn assert_stdout_contains(out: &Output, needle: &str) {
    let text = stdout(out);
    assert!(text.contains(needle), "{needle:?} not in stdout:\n{text}");
}

/// Parse `--json` output: one event per line.
pub fn events(text: &str) -> Vec<Value> {
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect()
}

/// The key of the first awaiting_approval event in `--json` output.
pub fn awaiting_key(text: &str) -> Option<String> {
    events(text)
        .into_iter()
        .find(|e| e["type"] == "awaiting_approval")
        .and_then(|e| e["key"].as_str().map(str::to_string))
}

/// Open the workspace's SQLite store through the runtime's public API.
pub fn open_store(path: &Path) -> tollgate_runtime::SharedStore {
    tollgate_runtime::store::open(
        path.to_str().expect("utf-8 path"),
        tollgate_runtime::store::SqliteOptions::default(),
    )
    .expect("open store")
}

/// Every byte of a SQLite database, including its WAL and shared memory.
pub fn sqlite_bytes(db: &Path) -> Vec<u8> {
    let mut bytes = Vec::new();
    for suffix in ["", "-wal", "-shm", "-journal"] {
        let mut p = db.as_os_str().to_owned();
        p.push(suffix);
        if let Ok(b) = std::fs::read(PathBuf::from(p)) {
            bytes.extend(b);
        }
    }
    bytes
}

pub fn contains_bytes(haystack: &[u8], needle: &str) -> bool {
    haystack
        .windows(needle.len())
        .any(|w| w == needle.as_bytes())
}

/// Run futures at once (each its own task) and collect their outputs in
/// order, without pulling in the futures crate.
pub async fn join_all<F: std::future::Future + Send + 'static>(
    futures: impl IntoIterator<Item = F>,
) -> Vec<F::Output>
where
    F::Output: Send + 'static,
{
    let handles: Vec<_> = futures.into_iter().map(tokio::spawn).collect();
    let mut out = Vec::new();
    for handle in handles {
        out.push(handle.await.expect("task"));
    }
    out
}
