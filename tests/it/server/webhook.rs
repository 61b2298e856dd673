//! The webhook trigger: the JSON body is the input, the trigger context
//! keeps non-credential headers, the query and the time, and a run that
//! pauses is decidable like any other.

use crate::common;
use crate::common::server;

use common::{GATED_SPEC, Workspace};
use serde_json::{Value, json};
use server::{Api, Served, code};
use tollgate_runtime::server::signature;

#[tokio::test(flavor = "multi_thread")]
async fn a_webhook_starts_a_run_with_a_scrubbed_trigger() {
    let ws = Workspace::new(&GATED_SPEC.replace(
        "steps:",
        "trigger:\n  webhook:\n    path: /hooks/ship\nsteps:",
    ));
    let served = Served::start(&ws.spec, &ws.path().join("state.db"), &[], &[]);
    let api = Api::new();
    let (status, body) = api
        .post_raw(
            &served.url(
                "/hooks/ship?source=shop&batch=7&token=leaked&api_key=leaked&apiKey=leaked\
                 &password=leaked&pass=leaked&bearer=leaked&private_token=leaked&jwt=leaked\
                 &sig=leaked&X-Auth=leaked&client%5Fsecret=leaked",
            ),
            br#"{"order_id": "W1"}"#.to_vec(),
            &[
                ("Content-Type", "application/json"),
                ("Authorization", "Bearer leaked"),
                ("X-Api-Key", "leaked"),
                ("Cookie", "leaked"),
                ("X-Request-Id", "req-1"),
            ],
        )
        .await;
    assert_eq!(status, 202, "{body}");
    let run_id = body["run_id"].as_str().unwrap();
    let (_, run) = loop {
        let (s, run) = api.get(&served.url(&format!("/runs/{run_id}"))).await;
        if run["status"] == "awaiting_approval" {
            break (s, run);
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    };
    let record = &run["pending_approval"];
    assert_eq!(record["input"], json!({"order_id": "W1"}));
    let trigger = &record["trigger"];
    assert_eq!(trigger["kind"], "webhook");
    assert_eq!(trigger["path"], "/hooks/ship");
    assert_eq!(trigger["query"], json!({"source": "shop", "batch": "7"}));
    assert_eq!(trigger["headers"]["x-request-id"], "req-1");
    assert!(trigger["received_at"].is_string());
    let headers = trigger["headers"].as_object().unwrap();
    for name in ["authorization", "x-api-key", "cookie"] {
        assert!(
            !headers.contains_key(name),
            "{name} must be scrubbed: {trigger}"
        );
    }
    assert!(!trigger.to_string().contains("leaked"));

    // An empty body is `{}`; an unsigned webhook needs the JSON type, as
    // every JSON route does, so a web page's plain POST cannot start runs.
    let (status, body) = api
        .post_raw(
            &served.url("/hooks/ship"),
            Vec::new(),
            &[("Content-Type", "application/json")],
        )
        .await;
    assert_eq!(status, 202, "{body}");
    for headers in [&[][..], &[("Content-Type", "text/plain")][..]] {
        let (status, body) = api
            .post_raw(
                &served.url("/hooks/ship"),
                br#"{"order_id": "W2"}"#.to_vec(),
                headers,
            )
            .await;
        assert_eq!(status, 415, "{body}");
        assert_eq!(code(&body), "unsupported_media_type");
    }

    // Decide it by run id through /runs/{id}/approve.
    let (status, decided) = api
        .post(
            &served.url(&format!("/runs/{run_id}/approve?wait=true")),
            json!({"approved": true, "payload": {"order": "W1-edited"}}),
        )
        .await;
    assert_eq!(status, 200, "{decided}");
    assert_eq!(decided["approval"]["status"], "MODIFIED");
    assert_eq!(decided["status"], "completed");
    assert_eq!(decided["run"]["outputs"]["act"]["shipped"], "W1-edited");
}

const SECRET: &str = "hook-secret-value";

fn signed_spec() -> String {
    GATED_SPEC.replace(
        "steps:",
        "trigger:\n  webhook:\n    path: /hooks/signed\n    secret: ${HOOK_SECRET}\nsteps:",
    )
}

fn unix_now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64
}

async fn post_signed(api: &Api, served: &Served, body: &[u8], signature: &str) -> (u16, Value) {
    api.post_raw(
        &served.url("/hooks/signed"),
        body.to_vec(),
        &[("X-Tollgate-Signature", signature)],
    )
    .await
}

/// The timestamped form `t=<unix>,v1=<hex HMAC of "<t>.<body>">`: accepted
/// within 300 s of the server's clock, refused outside it (a replay), and
/// the time cannot be moved without the secret. Inside the window each
/// signed request is taken once, by any server sharing the store. The plain
/// `sha256=` form keeps working. A signed webhook takes any Content-Type.
#[tokio::test(flavor = "multi_thread")]
async fn a_timestamped_signature_is_taken_once_and_expires() {
    let ws = Workspace::new(&signed_spec());
    let mut served = Served::start(
        &ws.spec,
        &ws.path().join("state.db"),
        &[("HOOK_SECRET", SECRET)],
        &[],
    );
    let api = Api::new();
    let body = br#"{"order_id": "S1"}"#;
    let now = unix_now();

    let fresh = signature::sign_at(SECRET.as_bytes(), body, now);
    let (s, b) = post_signed(&api, &served, body, &fresh).await;
    assert_eq!(s, 202, "{b}");
    // The same request again, here and at another server on the store.
    let mut other = Served::start(
        &ws.spec,
        &ws.path().join("state.db"),
        &[("HOOK_SECRET", SECRET)],
        &[],
    );
    for at in [&served, &other] {
        let (s, b) = post_signed(&api, at, body, &fresh).await;
        assert_eq!((s, code(&b)), (409, "replayed"), "{b}");
    }
    // Within the window (either side, allowing for a slow test machine).
    for t in [now - 200, now + 200] {
        let (s, b) = post_signed(
            &api,
            &served,
            body,
            &signature::sign_at(SECRET.as_bytes(), body, t),
        )
        .await;
        assert_eq!(s, 202, "t = now {:+}: {b}", t - now);
    }
    // The plain form, and a signed webhook labelled text/plain.
    let (s, b) = api
        .post_raw(
            &served.url("/hooks/signed"),
            body.to_vec(),
            &[
                (
                    "X-Tollgate-Signature",
                    &signature::sign(SECRET.as_bytes(), body),
                ),
                ("Content-Type", "text/plain; charset=UTF-8"),
            ],
        )
        .await;
    assert_eq!(s, 202, "{b}");

    // A captured request replayed an hour later.
    let old = signature::sign_at(SECRET.as_bytes(), body, now - 3600);
    let (s, b) = post_signed(&api, &served, body, &old).await;
    assert_eq!((s, code(&b)), (401, "unauthorized"), "{b}");
    assert!(
        b["error"]["message"]
            .as_str()
            .unwrap()
            .contains("300 seconds"),
        "{b}"
    );
    // ...with its time moved into the window: the MAC no longer matches.
    let moved = old.replace(&format!("t={}", now - 3600), &format!("t={now}"));
    let (s, b) = post_signed(&api, &served, body, &moved).await;
    assert_eq!((s, code(&b)), (401, "unauthorized"), "{b}");
    assert!(
        b["error"]["message"]
            .as_str()
            .unwrap()
            .contains("does not match"),
        "{b}"
    );
    // Another body under a fresh signature, the wrong secret, malformed.
    for bad in [
        signature::sign_at(SECRET.as_bytes(), b"{}", now),
        signature::sign_at(b"not-the-secret", body, now),
        format!("t={now}"),
        format!("t=later,v1={}", "00".repeat(32)),
        "v1=abc".to_string(),
    ] {
        let (s, b) = post_signed(&api, &served, body, &bad).await;
        assert_eq!((s, code(&b)), (401, "unauthorized"), "{bad}: {b}");
    }
    // Four accepted runs (each pauses in the background), none from the
    // refused requests.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let (_, list) = api.get(&served.url("/approvals?limit=50")).await;
        let paused = list["approvals"].as_array().unwrap().len();
        assert!(paused <= 4, "{list}");
        if paused == 4 {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "{list}");
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    // A graceful stop drains every run either server started: after it, no
    // fifth run can still appear.
    assert_eq!(served.terminate(), Some(0), "{}", served.logs());
    assert_eq!(other.terminate(), Some(0), "{}", other.logs());
    let conn = rusqlite::Connection::open(ws.path().join("state.db")).unwrap();
    let runs: i64 = conn
        .query_row("SELECT count(*) FROM tollgate_runs", [], |r| r.get(0))
        .unwrap();
    assert_eq!(runs, 4, "only the four accepted requests started runs");
}
