//! `POST /runs?wait=true` (DESIGN §5) over HTTP: the answer holds the run
//! id, and at a pause the pending approval's key, as the Quick start
//! takes them; at a run's end it holds the final run and no approval; and
//! the wait is bounded (60 s), so a slow step cannot hold the request.

use crate::common::server::{Api, Served};
use crate::common::{GATED_SPEC, Workspace};

use serde_json::json;

fn serve(spec: &str) -> (Workspace, Served) {
    let ws = Workspace::new(spec);
    let served = Served::start(&ws.spec, &ws.state_db(), &[], &[]);
    (ws, served)
}

#[tokio::test(flavor = "multi_thread")]
async fn a_waited_start_answers_with_the_run_id_and_the_pending_key() {
    let (_ws, served) = serve(GATED_SPEC);
    let api = Api::new();
    let (status, run) = api
        .post(
            &served.url("/runs?wait=true"),
            json!({"input": {"order_id": "W-1"}}),
        )
        .await;
    assert_eq!(status, 200, "{run}");
    assert_eq!(run["status"], "awaiting_approval", "{run}");
    let run_id = run["id"].as_str().expect("the run id");
    let key = run["pending_approval"]["key"]
        .as_str()
        .expect("the pending approval's key");
    assert_eq!(run["pending_approval"]["run_id"], run_id, "{run}");

    // The key is the one the inbox lists, and it decides that run.
    let (status, listed) = api.get(&served.url("/approvals")).await;
    assert_eq!(status, 200, "{listed}");
    assert_eq!(listed["approvals"][0]["key"], key, "{listed}");
    let (status, decided) = api
        .post(
            &served.url(&format!("/approvals/{key}/approve?wait=true")),
            json!({"reason": "fine"}),
        )
        .await;
    assert_eq!(status, 200, "{decided}");
    let (status, done) = api.get(&served.url(&format!("/runs/{run_id}"))).await;
    assert_eq!(status, 200, "{done}");
    assert_eq!(done["status"], "completed", "{done}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_waited_start_of_a_run_without_a_gate_answers_at_its_end() {
    let spec = "version: 1\nagent: no-gate\nsteps:\n  - id: only\n    set: { done: true }\n";
    let (_ws, served) = serve(spec);
    let api = Api::new();
    let (status, run) = api
        .post(&served.url("/runs?wait=true"), json!({"input": {}}))
        .await;
    assert_eq!(status, 200, "{run}");
    assert!(run["id"].is_string(), "{run}");
    assert_eq!(run["status"], "completed", "{run}");
    assert_eq!(run["pending_approval"], serde_json::Value::Null, "{run}");

    // Without the wait: 202 and the run id at once.
    let (status, started) = api.post(&served.url("/runs"), json!({})).await;
    assert_eq!(status, 202, "{started}");
    assert!(started["run_id"].is_string(), "{started}");
}

/// A server in this test's runtime on a clock the test moves, whose spec's
/// slow step is an HTTP call to a stub that answers only when the test
/// lets it.
struct SlowStep {
    base: String,
    api: Api,
    clock: std::sync::Arc<tollgate_runtime::time::ManualClock>,
    stub: crate::common::stub_server::StubServer,
    release: std::sync::mpsc::Sender<()>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
}

impl SlowStep {
    /// `gated`: an approval step comes before the slow one.
    async fn start(gated: bool) -> SlowStep {
        use std::sync::{Arc, Mutex, mpsc};

        use crate::common::http::one_tool_spec;
        use crate::common::stub_server::{Response, StubServer};
        use tollgate_runtime::server::{Server, ServerConfig};
        use tollgate_runtime::store::MemoryStore;
        use tollgate_runtime::time::ManualClock;
        use tollgate_runtime::tools::Toolbox;
        use tollgate_runtime::{AgentRun, Spec};

        let (release, released) = mpsc::channel::<()>();
        let released = Mutex::new(released);
        let stub = StubServer::start(move |_| {
            let _ = released.lock().expect("the latch").recv();
            Response::json(200, json!({"ok": true}))
        });
        let mut spec_text = one_tool_spec(
            &format!(
                "http: {{ method: POST, url: \"{}\", timeout: 5m }}",
                stub.url("/slow")
            ),
            "{}",
        );
        if gated {
            spec_text = spec_text.replace(
                "steps:\n",
                "steps:\n  - id: ask\n    approval: { message: \"Go?\" }\n",
            );
        }
        let spec = Spec::parse(&spec_text, "agent.yaml").expect("valid spec");
        let clock = Arc::new(ManualClock::new(tollgate_runtime::time::now()));
        let agent = AgentRun::new(Arc::new(spec), Arc::new(MemoryStore::new()))
            .with_tools(Arc::new(Toolbox::new().expect("toolbox")))
            .with_clock(clock.clone());
        let config = ServerConfig {
            listen: "127.0.0.1:0".into(),
            ..ServerConfig::default()
        };
        let server = Server::bind(agent, config).await.expect("bind");
        let base = format!("http://{}", server.local_addr().expect("address"));
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        tokio::spawn(server.run_until(async move {
            let _ = stopped.await;
        }));
        SlowStep {
            base,
            api: Api::new(),
            clock,
            stub,
            release,
            stop: Some(stop),
        }
    }

    /// POST `path` with `body` and wait for its answer while the slow step
    /// is in flight, moving the clock past the bound until it answers (a
    /// move before the wait began its sleep wakes nothing, so repeat).
    async fn post_past_the_bound(
        &self,
        path: &str,
        body: serde_json::Value,
    ) -> (u16, serde_json::Value) {
        use std::time::Duration;

        let mut waiting = {
            let api = self.api.clone();
            let url = format!("{}{path}", self.base);
            tokio::spawn(async move { api.post(&url, body).await })
        };
        let started = std::time::Instant::now();
        while self.stub.count() == 0 {
            assert!(started.elapsed() < Duration::from_secs(30), "no tool call");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        loop {
            self.clock.advance(Duration::from_secs(61));
            match tokio::time::timeout(Duration::from_millis(200), &mut waiting).await {
                Ok(answer) => return answer.expect("the request task"),
                Err(_) => assert!(
                    started.elapsed() < Duration::from_secs(30),
                    "the wait never ended"
                ),
            }
        }
    }

    /// Let the slow step answer, and wait for the run to complete.
    async fn completes(mut self, run_id: &str) {
        use std::time::Duration;

        self.release.send(()).expect("release the stub");
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        loop {
            let (status, run) = self.api.get(&format!("{}/runs/{run_id}", self.base)).await;
            assert_eq!(status, 200, "{run}");
            if run["status"] == "completed" {
                break;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "never completed: {run}"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

/// A run whose step outlasts the wait's bound (60 s on the server's clock)
/// is answered as it stands, `running`, with its id; it goes on and
/// completes afterwards.
#[tokio::test(flavor = "multi_thread")]
async fn a_waited_start_answers_running_when_the_bound_is_over() {
    let slow = SlowStep::start(false).await;
    let (status, run) = slow.post_past_the_bound("/runs?wait=true", json!({})).await;
    assert_eq!(status, 200, "{run}");
    assert_eq!(run["status"], "running", "{run}");
    let run_id = run["id"].as_str().expect("the run id").to_string();
    assert_eq!(run["pending_approval"], serde_json::Value::Null, "{run}");
    slow.completes(&run_id).await;
}

/// A decision's `?wait=true` has the same bound: the approved run's next
/// step outlasts it, and the answer is the decision with the run
/// `running` (it used to wait as long as the step took).
#[tokio::test(flavor = "multi_thread")]
async fn a_waited_decision_answers_running_when_the_bound_is_over() {
    let slow = SlowStep::start(true).await;
    let (status, run) = slow
        .api
        .post(&format!("{}/runs?wait=true", slow.base), json!({}))
        .await;
    assert_eq!(status, 200, "{run}");
    assert_eq!(run["status"], "awaiting_approval", "{run}");
    let run_id = run["id"].as_str().expect("the run id").to_string();
    let key = run["pending_approval"]["key"]
        .as_str()
        .expect("the key")
        .to_string();

    let (status, decided) = slow
        .post_past_the_bound(&format!("/approvals/{key}/approve?wait=true"), json!({}))
        .await;
    assert_eq!(status, 200, "{decided}");
    assert_eq!(decided["approval"]["status"], "APPROVED", "{decided}");
    assert_eq!(decided["status"], "running", "{decided}");
    assert_eq!(decided["run"]["status"], "running", "{decided}");
    slow.completes(&run_id).await;
}
