//! A gate's form (DESIGN §13, `domain/form.rs`) as typed fields on the
//! approval page, and what those fields send back as the approver's input.
//!
//! Each field is a native control: text, a number (with its bounds), a
//! checkbox, or a select for an `enum`; required ones are marked and
//! carry `required`, so the browser checks what HTML can (required,
//! min/max, lengths) before sending. The server checks everything again on
//! every decision, and what it refuses comes back next to its field.

use serde::Serialize;
use serde_json::{Map, Number, Value};

use crate::domain::form::{Field, FieldKind, Form, InputError};
use crate::server::ui::form::INPUT_PREFIX;

/// The form as the page's template renders it.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct FormView {
    pub title: Option<String>,
    pub description: Option<String>,
    pub fields: Vec<FieldView>,
    /// An error about the input as a whole (path ``), if any.
    pub error: Option<String>,
}

/// One control.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct FieldView {
    /// The control's name: `input.<field>`.
    pub name: String,
    /// The field's own name (ids are made from it).
    pub field: String,
    pub label: String,
    pub help: Option<String>,
    pub required: bool,
    /// text, number, checkbox or select.
    pub control: &'static str,
    /// For a number: `1` (integer) or `any`.
    pub step: Option<&'static str>,
    pub min: Option<String>,
    pub max: Option<String>,
    pub minlength: Option<u64>,
    pub maxlength: Option<u64>,
    pub options: Vec<String>,
    /// The value shown: what the approver sent last, else the default.
    pub value: String,
    pub checked: bool,
    /// What the server refused about this field.
    pub error: Option<String>,
}

impl FormView {
    /// `form` with `sent` (the controls as last sent, when a decision was
    /// refused) and the `errors` the server found.
    pub fn new(form: &Form, sent: Option<&[(String, String)]>, errors: &[InputError]) -> FormView {
        let fields = form
            .fields
            .iter()
            .map(|field| FieldView::new(field, sent, errors))
            .collect();
        FormView {
            title: form.title.clone(),
            description: form.description.clone(),
            fields,
            error: errors
                .iter()
                .filter(|e| !form.fields.iter().any(|f| e.path == format!("/{}", f.name)))
                .map(|e| e.to_string())
                .reduce(|a, b| format!("{a}; {b}")),
        }
    }
}

/// A bound as HTML writes it: `5`, not `5.0`.
fn bound(value: Option<f64>) -> Option<String> {
    value.map(|v| {
        if v.fract() == 0.0 && v.abs() < 1e15 {
            format!("{}", v as i64)
        } else {
            v.to_string()
        }
    })
}

impl FieldView {
    fn new(field: &Field, sent: Option<&[(String, String)]>, errors: &[InputError]) -> FieldView {
        let path = format!("/{}", field.name);
        let sent_value = sent.map(|pairs| {
            pairs
                .iter()
                .find(|(name, _)| name == &field.name)
                .map(|(_, v)| v.clone())
        });
        let default_text = match &field.default {
            Some(Value::String(s)) => s.clone(),
            Some(Value::Number(n)) => n.to_string(),
            _ => String::new(),
        };
        let mut view = FieldView {
            name: format!("{INPUT_PREFIX}{}", field.name),
            field: field.name.clone(),
            label: field.title.clone().unwrap_or_else(|| field.name.clone()),
            help: field.description.clone(),
            required: field.required,
            control: "text",
            step: None,
            min: None,
            max: None,
            minlength: None,
            maxlength: None,
            options: Vec::new(),
            value: match &sent_value {
                Some(v) => v.clone().unwrap_or_default(),
                None => default_text,
            },
            checked: false,
            error: errors
                .iter()
                .find(|e| e.path == path)
                .map(|e| e.message.clone()),
        };
        match &field.kind {
            FieldKind::Text {
                min_length,
                max_length,
                choices,
            } => {
                view.minlength = *min_length;
                view.maxlength = *max_length;
                if let Some(choices) = choices {
                    view.control = "select";
                    view.options = choices.clone();
                }
            }
            FieldKind::Number {
                integer,
                minimum,
                maximum,
                ..
            } => {
                // Exclusive bounds have no HTML form: the server checks them.
                view.control = "number";
                view.step = Some(if *integer { "1" } else { "any" });
                view.min = bound(*minimum);
                view.max = bound(*maximum);
            }
            FieldKind::Boolean => {
                view.control = "checkbox";
                view.checked = match &sent_value {
                    Some(v) => v.is_some(),
                    None => field.default == Some(Value::Bool(true)),
                };
            }
        }
        view
    }
}

/// The approver's input from the controls as sent: each field typed by
/// the form (a checkbox left unticked is `false`; an empty control is
/// left out, so a default or "is required" applies). A number that does
/// not read as one is an error at its field; the rest is the form's to
/// check ([`Form::complete`], on the decision path).
pub(crate) fn input_of(form: &Form, sent: &[(String, String)]) -> Result<Value, Vec<InputError>> {
    let mut input = Map::new();
    let mut errors = Vec::new();
    for field in &form.fields {
        let given = sent
            .iter()
            .find(|(name, _)| name == &field.name)
            .map(|(_, v)| v.as_str());
        let value = match (&field.kind, given) {
            (FieldKind::Boolean, given) => Some(Value::Bool(given.is_some())),
            (_, None) => None,
            (_, Some(text)) if text.trim().is_empty() => None,
            (FieldKind::Text { .. }, Some(text)) => Some(Value::String(text.to_string())),
            (FieldKind::Number { integer, .. }, Some(text)) => {
                match number(text.trim(), *integer) {
                    Some(n) => Some(Value::Number(n)),
                    None => {
                        errors.push(InputError {
                            path: format!("/{}", field.name),
                            message: format!(
                                "must be {}, found {text:?}",
                                if *integer {
                                    "a whole number"
                                } else {
                                    "a number"
                                }
                            ),
                        });
                        None
                    }
                }
            }
        };
        if let Some(value) = value {
            input.insert(field.name.clone(), value);
        }
    }
    if errors.is_empty() {
        Ok(Value::Object(input))
    } else {
        Err(errors)
    }
}

/// `text` as a JSON number: an integer as one (so `5` stays `5`), else a
/// finite decimal. An integer field also takes `5.0`, as JSON Schema does.
fn number(text: &str, integer: bool) -> Option<Number> {
    if let Ok(i) = text.parse::<i64>() {
        return Some(Number::from(i));
    }
    let f: f64 = text.parse().ok().filter(|f: &f64| f.is_finite())?;
    if integer && f.fract() != 0.0 {
        return None;
    }
    Number::from_f64(f)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn form() -> Form {
        Form::parse(&json!({
            "type": "object",
            "properties": {
                "note": { "type": "string", "title": "Note", "maxLength": 5 },
                "amount": { "type": "integer", "minimum": 1, "exclusiveMaximum": 10 },
                "rate": { "type": "number" },
                "urgent": { "type": "boolean", "default": true },
                "team": { "type": "string", "enum": ["ops", "sales"] }
            },
            "required": ["amount"]
        }))
        .unwrap()
    }

    fn sent(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect()
    }

    #[test]
    fn controls_are_typed_by_the_form() {
        let view = FormView::new(&form(), None, &[]);
        let controls: Vec<(&str, &str)> = view
            .fields
            .iter()
            .map(|f| (f.field.as_str(), f.control))
            .collect();
        assert_eq!(
            controls,
            [
                ("note", "text"),
                ("amount", "number"),
                ("rate", "number"),
                ("urgent", "checkbox"),
                ("team", "select")
            ]
        );
        let amount = &view.fields[1];
        assert_eq!(
            (amount.step, amount.min.as_deref(), amount.max.as_deref()),
            (Some("1"), Some("1"), None)
        );
        assert!(amount.required);
        assert_eq!(view.fields[0].label, "Note");
        assert_eq!(view.fields[0].maxlength, Some(5));
        assert!(view.fields[3].checked, "a default of true ticks the box");
        assert_eq!(view.fields[1].name, "input.amount");
    }

    #[test]
    fn what_the_controls_send_is_typed_input() {
        let input = input_of(
            &form(),
            &sent(&[
                ("note", "hi"),
                ("amount", "3"),
                ("rate", "0.5"),
                ("team", ""),
            ]),
        )
        .unwrap();
        assert_eq!(
            input,
            json!({"note": "hi", "amount": 3, "rate": 0.5, "urgent": false})
        );
        let errors = input_of(&form(), &sent(&[("amount", "three")])).unwrap_err();
        assert_eq!(
            errors[0].to_string(),
            "/amount: must be a whole number, found \"three\""
        );
    }

    #[test]
    fn a_refused_value_is_shown_again_with_its_error() {
        let errors = form().complete(Some(&json!({"amount": 10}))).unwrap_err();
        let view = FormView::new(&form(), Some(&sent(&[("amount", "10")])), &errors);
        assert_eq!(view.fields[1].value, "10");
        assert_eq!(
            view.fields[1].error.as_deref(),
            Some("must be less than 10")
        );
        assert!(!view.fields[3].checked, "an unticked box stays unticked");
        assert_eq!(view.error, None);
    }
}
