//! Host and Origin checks: a web page of another origin must not be able
//! to start, list or decide anything, whatever the auth mode.
//!
//! - `Origin`: a browser sends it with every cross-origin request that can
//!   change state or whose answer the page could read. One that is present
//!   and is not this server's own origin (the request's `Host`, same host
//!   and port, scheme http or https) is refused with 403
//!   `forbidden_origin`; so is `Origin: null` (sandboxed frames, `file:`).
//!   A CORS-simple `text/plain` POST from another site is stopped here.
//! - `Host`, without API tokens only: it must be a name the server is
//!   reachable by on loopback, with the port it listens on: `localhost`,
//!   or the address it is bound to as a browser writes it (`127.0.0.1`,
//!   `[::1]`). DNS rebinding points the attacker's name at 127.0.0.1, so
//!   the page's requests become same-origin, but they still carry that
//!   name as `Host`: 403 `bad_host`. Nothing else passes: no other 127.x
//!   address (the server is not listening there), no IPv4-mapped or
//!   otherwise spelled address (`[::ffff:127.0.0.1]`, `127.1`), no
//!   `*.localhost` or `localhost.` (not every client resolves those
//!   itself; one that asks DNS can be given any address), no empty host
//!   or port, no other port. A router served on a listener of the
//!   program's own ([`crate::server::mount`]) does not know its address: there the
//!   names are `localhost`, `127.0.0.1` and `[::1]`, on any port.
//!
//! `/healthz` and `/readyz` are exempt: they reveal nothing and probes
//! (a load balancer's, an orchestrator's, under any name) must always
//! reach them. Clients that are not browsers (curl, SDKs, Slack, webhooks) send no
//! `Origin` and are unaffected.

use std::net::{IpAddr, SocketAddr};

use axum::Router;
use axum::extract::{Request, State};
use axum::http::uri::Authority;
use axum::http::{HeaderMap, Uri, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};

use crate::service::ApiError;

/// Which checks apply.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Policy {
    /// No API tokens: answer loopback `Host` names only.
    pub loopback_hosts_only: bool,
    /// The address the server listens on, when it bound the listener
    /// itself; None for a router served on a listener of the program's own.
    pub bound: Option<SocketAddr>,
}

/// Paths answered whatever the Host and Origin.
const EXEMPT: [&str; 2] = ["/healthz", "/readyz"];

/// Longest header value quoted back in a refusal.
const QUOTE_MAX: usize = 120;

/// `router` behind the checks (every route, the fallback included).
pub(crate) fn guard(router: Router, policy: Policy) -> Router {
    router.layer(middleware::from_fn_with_state(policy, check_request))
}

async fn check_request(State(policy): State<Policy>, request: Request, next: Next) -> Response {
    if EXEMPT.contains(&request.uri().path()) {
        return next.run(request).await;
    }
    match check(policy, request.uri(), request.headers()) {
        Ok(()) => next.run(request).await,
        Err(refusal) => {
            // A signed link's path is a capability: never logged.
            let path = request.uri().path();
            let path = if path.starts_with("/a/") {
                "/a/..."
            } else {
                path
            };
            tracing::warn!(
                method = %request.method(),
                path = %path,
                reason = %refusal,
                "refused a request from a browser page of another origin or host"
            );
            refusal.into_response()
        }
    }
}

/// A refusal of this module: 403 with its code (see `ApiError::status`).
type Refusal = ApiError;

fn bad_host(message: String) -> Refusal {
    ApiError::BadHost(message)
}

fn forbidden_origin(message: String) -> Refusal {
    ApiError::ForbiddenOrigin(message)
}

fn check(policy: Policy, uri: &Uri, headers: &HeaderMap) -> Result<(), Refusal> {
    let host = request_host(uri, headers)?;
    if policy.loopback_hosts_only {
        let Some(host) = &host else {
            return Err(bad_host(
                "a Host header is required (without API tokens the server answers loopback names only)"
                    .into(),
            ));
        };
        if !is_served_loopback_host(host, policy.bound) {
            return Err(bad_host(format!(
                "Host {} is not a name this server answers: without API tokens it answers only {} \
                 (set TOLLGATE_API_TOKENS to serve other names)",
                quote(host.as_str()),
                served_names(policy.bound)
            )));
        }
    }
    let mut origins = headers.get_all(header::ORIGIN).iter();
    let Some(origin) = origins.next() else {
        return Ok(());
    };
    if origins.next().is_some() {
        return Err(forbidden_origin("more than one Origin header".into()));
    }
    let Ok(origin) = origin.to_str() else {
        return Err(forbidden_origin("the Origin header is not ASCII".into()));
    };
    let refuse = || {
        forbidden_origin(format!(
            "cross-origin requests are refused: Origin {} is not this server's origin{}",
            quote(origin),
            match &host {
                Some(host) => format!(" (Host {})", quote(host.as_str())),
                None => " (the request has no Host)".to_string(),
            }
        ))
    };
    match &host {
        Some(host) if same_origin(origin, host) => Ok(()),
        _ => Err(refuse()),
    }
}

/// The authority the request is addressed to: the absolute-form URI's if
/// any (it wins over Host, RFC 9112 §3.2.2), else the single Host header.
fn request_host(uri: &Uri, headers: &HeaderMap) -> Result<Option<Authority>, Refusal> {
    if let Some(authority) = uri.authority() {
        return checked_authority(authority.as_str()).map(Some);
    }
    let mut hosts = headers.get_all(header::HOST).iter();
    let Some(host) = hosts.next() else {
        return Ok(None);
    };
    if hosts.next().is_some() {
        return Err(bad_host("more than one Host header".into()));
    }
    let host = host
        .to_str()
        .map_err(|_| bad_host("the Host header is not ASCII".into()))?;
    checked_authority(host).map(Some)
}

/// `host[:port]`, without user info (never valid in Host).
fn checked_authority(text: &str) -> Result<Authority, Refusal> {
    let malformed = || bad_host(format!("Host {} is not host[:port]", quote(text)));
    if text.is_empty() || text.contains('@') {
        return Err(malformed());
    }
    text.parse::<Authority>().map_err(|_| malformed())
}

/// `host` names this server on loopback: `localhost` (RFC 6761: resolved
/// to loopback by the client itself, so no DNS answer can point it
/// elsewhere) or the loopback address it is bound to, written as a browser
/// writes it (an address cannot be rebound), with the port it listens on.
/// Unbound (`bound` None): `localhost`, `127.0.0.1` or `[::1]`, any port.
fn is_served_loopback_host(host: &Authority, bound: Option<SocketAddr>) -> bool {
    // `localhost:` parses, with no port: an empty port is no port we serve.
    if host.as_str().ends_with(':') {
        return false;
    }
    let name = host.host();
    let Some(bound) = bound else {
        return name.eq_ignore_ascii_case("localhost") || name == "127.0.0.1" || name == "[::1]";
    };
    let named = name.eq_ignore_ascii_case("localhost") || name == address_name(bound.ip());
    // No port in Host means the scheme's default; TLS is not served here.
    named && host.port_u16().unwrap_or(80) == bound.port()
}

/// An address as it appears in a URL's host: `127.0.0.1`, `[::1]`.
fn address_name(ip: IpAddr) -> String {
    match ip {
        IpAddr::V4(v4) => v4.to_string(),
        IpAddr::V6(v6) => format!("[{v6}]"),
    }
}

/// The `Host` values a refusal suggests.
fn served_names(bound: Option<SocketAddr>) -> String {
    match bound {
        Some(bound) => format!(
            "localhost:{port} and {}:{port}",
            address_name(bound.ip()),
            port = bound.port()
        ),
        None => "localhost, 127.0.0.1 and [::1]".to_string(),
    }
}

/// `origin` (`scheme://host[:port]`) names the same host and port as
/// `host`. The scheme may be http or https: TLS may end in front of the
/// server, so the server cannot tell which one its clients see; a port
/// left out is that scheme's default on both sides.
fn same_origin(origin: &str, host: &Authority) -> bool {
    let Some((scheme, rest)) = origin.split_once("://") else {
        return false;
    };
    let default_port = match scheme.to_ascii_lowercase().as_str() {
        "http" => 80,
        "https" => 443,
        _ => return false,
    };
    if rest.is_empty() || rest.contains(['/', '@', '?', '#']) {
        return false;
    }
    let Ok(origin) = rest.parse::<Authority>() else {
        return false;
    };
    let same_name = origin
        .host()
        .trim_end_matches('.')
        .eq_ignore_ascii_case(host.host().trim_end_matches('.'));
    same_name
        && origin.port_u16().unwrap_or(default_port) == host.port_u16().unwrap_or(default_port)
}

/// A header value as quoted in a message: JSON-style, cut short.
fn quote(value: &str) -> String {
    let cut: String = value.chars().take(QUOTE_MAX).collect();
    if cut.len() < value.len() {
        format!("{cut:?}...")
    } else {
        format!("{cut:?}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn host(text: &str) -> Authority {
        text.parse().unwrap()
    }

    #[test]
    fn loopback_names_are_the_ones_served_with_the_bound_port() {
        let v4: SocketAddr = "127.0.0.1:8080".parse().unwrap();
        let v6: SocketAddr = "[::1]:8080".parse().unwrap();
        let other: SocketAddr = "127.0.0.2:8080".parse().unwrap();
        for (bound, name) in [
            (v4, "localhost:8080"),
            (v4, "LocalHost:8080"),
            (v4, "127.0.0.1:8080"),
            (v6, "localhost:8080"),
            (v6, "[::1]:8080"),
            (other, "127.0.0.2:8080"),
            (other, "localhost:8080"),
        ] {
            assert!(
                is_served_loopback_host(&host(name), Some(bound)),
                "{bound} {name}"
            );
        }
        let port_80: SocketAddr = "127.0.0.1:80".parse().unwrap();
        assert!(is_served_loopback_host(&host("localhost"), Some(port_80)));
        assert!(is_served_loopback_host(
            &host("127.0.0.1:80"),
            Some(port_80)
        ));
        for (bound, name) in [
            (v4, "127.0.0.2:8080"),
            (v4, "127.8.9.10:8080"),
            (v4, "[::1]:8080"),
            (v4, "[::ffff:127.0.0.1]:8080"),
            (v4, "[0:0:0:0:0:0:0:1]:8080"),
            (v4, "127.1:8080"),
            (v4, "2130706433:8080"),
            (v4, "localhost.:8080"),
            (v4, "app.localhost:8080"),
            (v4, "localhost.evil.com:8080"),
            (v4, "127.0.0.1.nip.io:8080"),
            (v4, "evil.com:8080"),
            (v4, "0.0.0.0:8080"),
            (v4, "localhost:8081"),
            (v4, "localhost"),
            (v4, "localhost:"),
            (v4, "127.0.0.1:"),
            (v6, "127.0.0.1:8080"),
            (other, "127.0.0.1:8080"),
        ] {
            assert!(
                !is_served_loopback_host(&host(name), Some(bound)),
                "{bound} {name}"
            );
        }
        // Unbound: the three names on any port, nothing else.
        for name in ["localhost:1", "127.0.0.1:9", "[::1]:443", "localhost"] {
            assert!(is_served_loopback_host(&host(name), None), "{name}");
        }
        for name in [
            "127.0.0.2:9",
            "[::ffff:127.0.0.1]:9",
            "x.localhost:9",
            "localhost:",
        ] {
            assert!(!is_served_loopback_host(&host(name), None), "{name}");
        }
    }

    #[test]
    fn same_origin_compares_host_and_port() {
        let h = host("127.0.0.1:8080");
        assert!(same_origin("http://127.0.0.1:8080", &h));
        assert!(same_origin("https://127.0.0.1:8080", &h));
        assert!(!same_origin("http://127.0.0.1:8081", &h));
        assert!(!same_origin("http://127.0.0.1", &h));
        assert!(!same_origin("http://localhost:8080", &h));
        assert!(!same_origin("null", &h));
        assert!(!same_origin("file://127.0.0.1:8080", &h));
        assert!(!same_origin("http://127.0.0.1:8080/path", &h));
        assert!(!same_origin("http://user@127.0.0.1:8080", &h));
        let public = host("Approvals.Example.com");
        assert!(same_origin("https://approvals.example.com", &public));
        assert!(same_origin("http://approvals.example.com:80", &public));
        assert!(!same_origin("https://approvals.example.com:8443", &public));
        assert!(!same_origin("https://example.com", &public));
    }

    #[test]
    fn quotes_are_bounded() {
        let long = "a".repeat(1000);
        assert!(quote(&long).len() < 200);
        assert_eq!(quote("x\"y"), "\"x\\\"y\"");
    }
}
