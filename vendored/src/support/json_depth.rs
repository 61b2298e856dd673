//! How deep JSON may nest, and measuring it without recursion.
//!
//! Every store reads its JSON columns back with serde_json, whose parser
//! refuses a document nested deeper than its recursion limit. A row written
//! deeper could never be read again: the run, its events or its approval
//! would be lost to every reader. So data from outside a run is held to
//! [`MAX_JSON_DEPTH`], well under what a store can read back
//! ([`READABLE_DEPTH`]), and the stores refuse to write anything deeper
//! than that as the last line of defence.

use serde_json::Value;

/// The deepest document serde_json reads back: its recursion limit is 128
/// and the 128th level is the one that fails. Every store's JSON columns,
/// and every client of our HTTP answers that uses serde_json, stop here.
pub const READABLE_DEPTH: usize = 127;

/// The deepest JSON a run accepts from outside: a request body (`POST
/// /runs`, a webhook, an approval's payload), `--input` and `--payload`, a
/// tool's HTTP reply, a model's JSON answer, a custom tool's output, and
/// the result of an expression.
///
/// Why 100: what a run stores wraps that data again, and the wrapped row
/// must stay readable. A reply body sits in the step's output
/// (`{status, headers, body}`, +1), the output in the run's `outputs` map
/// (+1), and the map in a `run_completed` event (`{outputs: {...}}`, +1);
/// a payload in an approval's `decision_data` or an `awaiting_approval`
/// event (+1 each); a spec's `set:`/`with:` mappings add their own few
/// levels around an expression's result; our HTTP answers add theirs
/// (`{"approvals": [{"payload": ...}]}`). 27 levels of headroom cover all
/// of that; a write that would still go past [`READABLE_DEPTH`] is refused
/// by the store and fails the run visibly.
pub const MAX_JSON_DEPTH: usize = 100;

const _: () = assert!(MAX_JSON_DEPTH + 16 <= READABLE_DEPTH);

/// How deep a value nests: a scalar is 0, `[]` and `{}` are 1, `[[1]]` is
/// 2. Iterative, so measuring cannot overflow the stack; stops counting
/// past `stop` (pass the limit being checked).
pub fn value_depth(value: &Value, stop: usize) -> usize {
    let mut max = 0;
    let mut todo: Vec<(&Value, usize)> = vec![(value, 0)];
    while let Some((v, depth)) = todo.pop() {
        let depth = depth + 1;
        match v {
            Value::Array(items) => todo.extend(items.iter().map(|c| (c, depth))),
            Value::Object(map) => todo.extend(map.values().map(|c| (c, depth))),
            _ => continue,
        }
        max = max.max(depth);
        if max > stop {
            return max;
        }
    }
    max
}

/// How deep JSON text nests: the most `[` and `{` open at once outside
/// string literals. For valid JSON this is [`value_depth`] of what it
/// parses to; invalid text is measured the same way (the parser reports
/// what else is wrong). One pass, no allocation: cheap enough for every
/// stored column and every body before it is parsed.
pub fn text_depth(text: &[u8]) -> usize {
    let (mut depth, mut max) = (0usize, 0usize);
    for (_, b) in super::json_scan::structure(text) {
        match b {
            b'[' | b'{' => {
                depth += 1;
                max = max.max(depth);
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    max
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn nested(depth: usize) -> String {
        format!("{}1{}", "[".repeat(depth), "]".repeat(depth))
    }

    #[test]
    fn readable_depth_is_what_serde_json_reads_back() {
        assert!(serde_json::from_str::<Value>(&nested(READABLE_DEPTH)).is_ok());
        let err = serde_json::from_str::<Value>(&nested(READABLE_DEPTH + 1)).unwrap_err();
        assert!(err.to_string().contains("recursion limit"), "{err}");
    }

    #[test]
    fn text_and_value_depths_agree() {
        for text in [
            "1",
            "\"[[{{\"",
            "[]",
            "{}",
            "[[1],[[2]]]",
            r#"{"a": {"b": "]]}}\"[["}, "c": [[[]]]}"#,
            &nested(100),
        ] {
            let value: Value = serde_json::from_str(text).unwrap();
            assert_eq!(
                text_depth(text.as_bytes()),
                value_depth(&value, usize::MAX),
                "{text}"
            );
        }
        assert_eq!(value_depth(&json!({"a": [1, {"b": {}}]}), usize::MAX), 4);
    }

    #[test]
    fn measuring_stops_past_the_limit_and_never_recurses() {
        let mut deep = json!(1);
        for _ in 0..100_000 {
            deep = Value::Array(vec![deep]);
        }
        assert_eq!(value_depth(&deep, 10), 11);
        assert_eq!(text_depth(nested(100_000).as_bytes()), 100_000);
        // Dropping a value this deep recurses in serde_json itself.
        std::mem::forget(deep);
    }
}
