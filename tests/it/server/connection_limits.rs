//! The connection layer of `tollgate serve`: header, body and idle
//! timeouts, the connection cap, and JSON answers to heads hyper cannot
//! parse. Raw TCP over loopback, so the test controls every byte and
//! every pause; timeouts are set short (1 s) and waits are generous.

use crate::common;
use crate::common::server;

use std::io::{BufRead, BufReader, ErrorKind, Read, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{GATED_SPEC, Workspace};
use serde_json::Value;
use server::{Api, Served};

/// How long a test waits for something the server must do by itself.
const GENEROUS: Duration = Duration::from_secs(30);

fn serve(ws: &Workspace, args: &[&str]) -> Served {
    Served::start(&ws.spec, &ws.path().join("state.db"), &[], args)
}

fn connect(served: &Served) -> TcpStream {
    connect_to(&served.base)
}

fn connect_to(base: &str) -> TcpStream {
    let addr = base.trim_start_matches("http://");
    let stream = TcpStream::connect(addr).expect("connect");
    stream
        .set_read_timeout(Some(Duration::from_millis(100)))
        .unwrap();
    stream
}

/// True once the server has closed `stream` (EOF or reset), reading and
/// dropping anything it sends meanwhile; false if still open after `within`.
fn closed_within(stream: &mut TcpStream, within: Duration) -> bool {
    let deadline = Instant::now() + within;
    let mut buf = [0u8; 4096];
    while Instant::now() < deadline {
        match stream.read(&mut buf) {
            Ok(0) => return true,
            Ok(_) => {}
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
            Err(_) => return true,
        }
    }
    false
}

/// One response read off `stream`: status, headers (lower-cased) and body.
fn read_response(stream: &mut TcpStream, within: Duration) -> Option<(u16, String, Vec<u8>)> {
    let deadline = Instant::now() + within;
    let mut bytes = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        if let Some(end) = bytes.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&bytes[..end]).to_lowercase();
            let length = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length:"))
                .map(|v| v.trim().parse::<usize>().expect("content-length"))
                .unwrap_or(0);
            if bytes.len() >= end + 4 + length {
                let status = head[9..12].parse().expect("status");
                let body = bytes[end + 4..end + 4 + length].to_vec();
                return Some((status, head, body));
            }
        }
        if Instant::now() >= deadline {
            return None;
        }
        match stream.read(&mut buf) {
            Ok(0) => return None,
            Ok(n) => bytes.extend_from_slice(&buf[..n]),
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
            Err(_) => return None,
        }
    }
}

fn code(body: &[u8]) -> String {
    let value: Value = serde_json::from_slice(body)
        .unwrap_or_else(|_| panic!("not JSON: {}", String::from_utf8_lossy(body)));
    value["error"]["code"].as_str().unwrap_or("").to_string()
}

const HEALTHZ: &[u8] = b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";

#[test]
fn a_request_head_sent_slowly_is_cut_off_at_the_header_timeout() {
    let ws = Workspace::new(GATED_SPEC);
    let served = serve(&ws, &["--header-timeout", "1s", "--idle-timeout", "60s"]);
    let mut stream = connect(&served);
    stream
        .write_all(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        .unwrap();
    // Slowloris: a header byte every 100 ms, never the blank line.
    let deadline = Instant::now() + GENEROUS;
    let mut closed = false;
    while Instant::now() < deadline {
        if stream.write_all(b"X").is_err() || closed_within(&mut stream, Duration::from_millis(100))
        {
            closed = true;
            break;
        }
    }
    assert!(closed, "a trickled head kept the connection open");
}

#[test]
fn a_silent_new_connection_is_closed_at_the_header_timeout() {
    let ws = Workspace::new(GATED_SPEC);
    let served = serve(&ws, &["--header-timeout", "1s", "--idle-timeout", "60s"]);
    let mut stream = connect(&served);
    assert!(closed_within(&mut stream, GENEROUS));
}

#[test]
fn an_idle_keep_alive_connection_is_closed_at_the_idle_timeout() {
    let ws = Workspace::new(GATED_SPEC);
    let served = serve(&ws, &["--header-timeout", "60s", "--idle-timeout", "1s"]);
    let mut stream = connect(&served);
    stream.write_all(HEALTHZ).unwrap();
    let (status, head, _) = read_response(&mut stream, GENEROUS).expect("an answer");
    assert_eq!(status, 200);
    assert!(!head.contains("connection: close"), "{head}");
    assert!(closed_within(&mut stream, GENEROUS), "idle connection kept");
}

#[test]
fn a_kept_alive_connection_may_wait_longer_than_the_header_timeout() {
    let ws = Workspace::new(GATED_SPEC);
    let served = serve(&ws, &["--header-timeout", "1s", "--idle-timeout", "60s"]);
    let mut stream = connect(&served);
    stream.write_all(HEALTHZ).unwrap();
    assert_eq!(read_response(&mut stream, GENEROUS).expect("first").0, 200);
    // Idle for longer than the header timeout: the idle timeout applies.
    // Kept as a sleep on purpose: what is tested is real time passing on
    // the spawned server's own connection timers (not a clock it reads),
    // and the assertion after it is that the connection is still served.
    std::thread::sleep(Duration::from_millis(2500));
    stream.write_all(HEALTHZ).unwrap();
    let second = read_response(&mut stream, GENEROUS).expect("the connection was kept");
    assert_eq!(second.0, 200);
}

#[test]
fn a_body_that_arrives_too_slowly_gets_408_and_the_connection_closes() {
    let ws = Workspace::new(GATED_SPEC);
    let served = serve(&ws, &["--body-timeout", "1s"]);
    let mut stream = connect(&served);
    // Without tokens the Host must name the server with its port.
    let host = served.base.trim_start_matches("http://");
    stream
        .write_all(
            format!(
                "POST /runs HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n\
                 Content-Length: 200\r\n\r\n{{\"input\": "
            )
            .as_bytes(),
        )
        .unwrap();
    // A byte every 100 ms: steady, but the whole body is not there in time.
    let deadline = Instant::now() + GENEROUS;
    let mut answer = None;
    while Instant::now() < deadline && answer.is_none() {
        if stream.write_all(b" ").is_err() {
            break;
        }
        answer = read_response(&mut stream, Duration::from_millis(100));
    }
    let (status, head, body) = answer.expect("a 408 before the body ended");
    assert_eq!(status, 408, "{}", String::from_utf8_lossy(&body));
    assert!(head.contains("content-type: application/json"), "{head}");
    assert!(head.contains("connection: close"), "{head}");
    assert_eq!(code(&body), "request_timeout");
    assert!(closed_within(&mut stream, GENEROUS));
}

#[test]
fn at_the_connection_cap_new_connections_wait_until_one_closes() {
    let ws = Workspace::new(GATED_SPEC);
    let served = serve(
        &ws,
        &[
            "--max-connections",
            "4",
            "--header-timeout",
            "120s",
            "--idle-timeout",
            "120s",
        ],
    );
    // The accept queue is first come, first served: these four hold the cap.
    let mut holders: Vec<TcpStream> = (0..4).map(|_| connect(&served)).collect();
    let mut waiting = connect(&served);
    waiting.write_all(HEALTHZ).unwrap();
    assert!(
        read_response(&mut waiting, Duration::from_millis(1500)).is_none(),
        "a fifth connection was served while four were open"
    );
    holders.pop();
    let (status, _, _) = read_response(&mut waiting, GENEROUS).expect("served once a slot freed");
    assert_eq!(status, 200);
}

#[tokio::test]
async fn idle_sockets_beyond_the_cap_do_not_take_healthz_down() {
    let ws = Workspace::new(GATED_SPEC);
    let served = serve(
        &ws,
        &[
            "--max-connections",
            "8",
            "--header-timeout",
            "1s",
            "--idle-timeout",
            "1s",
        ],
    );
    // Twice the cap of idle sockets, all kept open by the client.
    let _idle: Vec<TcpStream> = (0..16).map(|_| connect(&served)).collect();
    let (status, body) = Api::new().get(&served.url("/healthz")).await;
    assert_eq!(status, 200, "{body}");
}

/// The scenario of the report: an open-file limit of 256 and 300 idle
/// sockets. Accepts fail while the descriptors are used up, the idle ones
/// time out, and /healthz answers again; the server warns at start-up that
/// its cap is above what the limit allows.
#[tokio::test]
async fn with_few_file_descriptors_idle_sockets_do_not_take_healthz_down_for_good() {
    let ws = Workspace::new(GATED_SPEC);
    let state = ws.path().join("state.db");
    let mut child = Command::new("sh")
        .arg("-c")
        .arg("ulimit -n 256 && exec \"$0\" \"$@\"")
        .arg(common::tollgate_bin())
        .arg("serve")
        .arg(&ws.spec)
        .arg("--state")
        .arg(&state)
        .args([
            "--listen",
            "127.0.0.1:0",
            "--header-timeout",
            "1s",
            "--idle-timeout",
            "1s",
        ])
        .env_remove("TOLLGATE_API_TOKENS")
        .env_remove("TOLLGATE_MAX_CONNECTIONS")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn tollgate serve under ulimit");
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    stdout.read_line(&mut line).unwrap();
    let base = line
        .trim()
        .strip_prefix("listening on ")
        .map(str::to_string);
    let Some(base) = base else {
        let _ = child.kill();
        let mut err = String::new();
        let _ = child.stderr.take().unwrap().read_to_string(&mut err);
        panic!("server did not start: {line}\n{err}");
    };
    let idle: Vec<TcpStream> = (0..300).map(|_| connect_to(&base)).collect();
    let (status, body) = Api::new().get(&format!("{base}/healthz")).await;
    drop(idle);
    let _ = child.kill();
    let _ = child.wait();
    let mut logs = String::new();
    let _ = child.stderr.take().unwrap().read_to_string(&mut logs);
    assert_eq!(status, 200, "{body}\n{logs}");
    assert!(logs.contains("open-file limit"), "{logs}");
}

#[test]
fn shutdown_does_not_wait_for_silent_or_idle_connections() {
    let ws = Workspace::new(GATED_SPEC);
    let mut served = serve(
        &ws,
        &[
            "--header-timeout",
            "600s",
            "--idle-timeout",
            "600s",
            "--shutdown-grace",
            "600s",
        ],
    );
    let _silent = connect(&served);
    let mut idle = connect(&served);
    idle.write_all(HEALTHZ).unwrap();
    assert_eq!(read_response(&mut idle, GENEROUS).expect("answer").0, 200);
    let started = Instant::now();
    assert_eq!(served.terminate(), Some(0));
    assert!(
        started.elapsed() < Duration::from_secs(120),
        "shutdown waited {:?} for connections without a request",
        started.elapsed()
    );
}

#[test]
fn heads_hyper_cannot_parse_get_json_errors() {
    let ws = Workspace::new(GATED_SPEC);
    let served = serve(&ws, &[]);

    let mut big = connect(&served);
    let mut head = b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Big: ".to_vec();
    head.extend(std::iter::repeat_n(b'a', 70 * 1024));
    head.extend_from_slice(b"\r\n\r\n");
    let _ = big.write_all(&head);
    let (status, headers, body) = read_response(&mut big, GENEROUS).expect("a 431");
    assert_eq!(status, 431, "{}", String::from_utf8_lossy(&body));
    assert!(
        headers.contains("content-type: application/json"),
        "{headers}"
    );
    assert_eq!(code(&body), "headers_too_large");

    let mut many = connect(&served);
    let mut head = b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n".to_vec();
    for i in 0..150 {
        head.extend_from_slice(format!("X-H{i}: v\r\n").as_bytes());
    }
    head.extend_from_slice(b"\r\n");
    many.write_all(&head).unwrap();
    let (status, _, body) = read_response(&mut many, GENEROUS).expect("a 431");
    assert_eq!(status, 431);
    assert_eq!(code(&body), "headers_too_large");

    let mut garbage = connect(&served);
    garbage
        .write_all(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nno colon here\r\n\r\n")
        .unwrap();
    let (status, headers, body) = read_response(&mut garbage, GENEROUS).expect("a 400");
    assert_eq!(status, 400);
    assert!(
        headers.contains("content-type: application/json"),
        "{headers}"
    );
    assert_eq!(code(&body), "invalid_request");

    // A good request on a fresh connection after all that.
    let mut fine = connect(&served);
    fine.write_all(HEALTHZ).unwrap();
    assert_eq!(read_response(&mut fine, GENEROUS).expect("ok").0, 200);
}

#[test]
fn limits_out_of_range_stop_the_server_at_startup() {
    let ws = Workspace::new(GATED_SPEC);
    for (args, says) in [
        (&["--header-timeout", "0s"][..], "--header-timeout"),
        (&["--body-timeout", "30d"][..], "--body-timeout"),
        (&["--idle-timeout", "soon"][..], "--idle-timeout"),
        (&["--max-connections", "0"][..], "--max-connections"),
    ] {
        let failure = Served::try_start(&ws.spec, &ws.path().join("state.db"), &[], args)
            .err()
            .unwrap_or_else(|| panic!("{args:?} must stop the server"));
        assert_eq!(failure.code, Some(2), "{args:?}: {}", failure.stderr);
        assert!(
            failure.stderr.contains(says),
            "{args:?}: {}",
            failure.stderr
        );
    }
}
