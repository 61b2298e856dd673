//! CSRF tokens: every form POST carries a hidden `csrf` field, the HMAC
//! (under the session key) of what the form is bound to:
//!
//! - a signed-in page: the session cookie's value, so a token is good for
//!   one session only;
//! - the login form and loopback mode (no sessions): a random
//!   `tollgate_csrf` cookie set with the page (SameSite=Strict, so a page
//!   of another site can neither read nor send it);
//! - a signed link's page: the approval key, the signature and the bound
//!   identity.
//!
//! A page of another origin cannot read the token (same-origin policy), so
//! it cannot forge a form that passes.

use super::session::SessionKey;

/// The pre-session cookie of the login form and of loopback mode.
pub(crate) const PRE_COOKIE: &str = "tollgate_csrf";

/// What a form's token is bound to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Binding {
    Session(String),
    Pre(String),
    Link {
        key: String,
        signature: String,
        bound: Option<String>,
    },
}

impl Binding {
    fn parts(&self) -> Vec<&[u8]> {
        match self {
            Binding::Session(value) => vec![b"csrf-session", value.as_bytes()],
            Binding::Pre(value) => vec![b"csrf-pre", value.as_bytes()],
            Binding::Link {
                key,
                signature,
                bound,
            } => vec![
                b"csrf-link",
                key.as_bytes(),
                signature.as_bytes(),
                bound.as_deref().unwrap_or("").as_bytes(),
                // Distinguishes "unbound" from "bound to the empty name".
                if bound.is_some() { b"b" } else { b"u" },
            ],
        }
    }
}

/// The token for forms bound to `binding`.
pub(crate) fn token(key: &SessionKey, binding: &Binding) -> String {
    crate::support::hex::encode(&key.mac(&binding.parts()))
}

/// Whether `presented` is the token for `binding` (constant time).
pub(crate) fn check(key: &SessionKey, binding: &Binding, presented: Option<&str>) -> bool {
    match presented {
        Some(presented) if !presented.is_empty() => key.verify(&binding.parts(), presented),
        _ => false,
    }
}

/// A fresh value for [`PRE_COOKIE`].
pub(crate) fn fresh_pre_cookie() -> String {
    uuid::Uuid::new_v4().simple().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_bound() {
        let key = SessionKey::from_secret("k");
        let a = Binding::Session("alice.1.ab".into());
        let t = token(&key, &a);
        assert!(check(&key, &a, Some(&t)));
        assert!(!check(&key, &a, None));
        assert!(!check(&key, &a, Some("")));
        assert!(!check(&key, &Binding::Pre("alice.1.ab".into()), Some(&t)));
        assert!(!check(&SessionKey::from_secret("j"), &a, Some(&t)));
        let unbound = Binding::Link {
            key: "k1".into(),
            signature: "s".into(),
            bound: None,
        };
        let empty = Binding::Link {
            key: "k1".into(),
            signature: "s".into(),
            bound: Some(String::new()),
        };
        assert!(!check(&key, &empty, Some(&token(&key, &unbound))));
    }
}
