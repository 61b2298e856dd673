//! examples/clients/http_client.py, run as its README says, with the
//! venv's Python and `httpx`, against a real `tollgate serve`: it asks,
//! long-polls, rides out a SIGKILL and restart of the server, and acts on
//! the payload a person approved from another process (the CLI) while it
//! waited; a rejection it does not act on.

use std::io::Read;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::{SPEC, TOKENS};
use crate::common::Workspace;
use crate::common::server::Served;
use crate::common::slack_stub::free_port;

const EXAMPLE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/examples/clients/http_client.py"
);

/// `tollgate serve` again on `listen`, where the client left it. A port
/// just freed by a killed server may take a moment to bind again: tried
/// for up to 10 s.
fn serve_on(ws: &Workspace, listen: &str) -> Result<Served, String> {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        match Served::try_start(
            &ws.spec,
            &ws.state_db(),
            &[("TOLLGATE_API_TOKENS", TOKENS)],
            &["--listen", listen],
        ) {
            Ok(served) => return Ok(served),
            Err(failure) if Instant::now() >= deadline => return Err(failure.stderr),
            Err(_) => std::thread::sleep(Duration::from_millis(200)),
        }
    }
}

/// One run of the example, its output collected as it comes.
struct Example {
    child: Child,
    stdout: Arc<Mutex<String>>,
    stderr: Arc<Mutex<String>>,
}

impl Example {
    fn start(python: &Path, base: &str, order: &str) -> Example {
        let mut child = Command::new(python)
            .arg(EXAMPLE)
            .args(["--order", order, "--amount", "30"])
            .env("TOLLGATE_URL", base)
            .env("TOLLGATE_TOKEN", "tok-bot")
            // Loopback, directly: no proxy from the caller's environment.
            .env("NO_PROXY", "*")
            .env_remove("HTTP_PROXY")
            .env_remove("HTTPS_PROXY")
            .env_remove("ALL_PROXY")
            .env_remove("http_proxy")
            .env_remove("https_proxy")
            .env_remove("all_proxy")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot run {EXAMPLE}: {e}"));
        let stdout = collect(child.stdout.take().expect("stdout"));
        let stderr = collect(child.stderr.take().expect("stderr"));
        Example {
            child,
            stdout,
            stderr,
        }
    }

    fn output(&self) -> String {
        format!(
            "stdout:\n{}\nstderr:\n{}",
            self.stdout.lock().unwrap(),
            self.stderr.lock().unwrap()
        )
    }

    /// Wait up to 30 s for `needle` in stdout (`out`) or stderr; the line.
    fn line_with(&mut self, needle: &str, out: bool) -> String {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let text = if out { &self.stdout } else { &self.stderr };
            if let Some(line) = text.lock().unwrap().lines().find(|l| l.contains(needle)) {
                return line.to_string();
            }
            if let Ok(Some(status)) = self.child.try_wait() {
                // It may have written the line just before it exited.
                std::thread::sleep(Duration::from_millis(200));
                let text = if out { &self.stdout } else { &self.stderr };
                if let Some(line) = text.lock().unwrap().lines().find(|l| l.contains(needle)) {
                    return line.to_string();
                }
                panic!(
                    "the example exited ({status}) without {needle:?}:\n{}",
                    self.output()
                );
            }
            assert!(
                Instant::now() < deadline,
                "no {needle:?} within 30 s:\n{}",
                self.output()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// The key it printed when it asked.
    fn key(&mut self) -> String {
        let line = self.line_with("requested approval ", true);
        line.trim_start_matches("requested approval ")
            .split(':')
            .next()
            .expect("a key")
            .to_string()
    }

    /// Its exit code, within 60 s.
    fn exit_code(&mut self) -> i32 {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if let Some(status) = self.child.try_wait().expect("wait") {
                // Let the readers take the last of its output.
                std::thread::sleep(Duration::from_millis(200));
                return status.code().unwrap_or(-1);
            }
            assert!(
                Instant::now() < deadline,
                "still running after 60 s:\n{}",
                self.output()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Example {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn collect(mut pipe: impl Read + Send + 'static) -> Arc<Mutex<String>> {
    let text = Arc::new(Mutex::new(String::new()));
    let sink = text.clone();
    std::thread::spawn(move || {
        let mut buf = [0u8; 4096];
        while let Ok(n) = pipe.read(&mut buf) {
            if n == 0 {
                break;
            }
            sink.lock()
                .unwrap()
                .push_str(&String::from_utf8_lossy(&buf[..n]));
        }
    });
    text
}

/// `tollgate approvals VERB KEY` as dana, on the workspace's state.
fn decide(ws: &Workspace, verb: &str, key: &str, extra: &[&str]) {
    let out = ws
        .decide(verb, key)
        .args(["--by", "dana"])
        .args(extra)
        .output()
        .expect("run tollgate approvals");
    crate::common::assert_exit(&out, super::decided_exit_code(verb));
}

#[test]
fn the_http_example_waits_through_a_restart_and_acts_on_what_was_approved() {
    let python = crate::common::openapi::python()
        .unwrap_or_else(|why| panic!("no Python with httpx: {why}"));
    let ws = Workspace::new(SPEC);
    // The port is picked before the server binds it, so another process
    // may take it first: then another one.
    let (listen, mut served) = (0..3)
        .find_map(|_| {
            let listen = format!("127.0.0.1:{}", free_port());
            let served = Served::try_start(
                &ws.spec,
                &ws.state_db(),
                &[("TOLLGATE_API_TOKENS", TOKENS)],
                &["--listen", &listen],
            );
            served.ok().map(|served| (listen, served))
        })
        .expect("a server on a free port");

    // It asks, and long-polls.
    let mut example = Example::start(python, &served.base, "77");
    let key = example.key();
    example.line_with("waiting for a decision", false);
    std::thread::sleep(Duration::from_millis(300));

    // The server dies mid-wait; a person approves with an edit meanwhile;
    // the server comes back on the same address.
    served.kill();
    example.line_with("reconnecting", false);
    decide(
        &ws,
        "approve",
        &key,
        &[
            "--payload",
            r#"{"order": "77", "amount": 25}"#,
            "--reason",
            "partial",
        ],
    );
    let served = serve_on(&ws, &listen).unwrap_or_else(|e| panic!("{e}"));

    assert_eq!(example.exit_code(), 0, "{}", example.output());
    let acted = example.line_with("acting on", true);
    assert_eq!(
        acted,
        r#"modified by dana: acting on {"amount": 25, "order": "77"}"#,
        "{}",
        example.output()
    );

    // Rejected while it waits: it does not act.
    let mut example = Example::start(python, &served.base, "78");
    let key = example.key();
    example.line_with("waiting for a decision", false);
    decide(&ws, "reject", &key, &["--reason", "already refunded"]);
    assert_eq!(example.exit_code(), 1, "{}", example.output());
    let line = example.line_with("not acting", true);
    assert_eq!(line, "not acting: rejected by dana: already refunded");
    assert!(
        !example.output().contains("acting on"),
        "{}",
        example.output()
    );
}
