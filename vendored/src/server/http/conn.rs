//! The connection layer: the accept loop, its limits and timeouts.
//!
//! `axum::serve` holds every socket for as long as the client likes, so
//! slow or idle clients could use up the connections (or the process's
//! file descriptors) and take the server down. Here hyper serves each
//! connection, and a watchdog closes it when the client is too slow:
//!
//! - header timeout: a request's line and headers must arrive within it,
//!   counted from the connection's start (first request) or from the
//!   request's first byte (later requests on a kept-alive connection);
//! - idle timeout: how long a kept-alive connection may sit between a
//!   response and the next request's first byte;
//! - body timeout: a request's whole body must arrive within it, counted
//!   from the end of its headers; a late body gets 408 `request_timeout`;
//! - connection limit: at the cap the loop stops accepting, so new
//!   connections wait in the listen backlog until one closes.
//!
//! A response in progress is never timed out: event streams stay open as
//! long as their run lasts.
//!
//! Why a watchdog and a timed body rather than what hyper and tower-http
//! offer (both are in the tree):
//!
//! - hyper's http1 `header_read_timeout` starts when hyper begins reading
//!   a head, which on a kept-alive connection is right after the previous
//!   response: it would close an idle connection at the header timeout,
//!   not the idle one (tests/it/server/connection_limits.rs:
//!   `a_kept_alive_connection_may_wait_longer_than_the_header_timeout`),
//!   and it has no idle timeout of its own. So it is off, and the watchdog
//!   times heads and idle time together.
//! - tower-http's `RequestBodyTimeoutLayer` (feature `timeout`) limits the
//!   wait for each frame, restarting after every one: a body trickled a
//!   byte at a time never times out, and its error reaches the handler
//!   rather than becoming a 408 with `connection: close`
//!   (`a_body_that_arrives_too_slowly_gets_408_and_the_connection_closes`).
//!   [`TimedBody`] holds the whole body to one deadline instead.
//!
//! hyper answers requests it cannot parse itself (400, 414, 431, with an
//! empty body). The socket wrapper recognises those answers (they are the
//! only bytes hyper writes before it has handed a request over) and sends
//! the API's JSON error shape instead.

use std::convert::Infallible;
use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::task::{Context, Poll, ready};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::http::{HeaderValue, Request, Response, header};
use axum::response::IntoResponse;
use hyper::body::{Body as HttpBody, Bytes, Frame, Incoming, SizeHint};
use hyper::server::conn::http1;
use hyper::service::Service;
use hyper_util::rt::TokioIo;
use hyper_util::service::TowerToHyperService;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Semaphore, mpsc, watch};
use tokio::time::{Instant, Sleep};

use crate::service::ApiError;
use crate::support::env;

/// Default time for a request's line and headers.
pub const DEFAULT_HEADER_TIMEOUT: Duration = Duration::from_secs(10);
/// Default time for a request's body, from the end of its headers.
pub const DEFAULT_BODY_TIMEOUT: Duration = Duration::from_secs(30);
/// Default time a kept-alive connection may wait for its next request.
pub const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(60);
/// Default most connections open at once.
pub const DEFAULT_MAX_CONNECTIONS: usize = 1024;
/// Longest timeout accepted: longer ones are almost certainly a typo.
pub const MAX_TIMEOUT: Duration = Duration::from_secs(24 * 3600);
/// Largest request line plus headers (431 `headers_too_large` beyond).
pub const MAX_HEAD_BYTES: usize = 64 * 1024;
/// Most header fields in one request (431 `headers_too_large` beyond).
pub const MAX_HEADERS: usize = 100;

/// After the server's last byte: how long, and how much, of what the
/// client still sends is read and dropped before the socket closes, so
/// the answer is not lost to a reset (lingering close, as in nginx).
const LINGER_TIME: Duration = Duration::from_secs(2);
const LINGER_BYTES: usize = 256 * 1024;
/// After an accept error (out of file descriptors): wait before retrying.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(250);
/// File descriptors the process needs besides its connections (the store,
/// its WAL, outgoing calls, the runtime).
const FD_RESERVE: u64 = 64;

/// The connection limits of a server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    pub header_timeout: Duration,
    pub body_timeout: Duration,
    pub idle_timeout: Duration,
    pub max_connections: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            header_timeout: DEFAULT_HEADER_TIMEOUT,
            body_timeout: DEFAULT_BODY_TIMEOUT,
            idle_timeout: DEFAULT_IDLE_TIMEOUT,
            max_connections: DEFAULT_MAX_CONNECTIONS,
        }
    }
}

impl Limits {
    /// Every problem with these limits, one message each (empty: fine).
    pub fn problems(&self) -> Vec<String> {
        let mut problems = Vec::new();
        for (flag, var, value) in [
            ("--header-timeout", env::HEADER_TIMEOUT, self.header_timeout),
            ("--body-timeout", env::BODY_TIMEOUT, self.body_timeout),
            ("--idle-timeout", env::IDLE_TIMEOUT, self.idle_timeout),
        ] {
            if value < Duration::from_millis(1) || value > MAX_TIMEOUT {
                problems.push(format!(
                    "{flag} ({var}) must be between 1ms and 24h, found {value:?}"
                ));
            }
        }
        if self.max_connections == 0 || self.max_connections > Semaphore::MAX_PERMITS {
            problems.push(format!(
                "--max-connections ({}) must be between 1 and {}, found {}",
                env::MAX_CONNECTIONS,
                Semaphore::MAX_PERMITS,
                self.max_connections
            ));
        }
        problems
    }
}

/// Serve `app` on `listener` until `stop` turns true, then stop accepting,
/// let requests in progress finish and return once every connection has
/// closed.
pub(crate) async fn serve(
    listener: TcpListener,
    app: Router,
    limits: Limits,
    mut stop: watch::Receiver<bool>,
) -> io::Result<()> {
    warn_if_above_open_file_limit(limits.max_connections);
    let slots = Arc::new(Semaphore::new(limits.max_connections));
    // Every connection task holds a sender; recv() answers None once all
    // are gone.
    let (open_tx, mut open_rx) = mpsc::channel::<()>(1);
    let mut http = http1::Builder::new();
    http.max_buf_size(MAX_HEAD_BYTES)
        .max_header_size(MAX_HEAD_BYTES)
        .max_headers(MAX_HEADERS)
        // The watchdog times heads; hyper's own timer would count idle
        // time as header time (see the module comment).
        .header_read_timeout(None)
        // One buffer per write, so hyper's own error answers can be
        // recognised (see `Socket::poll_write`).
        .writev(false);
    let service = TowerToHyperService::new(app);
    loop {
        // A slot first: at the cap, new connections wait in the backlog.
        let slot = tokio::select! {
            slot = Arc::clone(&slots).acquire_owned() => slot,
            _ = stop.wait_for(|stopping| *stopping) => break,
        };
        let Ok(slot) = slot else { break };
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            _ = stop.wait_for(|stopping| *stopping) => break,
        };
        let stream = match accepted {
            Ok(accepted) => accepted,
            Err(e) if is_connection_error(&e) => continue,
            Err(e) => {
                // EMFILE and the like: retrying at once would spin.
                tracing::warn!(error = %e, "cannot accept a connection; retrying shortly");
                tokio::time::sleep(ACCEPT_BACKOFF).await;
                continue;
            }
        };
        let (stream, peer) = stream;
        let _ = stream.set_nodelay(true);
        let connection = Connection {
            http: http.clone(),
            service: service.clone(),
            limits,
            stop: stop.clone(),
        };
        let open = open_tx.clone();
        tokio::spawn(async move {
            connection.run(stream, peer).await;
            drop(slot);
            drop(open);
        });
    }
    drop(listener);
    drop(open_tx);
    let _ = open_rx.recv().await;
    Ok(())
}

/// The cap only protects the server if accepting up to it cannot run out
/// of file descriptors; past the limit, accepts fail (and are retried)
/// until connections close.
fn warn_if_above_open_file_limit(max_connections: usize) {
    let Some(limit) = open_file_limit() else {
        return;
    };
    let wanted = (max_connections as u64).saturating_add(FD_RESERVE);
    if wanted > limit {
        tracing::warn!(
            max_connections,
            open_file_limit = limit,
            "the connection cap is above what the open-file limit (ulimit -n) leaves for connections: \
             past it new connections fail until others close; lower --max-connections below {} or raise the limit",
            limit.saturating_sub(FD_RESERVE).max(1)
        );
    }
}

/// The soft limit on open files, where the system tells it without a
/// system call crate (Linux: /proc/self/limits); None if unknown or
/// unlimited.
#[expect(
    clippy::disallowed_methods,
    reason = "reads a /proc file, never a database file"
)]
fn open_file_limit() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/self/limits").ok()?;
    let line = text.lines().find(|l| l.starts_with("Max open files"))?;
    line.get("Max open files".len()..)?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// Errors about one connection that went away before it was accepted.
fn is_connection_error(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::ConnectionRefused
            | io::ErrorKind::ConnectionAborted
            | io::ErrorKind::ConnectionReset
    )
}

struct Connection {
    http: http1::Builder,
    service: TowerToHyperService<Router>,
    limits: Limits,
    stop: watch::Receiver<bool>,
}

impl Connection {
    async fn run(mut self, stream: TcpStream, peer: SocketAddr) {
        let tracker = Arc::new(Tracker::new());
        let socket = Socket::new(stream, Arc::clone(&tracker));
        let service = Dispatch {
            inner: self.service,
            tracker: Arc::clone(&tracker),
            body_timeout: self.limits.body_timeout,
            peer,
        };
        let conn = self.http.serve_connection(TokioIo::new(socket), service);
        tokio::pin!(conn);
        let mut stopping = false;
        loop {
            tokio::select! {
                served = conn.as_mut() => {
                    if let Err(e) = served {
                        tracing::debug!(error = %e, "connection ended with an error");
                    }
                    return;
                }
                why = tracker.expired(&self.limits) => {
                    tracing::debug!(timeout = why, "closing a slow or idle connection");
                    return;
                }
                _ = self.stop.wait_for(|stopping| *stopping), if !stopping => {
                    stopping = true;
                    if tracker.is_waiting() {
                        // Nothing of a request yet: close now rather than
                        // hold the shutdown for a request that may never come.
                        return;
                    }
                    conn.as_mut().graceful_shutdown();
                }
            }
        }
    }
}

/// Where a connection is in its request cycle.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Accepted, nothing received yet (the header timeout runs).
    Fresh(Instant),
    /// A request's head is arriving (the header timeout runs).
    Head(Instant),
    /// A request was handed to the router and its response is not
    /// finished: no connection timeout (the body has its own).
    Busy,
    /// Between a response and the next request's first byte.
    Idle(Instant),
}

/// A connection's phase, shared by its socket, its requests and its watchdog.
struct Tracker {
    phase: watch::Sender<Phase>,
    in_flight: AtomicUsize,
    /// From a request's start until its response is flushed: bytes read
    /// meanwhile (a pipelined request) do not start a header timer, and
    /// what hyper writes is that response, never a parse-error answer.
    answering: AtomicBool,
}

impl Tracker {
    fn new() -> Tracker {
        Tracker {
            phase: watch::Sender::new(Phase::Fresh(Instant::now())),
            in_flight: AtomicUsize::new(0),
            answering: AtomicBool::new(false),
        }
    }

    /// Bytes arrived: on an idle connection, a new request has begun.
    fn bytes_received(&self) {
        if self.answering.load(Ordering::SeqCst) {
            return;
        }
        self.phase.send_if_modified(|phase| match *phase {
            Phase::Fresh(since) => {
                *phase = Phase::Head(since);
                true
            }
            Phase::Idle(_) => {
                *phase = Phase::Head(Instant::now());
                true
            }
            Phase::Head(_) | Phase::Busy => false,
        });
    }

    fn request_started(&self) {
        self.answering.store(true, Ordering::SeqCst);
        self.in_flight.fetch_add(1, Ordering::SeqCst);
        self.phase.send_replace(Phase::Busy);
    }

    fn request_finished(&self) {
        if self.in_flight.fetch_sub(1, Ordering::SeqCst) == 1 {
            self.phase.send_replace(Phase::Idle(Instant::now()));
        }
    }

    /// Everything written so far is flushed: once no request is in
    /// progress, the last response is out.
    fn flushed(&self) {
        if !matches!(*self.phase.borrow(), Phase::Busy) {
            self.answering.store(false, Ordering::SeqCst);
        }
    }

    /// True while no request has been handed over since the last response
    /// went out: whatever hyper writes now is its own answer to a head it
    /// could not parse.
    fn in_head(&self) -> bool {
        !self.answering.load(Ordering::SeqCst)
            && matches!(*self.phase.borrow(), Phase::Fresh(_) | Phase::Head(_))
    }

    /// True when no byte of a request is pending.
    fn is_waiting(&self) -> bool {
        matches!(*self.phase.borrow(), Phase::Fresh(_) | Phase::Idle(_))
    }

    /// Resolves when the connection has overstayed its current phase, with
    /// the name of the timeout.
    async fn expired(&self, limits: &Limits) -> &'static str {
        let mut phase = self.phase.subscribe();
        loop {
            let current = *phase.borrow_and_update();
            let (since, limit, name) = match current {
                Phase::Fresh(since) | Phase::Head(since) => {
                    (since, limits.header_timeout, "header")
                }
                Phase::Idle(since) => (since, limits.idle_timeout, "idle"),
                Phase::Busy => {
                    if phase.changed().await.is_err() {
                        return std::future::pending().await;
                    }
                    continue;
                }
            };
            // Limits are bounded (`Limits::problems`); checked anyway.
            let Some(deadline) = since.checked_add(limit) else {
                return std::future::pending().await;
            };
            tokio::select! {
                _ = tokio::time::sleep_until(deadline) => {
                    if *phase.borrow() == current {
                        return name;
                    }
                }
                changed = phase.changed() => {
                    if changed.is_err() {
                        return std::future::pending().await;
                    }
                }
            }
        }
    }
}

/// Marks a request finished when its response body is done or dropped.
struct InFlight(Arc<Tracker>);

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.request_finished();
    }
}

/// The hyper service: times the request body, tracks the response.
#[derive(Clone)]
struct Dispatch {
    inner: TowerToHyperService<Router>,
    tracker: Arc<Tracker>,
    body_timeout: Duration,
    /// The client's address, for the throttles (server/http/throttle.rs), as
    /// axum's `ConnectInfo` would carry it.
    peer: SocketAddr,
}

impl Service<Request<Incoming>> for Dispatch {
    type Response = Response<Body>;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Response<Body>, Infallible>> + Send>>;

    fn call(&self, request: Request<Incoming>) -> Self::Future {
        self.tracker.request_started();
        let in_flight = InFlight(Arc::clone(&self.tracker));
        let late = Arc::new(AtomicBool::new(false));
        let timeout = self.body_timeout;
        let mut request = request.map(|body| {
            Body::new(TimedBody {
                inner: body,
                started: Instant::now(),
                timeout,
                timer: None,
                late: Arc::clone(&late),
            })
        });
        request
            .extensions_mut()
            .insert(axum::extract::ConnectInfo(self.peer));
        let response = self.inner.call(request);
        Box::pin(async move {
            let response = match response.await {
                Ok(response) => response,
                Err(never) => match never {},
            };
            let response = if late.load(Ordering::SeqCst) {
                // Whatever the handler made of the failed read, the answer
                // is the timeout; the rest of the body is not waited for.
                let mut answer = ApiError::BodyTimeout {
                    after: describe(timeout),
                }
                .into_response();
                answer
                    .headers_mut()
                    .insert(header::CONNECTION, HeaderValue::from_static("close"));
                answer
            } else {
                response
            };
            Ok(response.map(|body| {
                Body::new(TrackedBody {
                    inner: body,
                    _in_flight: in_flight,
                })
            }))
        })
    }
}

/// `10s`, `1500ms`: a duration as the flags take it.
fn describe(d: Duration) -> String {
    if d.subsec_millis() == 0 {
        format!("{}s", d.as_secs())
    } else {
        format!("{}ms", d.as_millis())
    }
}

/// The request body, failing once `timeout` has passed since the request
/// started and more is still awaited.
struct TimedBody {
    inner: Incoming,
    started: Instant,
    timeout: Duration,
    /// Armed on the first wait, so a body that is already there costs no timer.
    timer: Option<Pin<Box<Sleep>>>,
    late: Arc<AtomicBool>,
}

/// The error a late body reads as.
#[derive(Debug, thiserror::Error)]
#[error("the request body did not arrive in time")]
struct BodyTimedOut;

impl HttpBody for TimedBody {
    type Data = Bytes;
    type Error = axum::BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::BoxError>>> {
        let this = &mut *self;
        if let Poll::Ready(frame) = Pin::new(&mut this.inner).poll_frame(cx) {
            return Poll::Ready(frame.map(|f| f.map_err(Into::into)));
        }
        let deadline = this
            .started
            .checked_add(this.timeout)
            .unwrap_or_else(|| Instant::now() + MAX_TIMEOUT);
        let timer = this
            .timer
            .get_or_insert_with(|| Box::pin(tokio::time::sleep_until(deadline)));
        ready!(timer.as_mut().poll(cx));
        this.late.store(true, Ordering::SeqCst);
        Poll::Ready(Some(Err(BodyTimedOut.into())))
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// The response body, marking its request finished once dropped (hyper
/// drops it when the last byte is written, or when the client goes away).
struct TrackedBody {
    inner: Body,
    _in_flight: InFlight,
}

impl HttpBody for TrackedBody {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        Pin::new(&mut self.inner).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// hyper's own answer to a head it could not parse, as the API's JSON
/// error: its status, a code and what to change.
fn parse_error_answer(written: &[u8]) -> Option<Vec<u8>> {
    let status = written.strip_prefix(b"HTTP/1.1 ")?.get(..3)?;
    // Which of hyper's refusals this is; its status and code are the API's.
    let error = match status {
        b"400" => ApiError::MalformedHead,
        b"414" => ApiError::UriTooLong,
        b"431" => ApiError::HeadersTooLarge {
            max_bytes: MAX_HEAD_BYTES,
            max_headers: MAX_HEADERS,
        },
        _ => return None,
    };
    let status = error.status();
    let body = error.body().to_string();
    let head = format!(
        "HTTP/1.1 {} {}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
        status.as_str(),
        status.canonical_reason().unwrap_or(""),
        body.len()
    );
    let mut bytes = head.into_bytes();
    bytes.extend_from_slice(body.as_bytes());
    Some(bytes)
}

/// What the socket does with hyper's writes.
enum Output {
    /// Passed through.
    Normal,
    /// hyper answered an unparsable head: the JSON answer goes out instead.
    Replacing { answer: Vec<u8>, sent: usize },
    /// The JSON answer is out; whatever hyper still writes is dropped.
    Replaced,
}

/// The TCP stream as hyper sees it: reports arriving bytes to the tracker,
/// swaps hyper's empty error answers for JSON ones, and lingers on close.
struct Socket {
    stream: TcpStream,
    tracker: Arc<Tracker>,
    output: Output,
    linger: Option<Linger>,
}

struct Linger {
    timer: Pin<Box<Sleep>>,
    drained: usize,
}

impl Socket {
    fn new(stream: TcpStream, tracker: Arc<Tracker>) -> Socket {
        Socket {
            stream,
            tracker,
            output: Output::Normal,
            linger: None,
        }
    }
}

impl AsyncRead for Socket {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        ready!(Pin::new(&mut self.stream).poll_read(cx, buf))?;
        if buf.filled().len() > before {
            self.tracker.bytes_received();
        }
        Poll::Ready(Ok(()))
    }
}

impl AsyncWrite for Socket {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = &mut *self;
        loop {
            match &mut this.output {
                Output::Normal => {
                    if this.tracker.in_head() {
                        if let Some(answer) = parse_error_answer(buf) {
                            this.output = Output::Replacing { answer, sent: 0 };
                            continue;
                        }
                    }
                    let n = ready!(Pin::new(&mut this.stream).poll_write(cx, buf))?;
                    return Poll::Ready(Ok(n));
                }
                Output::Replacing { answer, sent } => {
                    while *sent < answer.len() {
                        let n =
                            ready!(Pin::new(&mut this.stream).poll_write(cx, &answer[*sent..]))?;
                        if n == 0 {
                            return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
                        }
                        *sent += n;
                    }
                    this.output = Output::Replaced;
                    return Poll::Ready(Ok(buf.len()));
                }
                Output::Replaced => return Poll::Ready(Ok(buf.len())),
            }
        }
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        ready!(Pin::new(&mut self.stream).poll_flush(cx))?;
        self.tracker.flushed();
        Poll::Ready(Ok(()))
    }

    /// Send FIN, then read and drop what the client still sends (bounded),
    /// so a final answer is not wiped out by a reset over unread bytes.
    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = &mut *self;
        if this.linger.is_none() {
            ready!(Pin::new(&mut this.stream).poll_shutdown(cx))?;
            this.linger = Some(Linger {
                timer: Box::pin(tokio::time::sleep(LINGER_TIME)),
                drained: 0,
            });
        }
        let Some(linger) = this.linger.as_mut() else {
            return Poll::Ready(Ok(()));
        };
        let mut scratch = [0u8; 4096];
        while linger.drained < LINGER_BYTES {
            let mut buf = ReadBuf::new(&mut scratch);
            match Pin::new(&mut this.stream).poll_read(cx, &mut buf) {
                Poll::Ready(Ok(())) if buf.filled().is_empty() => return Poll::Ready(Ok(())),
                Poll::Ready(Ok(())) => linger.drained += buf.filled().len(),
                Poll::Ready(Err(_)) => return Poll::Ready(Ok(())),
                Poll::Pending => {
                    ready!(linger.timer.as_mut().poll(cx));
                    return Poll::Ready(Ok(()));
                }
            }
        }
        Poll::Ready(Ok(()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hypers_parse_errors_become_json() {
        let answer = parse_error_answer(
            b"HTTP/1.1 431 Request Header Fields Too Large\r\ncontent-length: 0\r\n\r\n",
        )
        .expect("recognised");
        let text = String::from_utf8(answer).unwrap();
        assert!(
            text.starts_with("HTTP/1.1 431 Request Header Fields Too Large\r\n"),
            "{text}"
        );
        let (_, body) = text.split_once("\r\n\r\n").unwrap();
        let body: serde_json::Value = serde_json::from_str(body).unwrap();
        assert_eq!(body["error"]["code"], "headers_too_large");
        assert!(parse_error_answer(b"HTTP/1.1 200 OK\r\n").is_none());
        assert!(parse_error_answer(b"HTTP/1.1 4").is_none());
    }

    #[test]
    fn limits_are_bounded() {
        assert!(Limits::default().problems().is_empty());
        let bad = Limits {
            header_timeout: Duration::ZERO,
            body_timeout: Duration::from_secs(u64::MAX),
            idle_timeout: Duration::from_secs(1),
            max_connections: 0,
        };
        let problems = bad.problems();
        assert_eq!(problems.len(), 3, "{problems:?}");
        assert!(problems[0].contains("--header-timeout"));
        assert!(problems[1].contains("--body-timeout"));
        assert!(problems[2].contains("--max-connections"));
    }
}
