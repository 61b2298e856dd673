//! Expressions and templates, on minijinja.
//!
//! A string that is exactly one `{{ expr }}` keeps the value's JSON type
//! (number, bool, object); any other string with `{{`/`{%` renders to text;
//! a string without either is a literal. Undefined names are errors, so a
//! typo fails loudly instead of sending an empty value to a payment API.
//!
//! `${NAME}` secret references are plain text to minijinja: they are never
//! resolved here, so no secret can enter an expression context or an output.

use std::collections::BTreeSet;
use std::sync::OnceLock;

use minijinja::{Environment, UndefinedBehavior};
use serde_json::{Map, Value};
use thiserror::Error;

#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("{message}")]
pub struct ExprError {
    pub message: String,
}

impl ExprError {
    fn from_minijinja(template: &str, err: &minijinja::Error) -> ExprError {
        let mut message = format!("in {template:?}: {}", err.kind());
        if let Some(detail) = err.detail() {
            message.push_str(": ");
            message.push_str(detail);
        }
        ExprError { message }
    }
}

/// The shared environment: strict undefined, no auto-escaping (outputs are
/// JSON and HTTP payloads, not HTML), plus `fromjson`.
pub fn environment() -> &'static Environment<'static> {
    static ENV: OnceLock<Environment<'static>> = OnceLock::new();
    ENV.get_or_init(|| {
        let mut env = Environment::new();
        env.set_undefined_behavior(UndefinedBehavior::Strict);
        env.set_auto_escape_callback(|_| minijinja::AutoEscape::None);
        env.set_keep_trailing_newline(true);
        env.add_filter("fromjson", fromjson);
        env
    })
}

fn fromjson(text: &str) -> Result<minijinja::Value, minijinja::Error> {
    let parsed: Value = serde_json::from_str(text).map_err(|e| {
        minijinja::Error::new(
            minijinja::ErrorKind::InvalidOperation,
            format!("fromjson: not JSON: {e}"),
        )
    })?;
    Ok(minijinja::Value::from_serialize(&parsed))
}

/// The shape of a template string.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Shape<'a> {
    /// No template syntax: the text itself.
    Literal,
    /// Exactly one `{{ expr }}` and nothing else: keeps the value's type.
    Lone(&'a str),
    /// Anything else: renders to a string.
    Mixed,
}

fn shape(text: &str) -> Shape<'_> {
    if !text.contains("{{") && !text.contains("{%") && !text.contains("{#") {
        return Shape::Literal;
    }
    let trimmed = text.trim();
    if let Some(inner) = trimmed
        .strip_prefix("{{")
        .and_then(|rest| rest.strip_suffix("}}"))
    {
        let single = !inner.contains("{{")
            && !inner.contains("}}")
            && !inner.contains("{%")
            && !inner.contains("{#");
        if single {
            let inner = inner.trim_start_matches(['-', '+']);
            let inner = inner.trim_end_matches(['-', '+']);
            return Shape::Lone(inner.trim());
        }
    }
    Shape::Mixed
}

/// Evaluation context: the JSON object every template sees (`input`,
/// `trigger`, `steps`, `run`, and `args` or `output` where they apply).
#[derive(Debug, Clone, Default)]
pub struct Context {
    root: Map<String, Value>,
}

impl Context {
    pub fn new() -> Context {
        Context::default()
    }

    pub fn with(mut self, name: &str, value: Value) -> Context {
        self.root.insert(name.to_string(), value);
        self
    }

    pub fn set(&mut self, name: &str, value: Value) {
        self.root.insert(name.to_string(), value);
    }

    fn to_minijinja(&self) -> minijinja::Value {
        minijinja::Value::from_serialize(&self.root)
    }
}

/// Evaluate one template string.
pub fn evaluate_str(template: &str, ctx: &Context) -> Result<Value, ExprError> {
    match shape(template) {
        Shape::Literal => Ok(Value::String(template.to_string())),
        Shape::Lone(expr) => {
            let compiled = environment()
                .compile_expression(expr)
                .map_err(|e| ExprError::from_minijinja(template, &e))?;
            let value = compiled
                .eval(ctx.to_minijinja())
                .map_err(|e| ExprError::from_minijinja(template, &e))?;
            to_json(template, &value)
        }
        Shape::Mixed => environment()
            .render_str(template, ctx.to_minijinja())
            .map(Value::String)
            .map_err(|e| ExprError::from_minijinja(template, &e)),
    }
}

/// Evaluate a template and require a string result (URLs, headers, keys).
pub fn evaluate_to_string(template: &str, ctx: &Context) -> Result<String, ExprError> {
    Ok(match evaluate_str(template, ctx)? {
        Value::String(s) => s,
        Value::Null => String::new(),
        other => other.to_string(),
    })
}

/// Evaluate every string inside a JSON value (objects and arrays recursively);
/// other scalars are kept as written.
pub fn evaluate_value(value: &Value, ctx: &Context) -> Result<Value, ExprError> {
    Ok(match value {
        Value::String(s) => evaluate_str(s, ctx)?,
        Value::Array(items) => Value::Array(
            items
                .iter()
                .map(|v| evaluate_value(v, ctx))
                .collect::<Result<_, _>>()?,
        ),
        Value::Object(map) => {
            let mut out = Map::with_capacity(map.len());
            for (k, v) in map {
                out.insert(k.clone(), evaluate_value(v, ctx)?);
            }
            Value::Object(out)
        }
        other => other.clone(),
    })
}

/// Jinja truthiness for JSON: false, null, 0, "", [] and {} are false.
pub fn is_truthy(value: &Value) -> bool {
    match value {
        Value::Null => false,
        Value::Bool(b) => *b,
        Value::Number(n) => n.as_f64().is_some_and(|f| f != 0.0),
        Value::String(s) => !s.is_empty(),
        Value::Array(a) => !a.is_empty(),
        Value::Object(o) => !o.is_empty(),
    }
}

fn to_json(template: &str, value: &minijinja::Value) -> Result<Value, ExprError> {
    // minijinja's strict mode only objects when an undefined value is
    // printed or iterated; a lone expression hands it back as it is. A typo
    // must not become a null sent to a payment API.
    if value.is_undefined() {
        return Err(ExprError {
            message: format!(
                "in {template:?}: undefined value (a name or field that does not exist; use `| default(...)` or `is defined` for optional ones)"
            ),
        });
    }
    serde_json::to_value(value).map_err(|e| ExprError {
        message: format!("in {template:?}: result is not representable as JSON: {e}"),
    })
}

/// Compile a template without evaluating it (spec validation). Returns the
/// dotted names it reads, e.g. `steps.order.output`, `input.order_id`.
pub fn check(template: &str) -> Result<BTreeSet<String>, ExprError> {
    let names = match shape(template) {
        Shape::Literal => return Ok(BTreeSet::new()),
        Shape::Lone(expr) => environment()
            .compile_expression(expr)
            .map_err(|e| ExprError::from_minijinja(template, &e))?
            .undeclared_variables(true),
        Shape::Mixed => environment()
            .template_from_str(template)
            .map_err(|e| ExprError::from_minijinja(template, &e))?
            .undeclared_variables(true),
    };
    Ok(names.into_iter().collect())
}

/// Every string inside a JSON template value, for validation.
pub fn template_strings(value: &Value) -> Vec<&str> {
    let mut out = Vec::new();
    collect_strings(value, &mut out);
    out
}

fn collect_strings<'a>(value: &'a Value, out: &mut Vec<&'a str>) {
    match value {
        Value::String(s) => out.push(s),
        Value::Array(items) => items.iter().for_each(|v| collect_strings(v, out)),
        Value::Object(map) => map.values().for_each(|v| collect_strings(v, out)),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn ctx() -> Context {
        Context::new()
            .with(
                "input",
                json!({"order_id": "A1", "amount": 150, "items": [1, 2]}),
            )
            .with(
                "steps",
                json!({"assess": {"output": {"amount": 120, "ok": true}}}),
            )
    }

    #[test]
    fn lone_expression_keeps_its_type() {
        assert_eq!(
            evaluate_str("{{ input.amount }}", &ctx()).unwrap(),
            json!(150)
        );
        assert_eq!(
            evaluate_str(" {{ input.items }} ", &ctx()).unwrap(),
            json!([1, 2])
        );
        assert_eq!(
            evaluate_str("{{ steps.assess.output.amount > 100 }}", &ctx()).unwrap(),
            json!(true)
        );
        assert_eq!(
            evaluate_str("{{ steps.assess.output }}", &ctx()).unwrap(),
            json!({"amount": 120, "ok": true})
        );
    }

    #[test]
    fn mixed_text_interpolates_to_a_string() {
        assert_eq!(
            evaluate_str("Refund {{ input.amount }} on {{ input.order_id }}?", &ctx()).unwrap(),
            json!("Refund 150 on A1?")
        );
        assert_eq!(
            evaluate_str("{{ input.items | tojson }}", &ctx()).unwrap(),
            json!("[1,2]")
        );
    }

    #[test]
    fn secret_references_stay_literal() {
        assert_eq!(
            evaluate_str("Bearer ${SHOP_TOKEN}", &ctx()).unwrap(),
            json!("Bearer ${SHOP_TOKEN}")
        );
        assert_eq!(
            evaluate_str("${A}/{{ input.order_id }}", &ctx()).unwrap(),
            json!("${A}/A1")
        );
    }

    #[test]
    fn undefined_names_are_errors() {
        let err = evaluate_str("{{ input.missing.deeper }}", &ctx()).unwrap_err();
        assert!(err.message.contains("undefined"), "{}", err.message);
        let err = evaluate_str("{{ input.missing }}", &ctx()).unwrap_err();
        assert!(err.message.contains("undefined"), "{}", err.message);
        assert_eq!(
            evaluate_str("{{ input.missing | default('x') }}", &ctx()).unwrap(),
            json!("x")
        );
        assert_eq!(
            evaluate_str("{{ input.missing is defined }}", &ctx()).unwrap(),
            json!(false)
        );
    }

    #[test]
    fn check_reports_dotted_references() {
        let names = check("{{ steps.order.output.id }} for {{ input.x }}").unwrap();
        assert!(names.contains("steps.order.output.id"), "{names:?}");
        assert!(names.contains("input.x"));
        assert!(check("{{ 1 + }}").is_err());
    }

    #[test]
    fn evaluates_nested_values() {
        let v = evaluate_value(&json!({"a": ["{{ input.amount }}", 3], "b": "x"}), &ctx()).unwrap();
        assert_eq!(v, json!({"a": [150, 3], "b": "x"}));
    }
}
