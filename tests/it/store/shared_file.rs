//! One SQLite state file shared by a `tollgate serve` and CLI processes, as
//! the README allows: under load from HTTP clients, a health poller and CLI
//! loops for a bounded time, the file stays sound, the server stays up, and
//! every acknowledged run and decision is in the file.
//!
//! Why this exists: closing any descriptor of a file drops every POSIX lock
//! the process holds on it (SQLite's "How To Corrupt An SQLite Database
//! File", 2.2). A writability check that opened and closed `state.db`,
//! `-wal` or `-shm` on every `/healthz` silently dropped the server's
//! SQLite locks, so CLI processes took the file as theirs: the server died
//! of SIGBUS (its `-shm` mapping truncated under it) and the file was
//! damaged. With the old check put back, 10 rounds of this test caught it in
//! every round.
//!
//! `TOLLGATE_SHARED_FILE_SECONDS` (default 6) and
//! `TOLLGATE_SHARED_FILE_ROUNDS` (default 2) make it longer.

use std::collections::{HashMap, VecDeque};
use std::os::unix::process::ExitStatusExt;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::common::server::Served;
use crate::common::{GATED_SPEC, Workspace, awaiting_key, stdout, tollgate_bin};

const HTTP_CLIENTS: usize = 3;
const CLI_LOOPS: usize = 5;

fn env_number(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// What the load was told was done: only acknowledged work is checked.
#[derive(Default)]
struct Acknowledged {
    /// run id -> who started it
    runs: Mutex<HashMap<String, String>>,
    /// approval key -> who decided it
    decisions: Mutex<HashMap<String, String>>,
    /// Keys paused and acknowledged, not yet decided by anyone here.
    undecided: Mutex<VecDeque<String>>,
    /// Answers that are faults: a 5xx, a refused connection, a CLI exit
    /// other than 0.
    faults: Mutex<Vec<String>>,
    health_checks: AtomicU64,
}

impl Acknowledged {
    fn fault(&self, what: String) {
        let mut faults = self.faults.lock().unwrap();
        if faults.len() < 50 {
            faults.push(what);
        }
    }

    fn paused(&self, run_id: String, key: String, by: &str) {
        self.runs.lock().unwrap().insert(run_id, by.to_string());
        self.undecided.lock().unwrap().push_back(key);
    }

    fn next_undecided(&self) -> Option<String> {
        self.undecided.lock().unwrap().pop_front()
    }

    fn decided(&self, key: String, by: &str) {
        self.decisions.lock().unwrap().insert(key, by.to_string());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_state_file_shared_by_serve_and_cli_processes_stays_sound() {
    let seconds = env_number("TOLLGATE_SHARED_FILE_SECONDS", 6);
    let rounds = env_number("TOLLGATE_SHARED_FILE_ROUNDS", 2);
    for round in 1..=rounds {
        one_round(round, Duration::from_secs(seconds)).await;
    }
}

async fn one_round(round: u64, length: Duration) {
    let ws = Workspace::new(GATED_SPEC);
    let db = ws.state_db();
    // The CLI made the file first, as a user who tried `run --persist`
    // before starting the server would have.
    ws.pause_run(r#"{"order_id": "first"}"#);
    let mut served = Served::start(&ws.spec, &db, &[], &[]);
    let ack = Arc::new(Acknowledged::default());
    let stop = Arc::new(AtomicBool::new(false));
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(60))
        .build()
        .expect("client");

    let mut tasks = Vec::new();
    for client in 0..HTTP_CLIENTS {
        let (ack, stop, http, base) =
            (ack.clone(), stop.clone(), http.clone(), served.base.clone());
        tasks.push(tokio::spawn(async move {
            http_client(client, &http, &base, &ack, &stop).await
        }));
    }
    {
        // A load balancer's health checks, as often as they come.
        let (ack, stop, http, base) =
            (ack.clone(), stop.clone(), http.clone(), served.base.clone());
        tasks.push(tokio::spawn(async move {
            health_poller(&http, &base, &ack, &stop).await
        }));
    }
    let mut cli_threads = Vec::new();
    for cli in 0..CLI_LOOPS {
        let (ack, stop) = (ack.clone(), stop.clone());
        let spec = ws.spec.clone();
        cli_threads.push(std::thread::spawn(move || {
            cli_loop(cli, &spec, &ack, &stop)
        }));
    }

    let started = Instant::now();
    let mut died = None;
    while started.elapsed() < length {
        if let Some(status) = served.exited() {
            died = Some(status);
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    stop.store(true, Ordering::Relaxed);
    for task in tasks {
        task.await.expect("client task");
    }
    for thread in cli_threads {
        thread.join().expect("cli loop");
    }
    if died.is_none() {
        died = served.exited();
    }
    let logs = served.logs();
    if let Some(status) = died {
        panic!(
            "round {round}: the server died ({status:?}, signal {:?}) under a shared file:\n{logs}",
            status.signal()
        );
    }
    // The server still answers, and still writes.
    let health = http
        .get(format!("{}/readyz", served.base))
        .send()
        .await
        .map(|r| r.status().as_u16());
    assert_eq!(
        health.ok(),
        Some(200),
        "round {round}: /readyz after the load\n{logs}"
    );
    assert_eq!(
        served.terminate(),
        Some(0),
        "round {round}: a clean stop\n{logs}"
    );

    let faults = ack.faults.lock().unwrap().clone();
    assert!(
        faults.is_empty(),
        "round {round}: {} faulty answers under a shared file, first: {:#?}\n{logs}",
        faults.len(),
        &faults[..faults.len().min(10)]
    );

    let conn = rusqlite::Connection::open(&db).expect("open the state file");
    let check: Vec<String> = conn
        .prepare("PRAGMA integrity_check")
        .unwrap()
        .query_map([], |row| row.get(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(
        check,
        ["ok"],
        "round {round}: integrity_check of the shared file"
    );

    let runs = ack.runs.lock().unwrap().clone();
    let decisions = ack.decisions.lock().unwrap().clone();
    assert!(
        runs.len() >= 10 && decisions.len() >= 5,
        "round {round}: too little load to mean anything: {} runs, {} decisions",
        runs.len(),
        decisions.len()
    );
    for run_id in runs.keys() {
        let found: i64 = conn
            .query_row(
                "SELECT COUNT(*) FROM tollgate_runs WHERE id = ?1",
                [run_id],
                |row| row.get(0),
            )
            .unwrap();
        assert_eq!(
            found, 1,
            "round {round}: acknowledged run {run_id} is not in the file"
        );
    }
    for (key, by) in &decisions {
        let (status, decided_by): (String, String) = conn
            .query_row(
                "SELECT status, decided_by FROM tollgate_approvals WHERE key = ?1",
                [key],
                |row| Ok((row.get(0)?, row.get(1)?)),
            )
            .unwrap_or_else(|e| panic!("round {round}: acknowledged decision {key}: {e}"));
        assert_eq!(
            (status.as_str(), decided_by.as_str()),
            ("APPROVED", by.as_str()),
            "round {round}: acknowledged decision of {key}"
        );
    }
    eprintln!(
        "shared file round {round}: {} runs and {} decisions acknowledged, {} health checks, \
         integrity ok, server alive",
        runs.len(),
        decisions.len(),
        ack.health_checks.load(Ordering::Relaxed)
    );
}

/// Start runs over HTTP (each pauses), decide keys anyone paused, list.
async fn http_client(
    client: usize,
    http: &reqwest::Client,
    base: &str,
    ack: &Acknowledged,
    stop: &AtomicBool,
) {
    let by = format!("http{client}");
    let mut n = 0u64;
    while !stop.load(Ordering::Relaxed) {
        n += 1;
        let input = json!({"input": {"order_id": format!("{by}-{n}")}});
        match post(http, &format!("{base}/runs?wait=true"), &input).await {
            Ok((200, run)) => match (run["id"].as_str(), run["pending_approval"]["key"].as_str()) {
                (Some(id), Some(key)) => ack.paused(id.into(), key.into(), &by),
                _ => ack.fault(format!(
                    "POST /runs answered a run that did not pause: {run}"
                )),
            },
            Ok((status, body)) => ack.fault(format!("POST /runs: {status} {body}")),
            Err(e) => ack.fault(format!("POST /runs: {e}")),
        }
        if let Some(key) = ack.next_undecided() {
            let url = format!("{base}/approvals/{key}/approve");
            match post(http, &url, &json!({"reason": "stress"})).await {
                Ok((200, _)) => ack.decided(key, "local"),
                Ok((status, body)) => ack.fault(format!("approve {key}: {status} {body}")),
                Err(e) => ack.fault(format!("approve {key}: {e}")),
            }
        }
        if n.is_multiple_of(5) {
            match http.get(format!("{base}/approvals?limit=20")).send().await {
                Ok(r) if r.status().is_success() => {}
                Ok(r) => ack.fault(format!("GET /approvals: {}", r.status())),
                Err(e) => ack.fault(format!("GET /approvals: {e}")),
            }
        }
    }
}

async fn health_poller(http: &reqwest::Client, base: &str, ack: &Acknowledged, stop: &AtomicBool) {
    while !stop.load(Ordering::Relaxed) {
        for path in ["/healthz", "/readyz"] {
            match http.get(format!("{base}{path}")).send().await {
                Ok(r) if r.status().is_success() => {
                    ack.health_checks.fetch_add(1, Ordering::Relaxed);
                }
                Ok(r) => ack.fault(format!("GET {path}: {}", r.status())),
                Err(e) => ack.fault(format!("GET {path}: {e}")),
            }
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

/// `tollgate run --persist` then `approvals approve` of a key someone
/// paused, over and over: each command is its own process on the file.
fn cli_loop(cli: usize, spec: &std::path::Path, ack: &Acknowledged, stop: &AtomicBool) {
    let by = format!("cli{cli}");
    let spec = spec.to_str().expect("utf-8 path");
    let mut n = 0u64;
    while !stop.load(Ordering::Relaxed) {
        n += 1;
        let input = format!(r#"{{"order_id": "{by}-{n}"}}"#);
        let out = tollgate(&["run", spec, "--persist", "--json", "--input", &input]);
        let text = stdout(&out);
        match (out.status.code(), awaiting_key(&text), run_id_of(&text)) {
            (Some(0), Some(key), Some(run_id)) => ack.paused(run_id, key, &by),
            _ => ack.fault(format!(
                "{by}: run --persist: {:?}\n{text}\n{}",
                out.status,
                String::from_utf8_lossy(&out.stderr)
            )),
        }
        if let Some(key) = ack.next_undecided() {
            let out = tollgate(&["approvals", "approve", &key, "--spec", spec, "--by", &by]);
            if out.status.success() {
                ack.decided(key, &by);
            } else {
                ack.fault(format!(
                    "{by}: approve {key}: {:?} {}",
                    out.status,
                    String::from_utf8_lossy(&out.stderr)
                ));
            }
        }
        if n.is_multiple_of(4) {
            let out = tollgate(&["approvals", "list", "--spec", spec, "--json"]);
            if !out.status.success() {
                ack.fault(format!("{by}: approvals list: {:?}", out.status));
            }
        }
    }
}

fn tollgate(args: &[&str]) -> std::process::Output {
    Command::new(tollgate_bin())
        .args(args)
        .env_remove("TOLLGATE_DATABASE_URL")
        .env_remove("TOLLGATE_LINK_SECRET")
        .stdin(Stdio::null())
        .output()
        .expect("run tollgate")
}

fn run_id_of(json_lines: &str) -> Option<String> {
    json_lines
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .find_map(|event| event["run_id"].as_str().map(str::to_string))
}

async fn post(http: &reqwest::Client, url: &str, body: &Value) -> Result<(u16, Value), String> {
    let response = http
        .post(url)
        .json(body)
        .send()
        .await
        .map_err(|e| e.to_string())?;
    let status = response.status().as_u16();
    let bytes = response.bytes().await.map_err(|e| e.to_string())?;
    let value = serde_json::from_slice(&bytes)
        .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).into_owned()));
    Ok((status, value))
}

/// The failure the shared-file bug caused, made on purpose: the server's
/// `-shm` mapping truncated under it (as a CLI process that believed itself
/// alone would do). The process dies of SIGBUS, and says so in its last log
/// line, in the log format it was told to use.
#[tokio::test(flavor = "multi_thread")]
async fn a_server_killed_by_sigbus_leaves_a_last_log_line() {
    for format in ["text", "json"] {
        let ws = Workspace::new(GATED_SPEC);
        let db = ws.state_db();
        let mut served = Served::start(&ws.spec, &db, &[("TOLLGATE_LOG_FORMAT", format)], &[]);
        let http = reqwest::Client::new();
        let listed = http
            .get(format!("{}/approvals", served.base))
            .send()
            .await
            .expect("the server answers");
        assert_eq!(listed.status(), 200);

        let shm = std::path::PathBuf::from(format!("{}-shm", db.display()));
        std::fs::OpenOptions::new()
            .write(true)
            .truncate(true)
            .open(&shm)
            .expect("truncate the -shm file");
        // Its next read of the WAL index touches the truncated mapping.
        let _ = http.get(format!("{}/approvals", served.base)).send().await;
        let deadline = Instant::now() + Duration::from_secs(30);
        let status = loop {
            if let Some(status) = served.exited() {
                break status;
            }
            assert!(
                Instant::now() < deadline,
                "the server did not die of the truncated -shm"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        };
        assert_eq!(
            status.signal(),
            Some(7),
            "SIGBUS, as without the handler: {status:?}"
        );
        // The process is gone, but its last line may still be in the pipe.
        served
            .log_line("fatal signal", Duration::from_secs(5))
            .await;
        let logs = served.logs();
        let last = logs
            .lines()
            .rev()
            .find(|l| !l.trim().is_empty())
            .unwrap_or_default();
        assert!(
            last.contains("fatal signal SIGBUS"),
            "{format}: last line: {last}\n{logs}"
        );
        assert!(last.contains("-shm"), "names the likely cause: {last}");
        assert!(
            last.contains(&served.pid().to_string()),
            "names the process: {last}"
        );
        if format == "json" {
            let line: Value = serde_json::from_str(last).expect("one JSON object");
            assert_eq!(line["level"], "ERROR");
            assert_eq!(line["fields"]["signal"], "SIGBUS");
            assert!(
                chrono::DateTime::parse_from_rfc3339(line["timestamp"].as_str().unwrap_or(""))
                    .is_ok(),
                "{line}"
            );
        }
    }
}
