//! Gate requests over HTTP (DESIGN §14, issue 27): `POST /gates`,
//! `GET /gates/{key}?wait=`, `DELETE /gates/{key}` against real
//! `tollgate serve` processes on real SQLite files and PostgreSQL, with
//! decisions made from other processes (the CLI) and by other servers on
//! the same store, and the plain-HTTP example client
//! (`examples/clients/http_client.py`) run as a user would.

use std::time::Duration;

use serde_json::Value;

use crate::common::server::{Api, Served};
use crate::common::{Workspace, assert_exit};

mod bad_input;
mod cancel;
mod disconnect;
mod example;
mod expiry;
mod idempotency;
mod listing;
mod policy;
mod restart;
mod scopes;
mod three_processes;
mod who_decides;

/// One full token (carol decides), two requester tokens (bots that may
/// ask, never decide), in `TOLLGATE_API_TOKENS` syntax.
pub(crate) const TOKENS: &str =
    "carol:tok-carol,bot/requester:tok-bot,other-bot/requester:tok-other-bot";

/// A served agent with no approval step of its own: the gate requests are
/// its only approvals.
pub(crate) const SPEC: &str = r#"version: 1
agent: payouts-desk
description: Approvals for agents written anywhere.
steps:
  - id: note
    set: { ok: true }
"#;

/// carol's full token.
pub(crate) fn full() -> Api {
    Api::with_token("tok-carol")
}

/// bot's requester token.
pub(crate) fn requester() -> Api {
    Api::with_token("tok-bot")
}

/// other-bot's requester token.
pub(crate) fn other_requester() -> Api {
    Api::with_token("tok-other-bot")
}

/// `tollgate serve` on the workspace's default state file with [`TOKENS`].
pub(crate) fn serve(ws: &Workspace) -> Served {
    Served::start(
        &ws.spec,
        &ws.state_db(),
        &[("TOLLGATE_API_TOKENS", TOKENS)],
        &[],
    )
}

/// `POST /gates` that must answer 201: the request as stored.
pub(crate) async fn create(served: &Served, api: &Api, body: Value) -> Value {
    let (status, view) = api.post(&served.url("/gates"), body).await;
    assert_eq!(status, 201, "{view}\n{}", served.logs());
    assert_eq!(view["state"], "pending", "{view}");
    assert!(view["key"].is_string(), "{view}");
    view
}

/// `create`, answering the new request's key.
pub(crate) async fn ask(served: &Served, api: &Api, body: Value) -> String {
    key_of(&create(served, api, body).await)
}

/// The key of a gate view.
pub(crate) fn key_of(view: &Value) -> String {
    view["key"].as_str().expect("a key").to_string()
}

/// `GET /gates/{key}` with an optional `?wait=`.
pub(crate) async fn gate(
    served: &Served,
    api: &Api,
    key: &str,
    wait: Option<&str>,
) -> (u16, Value) {
    let path = match wait {
        Some(wait) => format!("/gates/{key}?wait={wait}"),
        None => format!("/gates/{key}"),
    };
    api.get(&served.url(&path)).await
}

/// `DELETE /gates/{key}[?reason=]`.
pub(crate) async fn cancel_gate(
    served: &Served,
    api: &Api,
    key: &str,
    reason: Option<&str>,
) -> (u16, Value) {
    let mut request = api.http.delete(served.url(&format!("/gates/{key}")));
    if let Some(reason) = reason {
        request = request.query(&[("reason", reason)]);
    }
    if let Some(token) = &api.token {
        request = request.bearer_auth(token);
    }
    let response = request.send().await.expect("DELETE");
    let status = response.status().as_u16();
    let bytes = response.bytes().await.expect("body");
    let body = serde_json::from_slice(&bytes)
        .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).into_owned()));
    (status, body)
}

/// The keys `GET /approvals` lists (carol's token): every pending approval.
pub(crate) async fn pending_keys(served: &Served) -> Vec<String> {
    let (status, page) = full().get(&served.url("/approvals?limit=100")).await;
    assert_eq!(status, 200, "{page}");
    page["approvals"]
        .as_array()
        .expect("approvals")
        .iter()
        .filter_map(|a| a["key"].as_str().map(str::to_string))
        .collect()
}

/// `tollgate approvals VERB KEY --spec SPEC --by dana STORE... EXTRA...`
/// from its own process, which must succeed (exit 0 for an approval, 5
/// for a rejection: the run it ended was rejected): the instant it exited.
pub(crate) async fn decide_by_cli(
    ws: &Workspace,
    verb: &str,
    key: &str,
    store: &[&str],
    extra: &[&str],
) -> std::time::Instant {
    let verb = verb.to_string();
    let mut command = ws.decide(&verb, key);
    command.args(["--by", "dana"]).args(store).args(extra);
    tokio::task::spawn_blocking(move || {
        let out = command.output().expect("run tollgate approvals");
        let exited = std::time::Instant::now();
        assert_exit(&out, decided_exit_code(&verb));
        exited
    })
    .await
    .expect("the CLI thread")
}

/// What `tollgate approvals VERB` exits with when it decided.
pub(crate) fn decided_exit_code(verb: &str) -> i32 {
    match verb {
        "reject" => 5,
        _ => 0,
    }
}

/// A `GET /gates/{key}?wait=` on its own task: the answer and the instant
/// it arrived. A connection that fails (a server killed mid-wait) answers
/// status 0 with the error as text.
pub(crate) fn waiter(
    served: &Served,
    api: &Api,
    key: &str,
    wait: &str,
) -> tokio::task::JoinHandle<(u16, Value, std::time::Instant)> {
    let url = served.url(&format!("/gates/{key}?wait={wait}"));
    let api = api.clone();
    tokio::spawn(async move {
        let mut request = api.http.get(&url);
        if let Some(token) = &api.token {
            request = request.bearer_auth(token);
        }
        let answer = match request.send().await {
            Ok(response) => {
                let status = response.status().as_u16();
                match response.bytes().await {
                    Ok(bytes) => (
                        status,
                        serde_json::from_slice(&bytes).unwrap_or_else(|_| {
                            Value::String(String::from_utf8_lossy(&bytes).into_owned())
                        }),
                    ),
                    Err(e) => (0, Value::String(e.to_string())),
                }
            }
            Err(e) => (0, Value::String(e.to_string())),
        };
        (answer.0, answer.1, std::time::Instant::now())
    })
}

/// Give a waiter just started time to reach the server and begin its
/// wait (nothing breaks if it has not: it then answers at once).
pub(crate) async fn let_it_wait() {
    tokio::time::sleep(Duration::from_millis(400)).await;
}

/// The error code and message of an error answer.
pub(crate) fn error_of(body: &Value) -> (&str, &str) {
    (
        body["error"]["code"].as_str().unwrap_or(""),
        body["error"]["message"].as_str().unwrap_or(""),
    )
}

/// The status of the run behind gate request `key`, read from the store:
/// such a run is the gate API's own (agent `gate:...`), so `GET /runs`
/// does not serve it.
pub(crate) async fn run_status(store: &tollgate_runtime::SharedStore, key: &str) -> String {
    let record = store
        .get_approval(key)
        .await
        .expect("read the approval")
        .expect("the approval");
    let run = store
        .get_run(&record.run_id)
        .await
        .expect("read the run")
        .expect("the run");
    run.status.as_str().to_string()
}
