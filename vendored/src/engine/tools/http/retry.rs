//! When an HTTP tool call is tried again, and how long it waits first.
//!
//! Without `retry:` only GET and HEAD are retried, and only on failures that
//! say nothing reached the application (connection errors, 502/503/504):
//! repeating a POST could repeat its side effect. `retry: {attempts,
//! backoff}` opts any method in, also for timeouts, 429 and every 5xx; a
//! call that may change something carries the same Idempotency-Key on every
//! attempt, so a downstream that honours it applies it once. Waits are
//! jittered (`crate::support::backoff`) so many runs retrying one service spread out.

use std::time::Duration;

use crate::domain::spec::HttpToolSpec;
use crate::support::backoff::Backoff;

/// Attempts (the first call included) for GET/HEAD without `retry:`.
const SAFE_ATTEMPTS: u32 = 3;
const SAFE_BACKOFF: Duration = Duration::from_millis(200);
/// No single wait is longer than this, whatever the backoff or Retry-After.
const MAX_WAIT: Duration = Duration::from_secs(30);

/// How one attempt ended, as far as retrying is concerned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AttemptFailure {
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
    pub fn should_retry(&self, attempt: u32, failure: AttemptFailure) -> bool {
        attempt < self.attempts && self.covers(failure)
    }

    fn covers(&self, failure: AttemptFailure) -> bool {
        match (self.scope, failure) {
            (_, AttemptFailure::Transport) => true,
            (Scope::Safe, AttemptFailure::Timeout) => false,
            (Scope::Safe, AttemptFailure::Status(s)) => matches!(s, 502..=504),
            (Scope::OptedIn, AttemptFailure::Timeout) => true,
            (Scope::OptedIn, AttemptFailure::Status(s)) => s == 429 || (500..=599).contains(&s),
        }
    }

    /// The jittered schedule for one call's attempts: the ceiling doubles
    /// from the backoff, at most [`MAX_WAIT`].
    pub fn backoff(&self) -> Backoff {
        Backoff::new(self.backoff, MAX_WAIT)
    }

    /// The wait before attempt `attempt + 1`: a jittered exponential wait
    /// from `backoff` (see [`crate::support::backoff`]), or the server's Retry-After
    /// when it asks for longer.
    pub fn wait(
        &self,
        backoff: &mut Backoff,
        attempt: u32,
        retry_after: Option<Duration>,
    ) -> Duration {
        let jittered = backoff.wait_after(attempt);
        match retry_after {
            Some(asked) => jittered.max(asked.min(MAX_WAIT)),
            None => jittered,
        }
    }
}

/// `Retry-After`, in seconds or as an HTTP date.
pub fn retry_after(headers: &reqwest::header::HeaderMap) -> Option<Duration> {
    let value = headers.get(reqwest::header::RETRY_AFTER)?.to_str().ok()?;
    crate::support::backoff::retry_after(value, std::time::SystemTime::now())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::spec::{IdempotencySpec, RetrySpec};

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
        assert!(p.should_retry(1, AttemptFailure::Transport));
        assert!(p.should_retry(2, AttemptFailure::Status(503)));
        assert!(!p.should_retry(3, AttemptFailure::Status(503)), "bounded");
        assert!(!p.should_retry(1, AttemptFailure::Status(500)));
        assert!(!p.should_retry(1, AttemptFailure::Status(429)));
        assert!(!p.should_retry(1, AttemptFailure::Timeout));
    }

    #[test]
    fn post_is_never_retried_unless_asked() {
        let p = RetryPolicy::for_tool(&spec("POST", None));
        assert!(!p.should_retry(1, AttemptFailure::Transport));
        assert!(!p.should_retry(1, AttemptFailure::Status(503)));
        let asked = RetryPolicy::for_tool(&spec(
            "POST",
            Some(RetrySpec {
                attempts: 3,
                backoff: Duration::from_millis(10),
            }),
        ));
        for f in [
            AttemptFailure::Transport,
            AttemptFailure::Timeout,
            AttemptFailure::Status(429),
            AttemptFailure::Status(500),
        ] {
            assert!(asked.should_retry(2, f), "{f:?}");
        }
        assert!(!asked.should_retry(3, AttemptFailure::Status(500)));
        assert!(!asked.should_retry(1, AttemptFailure::Status(404)));
    }

    #[test]
    fn waits_are_jittered_under_a_doubling_ceiling_and_capped() {
        let p = RetryPolicy::for_tool(&spec(
            "GET",
            Some(RetrySpec {
                attempts: 10,
                backoff: Duration::from_millis(10),
            }),
        ));
        let mut b = p.backoff();
        for _ in 0..100 {
            assert!(p.wait(&mut b, 1, None) <= Duration::from_millis(10));
            assert!(p.wait(&mut b, 3, None) <= Duration::from_millis(40));
            assert!(p.wait(&mut b, 40, None) <= MAX_WAIT);
            // Retry-After is a floor: never retried sooner than asked.
            assert_eq!(
                p.wait(&mut b, 1, Some(Duration::from_secs(2))),
                Duration::from_secs(2)
            );
            assert_eq!(p.wait(&mut b, 1, Some(Duration::from_secs(3600))), MAX_WAIT);
        }
    }

    #[test]
    fn retry_after_is_read_in_seconds_or_as_an_http_date() {
        let mut headers = reqwest::header::HeaderMap::new();
        headers.insert("retry-after", "7".parse().unwrap());
        assert_eq!(retry_after(&headers), Some(Duration::from_secs(7)));
        let soon = std::time::SystemTime::now() + Duration::from_secs(600);
        headers.insert(
            "retry-after",
            httpdate::fmt_http_date(soon).parse().unwrap(),
        );
        let wait = retry_after(&headers).unwrap();
        assert!(
            wait > Duration::from_secs(500) && wait <= Duration::from_secs(600),
            "{wait:?}"
        );
        headers.insert("retry-after", "later".parse().unwrap());
        assert_eq!(retry_after(&headers), None);
    }
}
