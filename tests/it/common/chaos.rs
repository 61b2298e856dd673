//! Helpers for the SIGKILL chaos test: a seeded random source, settings read
//! from the environment, and a `tollgate serve` process that a killer thread
//! SIGKILLs and restarts on the same state file while clients keep working.
//! The server is killed on every way out (drop), and nothing here waits
//! without a bound: a server that does not say where it listens within
//! [`STARTUP_TIMEOUT`] is killed and reported.
//! Include with `#[path = "common/chaos.rs"] mod chaos;` next to `mod common;`.
#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::Child;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex, MutexGuard, RwLock};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::common::serve_command;

/// How long a (re)started server may take to print `listening on ...`.
pub const STARTUP_TIMEOUT: Duration = Duration::from_secs(30);

/// The server logs kept for a failure report: the last this many bytes.
const LOG_TAIL_BYTES: usize = 64 * 1024;

pub use super::rng::Rng;

/// A whole number from the environment, or `default` when unset. A value that
/// is set but not a number stops the test with the variable's name.
pub fn env_number(var: &str, default: u64) -> u64 {
    match std::env::var(var) {
        Ok(text) if !text.trim().is_empty() => text
            .trim()
            .parse()
            .unwrap_or_else(|_| panic!("{var}={text:?}: expected a whole number")),
        _ => default,
    }
}

/// `TOLLGATE_CHAOS_SEED` when set, otherwise one taken from the clock.
pub fn seed_from_env(var: &str) -> u64 {
    match std::env::var(var) {
        Ok(text) if !text.trim().is_empty() => text
            .trim()
            .parse()
            .unwrap_or_else(|_| panic!("{var}={text:?}: expected a whole number")),
        _ => {
            let nanos = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos() as u64)
                .unwrap_or(0);
            // Mix in the pid so two runs in the same nanosecond differ.
            Rng::new(nanos ^ u64::from(std::process::id())).next_u64()
        }
    }
}

/// What to start: `tollgate serve SPEC --state STATE --listen 127.0.0.1:0`
/// with `env` added to a clean environment.
#[derive(Debug, Clone)]
pub struct Launch {
    pub spec: PathBuf,
    pub state: PathBuf,
    pub env: Vec<(String, String)>,
}

/// The server's stderr across every generation, trimmed to its tail.
#[derive(Default)]
struct Logs {
    text: String,
    /// Lines that say a thread panicked, counted before trimming.
    panics: usize,
}

impl Logs {
    fn push(&mut self, chunk: &str) {
        self.panics += chunk.matches("panicked").count();
        self.text.push_str(chunk);
        if self.text.len() > 2 * LOG_TAIL_BYTES {
            let mut cut = self.text.len() - LOG_TAIL_BYTES;
            while !self.text.is_char_boundary(cut) {
                cut += 1;
            }
            self.text.drain(..cut);
        }
    }
}

struct Shared {
    launch: Launch,
    /// The running process, if any. Held while a process is killed and its
    /// successor started, so nobody sees half a restart.
    child: Mutex<Option<Child>>,
    /// `http://127.0.0.1:PORT` of the running process; `None` while down.
    base: RwLock<Option<String>>,
    /// Stop killing (the server stays up).
    calm: AtomicBool,
    /// Everything ends: no more restarts.
    closed: AtomicBool,
    kills: AtomicUsize,
    starts: AtomicUsize,
    logs: Arc<Mutex<Logs>>,
    /// Why a restart failed, if one did (the killer stops there).
    failure: Mutex<Option<String>>,
}

/// A `tollgate serve` that can be SIGKILLed and restarted on a schedule.
pub struct ChaosServer {
    shared: Arc<Shared>,
    killer: Option<JoinHandle<()>>,
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panicking client thread must not stop the cleanup.
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

impl ChaosServer {
    /// Start the first process.
    pub fn start(launch: Launch) -> Result<ChaosServer, String> {
        let shared = Arc::new(Shared {
            launch,
            child: Mutex::new(None),
            base: RwLock::new(None),
            calm: AtomicBool::new(false),
            closed: AtomicBool::new(false),
            kills: AtomicUsize::new(0),
            starts: AtomicUsize::new(0),
            logs: Arc::new(Mutex::new(Logs::default())),
            failure: Mutex::new(None),
        });
        let server = ChaosServer {
            shared,
            killer: None,
        };
        {
            let mut slot = lock(&server.shared.child);
            server.shared.spawn_into(&mut slot)?;
        }
        Ok(server)
    }

    /// The running process's address, `None` while it is down.
    pub fn base(&self) -> Option<String> {
        self.shared.base()
    }

    /// A handle clients can read the current address from.
    pub fn address(&self) -> Address {
        Address(self.shared.clone())
    }

    /// SIGKILL and restart the server every `min..=max` (drawn from `rng`)
    /// until `until`, in a thread of its own. Afterwards the server stays up.
    pub fn kill_every(&mut self, mut rng: Rng, min: Duration, max: Duration, until: Instant) {
        let shared = self.shared.clone();
        self.killer = Some(std::thread::spawn(move || {
            let (lo, hi) = (min.as_millis() as u64, max.as_millis() as u64);
            loop {
                let wait = Duration::from_millis(rng.between(lo, hi));
                let at = Instant::now() + wait;
                while Instant::now() < at {
                    if shared.calm.load(Ordering::SeqCst) || Instant::now() >= until {
                        return;
                    }
                    std::thread::sleep(Duration::from_millis(10));
                }
                if Instant::now() >= until {
                    return;
                }
                let mut slot = lock(&shared.child);
                if shared.closed.load(Ordering::SeqCst) || shared.calm.load(Ordering::SeqCst) {
                    return;
                }
                shared.kill_in(&mut slot);
                if let Err(e) = shared.spawn_into(&mut slot) {
                    *lock(&shared.failure) = Some(e);
                    return;
                }
            }
        }));
    }

    /// Stop the kill loop and wait for it; the server stays (or is brought)
    /// up. Returns why a restart failed, if one did.
    pub fn calm_down(&mut self) -> Result<(), String> {
        self.shared.calm.store(true, Ordering::SeqCst);
        if let Some(killer) = self.killer.take() {
            let _ = killer.join();
        }
        if let Some(e) = lock(&self.shared.failure).clone() {
            return Err(e);
        }
        let mut slot = lock(&self.shared.child);
        if slot.is_none() && !self.shared.closed.load(Ordering::SeqCst) {
            self.shared.spawn_into(&mut slot)?;
        }
        Ok(())
    }

    /// SIGKILL the server for good.
    pub fn close(&mut self) {
        self.shared.closed.store(true, Ordering::SeqCst);
        self.shared.calm.store(true, Ordering::SeqCst);
        let mut slot = lock(&self.shared.child);
        self.shared.kill_in(&mut slot);
    }

    /// SIGKILLs so far (not counting [`ChaosServer::close`]).
    pub fn kills(&self) -> usize {
        self.shared.kills.load(Ordering::SeqCst)
    }

    /// Processes started so far, the first one included.
    pub fn starts(&self) -> usize {
        self.shared.starts.load(Ordering::SeqCst)
    }

    /// The tail of everything the servers wrote to stderr.
    pub fn logs_tail(&self) -> String {
        lock(&self.shared.logs).text.clone()
    }

    /// Lines in the servers' stderr saying a thread panicked.
    pub fn panics_logged(&self) -> usize {
        lock(&self.shared.logs).panics
    }
}

impl Drop for ChaosServer {
    fn drop(&mut self) {
        // `closed` first: the killer checks it under the lock before it
        // starts a process, so once we hold the lock and kill, none follows.
        self.close();
        if let Some(killer) = self.killer.take() {
            let _ = killer.join();
        }
    }
}

/// Where clients find the server right now.
#[derive(Clone)]
pub struct Address(Arc<Shared>);

impl Address {
    pub fn base(&self) -> Option<String> {
        self.0.base()
    }
}

impl Shared {
    fn base(&self) -> Option<String> {
        self.base.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    fn set_base(&self, base: Option<String>) {
        *self.base.write().unwrap_or_else(|e| e.into_inner()) = base;
    }

    fn kill_in(&self, slot: &mut Option<Child>) {
        self.set_base(None);
        if let Some(mut child) = slot.take() {
            // SIGKILL: no shutdown, nothing flushed.
            let _ = child.kill();
            let _ = child.wait();
            if !self.closed.load(Ordering::SeqCst) {
                self.kills.fetch_add(1, Ordering::SeqCst);
            }
        }
    }

    /// Start a process into `slot` and wait (bounded) for its address.
    fn spawn_into(&self, slot: &mut Option<Child>) -> Result<(), String> {
        let (child, base) = spawn(
            &self.launch.spec,
            &self.launch.state,
            &self.launch.env,
            &self.logs,
        )?;
        *slot = Some(child);
        self.starts.fetch_add(1, Ordering::SeqCst);
        self.set_base(Some(base));
        Ok(())
    }
}

fn spawn(
    spec: &Path,
    state: &Path,
    env: &[(String, String)],
    logs: &Arc<Mutex<Logs>>,
) -> Result<(Child, String), String> {
    let mut child = serve_command(spec, env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
        .arg("--state")
        .arg(state)
        .args(["--listen", "127.0.0.1:0"])
        .spawn()
        .map_err(|e| format!("cannot spawn tollgate serve: {e}"))?;
    let mut reader = None;
    if let Some(mut stderr) = child.stderr.take() {
        let sink = logs.clone();
        reader = Some(std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok(n) = stderr.read(&mut buf) {
                if n == 0 {
                    break;
                }
                lock(&sink).push(&String::from_utf8_lossy(&buf[..n]));
            }
        }));
    }
    let Some(stdout) = child.stdout.take() else {
        let _ = child.kill();
        let _ = child.wait();
        return Err("tollgate serve has no stdout".into());
    };
    let (line_tx, line_rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut stdout = BufReader::new(stdout);
        let mut line = String::new();
        let _ = stdout.read_line(&mut line);
        let _ = line_tx.send(line);
        // Keep draining so the server never blocks on a full pipe.
        let mut rest = String::new();
        let _ = stdout.read_to_string(&mut rest);
    });
    let started = Instant::now();
    let line = line_rx.recv_timeout(STARTUP_TIMEOUT);
    let base = line
        .as_ref()
        .ok()
        .and_then(|l| l.trim().strip_prefix("listening on ").map(str::to_string));
    match base {
        Some(base) => Ok((child, base)),
        None => {
            let _ = child.kill();
            let status = child.wait();
            // The process is gone, so its stderr ends: all of it read.
            if let Some(reader) = reader {
                let _ = reader.join();
            }
            Err(format!(
                "tollgate serve did not start (after {:?}; stdout {:?}; exit {:?}); log tail:\n{}",
                started.elapsed(),
                line,
                status.map(|s| s.code()),
                lock(logs).text
            ))
        }
    }
}
