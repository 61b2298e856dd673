//! URL templates: what an expression or a `${NAME}` secret puts into a URL's
//! user info, path, query or fragment is percent-encoded as one component,
//! so an argument such as `A 1/../admin` or `1?force=true`, or a token such
//! as `a+b&c#d`, stays one value and cannot reshape the request.
//!
//! Values in the origin (`{{ input.base_url }}/orders`, `${BASE_URL}/x`,
//! `https://{{ args.host }}/x`) are inserted as they are: they are meant to
//! supply it. `| safe` at the end of an expression opts out, as in Jinja
//! (`{{ args.path | safe }}` keeps its slashes). The position is decided by
//! the template as written, never by the values inserted.

use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, utf8_percent_encode};

use crate::domain::expr::Context;
use crate::engine::tools::ToolError;
use crate::engine::tools::template::CallSecrets;
use crate::support::secrets;

/// One piece of a URL template.
#[derive(Debug, PartialEq, Eq)]
enum Piece<'a> {
    Text(&'a str),
    /// A whole `{{ ... }}` block, braces included.
    Expr(&'a str),
}

/// Evaluate a URL template for a call: secrets resolve, expression and
/// secret values outside the origin are encoded.
pub fn evaluate(
    template: &str,
    scope: &Context,
    secrets: &mut CallSecrets,
) -> Result<String, ToolError> {
    let Some(pieces) = split(template) else {
        // Statements and comments cannot be evaluated piece by piece: the
        // output is kept as it is, but secrets are still placed by where
        // they are written.
        return secrets.string_placed(template, scope, |offset, value| {
            match part_at(template, offset) {
                Part::Origin => value,
                Part::Userinfo | Part::Rest => encode_component(&value),
            }
        });
    };
    let mut out = String::with_capacity(template.len());
    let mut offset = 0;
    for piece in pieces {
        match piece {
            Piece::Text(text) => {
                let mut last = 0;
                for r in secrets::references(text) {
                    out.push_str(&text[last..r.start]);
                    let value = secrets.literal(&text[r.start..r.end])?;
                    match part_at(template, offset + r.start) {
                        Part::Origin => out.push_str(&value),
                        Part::Userinfo | Part::Rest => out.push_str(&encode_component(&value)),
                    }
                    last = r.end;
                }
                out.push_str(&text[last..]);
                offset += text.len();
            }
            Piece::Expr(block) => {
                let value = secrets.string(block, scope)?;
                let encode = match part_at(template, offset) {
                    Part::Origin => false,
                    Part::Userinfo | Part::Rest => !is_marked_safe(block),
                };
                if encode {
                    out.push_str(&encode_component(&value));
                } else {
                    out.push_str(&value);
                }
                offset += block.len();
            }
        }
    }
    Ok(out)
}

/// Where a value written at some offset of a URL template lands.
#[derive(Debug, PartialEq, Eq)]
enum Part {
    /// Scheme, host, port (or a whole base URL supplied by the value).
    Origin,
    /// `user:password@`, before the host.
    Userinfo,
    /// Path, query or fragment.
    Rest,
}

fn part_at(template: &str, offset: usize) -> Part {
    let written = &template[..offset];
    if in_path(written) {
        return Part::Rest;
    }
    let Some(scheme) = written.find("://") else {
        return Part::Origin;
    };
    // The authority as written: up to the first '/', '?' or '#'. An '@' in
    // it after this offset means the value is in the user info.
    let authority = &template[scheme + 3..];
    let authority = &authority[..authority.find(['/', '?', '#']).unwrap_or(authority.len())];
    let here = offset - (scheme + 3);
    if authority[here..].contains('@') {
        Part::Userinfo
    } else {
        Part::Origin
    }
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

/// True once the template text so far has reached the path: a '/', '?' or
/// '#' after the scheme's `://` (or anywhere when the origin came from an
/// expression or a secret).
fn in_path(written: &str) -> bool {
    let after_scheme = match written.find("://") {
        Some(i) => &written[i + 3..],
        None => written,
    };
    after_scheme.contains(['/', '?', '#'])
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

/// Everything but RFC 3986's unreserved characters (`A-Z a-z 0-9 - . _ ~`):
/// a value encoded with it is one component wherever it lands.
const COMPONENT: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');

/// Percent-encode everything but RFC 3986 unreserved characters (upper-case
/// hex, UTF-8 bytes of non-ASCII characters).
pub fn encode_component(value: &str) -> String {
    utf8_percent_encode(value, COMPONENT).to_string()
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

    fn eval_with(template: &str, args: serde_json::Value, secret: &'static str) -> String {
        let scope = Context::new().with("args", args);
        let mut secrets = CallSecrets::with_lookup(move |n| match n {
            "BASE" => Some("http://h:1/api".to_string()),
            "TOKEN" => Some(secret.to_string()),
            _ => None,
        });
        evaluate(template, &scope, &mut secrets).unwrap()
    }

    #[test]
    fn secrets_are_encoded_by_their_position_like_expressions() {
        let t = "a+b &c#d/e?f=%g ü";
        let enc = "a%2Bb%20%26c%23d%2Fe%3Ff%3D%25g%20%C3%BC";
        assert_eq!(
            eval_with(
                "https://shop/o/${TOKEN}/x?k=${TOKEN}&${TOKEN}=1#${TOKEN}",
                json!({}),
                t
            ),
            format!("https://shop/o/{enc}/x?k={enc}&{enc}=1#{enc}")
        );
        assert_eq!(
            eval_with("https://u:${TOKEN}@shop/x", json!({}), "p@ss:w/rd"),
            "https://u:p%40ss%3Aw%2Frd@shop/x",
            "user info"
        );
        assert_eq!(
            eval_with(
                "https://{{ args.u }}:x@shop/{{ args.u }}",
                json!({"u": "a@b"}),
                ""
            ),
            "https://a%40b:x@shop/a%40b",
            "expressions in the user info are encoded too"
        );
        assert_eq!(
            eval_with("${BASE}/o?t=${TOKEN}", json!({}), "a&b"),
            "http://h:1/api/o?t=a%26b",
            "a secret supplying the origin is kept whole"
        );
        assert_eq!(
            eval_with("https://${TOKEN}.shop/x", json!({}), "eu"),
            "https://eu.shop/x",
            "a secret in the host is kept"
        );
    }

    #[test]
    fn secrets_in_templates_with_statements_are_placed_too() {
        assert_eq!(
            eval_with(
                "${BASE}/{% if args.x %}o{% endif %}?t=${TOKEN}",
                json!({"x": true}),
                "a&b#c"
            ),
            "http://h:1/api/o?t=a%26b%23c"
        );
    }

    #[test]
    fn the_position_comes_from_the_template_not_the_values() {
        // An argument holding '/' does not move the next secret out of the origin.
        assert_eq!(
            eval_with(
                "https://{{ args.host }}${TOKEN}",
                json!({"host": "h/"}),
                "a&b"
            ),
            "https://h/a&b"
        );
        assert_eq!(part_at("https://h/x", 10), Part::Rest);
        assert_eq!(part_at("https://u:p@h", 10), Part::Userinfo);
        assert_eq!(part_at("https://h:1", 10), Part::Origin);
        assert_eq!(part_at("https://h#f", 10), Part::Rest);
    }

    #[test]
    fn only_unreserved_characters_stay_as_they_are() {
        let every_ascii: String = (0u8..128).map(char::from).collect();
        let encoded = encode_component(&every_ascii);
        let kept: String = encoded
            .split('%')
            .enumerate()
            .map(|(i, part)| if i == 0 { part } else { &part[2..] })
            .collect();
        assert_eq!(
            kept,
            "-.0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ_abcdefghijklmnopqrstuvwxyz~"
        );
        assert_eq!(encode_component("a b/ü"), "a%20b%2F%C3%BC");
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
