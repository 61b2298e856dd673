//! A real `tollgate serve` process for a bench: started on a free loopback
//! port at the default durability, its address read from its first line,
//! its memory and CPU time read from /proc, killed when the bench is done.
#![allow(dead_code)] // each bench uses part of it

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Instant;

pub struct Server {
    child: Child,
    pub base: String,
    /// When it printed its address (it listens from then on).
    pub listening_at: Instant,
}

/// The `tollgate` binary the benches serve with: the one cargo built with
/// them, or TOLLGATE_BENCH_SERVER_BIN (a copy of another build's, to run
/// before and after builds side by side from one bench binary).
fn binary() -> std::path::PathBuf {
    std::env::var_os("TOLLGATE_BENCH_SERVER_BIN")
        .map(Into::into)
        .unwrap_or_else(|| env!("CARGO_BIN_EXE_tollgate").into())
}

impl Server {
    /// `tollgate serve SPEC --state STATE` (SQLite at FULL, the default).
    pub fn sqlite(spec: &Path, state: &Path) -> Server {
        Server::start(spec, &["--state".as_ref(), state.as_os_str()])
    }

    /// `tollgate serve SPEC --database-url URL`.
    pub fn postgres(spec: &Path, url: &str) -> Server {
        Server::start(spec, &["--database-url".as_ref(), url.as_ref()])
    }

    fn start(spec: &Path, store: &[&std::ffi::OsStr]) -> Server {
        Server::start_with(&binary(), spec, store, &[])
    }

    /// `BINARY serve SPEC --state STATE` with `env` added: to run two
    /// builds side by side (benches/memory.rs), or with a setting changed.
    pub fn sqlite_with(binary: &Path, spec: &Path, state: &Path, env: &[(&str, &str)]) -> Server {
        Server::start_with(binary, spec, &["--state".as_ref(), state.as_os_str()], env)
    }

    fn start_with(
        binary: &Path,
        spec: &Path,
        store: &[&std::ffi::OsStr],
        env: &[(&str, &str)],
    ) -> Server {
        let mut child = Command::new(binary)
            .arg("serve")
            .arg(spec)
            .args(store)
            .args(["--listen", "127.0.0.1:0"])
            .env_remove("TOLLGATE_API_TOKENS")
            .env_remove("TOLLGATE_SQLITE_SYNCHRONOUS")
            .env_remove("TOLLGATE_DATABASE_URL")
            .env("RUST_LOG", "warn")
            .envs(env.iter().copied())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn tollgate serve");
        let mut line = String::new();
        BufReader::new(child.stdout.take().expect("stdout"))
            .read_line(&mut line)
            .expect("read address");
        let base = line
            .trim()
            .strip_prefix("listening on ")
            .unwrap_or_else(|| panic!("tollgate serve did not start: {line:?}"))
            .to_string();
        Server {
            child,
            base,
            listening_at: Instant::now(),
        }
    }

    /// Forget the peak (`VmHWM`): from now on it is the peak since this
    /// call (/proc/PID/clear_refs, `5`).
    pub fn reset_peak(&self) {
        let _ = std::fs::write(format!("/proc/{}/clear_refs", self.child.id()), "5");
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// A memory line of /proc/PID/status (`VmRSS:` now, `VmHWM:` the peak) in MiB.
    pub fn rss_mib(&self, line: &str) -> f64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id()))
            .unwrap_or_default();
        status
            .lines()
            .find_map(|l| l.strip_prefix(line))
            .and_then(|v| v.split_whitespace().next()?.parse::<f64>().ok())
            .map_or(0.0, |kib| kib / 1024.0)
    }

    pub fn stop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Percent-encode what a cursor may hold for a query string.
pub fn encode(text: &str) -> String {
    text.replace('%', "%25")
        .replace(':', "%3A")
        .replace('|', "%7C")
        .replace('+', "%2B")
        .replace('&', "%26")
        .replace('=', "%3D")
}

/// Approve every key over `connections` keep-alive connections spread
/// round-robin over the servers at `bases` (each connection approving the
/// next key from a shared queue); how long until every approval was
/// answered (a decision is answered once its claim is durable). Each answer
/// must be 200.
pub async fn approve_all(
    bases: &[String],
    keys: Vec<String>,
    connections: usize,
) -> std::time::Duration {
    use std::sync::{Arc, Mutex};
    let queue = Arc::new(Mutex::new(std::collections::VecDeque::from(keys)));
    let started = Instant::now();
    let workers: Vec<_> = (0..connections)
        .map(|i| {
            let queue = queue.clone();
            let base = bases[i % bases.len()].clone();
            tokio::spawn(async move {
                // One client each, one idle connection: a keep-alive connection per worker.
                let client = reqwest::Client::builder()
                    .pool_max_idle_per_host(1)
                    .build()
                    .expect("client");
                loop {
                    let Some(key) = queue.lock().unwrap().pop_front() else {
                        return;
                    };
                    let response = client
                        .post(format!("{base}/approvals/{key}/approve"))
                        .json(&serde_json::json!({}))
                        .send()
                        .await
                        .expect("approve");
                    let status = response.status().as_u16();
                    let body = response.text().await.unwrap_or_default();
                    assert_eq!(status, 200, "approving {key} on {base}: {body}");
                }
            })
        })
        .collect();
    for worker in workers {
        worker.await.expect("worker");
    }
    started.elapsed()
}

/// The counters a server's SQLite writer exports on `GET /metrics`
/// (`tollgate_store_*`): what its one writer connection did since start.
#[derive(Debug, Clone, Copy, Default)]
pub struct WriterTotals {
    pub commits: f64,
    pub writes: f64,
    pub busy_s: f64,
    pub committing_s: f64,
}

impl WriterTotals {
    /// What the writer did between `earlier` and this scrape.
    pub fn since(&self, earlier: &WriterTotals) -> WriterTotals {
        WriterTotals {
            commits: self.commits - earlier.commits,
            writes: self.writes - earlier.writes,
            busy_s: self.busy_s - earlier.busy_s,
            committing_s: self.committing_s - earlier.committing_s,
        }
    }
}

/// Scrape the writer's counters (zeros when the server's store has no one
/// writer, as on PostgreSQL).
pub async fn writer_totals(base: &str) -> WriterTotals {
    let text = reqwest::get(format!("{base}/metrics"))
        .await
        .and_then(|r| r.error_for_status())
        .expect("GET /metrics")
        .text()
        .await
        .expect("metrics text");
    let value = |name: &str| -> f64 {
        text.lines()
            .find_map(|line| line.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
            .unwrap_or(0.0)
    };
    WriterTotals {
        commits: value("tollgate_store_commits_total"),
        writes: value("tollgate_store_writes_total"),
        busy_s: value("tollgate_store_writer_busy_seconds_total"),
        committing_s: value("tollgate_store_commit_seconds_total"),
    }
}
