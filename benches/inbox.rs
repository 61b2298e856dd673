//! The approvals inbox's server time with many pending: a SQLite store
//! with 10,000 PENDING approvals (and 1,000 decided ones for the history),
//! the mounted router serving on loopback in this process, a signed-in
//! GET /ui (the first page, 25 rows) rendered 200+ times, then the same
//! for GET /ui/history. Server time is measured inside the router (a layer
//! around the routes: the store's reads, the rendering), not the client's
//! round trip. The target: the inbox's first page under 50 ms.
//!
//! Run: `cargo bench --bench inbox` (TOLLGATE_BENCH_PENDING, default
//! 10000; TOLLGATE_BENCH_RENDERS, default 200).

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::json;
use tollgate_runtime::axum;
use tollgate_runtime::server::{self, ApiTokens, ServerConfig};
use tollgate_runtime::store::{SqliteOptions, SqliteStore, Synchronous};
use tollgate_runtime::{AgentRun, Decision, Spec};

#[path = "common/stats.rs"]
mod stats;
#[path = "common/workload.rs"]
mod workload;

use stats::env_usize;
use workload::SPEC;

const DECIDED: usize = 1_000;
const WARM_UP: usize = 20;

type Timings = Arc<Mutex<Vec<(String, Duration)>>>;

fn main() {
    let pending = env_usize("TOLLGATE_BENCH_PENDING", 10_000);
    let renders = env_usize("TOLLGATE_BENCH_RENDERS", 200).max(1);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let dir = tempfile::tempdir().expect("temp dir");
    let state = dir.path().join("state.db");
    let started = Instant::now();
    runtime.block_on(seed(&state, pending));
    println!(
        "approvals inbox: SQLite with {pending} pending and {DECIDED} decided approvals (seeded in {:.1}s), \
         {renders} signed-in renders of each page after {WARM_UP} warm-up ones\n",
        started.elapsed().as_secs_f64()
    );
    runtime.block_on(measure(&state, renders));
}

/// `pending` pending approvals and `DECIDED` decided ones (approved,
/// rejected and modified in turn), through the runtime.
async fn seed(state: &Path, pending: usize) {
    let agent = workload::agent(state, Synchronous::Normal);
    for i in 0..pending + DECIDED {
        let outcome = agent
            .start(
                json!({"order_id": format!("A-{i}"), "amount": 120}),
                json!({"kind": "bench"}),
            )
            .await
            .expect("start");
        if i < DECIDED {
            let key = outcome.pending.expect("paused").key;
            let decision = match i % 3 {
                0 => Decision::Approve { reason: None },
                1 => Decision::Reject {
                    reason: Some("not this one".into()),
                },
                _ => Decision::Modify {
                    payload: json!({"amount": 60}),
                    reason: Some("half".into()),
                },
            };
            let claimed = agent.claim(&key, decision, "bench").await.expect("claim");
            agent.resume_claimed(claimed).await.expect("resume");
        }
    }
}

async fn measure(state: &Path, renders: usize) {
    // SAFETY of the environment: set before any thread reads it (the
    // router reads the session secret when it is built, below).
    unsafe { std::env::set_var("TOLLGATE_SESSION_SECRET", "bench-session-secret") };
    let store = SqliteStore::open(state, SqliteOptions::default()).expect("open store");
    let spec = Arc::new(Spec::parse(SPEC, "agent.yaml").expect("spec"));
    let agent = AgentRun::new(spec, Arc::new(store));
    let config = ServerConfig {
        tokens: ApiTokens::parse("bench:bench-token").expect("tokens"),
        ..ServerConfig::default()
    };
    let mounted = server::mount(agent, config).await.expect("mount");
    let timings: Timings = Arc::default();
    let recorded = timings.clone();
    let router = mounted.router.layer(axum::middleware::from_fn(
        move |request: axum::extract::Request, next: axum::middleware::Next| {
            let recorded = recorded.clone();
            async move {
                let path = request.uri().path().to_string();
                let t = Instant::now();
                let response = next.run(request).await;
                // The body is rendered before the handler returns: this is
                // the whole server time but writing to the socket.
                recorded.lock().unwrap().push((path, t.elapsed()));
                response
            }
        },
    ));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let base = format!("http://{}", listener.local_addr().expect("addr"));
    tokio::spawn(async move { axum::serve(listener, router).await });

    let client = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .expect("client");
    let cookie = sign_in(&client, &base).await;
    for (path, label, target) in [
        ("/ui", "GET /ui (inbox, first page)", "< 50 ms"),
        ("/ui/history", "GET /ui/history (first page)", ""),
    ] {
        timings.lock().unwrap().clear();
        for i in 0..WARM_UP + renders {
            let response = client
                .get(format!("{base}{path}"))
                .header("cookie", &cookie)
                .send()
                .await
                .expect("GET");
            assert_eq!(response.status().as_u16(), 200, "{path}");
            let body = response.text().await.expect("body");
            assert!(body.contains("tr class=\"approval\""), "{path}: no rows");
            if i + 1 == WARM_UP {
                timings.lock().unwrap().clear();
            }
        }
        let mut ms: Vec<f64> = timings
            .lock()
            .unwrap()
            .iter()
            .filter(|(p, _)| p == path)
            .map(|(_, d)| d.as_secs_f64() * 1000.0)
            .collect();
        ms.sort_by(|a, b| a.total_cmp(b));
        let median = ms[ms.len() / 2];
        let p95 = ms[((ms.len() as f64 * 0.95).ceil() as usize).min(ms.len()) - 1];
        println!(
            "{label:<34} server time over {} renders: median {median:.2} ms, p95 {p95:.2} ms, min {:.2} ms   {target}",
            ms.len(),
            ms[0]
        );
    }
    mounted.tasks.shutdown().await.expect("shutdown");
}

/// Sign in through the login form: the session cookie (and the form's
/// pre-session cookie) as one Cookie header.
async fn sign_in(client: &reqwest::Client, base: &str) -> String {
    let form = client
        .get(format!("{base}/ui/login"))
        .send()
        .await
        .expect("login form");
    let pre = cookie_pair(&form, "tollgate_csrf");
    let html = form.text().await.expect("form");
    let marker = "name=\"csrf\" value=\"";
    let at = html.find(marker).expect("csrf field") + marker.len();
    let csrf = &html[at..at + html[at..].find('"').unwrap()];
    let answer = client
        .post(format!("{base}/ui/login"))
        .header("cookie", &pre)
        .header("content-type", "application/x-www-form-urlencoded")
        .body(format!("token=bench-token&csrf={csrf}&next=%2Fui"))
        .send()
        .await
        .expect("login");
    assert_eq!(answer.status().as_u16(), 303, "sign-in");
    cookie_pair(&answer, "tollgate_session")
}

fn cookie_pair(response: &reqwest::Response, name: &str) -> String {
    response
        .headers()
        .get_all("set-cookie")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .map(|v| v.split(';').next().unwrap_or("").to_string())
        .find(|pair| pair.starts_with(&format!("{name}=")))
        .unwrap_or_else(|| panic!("no {name} cookie"))
}
