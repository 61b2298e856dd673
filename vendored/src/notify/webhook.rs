//! Outbound webhooks, signed in the Standard Webhooks format (DESIGN §14),
//! so a receiver can verify them with the published libraries.
//!
//! One delivery is one POST of the notice's JSON body with three headers:
//! `webhook-id` (the notice's id, the same on every retry, so a receiver
//! can de-duplicate), `webhook-timestamp` (unix seconds of this attempt)
//! and `webhook-signature` (`v1,` + base64 of HMAC-SHA256 over
//! `{id}.{timestamp}.{body}`, keyed with the endpoint's secret).
//!
//! What the receiver answers becomes an [`Attempt`] the delivery worker
//! acts on: a 2xx is delivered, 410 Gone disables the endpoint, anything
//! else (a redirect included: Standard Webhooks asks senders not to follow
//! one) is retried later, honouring a `Retry-After`.
//!
//! The URL and the secret are `${NAME}` references resolved at send time
//! ([`WebhookSender::deliver`]). Webhook URLs often carry a token, so no
//! error built here contains the URL, the secret, or any value a reference
//! resolved to: errors name the variable.

use std::time::Duration;

use base64::Engine as _;
use base64::alphabet;
use base64::engine::general_purpose::STANDARD;
use base64::engine::{DecodePaddingMode, GeneralPurpose, GeneralPurposeConfig};
use chrono::{DateTime, Utc};
#[cfg(feature = "http-client")]
use reqwest::header::{CONTENT_TYPE, HeaderMap, RETRY_AFTER};

use crate::domain::notices::WebhookRoute;
use crate::engine::tools::template::CallSecrets;
use crate::notify::delivery::Attempt;
use crate::support::hmac::HmacKey;

/// What marks a Standard Webhooks signing secret; the key follows in base64.
pub const SECRET_PREFIX: &str = "whsec_";
/// The shortest key Standard Webhooks allows (192 bits).
pub const MIN_SECRET_BYTES: usize = 24;
/// The longest key Standard Webhooks allows (512 bits).
pub const MAX_SECRET_BYTES: usize = 64;

/// Time to set up a connection (TCP and TLS) before the attempt fails.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// The whole attempt, the receiver's answer included. Standard Webhooks
/// recommends giving receivers 15 to 30 s; the lower end keeps one slow
/// endpoint from holding the delivery worker's lease long.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(15);
/// Sent with every delivery.
pub const USER_AGENT: &str = "tollgate";
/// How much of a refusing receiver's body an error quotes, in characters.
pub const MAX_ERROR_BODY_CHARS: usize = 200;
/// How much of that body is read at most, in bytes (a few characters
/// may take 4 bytes each; the rest is never downloaded).
#[cfg(feature = "http-client")]
const MAX_ERROR_BODY_BYTES: usize = 4 * MAX_ERROR_BODY_CHARS;
/// The longest `Retry-After` taken as asked: a broken or hostile header
/// cannot park a notice past a retry window's worth of attempts.
pub const MAX_RETRY_AFTER: Duration = Duration::from_secs(3600);

/// The signature scheme's version, written before each signature.
const SIGNATURE_VERSION: &str = "v1";

/// Standard base64, padded or not: the published verifiers accept a
/// secret either way (Python's pads it before decoding).
const SECRET_BASE64: GeneralPurpose = GeneralPurpose::new(
    &alphabet::STANDARD,
    GeneralPurposeConfig::new().with_decode_padding_mode(DecodePaddingMode::Indifferent),
);

/// An endpoint's signing secret: the key Standard Webhooks' `whsec_...`
/// string encodes. Its `Debug` never shows it.
#[derive(Clone)]
pub struct WebhookSecret {
    key: HmacKey,
}

/// Why a signing secret was refused. Never contains the secret.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WebhookSecretError {
    #[error("the webhook secret is empty")]
    Empty,
    #[error(
        "the webhook secret is not base64 (Standard Webhooks: an optional `whsec_` prefix, then the key in standard base64)"
    )]
    NotBase64,
    #[error(
        "the webhook secret's key is {len} bytes long; Standard Webhooks asks for {MIN_SECRET_BYTES} to {MAX_SECRET_BYTES}"
    )]
    Length { len: usize },
}

impl WebhookSecret {
    /// A secret as Standard Webhooks writes it: an optional `whsec_`
    /// prefix, then the key in standard base64 (without the prefix, the
    /// whole string is the base64, as the published libraries read it).
    /// Surrounding whitespace (a trailing newline from a secrets file) is
    /// ignored.
    pub fn parse(resolved: &str) -> Result<WebhookSecret, WebhookSecretError> {
        let text = resolved.trim();
        let encoded = text.strip_prefix(SECRET_PREFIX).unwrap_or(text);
        if encoded.is_empty() {
            return Err(WebhookSecretError::Empty);
        }
        let key = SECRET_BASE64
            .decode(encoded)
            .map_err(|_| WebhookSecretError::NotBase64)?;
        if !(MIN_SECRET_BYTES..=MAX_SECRET_BYTES).contains(&key.len()) {
            return Err(WebhookSecretError::Length { len: key.len() });
        }
        Ok(WebhookSecret {
            key: HmacKey::new(&key),
        })
    }
}

impl std::fmt::Debug for WebhookSecret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("WebhookSecret(<redacted>)")
    }
}

/// The `webhook-signature` of one attempt: `v1,` + base64 of
/// HMAC-SHA256(key, `{id}.{timestamp}.{body}`).
pub fn signature(secret: &WebhookSecret, id: &str, timestamp_secs: i64, body: &[u8]) -> String {
    let timestamp = timestamp_secs.to_string();
    let mac = secret
        .key
        .sign(&[id.as_bytes(), b".", timestamp.as_bytes(), b".", body]);
    format!("{SIGNATURE_VERSION},{}", STANDARD.encode(mac))
}

/// The HTTP client could not be set up (the TLS backend failed to start).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("cannot build the webhook HTTP client: {0}")]
pub struct WebhookClientError(String);

/// Sends webhooks: one connection pool for every endpoint. Cheap to clone.
#[derive(Debug, Clone)]
pub struct WebhookSender {
    #[cfg(feature = "http-client")]
    http: reqwest::Client,
    #[cfg(feature = "http-client")]
    connect_timeout: Duration,
    #[cfg(feature = "http-client")]
    request_timeout: Duration,
}

impl WebhookSender {
    /// A sender with [`CONNECT_TIMEOUT`] and [`REQUEST_TIMEOUT`].
    pub fn new() -> Result<WebhookSender, WebhookClientError> {
        WebhookSender::with_timeouts(CONNECT_TIMEOUT, REQUEST_TIMEOUT)
    }

    /// A sender with other time limits (tests use short ones).
    pub fn with_timeouts(
        connect_timeout: Duration,
        request_timeout: Duration,
    ) -> Result<WebhookSender, WebhookClientError> {
        #[cfg(not(feature = "http-client"))]
        let _ = (connect_timeout, request_timeout);
        #[cfg(feature = "http-client")]
        let http = reqwest::Client::builder()
            .user_agent(USER_AGENT)
            // A 3xx comes back as the answer, and fails the attempt:
            // Standard Webhooks asks for the URL to be updated instead, and
            // a redirect could carry the signed body somewhere unchecked.
            .redirect(reqwest::redirect::Policy::none())
            .connect_timeout(connect_timeout)
            .timeout(request_timeout)
            .build()
            .map_err(|e| WebhookClientError(e.without_url().to_string()))?;
        Ok(WebhookSender {
            #[cfg(feature = "http-client")]
            http,
            #[cfg(feature = "http-client")]
            connect_timeout,
            #[cfg(feature = "http-client")]
            request_timeout,
        })
    }

    /// Deliver one notice to `route`, resolving its `${NAME}` references
    /// from the environment now (so rotating a secret needs no restart).
    pub async fn deliver(
        &self,
        route: &WebhookRoute,
        id: &str,
        body: &[u8],
        now: DateTime<Utc>,
    ) -> Attempt {
        self.deliver_with(route, CallSecrets::from_env(), id, body, now)
            .await
    }

    /// [`deliver`](Self::deliver), resolving references from `secrets`
    /// (a test's table, or the environment).
    pub async fn deliver_with(
        &self,
        route: &WebhookRoute,
        mut secrets: CallSecrets,
        id: &str,
        body: &[u8],
        now: DateTime<Utc>,
    ) -> Attempt {
        let resolved = resolve_route(route, &mut secrets);
        match resolved {
            Ok((url, secret)) => self.send(&url, &secret, id, body, now).await,
            Err(error) => Attempt::Misconfigured { error },
        }
    }

    /// POST `body` to `url`, signed with `secret` for the attempt made at
    /// `now`, and say what came of it.
    pub async fn send(
        &self,
        url: &str,
        secret: &WebhookSecret,
        id: &str,
        body: &[u8],
        now: DateTime<Utc>,
    ) -> Attempt {
        if let Err(error) = check_id(id) {
            return Attempt::Misconfigured { error };
        }
        let Some(url) = http_url(url) else {
            return Attempt::Misconfigured {
                error: "the webhook URL is not an absolute http(s) URL".to_string(),
            };
        };
        #[cfg(not(feature = "http-client"))]
        {
            // Start-up refuses a spec with webhooks in a build without the
            // client (`Spec::check_features`); a notice queued by another
            // build of the server sharing this store lands here.
            let _ = (url, secret, body, now);
            Attempt::Misconfigured {
                error: crate::domain::spec::MissingFeature {
                    feature: crate::domain::spec::Feature::HttpClient,
                    at: "approvals.notify.webhooks".to_string(),
                }
                .to_string(),
            }
        }
        #[cfg(feature = "http-client")]
        {
            let timestamp = now.timestamp();
            let request = self
                .http
                .post(url)
                .header(CONTENT_TYPE, "application/json")
                .header("webhook-id", id)
                .header("webhook-timestamp", timestamp.to_string())
                .header("webhook-signature", signature(secret, id, timestamp, body))
                .body(body.to_vec());
            match request.send().await {
                Ok(response) => outcome(response, now).await,
                Err(e) => Attempt::Failed {
                    error: self.transport_error(e),
                    retry_after: None,
                },
            }
        }
    }

    /// A failure before any answer, described without the URL.
    #[cfg(feature = "http-client")]
    fn transport_error(&self, e: reqwest::Error) -> String {
        let what = if e.is_timeout() {
            format!(
                "the webhook receiver did not answer in time (connect {}s, whole request {}s)",
                self.connect_timeout.as_secs_f32(),
                self.request_timeout.as_secs_f32()
            )
        } else if e.is_connect() {
            "cannot connect to the webhook receiver".to_string()
        } else {
            "the webhook request failed".to_string()
        };
        // reqwest's own words ("error sending request") add nothing to
        // `what`: its sources say what broke.
        let e = e.without_url();
        let detail = match std::error::Error::source(&e) {
            Some(source) => error_chain(source),
            None => e.to_string(),
        };
        format!("{what}: {}", one_line(&detail))
    }
}

/// `route`'s URL and secret, resolved. The error names the setting and its
/// variables, never a value.
fn resolve_route(
    route: &WebhookRoute,
    secrets: &mut CallSecrets,
) -> Result<(String, WebhookSecret), String> {
    let url = resolve("url", &route.url, secrets)?;
    if http_url(&url).is_none() {
        return Err(format!(
            "approvals.notify.webhooks url {} is not an absolute http(s) URL",
            as_written(&route.url)
        ));
    }
    let secret = resolve("secret", &route.secret, secrets)?;
    let secret = WebhookSecret::parse(&secret).map_err(|e| {
        format!(
            "approvals.notify.webhooks secret {}: {e}",
            as_written(&route.secret)
        )
    })?;
    Ok((url, secret))
}

fn resolve(field: &str, written: &str, secrets: &mut CallSecrets) -> Result<String, String> {
    let value = secrets
        .literal(written)
        .map_err(|e| format!("approvals.notify.webhooks {field}: {}", e.message))?;
    if value.trim().is_empty() {
        return Err(format!(
            "approvals.notify.webhooks {field} {} resolves to an empty value",
            as_written(written)
        ));
    }
    Ok(value)
}

/// How an error names a setting: its `${NAME}` references, or (a value
/// written straight into the spec, which may itself be a credential) only
/// that it was written there.
fn as_written(written: &str) -> String {
    let names: Vec<String> = crate::support::secrets::references(written)
        .iter()
        .map(|r| format!("${{{}}}", r.name))
        .collect();
    if names.is_empty() {
        "(as written in the spec)".to_string()
    } else {
        format!("({})", names.join(", "))
    }
}

/// An absolute `http` or `https` URL with a host.
fn http_url(text: &str) -> Option<url::Url> {
    let url = url::Url::parse(text.trim()).ok()?;
    let web =
        matches!(url.scheme(), "http" | "https") && url.host_str().is_some_and(|h| !h.is_empty());
    web.then_some(url)
}

/// A `webhook-id` must be a header value and, as Standard Webhooks warns,
/// hold no `.` (the signed content is dot-separated).
fn check_id(id: &str) -> Result<(), String> {
    let fine = !id.is_empty()
        && id.len() <= 128
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
    if fine {
        Ok(())
    } else {
        Err(format!(
            "webhook-id {:?} is not an id (letters, digits, '_' and '-', at most 128)",
            id.chars().take(140).collect::<String>()
        ))
    }
}

/// What the receiver's answer comes to.
#[cfg(feature = "http-client")]
async fn outcome(response: reqwest::Response, now: DateTime<Utc>) -> Attempt {
    let status = response.status();
    if status.is_success() {
        return Attempt::Sent;
    }
    let answered = match status.canonical_reason() {
        Some(reason) => format!("HTTP {} {reason}", status.as_u16()),
        None => format!("HTTP {}", status.as_u16()),
    };
    if status.is_redirection() {
        // Its body and Location often repeat a URL: neither is quoted.
        return Attempt::Failed {
            error: format!(
                "the webhook receiver answered {answered}, a redirect, which is not followed: point the webhook at the final URL"
            ),
            retry_after: None,
        };
    }
    let retry_after = retry_after(response.headers(), now);
    let excerpt = body_excerpt(response).await;
    let said = if excerpt.is_empty() {
        String::new()
    } else {
        format!(": {excerpt}")
    };
    if status == reqwest::StatusCode::GONE {
        return Attempt::Gone {
            reason: format!("the webhook receiver answered {answered}{said}"),
        };
    }
    Attempt::Failed {
        error: format!("the webhook receiver answered {answered}{said}"),
        retry_after,
    }
}

/// The receiver's `Retry-After` (seconds or an HTTP date, counted from
/// `now`), at most [`MAX_RETRY_AFTER`].
#[cfg(feature = "http-client")]
fn retry_after(headers: &HeaderMap, now: DateTime<Utc>) -> Option<Duration> {
    let value = headers.get(RETRY_AFTER)?.to_str().ok()?;
    let wait = crate::support::backoff::retry_after(value, std::time::SystemTime::from(now))?;
    Some(wait.min(MAX_RETRY_AFTER))
}

/// The start of a refusal's body, on one line, at most
/// [`MAX_ERROR_BODY_CHARS`], with every known secret redacted. A body that
/// breaks off is quoted as far as it came.
#[cfg(feature = "http-client")]
async fn body_excerpt(mut response: reqwest::Response) -> String {
    let mut bytes = Vec::new();
    while bytes.len() < MAX_ERROR_BODY_BYTES {
        match response.chunk().await {
            Ok(Some(chunk)) => bytes.extend_from_slice(&chunk),
            Ok(None) | Err(_) => break,
        }
    }
    bytes.truncate(MAX_ERROR_BODY_BYTES);
    let text = one_line(&String::from_utf8_lossy(&bytes));
    let cut = match text.char_indices().nth(MAX_ERROR_BODY_CHARS) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text,
    };
    crate::support::secrets::known().text(&cut)
}

/// `text` on one line: control characters (newlines included) become
/// spaces, runs of whitespace one space.
#[cfg(feature = "http-client")]
fn one_line(text: &str) -> String {
    text.split(|c: char| c.is_whitespace() || c.is_control())
        .filter(|part| !part.is_empty())
        .collect::<Vec<_>>()
        .join(" ")
}

/// An error and its sources, `: `-separated, each said once.
#[cfg(feature = "http-client")]
fn error_chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut parts: Vec<String> = vec![e.to_string()];
    let mut source = e.source();
    while let Some(inner) = source {
        let said = inner.to_string();
        if !parts.iter().any(|p| p.contains(&said)) {
            parts.push(said);
        }
        source = inner.source();
    }
    parts.join(": ")
}

// The tests talk to real receivers over the HTTP client.
#[cfg(all(test, feature = "http-client"))]
mod tests;
