//! What an http tool's request can be checked for before any call: the
//! parts of its URL and headers written as fixed text.
//!
//! A template is evaluated only at call time, so these checks read the text
//! outside `{{ }}`, `{% %}`, `{# #}` and `${NAME}` and refuse only what no
//! value could repair: a fixed scheme other than http or https, a fixed
//! origin that is not one, a fixed prefix that cannot start an absolute
//! URL, a header name that is not an HTTP token, a control character in a
//! header value. A URL whose origin comes from a value (`{{ args.base }}/x`,
//! `${BASE_URL}/x`) is checked when the call is made (tools/http.rs).

/// The scheme an http tool may call.
const SCHEMES: [&str; 2] = ["http", "https"];

/// Why `template` (an http tool's `url:`) can never be an absolute http or
/// https URL, or None when it can (or only its values decide).
pub(super) fn url_problem(template: &str) -> Option<String> {
    let fixed = fixed_prefix(template);
    let whole = fixed.len() == template.len();
    let example = "e.g. https://api.example/orders/{{ args.id }}";
    let text = fixed.trim_start();
    let Some((scheme, after)) = text.split_once("://") else {
        if whole {
            return Some(match url::Url::parse(text) {
                // `mailto:x`, `file:/x`: a scheme, but not ours.
                Ok(url) => format!(
                    "the scheme of {template:?} is {:?}: an http tool calls http or https URLs only",
                    url.scheme()
                ),
                Err(e) => {
                    format!("{template:?} is not an absolute http or https URL ({e}); {example}")
                }
            });
        }
        // The value supplies the scheme (`{{ args.base }}/x`), or it will
        // follow (`http{{ s }}://`): only what is written so far is known.
        let could_start = text.is_empty()
            || SCHEMES
                .iter()
                .any(|s| format!("{s}://").starts_with(&text.to_ascii_lowercase()));
        return (!could_start).then(|| {
            format!(
                "{template:?} cannot become an absolute http or https URL: it starts with {text:?}, not with http:// or https:// or a value that supplies them; {example}"
            )
        });
    };
    if !SCHEMES.iter().any(|s| s.eq_ignore_ascii_case(scheme)) {
        return Some(format!(
            "the scheme of {template:?} is {:?}: an http tool calls http or https URLs only",
            scheme.to_ascii_lowercase()
        ));
    }
    // The origin is fixed when the text before the first value reaches the
    // path; a value inside the authority (`https://{{ args.host }}/x`,
    // `https://h:{{ args.port }}`) decides it at call time.
    let origin_end = after.find(['/', '?', '#']);
    let checked = match origin_end {
        Some(end) => &text[..scheme.len() + 3 + end],
        None if whole => text,
        None => return None,
    };
    match url::Url::parse(checked.trim_end()) {
        Ok(url) if url.host_str().is_some_and(|h| !h.is_empty()) => {
            if whole {
                // Everything is fixed: the URL as the call would parse it.
                if let Err(e) = url::Url::parse(text.trim_end()) {
                    return Some(format!("{template:?} is not a valid URL ({e})"));
                }
            }
            None
        }
        Ok(_) => Some(format!("{template:?} has no host; {example}")),
        Err(e) => Some(format!(
            "the origin {checked:?} of {template:?} is not a valid http or https origin ({e})"
        )),
    }
}

/// Why `name` cannot be a header name, or None.
pub(super) fn header_name_problem(name: &str) -> Option<String> {
    axum::http::HeaderName::from_bytes(name.as_bytes())
        .is_err()
        .then(|| {
            format!(
                "{name:?} is not a valid HTTP header name (letters, digits and !#$%&'*+-.^_`|~ only, no spaces or ':')"
            )
        })
}

/// Why the fixed text of header value template `template` cannot be sent
/// (a control character: CR or LF would end the header and start another),
/// or None. Values an expression or a secret inserts are checked at call
/// time.
pub(super) fn header_value_problem(template: &str) -> Option<String> {
    literal_parts(template)
        .into_iter()
        .flat_map(str::chars)
        .find(|c| c.is_control())
        .map(|c| {
            format!(
                "the value holds the control character {:?} (U+{:04X}): a header value is one line of text; {}",
                c,
                c as u32,
                if matches!(c, '\r' | '\n') {
                    "a line break would end this header and start another (check for a YAML block scalar `|`, which ends with one)"
                } else {
                    "remove it"
                }
            )
        })
}

/// The text before the first value: `{{`, `{%`, `{#` or a `$` (a `${NAME}`
/// reference, or `$$`, which stands for `$`).
fn fixed_prefix(template: &str) -> &str {
    let end = ["{{", "{%", "{#", "$"]
        .iter()
        .filter_map(|marker| template.find(marker))
        .min()
        .unwrap_or(template.len());
    &template[..end]
}

/// The text of `template` outside template blocks and `${NAME}` references.
fn literal_parts(template: &str) -> Vec<&str> {
    let mut parts = Vec::new();
    let mut rest = template;
    loop {
        let next = [("{{", "}}"), ("{%", "%}"), ("{#", "#}"), ("${", "}")]
            .iter()
            .filter_map(|(open, close)| rest.find(open).map(|at| (at, *open, *close)))
            .min_by_key(|(at, _, _)| *at);
        let Some((at, open, close)) = next else {
            parts.push(rest);
            return parts;
        };
        parts.push(&rest[..at]);
        let after = &rest[at + open.len()..];
        match after.find(close) {
            Some(end) => rest = &after[end + close.len()..],
            // Unclosed: the template check reports it.
            None => return parts,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_that_can_be_http_urls_pass() {
        for ok in [
            "https://shop.example/orders/{{ args.order_id }}",
            "https://pay.example/refunds",
            "HTTP://h:8080",
            "http://127.0.0.1:9/x?q=1#f",
            "{{ args.base }}/orders",
            "${BASE_URL}/orders/{{ args.id }}",
            "https://{{ args.host }}/x",
            "https://shop.example:{{ args.port }}/x",
            "https://${REGION}.shop.example/x",
            "http{{ 's' if args.tls }}://h/x",
            "ht{{ args.rest }}",
            "{% if args.eu %}https://eu.example{% else %}https://us.example{% endif %}/x",
            "https://h/a b/{{ args.x }}",
            "  https://h/x",
            "https://user:${PASSWORD}@h/x",
        ] {
            assert_eq!(url_problem(ok), None, "{ok}");
        }
    }

    #[test]
    fn urls_that_cannot_be_http_urls_are_named() {
        for (bad, says) in [
            ("not a url", "not an absolute http or https URL"),
            ("shop.example/orders", "not an absolute http or https URL"),
            ("file:///etc/passwd", "is \"file\""),
            ("FILE:///etc/passwd", "is \"file\""),
            ("ftp://h/{{ args.x }}", "is \"ftp\""),
            ("mailto:a@b", "is \"mailto\""),
            ("/orders/{{ args.id }}", "starts with \"/orders/\""),
            ("shop.example/{{ args.id }}", "cannot become"),
            ("https://", "not a valid"),
            ("https:///x/{{ args.id }}", "not a valid"),
            ("https://sh op.example/{{ args.id }}", "not a valid"),
            ("https://h:99999/x", "not a valid"),
        ] {
            let problem = url_problem(bad).unwrap_or_else(|| panic!("{bad} passed"));
            assert!(problem.contains(says), "{bad}: {problem}");
        }
    }

    #[test]
    fn header_names_are_tokens_and_values_one_line() {
        assert_eq!(header_name_problem("X-Request-Id"), None);
        assert!(header_name_problem("X Bad").is_some());
        assert!(header_name_problem("X:Bad").is_some());
        assert!(header_name_problem("X-Bad\r\nX-Evil").is_some());
        assert!(header_name_problem("").is_some());
        assert_eq!(header_value_problem("Bearer ${TOKEN}"), None);
        assert_eq!(header_value_problem("{{ args.a\n }} x"), None);
        assert_eq!(header_value_problem("café ü"), None);
        for bad in [
            "a\r\nX-Evil: 1",
            "a\n",
            "a\tb",
            "x\u{7f}",
            "x\u{0}",
            "{{ args.a }}\r\n",
        ] {
            assert!(header_value_problem(bad).is_some(), "{bad:?}");
        }
    }
}
