//! Checks a JSON value against a schema of the document: the subset of
//! JSON Schema 2020-12 the document uses (`$ref` into
//! `components.schemas`, `type`, `enum`, `const`, `properties`,
//! `required`, `additionalProperties`, `items`, `prefixItems`, `minimum`,
//! `anyOf`, `oneOf`, `allOf`, `not`, `format: date-time`).
//!
//! Public so that a test of a server (this repository's, an exported
//! crate's with the `openapi-check` feature on) can hold the answers it
//! gets to the document it was given.
//! A keyword outside the subset is reported as an error, never ignored,
//! so the document cannot quietly outgrow its checker.

use serde_json::Value;

/// Every way `value` breaks `schema`, each with the JSON pointer where;
/// empty when it conforms. `document` resolves `$ref`s.
pub fn schema_errors(document: &Value, schema: &Value, value: &Value) -> Vec<String> {
    let mut errors = Vec::new();
    check(document, schema, value, "", &mut errors, 0);
    errors
}

/// `$ref` chains and nesting deeper than this are a broken document.
const MAX_DEPTH: usize = 64;

const KNOWN: &[&str] = &[
    "$ref",
    "type",
    "enum",
    "const",
    "properties",
    "required",
    "additionalProperties",
    "items",
    "prefixItems",
    "minimum",
    "anyOf",
    "oneOf",
    "allOf",
    "not",
    "format",
    "description",
    "title",
];

fn check(
    document: &Value,
    schema: &Value,
    value: &Value,
    at: &str,
    errors: &mut Vec<String>,
    depth: usize,
) {
    if depth > MAX_DEPTH {
        errors.push(format!("{at}: the schema nests deeper than {MAX_DEPTH}"));
        return;
    }
    let schema = match schema {
        Value::Bool(true) => return,
        Value::Bool(false) => {
            errors.push(format!("{at}: no value is allowed here"));
            return;
        }
        Value::Object(schema) => schema,
        other => {
            errors.push(format!("{at}: the schema {other} is not an object"));
            return;
        }
    };
    for key in schema.keys() {
        if !KNOWN.contains(&key.as_str()) {
            errors.push(format!(
                "{at}: the checker does not know the keyword {key:?}"
            ));
        }
    }
    if let Some(target) = schema.get("$ref") {
        match target.as_str().and_then(|t| resolve(document, t)) {
            Some(resolved) => check(document, resolved, value, at, errors, depth + 1),
            None => errors.push(format!("{at}: unresolved $ref {target}")),
        }
    }
    if let Some(kind) = schema.get("type") {
        let kinds: Vec<&str> = match kind {
            Value::String(k) => vec![k.as_str()],
            Value::Array(ks) => ks.iter().filter_map(Value::as_str).collect(),
            _ => Vec::new(),
        };
        if !kinds.iter().any(|k| is_type(value, k)) {
            errors.push(format!(
                "{at}: expected {}, found {}",
                kinds.join(" or "),
                type_name(value)
            ));
            return;
        }
    }
    if let Some(allowed) = schema.get("enum").and_then(Value::as_array)
        && !allowed.contains(value)
    {
        errors.push(format!(
            "{at}: {value} is not one of {}",
            Value::from(allowed.clone())
        ));
    }
    if let Some(expected) = schema.get("const")
        && expected != value
    {
        errors.push(format!("{at}: expected {expected}, found {value}"));
    }
    if let (Some(minimum), Some(n)) = (
        schema.get("minimum").and_then(Value::as_f64),
        value.as_f64(),
    ) && n < minimum
    {
        errors.push(format!("{at}: {n} is below the minimum {minimum}"));
    }
    if schema.get("format").and_then(Value::as_str) == Some("date-time")
        && let Some(text) = value.as_str()
        && chrono::DateTime::parse_from_rfc3339(text).is_err()
    {
        errors.push(format!("{at}: {text:?} is not an RFC 3339 date-time"));
    }
    if let Value::Object(object) = value {
        check_object(document, schema, object, at, errors, depth);
    }
    if let Value::Array(items) = value {
        let prefix = schema
            .get("prefixItems")
            .and_then(Value::as_array)
            .map_or(&[][..], Vec::as_slice);
        for (i, item) in items.iter().enumerate() {
            let item_schema = prefix.get(i).or_else(|| schema.get("items"));
            if let Some(item_schema) = item_schema {
                check(
                    document,
                    item_schema,
                    item,
                    &format!("{at}/{i}"),
                    errors,
                    depth + 1,
                );
            }
        }
    }
    if let Some(all) = schema.get("allOf").and_then(Value::as_array) {
        for sub in all {
            check(document, sub, value, at, errors, depth + 1);
        }
    }
    if let Some(any) = schema.get("anyOf").and_then(Value::as_array)
        && !any
            .iter()
            .any(|sub| conforms(document, sub, value, at, depth))
    {
        errors.push(format!("{at}: {value} matches none of anyOf"));
    }
    if let Some(one) = schema.get("oneOf").and_then(Value::as_array) {
        let matching = one
            .iter()
            .filter(|sub| conforms(document, sub, value, at, depth))
            .count();
        if matching != 1 {
            errors.push(format!(
                "{at}: matches {matching} of oneOf, not exactly one"
            ));
        }
    }
    if let Some(not) = schema.get("not")
        && conforms(document, not, value, at, depth)
    {
        errors.push(format!("{at}: matches what `not` forbids"));
    }
}

fn check_object(
    document: &Value,
    schema: &serde_json::Map<String, Value>,
    object: &serde_json::Map<String, Value>,
    at: &str,
    errors: &mut Vec<String>,
    depth: usize,
) {
    let properties = schema.get("properties").and_then(Value::as_object);
    for name in schema
        .get("required")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
    {
        if !object.contains_key(name) {
            errors.push(format!("{at}: the required field {name:?} is missing"));
        }
    }
    for (name, field) in object {
        let here = format!("{at}/{name}");
        match properties.and_then(|p| p.get(name)) {
            Some(field_schema) => check(document, field_schema, field, &here, errors, depth + 1),
            None => {
                if let Some(extra) = schema.get("additionalProperties") {
                    check(document, extra, field, &here, errors, depth + 1);
                }
            }
        }
    }
}

fn conforms(document: &Value, schema: &Value, value: &Value, at: &str, depth: usize) -> bool {
    let mut errors = Vec::new();
    check(document, schema, value, at, &mut errors, depth + 1);
    errors.is_empty()
}

/// A local reference `#/a/b` (JSON pointer escapes `~1` and `~0`).
fn resolve<'a>(document: &'a Value, target: &str) -> Option<&'a Value> {
    let pointer = target.strip_prefix('#')?;
    document.pointer(pointer)
}

fn is_type(value: &Value, kind: &str) -> bool {
    match kind {
        "null" => value.is_null(),
        "boolean" => value.is_boolean(),
        "object" => value.is_object(),
        "array" => value.is_array(),
        "string" => value.is_string(),
        "number" => value.is_number(),
        "integer" => value.is_i64() || value.is_u64(),
        _ => false,
    }
}

fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn errors(schema: Value, value: Value) -> Vec<String> {
        let document = json!({ "components": { "schemas": { "N": { "type": "integer" } } } });
        schema_errors(&document, &schema, &value)
    }

    #[test]
    fn objects_check_required_known_and_closed_fields() {
        let schema = json!({
            "type": "object",
            "properties": { "a": { "$ref": "#/components/schemas/N" }, "b": { "type": ["string", "null"] } },
            "required": ["a"],
            "additionalProperties": false
        });
        assert!(errors(schema.clone(), json!({ "a": 1, "b": null })).is_empty());
        assert_eq!(
            errors(schema.clone(), json!({ "b": "x" })),
            [": the required field \"a\" is missing"]
        );
        assert_eq!(
            errors(schema.clone(), json!({ "a": "1" })),
            ["/a: expected integer, found string"]
        );
        assert_eq!(
            errors(schema, json!({ "a": 1, "c": 2 })),
            ["/c: no value is allowed here"]
        );
    }

    #[test]
    fn combinators_enums_and_formats_are_checked() {
        let one = json!({ "oneOf": [{ "const": 1 }, { "type": "integer" }] });
        assert!(errors(one.clone(), json!(2)).is_empty());
        assert_eq!(
            errors(one, json!(1)),
            [": matches 2 of oneOf, not exactly one"]
        );
        assert_eq!(
            errors(json!({ "not": { "const": "x" } }), json!("x")).len(),
            1
        );
        assert_eq!(errors(json!({ "enum": ["a"] }), json!("b")).len(), 1);
        assert_eq!(
            errors(json!({ "anyOf": [{ "type": "null" }] }), json!(0)).len(),
            1
        );
        let when = json!({ "type": "string", "format": "date-time" });
        assert!(errors(when.clone(), json!("2026-12-01T14:25:49.123Z")).is_empty());
        assert_eq!(errors(when, json!("yesterday")).len(), 1);
        let pair =
            json!({ "type": "array", "prefixItems": [{ "type": "string" }], "items": false });
        assert!(errors(pair.clone(), json!(["a"])).is_empty());
        assert_eq!(errors(pair, json!(["a", 1])).len(), 1);
    }

    #[test]
    fn an_unknown_keyword_or_reference_is_an_error_not_a_pass() {
        assert_eq!(
            errors(json!({ "pattern": "^a" }), json!("b")),
            [": the checker does not know the keyword \"pattern\""]
        );
        assert_eq!(
            errors(json!({ "$ref": "#/components/schemas/Nope" }), json!(1)),
            [": unresolved $ref \"#/components/schemas/Nope\""]
        );
    }
}
