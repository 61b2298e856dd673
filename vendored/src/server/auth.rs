//! Bearer-token auth: `TOLLGATE_API_TOKENS=name:token,name2:token2`.
//!
//! The token's name is who decides (`decided_by`). Tokens are kept only as
//! SHA-256 digests and compared digest to digest without an early exit, so
//! neither the comparison time nor a memory dump gives a token away. Error
//! messages name entries by position, never by their token.

use axum::extract::{Request, State};
use axum::http::{HeaderMap, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use super::error::ApiError;
use super::state::AppState;

/// The environment variable holding the tokens.
pub use crate::env::API_TOKENS as TOKENS_ENV;

/// Who decides when the server has no tokens (loopback only).
pub const LOCAL_CALLER: &str = "local";

/// The configured API tokens, by name.
#[derive(Clone, Default)]
pub struct ApiTokens {
    entries: Vec<TokenEntry>,
}

#[derive(Clone)]
struct TokenEntry {
    name: String,
    digest: [u8; 32],
}

impl std::fmt::Debug for ApiTokens {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<&str> = self.entries.iter().map(|e| e.name.as_str()).collect();
        f.debug_struct("ApiTokens").field("names", &names).finish()
    }
}

/// Why `TOLLGATE_API_TOKENS` could not be read. Never contains a token.
///
/// A variable that is set but unusable is an error, never "no tokens": an
/// operator who set it meant to turn auth on, and a typo (an empty value
/// from an `.env` file, a stray quote) must not quietly serve without it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TokenConfigError {
    #[error(
        "{TOKENS_ENV} is set but blank: set it to name:token,name2:token2, \
         or unset it to serve loopback only without tokens"
    )]
    Blank,
    #[error("{TOKENS_ENV} is not valid UTF-8 (expected name:token,name2:token2)")]
    NotUnicode,
    #[error("{TOKENS_ENV}: entry {entry}: {problem} (expected name:token,name2:token2)")]
    Entry {
        /// 1-based position of the entry in the list.
        entry: usize,
        problem: String,
    },
}

impl ApiTokens {
    /// No tokens: the server serves loopback only and every caller is `local`.
    pub fn none() -> ApiTokens {
        ApiTokens::default()
    }

    /// Read `TOLLGATE_API_TOKENS`. Unset means no tokens; set, it must
    /// hold at least one well-formed entry.
    pub fn from_env() -> Result<ApiTokens, TokenConfigError> {
        match std::env::var(TOKENS_ENV) {
            Ok(text) => ApiTokens::parse(&text),
            Err(std::env::VarError::NotPresent) => Ok(ApiTokens::none()),
            Err(std::env::VarError::NotUnicode(_)) => Err(TokenConfigError::NotUnicode),
        }
    }

    /// Parse `name:token,name2:token2`: at least one entry. Blank text is
    /// an error ([`ApiTokens::none`] is how to have no tokens).
    pub fn parse(text: &str) -> Result<ApiTokens, TokenConfigError> {
        let mut entries: Vec<TokenEntry> = Vec::new();
        if text.trim().is_empty() {
            return Err(TokenConfigError::Blank);
        }
        for (i, raw) in text.split(',').enumerate() {
            let entry = i + 1;
            let fail = |problem: &str| TokenConfigError::Entry {
                entry,
                problem: problem.to_string(),
            };
            let raw = raw.trim();
            if raw.is_empty() {
                return Err(fail("is empty (a stray comma?)"));
            }
            let Some((name, token)) = raw.split_once(':') else {
                return Err(fail("has no ':' between the name and the token"));
            };
            let name = name.trim();
            if name.is_empty() {
                return Err(fail("has an empty name"));
            }
            if !name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_.@".contains(c))
            {
                return Err(fail(
                    "has a name with characters other than letters, digits, '-', '_', '.', '@'",
                ));
            }
            if token.is_empty() {
                return Err(fail("has an empty token"));
            }
            if token.chars().any(char::is_whitespace) {
                return Err(fail("has a token containing whitespace"));
            }
            // An Authorization header carries visible ASCII only: any other
            // character makes a token that can never be presented.
            if !token.bytes().all(|b| b.is_ascii_graphic()) {
                return Err(fail(
                    "has a token with characters other than visible ASCII (control or non-ASCII characters)",
                ));
            }
            let digest = digest(token);
            if let Some(first) = entries.iter().position(|e| e.name == name) {
                return Err(fail(&format!(
                    "repeats the name {name:?} of entry {}",
                    first + 1
                )));
            }
            if let Some(first) = entries.iter().position(|e| e.digest == digest) {
                return Err(fail(&format!(
                    "has the same token as entry {}; each name needs its own token",
                    first + 1
                )));
            }
            entries.push(TokenEntry {
                name: name.to_string(),
                digest,
            });
        }
        Ok(ApiTokens { entries })
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.entries.iter().map(|e| e.name.as_str())
    }

    /// The name of the token presented, if it matches one. Every entry is
    /// compared, whatever matched before.
    pub fn identify(&self, presented: &str) -> Option<&str> {
        let presented = digest(presented);
        let mut found = None;
        for entry in &self.entries {
            if digests_equal(&presented, &entry.digest) && found.is_none() {
                found = Some(entry.name.as_str());
            }
        }
        found
    }

    /// The SHA-256 digest of the token named `name`: a browser session
    /// (server/ui/session.rs) is signed over it, so that removing or
    /// rotating the token ends the sessions it opened.
    pub(crate) fn digest_of(&self, name: &str) -> Option<[u8; 32]> {
        self.entries
            .iter()
            .find(|entry| entry.name == name)
            .map(|entry| entry.digest)
    }

    /// The SHA-256 digest of a presented token (compare with
    /// [`ApiTokens::digest_of`]).
    pub(crate) fn digest_token(token: &str) -> [u8; 32] {
        digest(token)
    }

    /// Who is calling: the token's name, or `local` when there are no tokens.
    pub fn caller(&self, headers: &HeaderMap) -> Result<Caller, ApiError> {
        if self.is_empty() {
            return Ok(Caller(LOCAL_CALLER.to_string()));
        }
        let value = headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .ok_or(ApiError::Unauthorized)?;
        let (scheme, token) = value.trim().split_once(' ').ok_or(ApiError::Unauthorized)?;
        if !scheme.eq_ignore_ascii_case("bearer") {
            return Err(ApiError::Unauthorized);
        }
        self.identify(token.trim())
            .map(|name| Caller(name.to_string()))
            .ok_or(ApiError::Unauthorized)
    }
}

/// The authenticated caller: the name that goes into `decided_by`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Caller(pub String);

fn digest(token: &str) -> [u8; 32] {
    Sha256::digest(token.as_bytes()).into()
}

/// Equal digests, compared in constant time: `subtle` keeps the optimiser
/// from turning the comparison back into an early exit, which a hand-written
/// fold does not guarantee.
fn digests_equal(a: &[u8; 32], b: &[u8; 32]) -> bool {
    bool::from(a.ct_eq(b))
}

/// Middleware for every API route but /healthz and the webhook: resolve the
/// caller or answer 401.
pub(crate) async fn require_caller(
    State(state): State<AppState>,
    mut request: Request,
    next: Next,
) -> Response {
    match state.tokens.caller(request.headers()) {
        Ok(caller) => {
            request.extensions_mut().insert(caller);
            next.run(request).await
        }
        Err(e) => e.into_response(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_names_and_identifies_tokens() {
        let tokens = ApiTokens::parse(" alice:s3cret , bob:t:with:colons").unwrap();
        assert_eq!(tokens.names().collect::<Vec<_>>(), ["alice", "bob"]);
        assert_eq!(tokens.identify("s3cret"), Some("alice"));
        assert_eq!(tokens.identify("t:with:colons"), Some("bob"));
        assert_eq!(tokens.identify("s3cre"), None);
        assert_eq!(tokens.identify(""), None);
    }

    #[test]
    fn blank_is_an_error_not_no_tokens() {
        for text in ["", "  ", "\t\n"] {
            assert_eq!(ApiTokens::parse(text).unwrap_err(), TokenConfigError::Blank);
        }
        assert!(TokenConfigError::Blank.to_string().contains("unset it"));
    }

    #[test]
    fn malformed_entries_are_named_by_position_never_by_token() {
        let cases = [
            ("alice", 1, "no ':'"),
            ("alice:x,,bob:y", 2, "empty"),
            (":tok", 1, "empty name"),
            ("alice:", 1, "empty token"),
            ("al ice:tok", 1, "characters"),
            ("alice:a b", 1, "whitespace"),
            ("alice:x,alice:y", 2, "repeats the name"),
            ("alice:samesecret,bob:samesecret", 2, "same token"),
            ("alice:x,", 2, "empty"),
            (",", 1, "empty"),
            ("alice:caf\u{e9}", 1, "visible ASCII"),
            ("alice:a\u{1}b", 1, "visible ASCII"),
            ("\"alice:tok\"", 1, "characters"),
        ];
        for (text, entry, problem) in cases {
            let err = ApiTokens::parse(text).unwrap_err();
            let TokenConfigError::Entry {
                entry: found,
                problem: said,
            } = &err
            else {
                panic!("{text}: {err:?}");
            };
            assert_eq!(*found, entry, "{text}");
            assert!(said.contains(problem), "{text}: {said}");
            let message = err.to_string();
            assert!(!message.contains("samesecret"), "{message}");
        }
    }

    #[test]
    fn digests_compare_equal_only_when_every_byte_matches() {
        let a = digest("s3cret");
        assert!(digests_equal(&a, &digest("s3cret")));
        // A difference in the first byte, the last byte or anywhere between
        // is a mismatch.
        for at in [0, 15, 31] {
            let mut b = a;
            b[at] ^= 1;
            assert!(!digests_equal(&a, &b), "byte {at}");
        }
    }

    #[test]
    fn debug_shows_names_only() {
        let tokens = ApiTokens::parse("alice:hunter2").unwrap();
        let shown = format!("{tokens:?}");
        assert!(shown.contains("alice") && !shown.contains("hunter2"));
    }

    #[test]
    fn caller_from_headers() {
        let tokens = ApiTokens::parse("alice:s3cret").unwrap();
        let mut headers = HeaderMap::new();
        assert!(tokens.caller(&headers).is_err());
        headers.insert(header::AUTHORIZATION, "Bearer wrong".parse().unwrap());
        assert!(tokens.caller(&headers).is_err());
        headers.insert(header::AUTHORIZATION, "bearer s3cret".parse().unwrap());
        assert_eq!(tokens.caller(&headers).unwrap(), Caller("alice".into()));
        headers.insert(header::AUTHORIZATION, "Basic s3cret".parse().unwrap());
        assert!(tokens.caller(&headers).is_err());
        assert_eq!(
            ApiTokens::none().caller(&HeaderMap::new()).unwrap(),
            Caller("local".into())
        );
    }
}
