//! Object keys in JSON from outside: no key twice in one object, and no
//! more keys in one document than [`MAX_JSON_KEYS`].
//!
//! serde_json keeps the last of two equal keys. A proxy, a signature
//! check or a log reader in front of tollgate may keep the first, and so
//! see another request than the one tollgate runs: `{"approved": false,
//! "approved": true}`. Every JSON body is checked here before it is
//! parsed, so such a body is refused instead of read either way.
//!
//! The key count bounds what a body costs once parsed: an object member
//! costs some 200 bytes in a `serde_json::Value` whatever its text's size,
//! so a body of many short keys grows far more than its bytes.
//!
//! The check walks the text once with serde_json's own parser and builds
//! nothing but, per object open at the moment, the set of its keys (keys
//! without escapes borrow the text), so it costs a fraction of the parse
//! that follows.

use std::borrow::Cow;
use std::cell::{Cell, RefCell};
use std::collections::HashSet;
use std::fmt;

use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};

/// The most object members (keys, counted over every object at every
/// level) one JSON document from outside may hold: a request body, an MCP
/// message. Generous for any real input (a body at the default 1 MiB limit
/// holds at most some 150,000) and a bound on what a body costs in memory
/// when a server's body limit is raised.
pub const MAX_JSON_KEYS: usize = 250_000;

/// Why a document was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeyError {
    /// `key` appears twice in the object at `at` (a JSON Pointer, RFC
    /// 6901; empty for the top level).
    Duplicate { key: String, at: String },
    /// More than [`MAX_JSON_KEYS`] object members.
    TooMany { limit: usize },
}

impl fmt::Display for KeyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            KeyError::Duplicate { key, at } if at.is_empty() => {
                write!(f, "duplicate key {key:?} in the top-level object")
            }
            KeyError::Duplicate { key, at } => {
                write!(f, "duplicate key {key:?} in the object at {at:?}")
            }
            KeyError::TooMany { limit } => write!(
                f,
                "more than {limit} object keys in one document, the most tollgate accepts"
            ),
        }
    }
}

/// Check `text` for duplicate keys and too many keys. Text that is not
/// JSON passes (`Ok`): the parse that follows reports what is wrong with
/// it, in its own words. Nesting is not limited here: measure it with
/// [`crate::support::json_depth::text_depth`] first (serde_json's own recursion
/// limit still applies).
pub fn check_keys(text: &[u8]) -> Result<(), KeyError> {
    let walk = Walk {
        found: &RefCell::new(None),
        keys: &Cell::new(0),
    };
    let mut deserializer = serde_json::Deserializer::from_slice(text);
    match walk.deserialize(&mut deserializer) {
        Ok(()) => Ok(()),
        Err(_) => match walk.found.take() {
            Some(found) => Err(found.into_error()),
            None => Ok(()),
        },
    }
}

/// What the walk found, with the path to it gathered on the way out.
struct Found {
    error: KeyError,
    /// Segments from the innermost out.
    path: Vec<String>,
}

impl Found {
    fn into_error(mut self) -> KeyError {
        if let KeyError::Duplicate { at, .. } = &mut self.error {
            *at = self
                .path
                .iter()
                .rev()
                .map(|segment| format!("/{}", segment.replace('~', "~0").replace('/', "~1")))
                .collect();
        }
        self.error
    }
}

/// The walk over one value: shared state for the whole document.
#[derive(Clone, Copy)]
struct Walk<'s> {
    found: &'s RefCell<Option<Found>>,
    keys: &'s Cell<usize>,
}

impl Walk<'_> {
    fn stop<E: de::Error>(self, error: KeyError) -> E {
        let message = error.to_string();
        *self.found.borrow_mut() = Some(Found {
            error,
            path: Vec::new(),
        });
        E::custom(message)
    }

    /// A value inside failed: note where, on the way out.
    fn inside<E>(self, segment: impl FnOnce() -> String, error: E) -> E {
        if let Some(found) = self.found.borrow_mut().as_mut() {
            found.path.push(segment());
        }
        error
    }
}

impl<'de> DeserializeSeed<'de> for Walk<'_> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Walk<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E>(self, _: bool) -> Result<(), E> {
        Ok(())
    }
    fn visit_i64<E>(self, _: i64) -> Result<(), E> {
        Ok(())
    }
    fn visit_u64<E>(self, _: u64) -> Result<(), E> {
        Ok(())
    }
    fn visit_f64<E>(self, _: f64) -> Result<(), E> {
        Ok(())
    }
    fn visit_str<E>(self, _: &str) -> Result<(), E> {
        Ok(())
    }
    fn visit_unit<E>(self) -> Result<(), E> {
        Ok(())
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut items: A) -> Result<(), A::Error> {
        let mut index = 0usize;
        loop {
            match items.next_element_seed(self) {
                Ok(Some(())) => index += 1,
                Ok(None) => return Ok(()),
                Err(e) => return Err(self.inside(|| index.to_string(), e)),
            }
        }
    }

    fn visit_map<A: MapAccess<'de>>(self, mut members: A) -> Result<(), A::Error> {
        let mut seen: HashSet<Cow<'de, str>> = HashSet::new();
        while let Some(key) = members.next_key_seed(KeySeed)? {
            let count = self.keys.get() + 1;
            self.keys.set(count);
            if count > MAX_JSON_KEYS {
                return Err(self.stop(KeyError::TooMany {
                    limit: MAX_JSON_KEYS,
                }));
            }
            if seen.contains(&key) {
                return Err(self.stop(KeyError::Duplicate {
                    key: key.into_owned(),
                    at: String::new(),
                }));
            }
            if let Err(e) = members.next_value_seed(self) {
                return Err(self.inside(|| key.into_owned(), e));
            }
            seen.insert(key);
        }
        Ok(())
    }
}

/// A key, borrowed from the text when it has no escapes.
struct KeySeed;

impl<'de> DeserializeSeed<'de> for KeySeed {
    type Value = Cow<'de, str>;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for KeySeed {
    type Value = Cow<'de, str>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an object key")
    }

    fn visit_borrowed_str<E>(self, key: &'de str) -> Result<Self::Value, E> {
        Ok(Cow::Borrowed(key))
    }

    fn visit_str<E>(self, key: &str) -> Result<Self::Value, E> {
        Ok(Cow::Owned(key.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn duplicate(key: &str, at: &str) -> Result<(), KeyError> {
        Err(KeyError::Duplicate {
            key: key.into(),
            at: at.into(),
        })
    }

    #[test]
    fn a_key_twice_in_one_object_is_found_with_where() {
        assert_eq!(check_keys(br#"{"a": 1, "a": 2}"#), duplicate("a", ""));
        assert_eq!(
            check_keys(br#"{"input": {"x": [1, {"b": 1, "b": {}}]}}"#),
            duplicate("b", "/input/x/1")
        );
        // Escapes are read: "\u0061" is "a".
        assert_eq!(check_keys(br#"{"a": 1, "\u0061": 2}"#), duplicate("a", ""));
        assert_eq!(
            check_keys(br#"{"a/b": {"~": {"k": 1, "k": 1}}}"#),
            duplicate("k", "/a~1b/~0")
        );
        let message = check_keys(br#"{"p": {"k": 1, "k": 2}}"#)
            .unwrap_err()
            .to_string();
        assert_eq!(message, r#"duplicate key "k" in the object at "/p""#);
    }

    #[test]
    fn equal_keys_in_different_objects_are_fine() {
        for ok in [
            &br#"{"a": {"a": 1}, "b": {"a": 2}}"#[..],
            br#"[{"a": 1}, {"a": 2}]"#,
            br#"{"a": 1, "A": 2, "a ": 3}"#,
            b"[]",
            b"1",
            b"\"x\"",
        ] {
            assert_eq!(check_keys(ok), Ok(()), "{}", String::from_utf8_lossy(ok));
        }
    }

    #[test]
    fn text_that_is_not_json_is_left_to_the_parser() {
        for bad in [&b"{"[..], b"{\"a\" 1}", b"[1,]", b"\xff", b""] {
            assert_eq!(check_keys(bad), Ok(()));
        }
    }

    #[test]
    fn past_the_key_limit_is_refused() {
        let object = |n: usize| {
            let members: Vec<String> = (0..n).map(|i| format!("\"{i}\":0")).collect();
            format!("{{{}}}", members.join(","))
        };
        assert_eq!(check_keys(object(MAX_JSON_KEYS).as_bytes()), Ok(()));
        assert_eq!(
            check_keys(object(MAX_JSON_KEYS + 1).as_bytes()),
            Err(KeyError::TooMany {
                limit: MAX_JSON_KEYS
            })
        );
        // Counted over every object, not per object.
        let half = object(MAX_JSON_KEYS / 2 + 1);
        assert!(check_keys(format!("[{half}, {half}]").as_bytes()).is_err());
    }
}
