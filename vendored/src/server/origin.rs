//! Host and Origin checks: a web page of another origin must not be able
//! to start, list or decide anything, whatever the auth mode.
//!
//! - `Origin`: a browser sends it with every cross-origin request that can
//!   change state or whose answer the page could read. One that is present
//!   and is not this server's own origin (the request's `Host`, same host
//!   and port, scheme http or https) is refused with 403
//!   `forbidden_origin`; so is `Origin: null` (sandboxed frames, `file:`).
//!   A CORS-simple `text/plain` POST from another site is stopped here.
//! - `Host`, without API tokens only: it must be a loopback name
//!   (`localhost`, `*.localhost`, `127.0.0.1` or any 127.x address,
//!   `[::1]`; any port). DNS rebinding points the attacker's name at
//!   127.0.0.1, so the page's requests become same-origin, but they still
//!   carry that name as `Host`: 403 `bad_host`.
//!
//! `/healthz` and `/readyz` are exempt: they reveal nothing and probes
//! (a load balancer's, an orchestrator's, under any name) must always
//! reach them. Clients that are not browsers (curl, SDKs, Slack, webhooks) send no
//! `Origin` and are unaffected.

use std::net::{Ipv4Addr, Ipv6Addr};

use axum::Router;
use axum::extract::{Request, State};
use axum::http::uri::Authority;
use axum::http::{HeaderMap, Uri, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};

use super::error::ApiError;

/// Which checks apply.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Policy {
    /// No API tokens: answer loopback `Host` names only.
    pub loopback_hosts_only: bool,
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
        if !is_loopback_host(host.host()) {
            return Err(bad_host(format!(
                "Host {} is not a loopback name: without API tokens the server answers only \
                 localhost, *.localhost, 127.0.0.1 and [::1] (set TOLLGATE_API_TOKENS to serve other names)",
                quote(host.as_str())
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

/// localhost, *.localhost (RFC 6761: browsers resolve these to loopback
/// themselves, so no DNS answer can point them elsewhere), and loopback
/// address literals (an address cannot be rebound).
fn is_loopback_host(host: &str) -> bool {
    let name = host.strip_suffix('.').unwrap_or(host).to_ascii_lowercase();
    if let Some(v6) = name.strip_prefix('[').and_then(|n| n.strip_suffix(']')) {
        return v6.parse::<Ipv6Addr>().is_ok_and(|ip| {
            ip.is_loopback() || ip.to_ipv4_mapped().is_some_and(|v4| v4.is_loopback())
        });
    }
    if let Ok(ip) = name.parse::<Ipv4Addr>() {
        return ip.is_loopback();
    }
    name == "localhost" || name.ends_with(".localhost")
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
    fn loopback_names() {
        for name in [
            "localhost",
            "LOCALHOST",
            "localhost.",
            "app.localhost",
            "127.0.0.1",
            "127.8.9.10",
            "[::1]",
            "[::ffff:127.0.0.1]",
        ] {
            assert!(is_loopback_host(name), "{name}");
        }
        for name in [
            "evil.com",
            "localhost.evil.com",
            "127.0.0.1.nip.io",
            "0.0.0.0",
            "10.0.0.1",
            "[::]",
            "[fe80::1]",
            "127.1",
            "",
        ] {
            assert!(!is_loopback_host(name), "{name}");
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
