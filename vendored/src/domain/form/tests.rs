use serde_json::json;

use super::*;

fn form(schema: Value) -> Form {
    Form::parse(&schema).unwrap_or_else(|e| panic!("{schema}: {e} at {:?}", e.path))
}

fn refusal(schema: Value) -> (Vec<String>, String) {
    match Form::parse(&schema) {
        Ok(_) => panic!("accepted: {schema}"),
        Err(e) => (e.path, e.message),
    }
}

fn expense() -> Form {
    form(json!({
        "type": "object",
        "title": "Payout",
        "properties": {
            "note": { "type": "string", "title": "Note", "minLength": 3, "maxLength": 10 },
            "amount": { "type": "integer", "minimum": 1, "exclusiveMaximum": 100 },
            "rate": { "type": "number", "exclusiveMinimum": 0, "maximum": 1.5 },
            "urgent": { "type": "boolean", "default": false },
            "cost_center": { "type": "string", "enum": ["ops", "sales"], "default": "ops" }
        },
        "required": ["note", "amount"]
    }))
}

#[test]
fn a_form_keeps_its_fields_in_order_with_what_each_requires() {
    let form = expense();
    let names: Vec<&str> = form.fields.iter().map(|f| f.name.as_str()).collect();
    assert_eq!(names, ["note", "amount", "rate", "urgent", "cost_center"]);
    assert!(form.field("note").unwrap().required);
    assert!(!form.field("rate").unwrap().required);
    assert_eq!(form.title.as_deref(), Some("Payout"));
    assert_eq!(form.field("amount").unwrap().type_name(), "integer");
    assert!(form.has_required());
    assert_eq!(
        form.effective_schema()["additionalProperties"],
        json!(false)
    );
}

#[test]
fn valid_input_passes_and_defaults_fill_what_was_left_out() {
    let form = expense();
    let input = form
        .complete(Some(&json!({"note": "ok then", "amount": 5})))
        .unwrap();
    assert_eq!(
        input,
        json!({"note": "ok then", "amount": 5, "urgent": false, "cost_center": "ops"})
    );
    // A whole number written as 5.0 is an integer, as in JSON Schema.
    form.validate(&json!({"note": "abc", "amount": 5.0}))
        .unwrap();
}

#[test]
fn every_error_is_returned_with_its_path() {
    let errors = expense()
        .validate(&json!({"note": "é", "amount": 100, "rate": 0, "urgent": "yes", "cost_center": "hr", "extra": 1}))
        .unwrap_err();
    let got: Vec<String> = errors.iter().map(ToString::to_string).collect();
    assert_eq!(
        got,
        [
            "/note: must be at least 3 character(s) long",
            "/amount: must be less than 100",
            "/rate: must be more than 0",
            "/urgent: must be true or false, found a string",
            "/cost_center: must be one of \"ops\", \"sales\"",
            "/extra: is not a field of this form (its fields: note, amount, rate, urgent, cost_center)",
        ]
    );
    let missing = expense().complete(None).unwrap_err();
    assert_eq!(
        describe(&missing),
        "/note: is required; /amount: is required"
    );
    let not_object = expense().validate(&json!([1])).unwrap_err();
    assert_eq!(
        describe(&not_object),
        "the input must be a JSON object, found an array"
    );
}

#[test]
fn lengths_count_characters_not_bytes() {
    let form =
        form(json!({"type": "object", "properties": {"n": {"type": "string", "maxLength": 2}}}));
    form.validate(&json!({"n": "éé"})).unwrap();
    assert!(form.validate(&json!({"n": "ééé"})).is_err());
}

#[test]
fn numbers_are_not_booleans_nor_text() {
    let form = form(
        json!({"type": "object", "properties": {"n": {"type": "number"}, "i": {"type": "integer"}}}),
    );
    assert!(form.validate(&json!({"n": true})).is_err());
    assert!(form.validate(&json!({"n": "1"})).is_err());
    assert!(form.validate(&json!({"i": 1.5})).is_err());
    assert!(form.validate(&json!({"n": null})).is_err());
    form.validate(&json!({"n": -1.25, "i": -3})).unwrap();
}

#[test]
fn what_is_outside_the_subset_is_refused_at_its_keyword() {
    let cases = [
        (
            json!([1]),
            vec![],
            "must be the JSON Schema of an object (a mapping), found an array",
        ),
        (
            json!({"properties": {}}),
            vec![],
            "must be the JSON Schema of an object: give it type: object and the fields under properties",
        ),
        (
            json!({"type": "string"}),
            vec!["type"],
            "must be object: a form is the JSON Schema of an object, its fields under properties",
        ),
        (
            json!({"type": "object", "$schema": "x"}),
            vec!["$schema"],
            "\"$schema\" is not supported in a form; a form takes type, properties, required, additionalProperties, title, description",
        ),
        (
            json!({"type": "object", "additionalProperties": true}),
            vec!["additionalProperties"],
            "may only be false: a form takes the fields it declares and nothing else (the default)",
        ),
        (
            json!({"type": "object", "properties": {"a": {"type": "string", "pattern": "^x"}}}),
            vec!["properties", "a", "pattern"],
            "\"pattern\" is not supported in a form's field; a field takes type, title, description, default, enum, minLength, maxLength, minimum, maximum, exclusiveMinimum, exclusiveMaximum",
        ),
        (
            json!({"type": "object", "properties": {"a": {"type": "string", "format": "email"}}}),
            vec!["properties", "a", "format"],
            "\"format\" is not supported in a form's field; a field takes type, title, description, default, enum, minLength, maxLength, minimum, maximum, exclusiveMinimum, exclusiveMaximum",
        ),
        (
            json!({"type": "object", "properties": {"a": {"type": "array"}}}),
            vec!["properties", "a", "type"],
            "type \"array\" is not supported in a form's field: use string, number, integer or boolean",
        ),
        (
            json!({"type": "object", "properties": {"a": {}}}),
            vec!["properties", "a"],
            "field \"a\" needs a type: string, number, integer or boolean",
        ),
        (
            json!({"type": "object", "properties": {"a": {"type": "number", "minLength": 1}}}),
            vec!["properties", "a", "minLength"],
            "minLength applies to string fields, and field \"a\" is number",
        ),
        (
            json!({"type": "object", "properties": {"a": {"type": "string", "minimum": 1}}}),
            vec!["properties", "a", "minimum"],
            "minimum applies to number and integer fields, and field \"a\" is string",
        ),
        (
            json!({"type": "object", "properties": {"a": {"type": "integer", "enum": [1]}}}),
            vec!["properties", "a", "enum"],
            "enum applies to string fields, and field \"a\" is integer",
        ),
        (
            json!({"type": "object", "properties": {"a": {"type": "string", "enum": ["x", 1]}}}),
            vec!["properties", "a", "enum"],
            "may list strings only (a select of text choices), found a number",
        ),
        (
            json!({"type": "object", "properties": {"a": {"type": "string", "minLength": 3, "maxLength": 2}}}),
            vec!["properties", "a", "minLength"],
            "minLength 3 is above maxLength 2: no text would do",
        ),
        (
            json!({"type": "object", "properties": {"a": {"type": "number", "minimum": 3, "exclusiveMaximum": 3}}}),
            vec!["properties", "a"],
            "field \"a\": its bounds leave no number that would do",
        ),
        (
            json!({"type": "object", "properties": {"a": {"type": "integer", "default": "x"}}}),
            vec!["properties", "a", "default"],
            "default \"x\" does not fit field \"a\": it must be a whole number, found a string",
        ),
        (
            json!({"type": "object", "properties": {"a b": {"type": "string"}}}),
            vec!["properties", "a b"],
            "field name \"a b\" is not supported: use letters, digits, '_' and '-', starting with a letter or '_', at most 64 characters",
        ),
        (
            json!({"type": "object", "properties": {"a": {"type": "string"}}, "required": ["b"]}),
            vec!["required"],
            "names \"b\", which is not a field under properties",
        ),
        (
            json!({"type": "object", "properties": {"a": {"type": "string", "maxLength": -1}}}),
            vec!["properties", "a", "maxLength"],
            "must be a whole number of at least 0, found -1",
        ),
    ];
    for (schema, path, message) in cases {
        let (got_path, got) = refusal(schema.clone());
        assert_eq!(
            (got_path, got.as_str()),
            (path.iter().map(|s| s.to_string()).collect(), message),
            "{schema}"
        );
    }
}
