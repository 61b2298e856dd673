//! Email notices against a real SMTP server: aiosmtpd, started by each test
//! (`smtp_server.py` beside this file), saving every message it accepts
//! with Python's own reading of it. What a decider gets (the envelope, both
//! parts, the link, a subject without run data, the Message-ID), AUTH with
//! a password from a `${NAME}` reference, STARTTLS and TLS to a server with
//! a private CA, and what each failure comes to for the outbox worker: an
//! outage then recovery, a timeout, a permanent refusal, an unset variable.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;
use tollgate_runtime::links::LinkSigner;
use tollgate_runtime::notices::{EmailRoute, NoticeBody, NoticeData, NoticeEvent, payload_preview};
use tollgate_runtime::notify::delivery::Attempt;
use tollgate_runtime::notify::email::EmailSender;
use tollgate_runtime::{ApprovalStatus, Phase};

const SERVER_SCRIPT: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/it/notifications/smtp_server.py"
);

/// One aiosmtpd process; stopped when dropped.
pub(super) struct SmtpServer {
    child: Child,
    port: u16,
    dir: tempfile::TempDir,
}

#[derive(Default)]
struct Options<'a> {
    /// AUTH required with this user and password.
    auth: Option<(&'a str, &'a str)>,
    /// TLS with this certificate and key: STARTTLS (required), or implicit.
    tls: Option<(&'a Path, &'a Path)>,
    implicit_tls: bool,
}

impl SmtpServer {
    fn start(port: u16, options: Options<'_>) -> SmtpServer {
        let python = crate::common::openapi::python()
            .unwrap_or_else(|why| panic!("no Python with aiosmtpd: {why}"));
        let dir = tempfile::tempdir().unwrap();
        let mut command = Command::new(python);
        command
            .arg(SERVER_SCRIPT)
            .arg("--port")
            .arg(port.to_string())
            .arg("--dir")
            .arg(dir.path());
        if let Some((user, password)) = options.auth {
            command.args(["--user", user, "--password", password]);
        }
        if let Some((cert, key)) = options.tls {
            command.arg("--cert").arg(cert).arg("--key").arg(key);
        }
        if options.implicit_tls {
            command.arg("--implicit-tls");
        }
        // Its log (a refused TLS handshake is a traceback there) is shown
        // only when the test fails.
        let log = std::fs::File::create(dir.path().join("server.log")).unwrap();
        let mut child = command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(log)
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {SERVER_SCRIPT}: {e}"));
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        if line.trim() != format!("READY {port}") {
            let _ = child.wait();
            panic!("the SMTP server did not start:\n{}", log_of(dir.path()));
        }
        SmtpServer { child, port, dir }
    }

    pub(super) fn plain(port: u16) -> SmtpServer {
        SmtpServer::start(port, Options::default())
    }

    /// The messages saved so far, oldest first.
    pub(super) fn saved(&self) -> Vec<Value> {
        let mut files: Vec<PathBuf> = std::fs::read_dir(self.dir.path())
            .unwrap()
            .map(|entry| entry.unwrap().path())
            .filter(|path| path.extension().is_some_and(|e| e == "json"))
            .collect();
        files.sort();
        files
            .iter()
            .map(|path| serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap())
            .collect()
    }

    /// The one message saved (the server saves before it answers 250).
    fn only_message(&self) -> Value {
        let saved = self.saved();
        assert_eq!(saved.len(), 1, "one message saved: {saved:#?}");
        saved.into_iter().next().unwrap()
    }
}

impl Drop for SmtpServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if std::thread::panicking() {
            eprintln!("SMTP server log:\n{}", log_of(self.dir.path()));
        }
    }
}

fn log_of(dir: &Path) -> String {
    std::fs::read_to_string(dir.join("server.log")).unwrap_or_default()
}

/// A port nothing listens on (yet).
pub(super) fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn plain_url(port: u16) -> String {
    format!("smtp://127.0.0.1:{port}?tls=none")
}

fn route(smtp_url: &str) -> EmailRoute {
    EmailRoute {
        smtp_url: smtp_url.to_string(),
        from: "Tollgate <tollgate@example.com>".to_string(),
        to: BTreeMap::from([("alice".to_string(), "alice@example.com".to_string())]),
        approvers: None,
        events: None,
    }
}

/// A payload far longer than a preview, with a marker past the cut.
fn payload() -> Value {
    serde_json::json!({
        "order": "A-1001",
        "amount": 250,
        "notes": "x".repeat(900),
        "tail": "PAST-THE-PREVIEW-MARKER",
    })
}

const MESSAGE: &str = "Refund <b>250</b> on order A-1001?";

fn body(event: NoticeEvent) -> NoticeBody {
    let at = tollgate_runtime::time::parse_utc("2026-12-03T18:00:00Z").unwrap();
    NoticeBody {
        event,
        timestamp: at,
        data: NoticeData {
            key: "6f1d3c2a-0b9e-4d7f-8a1c-5e2b9d0c7f31".to_string(),
            run_id: "run-7".to_string(),
            agent: "refund-desk".to_string(),
            step: "large".to_string(),
            phase: Phase::Before,
            message: Some(MESSAGE.to_string()),
            status: ApprovalStatus::Pending,
            expires_at: tollgate_runtime::time::parse_utc("2026-12-10T18:00:00Z").unwrap(),
            payload_digest: "sha256:5d41402abc4b2a76b9719d911017c592".to_string(),
            payload_preview: payload_preview(&payload()),
            progress: Some("finance 0 of 2".to_string()),
            by: None,
            reason: None,
            percent: None,
            added: Vec::new(),
            link: None,
        },
    }
}

fn text_of(message: &Value, content_type: &str) -> String {
    message["parts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|part| part["content_type"] == content_type)
        .unwrap_or_else(|| panic!("no {content_type} part: {message:#}"))["content"]
        .as_str()
        .unwrap()
        .to_string()
}

fn assert_failed(attempt: &Attempt) -> String {
    match attempt {
        Attempt::Failed { error, .. } => error.clone(),
        other => panic!("expected Failed, got {other:?}"),
    }
}

#[tokio::test]
async fn a_notice_is_mailed_to_its_decider_with_both_parts_and_a_link_bound_to_them() {
    let server = SmtpServer::plain(free_port());
    let signer = LinkSigner::new(
        "an-approval-link-secret-of-32-chars-or-more",
        Some("https://tollgate.example"),
    )
    .unwrap();
    let body = body(NoticeEvent::Requested);
    let link = signer.url(&body.data.key, Some("alice"));
    let id = "0d9c6a4e-3b1f-4c2d-9e8a-7f6b5c4d3e2a";

    let attempt = EmailSender::new()
        .deliver(
            &route(&plain_url(server.port)),
            "alice",
            &body,
            id,
            Some(&link),
        )
        .await;
    assert_eq!(attempt, Attempt::Sent);

    let mail = server.only_message();
    assert_eq!(mail["mail_from"], "tollgate@example.com");
    assert_eq!(mail["rcpt_tos"], serde_json::json!(["alice@example.com"]));
    let headers = &mail["headers"];
    assert_eq!(headers["to"], "alice <alice@example.com>");
    assert_eq!(headers["from"], "Tollgate <tollgate@example.com>");
    assert_eq!(headers["message-id"], format!("<{id}@tollgate>"));
    assert_eq!(headers["x-tollgate-notice"], id);

    // The subject: the event, the agent and the step; no run data.
    let subject = headers["subject"].as_str().unwrap();
    assert_eq!(subject, "Approval requested: refund-desk at step large");

    assert_eq!(mail["content_type"], "multipart/alternative");
    let text = text_of(&mail, "text/plain");
    let html = text_of(&mail, "text/html");
    for part in [&text, &html] {
        assert!(part.contains("refund-desk"), "{part}");
        assert!(
            part.contains("2026-12-10 18:00:00 UTC"),
            "the expiry: {part}"
        );
        assert!(part.contains("finance 0 of 2"), "rule progress: {part}");
        assert!(part.contains(&body.data.payload_digest), "{part}");
        assert!(part.contains("A-1001"), "the payload preview: {part}");
        assert!(
            !part.contains("PAST-THE-PREVIEW-MARKER"),
            "only a preview of the payload: {part}"
        );
    }
    assert!(text.contains(MESSAGE), "{text}");
    assert!(text.contains(&link), "{text}");
    // The gate's message is run data: escaped in HTML.
    assert!(html.contains("Refund &lt;b&gt;250&lt;/b&gt;"), "{html}");
    assert!(!html.contains("<b>250"), "{html}");
    assert!(
        html.contains(&format!("<a href=\"{link}\"")),
        "the link is a button: {html}"
    );
    // The link is bound to alice: the signature over her name checks.
    let (path, bound) = link.split_once('?').expect("a bound link");
    assert_eq!(bound, "as=alice");
    let signature = path.rsplit('/').next().unwrap();
    assert!(signer.verify(&body.data.key, signature, Some("alice")));
    assert!(!signer.verify(&body.data.key, signature, Some("bob")));
}

#[tokio::test]
async fn a_resent_notice_is_the_same_message() {
    let server = SmtpServer::plain(free_port());
    let sender = EmailSender::new();
    let route = route(&plain_url(server.port));
    let body = body(NoticeEvent::Reminded);
    for _ in 0..2 {
        let attempt = sender
            .deliver(&route, "alice", &body, "notice-1", None)
            .await;
        assert_eq!(attempt, Attempt::Sent);
    }
    let saved = server.saved();
    assert_eq!(saved.len(), 2);
    assert_eq!(saved[0]["headers"]["message-id"], "<notice-1@tollgate>");
    for header in [
        "message-id",
        "x-tollgate-notice",
        "date",
        "subject",
        "to",
        "from",
    ] {
        assert_eq!(
            saved[0]["headers"][header], saved[1]["headers"][header],
            "{header}"
        );
    }
    assert_eq!(saved[0]["parts"], saved[1]["parts"]);
}

#[tokio::test]
async fn auth_takes_the_password_from_a_reference_and_a_wrong_one_fails_unquoted() {
    let password = "Pa55:w@rd/with?odd#chars";
    let server = SmtpServer::start(
        free_port(),
        Options {
            auth: Some(("mailer", password)),
            ..Options::default()
        },
    );
    let route = route(&format!(
        "smtp://mailer:${{SMTP_PASSWORD}}@127.0.0.1:{}?tls=none",
        server.port
    ));
    let body = body(NoticeEvent::Requested);

    let right = EmailSender::new()
        .with_lookup(move |name| (name == "SMTP_PASSWORD").then(|| password.to_string()));
    assert_eq!(
        right.deliver(&route, "alice", &body, "n-1", None).await,
        Attempt::Sent
    );
    assert_eq!(server.only_message()["login"], "mailer");

    let wrong_password = "Wr0ng-Passw0rd-Value";
    let wrong = EmailSender::new()
        .with_lookup(move |name| (name == "SMTP_PASSWORD").then(|| wrong_password.to_string()));
    let error = assert_failed(&wrong.deliver(&route, "alice", &body, "n-2", None).await);
    assert!(error.contains("535"), "the server's refusal: {error}");
    assert!(!error.contains(wrong_password), "{error}");
    assert!(!error.contains(password), "{error}");
    assert_eq!(server.saved().len(), 1, "nothing sent without AUTH");
}

#[tokio::test]
async fn an_outage_fails_and_the_attempt_after_recovery_is_sent() {
    let port = free_port();
    let sender = EmailSender::new();
    let route = route(&plain_url(port));
    let body = body(NoticeEvent::Requested);

    let error = assert_failed(&sender.deliver(&route, "alice", &body, "n-1", None).await);
    assert!(error.contains(&format!("127.0.0.1:{port}")), "{error}");
    assert!(error.to_lowercase().contains("refused"), "{error}");

    let server = SmtpServer::plain(port);
    assert_eq!(
        sender.deliver(&route, "alice", &body, "n-1", None).await,
        Attempt::Sent
    );
    assert_eq!(server.only_message()["headers"]["x-tollgate-notice"], "n-1");
}

#[tokio::test]
async fn a_server_that_never_answers_fails_at_the_timeout() {
    // Connections complete in the kernel's backlog; nothing ever speaks.
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = silent.local_addr().unwrap().port();
    let sender = EmailSender::new().with_timeout(Duration::from_secs(1));
    let started = Instant::now();
    let attempt = sender
        .deliver(
            &route(&plain_url(port)),
            "alice",
            &body(NoticeEvent::Requested),
            "n-1",
            None,
        )
        .await;
    let error = assert_failed(&attempt);
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );
    assert!(error.contains(&format!("127.0.0.1:{port}")), "{error}");
    drop(silent);
}

#[tokio::test]
async fn a_permanent_refusal_fails_with_the_servers_text() {
    let server = SmtpServer::plain(free_port());
    let attempt = EmailSender::new()
        .deliver(
            &route(&plain_url(server.port)),
            "nobody@example.com",
            &body(NoticeEvent::Requested),
            "n-1",
            None,
        )
        .await;
    let error = assert_failed(&attempt);
    assert!(error.contains("550"), "{error}");
    assert!(error.contains("No such mailbox here"), "{error}");
    assert!(server.saved().is_empty());
}

#[tokio::test]
async fn an_unset_variable_or_an_unknown_decider_is_misconfigured() {
    let variable = "TOLLGATE_TEST_EMAIL_SMTP_URL_NEVER_SET";
    let route = route(&format!("${{{variable}}}"));
    let attempt = EmailSender::new()
        .deliver(&route, "alice", &body(NoticeEvent::Requested), "n-1", None)
        .await;
    match attempt {
        Attempt::Misconfigured { error } => {
            assert!(error.contains(variable), "{error}");
            assert!(error.contains("smtp_url"), "{error}");
        }
        other => panic!("expected Misconfigured, got {other:?}"),
    }

    let server = SmtpServer::plain(free_port());
    let attempt = EmailSender::new()
        .deliver(
            &self::route(&plain_url(server.port)),
            "carol",
            &body(NoticeEvent::Requested),
            "n-1",
            None,
        )
        .await;
    match attempt {
        Attempt::Misconfigured { error } => assert!(error.contains("carol"), "{error}"),
        other => panic!("expected Misconfigured, got {other:?}"),
    }
    assert!(server.saved().is_empty());
}

/// A private CA and a certificate it signed for 127.0.0.1, made with the
/// openssl command.
struct Certificates {
    _dir: tempfile::TempDir,
    ca: PathBuf,
    cert: PathBuf,
    key: PathBuf,
}

fn certificates() -> Certificates {
    let dir = tempfile::tempdir().unwrap();
    let path = |name: &str| dir.path().join(name);
    let openssl = |args: &[&str]| {
        let output = Command::new("openssl")
            .args(args)
            .current_dir(dir.path())
            .output()
            .expect("run openssl");
        assert!(
            output.status.success(),
            "openssl {args:?}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
    };
    let ec = [
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:P-256",
        "-nodes",
    ];
    openssl(
        &[
            &["req", "-x509"][..],
            &ec,
            &[
                "-keyout",
                "ca.key",
                "-out",
                "ca.pem",
                "-days",
                "2",
                "-subj",
                "/CN=tollgate test CA",
            ],
        ]
        .concat(),
    );
    openssl(
        &[
            &["req"][..],
            &ec,
            &[
                "-keyout",
                "leaf.key",
                "-out",
                "leaf.csr",
                "-subj",
                "/CN=127.0.0.1",
            ],
        ]
        .concat(),
    );
    std::fs::write(
        path("leaf.ext"),
        "basicConstraints=critical,CA:FALSE\nsubjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth\n",
    )
    .unwrap();
    openssl(&[
        "x509",
        "-req",
        "-in",
        "leaf.csr",
        "-CA",
        "ca.pem",
        "-CAkey",
        "ca.key",
        "-CAcreateserial",
        "-out",
        "leaf.pem",
        "-days",
        "2",
        "-extfile",
        "leaf.ext",
    ]);
    Certificates {
        ca: path("ca.pem"),
        cert: path("leaf.pem"),
        key: path("leaf.key"),
        _dir: dir,
    }
}

#[tokio::test]
async fn starttls_and_tls_reach_a_server_whose_ca_the_sender_trusts() {
    let certs = certificates();
    let ca = std::fs::read(&certs.ca).unwrap();
    let body = body(NoticeEvent::Requested);
    let trusting = EmailSender::new()
        .with_root_certificates(&ca)
        .unwrap()
        .with_lookup(|name| (name == "SMTP_PASSWORD").then(|| "tls-only-password".to_string()));

    // STARTTLS, required (smtp:// without ?tls), then AUTH inside TLS.
    let starttls = SmtpServer::start(
        free_port(),
        Options {
            auth: Some(("mailer", "tls-only-password")),
            tls: Some((&certs.cert, &certs.key)),
            ..Options::default()
        },
    );
    let url = format!(
        "smtp://mailer:${{SMTP_PASSWORD}}@127.0.0.1:{}",
        starttls.port
    );
    assert_eq!(
        trusting
            .deliver(&route(&url), "alice", &body, "n-1", None)
            .await,
        Attempt::Sent
    );
    let mail = starttls.only_message();
    assert_eq!(mail["tls"], true);
    assert_eq!(mail["login"], "mailer");

    // A sender that does not trust the CA refuses the server.
    let error = assert_failed(
        &EmailSender::new()
            .with_lookup(|_| Some("tls-only-password".to_string()))
            .deliver(&route(&url), "alice", &body, "n-2", None)
            .await,
    );
    assert!(error.to_lowercase().contains("certificate"), "{error}");
    assert_eq!(starttls.saved().len(), 1);

    // Implicit TLS (smtps://).
    let implicit = SmtpServer::start(
        free_port(),
        Options {
            tls: Some((&certs.cert, &certs.key)),
            implicit_tls: true,
            ..Options::default()
        },
    );
    let url = format!("smtps://127.0.0.1:{}", implicit.port);
    assert_eq!(
        trusting
            .deliver(&route(&url), "alice", &body, "n-3", None)
            .await,
        Attempt::Sent
    );
    assert_eq!(implicit.only_message()["tls"], true);
}
