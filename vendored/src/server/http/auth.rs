//! Bearer-token auth: `TOLLGATE_API_TOKENS=name:token,name2:token2`.
//!
//! The token's name is who decides (`decided_by`). A name may carry a
//! scope, `name/requester:token` (DESIGN §14): such a token may ask for
//! approvals (`/gates`, `/mcp`) and follow its own requests, but not
//! decide, list or operate anything, nor sign in to the inbox. A token
//! without a scope (or `/full`) may do everything. Tokens are kept only as
//! SHA-256 digests and compared digest to digest without an early exit, so
//! neither the comparison time nor a memory dump gives a token away. Error
//! messages name entries by position, never by their token.

use axum::extract::{Request, State};
use axum::http::{HeaderMap, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use super::state::AppState;
use crate::service::ApiError;
pub use crate::service::{Caller, Scope};

/// The environment variable holding the tokens.
pub use crate::support::env::API_TOKENS as TOKENS_ENV;

/// Who decides when the server has no tokens (loopback only): exempt from
/// separation of duties, so no token may take the name.
pub const LOCAL_CALLER: &str = crate::domain::policy::LOCAL_DECIDER;

/// Why `name` may not be a caller's name: one tollgate gives callers that
/// hold no token ([`crate::domain::policy::RESERVED_NAMES`]), which a token could
/// otherwise pass for.
pub fn reserved_name(name: &str) -> Option<String> {
    crate::domain::policy::RESERVED_NAMES.contains(&name).then(|| {
        format!(
            "has the name {name:?}, which tollgate gives callers without a token ({}): choose another",
            crate::domain::policy::RESERVED_NAMES.join(", ")
        )
    })
}

/// The configured API tokens, by name.
#[derive(Clone, Default)]
pub struct ApiTokens {
    entries: Vec<TokenEntry>,
}

#[derive(Clone)]
struct TokenEntry {
    name: String,
    digest: [u8; 32],
    scope: Scope,
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
            let (name, scope) = match name.trim().split_once('/') {
                None => (name.trim(), Scope::Full),
                Some((name, scope)) => match Scope::parse(scope) {
                    Some(scope) => (name, scope),
                    None => {
                        return Err(fail(&format!(
                            "has an unknown scope {scope:?} after '/' (use full or requester)"
                        )));
                    }
                },
            };
            if name.is_empty() {
                return Err(fail("has an empty name"));
            }
            if !is_token_name(name) {
                return Err(fail(
                    "has a name with characters other than letters, digits, '-', '_', '.', '@'",
                ));
            }
            if let Some(reserved) = reserved_name(name) {
                return Err(fail(&reserved));
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
                scope,
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
        self.entry_of(presented).map(|entry| entry.name.as_str())
    }

    /// The name and scope of the token presented, if it matches one.
    pub fn identify_scoped(&self, presented: &str) -> Option<(&str, Scope)> {
        self.entry_of(presented)
            .map(|entry| (entry.name.as_str(), entry.scope))
    }

    fn entry_of(&self, presented: &str) -> Option<&TokenEntry> {
        let presented = digest(presented);
        let mut found = None;
        for entry in &self.entries {
            if digests_equal(&presented, &entry.digest) && found.is_none() {
                found = Some(entry);
            }
        }
        found
    }

    /// The scope of the token named `name` (`full` when there are no
    /// tokens: the loopback-only `local` caller may do everything).
    pub fn scope_of(&self, name: &str) -> Scope {
        self.entries
            .iter()
            .find(|entry| entry.name == name)
            .map_or(Scope::Full, |entry| entry.scope)
    }

    /// The SHA-256 digest of the full-scope token named `name`: a browser
    /// session (server/ui/session.rs) is signed over it, so that removing
    /// or rotating the token, or narrowing it to `requester`, ends the
    /// sessions it opened.
    pub(crate) fn digest_of(&self, name: &str) -> Option<[u8; 32]> {
        self.entries
            .iter()
            .find(|entry| entry.name == name && entry.scope == Scope::Full)
            .map(|entry| entry.digest)
    }

    /// The SHA-256 digest of a presented token (compare with
    /// [`ApiTokens::digest_of`]).
    pub(crate) fn digest_token(token: &str) -> [u8; 32] {
        digest(token)
    }

    /// Who is calling: the token's name, or `local` when there are no tokens.
    pub fn caller(&self, headers: &HeaderMap) -> Result<Caller, ApiError> {
        self.scoped_caller(headers).map(|(caller, _)| caller)
    }

    /// [`ApiTokens::caller`] with the token's scope.
    pub fn scoped_caller(&self, headers: &HeaderMap) -> Result<(Caller, Scope), ApiError> {
        if self.is_empty() {
            return Ok((Caller(LOCAL_CALLER.to_string()), Scope::Full));
        }
        let value = headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .ok_or(ApiError::Unauthorized)?;
        let (scheme, token) = value.trim().split_once(' ').ok_or(ApiError::Unauthorized)?;
        if !scheme.eq_ignore_ascii_case("bearer") {
            return Err(ApiError::Unauthorized);
        }
        self.identify_scoped(token.trim())
            .map(|(name, scope)| (Caller(name.to_string()), scope))
            .ok_or(ApiError::Unauthorized)
    }
}

/// Whether `name` is written as a token's name may be: letters, digits,
/// '-', '_', '.' and '@' (so it reads the same in every log, header and
/// list it appears in).
pub fn is_token_name(name: &str) -> bool {
    !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.@".contains(c))
}

fn digest(token: &str) -> [u8; 32] {
    Sha256::digest(token.as_bytes()).into()
}

/// Equal digests, compared in constant time: `subtle` keeps the optimiser
/// from turning the comparison back into an early exit, which a hand-written
/// fold does not guarantee.
fn digests_equal(a: &[u8; 32], b: &[u8; 32]) -> bool {
    bool::from(a.ct_eq(b))
}

/// Middleware for every API route but /healthz, the webhook and the gate
/// requests': resolve the caller or answer 401; a requester token is
/// refused (403 `insufficient_scope`): it may not decide, list or operate.
pub(crate) async fn require_caller(
    State(state): State<AppState>,
    request: Request,
    next: Next,
) -> Response {
    admit(&state, request, next, Scope::Full).await
}

/// Middleware for `/gates` and `/mcp`: any token may ask for approvals.
/// The caller's scope goes with it, for what each route lets it see.
pub(crate) async fn require_requester(
    State(state): State<AppState>,
    request: Request,
    next: Next,
) -> Response {
    admit(&state, request, next, Scope::Requester).await
}

async fn admit(state: &AppState, mut request: Request, next: Next, least: Scope) -> Response {
    let (caller, scope) = match state.tokens.scoped_caller(request.headers()) {
        Ok(found) => found,
        Err(e) => return e.into_response(),
    };
    if least == Scope::Full && scope != Scope::Full {
        return ApiError::InsufficientScope {
            name: caller.0,
            scope: scope.as_str(),
        }
        .into_response();
    }
    request.extensions_mut().insert(caller);
    request.extensions_mut().insert(scope);
    next.run(request).await
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
    fn a_scope_after_the_name_limits_the_token() {
        let tokens = ApiTokens::parse("alice:s3cret,bot/requester:b0t:x,carol/full:c4rol").unwrap();
        assert_eq!(
            tokens.names().collect::<Vec<_>>(),
            ["alice", "bot", "carol"]
        );
        assert_eq!(
            tokens.identify_scoped("s3cret"),
            Some(("alice", Scope::Full))
        );
        assert_eq!(
            tokens.identify_scoped("b0t:x"),
            Some(("bot", Scope::Requester))
        );
        assert_eq!(
            tokens.identify_scoped("c4rol"),
            Some(("carol", Scope::Full))
        );
        assert_eq!(tokens.scope_of("bot"), Scope::Requester);
        assert_eq!(ApiTokens::none().scope_of("local"), Scope::Full);
        for (text, problem) in [
            ("bot/admin:x", "unknown scope \"admin\""),
            ("bot/:x", "unknown scope"),
            ("/requester:x", "empty name"),
            // Names tollgate gives callers without a token: a token named
            // `local` would pass for the one exempt from separation of duties.
            (
                "local:x",
                "has the name \"local\", which tollgate gives callers without a token",
            ),
            ("webhook/requester:x", "has the name \"webhook\""),
            ("link:x", "has the name \"link\""),
        ] {
            let err = ApiTokens::parse(text).unwrap_err().to_string();
            assert!(err.contains(problem), "{text}: {err}");
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
