//! Redaction: every secret value a downstream may echo back, in the forms
//! it is commonly echoed in, replaced by `[redacted]`.
//!
//! What is matched, for a value of [`MIN_ENCODED_LEN`] bytes or more:
//! the value in any letter case, with any of its characters percent-encoded
//! (`%HH` in either case, `+` for a space) or JSON-escaped (one level); its
//! hex in either case; its base64, standard and URL-safe, padded or not,
//! and inside a longer base64 blob at any alignment (the one character at
//! each edge that mixes in neighbouring bytes stays: at most 4 bits of the
//! secret each). Shorter values (4 to 7 bytes) are matched exactly as
//! written only: their encodings and case variants are too likely to occur
//! by chance. Values under 4 bytes are not redacted. A value that is a number is also redacted wherever it
//! appears as an equal JSON number (`12345`, `12345.0`, `1.2345e4`).

use serde_json::Value;

use super::encodings::{self, Readings};

/// The text that replaces a secret.
pub const REDACTED: &str = "[redacted]";

/// Values shorter than this (in bytes) are not redacted at all.
pub const MIN_REDACTED_LEN: usize = 4;

/// Values shorter than this (in bytes) are redacted only as written.
pub const MIN_ENCODED_LEN: usize = 8;

/// One form to look for.
#[derive(Debug, Clone)]
struct Pattern {
    chars: Vec<char>,
    /// Letters match in either case.
    fold_case: bool,
    /// Text is read through one level of percent and JSON decoding.
    decode: bool,
}

impl Pattern {
    /// The end of the longest match starting at `start`, if any. Every
    /// reading of every position is followed at once (a small NFA), so an
    /// ambiguous text (`%25` is `%` or the start of a `%`-escape) costs at
    /// most the number of distinct positions, never a backtracking blow-up.
    fn match_end(&self, text: &str, first: &Readings) -> Option<usize> {
        let (head, rest) = self.chars.split_first()?;
        // Most positions fail here: decide before allocating anything.
        if !first.iter().any(|(c, _)| same(c, *head, self.fold_case)) {
            return None;
        }
        let mut states: Vec<usize> = first
            .iter()
            .filter(|&(c, _)| same(c, *head, self.fold_case))
            .map(|(_, end)| end)
            .collect();
        let mut next = Vec::new();
        for &want in rest {
            if states.is_empty() {
                return None;
            }
            next.clear();
            for &at in &states {
                for (c, end) in encodings::readings(text, at, self.decode).iter() {
                    if same(c, want, self.fold_case) && !next.contains(&end) {
                        next.push(end);
                    }
                }
            }
            std::mem::swap(&mut states, &mut next);
        }
        states.into_iter().max()
    }
}

fn same(a: char, b: char, fold_case: bool) -> bool {
    a == b
        || (fold_case
            && (a.eq_ignore_ascii_case(&b)
                || (!a.is_ascii() && a.to_lowercase().eq(b.to_lowercase()))))
}

/// Replaces secret values that a downstream echoed back (in a response
/// body, an error, a log line) with `[redacted]`, so they never reach the
/// store, an event, an API answer or the log.
#[derive(Debug, Default, Clone)]
pub struct Redactor {
    patterns: Vec<Pattern>,
    /// Numeric secrets, for equal JSON numbers.
    numbers: Vec<f64>,
    /// ASCII characters (lower-cased) a pattern can start with, and whether
    /// one starts with a non-ASCII character: lets most positions of a long
    /// text be skipped with one lookup.
    first_ascii: Box<[bool]>,
    first_other: bool,
}

impl Redactor {
    pub fn new(mut values: Vec<String>) -> Redactor {
        values.retain(|v| v.len() >= MIN_REDACTED_LEN);
        values.sort();
        values.dedup();
        let mut patterns = Vec::new();
        let mut numbers = Vec::new();
        for v in &values {
            if let Some(n) = as_number(v) {
                numbers.push(n);
            }
            if v.len() < MIN_ENCODED_LEN {
                patterns.push(Pattern {
                    chars: v.chars().collect(),
                    fold_case: false,
                    decode: false,
                });
                continue;
            }
            patterns.push(Pattern {
                chars: v.chars().collect(),
                fold_case: true,
                decode: true,
            });
            patterns.push(Pattern {
                chars: crate::support::hex::encode(v.as_bytes()).chars().collect(),
                fold_case: true,
                decode: true,
            });
            for form in encodings::base64_forms(v.as_bytes()) {
                patterns.push(Pattern {
                    chars: form.chars().collect(),
                    fold_case: false,
                    decode: true,
                });
            }
        }
        let mut first_ascii = vec![false; 128].into_boxed_slice();
        let mut first_other = false;
        for p in &patterns {
            match p.chars.first() {
                Some(c) if c.is_ascii() => {
                    first_ascii[*c as usize] = true;
                    if p.fold_case {
                        first_ascii[c.to_ascii_lowercase() as usize] = true;
                        first_ascii[c.to_ascii_uppercase() as usize] = true;
                    }
                }
                Some(_) => first_other = true,
                None => {}
            }
        }
        Redactor {
            patterns,
            numbers,
            first_ascii,
            first_other,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.patterns.is_empty()
    }

    /// True when a pattern could start with the character `c`.
    fn may_start(&self, c: char) -> bool {
        if self.first_other {
            return true;
        }
        if c.is_ascii() {
            self.first_ascii[c as usize]
        } else {
            // A non-ASCII character may fold to an ASCII one (K, the Kelvin sign).
            c.to_lowercase()
                .any(|l| l.is_ascii() && self.first_ascii[l as usize])
        }
    }

    /// `text` with every match replaced; the longest match at the leftmost
    /// position wins, so a secret containing another is replaced whole.
    pub fn text(&self, text: &str) -> String {
        if self.patterns.is_empty() {
            return text.to_string();
        }
        let mut out = String::new();
        let mut copied = 0;
        let mut at = 0;
        while at < text.len() {
            let first = encodings::readings(text, at, true);
            let mut best: Option<usize> = None;
            if first.iter().any(|(c, _)| self.may_start(c)) {
                for p in &self.patterns {
                    let readings = if p.decode {
                        first
                    } else {
                        encodings::readings(text, at, false)
                    };
                    if let Some(end) = p.match_end(text, &readings) {
                        best = Some(best.map_or(end, |b| b.max(end)));
                    }
                }
            }
            match best {
                Some(end) => {
                    out.push_str(&text[copied..at]);
                    out.push_str(REDACTED);
                    copied = end;
                    at = end;
                }
                None => {
                    at += text[at..].chars().next().map_or(1, char::len_utf8);
                }
            }
        }
        if copied == 0 {
            return text.to_string();
        }
        out.push_str(&text[copied..]);
        out
    }

    /// Redact a JSON value structurally: strings, object keys and numbers.
    pub fn value(&self, value: Value) -> Value {
        if self.patterns.is_empty() {
            return value;
        }
        match value {
            Value::String(s) => Value::String(self.text(&s)),
            Value::Number(n) if self.is_secret_number(&n) => Value::String(REDACTED.to_string()),
            Value::Array(items) => Value::Array(items.into_iter().map(|v| self.value(v)).collect()),
            Value::Object(map) => {
                let mut out = serde_json::Map::with_capacity(map.len());
                for (k, v) in map {
                    let mut key = self.text(&k);
                    // Two keys redacted alike must not overwrite each other.
                    if key != k && out.contains_key(&key) {
                        let base = key.clone();
                        let mut n = 2;
                        while out.contains_key(&key) {
                            key = format!("{base} ({n})");
                            n += 1;
                        }
                    }
                    out.insert(key, self.value(v));
                }
                Value::Object(out)
            }
            other => other,
        }
    }

    fn is_secret_number(&self, n: &serde_json::Number) -> bool {
        n.as_f64().is_some_and(|f| self.numbers.contains(&f))
    }
}

/// A secret written as a plain decimal number (`12345`, `-7.5`, `1e9`).
fn as_number(value: &str) -> Option<f64> {
    let bytes = value.as_bytes();
    let plain = bytes
        .iter()
        .all(|b| b.is_ascii_digit() || matches!(b, b'-' | b'+' | b'.' | b'e' | b'E'))
        && bytes.iter().any(u8::is_ascii_digit);
    if !plain {
        return None;
    }
    value.parse::<f64>().ok().filter(|f| f.is_finite())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const SECRET: &str = "s3cr3t Välue/+&#?=%\"\\x";

    fn redactor() -> Redactor {
        Redactor::new(vec![SECRET.to_string()])
    }

    #[test]
    fn base64_inside_a_longer_blob_is_redacted_at_every_alignment() {
        let r = redactor();
        for user in ["", "a", "ab", "abc", "user"] {
            let blob = encodings::base64(format!("{user}:{SECRET}").as_bytes(), false, true);
            let out = r.text(&format!("Authorization: Basic {blob}"));
            assert!(out.contains(REDACTED), "{user:?}: {out}");
            // What stays is the prefix's own characters, one mixed
            // character at each edge and the padding: never the secret.
            let rest = out.trim_start_matches("Authorization: Basic ");
            let kept: usize = rest.split(REDACTED).map(str::len).sum();
            let prefix = encodings::base64(format!("{user}:").as_bytes(), false, false);
            assert!(kept <= prefix.len() + 3, "{user:?}: {out}");
        }
    }

    #[test]
    fn json_values_are_redacted_in_strings_keys_and_equal_numbers() {
        let r = Redactor::new(vec!["12345".into(), SECRET.into()]);
        let v = json!({
            "n": 12345, "f": 12345.0, "e": 1.2345e4, "other": 123456,
            "s": "pin 12345", SECRET: "key", "list": [SECRET.to_uppercase()],
        });
        assert_eq!(
            r.value(v),
            json!({
                "n": "[redacted]", "f": "[redacted]", "e": "[redacted]", "other": 123456,
                "s": "pin [redacted]", "[redacted]": "key", "list": ["[redacted]"],
            })
        );
    }

    #[test]
    fn short_values_are_redacted_as_written_only() {
        let r = Redactor::new(vec!["ab".into(), "Pin7".into(), "1234".into()]);
        assert_eq!(
            r.text("ab Pin7 pin7 PIN7 50696e37 UGluNw=="),
            "ab [redacted] pin7 PIN7 50696e37 UGluNw=="
        );
        assert_eq!(r.value(json!(1234)), json!("[redacted]"));
        assert_eq!(r.value(json!(12)), json!(12));
    }

    #[test]
    fn the_longest_match_wins_and_keys_do_not_collide() {
        let r = Redactor::new(vec!["token-1234".into(), "token-1234-extra".into()]);
        assert_eq!(r.text("a token-1234-extra b"), "a [redacted] b");
        let v = r.value(json!({"token-1234": 1, "TOKEN-1234": 2}));
        assert_eq!(v.as_object().unwrap().len(), 2, "{v}");
    }

    #[test]
    fn hostile_text_stays_linear() {
        let r = Redactor::new(vec!["%%%%%%%%%%%%%%%%".into(), "++++++++".into()]);
        let text = "%25".repeat(20_000) + &"+".repeat(20_000);
        let out = r.text(&text);
        assert!(out.contains(REDACTED));
    }

    #[test]
    fn nothing_to_redact_returns_the_text() {
        let r = redactor();
        assert_eq!(r.text("plain text, ünïcode"), "plain text, ünïcode");
        assert!(Redactor::default().is_empty());
    }
}
