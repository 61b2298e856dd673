//! `${NAME}` and `${NAME:-default}` secret references.
//!
//! A reference is resolved from the environment only at the moment a tool,
//! model or notifier call is made. It never enters an expression context, an
//! output, an event, a log line or the store.

use thiserror::Error;

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

/// Resolve references from the process environment.
pub fn resolve_env(text: &str) -> Result<String, SecretError> {
    resolve_with(text, |name| std::env::var(name).ok())
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
    fn ignores_malformed_references() {
        assert!(references("${} ${1X} ${A-B} $ {A}").is_empty());
    }
}
