//! What a wide JSON payload costs a `tollgate serve` process in memory:
//! the peak RSS growth (VmHWM, reset before each step through
//! /proc/PID/clear_refs, over VmRSS before it) of one step, against the
//! body's size. Each step runs on a fresh server on the same state file,
//! so that memory a step before freed does not hide what this one needs.
//!
//! The cases of tollgate issue 41: `POST /runs?wait=true` of
//! examples/hello-approval.yaml (it pauses at its gate) with an input of
//! 70,000 keys in 0.98 MiB (under the default 1 MiB body limit); four such
//! requests at once; then `GET /approvals` (the record holds the input)
//! and the approval's inbox page. Then a wider one with the body limit
//! raised: 240,000 keys (under the 250,000-key limit), and a body of
//! 1,000,000 keys, which is refused now.
//!
//! Before and after side by side: TOLLGATE_BENCH_BEFORE_BIN names another
//! build's `tollgate` (e.g. a release build of the commit before), run
//! first with the same requests; the build cargo built with this bench
//! runs after.
//!
//! Run: `cargo bench --bench memory` (TOLLGATE_BENCH_BEFORE_BIN=path to
//! compare; TOLLGATE_BENCH_MEMORY_MILLION=0 skips the million-key body,
//! which took 4.45 GB in the old build).

use std::path::{Path, PathBuf};

use serde_json::Value;

#[path = "common/server.rs"]
mod server;

use server::Server;

const MIB: f64 = 1024.0 * 1024.0;

/// A `{"input": {...}}` body of `keys` keys (and `name`, which the spec
/// reads), about `target` bytes: `"k0000001":12345678,` pads to size.
fn body(keys: usize, target: usize) -> Vec<u8> {
    // `"` key `":` value `,`: 4 bytes around a key and its value.
    let per_key = (target / keys).max(8);
    let key_len = (per_key.saturating_sub(4) / 2).max(3);
    let value_len = per_key.saturating_sub(4 + key_len).max(1);
    let mut text = String::with_capacity(target + 64);
    text.push_str(r#"{"input":{"name":"Ada""#);
    for i in 0..keys {
        // A number of `value_len` digits: no leading zero.
        let digits = format!("{i:0width$}", width = value_len - 1);
        let value = format!("1{}", &digits[digits.len() - (value_len - 1)..]);
        text.push_str(&format!(",\"{i:0key_len$x}\":{value}"));
    }
    text.push_str("}}");
    text.into_bytes()
}

/// One step's figures: growth of the peak RSS over the RSS before, in MiB.
struct Step {
    name: String,
    body: usize,
    growth: f64,
    answer: usize,
}

/// Start a fresh server (`start`, on the bench's state file), then run
/// one step against its address: the step's peak growth. A server per step
/// so that memory an earlier step freed (and the allocator kept) does not
/// hide what this one needs.
fn measure(
    start: &dyn Fn() -> Server,
    name: &str,
    body: usize,
    run: impl FnOnce(&str) -> usize,
) -> Step {
    let server = start();
    std::thread::sleep(std::time::Duration::from_millis(300));
    server.reset_peak();
    let before = server.rss_mib("VmRSS:");
    let answer = run(&server.base);
    let peak = server.rss_mib("VmHWM:");
    Step {
        name: name.to_string(),
        body,
        growth: (peak - before).max(0.0),
        answer,
    }
}

/// A blocking HTTP client: reqwest on a runtime of its own (the bench's
/// threads each block on it).
struct Client {
    http: reqwest::Client,
    runtime: tokio::runtime::Runtime,
}

impl Client {
    fn new() -> Client {
        Client {
            http: reqwest::Client::new(),
            runtime: tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
                .expect("runtime"),
        }
    }

    fn send(&self, request: reqwest::RequestBuilder) -> (u16, Vec<u8>) {
        self.runtime.block_on(async {
            let response = request.send().await.expect("request");
            let status = response.status().as_u16();
            (status, response.bytes().await.expect("answer").to_vec())
        })
    }

    fn get(&self, url: &str) -> (u16, Vec<u8>) {
        self.send(self.http.get(url))
    }
}

fn post(client: &Client, url: &str, body: Vec<u8>) -> (u16, Vec<u8>) {
    client.send(
        client
            .http
            .post(url)
            .header("content-type", "application/json")
            .body(body),
    )
}

/// The steps of one build.
fn run_build(binary: &Path, million: bool) -> Vec<Step> {
    let spec = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/hello-approval.yaml");
    let dir = tempfile::tempdir().expect("temp dir");
    let client = Client::new();
    let mut steps = Vec::new();

    let state = dir.path().join("a.db");
    let start = || Server::sqlite_with(binary, &spec, &state, &[]);
    let wide = body(70_000, 1_027_000);
    let size = wide.len();
    let mut key = String::new();
    steps.push(measure(&start, "POST /runs, 70k keys", size, |base| {
        let (status, answer) = post(&client, &format!("{base}/runs?wait=true"), wide.clone());
        assert_eq!(status, 200, "{}", String::from_utf8_lossy(&answer));
        let run: Value = serde_json::from_slice(&answer).expect("JSON");
        key = run["pending_approval"]["key"]
            .as_str()
            .expect("key")
            .to_string();
        answer.len()
    }));
    steps.push(measure(
        &start,
        "4 x POST /runs at once",
        size * 4,
        |base| {
            let answers = std::thread::scope(|scope| {
                let handles: Vec<_> = (0..4)
                    .map(|_| {
                        let (client, wide) = (&client, wide.clone());
                        scope.spawn(move || post(client, &format!("{base}/runs?wait=true"), wide))
                    })
                    .collect();
                handles
                    .into_iter()
                    .map(|h| h.join().expect("request"))
                    .collect::<Vec<_>>()
            });
            answers
                .iter()
                .map(|(status, answer)| {
                    assert_eq!(*status, 200);
                    answer.len()
                })
                .sum()
        },
    ));
    steps.push(measure(&start, "GET /approvals (5 wide)", size, |base| {
        let (status, answer) = client.get(&format!("{base}/approvals"));
        assert_eq!(status, 200);
        answer.len()
    }));
    steps.push(measure(&start, "GET /ui/approvals/{key}", size, |base| {
        let (status, answer) = client.get(&format!("{base}/ui/approvals/{key}"));
        assert_eq!(status, 200);
        answer.len()
    }));

    let raised = [("TOLLGATE_MAX_BODY_BYTES", "33554432")];
    let state = dir.path().join("b.db");
    let start = || Server::sqlite_with(binary, &spec, &state, &raised);
    let wider = body(240_000, 3_400_000);
    let size = wider.len();
    steps.push(measure(&start, "POST /runs, 240k keys", size, |base| {
        let (status, answer) = post(&client, &format!("{base}/runs?wait=true"), wider);
        assert_eq!(status, 200, "{}", String::from_utf8_lossy(&answer));
        answer.len()
    }));
    steps.push(measure(
        &start,
        "GET /approvals (240k keys)",
        size,
        |base| {
            let (status, answer) = client.get(&format!("{base}/approvals"));
            assert_eq!(status, 200);
            answer.len()
        },
    ));
    if million {
        let widest = body(1_000_000, 16_000_000);
        let size = widest.len();
        steps.push(measure(&start, "POST /runs, 1M keys", size, |base| {
            let (status, answer) = post(&client, &format!("{base}/runs?wait=true"), widest);
            println!("    (1M keys: {status})");
            answer.len()
        }));
    }
    steps
}

fn main() {
    let million = std::env::var("TOLLGATE_BENCH_MEMORY_MILLION").map_or(true, |v| v != "0");
    let after: PathBuf = env!("CARGO_BIN_EXE_tollgate").into();
    let before: Option<PathBuf> = std::env::var_os("TOLLGATE_BENCH_BEFORE_BIN").map(Into::into);
    println!(
        "memory: peak RSS growth of one step (VmHWM after - VmRSS before), examples/hello-approval.yaml on SQLite\n"
    );
    let before_steps = before.as_deref().map(|b| run_build(b, million));
    let after_steps = run_build(&after, million);
    println!(
        "{:<28} {:>10} {:>16} {:>16} {:>12}",
        "step", "body MiB", "before MiB (x)", "after MiB (x)", "answer MiB"
    );
    for (i, step) in after_steps.iter().enumerate() {
        let body = step.body as f64 / MIB;
        let cell = |s: &Step| format!("{:.1} ({:.0}x)", s.growth, s.growth / (s.body as f64 / MIB));
        let before = before_steps
            .as_ref()
            .and_then(|b| b.get(i))
            .map_or("-".to_string(), cell);
        println!(
            "{:<28} {:>10.2} {:>16} {:>16} {:>12.2}",
            step.name,
            body,
            before,
            cell(step),
            step.answer as f64 / MIB
        );
    }
}
