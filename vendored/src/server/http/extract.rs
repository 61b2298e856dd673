//! Request extractors whose failures are `ApiError`s, so a bad body, query
//! or path gets the same JSON error shape as everything else (axum's own
//! rejections answer in plain text).

use axum::body::Bytes;
use axum::extract::{FromRequest, FromRequestParts, Path, Query, Request};
use axum::http::request::Parts;
use axum::http::{HeaderMap, header};
use futures_util::StreamExt;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::service::ApiError;
use crate::service::schema::request_type;

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
            .map_or(crate::server::DEFAULT_MAX_BODY_BYTES, |l| l.0);
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

/// A JSON body parsed into `T`, for the routes that change state.
///
/// The request must say `Content-Type: application/json` (or a `+json`
/// type), even with an empty body: a browser page of another origin can
/// only send a "simple" cross-origin POST (`text/plain`, a form) without a
/// preflight, so refusing every other type keeps such a page from starting
/// runs or deciding approvals. An empty body reads as `{}`, so
/// `curl -X POST -H 'content-type: application/json' .../approve` works
/// without `-d '{}'`. The body must be a JSON object: serde would otherwise
/// read a struct from an array (`[{"input": 1}]`).
pub(crate) struct JsonBody<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequest<S> for JsonBody<T> {
    type Rejection = ApiError;

    async fn from_request(request: Request, state: &S) -> Result<Self, ApiError> {
        let content_type = json_content_type(request.headers());
        // The body is read first even when the type is wrong: answering
        // while the client is still sending resets the connection under it,
        // and it would never see the 415.
        let RawBody(bytes) = RawBody::from_request(request, state).await?;
        content_type?;
        parse_json_object(&bytes).map(JsonBody)
    }
}

/// `Ok` when the request has exactly one Content-Type and it is JSON:
/// `application/json` or `application/<anything>+json`, with any
/// parameters (`; charset=utf-8`), in any case.
pub(crate) fn json_content_type(headers: &HeaderMap) -> Result<(), ApiError> {
    let mut values = headers.get_all(header::CONTENT_TYPE).iter();
    let (Some(value), None) = (values.next(), values.next()) else {
        return Err(ApiError::UnsupportedMediaType(
            if headers.contains_key(header::CONTENT_TYPE) {
                "more than one Content-Type header".to_string()
            } else {
                "no Content-Type header".to_string()
            },
        ));
    };
    let text = String::from_utf8_lossy(value.as_bytes());
    let essence = text.split(';').next().unwrap_or("").trim();
    let is_json = essence.eq_ignore_ascii_case("application/json")
        || essence.split_once('/').is_some_and(|(kind, subtype)| {
            kind.eq_ignore_ascii_case("application")
                && subtype.len() > "+json".len()
                && subtype
                    .get(subtype.len() - "+json".len()..)
                    .is_some_and(|suffix| suffix.eq_ignore_ascii_case("+json"))
        });
    if is_json {
        return Ok(());
    }
    // Echoed for the caller, bounded and escaped: it came from outside.
    let shown: String = text.chars().take(80).collect();
    Err(ApiError::UnsupportedMediaType(format!(
        "Content-Type {shown:?}"
    )))
}

/// A spec's YAML text as a body (`POST /specs/plan`), size-checked like
/// every body and no larger than a spec file may be
/// ([`crate::domain::spec::MAX_SPEC_BYTES`], which parsing enforces).
///
/// The Content-Type must say YAML or plain text: `application/yaml`,
/// `application/x-yaml`, `text/yaml`, `text/x-yaml` or `text/plain`, with
/// any parameters. The route changes nothing, so the simple cross-origin
/// `text/plain` is no risk here (and the bearer token still applies).
pub(crate) struct SpecBody(pub Bytes);

impl<S: Send + Sync> FromRequest<S> for SpecBody {
    type Rejection = ApiError;

    async fn from_request(request: Request, state: &S) -> Result<Self, ApiError> {
        let content_type = yaml_content_type(request.headers());
        // Read first, as `JsonBody` does: answering while the client still
        // sends resets the connection under it.
        let RawBody(bytes) = RawBody::from_request(request, state).await?;
        content_type?;
        Ok(SpecBody(bytes))
    }
}

/// `Ok` when the request has exactly one Content-Type and it is YAML or
/// plain text (see [`SpecBody`]).
pub(crate) fn yaml_content_type(headers: &HeaderMap) -> Result<(), ApiError> {
    let mut values = headers.get_all(header::CONTENT_TYPE).iter();
    let (Some(value), None) = (values.next(), values.next()) else {
        return Err(ApiError::UnsupportedSpecMediaType(
            if headers.contains_key(header::CONTENT_TYPE) {
                "more than one Content-Type header".to_string()
            } else {
                "no Content-Type header".to_string()
            },
        ));
    };
    let text = String::from_utf8_lossy(value.as_bytes());
    let essence = text.split(';').next().unwrap_or("").trim();
    let accepted = [
        "application/yaml",
        "application/x-yaml",
        "text/yaml",
        "text/x-yaml",
        "text/plain",
    ];
    if accepted.iter().any(|t| essence.eq_ignore_ascii_case(t)) {
        return Ok(());
    }
    let shown: String = text.chars().take(80).collect();
    Err(ApiError::UnsupportedSpecMediaType(format!(
        "Content-Type {shown:?}"
    )))
}

/// Parse a JSON body (empty = `{}`) that must be an object into `T`.
///
/// Parsed once, straight into `T`: parsing a `Value` first and converting
/// it held two trees of the body at once (a run's `input` is a `Value`
/// inside `T`, and a wide one costs some 200 bytes a key).
pub(crate) fn parse_json_object<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, ApiError> {
    let first = bytes.iter().find(|b| !b.is_ascii_whitespace());
    if first.is_some_and(|&b| b != b'{') {
        // Not an object (or not JSON): say what it is, from the small
        // value it then is, or the parser's own words.
        let value: Value = parse_json(bytes)?;
        return Err(ApiError::invalid(format!(
            "the request body must be a JSON object, found {}",
            crate::support::json_kind::json_kind(&value)
        )));
    }
    parse_json(bytes)
}

/// Parse a JSON body (empty = `{}`) into `T`, explaining what was wrong.
/// Every JSON body goes through here; one nested deeper than a run accepts
/// ([`crate::support::json_depth::MAX_JSON_DEPTH`]) is refused before it is parsed:
/// what a run stores wraps it again and must stay readable. So is one with
/// a key twice in an object, or more keys than
/// [`crate::support::json_keys::MAX_JSON_KEYS`] (see [`crate::support::json_keys`]).
pub(crate) fn parse_json<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, ApiError> {
    let text: &[u8] = if bytes.iter().all(u8::is_ascii_whitespace) {
        b"{}"
    } else {
        bytes
    };
    let limit = crate::support::json_depth::MAX_JSON_DEPTH;
    if crate::support::json_depth::text_depth(text) > limit {
        return Err(ApiError::invalid(format!(
            "the request body nests deeper than {limit} levels of objects and arrays, \
             the most tollgate accepts"
        )));
    }
    // Before the parse, which would keep the last of two equal keys, and
    // what a body of many keys costs once parsed.
    crate::support::json_keys::check_keys(text)
        .map_err(|e| ApiError::invalid(format!("the request body is refused: {e}")))?;
    serde_json::from_slice(text).map_err(|e| {
        let what = if e.is_data() {
            "the request body has the wrong shape"
        } else {
            "the request body is not valid JSON"
        };
        ApiError::invalid(format!("{what}: {e}"))
    })
}

/// For an optional body field where `null` must not read as absent:
/// missing is `None`, `null` is `Some(Value::Null)`. Use with
/// `#[serde(default, deserialize_with = "present")]`.
pub(crate) fn present<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Value>, D::Error> {
    <Value as serde::Deserialize>::deserialize(d).map(Some)
}

/// An edited payload from a decision body. `{"payload": null}` is refused:
/// it could mean "no edit" or "replace the payload with null", and guessing
/// either way decides something the person did not say.
pub(crate) fn edited_payload(payload: Option<Value>) -> Result<Option<Value>, ApiError> {
    match payload {
        Some(Value::Null) => Err(ApiError::invalid(
            "payload is null: leave payload out to approve as is, or send the edited payload",
        )),
        other => Ok(other),
    }
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

/// The one `{id}` or `{key}` segment of a route. An empty one
/// (`/approvals//approve`, what a shell sends for an unset `$KEY`) is a
/// malformed request, 400 `invalid_request` saying what is empty, not a
/// search for a record with an empty name.
pub(crate) struct PathParam(pub String);

impl<S: Send + Sync> FromRequestParts<S> for PathParam {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        let Path(params) = Path::<Vec<(String, String)>>::from_request_parts(parts, state)
            .await
            .map_err(|e| ApiError::invalid(e.body_text()))?;
        match params.as_slice() {
            [(name, value)] if value.is_empty() => Err(ApiError::invalid(empty_segment(name))),
            [(_, value)] => Ok(PathParam(value.clone())),
            _ => Err(ApiError::invalid(
                "the route expects one path parameter".to_string(),
            )),
        }
    }
}

/// What an empty `{name}` segment is told.
fn empty_segment(name: &str) -> String {
    match name {
        "key" => "the approval key is empty".to_string(),
        "id_or_key" => "the run id or approval key is empty".to_string(),
        "id" => "the id is empty".to_string(),
        other => format!("the path's {other} is empty"),
    }
}

request_type! {
    /// `?wait=true`: answer at the run's next pause or end.
    #[derive(Debug, Default, serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    pub(crate) struct WaitParam {
        /// `true`: answer at the run's next pause or its end, not at once;
        /// after 60 s at most, with the run as it then stands.
        #[serde(default)]
        pub wait: bool,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    fn with(types: &[&[u8]]) -> HeaderMap {
        let mut headers = HeaderMap::new();
        for t in types {
            headers.append(header::CONTENT_TYPE, HeaderValue::from_bytes(t).unwrap());
        }
        headers
    }

    #[test]
    fn json_types_with_parameters_and_suffixes_are_accepted() {
        for t in [
            &b"application/json"[..],
            b"application/json; charset=utf-8",
            b"  APPLICATION/Json ;charset=UTF-8",
            b"application/vnd.api+json",
            b"application/merge-patch+JSON; x=y",
        ] {
            assert!(json_content_type(&with(&[t])).is_ok(), "{t:?}");
        }
    }

    #[test]
    fn everything_else_is_refused() {
        for t in [
            &b"text/plain"[..],
            b"text/json",
            b"application/x-www-form-urlencoded",
            b"multipart/form-data; boundary=x",
            b"application/jsonp",
            b"application/+json",
            b"application/json-seq",
            b"+json",
            b"",
            b";application/json",
            b"\xffapplication/json",
        ] {
            let err = json_content_type(&with(&[t])).unwrap_err();
            assert_eq!(err.code(), "unsupported_media_type", "{t:?}");
        }
        assert!(json_content_type(&with(&[])).is_err());
        assert!(json_content_type(&with(&[b"application/json", b"application/json"])).is_err());
    }

    #[test]
    fn a_spec_body_is_yaml_or_plain_text() {
        for t in [
            &b"application/yaml"[..],
            b"application/x-yaml",
            b"text/yaml; charset=utf-8",
            b"TEXT/PLAIN",
            b"text/x-yaml",
        ] {
            assert!(yaml_content_type(&with(&[t])).is_ok(), "{t:?}");
        }
        for t in [&b"application/json"[..], b"text/html", b"yaml", b""] {
            let err = yaml_content_type(&with(&[t])).unwrap_err();
            assert_eq!(err.code(), "unsupported_media_type", "{t:?}");
            assert!(err.to_string().contains("application/yaml"), "{err}");
        }
        assert!(yaml_content_type(&with(&[])).is_err());
        assert!(yaml_content_type(&with(&[b"text/yaml", b"text/yaml"])).is_err());
    }

    #[test]
    fn bodies_must_be_objects_and_null_payloads_are_refused() {
        #[derive(Debug, serde::Deserialize)]
        struct Body {
            #[allow(dead_code)]
            #[serde(default)]
            input: Option<Value>,
        }
        assert!(parse_json_object::<Body>(b"").is_ok());
        assert!(parse_json_object::<Body>(b" \n").is_ok());
        assert!(parse_json_object::<Body>(br#"{"input": [1]}"#).is_ok());
        for bad in [&b"[{}]"[..], b"[]", b"null", b"1", b"\"x\"", b"true"] {
            let err = parse_json_object::<Body>(bad).unwrap_err();
            assert!(err.to_string().contains("must be a JSON object"), "{err}");
        }
        assert!(edited_payload(Some(Value::Null)).is_err());
        let limit = crate::support::json_depth::MAX_JSON_DEPTH;
        let nested = |n: usize| format!("{}1{}", "[".repeat(n), "]".repeat(n));
        let at_limit = format!(r#"{{"input": {}}}"#, nested(limit - 1));
        assert!(parse_json_object::<Body>(at_limit.as_bytes()).is_ok());
        for deep in [
            nested(limit + 1),
            format!(r#"{{"input": {}}}"#, nested(limit)),
        ] {
            let err = parse_json::<Value>(deep.as_bytes()).unwrap_err();
            assert_eq!(err.code(), "invalid_request");
            assert!(err.to_string().contains("deeper than 100 levels"), "{err}");
        }
        assert_eq!(edited_payload(None).unwrap(), None);
        assert_eq!(
            edited_payload(Some(serde_json::json!({}))).unwrap(),
            Some(serde_json::json!({}))
        );
    }
}
