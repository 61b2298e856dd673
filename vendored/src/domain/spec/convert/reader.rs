//! The typed readers: where a key is (`Place`), a mapping checked against its schema (`Fields`), and `Cx`'s reader of each kind of value.

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::Value;

use super::super::marked::{Entry, Node, Pos, Resolved};
use super::super::schema::Schema;
use super::super::{MAX_DURATION, MAX_DURATION_TEXT, SpecError, SpecErrorKind};
use super::{Cx, Result};

/// Where a key lives, in spec terms.
#[derive(Debug, Clone)]
pub(super) enum Place {
    Top,
    /// e.g. `tool "lookup_order"`, `the guardrail of step "assess"`.
    In(String),
}

impl Place {
    pub(super) fn in_(text: impl Into<String>) -> Place {
        Place::In(text.into())
    }

    /// `tool "lookup_order"`, or `the spec` at the top level.
    pub(super) fn name(&self) -> &str {
        match self {
            Place::Top => "the spec",
            Place::In(place) => place,
        }
    }

    /// `"url" in tool "lookup_order"`, or `"steps"` at the top level.
    fn label(&self, key: &str) -> String {
        match self {
            Place::Top => format!("{key:?}"),
            Place::In(place) => format!("{key:?} in {place}"),
        }
    }

    fn unknown_key(&self, key: &str) -> String {
        match self {
            Place::Top => format!("unknown top-level key {key:?}"),
            Place::In(place) => format!("unknown key {key:?} in {place}"),
        }
    }

    fn missing_key(&self, key: &str) -> String {
        match self {
            Place::Top => format!("missing required top-level key {key:?}"),
            Place::In(place) => format!("missing required key {key:?} in {place}"),
        }
    }
}

/// A mapping whose keys have been checked against its schema.
pub(super) struct Fields<'n> {
    node: &'n Node,
    entries: &'n [Entry],
    pub(super) place: Place,
    /// What the keys were checked against; reading a key it lacks is a bug
    /// in the converter (the key would be rejected before it is read).
    schema: Option<&'n Schema>,
    cx: &'n Cx<'n>,
}

impl<'n> Fields<'n> {
    /// `entries` of `node` before their schema is known: a step's id is
    /// read before its kind is.
    pub(super) fn unchecked(
        cx: &'n Cx<'n>,
        node: &'n Node,
        entries: &'n [Entry],
        place: Place,
    ) -> Fields<'n> {
        Fields {
            node,
            entries,
            place,
            schema: None,
            cx,
        }
    }

    pub(super) fn entry(&self, key: &str) -> Option<&'n Entry> {
        debug_assert!(
            self.schema.is_none_or(|s| s.allows(key)),
            "{key:?} is read but not in the schema of {:?}",
            self.place
        );
        self.entries.iter().find(|e| e.key == key)
    }

    /// The value of `key`; an explicit null counts as absent.
    pub(super) fn get(&self, key: &str) -> Option<&'n Node> {
        self.entry(key).map(|e| &e.value).filter(|n| !n.is_null())
    }

    pub(super) fn required(&self, key: &str) -> Result<&'n Node> {
        match self.entry(key) {
            Some(e) if !e.value.is_null() => Ok(&e.value),
            Some(e) => Err(self
                .cx
                .err(e.key_pos, format!("{} has no value", self.place.label(key)))),
            None => Err(self.cx.err(self.node.pos, self.place.missing_key(key))),
        }
    }

    pub(super) fn label(&self, key: &str) -> String {
        self.place.label(key)
    }

    pub(super) fn opt_string(&self, key: &str) -> Result<Option<String>> {
        self.get(key)
            .map(|n| self.cx.string(n, &self.label(key)))
            .transpose()
    }

    pub(super) fn required_string(&self, key: &str) -> Result<String> {
        let node = self.required(key)?;
        self.cx.string(node, &self.label(key))
    }

    pub(super) fn opt_duration(&self, key: &str) -> Result<Option<Duration>> {
        self.get(key)
            .map(|n| self.cx.duration(n, &self.label(key)))
            .transpose()
    }

    /// A mapping of names to string templates (headers, query).
    pub(super) fn string_map(&self, key: &str) -> Result<BTreeMap<String, String>> {
        let Some(node) = self.get(key) else {
            return Ok(BTreeMap::new());
        };
        let label = self.label(key);
        let Some(entries) = node.entries() else {
            return Err(self.cx.type_err(node, "a mapping", &label));
        };
        entries
            .iter()
            .map(|e| {
                let value = self
                    .cx
                    .string(&e.value, &format!("{:?} in {label}", e.key))?;
                Ok((e.key.clone(), value))
            })
            .collect()
    }

    /// Where two keys exclude each other: the later one, if both are present.
    pub(super) fn later_of(&self, a: &str, b: &str) -> Option<&'n Entry> {
        let (a, b) = (self.entry(a)?, self.entry(b)?);
        Some(if a.key_pos > b.key_pos { a } else { b })
    }
}

impl Cx<'_> {
    pub(super) fn err(&self, pos: Pos, message: impl Into<String>) -> SpecError {
        SpecError::at(
            SpecErrorKind::Invalid,
            self.origin,
            pos.line,
            pos.column,
            message,
        )
    }

    pub(super) fn type_err(&self, node: &Node, expected: &str, label: &str) -> SpecError {
        self.err(
            node.pos,
            format!(
                "expected {expected} for {label}, found {}",
                node.type_name()
            ),
        )
    }

    /// Check that `node` is a mapping whose keys are all in `schema`.
    /// `what` names the node for a type error (`tool "lookup_order"`).
    pub(super) fn mapping<'n>(
        &'n self,
        node: &'n Node,
        place: &Place,
        schema: &'n Schema,
        what: &str,
    ) -> Result<Fields<'n>> {
        let Some(entries) = node.entries() else {
            return Err(self.type_err(node, "a mapping", what));
        };
        for e in entries {
            if !schema.allows(&e.key) {
                return Err(self.err(
                    e.key_pos,
                    format!(
                        "{} (allowed: {})",
                        place.unknown_key(&e.key),
                        schema.allowed()
                    ),
                ));
            }
        }
        Ok(Fields {
            node,
            entries,
            place: place.clone(),
            schema: Some(schema),
            cx: self,
        })
    }

    pub(super) fn string(&self, node: &Node, label: &str) -> Result<String> {
        match node.as_str() {
            Some(s) => Ok(s.to_string()),
            None => Err(self.type_err(node, "a string", label)),
        }
    }

    pub(super) fn non_empty_string(&self, node: &Node, label: &str) -> Result<String> {
        let s = self.string(node, label)?;
        if s.trim().is_empty() {
            return Err(self.err(node.pos, format!("{label} is empty")));
        }
        Ok(s)
    }

    pub(super) fn duration(&self, node: &Node, label: &str) -> Result<Duration> {
        let text = self.string(node, label)?;
        let duration = crate::support::time::parse_duration(&text)
            .map_err(|e| self.err(node.pos, format!("bad {label}: {e}")))?;
        // parse_duration saturates, so a huge number lands here too, never
        // as an overflow.
        if duration > MAX_DURATION {
            return Err(self.err(
                node.pos,
                format!(
                    "bad {label}: {:?} is longer than the limit of {MAX_DURATION_TEXT} (about 10 years)",
                    text.trim()
                ),
            ));
        }
        Ok(duration)
    }

    pub(super) fn bool(&self, node: &Node, label: &str) -> Result<bool> {
        match node.scalar().map(|s| s.resolved) {
            Some(Resolved::Bool(b)) => Ok(b),
            _ => Err(self.type_err(node, "true or false", label)),
        }
    }

    pub(super) fn int(&self, node: &Node, label: &str) -> Result<i128> {
        match node.scalar().map(|s| s.resolved) {
            Some(Resolved::Int(i)) => Ok(i),
            _ => Err(self.type_err(node, "an integer", label)),
        }
    }

    /// A mapping used as a JSON template (`with`, `set`).
    pub(super) fn object(&self, node: &Node, label: &str) -> Result<Value> {
        match node.entries() {
            Some(_) => Ok(node.to_value()),
            None => Err(self.type_err(node, "a mapping", label)),
        }
    }

    /// One of a fixed set of words; the message lists them.
    pub(super) fn choice<'c>(
        &self,
        node: &Node,
        label: &str,
        choices: &[&'c str],
    ) -> Result<&'c str> {
        let text = self.string(node, label)?;
        choices
            .iter()
            .find(|c| **c == text)
            .copied()
            .ok_or_else(|| {
                self.err(
                    node.pos,
                    format!(
                        "{label} must be one of {}, found {text:?}",
                        choices.join(", ")
                    ),
                )
            })
    }
}
