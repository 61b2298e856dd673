//! The tools' JSON Schemas, taken from the API's own types
//! (`service/schema.rs`) with every `$ref` replaced by what it names: an
//! MCP client reads `inputSchema` and `outputSchema` on their own, with no
//! document around them to resolve a reference in.
//!
//! Also a checker for a tool's arguments against its input schema, for
//! the error that names the argument: serde says "invalid type: integer,
//! expected a string" without saying where. It reads the subset of JSON
//! Schema those types are written in (type, enum, properties, required,
//! additionalProperties, items, anyOf, allOf, minimum); serde reads the
//! arguments afterwards, and a test holds the two to the same verdicts.

use serde_json::{Map, Value};

use crate::service::schema::{Components, Schema};

/// References are followed at most this deep (the API's types nest a few
/// levels; a type that named itself would stop here).
const MAX_INLINE_DEPTH: usize = 16;

/// `T`'s schema, self-contained.
pub(crate) fn inline_schema<T: Schema>() -> Value {
    let mut components = Components::default();
    let schema = T::schema(&mut components);
    inline(schema, &components, 0)
}

fn inline(schema: Value, components: &Components, depth: usize) -> Value {
    match schema {
        Value::Object(map) => {
            if let Some(name) = map
                .get("$ref")
                .and_then(Value::as_str)
                .and_then(|r| r.strip_prefix("#/components/schemas/"))
                && depth < MAX_INLINE_DEPTH
                && let Some(target) = components.get(name)
            {
                let mut target = inline(target.clone(), components, depth + 1);
                // Siblings of the reference (none are written today) win.
                if let Value::Object(target_map) = &mut target {
                    for (k, v) in map.into_iter().filter(|(k, _)| k != "$ref") {
                        target_map.insert(k, inline(v, components, depth));
                    }
                }
                return target;
            }
            Value::Object(
                map.into_iter()
                    .map(|(k, v)| (k, inline(v, components, depth)))
                    .collect::<Map<_, _>>(),
            )
        }
        Value::Array(items) => Value::Array(
            items
                .into_iter()
                .map(|v| inline(v, components, depth))
                .collect(),
        ),
        other => other,
    }
}

/// The first way `value` breaks `schema`, said with where (`at`, such as
/// `policy.rules[0].min`); `None` when it fits.
pub(crate) fn first_problem(schema: &Value, value: &Value, at: &str) -> Option<String> {
    let schema = schema.as_object()?;
    if let Some(kinds) = schema.get("type") {
        let kinds: Vec<&str> = match kinds {
            Value::String(kind) => vec![kind.as_str()],
            Value::Array(kinds) => kinds.iter().filter_map(Value::as_str).collect(),
            _ => vec![],
        };
        if !kinds.iter().any(|kind| is_kind(value, kind)) {
            return Some(format!(
                "{at} must be {}, not {}",
                kinds
                    .iter()
                    .map(|k| article(k))
                    .collect::<Vec<_>>()
                    .join(" or "),
                crate::support::json_kind::json_kind(value)
            ));
        }
    }
    if let Some(allowed) = schema.get("enum").and_then(Value::as_array)
        && !allowed.contains(value)
    {
        let names: Vec<String> = allowed.iter().map(Value::to_string).collect();
        return Some(format!("{at} must be one of {}", names.join(", ")));
    }
    if let (Some(minimum), Some(number)) = (
        schema.get("minimum").and_then(Value::as_f64),
        value.as_f64(),
    ) && number < minimum
    {
        return Some(format!("{at} must be at least {minimum}"));
    }
    if let Some(parts) = schema.get("allOf").and_then(Value::as_array) {
        for part in parts {
            if let Some(problem) = first_problem(part, value, at) {
                return Some(problem);
            }
        }
    }
    if let Some(options) = schema.get("anyOf").and_then(Value::as_array) {
        let mut problems = Vec::new();
        for option in options {
            match first_problem(option, value, at) {
                None => {
                    problems.clear();
                    break;
                }
                // What the value should have been, rather than "null".
                Some(problem) if option.get("type").and_then(Value::as_str) != Some("null") => {
                    problems.push(problem)
                }
                Some(_) => {}
            }
        }
        if let Some(problem) = problems.into_iter().next() {
            return Some(problem);
        }
    }
    if let (Some(items), Value::Array(values)) = (schema.get("items"), value) {
        for (i, item) in values.iter().enumerate() {
            if let Some(problem) = first_problem(items, item, &format!("{at}[{i}]")) {
                return Some(problem);
            }
        }
    }
    if let Value::Object(fields) = value {
        return object_problem(schema, fields, at);
    }
    None
}

/// Unknown, missing or ill-typed fields of an object.
fn object_problem(
    schema: &Map<String, Value>,
    fields: &Map<String, Value>,
    at: &str,
) -> Option<String> {
    let empty = Map::new();
    let properties = schema
        .get("properties")
        .and_then(Value::as_object)
        .unwrap_or(&empty);
    let path = |name: &str| {
        if at.is_empty() {
            name.to_string()
        } else {
            format!("{at}.{name}")
        }
    };
    if schema.get("additionalProperties") == Some(&Value::Bool(false))
        && let Some(unknown) = fields.keys().find(|k| !properties.contains_key(*k))
    {
        let known: Vec<&str> = properties.keys().map(String::as_str).collect();
        return Some(format!(
            "unknown argument {}: the arguments{} are {}",
            path(unknown),
            if at.is_empty() {
                String::new()
            } else {
                format!(" of {at}")
            },
            known.join(", ")
        ));
    }
    if let Some(required) = schema.get("required").and_then(Value::as_array) {
        for name in required.iter().filter_map(Value::as_str) {
            if !fields.contains_key(name) {
                let about = properties
                    .get(name)
                    .and_then(|p| p.get("description"))
                    .and_then(Value::as_str)
                    .map(|d| format!(" ({d})"))
                    .unwrap_or_default();
                return Some(format!("missing required argument {}{about}", path(name)));
            }
        }
    }
    for (name, value) in fields {
        if let Some(property) = properties.get(name)
            && let Some(problem) = first_problem(property, value, &path(name))
        {
            return Some(problem);
        }
    }
    None
}

fn is_kind(value: &Value, kind: &str) -> bool {
    match kind {
        "string" => value.is_string(),
        "object" => value.is_object(),
        "array" => value.is_array(),
        "boolean" => value.is_boolean(),
        "null" => value.is_null(),
        "number" => value.is_number(),
        "integer" => value.is_u64() || value.is_i64(),
        _ => true,
    }
}

fn article(kind: &str) -> String {
    match kind {
        "object" | "array" | "integer" => format!("an {kind}"),
        "null" => "null".to_string(),
        other => format!("a {other}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::service::gates::{GateView, NewGate};

    fn has_ref(value: &Value) -> bool {
        match value {
            Value::Object(map) => map.contains_key("$ref") || map.values().any(has_ref),
            Value::Array(items) => items.iter().any(has_ref),
            _ => false,
        }
    }

    #[test]
    fn inlined_schemas_refer_to_nothing() {
        let input = inline_schema::<NewGate>();
        let output = inline_schema::<GateView>();
        assert!(!has_ref(&input), "{input}");
        assert!(!has_ref(&output), "{output}");
        assert_eq!(input["type"], "object");
        assert_eq!(output["type"], "object");
        // What was a reference is now the schema it named.
        assert_eq!(
            output["properties"]["status"]["allOf"][0]["enum"][0],
            Value::String("PENDING".into()),
            "{output}"
        );
        assert!(
            input["properties"]["policy"]
                .to_string()
                .contains("\"rules\""),
            "{input}"
        );
    }

    #[test]
    fn problems_name_the_argument() {
        let schema = inline_schema::<NewGate>();
        let problem = |args: Value| first_problem(&schema, &args, "").unwrap_or_default();
        assert!(problem(json_ok()).is_empty());
        assert!(
            problem(serde_json::json!({"payload": {}}))
                .starts_with("missing required argument message"),
            "{}",
            problem(serde_json::json!({"payload": {}}))
        );
        let p = problem(serde_json::json!({"message": "m", "payload": 1, "ttl": 5}));
        assert_eq!(p, "ttl must be a string or null, not a number");
        let p = problem(serde_json::json!({"message": "m", "payload": 1, "tll": "1h"}));
        assert!(
            p.starts_with("unknown argument tll: the arguments are message, payload"),
            "{p}"
        );
        let p = problem(
            serde_json::json!({"message": "m", "payload": 1, "policy": {"rules": [{"group": "g", "min": "two"}]}}),
        );
        assert!(
            p.starts_with("policy.rules[0].min must be an integer"),
            "{p}"
        );
    }

    fn json_ok() -> Value {
        serde_json::json!({"message": "Pay?", "payload": {"cents": 5}, "ttl": "1h"})
    }
}
