//! SIGKILL chaos against the real binary: one `tollgate serve` on a SQLite
//! file, SIGKILLed and restarted every 1-3 s (seeded) while runs start and
//! sixteen deciders, each with its own token, race approve against reject for
//! every key. Each run passes two gates: an approval step, then a POST tool
//! with `approval: required` whose call to a loopback stub is the side effect.
//!
//! Afterwards, with the server up and quiet, the state file must show:
//! - 0 pauses lost: every run acknowledged with 202 is stored, every key the
//!   server listed is stored with its run, every `awaiting_approval` event
//!   has its record, and no gate is left undecided;
//! - 0 decisions lost: every 200 from approve or reject is the stored
//!   decision, by the same decider, and at most one decider won each key;
//! - 0 side effects doubled: the stub saw each run's call, and each
//!   Idempotency-Key, at most once, never without an approval; exactly once
//!   for a completed run.
//!
//! - 0 runs left behind: a run whose server died between its 202 and its
//!   first pause, or between a claim and its next durable point, is
//!   recovered by the next server once its lease (2 s here) runs out. At
//!   the end no run is `running` without a live owner: every run is final,
//!   waiting (none, once settled) or `stuck`. A run is `stuck` only when
//!   its shipment was in flight when the server died (the POST's start is
//!   journaled, its result is not): its call reached the stub at most once.
//!
//! Longer runs: `TOLLGATE_CHAOS_RUNS`, `TOLLGATE_CHAOS_SECONDS`, and
//! `TOLLGATE_CHAOS_SEED` to replay a seed's choices (the timing differs).

use crate::common;
use crate::common::chaos;
use crate::common::stub_server;

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use chaos::{Address, ChaosServer, Launch, Rng};
use common::{Workspace, open_store};
use serde_json::{Value, json};
use stub_server::{Request, Response, StubServer};
use tokio::sync::mpsc;
use tokio::time::Instant;
use tollgate_runtime::{ApprovalRecord, ApprovalStatus, EventKind};

const DEFAULT_RUNS: u64 = 300;
const DEFAULT_SECONDS: u64 = 40;
const DECIDERS: usize = 16;
const KILL_MIN: Duration = Duration::from_secs(1);
const KILL_MAX: Duration = Duration::from_secs(3);
/// How long the runs may take to settle once the kills stop.
const SETTLE_LIMIT: Duration = Duration::from_secs(60);
/// Settled: nothing changed in the store for this long, nothing pending.
const QUIET_FOR: Duration = Duration::from_secs(2);
/// A listed key whose deciders all gave up is handed out again after this.
const RESCHEDULE_AFTER: Duration = Duration::from_secs(2);
const MAX_SCHEDULES_PER_KEY: usize = 20;
/// Attempts per decision while the server is down or dies mid-request.
const MAX_ATTEMPTS: usize = 60;
const PAGE: usize = 500;
const MAX_PAGES: usize = 50;
const STARTER: &str = "starter";
/// How long the stub takes to answer a shipment.
const SHIP_TAKES: Duration = Duration::from_millis(150);
/// The servers' run lease: a killed server's runs are recovered within
/// about a lease and a half of its successor's start.
const RUN_LEASE: &str = "2s";

/// `ship` is a POST without `idempotent: true`, so nothing may ever send it
/// twice: the stub counts every arrival, even with the same Idempotency-Key.
const SPEC: &str = r#"version: 1
agent: chaos-desk
description: Ship an order once it is reviewed and the shipment approved.
tools:
  ship:
    http:
      method: POST
      url: "STUB_URL"
      json: { order: "{{ args.order }}", run: "{{ run.id }}" }
    approval: required
    message: "Ship {{ args.order }}?"
steps:
  - id: review
    approval:
      message: "Review order {{ input.order }}?"
  - id: ship
    tool: ship
    with: { order: "{{ input.order }}" }
  - id: done
    set:
      status: "{{ steps.ship.output.status }}"
      reviewed_by: "{{ steps.review.output.decided_by }}"
"#;

fn token(name: &str) -> String {
    format!("chaos-token-for-{name}")
}

fn decider_name(index: usize) -> String {
    format!("d{index}")
}

fn tokens_env() -> String {
    (0..DECIDERS)
        .map(decider_name)
        .chain([STARTER.to_string()])
        .map(|name| format!("{name}:{}", token(&name)))
        .collect::<Vec<_>>()
        .join(",")
}

struct Config {
    runs: usize,
    seconds: u64,
    seed: u64,
}

impl Config {
    fn from_env() -> Config {
        Config {
            runs: chaos::env_number("TOLLGATE_CHAOS_RUNS", DEFAULT_RUNS).max(1) as usize,
            seconds: chaos::env_number("TOLLGATE_CHAOS_SECONDS", DEFAULT_SECONDS),
            seed: chaos::seed_from_env("TOLLGATE_CHAOS_SEED"),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Verdict {
    Approve,
    Reject,
}

/// One decider's attempt at one key.
#[derive(Debug, Clone)]
struct Job {
    key: String,
    verdict: Verdict,
    /// `POST /runs/{key}/approve {approved}` instead of `/approvals/{key}/...`.
    by_run_route: bool,
    not_before: Instant,
}

/// A key the server listed as pending: a pause acknowledged to a client.
struct Listed {
    run_id: String,
    step_id: String,
    scheduled_at: Instant,
    open_jobs: usize,
    schedules: usize,
}

/// A 200 to a decision.
#[derive(Debug, Clone)]
struct Won {
    key: String,
    decider: String,
    verdict: Verdict,
    answered_status: String,
    answered_by: String,
}

/// What the clients were told, and nothing else: the ledger the store is
/// checked against.
#[derive(Default)]
struct Ledger {
    started: BTreeSet<String>,
    start_attempts: usize,
    start_unanswered: usize,
    listed: BTreeMap<String, Listed>,
    won: Vec<Won>,
    already_resolved: usize,
    decisions_unanswered: usize,
    gave_up: usize,
    reschedules: usize,
    /// Pending records in the last complete listing (`None`: it failed).
    last_listing: Option<usize>,
    unexpected: Vec<String>,
}

struct World {
    address: Address,
    http: reqwest::Client,
    ledger: Mutex<Ledger>,
    jobs_in_flight: AtomicUsize,
    starter_done: AtomicBool,
    stop: AtomicBool,
}

impl World {
    fn ledger(&self) -> MutexGuard<'_, Ledger> {
        self.ledger.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// An answer, or none: the server was down or died mid-request, so the
/// request may or may not have taken effect.
enum Answer {
    Status(u16, Value),
    None,
}

async fn send(request: reqwest::RequestBuilder) -> Answer {
    let Ok(response) = request.send().await else {
        return Answer::None;
    };
    let status = response.status().as_u16();
    // A status line without its whole body is not an answer.
    let Ok(bytes) = response.bytes().await else {
        return Answer::None;
    };
    let body = serde_json::from_slice(&bytes)
        .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).into_owned()));
    Answer::Status(status, body)
}

async fn post(world: &World, caller: &str, path: &str, body: Value) -> Answer {
    let Some(base) = world.address.base() else {
        return Answer::None;
    };
    let request = world
        .http
        .post(format!("{base}{path}"))
        .bearer_auth(token(caller))
        .json(&body);
    send(request).await
}

async fn get(world: &World, caller: &str, path: &str) -> Answer {
    let Some(base) = world.address.base() else {
        return Answer::None;
    };
    let request = world
        .http
        .get(format!("{base}{path}"))
        .bearer_auth(token(caller));
    send(request).await
}

fn urlencode(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// Start runs until `runs` were acknowledged with 202, spread over `pace`.
async fn starter(world: Arc<World>, runs: usize, pace: Duration, until: Instant) {
    let mut n = 0usize;
    loop {
        let (started, attempts) = {
            let ledger = world.ledger();
            (ledger.started.len(), ledger.start_attempts)
        };
        if started >= runs || attempts >= runs * 10 || Instant::now() >= until {
            break;
        }
        world.ledger().start_attempts += 1;
        let input = json!({ "input": { "order": format!("O{n}") } });
        n += 1;
        match post(&world, STARTER, "/runs", input).await {
            Answer::Status(202, body) => match body["run_id"].as_str() {
                Some(run_id) => {
                    world.ledger().started.insert(run_id.to_string());
                }
                None => world
                    .ledger()
                    .unexpected
                    .push(format!("POST /runs: 202 without a run_id: {body}")),
            },
            Answer::Status(status, body) => world
                .ledger()
                .unexpected
                .push(format!("POST /runs: {status} {body}")),
            Answer::None => {
                world.ledger().start_unanswered += 1;
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        }
        tokio::time::sleep(pace).await;
    }
    world.starter_done.store(true, Ordering::SeqCst);
}

/// Every pending record, following `next_cursor`; `None` if any page got
/// no answer.
async fn list_pending(world: &World) -> Option<Vec<Value>> {
    let mut records = Vec::new();
    let mut cursor: Option<String> = None;
    for _ in 0..MAX_PAGES {
        let mut path = format!("/approvals?limit={PAGE}");
        if let Some(c) = &cursor {
            path.push_str(&format!("&cursor={}", urlencode(c)));
        }
        match get(world, STARTER, &path).await {
            Answer::Status(200, page) => {
                records.extend(page["approvals"].as_array().cloned().unwrap_or_default());
                match page["next_cursor"].as_str() {
                    Some(next) => cursor = Some(next.to_string()),
                    None => return Some(records),
                }
            }
            Answer::Status(status, body) => {
                world
                    .ledger()
                    .unexpected
                    .push(format!("GET /approvals: {status} {body}"));
                return None;
            }
            Answer::None => return None,
        }
    }
    world
        .ledger()
        .unexpected
        .push(format!("GET /approvals: more than {MAX_PAGES} pages"));
    None
}

/// Hand a key to 2-4 different deciders at nearly the same instant, each
/// with its own verdict, so approve races reject across token names.
/// Returns how many jobs were handed out.
fn schedule(rng: &mut Rng, key: &str, deciders: &[mpsc::UnboundedSender<Job>]) -> usize {
    let mut chosen: Vec<usize> = (0..deciders.len()).collect();
    let racers = rng.between(2, 4) as usize;
    let now = Instant::now();
    let mut sent = 0;
    for i in 0..racers {
        let j = i + rng.below((chosen.len() - i) as u64) as usize;
        chosen.swap(i, j);
    }
    for &index in &chosen[..racers] {
        let job = Job {
            key: key.to_string(),
            verdict: if rng.percent(80) {
                Verdict::Approve
            } else {
                Verdict::Reject
            },
            by_run_route: rng.percent(25),
            not_before: now + Duration::from_millis(rng.between(0, 40)),
        };
        // Deciders live as long as the lister; a send fails only if one
        // panicked, and then the job is not counted as in flight.
        if deciders[index].send(job).is_ok() {
            sent += 1;
        }
    }
    sent
}

/// List pending keys; hand out each new one (and any one whose deciders all
/// gave up) to racing deciders.
async fn lister(world: Arc<World>, mut rng: Rng, deciders: Vec<mpsc::UnboundedSender<Job>>) {
    while !world.stop.load(Ordering::SeqCst) {
        let listing = list_pending(&world).await;
        world.ledger().last_listing = listing.as_ref().map(Vec::len);
        for record in listing.unwrap_or_default() {
            let (Some(key), Some(run_id), Some(step_id)) = (
                record["key"].as_str(),
                record["run_id"].as_str(),
                record["step_id"].as_str(),
            ) else {
                world.ledger().unexpected.push(format!(
                    "GET /approvals: a record without key/run_id/step_id: {record}"
                ));
                continue;
            };
            let now = Instant::now();
            let mut ledger = world.ledger();
            let due = match ledger.listed.get(key) {
                None => true,
                Some(l) => {
                    l.open_jobs == 0
                        && now.duration_since(l.scheduled_at) >= RESCHEDULE_AFTER
                        && l.schedules < MAX_SCHEDULES_PER_KEY
                }
            };
            if !due {
                continue;
            }
            let racers = schedule(&mut rng, key, &deciders);
            world.jobs_in_flight.fetch_add(racers, Ordering::SeqCst);
            match ledger.listed.get_mut(key) {
                Some(listed) => {
                    listed.open_jobs += racers;
                    listed.schedules += 1;
                    listed.scheduled_at = now;
                    ledger.reschedules += 1;
                }
                None => {
                    ledger.listed.insert(
                        key.to_string(),
                        Listed {
                            run_id: run_id.to_string(),
                            step_id: step_id.to_string(),
                            scheduled_at: now,
                            open_jobs: racers,
                            schedules: 1,
                        },
                    );
                }
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// One decider: its own token, its jobs in order.
async fn decider(
    world: Arc<World>,
    index: usize,
    mut jobs: mpsc::UnboundedReceiver<Job>,
    mut rng: Rng,
) {
    let name = decider_name(index);
    while let Some(job) = jobs.recv().await {
        tokio::time::sleep_until(job.not_before).await;
        decide(&world, &name, &job, &mut rng).await;
        if let Some(listed) = world.ledger().listed.get_mut(&job.key) {
            listed.open_jobs = listed.open_jobs.saturating_sub(1);
        }
        world.jobs_in_flight.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Decide until the server answers: a 200 goes in the ledger, a 409 is a lost
/// race. No answer means the outcome is unknown, so ask again (a decision
/// that did land then answers 200 with `repeated: true`, the same decision).
async fn decide(world: &World, name: &str, job: &Job, rng: &mut Rng) {
    let (path, body) = match (job.by_run_route, job.verdict) {
        (true, verdict) => (
            format!("/runs/{}/approve", job.key),
            json!({ "approved": verdict == Verdict::Approve, "reason": format!("{name} says so") }),
        ),
        (false, Verdict::Approve) => (
            format!("/approvals/{}/approve", job.key),
            json!({ "reason": format!("{name} approves") }),
        ),
        (false, Verdict::Reject) => (
            format!("/approvals/{}/reject", job.key),
            json!({ "reason": format!("{name} rejects") }),
        ),
    };
    for _ in 0..MAX_ATTEMPTS {
        match post(world, name, &path, body.clone()).await {
            Answer::Status(200, answer) => {
                world.ledger().won.push(Won {
                    key: job.key.clone(),
                    decider: name.to_string(),
                    verdict: job.verdict,
                    answered_status: answer["approval"]["status"]
                        .as_str()
                        .unwrap_or("")
                        .to_string(),
                    answered_by: answer["approval"]["decided_by"]
                        .as_str()
                        .unwrap_or("")
                        .to_string(),
                });
                return;
            }
            Answer::Status(409, answer) if answer["error"]["code"] == "already_resolved" => {
                world.ledger().already_resolved += 1;
                return;
            }
            Answer::Status(status, answer) => {
                world
                    .ledger()
                    .unexpected
                    .push(format!("{name} POST {path}: {status} {answer}"));
                return;
            }
            Answer::None => {
                world.ledger().decisions_unanswered += 1;
                tokio::time::sleep(Duration::from_millis(rng.between(50, 200))).await;
            }
        }
    }
    world.ledger().gave_up += 1;
}

fn read_db<T>(
    state: &Path,
    read: impl FnOnce(&rusqlite::Connection) -> rusqlite::Result<T>,
) -> Result<T, String> {
    let conn = rusqlite::Connection::open_with_flags(
        state,
        rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY | rusqlite::OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .map_err(|e| format!("open {}: {e}", state.display()))?;
    conn.busy_timeout(Duration::from_secs(10))
        .map_err(|e| e.to_string())?;
    read(&conn).map_err(|e| format!("read {}: {e}", state.display()))
}

/// `(run id, status)` of every stored run.
fn run_statuses(state: &Path) -> Result<Vec<(String, String)>, String> {
    read_db(state, |conn| {
        let mut stmt = conn.prepare("SELECT id, status FROM tollgate_runs ORDER BY id")?;
        let rows = stmt.query_map([], |row| Ok((row.get(0)?, row.get(1)?)))?;
        rows.collect()
    })
}

/// `(key, run id)` of every stored approval record.
fn approval_keys(state: &Path) -> Result<Vec<(String, String)>, String> {
    read_db(state, |conn| {
        let mut stmt = conn.prepare("SELECT key, run_id FROM tollgate_approvals ORDER BY key")?;
        let rows = stmt.query_map([], |row| Ok((row.get(0)?, row.get(1)?)))?;
        rows.collect()
    })
}

/// Wait until the clients are idle, nothing is pending, and no run changed
/// for [`QUIET_FOR`]. False if that did not happen within `limit`.
async fn settle(world: &World, state: &Path, limit: Duration) -> bool {
    let until = Instant::now() + limit;
    let mut last: Option<Vec<(String, String)>> = None;
    let mut same_since = Instant::now();
    while Instant::now() < until {
        let clients_idle = world.starter_done.load(Ordering::SeqCst)
            && world.jobs_in_flight.load(Ordering::SeqCst) == 0
            && world.ledger().last_listing == Some(0);
        let snapshot = run_statuses(state).ok();
        // Nothing pending, and nothing left for recovery to take over.
        let nothing_waits = snapshot.as_ref().is_some_and(|runs| {
            runs.iter()
                .all(|(_, s)| s != "awaiting_approval" && s != "running")
        });
        if clients_idle && nothing_waits && snapshot == last {
            if same_since.elapsed() >= QUIET_FOR {
                return true;
            }
        } else {
            same_since = Instant::now();
            last = snapshot;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    false
}

/// What the store and the stub say, against the ledger.
#[derive(Default)]
struct Report {
    runs_stored: usize,
    gates_paused: usize,
    completed: usize,
    rejected: usize,
    /// Recovered by another server generation (`run_recovered`).
    recovered: usize,
    /// `stuck`: its shipment was in flight when its server died.
    stuck_in_doubt: usize,
    /// Of those, a shipment whose call did reach the stub.
    in_doubt_with_effect: usize,
    /// `running` at the end: a run nobody drives (must be 0).
    left_running: usize,
    side_effects: usize,
    doubled: usize,
    lost_runs: usize,
    lost_pauses: usize,
    lost_decisions: usize,
    unapproved_effects: usize,
    failures: Vec<String>,
}

impl Report {
    fn fail(&mut self, text: String) {
        self.failures.push(text);
    }
}

fn approved(record: &ApprovalRecord) -> bool {
    matches!(
        record.status,
        ApprovalStatus::Approved | ApprovalStatus::Modified
    )
}

async fn check(world: &World, state: &Path, effects: &[Request]) -> Report {
    let mut report = Report::default();
    // A copy: the store is read with awaits in between.
    let (started, listed, won) = {
        let ledger = world.ledger();
        let listed: BTreeMap<String, (String, String)> = ledger
            .listed
            .iter()
            .map(|(k, l)| (k.clone(), (l.run_id.clone(), l.step_id.clone())))
            .collect();
        (ledger.started.clone(), listed, ledger.won.clone())
    };
    let (runs, keys) = match (run_statuses(state), approval_keys(state)) {
        (Ok(runs), Ok(keys)) => (runs, keys),
        (Err(e), _) | (_, Err(e)) => {
            report.fail(format!("cannot read the state file: {e}"));
            return report;
        }
    };
    report.runs_stored = runs.len();
    let stored_runs: BTreeSet<&str> = runs.iter().map(|(id, _)| id.as_str()).collect();
    let mut keys_by_run: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    for (key, run_id) in &keys {
        keys_by_run.entry(run_id).or_default().insert(key);
    }
    let store = open_store(state);

    // The side effects, by run and by Idempotency-Key.
    let mut effects_by_run: BTreeMap<String, Vec<&Request>> = BTreeMap::new();
    let mut effects_by_key: BTreeMap<String, usize> = BTreeMap::new();
    report.side_effects = effects.len();
    for call in effects {
        let run_id = call.json()["run"].as_str().unwrap_or("").to_string();
        match call.header("idempotency-key") {
            Some(key) => *effects_by_key.entry(key.to_string()).or_default() += 1,
            None => report.fail(format!("a call for run {run_id:?} has no Idempotency-Key")),
        }
        effects_by_run.entry(run_id).or_default().push(call);
    }
    for (run_id, calls) in &effects_by_run {
        if calls.len() > 1 {
            report.doubled += 1;
            report.fail(format!(
                "DOUBLED: run {run_id} reached the stub {} times: {:?}",
                calls.len(),
                calls
                    .iter()
                    .map(|c| c.header("idempotency-key").unwrap_or("-"))
                    .collect::<Vec<_>>()
            ));
        }
    }
    for (key, n) in &effects_by_key {
        if *n > 1 {
            report.fail(format!(
                "DOUBLED: Idempotency-Key {key} reached the stub {n} times"
            ));
        }
    }

    // 202 acknowledged: the run is stored.
    for run_id in &started {
        if !stored_runs.contains(run_id.as_str()) {
            report.lost_runs += 1;
            report.fail(format!(
                "LOST RUN: {run_id} was acknowledged with 202 and is not stored"
            ));
        }
    }
    // Listed by the server: the pause is stored, with its run.
    for (key, (listed_run, listed_step)) in &listed {
        match store.get_approval(key).await {
            Ok(Some(record)) if &record.run_id == listed_run && &record.step_id == listed_step => {}
            Ok(Some(record)) => {
                report.lost_pauses += 1;
                report.fail(format!(
                    "LOST PAUSE: key {key} was listed for run {listed_run} at {listed_step}, stored for run {} at {}",
                    record.run_id, record.step_id
                ));
            }
            Ok(None) => {
                report.lost_pauses += 1;
                report.fail(format!(
                    "LOST PAUSE: key {key} (run {listed_run}, step {listed_step}) was listed and is not stored"
                ));
            }
            Err(e) => report.fail(format!("cannot read approval {key}: {e}")),
        }
    }
    // Every 200: the stored decision, by that decider; one winner per key.
    let mut winners: BTreeMap<&str, BTreeSet<(&str, &'static str)>> = BTreeMap::new();
    for won in &won {
        let expected = match won.verdict {
            Verdict::Approve => "APPROVED",
            Verdict::Reject => "REJECTED",
        };
        winners
            .entry(&won.key)
            .or_default()
            .insert((&won.decider, expected));
        let stored = store.get_approval(&won.key).await;
        let ok = match &stored {
            Ok(Some(record)) => {
                record.status.as_str() == expected
                    && record.decided_by.as_deref() == Some(won.decider.as_str())
                    && won.answered_status == expected
                    && won.answered_by == won.decider
            }
            _ => false,
        };
        if !ok {
            report.lost_decisions += 1;
            report.fail(format!(
                "LOST DECISION: {} got 200 for {expected} of key {} (answered {} by {}), stored: {:?}",
                won.decider,
                won.key,
                won.answered_status,
                won.answered_by,
                stored.map(|r| r.map(|r| (r.status, r.decided_by)))
            ));
        }
    }
    for (key, who) in &winners {
        if who.len() > 1 {
            report.lost_decisions += 1;
            report.fail(format!("DECIDED TWICE: key {key} answered 200 to {who:?}"));
        }
    }

    // Every stored run: its gates accounted for, its status explained by
    // them, its side effect where (and only where) it was approved.
    for (run_id, _) in &runs {
        let run = match store.get_run(run_id).await {
            Ok(Some(run)) => run,
            other => {
                report.fail(format!("run {run_id}: cannot read it back: {other:?}"));
                continue;
            }
        };
        let events = match store.run_events(run_id, 0).await {
            Ok(events) => events,
            Err(e) => {
                report.fail(format!("run {run_id}: cannot read its events: {e}"));
                continue;
            }
        };
        let announced: Vec<String> = events
            .iter()
            .filter_map(|e| match &e.kind {
                EventKind::AwaitingApproval { key, .. } => Some(key.clone()),
                _ => None,
            })
            .collect();
        let stored_keys = keys_by_run
            .get(run_id.as_str())
            .cloned()
            .unwrap_or_default();
        for key in &stored_keys {
            if !announced.iter().any(|k| k == key) {
                report.fail(format!(
                    "run {run_id}: record {key} has no awaiting_approval event"
                ));
            }
        }
        let mut gates: Vec<ApprovalRecord> = Vec::new();
        for key in &announced {
            match store.get_approval(key).await {
                Ok(Some(record)) => gates.push(record),
                _ => {
                    report.lost_pauses += 1;
                    report.fail(format!(
                        "LOST PAUSE: run {run_id} announced gate {key}, which is not stored"
                    ));
                }
            }
        }
        report.gates_paused += gates.len();
        if events
            .iter()
            .any(|e| matches!(e.kind, EventKind::RunRecovered { .. }))
        {
            report.recovered += 1;
        }
        for step in ["review", "ship"] {
            let n = gates.iter().filter(|g| g.step_id == step).count();
            if n > 1 {
                report.fail(format!("run {run_id}: gate {step} paused {n} times"));
            }
        }
        let review = gates.iter().find(|g| g.step_id == "review");
        let ship = gates.iter().find(|g| g.step_id == "ship");
        let latest = gates.last();
        let calls = effects_by_run.get(run_id.as_str()).map_or(0, Vec::len);
        if calls > 0 && !ship.is_some_and(approved) {
            report.unapproved_effects += 1;
            report.fail(format!(
                "run {run_id}: its call reached the stub without an approved shipment (ship gate: {:?})",
                ship.map(|g| g.status)
            ));
        }
        match run.status.as_str() {
            "completed" => {
                report.completed += 1;
                let (Some(review), Some(ship)) = (review, ship) else {
                    report.fail(format!(
                        "run {run_id}: completed without both gates: {gates:?}"
                    ));
                    continue;
                };
                if !approved(review) || !approved(ship) {
                    report.fail(format!(
                        "run {run_id}: completed with review {:?} and ship {:?}",
                        review.status, ship.status
                    ));
                }
                let expected =
                    tollgate_runtime::tools::idempotency_key(run_id, "ship", Some(&ship.key));
                let keys: Vec<&str> = effects_by_run
                    .get(run_id.as_str())
                    .map(|c| {
                        c.iter()
                            .filter_map(|r| r.header("idempotency-key"))
                            .collect()
                    })
                    .unwrap_or_default();
                if keys != [expected.as_str()] {
                    report.fail(format!(
                        "run {run_id}: completed, so its call should have reached the stub once with {expected}; it arrived with {keys:?}"
                    ));
                }
                let reviewed_by = &run.outputs["done"]["reviewed_by"];
                if reviewed_by.as_str() != review.decided_by.as_deref() {
                    report.fail(format!(
                        "run {run_id}: the step after the gates saw {reviewed_by}, the review was decided by {:?}",
                        review.decided_by
                    ));
                }
            }
            "rejected" => {
                report.rejected += 1;
                if !latest.is_some_and(|g| g.status == ApprovalStatus::Rejected) {
                    report.fail(format!(
                        "run {run_id}: rejected, but its latest gate is {:?}",
                        latest.map(|g| (&g.step_id, g.status))
                    ));
                }
                if calls > 0 {
                    report.fail(format!(
                        "run {run_id}: rejected, yet its call reached the stub"
                    ));
                }
            }
            "running" => {
                report.left_running += 1;
                report.fail(format!(
                    "LEFT BEHIND: run {run_id} is still running after the settle period (owner {:?}, lease until {:?}); its latest gate: {:?}",
                    run.owner,
                    run.lease_until,
                    latest.map(|g| (&g.step_id, g.status))
                ));
            }
            "stuck" => {
                report.stuck_in_doubt += 1;
                if calls > 0 {
                    report.in_doubt_with_effect += 1;
                }
                let announced_stuck = events
                    .iter()
                    .any(|e| matches!(&e.kind, EventKind::RunStuck { step, .. } if step == "ship"));
                if !ship.is_some_and(approved) || !announced_stuck {
                    report.fail(format!(
                        "run {run_id}: stuck, but not at an approved shipment with a run_stuck event (ship gate: {:?})",
                        ship.map(|g| g.status)
                    ));
                }
            }
            "awaiting_approval" => report.fail(format!(
                "run {run_id}: gate {:?} still pending after the settle period",
                latest.map(|g| &g.key)
            )),
            other => report.fail(format!("run {run_id}: ended {other}: {:?}", run.error)),
        }
    }
    report
}

fn summary(
    config: &Config,
    world: &World,
    server: &ChaosServer,
    report: &Report,
    settled: bool,
) -> String {
    let ledger = world.ledger();
    let mut text = String::new();
    let _ = writeln!(
        text,
        "chaos seed {} (replay with TOLLGATE_CHAOS_SEED={}), {} s of kills, {} runs asked",
        config.seed, config.seed, config.seconds, config.runs
    );
    let _ = writeln!(
        text,
        "  server: {} SIGKILLs, {} starts; settled: {settled}",
        server.kills(),
        server.starts()
    );
    let _ = writeln!(
        text,
        "  runs: {} acknowledged (202) of {} starts, {} unanswered; {} stored; {} completed, {} rejected",
        ledger.started.len(),
        ledger.start_attempts,
        ledger.start_unanswered,
        report.runs_stored,
        report.completed,
        report.rejected
    );
    let _ = writeln!(
        text,
        "  recovered after a kill: {}; stuck with a shipment in doubt: {} ({} of them reached the stub); left running: {}",
        report.recovered, report.stuck_in_doubt, report.in_doubt_with_effect, report.left_running
    );
    let _ = writeln!(
        text,
        "  gates: {} listed, {} stored; decisions: {} won (200), {} lost races (409), {} unanswered, {} given up, {} keys handed out again",
        ledger.listed.len(),
        report.gates_paused,
        ledger.won.len(),
        ledger.already_resolved,
        ledger.decisions_unanswered,
        ledger.gave_up,
        ledger.reschedules
    );
    let _ = writeln!(
        text,
        "  side effects: {}; doubled {}; unapproved {}; lost runs {}; lost pauses {}; lost decisions {}",
        report.side_effects,
        report.doubled,
        report.unapproved_effects,
        report.lost_runs,
        report.lost_pauses,
        report.lost_decisions
    );
    text
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sigkill_every_few_seconds_loses_no_pause_or_decision_and_doubles_no_side_effect() {
    let config = Config::from_env();
    eprintln!(
        "chaos seed {} (replay with TOLLGATE_CHAOS_SEED={}); {} runs, {} s of kills",
        config.seed, config.seed, config.runs, config.seconds
    );
    let mut rng = Rng::new(config.seed);
    // A slow downstream widens the window between an approved claim and the
    // run's end, so some kills land while the side effect is in flight.
    let stub =
        StubServer::start(|_| Response::json(200, json!({ "shipped": true })).delayed(SHIP_TAKES));
    let ws = Workspace::new(&SPEC.replace("STUB_URL", &stub.url("/ship")));
    let state = ws.path().join("state.db");
    let launch = Launch {
        spec: ws.spec.clone(),
        state: state.clone(),
        env: vec![
            ("TOLLGATE_API_TOKENS".into(), tokens_env()),
            ("TOLLGATE_RUN_LEASE".into(), RUN_LEASE.into()),
        ],
    };
    let mut server = tokio::task::block_in_place(|| ChaosServer::start(launch))
        .unwrap_or_else(|e| panic!("seed {}: {e}", config.seed));
    let world = Arc::new(World {
        address: server.address(),
        http: reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(5))
            .timeout(Duration::from_secs(20))
            .build()
            .expect("client"),
        ledger: Mutex::new(Ledger::default()),
        jobs_in_flight: AtomicUsize::new(0),
        starter_done: AtomicBool::new(false),
        stop: AtomicBool::new(false),
    });

    let chaos = Duration::from_secs(config.seconds);
    let began = Instant::now();
    let chaos_until = began + chaos;
    let settle_until = chaos_until + SETTLE_LIMIT;
    // Generous: every phase has its own bound; this one catches a hang.
    let overall = chaos + SETTLE_LIMIT + Duration::from_secs(120);

    let phases = async {
        server.kill_every(rng.fork(), KILL_MIN, KILL_MAX, chaos_until.into_std());
        // Spread the starts over most of the kill window, so kills land
        // among starts, pauses and decisions alike.
        let pace = chaos.mul_f64(0.75) / config.runs as u32;
        let mut tasks = Vec::new();
        let mut senders = Vec::new();
        for index in 0..DECIDERS {
            let (tx, rx) = mpsc::unbounded_channel();
            senders.push(tx);
            tasks.push(tokio::spawn(decider(world.clone(), index, rx, rng.fork())));
        }
        tasks.push(tokio::spawn(lister(world.clone(), rng.fork(), senders)));
        tasks.push(tokio::spawn(starter(
            world.clone(),
            config.runs,
            pace,
            settle_until,
        )));

        tokio::time::sleep_until(chaos_until).await;
        let calm = tokio::task::block_in_place(|| server.calm_down());
        let settled = match calm {
            Ok(()) => settle(&world, &state, SETTLE_LIMIT).await,
            Err(e) => {
                world
                    .ledger()
                    .unexpected
                    .push(format!("a restart failed: {e}"));
                false
            }
        };
        world.stop.store(true, Ordering::SeqCst);
        for task in tasks {
            task.abort();
        }
        tokio::task::block_in_place(|| server.close());
        settled
    };
    let outcome = tokio::time::timeout(overall, phases).await;
    let settled = match outcome {
        Ok(settled) => settled,
        Err(_) => {
            tokio::task::block_in_place(|| server.close());
            let report = Report::default();
            panic!(
                "the chaos test did not finish within {overall:?}\n{}",
                summary(&config, &world, &server, &report, false)
            );
        }
    };

    let effects = stub.requests_to("/ship");
    let mut report = check(&world, &state, &effects).await;
    {
        let ledger = world.ledger();
        for unexpected in &ledger.unexpected {
            report
                .failures
                .push(format!("unexpected answer: {unexpected}"));
        }
        if ledger.started.len() < config.runs {
            report.failures.push(format!(
                "only {} of {} runs were acknowledged",
                ledger.started.len(),
                config.runs
            ));
        }
    }
    if !settled {
        report.failures.push(format!(
            "the runs did not settle within {SETTLE_LIMIT:?} after the kills stopped"
        ));
    }
    if config.seconds >= KILL_MAX.as_secs() && server.kills() == 0 {
        report.failures.push("the server was never killed".into());
    }
    if server.panics_logged() > 0 {
        report.failures.push(format!(
            "the server logged {} panics",
            server.panics_logged()
        ));
    }
    let text = summary(&config, &world, &server, &report, settled);
    eprintln!("{text}");
    if !report.failures.is_empty() {
        let shown: Vec<&String> = report.failures.iter().take(40).collect();
        let logs = server.logs_tail();
        let mut cut = logs.len().saturating_sub(8 * 1024);
        while !logs.is_char_boundary(cut) {
            cut += 1;
        }
        let tail = &logs[cut..];
        panic!(
            "{text}{} failures (first {}):\n  {}\nserver log tail:\n{}",
            report.failures.len(),
            shown.len(),
            shown
                .iter()
                .map(|s| s.as_str())
                .collect::<Vec<_>>()
                .join("\n  "),
            tail
        );
    }
}
