//! Slack's request signatures (v0): `X-Slack-Signature: v0=<hex>`, the hex
//! HMAC-SHA256 of `v0:{X-Slack-Request-Timestamp}:{raw body}` under the
//! app's signing secret. The timestamp must be within five minutes of now,
//! either way, so a captured request cannot be replayed later.

use crate::support::hmac::HmacKey;

pub const TIMESTAMP_HEADER: &str = "x-slack-request-timestamp";
pub const SIGNATURE_HEADER: &str = "x-slack-signature";

/// How far (seconds, past or future) a request's timestamp may be from now.
pub const MAX_SKEW_SECS: i64 = 300;

/// Why a request is not from Slack (as far as we can tell). The messages
/// name what is wrong, never a secret or the expected signature.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum SlackSignatureError {
    #[error("the Slack signing secret is empty")]
    EmptySecret,
    #[error("missing X-Slack-Request-Timestamp")]
    MissingTimestamp,
    #[error("X-Slack-Request-Timestamp is not a number of seconds")]
    InvalidTimestamp,
    #[error("X-Slack-Request-Timestamp is more than 5 minutes from now")]
    Stale,
    #[error("missing X-Slack-Signature")]
    MissingSignature,
    #[error("X-Slack-Signature is not a v0 signature (v0=<hex>)")]
    UnsupportedVersion,
    #[error("X-Slack-Signature does not match the request")]
    Mismatch,
}

/// Check a request: `Ok` when `signature` signs `body` at `timestamp` under
/// `secret` and `timestamp` is within [`MAX_SKEW_SECS`] of `now_unix`.
pub fn verify(
    secret: &str,
    timestamp: Option<&str>,
    signature: Option<&str>,
    body: &[u8],
    now_unix: i64,
) -> Result<(), SlackSignatureError> {
    if secret.is_empty() {
        return Err(SlackSignatureError::EmptySecret);
    }
    let timestamp = timestamp
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .ok_or(SlackSignatureError::MissingTimestamp)?;
    let sent_at: i64 = timestamp
        .parse()
        .map_err(|_| SlackSignatureError::InvalidTimestamp)?;
    if now_unix.abs_diff(sent_at) > MAX_SKEW_SECS.unsigned_abs() {
        return Err(SlackSignatureError::Stale);
    }
    let signature = signature
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .ok_or(SlackSignatureError::MissingSignature)?;
    let hex = signature
        .strip_prefix("v0=")
        .ok_or(SlackSignatureError::UnsupportedVersion)?;
    let claimed = crate::support::hex::decode(hex).ok_or(SlackSignatureError::Mismatch)?;
    if HmacKey::new(secret.as_bytes()).verify(&signed(timestamp, body), &claimed) {
        Ok(())
    } else {
        Err(SlackSignatureError::Mismatch)
    }
}

/// The `X-Slack-Signature` value Slack would send (for tests and tools).
pub fn sign(secret: &str, timestamp: &str, body: &[u8]) -> String {
    let mac = HmacKey::new(secret.as_bytes()).sign(&signed(timestamp, body));
    format!("v0={}", crate::support::hex::encode(&mac))
}

/// What v0 signs: `v0:{timestamp}:{body}`.
fn signed<'a>(timestamp: &'a str, body: &'a [u8]) -> [&'a [u8]; 4] {
    [b"v0:", timestamp.as_bytes(), b":", body]
}

#[cfg(test)]
mod tests {
    use super::*;

    // Slack's published example ("Verifying requests from Slack").
    const SECRET: &str = "8f742231b10e8888abcd99yyyzzz85a5";
    const TIMESTAMP: &str = "1531420618";
    const NOW: i64 = 1_531_420_618;
    const BODY: &str = "token=xyzz0WbapA4vBCDEFasx0q6G&team_id=T1DC2JH3J&team_domain=testteamnow&channel_id=G8PSS9T3V&channel_name=foobar&user_id=U2CERLKJA&user_name=roadrunner&command=%2Fwebhook-collect&text=&response_url=https%3A%2F%2Fhooks.slack.com%2Fcommands%2FT1DC2JH3J%2F397700885554%2F96rGlfmibIGlgcZRskXaIFfN&trigger_id=398738663015.47445629121.803a0bc887a14d10d2c447fce8b6703c";
    const EXPECTED: &str = "v0=a2114d57b48eac39b9ad189dd8316235a7b4a8d21a10bd27519666489c69b503";

    fn check(
        timestamp: Option<&str>,
        signature: Option<&str>,
        body: &[u8],
        now: i64,
    ) -> Result<(), SlackSignatureError> {
        verify(SECRET, timestamp, signature, body, now)
    }

    #[test]
    fn slacks_published_example_verifies() {
        assert_eq!(sign(SECRET, TIMESTAMP, BODY.as_bytes()), EXPECTED);
        assert_eq!(
            check(Some(TIMESTAMP), Some(EXPECTED), BODY.as_bytes(), NOW),
            Ok(())
        );
        // Within the window either way.
        assert_eq!(
            check(Some(TIMESTAMP), Some(EXPECTED), BODY.as_bytes(), NOW + 300),
            Ok(())
        );
        assert_eq!(
            check(Some(TIMESTAMP), Some(EXPECTED), BODY.as_bytes(), NOW - 300),
            Ok(())
        );
        // Hex case does not matter.
        let upper = format!("v0={}", EXPECTED[3..].to_uppercase());
        assert_eq!(
            check(Some(TIMESTAMP), Some(&upper), BODY.as_bytes(), NOW),
            Ok(())
        );
    }

    #[test]
    fn one_changed_byte_of_the_body_is_rejected() {
        let mut body = BODY.as_bytes().to_vec();
        let last = body.len() - 1;
        body[last] ^= 0x01;
        assert_eq!(
            check(Some(TIMESTAMP), Some(EXPECTED), &body, NOW),
            Err(SlackSignatureError::Mismatch)
        );
    }

    #[test]
    fn timestamps_more_than_five_minutes_away_are_rejected() {
        // The request is 301 s old.
        assert_eq!(
            check(Some(TIMESTAMP), Some(EXPECTED), BODY.as_bytes(), NOW + 301),
            Err(SlackSignatureError::Stale)
        );
        // The request claims to be from 301 s in the future.
        assert_eq!(
            check(Some(TIMESTAMP), Some(EXPECTED), BODY.as_bytes(), NOW - 301),
            Err(SlackSignatureError::Stale)
        );
        // Re-signing with a fresh-looking timestamp does not help an old
        // signature: the timestamp is part of what is signed.
        assert_eq!(
            check(Some("1531420700"), Some(EXPECTED), BODY.as_bytes(), NOW),
            Err(SlackSignatureError::Mismatch)
        );
    }

    #[test]
    fn missing_or_malformed_headers_are_rejected() {
        let body = BODY.as_bytes();
        assert_eq!(
            check(None, Some(EXPECTED), body, NOW),
            Err(SlackSignatureError::MissingTimestamp)
        );
        assert_eq!(
            check(Some(""), Some(EXPECTED), body, NOW),
            Err(SlackSignatureError::MissingTimestamp)
        );
        assert_eq!(
            check(Some("soon"), Some(EXPECTED), body, NOW),
            Err(SlackSignatureError::InvalidTimestamp)
        );
        assert_eq!(
            check(Some(TIMESTAMP), None, body, NOW),
            Err(SlackSignatureError::MissingSignature)
        );
        assert_eq!(
            check(Some(TIMESTAMP), Some(""), body, NOW),
            Err(SlackSignatureError::MissingSignature)
        );
        let v1 = EXPECTED.replacen("v0=", "v1=", 1);
        assert_eq!(
            check(Some(TIMESTAMP), Some(&v1), body, NOW),
            Err(SlackSignatureError::UnsupportedVersion)
        );
        assert_eq!(
            check(Some(TIMESTAMP), Some(&EXPECTED[3..]), body, NOW),
            Err(SlackSignatureError::UnsupportedVersion)
        );
        assert_eq!(
            check(Some(TIMESTAMP), Some("v0=zz"), body, NOW),
            Err(SlackSignatureError::Mismatch)
        );
        assert_eq!(
            check(Some(TIMESTAMP), Some("v0=abc"), body, NOW),
            Err(SlackSignatureError::Mismatch)
        );
        assert_eq!(
            check(
                Some(TIMESTAMP),
                Some(&EXPECTED[..EXPECTED.len() - 2]),
                body,
                NOW
            ),
            Err(SlackSignatureError::Mismatch)
        );
    }

    #[test]
    fn an_empty_secret_verifies_nothing() {
        let signed_with_empty = sign("", TIMESTAMP, BODY.as_bytes());
        assert_eq!(
            verify(
                "",
                Some(TIMESTAMP),
                Some(&signed_with_empty),
                BODY.as_bytes(),
                NOW
            ),
            Err(SlackSignatureError::EmptySecret)
        );
    }

    #[test]
    fn another_secret_does_not_verify() {
        assert_eq!(
            verify(
                "another-secret",
                Some(TIMESTAMP),
                Some(EXPECTED),
                BODY.as_bytes(),
                NOW
            ),
            Err(SlackSignatureError::Mismatch)
        );
    }
}
