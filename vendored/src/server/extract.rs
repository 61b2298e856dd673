//! Request extractors whose failures are `ApiError`s, so a bad body, query
//! or path gets the same JSON error shape as everything else (axum's own
//! rejections answer in plain text).

use axum::body::Bytes;
use axum::extract::{FromRequest, FromRequestParts, Path, Query, Request};
use axum::http::header;
use axum::http::request::Parts;
use futures_util::StreamExt;
use serde::de::DeserializeOwned;

use super::error::ApiError;

/// The request body, size-checked against the server's limit.
pub(crate) struct RawBody(pub Bytes);

/// The configured body limit, put into every request's extensions.
#[derive(Debug, Clone, Copy)]
pub(crate) struct BodyLimit(pub usize);

/// An oversized body is still read (and dropped) up to this many bytes
/// before the 413 goes out: a server that answers while the client is still
/// sending closes the connection under it, and the client sees a reset
/// instead of the error. Past this bound the answer goes out at once.
fn drain_bound(limit: usize) -> usize {
    limit.saturating_mul(8).max(8 * 1024 * 1024)
}

impl<S: Send + Sync> FromRequest<S> for RawBody {
    type Rejection = ApiError;

    async fn from_request(request: Request, _state: &S) -> Result<Self, ApiError> {
        let limit = request
            .extensions()
            .get::<BodyLimit>()
            .map_or(super::DEFAULT_MAX_BODY_BYTES, |l| l.0);
        let declared = request
            .headers()
            .get(header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<usize>().ok());
        if declared.is_some_and(|n| n > drain_bound(limit)) {
            return Err(ApiError::PayloadTooLarge { limit });
        }
        let mut chunks = request.into_body().into_data_stream();
        let mut body = Vec::new();
        let mut total = 0usize;
        while let Some(chunk) = chunks.next().await {
            let chunk = chunk
                .map_err(|e| ApiError::invalid(format!("cannot read the request body: {e}")))?;
            total = total.saturating_add(chunk.len());
            if total > drain_bound(limit) {
                return Err(ApiError::PayloadTooLarge { limit });
            }
            if total <= limit {
                body.extend_from_slice(&chunk);
            }
        }
        if total > limit {
            return Err(ApiError::PayloadTooLarge { limit });
        }
        Ok(RawBody(Bytes::from(body)))
    }
}

/// A JSON body parsed into `T`. An empty body reads as `{}`, so
/// `curl -X POST .../approve` works without `-d '{}'`. The Content-Type is
/// not checked: the bytes are JSON or the request is refused.
pub(crate) struct JsonBody<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequest<S> for JsonBody<T> {
    type Rejection = ApiError;

    async fn from_request(request: Request, state: &S) -> Result<Self, ApiError> {
        let RawBody(bytes) = RawBody::from_request(request, state).await?;
        parse_json(&bytes).map(JsonBody)
    }
}

/// Parse a JSON body (empty = `{}`) into `T`, explaining what was wrong.
pub(crate) fn parse_json<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, ApiError> {
    let text: &[u8] = if bytes.iter().all(u8::is_ascii_whitespace) {
        b"{}"
    } else {
        bytes
    };
    serde_json::from_slice(text).map_err(|e| {
        let what = if e.is_data() {
            "the request body has the wrong shape"
        } else {
            "the request body is not valid JSON"
        };
        ApiError::invalid(format!("{what}: {e}"))
    })
}

/// Query parameters parsed into `T`.
pub(crate) struct QueryParams<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequestParts<S> for QueryParams<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        Query::<T>::from_request_parts(parts, state)
            .await
            .map(|Query(q)| QueryParams(q))
            .map_err(|e| ApiError::invalid(e.body_text()))
    }
}

/// The one `{id}` or `{key}` segment of a route.
pub(crate) struct PathParam(pub String);

impl<S: Send + Sync> FromRequestParts<S> for PathParam {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        Path::<String>::from_request_parts(parts, state)
            .await
            .map(|Path(p)| PathParam(p))
            .map_err(|e| ApiError::invalid(e.body_text()))
    }
}

/// `?wait=true`: answer at the run's next pause or end.
#[derive(Debug, Default, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct WaitParam {
    #[serde(default)]
    pub wait: bool,
}
