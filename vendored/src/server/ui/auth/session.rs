//! Browser sessions: after a sign-in with an API token, the cookie
//! `tollgate_session` = `NAME.EXPIRY.MAC`.
//!
//! The MAC (HMAC-SHA256, hex) covers the name, the expiry (Unix seconds)
//! and the SHA-256 digest of the token used to sign in. Nothing is stored
//! server-side, so every process sharing the key accepts the cookie; and
//! since the token's digest is covered, removing or rotating that token in
//! `TOLLGATE_API_TOKENS` ends its sessions, as rotating the key ends all.
//!
//! The key: `TOLLGATE_SESSION_SECRET`, else one derived from the link
//! secret (`LinkSigner::derive_key`), else a random key per process (with a
//! warning: sessions then end on restart and hold on this server only).

use std::time::Duration;

use axum::http::HeaderMap;
use chrono::{DateTime, Utc};
use sha2::{Digest, Sha256};

use crate::server::http::auth::ApiTokens;
use crate::server::http::state::AppState;
use crate::support::hmac::{HmacKey, MAC_LEN};

/// The session cookie's name.
pub(crate) const COOKIE: &str = "tollgate_session";
/// Where the session key comes from first.
pub(crate) const SESSION_SECRET_ENV: &str = crate::support::env::SESSION_SECRET;
/// How long a session lasts.
pub(crate) const MAX_AGE: Duration = Duration::from_secs(12 * 3600);

/// The key sessions and CSRF tokens are signed with. Debug prints nothing
/// of it.
#[derive(Clone, Debug)]
pub(crate) struct SessionKey(HmacKey);

impl SessionKey {
    /// A key from an operator's secret (any length): hashed with a domain
    /// tag, so the same text used elsewhere gives another key.
    pub fn from_secret(secret: &str) -> SessionKey {
        let mut hasher = Sha256::new();
        hasher.update(b"tollgate-session-secret-v1\0");
        hasher.update(secret.as_bytes());
        SessionKey::from_bytes(hasher.finalize().into())
    }

    pub fn from_bytes(bytes: [u8; 32]) -> SessionKey {
        SessionKey(HmacKey::new(&bytes))
    }

    /// A random key for this process only.
    pub fn random() -> SessionKey {
        let mut bytes = [0u8; 32];
        bytes[..16].copy_from_slice(uuid::Uuid::new_v4().as_bytes());
        bytes[16..].copy_from_slice(uuid::Uuid::new_v4().as_bytes());
        // Two v4 UUIDs hold 244 random bits; hashing spreads them over the key.
        SessionKey::from_bytes(Sha256::digest(bytes).into())
    }

    /// HMAC-SHA256 over `parts`, each preceded by its length so that no two
    /// different lists of parts sign the same bytes.
    pub fn mac(&self, parts: &[&[u8]]) -> [u8; MAC_LEN] {
        let lengths = lengths_of(parts);
        self.0.sign(&length_prefixed(parts, &lengths))
    }

    /// Whether `presented` (hex) is the MAC over `parts`, compared in
    /// constant time.
    pub fn verify(&self, parts: &[&[u8]], presented: &str) -> bool {
        let Some(bytes) = crate::support::hex::decode(presented) else {
            return false;
        };
        let lengths = lengths_of(parts);
        self.0.verify(&length_prefixed(parts, &lengths), &bytes)
    }
}

/// Each part's length, as the 8 big-endian bytes written before it.
fn lengths_of(parts: &[&[u8]]) -> Vec<[u8; 8]> {
    parts
        .iter()
        .map(|part| (part.len() as u64).to_be_bytes())
        .collect()
}

/// `parts` with each one's length before it.
fn length_prefixed<'a>(parts: &[&'a [u8]], lengths: &'a [[u8; 8]]) -> Vec<&'a [u8]> {
    lengths
        .iter()
        .zip(parts)
        .flat_map(|(length, part)| [length.as_slice(), part])
        .collect()
}

/// The server's session key (see the module's doc), with the start-up
/// warning when it is random.
pub(crate) fn key_for(state: &AppState) -> SessionKey {
    if let Ok(secret) = std::env::var(SESSION_SECRET_ENV)
        && !secret.trim().is_empty()
    {
        return SessionKey::from_secret(&secret);
    }
    if let Some(links) = &state.links {
        // The link secret's own derivation, under a label of its own: the
        // session key is not the link key.
        return SessionKey::from_bytes(links.derive_key("tollgate-session-v1"));
    }
    if !state.tokens.is_empty() {
        tracing::warn!(
            "approvals inbox: neither {SESSION_SECRET_ENV} nor TOLLGATE_LINK_SECRET is set, so \
             sessions are signed with a random key: they end when this process restarts and \
             hold on this server only"
        );
    }
    SessionKey::random()
}

/// The cookie value for `name`, signed in with a token whose digest is
/// `token_digest`, valid until `now + MAX_AGE`.
pub(crate) fn issue(
    key: &SessionKey,
    name: &str,
    token_digest: &[u8; 32],
    now: DateTime<Utc>,
) -> String {
    let expiry = (now.timestamp() + MAX_AGE.as_secs() as i64).to_string();
    let mac = key.mac(&[b"session", name.as_bytes(), expiry.as_bytes(), token_digest]);
    format!("{name}.{expiry}.{}", crate::support::hex::encode(&mac))
}

/// Why a session cookie is not accepted (for tests and logs; the page only
/// says "sign in").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refused {
    Malformed,
    Expired,
    /// The name has no token any more (removed from TOLLGATE_API_TOKENS).
    UnknownName,
    /// A forged or tampered cookie, another key, or a rotated token.
    BadMac,
}

/// The signed-in name, if `value` is a valid, unexpired session under
/// `key` for a token still configured.
pub(crate) fn verify(
    key: &SessionKey,
    value: &str,
    tokens: &ApiTokens,
    now: DateTime<Utc>,
) -> Result<String, Refused> {
    // Names may hold dots; the expiry and the MAC never do.
    let mut parts = value.rsplitn(3, '.');
    let (Some(mac), Some(expiry), Some(name)) = (parts.next(), parts.next(), parts.next()) else {
        return Err(Refused::Malformed);
    };
    let Ok(until) = expiry.parse::<i64>() else {
        return Err(Refused::Malformed);
    };
    if until <= now.timestamp() {
        return Err(Refused::Expired);
    }
    let digest = tokens.digest_of(name).ok_or(Refused::UnknownName)?;
    if !key.verify(
        &[b"session", name.as_bytes(), expiry.as_bytes(), &digest],
        mac,
    ) {
        return Err(Refused::BadMac);
    }
    Ok(name.to_string())
}

/// The value of cookie `name` in the request's Cookie headers.
pub(crate) fn cookie<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers
        .get_all(axum::http::header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(k, _)| *k == name)
        .map(|(_, v)| v.trim())
}

/// Whether the request came over TLS, as far as the server can tell: a
/// proxy's `X-Forwarded-Proto: https`, or an https public URL.
pub(crate) fn is_tls(headers: &HeaderMap, public_https: bool) -> bool {
    public_https
        || headers
            .get("x-forwarded-proto")
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.trim().eq_ignore_ascii_case("https"))
}

/// A `Set-Cookie` value: HttpOnly, SameSite=Strict, Path=/, and Secure
/// behind TLS. `max_age` 0 clears the cookie.
pub(crate) fn set_cookie(name: &str, value: &str, max_age: u64, secure: bool) -> String {
    let secure = if secure { "; Secure" } else { "" };
    format!("{name}={value}; Path=/; Max-Age={max_age}; HttpOnly; SameSite=Strict{secure}")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn now() -> DateTime<Utc> {
        crate::support::time::parse_utc("2026-12-01T10:00:00Z").unwrap()
    }

    /// The MAC's bytes are part of the contract: a cookie issued before an
    /// upgrade still verifies after it. The expected value is Python's
    /// `hmac.new(sha256(b"tollgate-session-secret-v1\0k"), parts, sha256)`
    /// over the parts, each after its length as 8 big-endian bytes.
    #[test]
    fn the_mac_is_hmac_sha256_over_length_prefixed_parts() {
        let key = SessionKey::from_secret("k");
        let parts: &[&[u8]] = &[b"session", b"alice", b"1700000000"];
        let expected = "b24869978110d172a856b992a1fae837e3bf830d286d4be1c4d7504725e1ac19";
        assert_eq!(crate::support::hex::encode(&key.mac(parts)), expected);
        assert!(key.verify(parts, expected));
        assert!(!key.verify(&[b"session", b"alic", b"e1700000000"], expected));
    }

    #[test]
    fn a_session_verifies_until_it_expires() {
        let key = SessionKey::from_secret("s");
        let tokens = ApiTokens::parse("al.ice:tok1,bob:tok2").unwrap();
        let value = issue(&key, "al.ice", &ApiTokens::digest_token("tok1"), now());
        assert_eq!(verify(&key, &value, &tokens, now()).unwrap(), "al.ice");
        let later = now() + chrono::Duration::hours(12);
        assert_eq!(verify(&key, &value, &tokens, later), Err(Refused::Expired));
    }

    #[test]
    fn tampering_another_key_and_a_rotated_token_are_refused() {
        let key = SessionKey::from_secret("s");
        let tokens = ApiTokens::parse("alice:tok1,bob:tok2").unwrap();
        let value = issue(&key, "alice", &ApiTokens::digest_token("tok1"), now());
        let as_bob = value.replacen("alice", "bob", 1);
        assert_eq!(verify(&key, &as_bob, &tokens, now()), Err(Refused::BadMac));
        let other = SessionKey::from_secret("t");
        assert_eq!(verify(&other, &value, &tokens, now()), Err(Refused::BadMac));
        let rotated = ApiTokens::parse("alice:tok9").unwrap();
        assert_eq!(verify(&key, &value, &rotated, now()), Err(Refused::BadMac));
        let removed = ApiTokens::parse("bob:tok2").unwrap();
        assert_eq!(
            verify(&key, &value, &removed, now()),
            Err(Refused::UnknownName)
        );
        assert_eq!(
            verify(&key, "junk", &tokens, now()),
            Err(Refused::Malformed)
        );
    }

    #[test]
    fn cookies_are_read_by_name() {
        let mut headers = HeaderMap::new();
        headers.insert("cookie", "a=1; tollgate_session=x.y.z".parse().unwrap());
        assert_eq!(cookie(&headers, COOKIE), Some("x.y.z"));
        assert_eq!(cookie(&headers, "b"), None);
        assert!(set_cookie(COOKIE, "v", 10, true).contains("; Secure"));
        assert!(!set_cookie(COOKIE, "v", 10, false).contains("Secure"));
    }
}
