//! URL templates: what an expression puts into a URL's path or query is
//! percent-encoded as one component, so an argument such as `A 1/../admin`
//! or `1?force=true` stays one value and cannot reshape the request.
//!
//! Expressions before the path (`{{ input.base_url }}/orders`,
//! `https://{{ args.host }}/x`) are inserted as they are: they are meant to
//! supply the origin. `| safe` at the end of an expression opts out, as in
//! Jinja (`{{ args.path | safe }}` keeps its slashes).

use crate::expr::Context;
use crate::tools::ToolError;
use crate::tools::template::CallSecrets;

/// One piece of a URL template.
#[derive(Debug, PartialEq, Eq)]
enum Piece<'a> {
    Text(&'a str),
    /// A whole `{{ ... }}` block, braces included.
    Expr(&'a str),
}

/// Evaluate a URL template for a call: secrets resolve, expression values
/// in the path and query are encoded.
pub fn evaluate(
    template: &str,
    scope: &Context,
    secrets: &mut CallSecrets,
) -> Result<String, ToolError> {
    let Some(pieces) = split(template) else {
        // Statements and comments cannot be evaluated piece by piece.
        return secrets.string(template, scope);
    };
    let mut out = String::with_capacity(template.len());
    let mut written = String::with_capacity(template.len());
    for piece in pieces {
        match piece {
            Piece::Text(text) => {
                out.push_str(&secrets.string(text, scope)?);
                written.push_str(text);
            }
            Piece::Expr(block) => {
                let value = secrets.string(block, scope)?;
                if in_path(&written) && !is_marked_safe(block) {
                    out.push_str(&encode_component(&value));
                } else {
                    out.push_str(&value);
                }
                written.push_str(block);
            }
        }
    }
    Ok(out)
}

/// Split into text and `{{ }}` blocks; `None` for templates with statements,
/// comments or an unclosed block.
fn split(template: &str) -> Option<Vec<Piece<'_>>> {
    if template.contains("{%") || template.contains("{#") {
        return None;
    }
    let mut pieces = Vec::new();
    let mut rest = template;
    while let Some(open) = rest.find("{{") {
        let close = rest[open..].find("}}")? + open + 2;
        if open > 0 {
            pieces.push(Piece::Text(&rest[..open]));
        }
        pieces.push(Piece::Expr(&rest[open..close]));
        rest = &rest[close..];
    }
    if !rest.is_empty() {
        pieces.push(Piece::Text(rest));
    }
    Some(pieces)
}

/// True once the template text so far has reached the path: a '/' after
/// the scheme's `://` (or any '/' when the origin came from an expression).
fn in_path(written: &str) -> bool {
    let after_scheme = match written.find("://") {
        Some(i) => &written[i + 3..],
        None => written,
    };
    after_scheme.contains('/') || after_scheme.contains('?')
}

fn is_marked_safe(block: &str) -> bool {
    let inner = block
        .trim_start_matches("{{")
        .trim_end_matches("}}")
        .trim_matches(|c: char| c == '-' || c == '+' || c.is_whitespace());
    inner
        .rsplit_once('|')
        .is_some_and(|(_, filter)| filter.trim() == "safe")
}

/// Percent-encode everything but RFC 3986 unreserved characters.
pub fn encode_component(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for b in value.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn eval(template: &str, args: serde_json::Value) -> String {
        let scope = Context::new().with("args", args);
        let mut secrets =
            CallSecrets::with_lookup(|n| (n == "BASE").then(|| "http://h:1".to_string()));
        evaluate(template, &scope, &mut secrets).unwrap()
    }

    #[test]
    fn path_and_query_values_are_one_component() {
        assert_eq!(
            eval(
                "https://shop/orders/{{ args.id }}?q={{ args.q }}",
                json!({"id": "A 1/../x", "q": "a&b=c"})
            ),
            "https://shop/orders/A%201%2F..%2Fx?q=a%26b%3Dc"
        );
    }

    #[test]
    fn origin_expressions_and_safe_blocks_are_kept() {
        assert_eq!(
            eval(
                "{{ args.base }}/o/{{ args.p | safe }}",
                json!({"base": "http://h:1", "p": "a/b"})
            ),
            "http://h:1/o/a/b"
        );
        assert_eq!(
            eval("https://{{ args.host }}/x", json!({"host": "h:8080"})),
            "https://h:8080/x"
        );
        assert_eq!(
            eval("${BASE}/o/{{ args.id }}", json!({"id": "a b"})),
            "http://h:1/o/a%20b"
        );
    }

    #[test]
    fn splits_text_and_blocks() {
        assert_eq!(
            split("a{{ x }}b").unwrap(),
            vec![Piece::Text("a"), Piece::Expr("{{ x }}"), Piece::Text("b")]
        );
        assert!(split("{% if x %}a{% endif %}").is_none());
        assert!(split("a{{ x").is_none());
    }
}
