//! When an HTTP tool call is tried again, and how long it waits first.
//!
//! Without `retry:` only GET and HEAD are retried, and only on failures that
//! say nothing reached the application (connection errors, 502/503/504):
//! repeating a POST could repeat its side effect. `retry: {attempts,
//! backoff}` opts any method in, also for timeouts, 429 and every 5xx; a
//! call made after an approval carries the same Idempotency-Key on every
//! attempt, so a downstream that honours it applies it once.

use std::time::Duration;

use crate::spec::HttpToolSpec;

/// Attempts (the first call included) for GET/HEAD without `retry:`.
const SAFE_ATTEMPTS: u32 = 3;
const SAFE_BACKOFF: Duration = Duration::from_millis(200);
/// No single wait is longer than this, whatever the backoff or Retry-After.
const MAX_WAIT: Duration = Duration::from_secs(30);

/// How one attempt ended, as far as retrying is concerned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Failure {
    /// The exchange broke: refused, reset, DNS, TLS, a cut-off body.
    Transport,
    Timeout,
    Status(u16),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Scope {
    /// Failures where the request most likely never reached the application.
    Safe,
    /// Connection errors, timeouts, 429 and 5xx (`retry:` in the spec).
    OptedIn,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Total attempts, the first call included.
    pub attempts: u32,
    backoff: Duration,
    scope: Scope,
}

impl RetryPolicy {
    pub fn for_tool(spec: &HttpToolSpec) -> RetryPolicy {
        if let Some(retry) = &spec.retry {
            return RetryPolicy {
                attempts: retry.attempts.max(1),
                backoff: retry.backoff,
                scope: Scope::OptedIn,
            };
        }
        let idempotent_method = matches!(spec.method.as_str(), "GET" | "HEAD");
        RetryPolicy {
            attempts: if idempotent_method { SAFE_ATTEMPTS } else { 1 },
            backoff: SAFE_BACKOFF,
            scope: Scope::Safe,
        }
    }

    /// Whether `failure` on attempt `attempt` (1-based) is tried again.
    pub fn should_retry(&self, attempt: u32, failure: Failure) -> bool {
        attempt < self.attempts && self.covers(failure)
    }

    fn covers(&self, failure: Failure) -> bool {
        match (self.scope, failure) {
            (_, Failure::Transport) => true,
            (Scope::Safe, Failure::Timeout) => false,
            (Scope::Safe, Failure::Status(s)) => matches!(s, 502..=504),
            (Scope::OptedIn, Failure::Timeout) => true,
            (Scope::OptedIn, Failure::Status(s)) => s == 429 || (500..=599).contains(&s),
        }
    }

    /// The wait before attempt `attempt + 1`: exponential from the backoff,
    /// or the server's Retry-After when it asks for longer.
    pub fn wait(&self, attempt: u32, retry_after: Option<Duration>) -> Duration {
        let factor = 2u32.saturating_pow(attempt.saturating_sub(1));
        let exponential = self.backoff.saturating_mul(factor).min(MAX_WAIT);
        match retry_after {
            Some(asked) => exponential.max(asked.min(MAX_WAIT)),
            None => exponential,
        }
    }
}

/// `Retry-After` in seconds (the HTTP-date form is not worth a date parser here).
pub fn retry_after(headers: &reqwest::header::HeaderMap) -> Option<Duration> {
    headers
        .get(reqwest::header::RETRY_AFTER)?
        .to_str()
        .ok()?
        .trim()
        .parse::<u64>()
        .ok()
        .map(Duration::from_secs)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::{IdempotencySpec, RetrySpec};

    fn spec(method: &str, retry: Option<RetrySpec>) -> HttpToolSpec {
        HttpToolSpec {
            method: method.into(),
            url: "http://x".into(),
            headers: Default::default(),
            query: Default::default(),
            json: None,
            body: None,
            timeout: None,
            ok_status: vec![],
            retry,
            idempotency: IdempotencySpec::default(),
        }
    }

    #[test]
    fn get_retries_only_what_never_reached_the_application() {
        let p = RetryPolicy::for_tool(&spec("GET", None));
        assert!(p.should_retry(1, Failure::Transport));
        assert!(p.should_retry(2, Failure::Status(503)));
        assert!(!p.should_retry(3, Failure::Status(503)), "bounded");
        assert!(!p.should_retry(1, Failure::Status(500)));
        assert!(!p.should_retry(1, Failure::Status(429)));
        assert!(!p.should_retry(1, Failure::Timeout));
    }

    #[test]
    fn post_is_never_retried_unless_asked() {
        let p = RetryPolicy::for_tool(&spec("POST", None));
        assert!(!p.should_retry(1, Failure::Transport));
        assert!(!p.should_retry(1, Failure::Status(503)));
        let asked = RetryPolicy::for_tool(&spec(
            "POST",
            Some(RetrySpec {
                attempts: 3,
                backoff: Duration::from_millis(10),
            }),
        ));
        for f in [
            Failure::Transport,
            Failure::Timeout,
            Failure::Status(429),
            Failure::Status(500),
        ] {
            assert!(asked.should_retry(2, f), "{f:?}");
        }
        assert!(!asked.should_retry(3, Failure::Status(500)));
        assert!(!asked.should_retry(1, Failure::Status(404)));
    }

    #[test]
    fn waits_grow_exponentially_and_are_capped() {
        let p = RetryPolicy::for_tool(&spec(
            "GET",
            Some(RetrySpec {
                attempts: 10,
                backoff: Duration::from_millis(10),
            }),
        ));
        assert_eq!(p.wait(1, None), Duration::from_millis(10));
        assert_eq!(p.wait(3, None), Duration::from_millis(40));
        assert_eq!(
            p.wait(1, Some(Duration::from_secs(2))),
            Duration::from_secs(2)
        );
        assert_eq!(p.wait(1, Some(Duration::from_secs(3600))), MAX_WAIT);
        assert_eq!(p.wait(40, None), MAX_WAIT);
    }
}
