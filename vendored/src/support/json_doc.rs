//! A JSON value kept as its compact text ([`JsonDoc`]).
//!
//! A run's input is stored, echoed and shown far more often than it is
//! read field by field: a template reads `input.name`, the store writes
//! the text, a client gets it back. As a `serde_json::Value` tree a wide
//! object costs some 190 bytes a key against 14 in its text (a key's
//! `String`, a map bucket, a 72-byte `Value`, the hash index), so a 1 MiB
//! input of 70,000 keys held as a tree is 13 MiB, and every copy another
//! 13 (tollgate issue 41). As text it costs its size, shared behind an
//! `Arc`, and a lookup of one key scans the text without building a tree.

use std::fmt;
use std::sync::Arc;

use serde::de::{DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use serde_json::value::RawValue;

/// A valid JSON value as compact text (no whitespace outside strings),
/// cheap to clone.
#[derive(Clone)]
pub struct JsonDoc {
    // serde_json's raw value: serialized as it is, never parsed again.
    // Boxed inside the `Arc` so that sharing it never copies the text.
    raw: Arc<Box<RawValue>>,
}

impl JsonDoc {
    /// The text of `value`.
    pub fn from_value(value: &Value) -> JsonDoc {
        // Serializing a `Value` cannot fail (its keys are strings).
        let raw =
            serde_json::value::to_raw_value(value).unwrap_or_else(|_| RawValue::NULL.to_owned());
        JsonDoc { raw: Arc::new(raw) }
    }

    /// `text` checked to be one JSON value, kept compact.
    pub fn parse(text: &str) -> Result<JsonDoc, serde_json::Error> {
        serde_json::from_str::<Box<RawValue>>(text).and_then(JsonDoc::compacted)
    }

    /// Text serde_json read already (a field of a body), kept compact.
    pub fn from_raw(raw: Box<RawValue>) -> Result<JsonDoc, serde_json::Error> {
        JsonDoc::compacted(raw)
    }

    /// `raw` without whitespace outside its strings.
    fn compacted(raw: Box<RawValue>) -> Result<JsonDoc, serde_json::Error> {
        let raw = match compact(raw.get()) {
            Some(compacted) => RawValue::from_string(compacted)?,
            None => raw,
        };
        Ok(JsonDoc { raw: Arc::new(raw) })
    }

    /// The compact text.
    pub fn as_str(&self) -> &str {
        self.raw.get()
    }

    /// The text's length in bytes.
    pub fn len(&self) -> usize {
        self.as_str().len()
    }

    /// `true` for a document of no bytes, which [`JsonDoc`] never is.
    pub fn is_empty(&self) -> bool {
        self.as_str().is_empty()
    }

    /// The whole value as a tree (for the few readers that need all of
    /// it). `Err` only for a document nested deeper than serde_json reads
    /// (127 levels), which only [`JsonDoc::from_value`] can make and no
    /// store keeps.
    pub fn try_to_value(&self) -> Result<Value, serde_json::Error> {
        serde_json::from_str(self.as_str())
    }

    /// [`JsonDoc::try_to_value`], `null` for a document too deep to read.
    pub fn to_value(&self) -> Value {
        self.try_to_value().unwrap_or(Value::Null)
    }

    /// Whether the document is a JSON object.
    pub fn is_object(&self) -> bool {
        self.as_str().starts_with('{')
    }

    /// The value of the object's member `key`, parsed alone; `None` when
    /// there is no such member or the document is not an object. Keys are
    /// unique (bodies with duplicate keys are refused at the door); the
    /// first one wins otherwise.
    pub fn get(&self, key: &str) -> Option<Value> {
        let mut de = serde_json::Deserializer::from_str(self.as_str());
        de.deserialize_any(FindMember(key)).ok().flatten()
    }

    /// An object's first `n` members, parsed, and how many it has in all;
    /// `None` when the document is not an object. The rest is skipped
    /// unparsed (a summary of a wide input costs its first members only).
    pub fn first_members(&self, n: usize) -> Option<(Vec<(String, Value)>, usize)> {
        let mut de = serde_json::Deserializer::from_str(self.as_str());
        de.deserialize_any(FirstMembers(n)).ok().flatten()
    }

    /// How many members (an object) or items (an array) it has; `None`
    /// for a scalar.
    pub fn len_of_top(&self) -> Option<usize> {
        let mut de = serde_json::Deserializer::from_str(self.as_str());
        de.deserialize_any(CountTop).ok().flatten()
    }
}

impl PartialEq for JsonDoc {
    /// Equal as JSON values, as `Value`s compare: members in any order (a
    /// PostgreSQL jsonb column hands them back in its own order).
    fn eq(&self, other: &JsonDoc) -> bool {
        self.as_str() == other.as_str()
            || matches!(
                (self.try_to_value(), other.try_to_value()),
                (Ok(a), Ok(b)) if a == b
            )
    }
}

impl Eq for JsonDoc {}

impl Default for JsonDoc {
    /// `{}`, a run's input when none is given.
    fn default() -> JsonDoc {
        JsonDoc::from_value(&Value::Object(serde_json::Map::new()))
    }
}

impl From<Value> for JsonDoc {
    fn from(value: Value) -> JsonDoc {
        JsonDoc::from_value(&value)
    }
}

impl From<&Value> for JsonDoc {
    fn from(value: &Value) -> JsonDoc {
        JsonDoc::from_value(value)
    }
}

/// For a field of a request body: `#[serde(deserialize_with =
/// "crate::support::json_doc::raw")]` reads it as text, with no tree, when the body
/// is parsed by serde_json from its bytes.
pub fn raw<'de, D: Deserializer<'de>>(deserializer: D) -> Result<JsonDoc, D::Error> {
    Box::<RawValue>::deserialize(deserializer)
        .and_then(|raw| JsonDoc::compacted(raw).map_err(serde::de::Error::custom))
}

impl fmt::Debug for JsonDoc {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const SHOWN: usize = 200;
        let text = self.as_str();
        if text.len() <= SHOWN {
            write!(f, "JsonDoc({text})")
        } else {
            let mut end = SHOWN;
            while !text.is_char_boundary(end) {
                end -= 1;
            }
            write!(f, "JsonDoc({}… {} bytes)", &text[..end], text.len())
        }
    }
}

impl fmt::Display for JsonDoc {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for JsonDoc {
    /// To serde_json the text goes out as it is, unparsed. Any other
    /// serializer sees serde_json's raw-value wrapper, so only JSON output
    /// may hold a `JsonDoc` (views for templates convert with
    /// [`JsonDoc::to_value`]).
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.raw.serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for JsonDoc {
    /// Through a tree, so that it works from any deserializer (serde's
    /// buffering of tagged enums cannot hand out raw text). The stores
    /// read their columns with [`JsonDoc::parse`], without a tree.
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<JsonDoc, D::Error> {
        Value::deserialize(deserializer).map(|value| JsonDoc::from_value(&value))
    }
}

/// `text` (valid JSON) without whitespace outside strings; `None` when it
/// has none (every text serde_json wrote), so it is copied only once.
fn compact(text: &str) -> Option<String> {
    let mut out: Option<String> = None;
    let mut in_string = false;
    let mut escaped = false;
    for (i, c) in text.char_indices() {
        if in_string {
            if escaped {
                escaped = false;
            } else if c == '\\' {
                escaped = true;
            } else if c == '"' {
                in_string = false;
            }
        } else if c == '"' {
            in_string = true;
        } else if matches!(c, ' ' | '\t' | '\n' | '\r') {
            out.get_or_insert_with(|| {
                let mut kept = String::with_capacity(text.len());
                kept.push_str(&text[..i]);
                kept
            });
            continue;
        }
        if let Some(out) = &mut out {
            out.push(c);
        }
    }
    out
}

/// The visitor methods of a scalar document for a visitor that looks
/// into objects or arrays only: a scalar has none (`Ok(None)`).
macro_rules! scalars_are_none {
    () => {
        fn visit_bool<E>(self, _: bool) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_i64<E>(self, _: i64) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_u64<E>(self, _: u64) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_f64<E>(self, _: f64) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_str<E>(self, _: &str) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_unit<E>(self) -> Result<Self::Value, E> {
            Ok(None)
        }
    };
}

/// Finds one member of an object, skipping every other value unparsed.
struct FindMember<'k>(&'k str);

impl<'de> Visitor<'de> for FindMember<'_> {
    type Value = Option<Value>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Option<Value>, A::Error> {
        let mut found = None;
        while let Some(matches) = map.next_key_seed(KeyIs(self.0))? {
            if matches && found.is_none() {
                found = Some(map.next_value::<Value>()?);
            } else {
                map.next_value::<IgnoredAny>()?;
            }
        }
        Ok(found)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Option<Value>, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(None)
    }

    scalars_are_none!();
}

/// Whether a key equals the one sought, compared where it lies in the
/// text (no copy unless it has escapes).
struct KeyIs<'k>(&'k str);

impl<'de> DeserializeSeed<'de> for KeyIs<'_> {
    type Value = bool;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<bool, D::Error> {
        deserializer.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for KeyIs<'_> {
    type Value = bool;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a key")
    }

    fn visit_str<E>(self, key: &str) -> Result<bool, E> {
        Ok(key == self.0)
    }
}

/// An object's first members and its count of members.
struct FirstMembers(usize);

impl<'de> Visitor<'de> for FirstMembers {
    type Value = Option<(Vec<(String, Value)>, usize)>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let (mut first, mut count) = (Vec::new(), 0);
        while let Some(key) = map.next_key::<String>()? {
            if first.len() < self.0 {
                first.push((key, map.next_value::<Value>()?));
            } else {
                map.next_value::<IgnoredAny>()?;
            }
            count += 1;
        }
        Ok(Some((first, count)))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(None)
    }

    scalars_are_none!();
}

/// Counts an object's members or an array's items.
struct CountTop;

impl<'de> Visitor<'de> for CountTop {
    type Value = Option<usize>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Option<usize>, A::Error> {
        let mut n = 0;
        while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {
            n += 1;
        }
        Ok(Some(n))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Option<usize>, A::Error> {
        let mut n = 0;
        while seq.next_element::<IgnoredAny>()?.is_some() {
            n += 1;
        }
        Ok(Some(n))
    }

    scalars_are_none!();
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn text_is_compact_and_round_trips() {
        let doc = JsonDoc::parse("{ \"a\" : [1, 2],\n \"b\": \"x y\\\" z\" }").expect("valid");
        assert_eq!(doc.as_str(), r#"{"a":[1,2],"b":"x y\" z"}"#);
        assert_eq!(doc.to_value(), json!({"a": [1, 2], "b": "x y\" z"}));
        let through: JsonDoc = serde_json::from_str(&serde_json::to_string(&doc).unwrap()).unwrap();
        assert_eq!(through, doc);
        let reordered = JsonDoc::from_value(&json!({"b": "x y\" z", "a": [1, 2]}));
        assert_eq!(reordered, doc, "members in another order");
        assert_ne!(
            JsonDoc::from_value(&json!({"a": [2, 1]})),
            JsonDoc::from_value(&json!({"a": [1, 2]}))
        );
        let from_tree: JsonDoc = serde_json::from_value(json!({"a": [1, 2]})).unwrap();
        assert_eq!(from_tree.as_str(), r#"{"a":[1,2]}"#);
    }

    #[test]
    fn invalid_text_is_refused() {
        assert!(JsonDoc::parse("{\"a\": }").is_err());
        assert!(JsonDoc::parse("{} {}").is_err());
        assert!(JsonDoc::parse("").is_err());
    }

    #[test]
    fn one_member_is_found_without_the_rest() {
        let doc = JsonDoc::from_value(&json!({"a": {"deep": [1]}, "n\"ame": 1, "name": "Ada"}));
        assert_eq!(doc.get("name"), Some(json!("Ada")));
        assert_eq!(doc.get("n\"ame"), Some(json!(1)));
        assert_eq!(doc.get("a"), Some(json!({"deep": [1]})));
        assert_eq!(doc.get("missing"), None);
        assert_eq!(JsonDoc::from_value(&json!([1, 2])).get("0"), None);
        assert_eq!(JsonDoc::from_value(&json!("s")).get("s"), None);
    }

    #[test]
    fn the_first_members_and_the_count() {
        let doc = JsonDoc::from_value(&json!({"a": 1, "b": {"c": [2]}, "d": 3}));
        assert_eq!(
            doc.first_members(2),
            Some((
                vec![("a".into(), json!(1)), ("b".into(), json!({"c": [2]}))],
                3
            ))
        );
        assert_eq!(JsonDoc::from_value(&json!([1])).first_members(2), None);
    }

    #[test]
    fn sizes_of_the_top_level() {
        assert_eq!(
            JsonDoc::from_value(&json!({"a": 1, "b": [1, 2]})).len_of_top(),
            Some(2)
        );
        assert_eq!(
            JsonDoc::from_value(&json!([1, [2, 3]])).len_of_top(),
            Some(2)
        );
        assert_eq!(JsonDoc::from_value(&json!(3)).len_of_top(), None);
        assert_eq!(JsonDoc::default().len_of_top(), Some(0));
    }
}
