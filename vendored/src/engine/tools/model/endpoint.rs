//! Where a model step's request goes and with what credentials: the step's
//! own settings win over the spec's `model:` block, and `${NAME}` references
//! resolve here, at call time.

use std::error::Error as _;
use std::time::Duration;

use super::ModelError;
use crate::domain::spec::{ModelConfig, ModelStep};
use crate::engine::tools::template::CallSecrets;
use crate::support::secrets::Redactor;

pub const DEFAULT_BASE_URL: &str = "https://api.openai.com/v1";
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);

/// One resolved endpoint. Deliberately not `Debug`: it holds the key.
pub(super) struct Endpoint {
    pub url: reqwest::Url,
    /// `host[:port]`: what errors name (never the full URL, which may carry
    /// credentials in its user info or query).
    pub host: String,
    pub api_key: Option<String>,
    pub model: String,
    pub timeout: Duration,
    /// Every secret value resolved for this call.
    pub redactor: Redactor,
}

impl Endpoint {
    pub(super) fn resolve(
        step: &ModelStep,
        defaults: Option<&ModelConfig>,
        secrets: &mut CallSecrets,
    ) -> Result<Endpoint, ModelError> {
        let setting = |own: &Option<String>, shared: fn(&ModelConfig) -> &Option<String>| {
            own.clone()
                .or_else(|| defaults.and_then(|d| shared(d).clone()))
        };
        let model = resolve("name", setting(&step.name, |d| &d.name), secrets)?
            .ok_or(ModelError::NoModelName)?;
        let written_url = setting(&step.base_url, |d| &d.base_url);
        let base_url = resolve("base_url", written_url.clone(), secrets)?;
        let api_key = resolve("api_key", setting(&step.api_key, |d| &d.api_key), secrets)?;
        let (url, host) = chat_completions_url(
            base_url.as_deref().unwrap_or(DEFAULT_BASE_URL),
            written_url.as_deref().unwrap_or(DEFAULT_BASE_URL),
        )?;
        let timeout = step
            .timeout
            .or_else(|| defaults.and_then(|d| d.timeout))
            .unwrap_or(DEFAULT_TIMEOUT);
        Ok(Endpoint {
            url,
            host,
            api_key,
            model,
            timeout,
            redactor: secrets.redactor(),
        })
    }

    /// A failure to send or to read the reply.
    pub(super) fn transport(&self, e: &reqwest::Error) -> ModelError {
        if e.is_timeout() {
            return ModelError::Timeout {
                host: self.host.clone(),
                after: self.timeout,
            };
        }
        ModelError::Unreachable {
            host: self.host.clone(),
            reason: self.redactor.text(&causes(e)),
        }
    }

    pub(super) fn bad_reply(&self, problem: String) -> ModelError {
        ModelError::BadReply {
            host: self.host.clone(),
            problem,
        }
    }
}

/// Resolve one setting; an empty value counts as unset, so
/// `${OPENAI_BASE_URL:-}` falls back to the default.
fn resolve(
    what: &'static str,
    written: Option<String>,
    secrets: &mut CallSecrets,
) -> Result<Option<String>, ModelError> {
    let Some(written) = written else {
        return Ok(None);
    };
    let value = secrets.literal(&written).map_err(|e| ModelError::Setting {
        what,
        message: e.message,
    })?;
    let value = value.trim();
    Ok((!value.is_empty()).then(|| value.to_string()))
}

/// `{base_url}/chat/completions`, tolerating a trailing slash.
fn chat_completions_url(
    base_url: &str,
    written: &str,
) -> Result<(reqwest::Url, String), ModelError> {
    let bad = |reason: String| ModelError::BadBaseUrl {
        base_url: written.to_string(),
        reason,
    };
    let full = format!("{}/chat/completions", base_url.trim_end_matches('/'));
    let url = reqwest::Url::parse(&full).map_err(|e| bad(e.to_string()))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(bad(format!(
            "scheme {:?} is not http or https",
            url.scheme()
        )));
    }
    let Some(host) = url.host_str() else {
        return Err(bad("no host".into()));
    };
    let host = match url.port() {
        Some(port) => format!("{host}:{port}"),
        None => host.to_string(),
    };
    Ok((url, host))
}

/// The causes of a transport error, without the URL reqwest puts in its own
/// message.
fn causes(e: &reqwest::Error) -> String {
    let mut parts = Vec::new();
    let mut source = e.source();
    while let Some(cause) = source {
        let text = cause.to_string();
        // hyper nests the same message at several levels.
        if parts.last() != Some(&text) {
            parts.push(text);
        }
        source = cause.source();
    }
    if parts.is_empty() {
        "the request failed".to_string()
    } else {
        parts.join(": ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_trailing_slash_is_tolerated_and_the_host_keeps_its_port() {
        let (url, host) =
            chat_completions_url("http://127.0.0.1:8080/v1/", "${BASE}").expect("valid");
        assert_eq!(url.as_str(), "http://127.0.0.1:8080/v1/chat/completions");
        assert_eq!(host, "127.0.0.1:8080");
        let (url, host) = chat_completions_url(DEFAULT_BASE_URL, DEFAULT_BASE_URL).expect("ok");
        assert_eq!(url.as_str(), "https://api.openai.com/v1/chat/completions");
        assert_eq!(host, "api.openai.com");
    }

    #[test]
    fn a_bad_base_url_is_shown_as_written() {
        let Err(err) = chat_completions_url("ftp://x/v1", "${BASE}") else {
            panic!("ftp accepted")
        };
        let message = err.to_string();
        assert!(message.contains("${BASE}"), "{message}");
        assert!(message.contains("\"ftp\""), "{message}");
    }
}
