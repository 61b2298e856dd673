//! `${NAME}` and `${NAME:-default}` secret references.
//!
//! A reference is resolved from the environment only at the moment a tool,
//! model or notifier call is made. It never enters an expression context, an
//! output, an event, a log line or the store.

use thiserror::Error;

mod encodings;
mod redact;

pub use redact::{MIN_ENCODED_LEN, MIN_REDACTED_LEN, REDACTED, Redactor};

/// One `${...}` reference found in a string.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SecretRef<'a> {
    /// Byte range of the whole `${...}` in the string.
    pub start: usize,
    pub end: usize,
    pub name: &'a str,
    pub default: Option<&'a str>,
}

#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum SecretError {
    #[error("environment variable {name} is not set (referenced as ${{{name}}})")]
    Missing { name: String },
}

/// True for a valid variable name: a letter or '_' then letters, digits, '_'.
pub fn is_valid_name(name: &str) -> bool {
    let mut chars = name.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// Every well-formed reference in `text`, in order. `$${` escapes a literal `${`.
pub fn references(text: &str) -> Vec<SecretRef<'_>> {
    let bytes = text.as_bytes();
    let mut found = Vec::new();
    let mut i = 0;
    while i + 1 < bytes.len() {
        if bytes[i] == b'$' && bytes[i + 1] == b'$' {
            i += 2;
            continue;
        }
        if bytes[i] == b'$' && bytes[i + 1] == b'{' {
            if let Some(close) = text[i + 2..].find('}') {
                let inner = &text[i + 2..i + 2 + close];
                let (name, default) = match inner.split_once(":-") {
                    Some((n, d)) => (n, Some(d)),
                    None => (inner, None),
                };
                if is_valid_name(name) {
                    found.push(SecretRef {
                        start: i,
                        end: i + 3 + close,
                        name,
                        default,
                    });
                    i += 3 + close;
                    continue;
                }
            }
        }
        i += 1;
    }
    found
}

/// Replace every reference with its value from `lookup` (normally the
/// environment). The error names the variable, never a value.
pub fn resolve_with(
    text: &str,
    lookup: impl Fn(&str) -> Option<String>,
) -> Result<String, SecretError> {
    let refs = references(text);
    if refs.is_empty() {
        return Ok(text.to_string());
    }
    let mut out = String::with_capacity(text.len());
    let mut last = 0;
    for r in refs {
        out.push_str(&text[last..r.start]);
        match (lookup(r.name), r.default) {
            (Some(v), _) => out.push_str(&v),
            (None, Some(d)) => out.push_str(d),
            (None, None) => {
                return Err(SecretError::Missing {
                    name: r.name.to_string(),
                });
            }
        }
        last = r.end;
    }
    out.push_str(&text[last..]);
    Ok(out)
}

/// Resolve references from the process environment; the values found are
/// [`remember`]ed for redaction.
pub fn resolve_env(text: &str) -> Result<String, SecretError> {
    resolve_with(text, |name| {
        let value = std::env::var(name).ok();
        if let Some(v) = &value {
            remember(v);
        }
        value
    })
}

// Sealing: how a call's templates use secrets without the secret ever
// entering a template or its context.
//
// Before a call-time template is evaluated, every `${...}` written in the
// spec is replaced by a placeholder that carries a per-process random nonce.
// The template is evaluated as usual (placeholders are inert text), then the
// placeholders in the result are replaced by the secret values. A `${NAME}`
// that arrives in run data (an input, a model reply) has no nonce and is
// never resolved, so data cannot pull a secret into a request.

const SEAL_OPEN: char = '\u{E000}';
const SEAL_CLOSE: char = '\u{E001}';

fn nonce() -> &'static str {
    static NONCE: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    NONCE.get_or_init(|| uuid::Uuid::new_v4().simple().to_string())
}

/// Replace every reference in spec text with an inert placeholder.
pub fn seal(text: &str) -> std::borrow::Cow<'_, str> {
    let refs = references(text);
    if refs.is_empty() {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + refs.len() * 40);
    let mut last = 0;
    for r in refs {
        out.push_str(&text[last..r.start]);
        out.push(SEAL_OPEN);
        out.push_str(nonce());
        out.push_str(&text[r.start..r.end]);
        out.push(SEAL_CLOSE);
        last = r.end;
    }
    out.push_str(&text[last..]);
    std::borrow::Cow::Owned(out)
}

/// Undo [`seal`] without resolving: the text as written in the spec.
pub fn unseal_as_written(text: &str) -> String {
    let prefix = format!("{SEAL_OPEN}{}", nonce());
    text.replace(&prefix, "").replace(SEAL_CLOSE, "")
}

/// Replace the placeholders in an evaluated string with secret values from
/// `lookup`. Records every value used in `used`, so outputs and errors can be
/// redacted afterwards.
pub fn unseal_with(
    text: &str,
    lookup: &impl Fn(&str) -> Option<String>,
    used: &mut Vec<String>,
) -> Result<String, SecretError> {
    let prefix = format!("{SEAL_OPEN}{}", nonce());
    if !text.contains(&prefix) {
        return Ok(text.to_string());
    }
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find(&prefix) {
        out.push_str(&rest[..start]);
        let after = &rest[start + prefix.len()..];
        let Some(end) = after.find(SEAL_CLOSE) else {
            out.push_str(&rest[start..]);
            rest = "";
            break;
        };
        let reference = &after[..end];
        let value = resolve_with(reference, lookup)?;
        if !value.is_empty() && value != reference {
            used.push(value.clone());
        }
        out.push_str(&value);
        rest = &after[end + SEAL_CLOSE.len_utf8()..];
    }
    out.push_str(rest);
    Ok(out)
}

/// Every secret value this process resolved from its environment (or was
/// told about with [`remember`]): a reply to one call may echo a secret
/// another call used, and a log line may quote any of them.
static KNOWN: std::sync::RwLock<Vec<String>> = std::sync::RwLock::new(Vec::new());

/// Add a secret value to those every redaction in this process looks for.
pub fn remember(value: &str) {
    if value.len() < redact::MIN_REDACTED_LEN {
        return;
    }
    let known = KNOWN.read().unwrap_or_else(|e| e.into_inner());
    if known.iter().any(|v| v == value) {
        return;
    }
    drop(known);
    let mut known = KNOWN.write().unwrap_or_else(|e| e.into_inner());
    if !known.iter().any(|v| v == value) {
        known.push(value.to_string());
        *CACHED.write().unwrap_or_else(|e| e.into_inner()) = None;
    }
}

/// Remember the values of these environment variables (the `${NAME}`s a
/// spec references), so they are redacted before any call resolves them.
pub fn remember_env<I: IntoIterator<Item = S>, S: AsRef<str>>(names: I) {
    for name in names {
        if let Ok(value) = std::env::var(name.as_ref()) {
            remember(&value);
        }
    }
}

/// The values [`remember`]ed so far.
pub fn known_values() -> Vec<String> {
    KNOWN.read().unwrap_or_else(|e| e.into_inner()).clone()
}

static CACHED: std::sync::RwLock<Option<std::sync::Arc<Redactor>>> = std::sync::RwLock::new(None);

/// A redactor for every value [`remember`]ed so far (built once per change).
pub fn known() -> std::sync::Arc<Redactor> {
    if let Some(r) = CACHED.read().unwrap_or_else(|e| e.into_inner()).as_ref() {
        return r.clone();
    }
    let built = std::sync::Arc::new(Redactor::new(known_values()));
    *CACHED.write().unwrap_or_else(|e| e.into_inner()) = Some(built.clone());
    built
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_plain_and_defaulted_references() {
        let refs = references("Bearer ${SHOP_TOKEN} and ${REGION:-eu} $${NOT_ONE}");
        assert_eq!(refs.len(), 2);
        assert_eq!(refs[0].name, "SHOP_TOKEN");
        assert_eq!(refs[0].default, None);
        assert_eq!(refs[1].name, "REGION");
        assert_eq!(refs[1].default, Some("eu"));
    }

    #[test]
    fn resolves_and_names_missing_variables() {
        let env = |n: &str| (n == "A").then(|| "1".to_string());
        assert_eq!(resolve_with("x${A}y${B:-2}", env).unwrap(), "x1y2");
        let err = resolve_with("${C}", env).unwrap_err();
        assert_eq!(
            err.to_string(),
            "environment variable C is not set (referenced as ${C})"
        );
    }

    #[test]
    fn sealed_references_resolve_only_from_spec_text() {
        let env = |n: &str| (n == "TOKEN").then(|| "s3cr3t-value".to_string());
        let sealed = seal("Bearer ${TOKEN}");
        assert!(!sealed.contains("${TOKEN}") || sealed.contains(SEAL_OPEN));
        // Data that merely looks like a reference stays as it is.
        let evaluated = format!("{sealed} for ${{TOKEN}}");
        let mut used = Vec::new();
        let out = unseal_with(&evaluated, &env, &mut used).unwrap();
        assert_eq!(out, "Bearer s3cr3t-value for ${TOKEN}");
        assert_eq!(used, vec!["s3cr3t-value".to_string()]);
        assert_eq!(unseal_as_written(&sealed), "Bearer ${TOKEN}");
    }

    #[test]
    fn redactor_replaces_echoed_secrets() {
        let r = Redactor::new(vec!["s3cr3t-value".into(), "ab".into()]);
        let v = serde_json::json!({"echo": "got s3cr3t-value", "n": 1, "ab": "ab"});
        assert_eq!(
            r.value(v),
            serde_json::json!({"echo": "got [redacted]", "n": 1, "ab": "ab"})
        );
    }

    #[test]
    fn ignores_malformed_references() {
        assert!(references("${} ${1X} ${A-B} $ {A}").is_empty());
    }
}
