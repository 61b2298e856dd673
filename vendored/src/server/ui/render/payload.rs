//! A JSON payload made readable: nested objects as tables, arrays as
//! lists, scalars as text (the template renders the tree, escaping every
//! label and value); and the line diff of an edited payload.

use serde::Serialize;
use serde_json::Value;

/// One node of the tree `approval.html` renders with a recursive loop.
#[derive(Debug, Serialize, PartialEq)]
pub(crate) struct Node {
    /// `object`, `array`, `string`, `number`, `bool` or `null`.
    pub kind: &'static str,
    /// How the node sits in its parent: `row` (an object's entry, with
    /// `label`), `item` (an array's) or `root`.
    pub wrap: &'static str,
    pub label: String,
    /// A scalar's text.
    pub text: String,
    pub children: Vec<Node>,
}

/// The tree of `value`.
pub(crate) fn tree(value: &Value) -> Node {
    node(value, "root", String::new())
}

fn node(value: &Value, wrap: &'static str, label: String) -> Node {
    let (kind, text, children) = match value {
        Value::Object(map) => (
            "object",
            String::new(),
            map.iter().map(|(k, v)| node(v, "row", k.clone())).collect(),
        ),
        Value::Array(items) => (
            "array",
            String::new(),
            items
                .iter()
                .map(|v| node(v, "item", String::new()))
                .collect(),
        ),
        Value::String(s) => ("string", s.clone(), Vec::new()),
        Value::Number(n) => ("number", n.to_string(), Vec::new()),
        Value::Bool(b) => ("bool", b.to_string(), Vec::new()),
        Value::Null => ("null", "null".to_string(), Vec::new()),
    };
    Node {
        kind,
        wrap,
        label,
        text,
        children,
    }
}

/// `value` as indented JSON (the raw view and the edit box).
pub(crate) fn pretty(value: &Value) -> String {
    serde_json::to_string_pretty(value).unwrap_or_else(|_| value.to_string())
}

/// One line of a diff: `same`, `del` (only in the original) or `add`.
#[derive(Debug, Serialize, PartialEq)]
pub(crate) struct DiffLine {
    pub op: &'static str,
    pub text: String,
}

/// Past this many lines on both sides the diff shows the whole original
/// removed and the whole edit added, instead of an LCS table that grows
/// with the product of the sizes.
const MAX_DIFF_LINES: usize = 2000;

/// The line diff of the pretty JSON of `original` and `edited`.
pub(crate) fn diff(original: &Value, edited: &Value) -> Vec<DiffLine> {
    let a_text = pretty(original);
    let b_text = pretty(edited);
    let a: Vec<&str> = a_text.lines().collect();
    let b: Vec<&str> = b_text.lines().collect();
    if a.len() + b.len() > MAX_DIFF_LINES {
        return a
            .iter()
            .map(|l| line("del", l))
            .chain(b.iter().map(|l| line("add", l)))
            .collect();
    }
    // Longest common subsequence, from the end.
    let (n, m) = (a.len(), b.len());
    let mut lcs = vec![vec![0u32; m + 1]; n + 1];
    for i in (0..n).rev() {
        for j in (0..m).rev() {
            lcs[i][j] = if a[i] == b[j] {
                lcs[i + 1][j + 1] + 1
            } else {
                lcs[i + 1][j].max(lcs[i][j + 1])
            };
        }
    }
    let (mut i, mut j) = (0, 0);
    let mut out = Vec::new();
    while i < n && j < m {
        if a[i] == b[j] {
            out.push(line("same", a[i]));
            i += 1;
            j += 1;
        } else if lcs[i + 1][j] >= lcs[i][j + 1] {
            out.push(line("del", a[i]));
            i += 1;
        } else {
            out.push(line("add", b[j]));
            j += 1;
        }
    }
    out.extend(a[i..].iter().map(|l| line("del", l)));
    out.extend(b[j..].iter().map(|l| line("add", l)));
    out
}

fn line(op: &'static str, text: &str) -> DiffLine {
    DiffLine {
        op,
        text: text.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn trees_follow_the_json() {
        let t = tree(&json!({"a": [1, {"b": null}], "c": "x"}));
        assert_eq!(t.kind, "object");
        assert_eq!(t.children[0].label, "a");
        assert_eq!(t.children[0].kind, "array");
        assert_eq!(t.children[0].children[1].children[0].kind, "null");
        assert_eq!(t.children[1].text, "x");
    }

    #[test]
    fn diffs_mark_changed_lines() {
        let d = diff(
            &json!({"amount": 10, "order": "A1"}),
            &json!({"amount": 5, "order": "A1"}),
        );
        let ops: Vec<(&str, &str)> = d.iter().map(|l| (l.op, l.text.trim())).collect();
        assert!(ops.contains(&("del", "\"amount\": 10,")), "{ops:?}");
        assert!(ops.contains(&("add", "\"amount\": 5,")), "{ops:?}");
        assert!(ops.contains(&("same", "\"order\": \"A1\"")), "{ops:?}");
    }
}
