//! Outbound webhooks against a real receiver that checks them with the
//! official Standard Webhooks verifier (`standardwebhooks` from PyPI, in
//! webhook_receiver.py): what it accepts, what it refuses, and how each
//! answer (2xx, 5xx then recovery, 410, Retry-After, silence, a redirect)
//! comes back to the delivery worker as an `Attempt`.

use std::io::{BufRead, BufReader, Read};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use base64::Engine as _;
use chrono::Utc;
use serde_json::{Value, json};
use tollgate_runtime::notices::WebhookRoute;
use tollgate_runtime::notify::delivery::Attempt;
use tollgate_runtime::notify::webhook::{WebhookSecret, WebhookSender};
use tollgate_runtime::tools::template::CallSecrets;

/// Standard Webhooks' own test secret (their libraries' test vector).
pub(crate) const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
/// Part of every receiver URL: webhook URLs often carry a token, and no
/// outcome may show it.
const URL_TOKEN: &str = "url-token-value";

/// One webhook_receiver.py process, ended when dropped.
pub(crate) struct Receiver {
    child: Child,
    port: u16,
    log: PathBuf,
    _dir: tempfile::TempDir,
}

impl Receiver {
    /// A receiver verifying with [`SECRET`], started with `args`
    /// (`--mode`, `--fail-first`, ...).
    pub(crate) fn start(args: &[&str]) -> Receiver {
        let python = crate::common::openapi::python()
            .unwrap_or_else(|why| panic!("no Python with standardwebhooks: {why}"));
        let script = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/it/notifications/webhook_receiver.py"
        );
        let dir = tempfile::tempdir().expect("temp dir");
        let log = dir.path().join("requests.jsonl");
        let mut child = Command::new(python)
            .arg(script)
            .args(["--secret", SECRET, "--log"])
            .arg(&log)
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {script}: {e}"));
        let mut first = String::new();
        BufReader::new(child.stdout.take().expect("stdout"))
            .read_line(&mut first)
            .expect("read the receiver's port");
        let Ok(port) = first.trim().parse() else {
            let _ = child.kill();
            let mut stderr = String::new();
            if let Some(mut err) = child.stderr.take() {
                let _ = err.read_to_string(&mut stderr);
            }
            let _ = child.wait();
            panic!("the receiver did not start (printed {first:?}):\n{stderr}");
        };
        Receiver {
            child,
            port,
            log,
            _dir: dir,
        }
    }

    pub(crate) fn url(&self) -> String {
        format!("http://127.0.0.1:{}/hook?token={URL_TOKEN}", self.port)
    }

    /// Every request it received, in order.
    pub(crate) fn requests(&self) -> Vec<Value> {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        text.lines()
            .map(|line| serde_json::from_str(line).expect("a JSON line"))
            .collect()
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn secret() -> WebhookSecret {
    WebhookSecret::parse(SECRET).expect("the test secret parses")
}

fn sender() -> WebhookSender {
    WebhookSender::new().expect("a webhook client")
}

/// A body of the shape every notice has (`NoticeBody`).
fn body(key: &str) -> Vec<u8> {
    serde_json::to_vec(&json!({
        "type": "approval.requested",
        "timestamp": "2026-12-03T18:00:00Z",
        "data": {
            "key": key,
            "run_id": "run-1",
            "agent": "refunds",
            "step": "gate",
            "phase": "before",
            "message": "Refund 42 EUR?",
            "status": "pending",
            "expires_at": "2026-12-04T18:00:00Z",
            "payload_digest": "sha256:00",
            "payload_preview": "{\n  \"amount\": 42\n}"
        }
    }))
    .expect("JSON")
}

/// Whether `text` shows the receiver's URL or anything of it.
fn shows_url(text: &str, receiver: &Receiver) -> bool {
    text.contains(URL_TOKEN)
        || text.contains("/hook")
        || text.contains(&format!(":{}", receiver.port))
}

fn failed(attempt: Attempt) -> (String, Option<Duration>) {
    match attempt {
        Attempt::Failed { error, retry_after } => (error, retry_after),
        other => panic!("expected Failed, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_signed_delivery_is_verified_by_the_published_library() {
    let receiver = Receiver::start(&[]);
    let url = receiver.url();
    let lookup = move |name: &str| match name {
        "HOOK_URL" => Some(url.clone()),
        "HOOK_SECRET" => Some(SECRET.to_string()),
        _ => None,
    };
    let route = WebhookRoute {
        url: "${HOOK_URL}".into(),
        secret: "${HOOK_SECRET}".into(),
        events: None,
    };
    let now = Utc::now();
    let sent = body("k-signed");
    let attempt = sender()
        .deliver_with(
            &route,
            CallSecrets::with_lookup(lookup),
            "msg_signed",
            &sent,
            now,
        )
        .await;
    assert_eq!(attempt, Attempt::Sent);

    let requests = receiver.requests();
    assert_eq!(requests.len(), 1, "{requests:?}");
    let got = &requests[0];
    assert_eq!(got["verified"], true, "{got}");
    assert_eq!(got["answered"], 204);
    assert_eq!(got["id"], "msg_signed");
    assert_eq!(got["timestamp"], now.timestamp().to_string());
    assert_eq!(got["content_type"], "application/json");
    assert_eq!(got["user_agent"], "tollgate");
    assert_eq!(got["body"].as_str().unwrap().as_bytes(), &sent[..]);
    let signature = got["signature"].as_str().unwrap();
    let encoded = signature.strip_prefix("v1,").expect("a v1 signature");
    let mac = base64::engine::general_purpose::STANDARD
        .decode(encoded)
        .expect("standard base64");
    assert_eq!(mac.len(), 32, "HMAC-SHA256");
}

/// The check is real: signed with another secret, the library refuses it
/// and the sender reports the refusal as a failure.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_secret_is_refused_by_the_library() {
    let receiver = Receiver::start(&[]);
    let other = base64::engine::general_purpose::STANDARD.encode([3u8; 32]);
    let wrong = WebhookSecret::parse(&format!("whsec_{other}")).unwrap();
    let attempt = sender()
        .send(&receiver.url(), &wrong, "msg_wrong", &body("k"), Utc::now())
        .await;
    let (error, retry_after) = failed(attempt);
    assert!(error.contains("HTTP 401"), "{error}");
    assert_eq!(retry_after, None);
    assert!(!shows_url(&error, &receiver), "{error}");
    let requests = receiver.requests();
    assert_eq!(requests.len(), 1);
    assert_eq!(requests[0]["verified"], false);
    assert_eq!(requests[0]["answered"], 401);
}

/// A receiver down for one attempt: it fails (saying what the receiver
/// answered, on one line), then the retry with the same `webhook-id` is
/// delivered. The receiver saw the id twice; de-duplicating on it keeps one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_receiver_that_recovers_gets_the_same_id_again() {
    let receiver = Receiver::start(&["--fail-first", "1", "--fail-status", "500"]);
    let sender = sender();
    let sent = body("k-retry");
    let first = sender
        .send(&receiver.url(), &secret(), "msg_retry", &sent, Utc::now())
        .await;
    let (error, retry_after) = failed(first);
    assert_eq!(
        error,
        "the webhook receiver answered HTTP 500 Internal Server Error: \
         simulated outage second line of the body"
    );
    assert_eq!(retry_after, None);
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let second = sender
        .send(&receiver.url(), &secret(), "msg_retry", &sent, Utc::now())
        .await;
    assert_eq!(second, Attempt::Sent);

    let requests = receiver.requests();
    assert_eq!(requests.len(), 2, "{requests:?}");
    assert!(
        requests.iter().all(|r| r["verified"] == true),
        "{requests:?}"
    );
    assert_eq!(requests[0]["answered"], 500);
    assert_eq!(requests[1]["answered"], 204);
    let ids: std::collections::BTreeSet<&str> =
        requests.iter().map(|r| r["id"].as_str().unwrap()).collect();
    assert_eq!(ids.into_iter().collect::<Vec<_>>(), ["msg_retry"]);
    assert_ne!(
        requests[0]["timestamp"], requests[1]["timestamp"],
        "each attempt is signed at its own time"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_410_says_the_endpoint_is_gone() {
    let receiver = Receiver::start(&["--mode", "gone"]);
    let attempt = sender()
        .send(
            &receiver.url(),
            &secret(),
            "msg_gone",
            &body("k"),
            Utc::now(),
        )
        .await;
    assert_eq!(
        attempt,
        Attempt::Gone {
            reason: "the webhook receiver answered HTTP 410 Gone: endpoint removed by its owner"
                .into()
        }
    );
}

/// `Retry-After` in seconds (a 503) and as an HTTP date (a 429) reaches
/// the outcome, so the worker waits at least that long.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retry_after_is_honoured_in_seconds_and_as_a_date() {
    let seconds = Receiver::start(&[
        "--fail-first",
        "1",
        "--fail-status",
        "503",
        "--retry-after",
        "120",
    ]);
    let attempt = sender()
        .send(
            &seconds.url(),
            &secret(),
            "msg_wait",
            &body("k"),
            Utc::now(),
        )
        .await;
    let (error, retry_after) = failed(attempt);
    assert!(error.contains("HTTP 503 Service Unavailable"), "{error}");
    assert_eq!(retry_after, Some(Duration::from_secs(120)));

    let now = Utc::now();
    let date = (now + chrono::Duration::seconds(90))
        .format("%a, %d %b %Y %H:%M:%S GMT")
        .to_string();
    let dated = Receiver::start(&[
        "--fail-first",
        "1",
        "--fail-status",
        "429",
        "--retry-after",
        &date,
    ]);
    let attempt = sender()
        .send(&dated.url(), &secret(), "msg_wait", &body("k"), now)
        .await;
    let (error, retry_after) = failed(attempt);
    assert!(error.contains("HTTP 429 Too Many Requests"), "{error}");
    let wait = retry_after.expect("a Retry-After date");
    assert!(
        (Duration::from_secs(89)..=Duration::from_secs(90)).contains(&wait),
        "{wait:?} for {date}"
    );
}

/// A receiver that takes the request and never answers fails the attempt
/// at the sender's time limit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_receiver_that_never_answers_fails_within_the_timeout() {
    let receiver = Receiver::start(&["--mode", "hang"]);
    let sender = WebhookSender::with_timeouts(Duration::from_secs(1), Duration::from_secs(2))
        .expect("a webhook client");
    let started = Instant::now();
    let attempt = sender
        .send(
            &receiver.url(),
            &secret(),
            "msg_hang",
            &body("k"),
            Utc::now(),
        )
        .await;
    let took = started.elapsed();
    let (error, retry_after) = failed(attempt);
    assert!(
        took >= Duration::from_secs(2) && took < Duration::from_secs(8),
        "{took:?}"
    );
    assert!(error.contains("did not answer in time"), "{error}");
    assert!(!shows_url(&error, &receiver), "{error}");
    assert_eq!(retry_after, None);
    let requests = receiver.requests();
    assert_eq!(requests.len(), 1, "the request reached it: {requests:?}");
    assert_eq!(requests[0]["verified"], true);
}

/// A redirect is a failure that says so, and is not followed: the
/// receiver sees one request, at the URL configured.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redirect_is_not_followed() {
    let receiver = Receiver::start(&["--mode", "redirect"]);
    let attempt = sender()
        .send(
            &receiver.url(),
            &secret(),
            "msg_moved",
            &body("k"),
            Utc::now(),
        )
        .await;
    let (error, _) = failed(attempt);
    assert!(error.contains("HTTP 307"), "{error}");
    assert!(error.contains("redirect"), "{error}");
    assert!(!error.contains("redirect-token-value"), "{error}");
    assert!(!shows_url(&error, &receiver), "{error}");
    let requests = receiver.requests();
    assert_eq!(requests.len(), 1, "{requests:?}");
    assert_eq!(requests[0]["path"], format!("/hook?token={URL_TOKEN}"));
}

/// Nothing listens: the connection error says so, not where.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_receiver_fails_without_naming_the_url() {
    let port = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    };
    let url = format!("http://127.0.0.1:{port}/hook?token={URL_TOKEN}");
    let attempt = sender()
        .send(&url, &secret(), "msg_down", &body("k"), Utc::now())
        .await;
    let (error, retry_after) = failed(attempt);
    assert!(error.starts_with("cannot connect"), "{error}");
    assert!(
        !error.contains(URL_TOKEN) && !error.contains("/hook"),
        "{error}"
    );
    assert_eq!(retry_after, None);
}

/// An unset `${NAME}` is a configuration problem, said with the variable's
/// name and no value; nothing is sent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unset_reference_is_misconfigured_without_any_value() {
    let receiver = Receiver::start(&[]);
    let url = receiver.url();
    let lookup = move |name: &str| (name == "HOOK_URL").then(|| url.clone());
    let route = WebhookRoute {
        url: "${HOOK_URL}".into(),
        secret: "${HOOK_SECRET_UNSET}".into(),
        events: None,
    };
    let attempt = sender()
        .deliver_with(
            &route,
            CallSecrets::with_lookup(lookup),
            "msg_unset",
            &body("k"),
            Utc::now(),
        )
        .await;
    let Attempt::Misconfigured { error } = attempt else {
        panic!("{attempt:?}");
    };
    assert_eq!(
        error,
        "approvals.notify.webhooks secret: environment variable HOOK_SECRET_UNSET \
         is not set (referenced as ${HOOK_SECRET_UNSET})"
    );
    assert!(!shows_url(&error, &receiver), "{error}");
    assert!(receiver.requests().is_empty(), "nothing was sent");
}
