//! A JSON payload made readable: nested objects as tables, arrays as
//! lists, scalars as text (the template renders the tree, escaping every
//! label and value); and the line diff of an edited payload.
//!
//! A page shows at most [`MAX_TREE_NODES`] nodes of a tree and
//! [`MAX_SHOWN_BYTES`] of any JSON text: past that it is cut, says so,
//! and the page links the whole payload as a download. A payload of a
//! million keys would otherwise be an HTML page of hundreds of megabytes,
//! built in memory before a byte of it is sent.

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

/// The most nodes of a payload's tree a page shows.
pub(crate) const MAX_TREE_NODES: usize = 1_000;

/// The most bytes of JSON text (a raw payload, the run's input, an
/// output) a page shows.
pub(crate) const MAX_SHOWN_BYTES: usize = 64 * 1024;

/// A payload's tree as a page shows it: at most [`MAX_TREE_NODES`] nodes.
pub(crate) struct Tree {
    pub root: Node,
    /// Some nodes were left out (each cut container ends with a `more`
    /// node that says how many).
    pub cut: bool,
}

/// The tree of `value`, its first [`MAX_TREE_NODES`] nodes in document
/// order.
pub(crate) fn tree(value: &Value) -> Tree {
    let mut budget = MAX_TREE_NODES;
    let root = node(value, "root", String::new(), &mut budget);
    Tree {
        root,
        cut: budget == 0 && count_at_least(value, MAX_TREE_NODES + 1),
    }
}

/// Whether `value` has at least `n` nodes (itself included), counting no
/// further than `n`.
fn count_at_least(value: &Value, n: usize) -> bool {
    fn walk(value: &Value, left: &mut usize) {
        if *left == 0 {
            return;
        }
        *left -= 1;
        match value {
            Value::Object(map) => map.values().for_each(|v| walk(v, left)),
            Value::Array(items) => items.iter().for_each(|v| walk(v, left)),
            _ => {}
        }
    }
    let mut left = n;
    walk(value, &mut left);
    left == 0
}

fn node(value: &Value, wrap: &'static str, label: String, budget: &mut usize) -> Node {
    *budget = budget.saturating_sub(1);
    let (kind, text, children) = match value {
        Value::Object(map) => (
            "object",
            String::new(),
            children(
                map.iter().map(|(k, v)| (v, "row", k.clone())),
                map.len(),
                budget,
            ),
        ),
        Value::Array(items) => (
            "array",
            String::new(),
            children(
                items.iter().map(|v| (v, "item", String::new())),
                items.len(),
                budget,
            ),
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

/// A container's children while the budget lasts; the rest as one `more`
/// node ("… 69,000 more").
fn children<'v>(
    entries: impl Iterator<Item = (&'v Value, &'static str, String)>,
    len: usize,
    budget: &mut usize,
) -> Vec<Node> {
    let mut shown = Vec::new();
    for (value, wrap, label) in entries {
        if *budget == 0 {
            break;
        }
        shown.push(node(value, wrap, label, budget));
    }
    let left = len - shown.len();
    if left > 0 {
        shown.push(Node {
            kind: "more",
            wrap: "item",
            label: String::new(),
            text: format!("… {left} more not shown (download the raw JSON)"),
            children: Vec::new(),
        });
    }
    shown
}

/// `value` as indented JSON (the edit box, the diff): whole.
pub(crate) fn pretty(value: &Value) -> String {
    serde_json::to_string_pretty(value).unwrap_or_else(|_| value.to_string())
}

/// `value` as indented JSON for reading on a page: at most
/// [`MAX_SHOWN_BYTES`] (written no further), with a last line saying it
/// was cut; and whether it was.
pub(crate) fn shown(value: &Value) -> (String, bool) {
    shown_as(|out| serde_json::to_writer_pretty(out, value).is_ok())
}

/// [`shown`] for a document kept as text (a run's input): indented as
/// `serde_json` would, without parsing it into a tree.
pub(crate) fn shown_doc(doc: &crate::support::json_doc::JsonDoc) -> (String, bool) {
    shown_as(|out| indent(doc.as_str(), out).is_ok())
}

/// Compact JSON `text` indented by two spaces a level, as
/// `serde_json::to_writer_pretty` writes it.
fn indent(text: &str, out: &mut impl std::io::Write) -> std::io::Result<()> {
    let bytes = text.as_bytes();
    let mut level = 0usize;
    let newline = |out: &mut dyn std::io::Write, level: usize| -> std::io::Result<()> {
        out.write_all(b"\n")?;
        (0..level).try_for_each(|_| out.write_all(b"  "))
    };
    let mut start = 0;
    for (i, b) in crate::support::json_scan::structure(bytes) {
        let (before, after): (&[u8], Option<isize>) = match b {
            // An empty container stays `{}` or `[]`.
            b'{' | b'[' if matches!(bytes.get(i + 1), Some(b'}' | b']')) => continue,
            b'}' | b']' if matches!(bytes.get(i.wrapping_sub(1)), Some(b'{' | b'[')) => continue,
            b'{' | b'[' => (&bytes[i..=i], Some(1)),
            b'}' | b']' => {
                out.write_all(&bytes[start..i])?;
                level = level.saturating_sub(1);
                newline(out, level)?;
                start = i;
                continue;
            }
            b',' => (b",", Some(0)),
            b':' => (b": ", None),
            _ => continue,
        };
        out.write_all(&bytes[start..i])?;
        out.write_all(before)?;
        if let Some(change) = after {
            level = level.saturating_add_signed(change);
            newline(out, level)?;
        }
        start = i + 1;
    }
    out.write_all(&bytes[start..])
}

fn shown_as(write: impl FnOnce(&mut Capped) -> bool) -> (String, bool) {
    let mut out = Capped {
        bytes: Vec::new(),
        cap: MAX_SHOWN_BYTES,
    };
    let whole = write(&mut out);
    let mut text = String::from_utf8_lossy(&out.bytes).into_owned();
    if whole {
        return (text, false);
    }
    // Cut at a character boundary (lossy decoding may have left a U+FFFD
    // where a character was split): drop the partial last line.
    if let Some(end) = text.rfind('\n') {
        text.truncate(end);
    }
    text.push_str(&format!(
        "\n… cut at {} KiB: download the raw JSON for the rest",
        MAX_SHOWN_BYTES / 1024
    ));
    (text, true)
}

/// A writer that takes `cap` bytes and then fails, which stops the
/// serializer: no text past what is shown is ever made.
struct Capped {
    bytes: Vec<u8>,
    cap: usize,
}

impl std::io::Write for Capped {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let room = self.cap - self.bytes.len();
        if buf.len() > room {
            self.bytes.extend_from_slice(&buf[..room]);
            return Err(std::io::Error::other("shown in full"));
        }
        self.bytes.extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
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
    fn a_document_is_indented_as_serde_json_would() {
        let value = serde_json::json!({
            "a": [1, {"b": "x, {y}: [z]\\\"", "e": {}}, []],
            "c": {"d": null},
            "f": "",
        });
        let doc = crate::support::json_doc::JsonDoc::from_value(&value);
        assert_eq!(shown_doc(&doc), shown(&value));
        let scalar = crate::support::json_doc::JsonDoc::from_value(&serde_json::json!("s"));
        assert_eq!(shown_doc(&scalar).0, "\"s\"");
    }

    #[test]
    fn a_wide_payload_is_cut_and_says_so() {
        let wide: serde_json::Map<String, Value> =
            (0..70_000).map(|i| (format!("k{i}"), json!(i))).collect();
        let wide = Value::Object(wide);
        let t = tree(&wide);
        assert!(t.cut);
        let shown_nodes = t.root.children.len();
        assert_eq!(
            shown_nodes, MAX_TREE_NODES,
            "999 entries and the `more` node"
        );
        let more = t.root.children.last().unwrap();
        assert_eq!(more.kind, "more");
        assert!(more.text.starts_with("… 69001 more"), "{}", more.text);
        let (text, cut) = shown(&wide);
        assert!(cut && text.len() <= MAX_SHOWN_BYTES + 100, "{}", text.len());
        assert!(text.ends_with("download the raw JSON for the rest"));
        // Small ones are whole.
        let small = json!({"a": [1, 2], "b": "x"});
        assert!(!tree(&small).cut);
        assert_eq!(shown(&small), (pretty(&small), false));
        // Exactly the budget is not cut.
        let exact: Vec<Value> = (0..MAX_TREE_NODES - 1).map(|i| json!(i)).collect();
        assert!(!tree(&Value::Array(exact)).cut);
    }

    #[test]
    fn trees_follow_the_json() {
        let t = tree(&json!({"a": [1, {"b": null}], "c": "x"})).root;
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
