//! The step's output for a response: `{status, headers, body}`.

use reqwest::header::{CONTENT_TYPE, HeaderMap};
use serde_json::{Map, Value, json};

use crate::domain::pending_approval::is_credential_header;

/// Characters of a failing response's body quoted in the error.
pub const EXCERPT_CHARS: usize = 300;

/// A response read in full (bounded by the caller).
#[derive(Debug)]
pub struct Received {
    pub status: u16,
    pub headers: HeaderMap,
    pub body: Vec<u8>,
}

/// A JSON body nested deeper than a run accepts
/// ([`crate::support::json_depth::MAX_JSON_DEPTH`]): stored in the step's output and
/// wrapped again, it could not be read back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TooDeep {
    pub limit: usize,
}

impl Received {
    /// `{status, headers, body}`; credentials the downstream sent back
    /// (auth headers, cookies) are not kept: outputs are stored.
    pub fn output(&self) -> Result<Value, TooDeep> {
        Ok(json!({
            "status": self.status,
            "headers": kept_headers(&self.headers),
            "body": self.body_value()?,
        }))
    }

    /// JSON when the content type says so or the body is a JSON object or
    /// array; otherwise text. An empty body is null. (A bare `42` or `true`
    /// under text/plain stays text: it is more likely prose than JSON.) A
    /// JSON body nests at most `MAX_JSON_DEPTH` levels: deeper is refused,
    /// not kept as text, which would quietly change its type.
    pub fn body_value(&self) -> Result<Value, TooDeep> {
        if self.body.is_empty() {
            return Ok(Value::Null);
        }
        let declared_json = self
            .headers
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(is_json_media_type);
        let looks_like_json = matches!(
            self.body.iter().find(|b| !b.is_ascii_whitespace()),
            Some(b'{' | b'[')
        );
        if declared_json || looks_like_json {
            let limit = crate::support::json_depth::MAX_JSON_DEPTH;
            if crate::support::json_depth::text_depth(&self.body) > limit {
                return Err(TooDeep { limit });
            }
            if let Ok(parsed) = serde_json::from_slice(&self.body) {
                return Ok(parsed);
            }
        }
        Ok(Value::String(
            String::from_utf8_lossy(&self.body).into_owned(),
        ))
    }

    /// The start of the body for an error message, on one line.
    pub fn excerpt(&self, redact: impl Fn(&str) -> String) -> String {
        // Redact before cutting: a cut could split a secret and leave a
        // prefix of it that no longer matches.
        let text = redact(&String::from_utf8_lossy(&self.body));
        let flat: String = text
            .chars()
            .map(|c| if c.is_control() { ' ' } else { c })
            .collect();
        let flat = flat.trim();
        if flat.is_empty() {
            return "(empty body)".to_string();
        }
        let mut cut: String = flat.chars().take(EXCERPT_CHARS).collect();
        if flat.chars().nth(EXCERPT_CHARS).is_some() {
            cut.push('…');
        }
        cut
    }
}

/// `application/json`, `application/problem+json`, `text/json`, ...
fn is_json_media_type(content_type: &str) -> bool {
    let essence = content_type
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    essence.ends_with("/json") || essence.ends_with("+json")
}

fn kept_headers(headers: &HeaderMap) -> Value {
    let mut out = Map::new();
    for name in headers.keys() {
        let name = name.as_str();
        if is_credential_header(name) || name == "set-cookie" {
            continue;
        }
        let joined = headers
            .get_all(name)
            .iter()
            .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned())
            .collect::<Vec<_>>()
            .join(", ");
        out.insert(name.to_string(), Value::String(joined));
    }
    Value::Object(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use reqwest::header::HeaderValue;

    fn received(content_type: &str, body: &str) -> Received {
        let mut headers = HeaderMap::new();
        headers.insert(CONTENT_TYPE, HeaderValue::from_str(content_type).unwrap());
        Received {
            status: 200,
            headers,
            body: body.as_bytes().to_vec(),
        }
    }

    #[test]
    fn bodies_are_json_when_declared_or_evident() {
        assert_eq!(
            received("application/problem+json", "{\"a\":1}").body_value(),
            Ok(json!({"a": 1}))
        );
        assert_eq!(
            received("application/json; charset=utf-8", "7").body_value(),
            Ok(json!(7))
        );
        assert_eq!(received("text/plain", " [1] ").body_value(), Ok(json!([1])));
        assert_eq!(received("text/plain", "42").body_value(), Ok(json!("42")));
        assert_eq!(
            received("application/json", "{oops").body_value(),
            Ok(json!("{oops"))
        );
        assert_eq!(received("text/plain", "").body_value(), Ok(Value::Null));
    }

    #[test]
    fn json_bodies_nest_at_most_max_json_depth() {
        let limit = crate::support::json_depth::MAX_JSON_DEPTH;
        let nested = |n: usize| format!("{}1{}", "[".repeat(n), "]".repeat(n));
        let at_limit = received("application/json", &nested(limit));
        assert!(at_limit.body_value().unwrap().is_array());
        // Past it, whether serde_json could parse it or not.
        for depth in [limit + 1, 127, 10_000] {
            let deep = received("text/plain", &nested(depth));
            assert_eq!(deep.body_value(), Err(TooDeep { limit }), "{depth}");
            assert!(deep.output().is_err());
        }
        // Text that is not JSON is measured only when it looks like JSON.
        let prose = received("text/plain", &format!("see {}", "[".repeat(500)));
        assert!(prose.body_value().unwrap().is_string());
    }

    #[test]
    fn credential_headers_are_dropped() {
        let mut r = received("text/plain", "x");
        for (n, v) in [
            ("set-cookie", "a=1"),
            ("x-auth-token", "t"),
            ("x-request-id", "r1"),
            ("vary", "a"),
        ] {
            r.headers.append(n, HeaderValue::from_static(v));
        }
        r.headers.append("vary", HeaderValue::from_static("b"));
        let out = r.output().unwrap();
        assert_eq!(
            out["headers"],
            json!({"content-type": "text/plain", "x-request-id": "r1", "vary": "a, b"})
        );
    }

    #[test]
    fn excerpts_are_bounded_one_line_and_redacted_first() {
        let long = format!("secret-value\n{}", "x".repeat(1000));
        let r = received("text/plain", &long);
        let e = r.excerpt(|t| t.replace("secret-value", "[redacted]"));
        assert!(e.starts_with("[redacted] xxx"), "{e}");
        assert_eq!(e.chars().count(), EXCERPT_CHARS + 1);
        assert_eq!(
            received("text/plain", " ").excerpt(str::to_string),
            "(empty body)"
        );
    }
}
