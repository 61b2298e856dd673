//! A span-aware YAML tree, built from yaml-rust2's event API.
//!
//! One parser serves both the typed conversion and every position a spec
//! error reports, so the tree stays small: each node knows its value and its
//! 1-based line and column. Plain scalars resolve like the YAML 1.2 core
//! schema; quoted and block scalars are strings. Aliases become copies of the
//! anchored node. Things a spec has no use for and that would only hide
//! mistakes are errors: duplicate keys, non-string keys, several documents,
//! tags beyond the core schema.
//!
//! The tree is built without recursion over the event stream, nesting is
//! capped, and the expanded document (aliases included) is capped both in
//! nodes and in bytes, checked before an alias is copied, so no input can
//! exhaust the stack or memory ("billion laughs", or one long string
//! repeated through aliases).

use std::collections::HashMap;

use serde_json::{Number, Value};
use yaml_rust2::parser::{Event, Parser, Tag};
use yaml_rust2::scanner::{Marker, TScalarStyle};

use super::{SpecError, SpecErrorKind};

/// Deeper than any real spec; keeps recursive walks over the tree safe.
const MAX_DEPTH: usize = 64;
/// Caps the tree size, aliases included ("billion laughs"). A parsed spec
/// holds a few copies of its document at about 150 bytes a node, so this
/// keeps a spec at the limits within a few tens of MiB.
pub const MAX_NODES: usize = 50_000;
/// Caps the expanded document's size in bytes, aliases included: about its
/// size as JSON (the text of every scalar and key, plus a few bytes a
/// node). A spec file is at most 1 MiB; this lets aliases grow it a little
/// and no further, so a few KB of anchors cannot become gigabytes.
pub const MAX_EXPANDED_BYTES: usize = 2 * 1024 * 1024;
/// What a node adds to the expanded size besides its text.
const NODE_BYTES: usize = 4;

/// A 1-based line and column.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Pos {
    pub line: usize,
    pub column: usize,
}

impl Pos {
    fn of(mark: Marker) -> Pos {
        Pos {
            line: mark.line().max(1),
            column: mark.col() + 1,
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Node {
    pub value: NodeValue,
    pub pos: Pos,
}

#[derive(Debug, Clone, PartialEq)]
pub enum NodeValue {
    /// Keys in the order they were written.
    Mapping(Vec<Entry>),
    Sequence(Vec<Node>),
    Scalar(Scalar),
}

#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    pub key: String,
    pub key_pos: Pos,
    pub value: Node,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Scalar {
    /// The scalar's text as written (after YAML unescaping and folding).
    pub text: String,
    pub style: ScalarStyle,
    pub resolved: Resolved,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ScalarStyle {
    Plain,
    SingleQuoted,
    DoubleQuoted,
    Literal,
    Folded,
}

/// What a scalar means under the core schema.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Resolved {
    Null,
    Bool(bool),
    /// From `i64::MIN` to `u64::MAX`: every integer a JSON number holds
    /// exactly (serde_json reads the same range exactly).
    Int(i128),
    Float(f64),
    /// The text itself.
    Str,
}

/// One step of a path into the tree.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Seg<'a> {
    Key(&'a str),
    Index(usize),
}

/// The parsed document: the marked tree and the same document as JSON.
#[derive(Debug, Clone)]
pub struct Tree {
    pub root: Node,
    pub document: Value,
}

impl Tree {
    /// The node at `path`, if there is one.
    pub fn get(&self, path: &[Seg<'_>]) -> Option<&Node> {
        let mut node = &self.root;
        for seg in path {
            node = match seg {
                Seg::Key(k) => node.get(k)?,
                Seg::Index(i) => node.items()?.get(*i)?,
            };
        }
        Some(node)
    }

    /// Position of the key `key` in the mapping at `path`.
    pub fn key_pos(&self, path: &[Seg<'_>], key: &str) -> Option<Pos> {
        self.get(path)?.entry(key).map(|e| e.key_pos)
    }
}

impl Node {
    pub fn entries(&self) -> Option<&[Entry]> {
        match &self.value {
            NodeValue::Mapping(entries) => Some(entries),
            _ => None,
        }
    }

    pub fn items(&self) -> Option<&[Node]> {
        match &self.value {
            NodeValue::Sequence(items) => Some(items),
            _ => None,
        }
    }

    pub fn scalar(&self) -> Option<&Scalar> {
        match &self.value {
            NodeValue::Scalar(s) => Some(s),
            _ => None,
        }
    }

    pub fn entry(&self, key: &str) -> Option<&Entry> {
        self.entries()?.iter().find(|e| e.key == key)
    }

    pub fn get(&self, key: &str) -> Option<&Node> {
        self.entry(key).map(|e| &e.value)
    }

    /// The text of a string scalar (quoted, or plain that resolves to a string).
    pub fn as_str(&self) -> Option<&str> {
        match self.scalar() {
            Some(Scalar {
                text,
                resolved: Resolved::Str,
                ..
            }) => Some(text),
            _ => None,
        }
    }

    pub fn is_null(&self) -> bool {
        matches!(
            self.scalar(),
            Some(Scalar {
                resolved: Resolved::Null,
                ..
            })
        )
    }

    /// "a mapping", "a string", ... for "expected X, found Y" messages.
    pub fn type_name(&self) -> &'static str {
        match &self.value {
            NodeValue::Mapping(_) => "a mapping",
            NodeValue::Sequence(_) => "a sequence",
            NodeValue::Scalar(s) => match s.resolved {
                Resolved::Null => "null",
                Resolved::Bool(_) => "a boolean",
                Resolved::Int(_) => "an integer",
                Resolved::Float(_) => "a number",
                Resolved::Str => "a string",
            },
        }
    }

    /// Every string scalar under this node (mapping values and sequence
    /// items, not keys), in document order, for template and secret checks.
    pub fn strings(&self) -> Vec<(&str, Pos)> {
        let mut out = Vec::new();
        let mut todo = vec![self];
        while let Some(node) = todo.pop() {
            match &node.value {
                NodeValue::Mapping(entries) => {
                    todo.extend(entries.iter().rev().map(|e| &e.value));
                }
                NodeValue::Sequence(items) => todo.extend(items.iter().rev()),
                NodeValue::Scalar(_) => {
                    if let Some(text) = node.as_str() {
                        out.push((text, node.pos));
                    }
                }
            }
        }
        out
    }

    /// The node as JSON. Total: scalars without a JSON form (infinity, NaN)
    /// are rejected while the tree is built.
    pub fn to_value(&self) -> Value {
        match &self.value {
            NodeValue::Mapping(entries) => Value::Object(
                entries
                    .iter()
                    .map(|e| (e.key.clone(), e.value.to_value()))
                    .collect(),
            ),
            NodeValue::Sequence(items) => Value::Array(items.iter().map(Node::to_value).collect()),
            NodeValue::Scalar(s) => match s.resolved {
                Resolved::Null => Value::Null,
                Resolved::Bool(b) => Value::Bool(b),
                Resolved::Int(i) => int_value(i),
                Resolved::Float(f) => Number::from_f64(f).map_or(Value::Null, Value::Number),
                Resolved::Str => Value::String(s.text.clone()),
            },
        }
    }

    /// Nodes and expanded bytes under this node, as `Builder::count` adds them up.
    fn weight(&self) -> (usize, usize) {
        let (mut nodes, mut bytes) = (0usize, 0usize);
        let mut todo = vec![self];
        while let Some(node) = todo.pop() {
            nodes += 1;
            bytes = bytes.saturating_add(NODE_BYTES);
            match &node.value {
                NodeValue::Mapping(entries) => {
                    for e in entries {
                        bytes = bytes.saturating_add(e.key.len());
                        todo.push(&e.value);
                    }
                }
                NodeValue::Sequence(items) => todo.extend(items.iter()),
                NodeValue::Scalar(s) => bytes = bytes.saturating_add(s.text.len()),
            }
        }
        (nodes, bytes)
    }
}

/// An integer of `Resolved::Int`'s range as a JSON number.
fn int_value(i: i128) -> Value {
    if let Ok(i) = i64::try_from(i) {
        Value::Number(i.into())
    } else if let Ok(u) = u64::try_from(i) {
        Value::Number(u.into())
    } else {
        // Outside the range resolve_plain gives: never built.
        Number::from_f64(i as f64).map_or(Value::Null, Value::Number)
    }
}

/// Parse spec text into a marked tree and its JSON document.
pub fn parse(source: &str, origin: &str) -> Result<Tree, SpecError> {
    // Editors on Windows may start the file with a byte-order mark; YAML
    // allows it, and an invisible character must not count as a column.
    let source = source.strip_prefix('\u{feff}').unwrap_or(source);
    let root = Builder::new(origin).run(source)?;
    let document = root.to_value();
    Ok(Tree { root, document })
}

/// The width in characters of each line of `source`, as YAML counts lines
/// (LF, CRLF or a lone CR).
fn line_widths(source: &str) -> Vec<usize> {
    let mut widths = vec![0];
    let mut chars = source.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\r' => {
                if chars.peek() == Some(&'\n') {
                    chars.next();
                }
                widths.push(0);
            }
            '\n' => widths.push(0),
            _ => *widths.last_mut().unwrap_or(&mut 0) += 1,
        }
    }
    widths
}

/// `pos` moved inside the text: at the end of input the scanner marks the
/// line after the last one, which an editor cannot go to.
fn within(widths: &[usize], pos: Pos) -> Pos {
    let n = widths.len().max(1);
    if pos.line <= n {
        let width = widths.get(pos.line - 1).copied().unwrap_or(0);
        return Pos {
            line: pos.line,
            column: pos.column.clamp(1, width + 1),
        };
    }
    // Past the end: the end of the last line that has text.
    let line = (1..=n)
        .rev()
        .find(|&l| widths.get(l - 1).is_some_and(|w| *w > 0))
        .unwrap_or(n);
    Pos {
        line,
        column: widths.get(line - 1).copied().unwrap_or(0) + 1,
    }
}

/// What a tab in an indentation is told: the one fix there is.
const TAB_INDENTATION: &str = "tabs are not allowed for indentation in YAML; use spaces";

/// Where the tab that caused the scanner error `error` (marked at `at`)
/// is, when a tab in an indentation caused it. The scanner marks some of
/// these at the end of the scalar before the tab, on the line before: the
/// tab is then the first one in the leading whitespace of the marked line
/// or the next. `None` for any other error, whose own message stands.
fn indenting_tab(source: &str, error: &yaml_rust2::ScanError, at: Pos) -> Option<Pos> {
    if !error.info().contains("tab") {
        return None;
    }
    // Lines as YAML counts them (LF, CRLF or a lone CR), as `line_widths`.
    let lines = source.replace("\r\n", "\n").replace('\r', "\n");
    lines
        .split('\n')
        .enumerate()
        .skip(at.line.saturating_sub(1))
        .take(2)
        .find_map(|(index, line)| {
            let indentation = line.chars().take_while(|c| *c == ' ' || *c == '\t');
            let column = indentation.enumerate().find(|(_, c)| *c == '\t')?.0;
            Some(Pos {
                line: index + 1,
                column: column + 1,
            })
        })
}

enum Frame {
    Mapping {
        pos: Pos,
        anchor: usize,
        entries: Vec<Entry>,
        key: Option<(String, Pos)>,
    },
    Sequence {
        pos: Pos,
        anchor: usize,
        items: Vec<Node>,
    },
}

struct Builder<'a> {
    origin: &'a str,
    stack: Vec<Frame>,
    /// Anchor id -> the finished node and its weight (nodes, bytes).
    anchors: HashMap<usize, (Node, (usize, usize))>,
    root: Option<Node>,
    nodes: usize,
    bytes: usize,
}

impl<'a> Builder<'a> {
    fn new(origin: &'a str) -> Builder<'a> {
        Builder {
            origin,
            stack: Vec::new(),
            anchors: HashMap::new(),
            root: None,
            nodes: 0,
            bytes: 0,
        }
    }

    fn error(&self, kind: SpecErrorKind, pos: Pos, message: impl Into<String>) -> SpecError {
        SpecError::at(kind, self.origin, pos.line, pos.column, message)
    }

    fn invalid(&self, pos: Pos, message: impl Into<String>) -> SpecError {
        self.error(SpecErrorKind::Invalid, pos, message)
    }

    fn run(mut self, source: &str) -> Result<Node, SpecError> {
        let mut parser = Parser::new_from_str(source);
        let widths = line_widths(source);
        loop {
            let (event, mark) = parser.next_token().map_err(|e| {
                let at = within(&widths, Pos::of(*e.marker()));
                match indenting_tab(source, &e, at) {
                    Some(tab) => self.error(SpecErrorKind::Syntax, tab, TAB_INDENTATION),
                    None => self.error(
                        SpecErrorKind::Syntax,
                        at,
                        format!("invalid YAML: {}", e.info()),
                    ),
                }
            })?;
            let pos = within(&widths, Pos::of(mark));
            match event {
                Event::StreamEnd => break,
                Event::StreamStart | Event::DocumentEnd | Event::Nothing => {}
                Event::DocumentStart => {
                    if self.root.is_some() {
                        return Err(self.invalid(
                            pos,
                            "a spec is one YAML document, found a second one (remove the '---')",
                        ));
                    }
                }
                Event::Alias(id) => {
                    let Some((_, weight)) = self.anchors.get(&id) else {
                        return Err(self.invalid(
                            pos,
                            "alias refers to an anchor that is not complete yet (recursive alias)",
                        ));
                    };
                    // Counted before the copy is made: the copy is what
                    // would exhaust memory.
                    let (nodes, bytes) = *weight;
                    self.count(nodes, bytes, pos)?;
                    let Some((node, _)) = self.anchors.get(&id) else {
                        continue;
                    };
                    let mut node = node.clone();
                    node.pos = pos;
                    self.finish(node, 0)?;
                }
                Event::Scalar(text, style, anchor, tag) => {
                    self.count(1, NODE_BYTES.saturating_add(text.len()), pos)?;
                    let node = self.scalar(text, style, tag.as_ref(), pos)?;
                    self.finish(node, anchor)?;
                }
                Event::SequenceStart(anchor, tag) => {
                    self.check_collection_tag(tag.as_ref(), "seq", pos)?;
                    self.open(
                        Frame::Sequence {
                            pos,
                            anchor,
                            items: Vec::new(),
                        },
                        pos,
                    )?;
                }
                Event::MappingStart(anchor, tag) => {
                    self.check_collection_tag(tag.as_ref(), "map", pos)?;
                    self.open(
                        Frame::Mapping {
                            pos,
                            anchor,
                            entries: Vec::new(),
                            key: None,
                        },
                        pos,
                    )?;
                }
                Event::SequenceEnd | Event::MappingEnd => {
                    let Some(frame) = self.stack.pop() else {
                        return Err(self.error(
                            SpecErrorKind::Syntax,
                            pos,
                            "invalid YAML: unbalanced collection end",
                        ));
                    };
                    let (node, anchor) = match frame {
                        Frame::Sequence { pos, anchor, items } => (
                            Node {
                                value: NodeValue::Sequence(items),
                                pos,
                            },
                            anchor,
                        ),
                        Frame::Mapping {
                            pos,
                            anchor,
                            entries,
                            ..
                        } => {
                            // A block mapping's start event is marked after
                            // its first key; the first key is where it starts.
                            let pos = entries.first().map_or(pos, |e| pos.min(e.key_pos));
                            (
                                Node {
                                    value: NodeValue::Mapping(entries),
                                    pos,
                                },
                                anchor,
                            )
                        }
                    };
                    self.finish(node, anchor)?;
                }
            }
        }
        match self.root {
            Some(root) => Ok(root),
            None => Err(self.invalid(
                Pos { line: 1, column: 1 },
                "the spec is empty: expected a mapping with version, agent and steps",
            )),
        }
    }

    fn count(&mut self, nodes: usize, bytes: usize, pos: Pos) -> Result<(), SpecError> {
        self.nodes = self.nodes.saturating_add(nodes);
        self.bytes = self.bytes.saturating_add(bytes);
        if self.nodes > MAX_NODES {
            return Err(self.invalid(
                pos,
                format!(
                    "the spec is too large: more than {MAX_NODES} YAML nodes (aliases included)"
                ),
            ));
        }
        if self.bytes > MAX_EXPANDED_BYTES {
            return Err(self.invalid(
                pos,
                format!(
                    "the spec is too large: more than {MAX_EXPANDED_BYTES} bytes (2 MiB) with its aliases expanded"
                ),
            ));
        }
        Ok(())
    }

    fn open(&mut self, frame: Frame, pos: Pos) -> Result<(), SpecError> {
        self.count(1, NODE_BYTES, pos)?;
        if self.stack.len() >= MAX_DEPTH {
            return Err(self.invalid(
                pos,
                format!("the spec nests deeper than {MAX_DEPTH} levels"),
            ));
        }
        self.stack.push(frame);
        Ok(())
    }

    /// Attach a finished node to its parent (or make it the root).
    fn finish(&mut self, node: Node, anchor: usize) -> Result<(), SpecError> {
        if anchor != 0 {
            let weight = node.weight();
            self.anchors.insert(anchor, (node.clone(), weight));
        }
        let origin = self.origin;
        match self.stack.last_mut() {
            None => {
                self.root = Some(node);
                Ok(())
            }
            Some(Frame::Sequence { items, .. }) => {
                items.push(node);
                Ok(())
            }
            Some(Frame::Mapping { entries, key, .. }) => match key.take() {
                None => {
                    let Some(name) = node.as_str() else {
                        return Err(SpecError::at(
                            SpecErrorKind::Invalid,
                            origin,
                            node.pos.line,
                            node.pos.column,
                            format!(
                                "mapping keys must be strings, found {} (quote it to use it as a key)",
                                node.type_name()
                            ),
                        ));
                    };
                    if let Some(first) = entries.iter().find(|e| e.key == name) {
                        return Err(SpecError::at(
                            SpecErrorKind::Syntax,
                            origin,
                            node.pos.line,
                            node.pos.column,
                            format!(
                                "duplicate key {name:?} (first defined at line {})",
                                first.key_pos.line
                            ),
                        ));
                    }
                    *key = Some((name.to_string(), node.pos));
                    Ok(())
                }
                Some((name, key_pos)) => {
                    let mut value = node;
                    // `key:` with nothing after it: the empty scalar is marked
                    // wherever the parser stood next; the key is the useful place.
                    if let NodeValue::Scalar(s) = &value.value {
                        if s.text.is_empty()
                            && s.style == ScalarStyle::Plain
                            && s.resolved == Resolved::Null
                        {
                            value.pos = key_pos;
                        }
                    }
                    entries.push(Entry {
                        key: name,
                        key_pos,
                        value,
                    });
                    Ok(())
                }
            },
        }
    }

    fn scalar(
        &self,
        text: String,
        style: TScalarStyle,
        tag: Option<&Tag>,
        pos: Pos,
    ) -> Result<Node, SpecError> {
        let style = match style {
            TScalarStyle::SingleQuoted => ScalarStyle::SingleQuoted,
            TScalarStyle::DoubleQuoted => ScalarStyle::DoubleQuoted,
            TScalarStyle::Literal => ScalarStyle::Literal,
            TScalarStyle::Folded => ScalarStyle::Folded,
            TScalarStyle::Plain => ScalarStyle::Plain,
        };
        let resolved = match tag {
            None if style == ScalarStyle::Plain => resolve_plain(&text),
            None => Resolved::Str,
            Some(tag) => {
                let name = core_tag(tag);
                let resolved = match name {
                    Some("str") => Some(Resolved::Str),
                    Some("null") => Some(Resolved::Null)
                        .filter(|_| matches!(resolve_plain(&text), Resolved::Null)),
                    Some("bool") => {
                        Some(resolve_plain(&text)).filter(|r| matches!(r, Resolved::Bool(_)))
                    }
                    Some("int") => {
                        Some(resolve_plain(&text)).filter(|r| matches!(r, Resolved::Int(_)))
                    }
                    Some("float") => match resolve_plain(&text) {
                        Resolved::Int(i) => Some(Resolved::Float(i as f64)),
                        f @ Resolved::Float(_) => Some(f),
                        _ => None,
                    },
                    _ => return Err(self.unsupported_tag(tag, pos)),
                };
                match resolved {
                    Some(r) => r,
                    None => {
                        return Err(
                            self.invalid(pos, format!("{text:?} is not a valid {}", tag_text(tag)))
                        );
                    }
                }
            }
        };
        if let Resolved::Float(f) = resolved {
            if !f.is_finite() {
                return Err(self.invalid(
                    pos,
                    format!(
                        "{text:?} has no JSON form (infinity and NaN are not allowed; quote it for a string)"
                    ),
                ));
            }
        }
        Ok(Node {
            value: NodeValue::Scalar(Scalar {
                text,
                style,
                resolved,
            }),
            pos,
        })
    }

    fn check_collection_tag(
        &self,
        tag: Option<&Tag>,
        allowed: &str,
        pos: Pos,
    ) -> Result<(), SpecError> {
        match tag {
            None => Ok(()),
            Some(t) if core_tag(t) == Some(allowed) => Ok(()),
            Some(t) => Err(self.unsupported_tag(t, pos)),
        }
    }

    fn unsupported_tag(&self, tag: &Tag, pos: Pos) -> SpecError {
        self.invalid(
            pos,
            format!(
                "unsupported tag {} (a spec may use only !!str, !!int, !!float, !!bool, !!null, !!map and !!seq)",
                tag_text(tag)
            ),
        )
    }
}

const CORE_PREFIX: &str = "tag:yaml.org,2002:";

fn core_tag(tag: &Tag) -> Option<&str> {
    if tag.handle == CORE_PREFIX {
        return Some(tag.suffix.as_str());
    }
    // A verbatim tag, `!<tag:yaml.org,2002:str>`, is the same tag spelled out.
    if tag.handle.is_empty() {
        return tag.suffix.strip_prefix(CORE_PREFIX);
    }
    None
}

fn tag_text(tag: &Tag) -> String {
    if tag.handle == CORE_PREFIX {
        format!("!!{}", tag.suffix)
    } else {
        format!("{}{}", tag.handle, tag.suffix)
    }
}

/// The YAML 1.2 core schema for plain scalars.
fn resolve_plain(text: &str) -> Resolved {
    match text {
        "" | "~" | "null" | "Null" | "NULL" => return Resolved::Null,
        "true" | "True" | "TRUE" => return Resolved::Bool(true),
        "false" | "False" | "FALSE" => return Resolved::Bool(false),
        ".inf" | ".Inf" | ".INF" | "+.inf" | "+.Inf" | "+.INF" => {
            return Resolved::Float(f64::INFINITY);
        }
        "-.inf" | "-.Inf" | "-.INF" => return Resolved::Float(f64::NEG_INFINITY),
        ".nan" | ".NaN" | ".NAN" => return Resolved::Float(f64::NAN),
        _ => {}
    }
    if let Some(hex) = text.strip_prefix("0x") {
        if !hex.is_empty() && hex.bytes().all(|b| b.is_ascii_hexdigit()) {
            return u64::from_str_radix(hex, 16).map_or(Resolved::Str, |u| Resolved::Int(u.into()));
        }
        return Resolved::Str;
    }
    if let Some(oct) = text.strip_prefix("0o") {
        if !oct.is_empty() && oct.bytes().all(|b| (b'0'..=b'7').contains(&b)) {
            return u64::from_str_radix(oct, 8).map_or(Resolved::Str, |u| Resolved::Int(u.into()));
        }
        return Resolved::Str;
    }
    let unsigned = text.strip_prefix(['-', '+']).unwrap_or(text);
    if !unsigned.is_empty() && unsigned.bytes().all(|b| b.is_ascii_digit()) {
        return match text.parse::<i128>() {
            Ok(i) if (i64::MIN.into()..=u64::MAX.into()).contains(&i) => Resolved::Int(i),
            // Past what a JSON number holds exactly: keep the magnitude as
            // a float, as JSON readers do.
            _ => text.parse::<f64>().map_or(Resolved::Str, Resolved::Float),
        };
    }
    if is_core_float(unsigned) {
        if let Ok(f) = text.parse::<f64>() {
            return Resolved::Float(f);
        }
    }
    Resolved::Str
}

/// `(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?` without the sign.
fn is_core_float(s: &str) -> bool {
    let (mantissa, exponent) = match s.find(['e', 'E']) {
        Some(i) => (&s[..i], Some(&s[i + 1..])),
        None => (s, None),
    };
    let mantissa_ok = match mantissa.split_once('.') {
        Some((int, frac)) => {
            int.bytes().all(|b| b.is_ascii_digit())
                && frac.bytes().all(|b| b.is_ascii_digit())
                && !(int.is_empty() && frac.is_empty())
        }
        None => !mantissa.is_empty() && mantissa.bytes().all(|b| b.is_ascii_digit()),
    };
    let exponent_ok = match exponent {
        None => true,
        Some(e) => {
            let digits = e.strip_prefix(['-', '+']).unwrap_or(e);
            !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit())
        }
    };
    mantissa_ok && exponent_ok
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn tree(src: &str) -> Tree {
        parse(src, "t.yaml").unwrap()
    }

    fn err(src: &str) -> String {
        parse(src, "t.yaml").unwrap_err().to_string()
    }

    #[test]
    fn resolves_plain_scalars_like_the_core_schema() {
        let t = tree(
            "a: ~\nb: true\nc: 12\nd: -1.5e3\ne: '12'\nf: yes\ng: 0x1F\nh: 0o17\ni:\nj: 1.\nk: .5\nl: 1_000\n",
        );
        assert_eq!(
            t.document,
            json!({"a": null, "b": true, "c": 12, "d": -1500.0, "e": "12", "f": "yes",
                   "g": 31, "h": 15, "i": null, "j": 1.0, "k": 0.5, "l": "1_000"})
        );
        // Up to u64::MAX exactly, as serde_json reads JSON; past it, a float.
        let t = tree(
            "a: 9223372036854775808\nb: 18446744073709551615\nc: 0xFFFFFFFFFFFFFFFF\nd: 18446744073709551616\ne: -9223372036854775809\n",
        );
        assert_eq!(
            t.document,
            json!({"a": 9223372036854775808u64, "b": u64::MAX, "c": u64::MAX,
                   "d": 18446744073709551616.0, "e": -9223372036854775809.0})
        );
    }

    #[test]
    fn keeps_key_order_and_positions() {
        let t = tree("z: 1\na:\n  - x\n  - {b: c}\n");
        let keys: Vec<_> = t.document.as_object().unwrap().keys().cloned().collect();
        assert_eq!(keys, ["z", "a"]);
        assert_eq!(t.root.pos, Pos { line: 1, column: 1 });
        let b = t
            .get(&[Seg::Key("a"), Seg::Index(1), Seg::Key("b")])
            .unwrap();
        assert_eq!(b.pos, Pos { line: 4, column: 9 });
        assert_eq!(
            t.key_pos(&[Seg::Key("a"), Seg::Index(1)], "b"),
            Some(Pos { line: 4, column: 6 })
        );
        let inner = t.get(&[Seg::Key("a"), Seg::Index(1)]).unwrap();
        assert_eq!(inner.pos, Pos { line: 4, column: 5 });
    }

    #[test]
    fn a_byte_order_mark_and_crlf_line_ends_are_fine() {
        let t = tree("\u{feff}a: 1\r\nb: x\r\n");
        assert_eq!(t.document, json!({"a": 1, "b": "x"}));
        assert_eq!(t.key_pos(&[], "b"), Some(Pos { line: 2, column: 1 }));
        assert_eq!(t.root.pos, Pos { line: 1, column: 1 });
    }

    #[test]
    fn aliases_copy_the_anchored_node() {
        let t = tree("a: &x {b: [1, 2]}\nc: *x\n");
        assert_eq!(t.document, json!({"a": {"b": [1, 2]}, "c": {"b": [1, 2]}}));
        assert_eq!(
            t.get(&[Seg::Key("c")]).unwrap().pos,
            Pos { line: 2, column: 4 }
        );
    }

    #[test]
    fn tags_of_the_core_schema_apply() {
        let t = tree("a: !!str 12\nb: !!float 1\n");
        assert_eq!(t.document, json!({"a": "12", "b": 1.0}));
        // Spelled out, the same tags.
        let t = tree("a: !<tag:yaml.org,2002:str> 12\nb: !<tag:yaml.org,2002:map> {}\n");
        assert_eq!(t.document, json!({"a": "12", "b": {}}));
        assert_eq!(
            err("a: !<tag:example.com,2024:x> 1\n"),
            "t.yaml:1:30: unsupported tag tag:example.com,2024:x (a spec may use only !!str, !!int, !!float, !!bool, !!null, !!map and !!seq)"
        );
        assert_eq!(
            err("a: !!binary abc\n"),
            "t.yaml:1:13: unsupported tag !!binary (a spec may use only !!str, !!int, !!float, !!bool, !!null, !!map and !!seq)"
        );
        assert_eq!(
            err("a: !!int x\n"),
            "t.yaml:1:10: \"x\" is not a valid !!int"
        );
    }

    #[test]
    fn rejects_what_a_spec_cannot_mean() {
        assert_eq!(
            err("a: 1\nb: 2\na: 3\n"),
            "t.yaml:3:1: duplicate key \"a\" (first defined at line 1)"
        );
        assert_eq!(
            err("1: x\n"),
            "t.yaml:1:1: mapping keys must be strings, found an integer (quote it to use it as a key)"
        );
        assert_eq!(
            err("a: 1\n---\nb: 2\n"),
            "t.yaml:2:1: a spec is one YAML document, found a second one (remove the '---')"
        );
        assert_eq!(
            err(""),
            "t.yaml:1:1: the spec is empty: expected a mapping with version, agent and steps"
        );
        assert_eq!(
            err("a: .inf\n"),
            "t.yaml:1:4: \".inf\" has no JSON form (infinity and NaN are not allowed; quote it for a string)"
        );
    }

    #[test]
    fn caps_alias_expansion_and_depth() {
        let mut src = String::from("a: &a [x, x, x, x, x, x, x, x, x, x]\n");
        let mut prev = 'a';
        for name in ['b', 'c', 'd', 'e', 'f', 'g'] {
            src.push_str(&format!("{name}: &{name} [*{prev}, *{prev}, *{prev}, *{prev}, *{prev}, *{prev}, *{prev}, *{prev}, *{prev}, *{prev}]\n"));
            prev = name;
        }
        assert!(err(&src).contains("too large"), "{}", err(&src));
        let deep = format!("{}{}", "[".repeat(200), "]".repeat(200));
        assert!(err(&deep).contains("deeper than"), "{}", err(&deep));
    }
}
