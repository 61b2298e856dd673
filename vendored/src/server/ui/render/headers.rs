//! The headers every inbox response carries.
//!
//! The CSP allows scripts, styles and connections from this origin only,
//! with no `unsafe-inline`: the pages have no inline script, style or event
//! handler, so an injected `<script>` or `onerror=` would not run even if
//! escaping ever failed. `frame-ancestors 'none'` stops clickjacking of the
//! decide buttons. `Referrer-Policy: same-origin`: a signed link is a
//! capability, and must not leak to another site in a Referer header; not
//! `no-referrer`, under which Chromium sends `Origin: null` with the pages'
//! own form POSTs, which server/http/origin.rs rightly refuses (found by
//! tests/it/browser).
//! `Cache-Control: no-store` unless the handler chose otherwise (the
//! content-hashed assets are cached for good).

use axum::extract::Request;
use axum::http::{HeaderMap, HeaderValue, header};
use axum::middleware::Next;
use axum::response::Response;

pub(crate) const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
img-src 'self' data:; connect-src 'self'; form-action 'self'; base-uri 'none'; \
frame-ancestors 'none'";

/// Middleware: [`with_headers`] on every response of the inbox's routes.
pub(crate) async fn secure(request: Request, next: Next) -> Response {
    with_headers(next.run(request).await)
}

pub(crate) fn with_headers(mut response: Response) -> Response {
    set(response.headers_mut());
    response
}

fn set(headers: &mut HeaderMap) {
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CSP),
    );
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    headers.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("same-origin"),
    );
    headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    headers
        .entry(header::CACHE_CONTROL)
        .or_insert(HeaderValue::from_static("no-store"));
}
