//! A real `tollgate serve` process for the server tests: started on port 0
//! (unless the test passes its own `--listen`),
//! its address read from the one line it prints, killed on drop. Plus a
//! small JSON client and an SSE reader over reqwest.
//! Include with `#[path = "common/server.rs"] mod server;` next to `mod common;`.
#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read};
use std::path::Path;
use std::process::{Child, Command};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};

use crate::common::serve_command;

/// A running `tollgate serve`.
pub struct Served {
    child: Child,
    /// `http://127.0.0.1:PORT`
    pub base: String,
    logs: Arc<Mutex<String>>,
}

/// Why a server did not start.
#[derive(Debug)]
pub struct StartFailure {
    pub code: Option<i32>,
    pub stderr: String,
}

impl Served {
    /// `tollgate serve SPEC --listen 127.0.0.1:0 --state STATE ARGS...` with
    /// `env` added to a clean environment. Panics if it does not start.
    pub fn start(spec: &Path, state: &Path, env: &[(&str, &str)], args: &[&str]) -> Served {
        Served::try_start(spec, state, env, args)
            .unwrap_or_else(|f| panic!("server did not start ({:?}):\n{}", f.code, f.stderr))
    }

    /// Like [`Served::start`], on a database URL (PostgreSQL) instead of a
    /// state file.
    pub fn start_on_database(
        spec: &Path,
        url: &str,
        env: &[(&str, &str)],
        args: &[&str],
    ) -> Served {
        Served::launch(spec, &["--database-url", url], env, args)
            .unwrap_or_else(|f| panic!("server did not start ({:?}):\n{}", f.code, f.stderr))
    }

    pub fn try_start(
        spec: &Path,
        state: &Path,
        env: &[(&str, &str)],
        args: &[&str],
    ) -> Result<Served, StartFailure> {
        let state = state.to_str().expect("utf-8 state path");
        Served::launch(spec, &["--state", state], env, args)
    }

    fn launch(
        spec: &Path,
        store: &[&str],
        env: &[(&str, &str)],
        args: &[&str],
    ) -> Result<Served, StartFailure> {
        let mut cmd = serve_command(spec, env.iter().copied());
        cmd.args(store);
        if !args.contains(&"--listen") {
            cmd.args(["--listen", "127.0.0.1:0"]);
        }
        let mut child = cmd.args(args).spawn().expect("spawn tollgate serve");
        let logs = Arc::new(Mutex::new(String::new()));
        let mut stderr = child.stderr.take().expect("stderr");
        let sink = logs.clone();
        let reader = std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok(n) = stderr.read(&mut buf) {
                if n == 0 {
                    break;
                }
                sink.lock()
                    .unwrap()
                    .push_str(&String::from_utf8_lossy(&buf[..n]));
            }
        });
        let mut stdout = BufReader::new(child.stdout.take().expect("stdout"));
        let mut line = String::new();
        let read = stdout.read_line(&mut line).unwrap_or(0);
        let base = line
            .trim()
            .strip_prefix("listening on ")
            .map(str::to_string);
        match base {
            Some(base) if read > 0 => {
                // Keep draining stdout so the server never blocks on it.
                std::thread::spawn(move || {
                    let mut rest = String::new();
                    let _ = stdout.read_to_string(&mut rest);
                });
                Ok(Served { child, base, logs })
            }
            _ => {
                let status = child.wait().expect("wait");
                // The process is gone, so its stderr ends: all of it read.
                let _ = reader.join();
                let stderr = logs.lock().unwrap().clone();
                Err(StartFailure {
                    code: status.code(),
                    stderr: format!("stdout: {line}\nstderr:\n{stderr}"),
                })
            }
        }
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{}", self.base, path)
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The exit status if the server has stopped (or was killed), without
    /// waiting.
    pub fn exited(&mut self) -> Option<std::process::ExitStatus> {
        self.child.try_wait().ok().flatten()
    }

    /// SIGKILL: no shutdown at all.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// SIGTERM, then wait for the exit status.
    pub fn terminate(&mut self) -> Option<i32> {
        let _ = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        self.child.wait().ok().and_then(|s| s.code())
    }

    /// What the server logged so far (stderr).
    pub fn logs(&self) -> String {
        self.logs.lock().unwrap().clone()
    }

    /// The first log line containing `needle`, waiting up to `within` for
    /// it: a line the server wrote before it answered may still be on its
    /// way through the stderr pipe when the answer arrives.
    pub async fn log_line(&self, needle: &str, within: Duration) -> String {
        let deadline = std::time::Instant::now() + within;
        loop {
            let logs = self.logs();
            if let Some(line) = logs.lines().find(|l| l.contains(needle)) {
                return line.to_string();
            }
            if std::time::Instant::now() >= deadline {
                panic!("no log line with {needle:?} within {within:?}:\n{logs}");
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// [`Served::log_line`] for a test without a runtime.
    pub fn log_line_blocking(&self, needle: &str, within: Duration) -> String {
        let deadline = std::time::Instant::now() + within;
        loop {
            let logs = self.logs();
            if let Some(line) = logs.lines().find(|l| l.contains(needle)) {
                return line.to_string();
            }
            if std::time::Instant::now() >= deadline {
                panic!("no log line with {needle:?} within {within:?}:\n{logs}");
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        self.kill();
    }
}

/// A client for the tests: JSON in, `(status, JSON)` out.
/// A run paused at a gate: its id and its approval key.
#[derive(Debug, Clone)]
pub struct Paused {
    pub run_id: String,
    pub key: String,
}

impl Paused {
    /// From a run view (`GET /runs/{id}`, `POST /runs?wait=true`) that
    /// must show a pending approval.
    pub fn from_run(run: &Value) -> Paused {
        Paused {
            run_id: run["id"].as_str().expect("run id").to_string(),
            key: run["pending_approval"]["key"]
                .as_str()
                .unwrap_or_else(|| panic!("not paused: {run}"))
                .to_string(),
        }
    }
}

#[derive(Clone)]
pub struct Api {
    pub http: reqwest::Client,
    pub token: Option<String>,
}

impl Api {
    pub fn new() -> Api {
        Api {
            http: reqwest::Client::builder()
                .timeout(Duration::from_secs(60))
                .build()
                .expect("client"),
            token: None,
        }
    }

    pub fn with_token(token: &str) -> Api {
        Api {
            token: Some(token.to_string()),
            ..Api::new()
        }
    }

    fn authed(&self, request: reqwest::RequestBuilder) -> reqwest::RequestBuilder {
        match &self.token {
            Some(token) => request.bearer_auth(token),
            None => request,
        }
    }

    pub async fn get(&self, url: &str) -> (u16, Value) {
        let response = self.authed(self.http.get(url)).send().await.expect("GET");
        read(response).await
    }

    pub async fn post(&self, url: &str, body: Value) -> (u16, Value) {
        let response = self
            .authed(self.http.post(url).json(&body))
            .send()
            .await
            .expect("POST");
        read(response).await
    }

    /// Start a run with `input` (`POST /runs?wait=true`) that pauses.
    pub async fn pause(&self, served: &Served, input: Value) -> Paused {
        let (status, run) = self
            .post(&served.url("/runs?wait=true"), json!({ "input": input }))
            .await;
        assert_eq!(status, 200, "{run}");
        Paused::from_run(&run)
    }

    /// POST `body` to a trigger at `path` (202, such as a webhook), then
    /// wait for the run's pause.
    pub async fn trigger_and_wait_for_pause(
        &self,
        served: &Served,
        path: &str,
        body: Value,
    ) -> Paused {
        let (status, answer) = self.post(&served.url(path), body).await;
        assert_eq!(status, 202, "{answer}");
        let run_id = answer["run_id"].as_str().expect("run_id");
        Paused::from_run(
            &self
                .wait_for_status(served, run_id, "awaiting_approval")
                .await,
        )
    }

    /// Poll `GET /runs/{id}` on `served` until the run is `status` (for up
    /// to a minute; every answer must be 200): the run as then served.
    pub async fn wait_for_status(&self, served: &Served, run_id: &str, status: &str) -> Value {
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        loop {
            let (code, run) = self.get(&served.url(&format!("/runs/{run_id}"))).await;
            assert_eq!(code, 200, "{run}\n{}", served.logs());
            if run["status"] == status {
                return run;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "run {run_id} never became {status}: {run}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// POST raw bytes (bad JSON, oversized bodies, signed webhooks).
    pub async fn post_raw(
        &self,
        url: &str,
        body: Vec<u8>,
        headers: &[(&str, &str)],
    ) -> (u16, Value) {
        let mut request = self.authed(self.http.post(url).body(body));
        for (k, v) in headers {
            request = request.header(*k, *v);
        }
        read(request.send().await.expect("POST")).await
    }
}

impl Default for Api {
    fn default() -> Self {
        Api::new()
    }
}

async fn read(response: reqwest::Response) -> (u16, Value) {
    let status = response.status().as_u16();
    let bytes = response.bytes().await.expect("body");
    let value = serde_json::from_slice(&bytes)
        .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).into_owned()));
    (status, value)
}

/// The error code of an error response.
pub fn code(body: &Value) -> &str {
    body["error"]["code"].as_str().unwrap_or("")
}

/// One Server-Sent Event.
#[derive(Debug, Clone)]
pub struct SseEvent {
    pub id: Option<String>,
    pub event: Option<String>,
    pub data: Value,
}

impl SseEvent {
    pub fn kind(&self) -> &str {
        self.data["type"].as_str().unwrap_or("")
    }
}

#[derive(Debug)]
pub enum SseNext {
    Event(SseEvent),
    /// The server closed the stream.
    Ended,
    TimedOut,
}

/// An open `GET /runs/{id}/events`.
pub struct SseStream {
    response: reqwest::Response,
    buffer: String,
    /// Keep-alive comments seen so far.
    pub comments: usize,
}

impl SseStream {
    pub async fn open(api: &Api, url: &str, last_event_id: Option<u64>) -> SseStream {
        let mut request = api.authed(
            reqwest::Client::new()
                .get(url)
                .header("Accept", "text/event-stream"),
        );
        if let Some(id) = last_event_id {
            request = request.header("Last-Event-ID", id.to_string());
        }
        let response = request.send().await.expect("open event stream");
        assert_eq!(response.status().as_u16(), 200, "event stream status");
        SseStream {
            response,
            buffer: String::new(),
            comments: 0,
        }
    }

    /// The next event, waiting at most `within`.
    pub async fn next(&mut self, within: Duration) -> SseNext {
        let deadline = tokio::time::Instant::now() + within;
        loop {
            if let Some(event) = self.take_event() {
                return SseNext::Event(event);
            }
            match tokio::time::timeout_at(deadline, self.response.chunk()).await {
                Err(_) => return SseNext::TimedOut,
                Ok(Ok(Some(chunk))) => self.buffer.push_str(&String::from_utf8_lossy(&chunk)),
                Ok(Ok(None)) | Ok(Err(_)) => return SseNext::Ended,
            }
        }
    }

    /// Every event until the stream ends (panics if it stays open longer
    /// than `within`).
    pub async fn collect_until_end(&mut self, within: Duration) -> Vec<SseEvent> {
        let mut events = Vec::new();
        loop {
            match self.next(within).await {
                SseNext::Event(e) => events.push(e),
                SseNext::Ended => return events,
                SseNext::TimedOut => panic!("stream still open after {within:?}: {events:#?}"),
            }
        }
    }

    fn take_event(&mut self) -> Option<SseEvent> {
        loop {
            let end = self.buffer.find("\n\n")?;
            let block: String = self.buffer.drain(..end + 2).collect();
            let mut id = None;
            let mut event = None;
            let mut data = String::new();
            for line in block.lines() {
                if line.starts_with(':') {
                    self.comments += 1;
                } else if let Some(v) = line.strip_prefix("id:") {
                    id = Some(v.trim().to_string());
                } else if let Some(v) = line.strip_prefix("event:") {
                    event = Some(v.trim().to_string());
                } else if let Some(v) = line.strip_prefix("data:") {
                    data.push_str(v.trim_start());
                }
            }
            if !data.is_empty() {
                let data = serde_json::from_str(&data).expect("event data is JSON");
                return Some(SseEvent { id, event, data });
            }
        }
    }
}
