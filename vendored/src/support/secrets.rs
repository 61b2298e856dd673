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
/// Brackets an optional offset after the nonce (see [`seal_with_offsets`]).
const SEAL_OFFSET: char = '\u{E002}';

fn nonce() -> &'static str {
    static NONCE: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    NONCE.get_or_init(|| uuid::Uuid::new_v4().simple().to_string())
}

/// Replace every reference in spec text with an inert placeholder.
pub fn seal(text: &str) -> std::borrow::Cow<'_, str> {
    seal_impl(text, false)
}

/// Like [`seal`], each placeholder also carrying the byte offset of its
/// reference in `text`, so [`unseal_each`] can treat a value by where it
/// was written (a URL's path or its origin) whatever the template did.
pub fn seal_with_offsets(text: &str) -> std::borrow::Cow<'_, str> {
    seal_impl(text, true)
}

fn seal_impl(text: &str, offsets: bool) -> std::borrow::Cow<'_, str> {
    let refs = references(text);
    if refs.is_empty() {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + refs.len() * 48);
    let mut last = 0;
    for r in refs {
        out.push_str(&text[last..r.start]);
        out.push(SEAL_OPEN);
        out.push_str(nonce());
        if offsets {
            out.push(SEAL_OFFSET);
            out.push_str(&r.start.to_string());
            out.push(SEAL_OFFSET);
        }
        out.push_str(&text[r.start..r.end]);
        out.push(SEAL_CLOSE);
        last = r.end;
    }
    out.push_str(&text[last..]);
    std::borrow::Cow::Owned(out)
}

/// One placeholder found in evaluated text.
struct Placeholder<'a> {
    /// Byte range of the whole placeholder.
    start: usize,
    end: usize,
    offset: Option<usize>,
    reference: &'a str,
}

fn next_placeholder(text: &str, from: usize) -> Option<Placeholder<'_>> {
    let prefix = format!("{SEAL_OPEN}{}", nonce());
    let start = from + text[from..].find(&prefix)?;
    let mut inner = start + prefix.len();
    let mut offset = None;
    if text[inner..].starts_with(SEAL_OFFSET) {
        let digits = inner + SEAL_OFFSET.len_utf8();
        let close = digits + text[digits..].find(SEAL_OFFSET)?;
        offset = text[digits..close].parse().ok();
        inner = close + SEAL_OFFSET.len_utf8();
    }
    let close = inner + text[inner..].find(SEAL_CLOSE)?;
    Some(Placeholder {
        start,
        end: close + SEAL_CLOSE.len_utf8(),
        offset,
        reference: &text[inner..close],
    })
}

/// Undo [`seal`] without resolving: the text as written in the spec.
pub fn unseal_as_written(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut last = 0;
    while let Some(p) = next_placeholder(text, last) {
        out.push_str(&text[last..p.start]);
        out.push_str(p.reference);
        last = p.end;
    }
    out.push_str(&text[last..]);
    out
}

/// Replace the placeholders in an evaluated string with secret values from
/// `lookup`. Records every value used in `used`, so outputs and errors can be
/// redacted afterwards.
pub fn unseal_with(
    text: &str,
    lookup: &impl Fn(&str) -> Option<String>,
    used: &mut Vec<String>,
) -> Result<String, SecretError> {
    unseal_each(text, lookup, used, |_, value| value)
}

/// [`unseal_with`], passing each value through `place` with the offset its
/// reference had in the sealed text (when sealed with offsets).
pub fn unseal_each(
    text: &str,
    lookup: &impl Fn(&str) -> Option<String>,
    used: &mut Vec<String>,
    mut place: impl FnMut(Option<usize>, String) -> String,
) -> Result<String, SecretError> {
    let mut out = String::with_capacity(text.len());
    let mut last = 0;
    while let Some(p) = next_placeholder(text, last) {
        out.push_str(&text[last..p.start]);
        let value = resolve_with(p.reference, lookup)?;
        if !value.is_empty() && value != p.reference {
            used.push(value.clone());
        }
        out.push_str(&place(p.offset, value));
        last = p.end;
    }
    out.push_str(&text[last..]);
    Ok(out)
}

/// Every secret value this process resolved from its environment (or was
/// told about with [`remember`]): a reply to one call may echo a secret
/// another call used, and a log line may quote any of them. The redactor
/// for them is built once per change, under the same lock, so it never
/// misses a value added while it was being built.
struct Known {
    values: Vec<String>,
    redactor: Option<std::sync::Arc<Redactor>>,
}

static KNOWN: std::sync::RwLock<Known> = std::sync::RwLock::new(Known {
    values: Vec::new(),
    redactor: None,
});

/// Add a secret value to those every redaction in this process looks for.
pub fn remember(value: &str) {
    if value.len() < redact::MIN_REDACTED_LEN {
        return;
    }
    if KNOWN
        .read()
        .unwrap_or_else(|e| e.into_inner())
        .values
        .iter()
        .any(|v| v == value)
    {
        return;
    }
    let mut known = KNOWN.write().unwrap_or_else(|e| e.into_inner());
    if !known.values.iter().any(|v| v == value) {
        known.values.push(value.to_string());
        known.redactor = None;
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
    KNOWN
        .read()
        .unwrap_or_else(|e| e.into_inner())
        .values
        .clone()
}

/// A redactor for every value [`remember`]ed so far.
pub fn known() -> std::sync::Arc<Redactor> {
    if let Some(r) = &KNOWN.read().unwrap_or_else(|e| e.into_inner()).redactor {
        return r.clone();
    }
    let mut known = KNOWN.write().unwrap_or_else(|e| e.into_inner());
    let values = known.values.clone();
    known
        .redactor
        .get_or_insert_with(|| std::sync::Arc::new(Redactor::new(values)))
        .clone()
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
    fn offsets_survive_evaluation_and_reach_the_placer() {
        let env = |n: &str| (n == "T").then(|| "v".to_string());
        let sealed = seal_with_offsets("ab${T}cd${T}");
        assert_eq!(unseal_as_written(&sealed), "ab${T}cd${T}");
        let mut seen = Vec::new();
        let out = unseal_each(&sealed, &env, &mut Vec::new(), |offset, v| {
            seen.push(offset);
            format!("<{v}>")
        })
        .unwrap();
        assert_eq!(out, "ab<v>cd<v>");
        assert_eq!(seen, vec![Some(2), Some(8)]);
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
    fn remembered_values_are_redacted_process_wide() {
        remember("registry-test-value-1");
        assert_eq!(known().text("a registry-test-value-1"), "a [redacted]");
        remember("registry-test-value-2");
        remember("abc");
        let r = known();
        assert_eq!(
            r.text("registry-test-value-1 REGISTRY-TEST-VALUE-2 abc"),
            "[redacted] [redacted] abc",
            "a later value is seen, a too-short one is not kept"
        );
    }

    #[test]
    fn ignores_malformed_references() {
        assert!(references("${} ${1X} ${A-B} $ {A}").is_empty());
    }
}
