//! Pause-to-Slack latency (issue 43): how long after a run pauses its
//! Slack message is posted. A real `tollgate serve` (SQLite) announces its
//! approvals in Slack; Slack is a stub on loopback that notes when each
//! `chat.postMessage` arrives. Runs are started one at a time with
//! `POST /runs?wait=true`, which answers once the pause is committed;
//! each figure is the time from that answer (and from the request being
//! sent, which includes the run's start and its pause commit) to the
//! stub receiving the post. A post may reach the stub before the answer
//! reaches the client: the "from the answer" figures are signed.
//!
//! Run: `cargo bench --bench slack_latency` (TOLLGATE_BENCH_RUNS, default
//! 50; TOLLGATE_BENCH_SERVER_BIN to time another build's binary).

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::json;

#[path = "common/server.rs"]
mod server;
#[path = "common/stats.rs"]
mod stats;
#[path = "../tests/it/common/stub_server.rs"]
mod stub_server;

use stub_server::{Request, Response, StubServer};

const SPEC: &str = r##"version: 1
agent: bench-slack
approvals:
  notify:
    slack:
      bot_token: ${BENCH_SLACK_BOT_TOKEN}
      channel: "#bench"
      signing_secret: ${BENCH_SLACK_SIGNING_SECRET}
steps:
  - id: approve
    approval:
      message: "Refund {{ input.order_id }}?"
"##;

fn main() {
    let runs = stats::env_usize("TOLLGATE_BENCH_RUNS", 50);
    let posted: Arc<Mutex<Vec<Instant>>> = Arc::default();
    let seen = Arc::clone(&posted);
    let slack = StubServer::start(move |request: &Request| {
        if request.path() == "/api/chat.postMessage" {
            let n = {
                let mut posted = seen.lock().unwrap();
                posted.push(Instant::now());
                posted.len()
            };
            return Response::json(
                200,
                json!({"ok": true, "channel": "C0BENCH", "ts": format!("1700000000.{n:06}")}),
            );
        }
        Response::json(200, json!({"ok": true}))
    });
    let dir = tempfile::tempdir().expect("tempdir");
    let spec = dir.path().join("agent.yaml");
    std::fs::write(&spec, SPEC).expect("write spec");
    let state = dir.path().join("state.db");
    let api = format!("http://127.0.0.1:{}/api", slack.port);
    let binary = std::env::var_os("TOLLGATE_BENCH_SERVER_BIN")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| env!("CARGO_BIN_EXE_tollgate").into());
    let server = server::Server::sqlite_with(
        &binary,
        &spec,
        &state,
        &[
            ("BENCH_SLACK_BOT_TOKEN", "xoxb-bench-token"),
            ("BENCH_SLACK_SIGNING_SECRET", "bench-signing-secret"),
            ("TOLLGATE_SLACK_API_BASE", &api),
        ],
    );
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    let http = reqwest::Client::new();
    let mut from_sent = Vec::with_capacity(runs);
    let mut from_answer = Vec::with_capacity(runs);
    runtime.block_on(async {
        for i in 0..runs {
            let sent = Instant::now();
            let answer = http
                .post(format!("{}/runs?wait=true", server.base))
                .json(&json!({"input": {"order_id": format!("O-{i}")}}))
                .send()
                .await
                .expect("POST /runs");
            assert!(
                answer.status().is_success(),
                "POST /runs: {}",
                answer.status()
            );
            let answered = Instant::now();
            let give_up = Instant::now() + Duration::from_secs(30);
            let at = loop {
                if let Some(at) = posted.lock().unwrap().get(i).copied() {
                    break at;
                }
                assert!(Instant::now() < give_up, "run {i}: no Slack post in 30 s");
                tokio::time::sleep(Duration::from_micros(200)).await;
            };
            from_sent.push(at.duration_since(sent).as_secs_f64() * 1000.0);
            from_answer.push(signed_ms(answered, at));
        }
    });
    drop(server);
    println!("pause-to-Slack-post latency over {runs} runs (ms)");
    println!("  from POST /runs sent:     {}", summary(&mut from_sent));
    println!("  from its answer (signed): {}", summary(&mut from_answer));
}

/// `at - from` in milliseconds, negative when `at` came first.
fn signed_ms(from: Instant, at: Instant) -> f64 {
    match at.checked_duration_since(from) {
        Some(d) => d.as_secs_f64() * 1000.0,
        None => -(from.duration_since(at).as_secs_f64() * 1000.0),
    }
}

fn summary(samples: &mut [f64]) -> String {
    samples.sort_by(f64::total_cmp);
    let at = |q: f64| samples[((samples.len() - 1) as f64 * q).round() as usize];
    format!(
        "p50 {:.2}  p95 {:.2}  max {:.2}",
        at(0.50),
        at(0.95),
        at(1.0)
    )
}
