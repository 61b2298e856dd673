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
        write_canonical(document, &mut hasher);
        SpecHash(crate::hex::encode(&hasher.finalize()))
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

/// Compact JSON with object keys sorted (by their UTF-8 bytes), whatever the
/// map's own order.
fn write_canonical(value: &Value, out: &mut Sha256) {
    match value {
        Value::Object(map) => {
            let mut entries: Vec<(&String, &Value)> = map.iter().collect();
            entries.sort_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
            out.update(b"{");
            for (i, (k, v)) in entries.into_iter().enumerate() {
                if i > 0 {
                    out.update(b",");
                }
                out.update(Value::String(k.clone()).to_string().as_bytes());
                out.update(b":");
                write_canonical(v, out);
            }
            out.update(b"}");
        }
        Value::Array(items) => {
            out.update(b"[");
            for (i, v) in items.iter().enumerate() {
                if i > 0 {
                    out.update(b",");
                }
                write_canonical(v, out);
            }
            out.update(b"]");
        }
        scalar => out.update(scalar.to_string().as_bytes()),
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
    fn short_hash_is_twelve_digits() {
        let h = SpecHash::of_document(&json!({}));
        assert_eq!(h.as_str().len(), 64);
        assert_eq!(h.short(), &h.as_str()[..12]);
    }
}
