//! Webhook signatures, in one header `X-Tollgate-Signature`, checked in
//! constant time. Two forms:
//!
//! - `sha256=<hex HMAC-SHA256 of the raw body>`: the plain form. It proves
//!   who sent the body but not when, so a captured request can be replayed.
//! - `t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<raw body>">`: the
//!   timestamped form (Stripe's scheme). The time is inside the MAC, and a
//!   request more than `REPLAY_WINDOW_SECS` from the server's clock is
//!   refused, so a captured request stops working after the window; within
//!   it, the caller claims `Verified::Timestamped::replay_key` in the store
//!   so each signed request is taken once. Several `v1=` entries may be sent
//!   (one per secret, while rotating); one match is enough.

use sha2::{Digest, Sha256};

use crate::support::hmac::HmacKey;

pub const SIGNATURE_HEADER: &str = "x-tollgate-signature";

/// How far (either way) a timestamped signature's `t` may be from now.
pub const REPLAY_WINDOW_SECS: i64 = 300;

/// Why a signature was refused. The messages say what to send, never what
/// the right signature would have been.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum WebhookSignatureError {
    #[error(
        "missing X-Tollgate-Signature: send t=<unix time>,v1=<hex HMAC-SHA256 of \"<t>.<body>\"> or sha256=<hex HMAC-SHA256 of the body>"
    )]
    Missing,
    #[error("X-Tollgate-Signature is malformed: expected t=<unix time>,v1=<hex> or sha256=<hex>")]
    Malformed,
    #[error(
        "X-Tollgate-Signature's t= is more than {} seconds from the server's time (a replay, or a clock that is off)",
        REPLAY_WINDOW_SECS
    )]
    Stale,
    #[error("X-Tollgate-Signature does not match the body")]
    Mismatch,
}

/// Which form a valid signature had.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verified {
    Plain,
    /// `replay_key` names this exact request (hex SHA-256 of the signed
    /// `"<t>.<body>"`, not the signature): claim it to take it once.
    Timestamped {
        replay_key: String,
    },
}

/// Check `header` against `body` under `secret` at time `now` (unix
/// seconds), accepting either form.
pub fn check(
    secret: &[u8],
    body: &[u8],
    header: Option<&str>,
    now: i64,
) -> Result<Verified, WebhookSignatureError> {
    let header = header.map(str::trim).filter(|h| !h.is_empty());
    let Some(header) = header else {
        return Err(WebhookSignatureError::Missing);
    };
    if let Some(hex) = header.strip_prefix("sha256=") {
        let claimed = crate::support::hex::decode(hex).ok_or(WebhookSignatureError::Malformed)?;
        return if HmacKey::new(secret).verify(&[body], &claimed) {
            Ok(Verified::Plain)
        } else {
            Err(WebhookSignatureError::Mismatch)
        };
    }
    let mut timestamp = None;
    let mut claimed = Vec::new();
    for part in header.split(',') {
        let (name, value) = part
            .trim()
            .split_once('=')
            .ok_or(WebhookSignatureError::Malformed)?;
        match name.trim() {
            "t" if timestamp.is_none() => {
                let t: i64 = value
                    .trim()
                    .parse()
                    .map_err(|_| WebhookSignatureError::Malformed)?;
                timestamp = Some((value.trim(), t));
            }
            "t" => return Err(WebhookSignatureError::Malformed),
            "v1" => claimed.push(
                crate::support::hex::decode(value.trim())
                    .ok_or(WebhookSignatureError::Malformed)?,
            ),
            // Other schemes (v0, a future v2) are ignored, as in Stripe's.
            _ => {}
        }
    }
    let (Some((t_text, t)), false) = (timestamp, claimed.is_empty()) else {
        return Err(WebhookSignatureError::Malformed);
    };
    if now.abs_diff(t) > REPLAY_WINDOW_SECS.unsigned_abs() {
        return Err(WebhookSignatureError::Stale);
    }
    // The exact digits sent are what was signed ("0170" and "170" differ).
    let signed = [t_text.as_bytes(), b".", body];
    let key = HmacKey::new(secret);
    if claimed.iter().any(|c| key.verify(&signed, c)) {
        let mut digest = Sha256::new();
        for part in signed {
            digest.update(part);
        }
        Ok(Verified::Timestamped {
            replay_key: crate::support::hex::encode(&digest.finalize()),
        })
    } else {
        Err(WebhookSignatureError::Mismatch)
    }
}

/// True when `header` is a valid plain (`sha256=`) signature of `body`, or
/// a timestamped one within the window of the current time.
pub fn verify(secret: &[u8], body: &[u8], header: Option<&str>) -> bool {
    check(
        secret,
        body,
        header,
        crate::support::time::now().timestamp(),
    )
    .is_ok()
}

fn hmac_hex(secret: &[u8], parts: &[&[u8]]) -> String {
    crate::support::hex::encode(&HmacKey::new(secret).sign(parts))
}

/// The plain header value a sender computes (for clients and tests).
pub fn sign(secret: &[u8], body: &[u8]) -> String {
    format!("sha256={}", hmac_hex(secret, &[body]))
}

/// The timestamped header value for time `t` (unix seconds).
pub fn sign_at(secret: &[u8], body: &[u8], t: i64) -> String {
    let t = t.to_string();
    format!("t={t},v1={}", hmac_hex(secret, &[t.as_bytes(), b".", body]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_vector() {
        // RFC 4231 test case 2.
        let sig = sign(b"Jefe", b"what do ya want for nothing?");
        assert_eq!(
            sig,
            "sha256=5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
        assert!(verify(b"Jefe", b"what do ya want for nothing?", Some(&sig)));
        assert!(verify(
            b"Jefe",
            b"what do ya want for nothing?",
            Some(&sig.to_uppercase().replace("SHA256=", "sha256="))
        ));
    }

    #[test]
    fn rejects_missing_malformed_and_wrong() {
        let body = b"{}";
        let good = sign(b"k", body);
        assert!(!verify(b"k", body, None));
        assert!(!verify(b"k", body, Some("")));
        assert!(!verify(
            b"k",
            body,
            Some(good.trim_start_matches("sha256="))
        ));
        assert!(!verify(b"k", body, Some("sha256=zz")));
        assert!(!verify(b"k", body, Some("sha256=abc")));
        assert!(!verify(b"other", body, Some(&good)));
        assert!(!verify(b"k", b"{ }", Some(&good)));
    }

    #[test]
    fn timestamped_form_binds_the_time() {
        let (body, now) = (br#"{"a":1}"#, 1_700_000_000);
        let good = sign_at(b"k", body, now);
        assert!(check(b"k", body, Some(&good), now).is_ok());
        // Anywhere inside the window, either side.
        assert!(check(b"k", body, Some(&good), now + 300).is_ok());
        assert!(check(b"k", body, Some(&good), now - 300).is_ok());
        // A replay after the window.
        assert_eq!(
            check(b"k", body, Some(&good), now + 301),
            Err(WebhookSignatureError::Stale)
        );
        // The time cannot be moved: it is inside the MAC.
        let moved = good.replace(&format!("t={now}"), &format!("t={}", now + 200));
        assert_eq!(
            check(b"k", body, Some(&moved), now + 200),
            Err(WebhookSignatureError::Mismatch)
        );
        // Another body, another secret.
        assert_eq!(
            check(b"k", b"{}", Some(&good), now),
            Err(WebhookSignatureError::Mismatch)
        );
        assert_eq!(
            check(b"other", body, Some(&good), now),
            Err(WebhookSignatureError::Mismatch)
        );
        // Rotation: one of several v1 entries matches; spaces are allowed.
        let other = sign_at(b"old", body, now);
        let both = format!("{}, {}", good, other.split(',').nth(1).unwrap());
        assert!(check(b"old", body, Some(&both), now).is_ok());
        assert!(check(b"k", body, Some(&both), now).is_ok());
    }

    #[test]
    fn the_replay_key_names_the_request_not_the_secret() {
        let (body, now) = (br#"{"a":1}"#, 1_700_000_000);
        let key = |secret: &[u8], body: &[u8], t: i64| match check(
            secret,
            body,
            Some(&sign_at(secret, body, t)),
            now,
        ) {
            Ok(Verified::Timestamped { replay_key }) => replay_key,
            other => panic!("{other:?}"),
        };
        assert_eq!(key(b"k", body, now), key(b"other", body, now));
        assert_ne!(key(b"k", body, now), key(b"k", body, now + 1));
        assert_ne!(key(b"k", body, now), key(b"k", b"{}", now));
        assert_eq!(
            check(b"k", body, Some(&sign(b"k", body)), now),
            Ok(Verified::Plain)
        );
    }

    #[test]
    fn timestamped_form_refuses_malformed_headers() {
        let body = b"{}";
        let now = 1_700_000_000;
        let v1 = sign_at(b"k", body, now);
        let hex = v1.split("v1=").nth(1).unwrap();
        for bad in [
            format!("v1={hex}"),
            format!("t={now}"),
            format!("t=soon,v1={hex}"),
            format!("t={now},t={now},v1={hex}"),
            format!("t={now},v1=zz"),
            format!("t={now},v1"),
            "t=99999999999999999999999,v1=00".to_string(),
            "garbage".to_string(),
        ] {
            assert_eq!(
                check(b"k", body, Some(&bad), now),
                Err(WebhookSignatureError::Malformed),
                "{bad}"
            );
        }
        assert_eq!(
            check(
                b"k",
                body,
                Some(&format!("t=-9223372036854775808,v1={hex}")),
                now
            ),
            Err(WebhookSignatureError::Stale)
        );
        assert_eq!(
            check(b"k", body, Some("  "), now),
            Err(WebhookSignatureError::Missing)
        );
    }
}
