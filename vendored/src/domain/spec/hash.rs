//! The canonical spec hash: SHA-256 of the canonical JSON of the parsed YAML
//! (object keys sorted, compact). Key order and comments do not change it;
//! `${NAME}` text is hashed as written, so rotating a secret does not.

use serde_json::Value;
use sha2::{Digest, Sha256};

/// A 64-hex spec hash.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct SpecHash(String);

impl SpecHash {
    pub fn of_document(document: &Value) -> SpecHash {
        // Streamed into the digest: the canonical text of a large spec is
        // never held whole in memory.
        let mut hasher = Sha256::new();
        write_canonical(document, &mut |bytes: &[u8]| hasher.update(bytes));
        SpecHash(crate::support::hex::encode(&hasher.finalize()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// First 12 hex digits.
    pub fn short(&self) -> &str {
        SpecHash::short_of(&self.0)
    }

    /// First 12 characters of any stored hash text.
    pub fn short_of(hash: &str) -> &str {
        hash.get(..12).unwrap_or(hash)
    }
}

impl std::fmt::Display for SpecHash {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// The canonical text [`SpecHash::of_document`] hashes, whole: what a
/// stored spec version keeps beside its hash.
pub(crate) fn canonical_text(document: &Value) -> String {
    let mut bytes = Vec::new();
    write_canonical(document, &mut |chunk: &[u8]| bytes.extend_from_slice(chunk));
    // Every chunk is JSON text written by serde_json or an ASCII delimiter.
    String::from_utf8(bytes).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
}

/// Compact JSON with object keys sorted (by their UTF-8 bytes), whatever the
/// map's own order, handed to `out` a piece at a time (a digest, or a text).
fn write_canonical(value: &Value, out: &mut impl FnMut(&[u8])) {
    match value {
        Value::Object(map) => {
            let mut entries: Vec<(&String, &Value)> = map.iter().collect();
            entries.sort_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
            out(b"{");
            for (i, (k, v)) in entries.into_iter().enumerate() {
                if i > 0 {
                    out(b",");
                }
                out(Value::String(k.clone()).to_string().as_bytes());
                out(b":");
                write_canonical(v, out);
            }
            out(b"}");
        }
        Value::Array(items) => {
            out(b"[");
            for (i, v) in items.iter().enumerate() {
                if i > 0 {
                    out(b",");
                }
                write_canonical(v, out);
            }
            out(b"]");
        }
        scalar => out(scalar.to_string().as_bytes()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn key_order_does_not_change_the_hash() {
        let a = json!({"b": 1, "a": {"y": [1, 2], "x": "s"}});
        let b = json!({"a": {"x": "s", "y": [1, 2]}, "b": 1});
        assert_eq!(SpecHash::of_document(&a), SpecHash::of_document(&b));
        assert_ne!(
            SpecHash::of_document(&a),
            SpecHash::of_document(&json!({"b": 2, "a": {"y": [1, 2], "x": "s"}}))
        );
    }

    #[test]
    fn the_canonical_text_is_what_is_hashed() {
        let document = json!({"b": [1, "x\u{0}"], "a": {"z": null, "y": 2.5}});
        let text = canonical_text(&document);
        assert_eq!(text, r#"{"a":{"y":2.5,"z":null},"b":[1,"x\u0000"]}"#);
        let digest = crate::support::hex::encode(&Sha256::digest(text.as_bytes()));
        assert_eq!(SpecHash::of_document(&document).as_str(), digest);
    }

    #[test]
    fn short_hash_is_twelve_digits() {
        let h = SpecHash::of_document(&json!({}));
        assert_eq!(h.as_str().len(), 64);
        assert_eq!(h.short(), &h.as_str()[..12]);
    }
}
