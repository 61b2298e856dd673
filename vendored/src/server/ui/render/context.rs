//! What tells one run from another in a list: who started it and a short
//! summary of its input. Inputs are user data the store holds already
//! (the pages show them whole on a run's approval page); the summary only
//! shortens them.

use serde_json::Value;

use crate::support::json_doc::JsonDoc;

use crate::domain::policy::requesters_from_trigger;

/// How many top-level fields of an input the summary names.
const FIELDS: usize = 3;
/// The most characters of one field's value in the summary.
const VALUE_CHARS: usize = 40;
/// The most characters of a field's name.
const NAME_CHARS: usize = 24;

/// Who started a run, from its trigger: the API token's name (or the
/// requester a gate request named), `webhook`, `schedule`, or `the
/// command line`.
pub(crate) fn started_by(trigger: &Value) -> String {
    let names = requesters_from_trigger(trigger);
    if !names.is_empty() {
        return names.join(", ");
    }
    match trigger.get("kind").and_then(Value::as_str) {
        Some("cli") => "the command line".into(),
        Some(kind) => clip(kind, NAME_CHARS),
        None => "unknown".into(),
    }
}

/// The first few top-level fields of `input`, each value cut short:
/// `customer: Ada Lovelace · amount: 120 · lines: [2 items] · +2 more`.
/// Empty for no input.
pub(crate) fn input_summary(input: &JsonDoc) -> String {
    // Only the first fields are parsed: a wide input is not built into a
    // tree for one line of a list.
    match input.first_members(FIELDS) {
        Some((fields, count)) => {
            let mut parts: Vec<String> = fields
                .iter()
                .map(|(name, value)| format!("{}: {}", clip(name, NAME_CHARS), brief(value)))
                .collect();
            if count > FIELDS {
                parts.push(format!("+{} more", count - FIELDS));
            }
            parts.join(" · ")
        }
        None => match input.len_of_top() {
            Some(items) => count(items, "item"),
            None => match input.to_value() {
                Value::Null => String::new(),
                scalar => brief(&scalar),
            },
        },
    }
}

/// One value in a few words: a string or a number as itself (cut short),
/// an object or an array by its size.
fn brief(value: &Value) -> String {
    match value {
        Value::String(text) => clip(text, VALUE_CHARS),
        Value::Array(items) => count(items.len(), "item"),
        Value::Object(fields) => count(fields.len(), "field"),
        other => clip(&other.to_string(), VALUE_CHARS),
    }
}

fn count(n: usize, what: &str) -> String {
    match n {
        1 => format!("[1 {what}]"),
        n => format!("[{n} {what}s]"),
    }
}

/// `text`'s first `max` characters, with `…` when it was longer; line
/// breaks read as spaces.
fn clip(text: &str, max: usize) -> String {
    let mut out: String = text
        .chars()
        .take(max)
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    if text.chars().nth(max).is_some() {
        out.pop();
        out.push('…');
    }
    out
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn an_input_is_summed_up_by_its_first_fields_cut_short() {
        let input = json!({
            "customer": "Ada Lovelace",
            "note": "x".repeat(100),
            "lines": [1, 2],
            "amount": 120,
            "more": {"a": 1},
        });
        let summary = input_summary(&JsonDoc::from(&input));
        assert_eq!(
            summary,
            format!(
                "customer: Ada Lovelace · note: {}… · lines: [2 items] · +2 more",
                "x".repeat(39)
            )
        );
        assert_eq!(
            input_summary(&JsonDoc::from(&json!({"a": {"b": 1}}))),
            "a: [1 field]"
        );
        assert_eq!(
            input_summary(&JsonDoc::from(&json!("one\nline"))),
            "one line"
        );
        assert_eq!(input_summary(&JsonDoc::from(&Value::Null)), "");
        assert_eq!(input_summary(&JsonDoc::from(&json!(7))), "7");
    }

    #[test]
    fn who_started_a_run_is_read_from_its_trigger() {
        assert_eq!(
            started_by(&json!({"kind": "api", "started_by": "bot"})),
            "bot"
        );
        assert_eq!(started_by(&json!({"kind": "webhook"})), "webhook");
        assert_eq!(started_by(&json!({"kind": "cli"})), "the command line");
        assert_eq!(
            started_by(&json!({"kind": "gate", "requested_by": "bot", "requester": "ann"})),
            "bot, ann"
        );
        assert_eq!(started_by(&json!({})), "unknown");
    }
}
