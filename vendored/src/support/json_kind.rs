//! How a message names the kind of a JSON value it did not expect
//! ("an array", "a string", ...), the same in every error that says so.

use serde_json::Value;

pub(crate) fn json_kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}
