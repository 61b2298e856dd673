//! HTTP tools: `http: {method, url, headers, query, json | body, timeout,
//! ok_status, retry, idempotency}` in a spec.
//!
//! A call evaluates the spec's templates against the call's scope (the run
//! context plus `args`), resolving `${NAME}` secrets written in the spec and
//! never those that arrive in data, sends the request (retrying only as
//! `retry.rs` allows) and returns `{status, headers, body}`. Everything that
//! leaves this module, output or error, is redacted of the secret values the
//! call used, because a downstream may echo them back.

mod response;
mod retry;
mod url;

use std::time::Duration;

use reqwest::header::{CONTENT_TYPE, HeaderMap, HeaderName, HeaderValue};
use serde_json::Value;
use thiserror::Error;

use super::template::CallSecrets;
use super::{CallContext, ToolError};
use crate::domain::pending_approval::is_credential_header;
use crate::domain::spec::{HttpToolSpec, IdempotencySpec, ToolSpec};
use crate::support::secrets::Redactor;
use response::Received;
use retry::{AttemptFailure, RetryPolicy};

pub use url::encode_component;

/// Per-attempt timeout when the tool sets none.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);
/// Larger responses fail the call: outputs are stored with the run.
pub const MAX_RESPONSE_BYTES: usize = 10 * 1024 * 1024;

/// Redirects followed before a call fails.
const MAX_REDIRECTS: usize = 10;

/// The process-wide client: one connection pool for every tool and model call.
pub fn client() -> Result<reqwest::Client, ToolError> {
    reqwest::Client::builder()
        .user_agent(concat!("tollgate/", env!("CARGO_PKG_VERSION")))
        .redirect(same_origin_redirects())
        .build()
        .map_err(|e| ToolError::new(format!("cannot build the HTTP client: {e}")))
}

/// Follow redirects only within the origin that was called. reqwest drops
/// `Authorization` on a cross-host redirect, but not a spec's own secret
/// headers (`X-Api-Key: ${KEY}`), nor an https -> http downgrade; so the 3xx
/// is returned instead, and fails the call unless `ok_status` lists it.
fn same_origin_redirects() -> reqwest::redirect::Policy {
    reqwest::redirect::Policy::custom(|attempt| {
        let same_origin = attempt
            .previous()
            .last()
            .is_some_and(|from| from.origin() == attempt.url().origin());
        if attempt.previous().len() > MAX_REDIRECTS {
            attempt.error("too many redirects")
        } else if same_origin {
            attempt.follow()
        } else {
            attempt.stop()
        }
    })
}

/// Why an HTTP tool call failed. Messages may quote evaluated values (a URL,
/// a body excerpt); the caller redacts them before they leave the module.
#[derive(Debug, Error)]
pub enum HttpError {
    #[error("{field}: {message}")]
    Template { field: String, message: String },
    #[error("url {url:?} is not a valid http or https URL: {reason}")]
    InvalidUrl { url: String, reason: String },
    #[error("{method:?} is not a valid HTTP method")]
    InvalidMethod { method: String },
    #[error("{name:?} is not a valid HTTP header name")]
    InvalidHeaderName { name: String },
    #[error(
        "header {name}: the value contains characters HTTP does not allow (a newline or another control character)"
    )]
    InvalidHeaderValue { name: String },
    #[error("{method} {origin} failed: {detail}")]
    Transport {
        method: String,
        origin: String,
        detail: String,
    },
    #[error("{method} {origin} timed out after {after:?}")]
    Timeout {
        method: String,
        origin: String,
        after: Duration,
    },
    #[error("{method} {origin} returned {status}: {excerpt}")]
    Status {
        method: String,
        origin: String,
        /// Code and reason phrase, e.g. `503 Service Unavailable`.
        status: String,
        excerpt: String,
    },
    #[error("{method} {origin}: the response body is larger than {limit} bytes")]
    TooLarge {
        method: String,
        origin: String,
        limit: usize,
    },
    /// The call was made and answered; the answer is not kept (the step
    /// fails, and nothing repeats the call).
    #[error(
        "{method} {origin}: the response body is JSON nested deeper than {limit} levels of objects and arrays, the most a run accepts; the call was made, its answer is not kept"
    )]
    TooDeep {
        method: String,
        origin: String,
        limit: usize,
    },
}

/// Call an HTTP tool. The output is `{status, headers, body}`.
pub async fn call(
    client: &reqwest::Client,
    tool: &ToolSpec,
    spec: &HttpToolSpec,
    call: &CallContext,
) -> Result<Value, ToolError> {
    let mut secrets = CallSecrets::from_env();
    let prepared = prepare(spec, call, &mut secrets);
    let redactor = secrets.redactor();
    let fail = |e: HttpError, attempts: u32| {
        let tries = if attempts > 1 {
            format!(" (after {attempts} attempts)")
        } else {
            String::new()
        };
        ToolError::new(redactor.text(&format!("tool {:?}: {e}{tries}", tool.name)))
    };
    let prepared = prepared.map_err(|e| fail(e, 1))?;
    let policy = RetryPolicy::for_tool(spec);
    let (outcome, attempts) = send(client, &prepared, &policy, &spec.ok_status).await;
    match outcome {
        Ok(received) if accepted(received.status, &spec.ok_status) => match received.output() {
            Ok(output) => Ok(redactor.value(output)),
            Err(response::TooDeep { limit }) => Err(fail(
                HttpError::TooDeep {
                    method: prepared.method.to_string(),
                    origin: prepared.origin(),
                    limit,
                },
                attempts,
            )),
        },
        Ok(received) => Err(fail(prepared.status_error(&received, &redactor), attempts)),
        Err(e) => Err(fail(prepared.attempt_error(e), attempts)),
    }
}

fn accepted(status: u16, ok_status: &[u16]) -> bool {
    (200..300).contains(&status) || ok_status.contains(&status)
}

/// A request with every template evaluated, ready to send (again).
#[derive(Debug)]
struct Prepared {
    method: reqwest::Method,
    url: reqwest::Url,
    headers: HeaderMap,
    body: Option<Vec<u8>>,
    timeout: Duration,
}

fn template_error(field: impl Into<String>) -> impl FnOnce(ToolError) -> HttpError {
    let field = field.into();
    move |e| HttpError::Template {
        field,
        message: e.message,
    }
}

fn prepare(
    spec: &HttpToolSpec,
    call: &CallContext,
    secrets: &mut CallSecrets,
) -> Result<Prepared, HttpError> {
    let scope = &call.scope;
    let method = reqwest::Method::from_bytes(spec.method.as_bytes()).map_err(|_| {
        HttpError::InvalidMethod {
            method: spec.method.clone(),
        }
    })?;
    let text = url::evaluate(&spec.url, scope, secrets).map_err(template_error("url"))?;
    let mut url = parse_url(&text)?;
    if !spec.query.is_empty() {
        let mut pairs = url.query_pairs_mut();
        for (name, template) in &spec.query {
            let value = secrets
                .string(template, scope)
                .map_err(template_error(format!("query parameter {name}")))?;
            pairs.append_pair(name, &value);
        }
    }
    let mut headers = HeaderMap::new();
    for (name, template) in &spec.headers {
        let value = secrets
            .string(template, scope)
            .map_err(template_error(format!("header {name}")))?;
        headers.insert(header_name(name)?, header_value(name, &value)?);
    }
    let body = body(spec, call, secrets, &mut headers)?;
    add_idempotency_key(spec, &method, call, &mut headers)?;
    Ok(Prepared {
        method,
        url,
        headers,
        body,
        timeout: spec.timeout.unwrap_or(DEFAULT_TIMEOUT),
    })
}

fn parse_url(text: &str) -> Result<reqwest::Url, HttpError> {
    let invalid = |reason: String| HttpError::InvalidUrl {
        url: text.to_string(),
        reason,
    };
    let url = reqwest::Url::parse(text).map_err(|e| invalid(e.to_string()))?;
    match url.scheme() {
        "http" | "https" => Ok(url),
        other => Err(invalid(format!("the scheme is {other:?}"))),
    }
}

fn header_name(name: &str) -> Result<HeaderName, HttpError> {
    HeaderName::from_bytes(name.as_bytes()).map_err(|_| HttpError::InvalidHeaderName {
        name: name.to_string(),
    })
}

fn header_value(name: &str, value: &str) -> Result<HeaderValue, HttpError> {
    let mut value = HeaderValue::from_str(value).map_err(|_| HttpError::InvalidHeaderValue {
        name: name.to_string(),
    })?;
    // Keeps the value out of Debug output (and out of HTTP/2 header tables).
    value.set_sensitive(is_credential_header(name));
    Ok(value)
}

/// The body bytes, with a content type unless the spec set one.
fn body(
    spec: &HttpToolSpec,
    call: &CallContext,
    secrets: &mut CallSecrets,
    headers: &mut HeaderMap,
) -> Result<Option<Vec<u8>>, HttpError> {
    let (bytes, content_type) = if let Some(template) = &spec.json {
        let value = secrets
            .value(template, &call.scope)
            .map_err(template_error("json"))?;
        // Serializing a serde_json::Value cannot fail (string keys only).
        let bytes = serde_json::to_vec(&value).unwrap_or_default();
        (bytes, "application/json")
    } else if let Some(template) = &spec.body {
        let text = secrets
            .string(template, &call.scope)
            .map_err(template_error("body"))?;
        (text.into_bytes(), "text/plain; charset=utf-8")
    } else {
        return Ok(None);
    };
    if !headers.contains_key(CONTENT_TYPE) {
        headers.insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    }
    Ok(Some(bytes))
}

/// Every call that may change something (any method but the safe GET,
/// HEAD, OPTIONS and TRACE: POST, PUT, PATCH, DELETE and any custom one)
/// carries the run's key for this step, the same on every attempt, retry
/// and recovery (see [`crate::engine::tools::idempotency_key`]). `idempotency:
/// false` turns it off. A header the spec sets itself under that name wins:
/// the author chose that key on purpose.
fn add_idempotency_key(
    spec: &HttpToolSpec,
    method: &reqwest::Method,
    call: &CallContext,
    headers: &mut HeaderMap,
) -> Result<(), HttpError> {
    let (Some(key), IdempotencySpec::Header(name)) = (&call.idempotency_key, &spec.idempotency)
    else {
        return Ok(());
    };
    if is_safe_method(method) {
        return Ok(());
    }
    let name = header_name(name)?;
    if !headers.contains_key(&name) {
        headers.insert(name.clone(), header_value(name.as_str(), key)?);
    }
    Ok(())
}

/// Methods RFC 9110 defines as safe: they change nothing, so need no key.
fn is_safe_method(method: &reqwest::Method) -> bool {
    use reqwest::Method;
    [Method::GET, Method::HEAD, Method::OPTIONS, Method::TRACE].contains(method)
}

/// Why one attempt produced no response to judge.
#[derive(Debug)]
enum AttemptError {
    Reqwest(reqwest::Error),
    TooLarge,
}

impl AttemptError {
    fn failure(&self) -> Option<AttemptFailure> {
        match self {
            AttemptError::Reqwest(e) if e.is_timeout() => Some(AttemptFailure::Timeout),
            // A bad request or a redirect loop will not go better next time.
            AttemptError::Reqwest(e) if e.is_builder() || e.is_redirect() => None,
            AttemptError::Reqwest(_) => Some(AttemptFailure::Transport),
            AttemptError::TooLarge => None,
        }
    }
}

/// Send with retries; returns the last outcome and how many attempts it took.
async fn send(
    client: &reqwest::Client,
    prepared: &Prepared,
    policy: &RetryPolicy,
    ok_status: &[u16],
) -> (Result<Received, AttemptError>, u32) {
    let mut attempt = 1;
    let mut backoff = policy.backoff();
    loop {
        let outcome = prepared.attempt(client).await;
        let (failure, retry_after) = match &outcome {
            Ok(r) if accepted(r.status, ok_status) => return (outcome, attempt),
            Ok(r) => (
                Some(AttemptFailure::Status(r.status)),
                retry::retry_after(&r.headers),
            ),
            Err(e) => (e.failure(), None),
        };
        match failure {
            Some(f) if policy.should_retry(attempt, f) => {
                tokio::time::sleep(policy.wait(&mut backoff, attempt, retry_after)).await;
                attempt += 1;
            }
            _ => return (outcome, attempt),
        }
    }
}

impl Prepared {
    async fn attempt(&self, client: &reqwest::Client) -> Result<Received, AttemptError> {
        let mut request = client
            .request(self.method.clone(), self.url.clone())
            .headers(self.headers.clone())
            .timeout(self.timeout);
        if let Some(body) = &self.body {
            request = request.body(body.clone());
        }
        let response = request.send().await.map_err(AttemptError::Reqwest)?;
        let status = response.status().as_u16();
        let headers = response.headers().clone();
        let body = read_bounded(response).await?;
        Ok(Received {
            status,
            headers,
            body,
        })
    }

    /// `scheme://host:port` only: paths and queries may carry arguments or
    /// percent-encoded secrets that redaction would not recognise.
    fn origin(&self) -> String {
        self.url.origin().ascii_serialization()
    }

    fn status_error(&self, received: &Received, redactor: &Redactor) -> HttpError {
        let status = reqwest::StatusCode::from_u16(received.status)
            .ok()
            .and_then(|s| s.canonical_reason())
            .map(|reason| format!("{} {reason}", received.status))
            .unwrap_or_else(|| received.status.to_string());
        HttpError::Status {
            method: self.method.to_string(),
            origin: self.origin(),
            status,
            excerpt: received.excerpt(|text| redactor.text(text)),
        }
    }

    fn attempt_error(&self, error: AttemptError) -> HttpError {
        let (method, origin) = (self.method.to_string(), self.origin());
        match error {
            AttemptError::TooLarge => HttpError::TooLarge {
                method,
                origin,
                limit: MAX_RESPONSE_BYTES,
            },
            AttemptError::Reqwest(e) if e.is_timeout() => HttpError::Timeout {
                method,
                origin,
                after: self.timeout,
            },
            AttemptError::Reqwest(e) => HttpError::Transport {
                method,
                origin,
                detail: error_chain(e.without_url()),
            },
        }
    }
}

async fn read_bounded(mut response: reqwest::Response) -> Result<Vec<u8>, AttemptError> {
    if response
        .content_length()
        .is_some_and(|n| n > MAX_RESPONSE_BYTES as u64)
    {
        return Err(AttemptError::TooLarge);
    }
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await.map_err(AttemptError::Reqwest)? {
        if body.len() + chunk.len() > MAX_RESPONSE_BYTES {
            return Err(AttemptError::TooLarge);
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

/// The error and its causes on one line ("error sending request: ...:
/// Connection refused"): reqwest's own message alone rarely says why.
fn error_chain(error: reqwest::Error) -> String {
    let mut parts: Vec<String> = vec![error.to_string()];
    let mut source = std::error::Error::source(&error);
    while let Some(cause) = source {
        let text = cause.to_string();
        if !parts.iter().any(|p| p.contains(&text)) {
            parts.push(text);
        }
        source = cause.source();
    }
    parts.join(": ")
}
