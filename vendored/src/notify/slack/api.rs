//! The Slack Web API calls tollgate makes (`chat.postMessage`,
//! `chat.update`) and replies through an interaction's `response_url`.
//!
//! Slack answers most failures with HTTP 200 and `{"ok": false, "error":
//! "..."}`, so the body decides, not the status. The bot token goes in the
//! `Authorization` header only; no error built here contains it.

use std::time::Duration;

use serde_json::Value;

/// Overrides the API base URL (tests point it at a local stub).
pub use crate::support::env::SLACK_API_BASE as API_BASE_ENV;
pub const DEFAULT_API_BASE: &str = "https://slack.com/api";

/// One call's budget. Slack answers in well under a second; a call that
/// takes this long is treated as failed and retried.
pub const CALL_TIMEOUT: Duration = Duration::from_secs(10);

/// Why a Slack call failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SlackError {
    /// A `${NAME}` the call needs is not set, or resolves to nothing.
    #[error("{0}")]
    Config(String),
    /// `{"ok": false, "error": ...}`.
    #[error("Slack refused {method}: {error}")]
    Api { method: &'static str, error: String },
    /// HTTP 429 or `ratelimited`.
    #[error("Slack is rate limiting {method}")]
    RateLimited {
        method: &'static str,
        retry_after: Option<Duration>,
    },
    #[error("Slack answered {method} with HTTP {status}")]
    Status { method: &'static str, status: u16 },
    #[error("cannot reach Slack for {method}: {detail}")]
    Network {
        method: &'static str,
        detail: String,
    },
    #[error("Slack's answer to {method} is not valid: {detail}")]
    BadReply {
        method: &'static str,
        detail: String,
    },
}

/// Slack `error` codes that go away by themselves.
const TRANSIENT_ERRORS: &[&str] = &[
    "ratelimited",
    "internal_error",
    "fatal_error",
    "service_unavailable",
    "request_timeout",
];

impl SlackError {
    /// True when the same call may succeed later without anyone changing
    /// anything (an outage, a rate limit); false for a bad token, an
    /// unknown channel, a missing scope.
    pub fn is_transient(&self) -> bool {
        match self {
            SlackError::Config(_) => false,
            SlackError::Api { error, .. } => TRANSIENT_ERRORS.contains(&error.as_str()),
            SlackError::RateLimited { .. }
            | SlackError::Network { .. }
            | SlackError::BadReply { .. } => true,
            SlackError::Status { status, .. } => *status == 429 || *status >= 500,
        }
    }

    /// How long Slack asked us to wait, if it did.
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            SlackError::RateLimited { retry_after, .. } => *retry_after,
            _ => None,
        }
    }
}

/// Where a posted message is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PostedMessage {
    /// The channel id (a spec may name the channel `#refunds`; edits need the id).
    pub channel: String,
    pub ts: String,
}

/// A Slack Web API client.
#[derive(Clone)]
pub struct SlackApi {
    #[cfg(feature = "http-client")]
    http: reqwest::Client,
    #[cfg(feature = "http-client")]
    base: String,
}

impl SlackApi {
    #[cfg(feature = "http-client")]
    pub fn new(http: reqwest::Client, base: &str) -> SlackApi {
        SlackApi {
            http,
            base: base.trim_end_matches('/').to_string(),
        }
    }

    /// The base from [`API_BASE_ENV`], else [`DEFAULT_API_BASE`].
    pub fn base_from_env() -> String {
        std::env::var(API_BASE_ENV)
            .ok()
            .filter(|b| !b.trim().is_empty())
            .unwrap_or_else(|| DEFAULT_API_BASE.to_string())
    }

    pub async fn post_message(
        &self,
        token: &str,
        body: &Value,
    ) -> Result<PostedMessage, SlackError> {
        const METHOD: &str = "chat.postMessage";
        let reply = self.call(METHOD, token, body).await?;
        let field = |name: &str| {
            reply
                .get(name)
                .and_then(Value::as_str)
                .filter(|v| !v.is_empty())
                .map(str::to_string)
                .ok_or_else(|| SlackError::BadReply {
                    method: METHOD,
                    detail: format!("no {name:?} in the reply"),
                })
        };
        Ok(PostedMessage {
            channel: field("channel")?,
            ts: field("ts")?,
        })
    }

    pub async fn update_message(&self, token: &str, body: &Value) -> Result<(), SlackError> {
        self.call("chat.update", token, body).await.map(drop)
    }

    /// POST `body` to an interaction's `response_url` (no token: the URL
    /// is the credential, valid for 30 minutes).
    #[cfg(not(feature = "http-client"))]
    pub async fn respond(&self, _response_url: &str, _body: &Value) -> Result<(), SlackError> {
        Err(left_out())
    }

    #[cfg(feature = "http-client")]
    pub async fn respond(&self, response_url: &str, body: &Value) -> Result<(), SlackError> {
        const METHOD: &str = "response_url";
        let response = self
            .http
            .post(response_url)
            .header("Content-Type", "application/json; charset=utf-8")
            .body(body.to_string())
            .timeout(CALL_TIMEOUT)
            .send()
            .await
            .map_err(|e| network(METHOD, &e))?;
        let status = response.status().as_u16();
        if response.status().is_success() {
            Ok(())
        } else if status == 429 {
            Err(SlackError::RateLimited {
                method: METHOD,
                retry_after: retry_after(response.headers()),
            })
        } else {
            Err(SlackError::Status {
                method: METHOD,
                status,
            })
        }
    }

    #[cfg(not(feature = "http-client"))]
    async fn call(
        &self,
        _method: &'static str,
        _token: &str,
        _body: &Value,
    ) -> Result<Value, SlackError> {
        Err(left_out())
    }

    #[cfg(feature = "http-client")]
    async fn call(
        &self,
        method: &'static str,
        token: &str,
        body: &Value,
    ) -> Result<Value, SlackError> {
        let response = self
            .http
            .post(format!("{}/{method}", self.base))
            .header("Authorization", format!("Bearer {token}"))
            .header("Content-Type", "application/json; charset=utf-8")
            .body(body.to_string())
            .timeout(CALL_TIMEOUT)
            .send()
            .await
            .map_err(|e| network(method, &e))?;
        let status = response.status().as_u16();
        if status == 429 {
            return Err(SlackError::RateLimited {
                method,
                retry_after: retry_after(response.headers()),
            });
        }
        let wait = retry_after(response.headers());
        if !response.status().is_success() {
            return Err(SlackError::Status { method, status });
        }
        let bytes = response.bytes().await.map_err(|e| network(method, &e))?;
        let reply: Value = serde_json::from_slice(&bytes).map_err(|e| SlackError::BadReply {
            method,
            detail: format!("not JSON ({e})"),
        })?;
        if reply.get("ok").and_then(Value::as_bool) == Some(true) {
            return Ok(reply);
        }
        let error = reply
            .get("error")
            .and_then(Value::as_str)
            .unwrap_or("unknown_error")
            // Slack's codes are short identifiers; keep a hostile or broken
            // reply from filling logs and the store.
            .chars()
            .take(100)
            .collect::<String>();
        if error == "ratelimited" {
            return Err(SlackError::RateLimited {
                method,
                retry_after: wait,
            });
        }
        Err(SlackError::Api { method, error })
    }
}

/// Slack in a build without the HTTP client. No `SlackApi` is made there
/// (`SlackNotifier::for_spec` refuses first); this keeps the calls typed.
#[cfg(not(feature = "http-client"))]
fn left_out() -> SlackError {
    SlackError::Config(
        crate::domain::spec::MissingFeature {
            feature: crate::domain::spec::Feature::HttpClient,
            at: "approvals.notify.slack".to_string(),
        }
        .to_string(),
    )
}

/// A transport error, described without the request's headers. reqwest's
/// message names the URL, which holds no credential (the token travels in
/// a header).
#[cfg(feature = "http-client")]
fn network(method: &'static str, e: &reqwest::Error) -> SlackError {
    let kind = if e.is_timeout() {
        "timed out"
    } else if e.is_connect() {
        "connection failed"
    } else {
        "request failed"
    };
    SlackError::Network {
        method,
        detail: format!("{kind}: {e}"),
    }
}

/// `Retry-After` (seconds or an HTTP date), capped so a broken header
/// cannot park a retry for days.
#[cfg(feature = "http-client")]
fn retry_after(headers: &reqwest::header::HeaderMap) -> Option<Duration> {
    let value = headers.get("retry-after")?.to_str().ok()?;
    let wait = crate::support::backoff::retry_after(value, std::time::SystemTime::now())?;
    Some(wait.min(Duration::from_secs(3600)))
}

#[cfg(all(test, feature = "http-client"))]
mod tests {
    use super::*;

    #[test]
    fn transient_failures_are_told_apart_from_configuration_mistakes() {
        let api = |error: &str| SlackError::Api {
            method: "chat.postMessage",
            error: error.into(),
        };
        assert!(api("ratelimited").is_transient());
        assert!(api("internal_error").is_transient());
        assert!(!api("invalid_auth").is_transient());
        assert!(!api("channel_not_found").is_transient());
        assert!(
            SlackError::Status {
                method: "chat.update",
                status: 503
            }
            .is_transient()
        );
        assert!(
            SlackError::Status {
                method: "chat.update",
                status: 429
            }
            .is_transient()
        );
        assert!(
            !SlackError::Status {
                method: "chat.update",
                status: 404
            }
            .is_transient()
        );
        assert!(!SlackError::Config("x".into()).is_transient());
    }

    #[test]
    fn retry_after_takes_seconds_or_a_date_and_is_capped() {
        let mut headers = reqwest::header::HeaderMap::new();
        headers.insert("retry-after", "30".parse().unwrap());
        assert_eq!(retry_after(&headers), Some(Duration::from_secs(30)));
        headers.insert("retry-after", "999999".parse().unwrap());
        assert_eq!(retry_after(&headers), Some(Duration::from_secs(3600)));
        let later = std::time::SystemTime::now() + Duration::from_secs(7200);
        headers.insert(
            "retry-after",
            httpdate::fmt_http_date(later).parse().unwrap(),
        );
        assert_eq!(retry_after(&headers), Some(Duration::from_secs(3600)));
    }
}
