//! The MCP server (DESIGN §14) through the official MCP Python client
//! (`mcp` from PyPI, in the tests' venv: `common/openapi.rs`): against a
//! real `tollgate serve` at `/mcp` (`http.rs`), as `tollgate mcp` on stdio
//! (`stdio.rs`), and the example agent of `examples/clients`
//! (`example.rs`). Decisions come from other processes: the CLI, or an
//! HTTP client with a full token.

mod batch;
mod example;
mod http;
mod stdio;

use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use serde_json::Value;

/// A gate-less agent: its gate requests are what these tests make.
pub const DESK_SPEC: &str = "version: 1\nagent: desk\nsteps:\n  - id: note\n    set: { a: 1 }\n";

/// A full token (decides) and a requester token (asks).
pub const TOKENS: &str = "alice:tok-alice,bot/requester:tok-bot";

/// Long enough for a slow shared machine; a test that waits this long failed.
pub const PATIENCE: Duration = Duration::from_secs(90);

/// The tests' Python client, beside this file.
pub fn client_script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/it/mcp/client.py")
}

/// A Python process whose stdout is read a JSON line at a time.
pub struct PythonRun {
    child: Child,
    lines: mpsc::Receiver<String>,
    stderr: std::sync::Arc<std::sync::Mutex<String>>,
}

impl PythonRun {
    /// `python SCRIPT ARGS...` with `env` added.
    pub fn start(script: &Path, args: &[&str], env: &[(&str, &str)]) -> PythonRun {
        let python = crate::common::openapi::python()
            .unwrap_or_else(|why| panic!("no Python with the mcp client: {why}"));
        let mut child = Command::new(python)
            .arg(script)
            .args(args)
            .envs(env.iter().copied())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start python");
        let (send, lines) = mpsc::channel();
        let stdout = child.stdout.take().expect("stdout");
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if send.send(line).is_err() {
                    break;
                }
            }
        });
        let stderr = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
        let sink = stderr.clone();
        let mut err = child.stderr.take().expect("stderr");
        std::thread::spawn(move || {
            let mut text = String::new();
            let _ = err.read_to_string(&mut text);
            sink.lock().unwrap().push_str(&text);
        });
        PythonRun {
            child,
            lines,
            stderr,
        }
    }

    /// The next line it prints, within [`PATIENCE`].
    pub fn next_line(&mut self) -> String {
        match self.lines.recv_timeout(PATIENCE) {
            Ok(line) => line,
            Err(_) => {
                let _ = self.child.kill();
                let _ = self.child.wait();
                std::thread::sleep(Duration::from_millis(200));
                panic!(
                    "the Python client printed nothing more; its stderr:\n{}",
                    self.stderr.lock().unwrap()
                )
            }
        }
    }

    /// The next line, as JSON.
    pub fn next_json(&mut self) -> Value {
        let line = self.next_line();
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line}"))
    }

    /// Wait for the exit: its code and stderr.
    pub fn finish(mut self) -> (Option<i32>, String) {
        let status = self.child.wait().expect("wait for python");
        std::thread::sleep(Duration::from_millis(100));
        let stderr = self.stderr.lock().unwrap().clone();
        (status.code(), stderr)
    }
}

impl Drop for PythonRun {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
