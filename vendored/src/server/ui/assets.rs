//! The stylesheet and the script, embedded, served from /ui/assets/ with
//! their content hash in the URL (`?v=HASH`) and as the ETag, and cached
//! for a year: a new build changes the hash, so the pages ask for the new
//! file.

use std::sync::OnceLock;

use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use sha2::{Digest, Sha256};

use crate::server::http::extract::PathParam;

const CSS: &str = include_str!("assets/app.css");
const JS: &str = include_str!("assets/app.js");

struct Asset {
    body: &'static str,
    content_type: &'static str,
    /// The first 16 hex digits of the body's SHA-256.
    hash: String,
    url: String,
}

fn asset(name: &str, body: &'static str, content_type: &'static str) -> Asset {
    let hash = crate::support::hex::encode(&Sha256::digest(body.as_bytes())[..8]);
    Asset {
        body,
        content_type,
        url: format!("/ui/assets/{name}?v={hash}"),
        hash,
    }
}

fn css() -> &'static Asset {
    static CELL: OnceLock<Asset> = OnceLock::new();
    CELL.get_or_init(|| asset("app.css", CSS, "text/css; charset=utf-8"))
}

fn js() -> &'static Asset {
    static CELL: OnceLock<Asset> = OnceLock::new();
    CELL.get_or_init(|| asset("app.js", JS, "text/javascript; charset=utf-8"))
}

pub(crate) fn css_url() -> &'static str {
    &css().url
}

pub(crate) fn js_url() -> &'static str {
    &js().url
}

/// GET /ui/assets/{file}.
pub(super) async fn serve(PathParam(file): PathParam, headers: HeaderMap) -> Response {
    let asset = match file.as_str() {
        "app.css" => css(),
        "app.js" => js(),
        _ => return super::pages::refusal::not_found(),
    };
    let etag = format!("\"{}\"", asset.hash);
    let cache = HeaderValue::from_static("public, max-age=31536000, immutable");
    let matches = headers
        .get(header::IF_NONE_MATCH)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.split(',').any(|t| t.trim() == etag));
    let etag = HeaderValue::from_str(&etag).expect("hex is a valid header value");
    if matches {
        return (
            StatusCode::NOT_MODIFIED,
            [(header::ETAG, etag), (header::CACHE_CONTROL, cache)],
        )
            .into_response();
    }
    (
        [
            (
                header::CONTENT_TYPE,
                HeaderValue::from_static(asset.content_type),
            ),
            (header::ETAG, etag),
            (header::CACHE_CONTROL, cache),
        ],
        asset.body,
    )
        .into_response()
}
