//! Approver input (DESIGN §13, issue 25 item 9): a gate's `form:`, a JSON
//! Schema of what the approver fills in, and the check of what they gave.
//!
//! Only a subset of JSON Schema (draft 2020-12 semantics) is understood,
//! the part a form of typed fields needs; every other keyword is refused
//! when the spec is read (fail closed: a constraint this runtime would not
//! check is never quietly ignored). The subset:
//!
//! - the form: `type: object`, `properties`, `required`,
//!   `additionalProperties: false` (the default here: a field the form does
//!   not declare is refused, unlike plain JSON Schema, whose default allows
//!   it), `title`, `description`;
//! - a field: `type` one of `string`, `number`, `integer`, `boolean`;
//!   `title`, `description`, `default`; for strings `enum` (of strings),
//!   `minLength`, `maxLength`; for numbers and integers `minimum`,
//!   `maximum`, `exclusiveMinimum`, `exclusiveMaximum` (numbers, as in
//!   2020-12).
//!
//! `pattern` and `format` are left out: the runtime has no regular
//! expression engine, and a format it could not check honestly is worse
//! than none. Field names are identifiers (letters, digits, `_`, `-`,
//! starting with a letter or `_`), so `steps.<id>.output.input.<name>` and
//! the inbox's field names read them as written.
//!
//! [`Form::complete`] is what every channel runs on an approver's input:
//! defaults fill the fields left out, then the input is checked, and every
//! error is returned with its path (`/name`, JSON Pointer).

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// The keywords a form (the top level) may use.
pub const FORM_KEYWORDS: &[&str] = &[
    "type",
    "properties",
    "required",
    "additionalProperties",
    "title",
    "description",
];

/// The keywords a field may use (which apply depends on its type).
pub const FIELD_KEYWORDS: &[&str] = &[
    "type",
    "title",
    "description",
    "default",
    "enum",
    "minLength",
    "maxLength",
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
];

/// A gate's form, read from its `form:` schema.
#[derive(Debug, Clone, PartialEq)]
pub struct Form {
    pub title: Option<String>,
    pub description: Option<String>,
    /// In the order the schema writes them.
    pub fields: Vec<Field>,
    /// The schema as written: served to API clients.
    pub schema: Value,
}

/// One field of a form.
#[derive(Debug, Clone, PartialEq)]
pub struct Field {
    pub name: String,
    pub title: Option<String>,
    pub description: Option<String>,
    pub required: bool,
    pub default: Option<Value>,
    pub kind: FieldKind,
}

/// What a field holds and its constraints.
#[derive(Debug, Clone, PartialEq)]
pub enum FieldKind {
    Text {
        min_length: Option<u64>,
        max_length: Option<u64>,
        /// `enum`: the only values allowed (a select).
        choices: Option<Vec<String>>,
    },
    Number {
        /// `type: integer`: a whole number (2.0 counts, as in JSON Schema).
        integer: bool,
        minimum: Option<f64>,
        maximum: Option<f64>,
        exclusive_minimum: Option<f64>,
        exclusive_maximum: Option<f64>,
    },
    Boolean,
}

/// A schema outside the supported subset, or wrong: where (the keys
/// leading to the keyword at fault, from the form) and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct SchemaError {
    /// Keys from the form's mapping down to the keyword at fault; empty
    /// for the form itself.
    pub path: Vec<String>,
    pub message: String,
}

/// One thing wrong with an approver's input.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct InputError {
    /// JSON Pointer to the value at fault: `/note`, or `` for the input.
    pub path: String,
    pub message: String,
}

impl std::fmt::Display for InputError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.path.is_empty() {
            f.write_str(&self.message)
        } else {
            write!(f, "{}: {}", self.path, self.message)
        }
    }
}

/// Several input errors as one line: `/a: ...; /b: ...`.
pub fn describe(errors: &[InputError]) -> String {
    errors
        .iter()
        .map(InputError::to_string)
        .collect::<Vec<_>>()
        .join("; ")
}

fn err(path: &[&str], message: impl Into<String>) -> SchemaError {
    SchemaError {
        path: path.iter().map(|s| s.to_string()).collect(),
        message: message.into(),
    }
}

fn kind(value: &Value) -> &'static str {
    crate::support::json_kind::json_kind(value)
}

fn is_field_name(name: &str) -> bool {
    let mut chars = name.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        && name.len() <= 64
}

fn text(value: &Value, path: &[&str]) -> Result<String, SchemaError> {
    value
        .as_str()
        .map(str::to_string)
        .ok_or_else(|| err(path, format!("must be a string, found {}", kind(value))))
}

fn count(value: &Value, path: &[&str]) -> Result<u64, SchemaError> {
    match value {
        Value::Number(n) => n
            .as_u64()
            .or_else(|| {
                n.as_f64()
                    .filter(|f| f.fract() == 0.0 && *f >= 0.0 && *f < 9.0e15)
                    .map(|f| f as u64)
            })
            .ok_or_else(|| {
                err(
                    path,
                    format!("must be a whole number of at least 0, found {n}"),
                )
            }),
        other => Err(err(
            path,
            format!(
                "must be a whole number of at least 0, found {}",
                kind(other)
            ),
        )),
    }
}

fn number(value: &Value, path: &[&str]) -> Result<f64, SchemaError> {
    value
        .as_f64()
        .filter(|_| value.is_number())
        .ok_or_else(|| err(path, format!("must be a number, found {}", kind(value))))
}

fn supported(keywords: &[&str]) -> String {
    keywords.join(", ")
}

impl Form {
    /// Read a `form:` schema. Every keyword outside the subset, every
    /// value of the wrong kind and every contradiction (a minimum above
    /// the maximum, a default the field refuses) is an error at its key.
    pub fn parse(schema: &Value) -> Result<Form, SchemaError> {
        let Some(top) = schema.as_object() else {
            return Err(err(
                &[],
                format!(
                    "must be the JSON Schema of an object (a mapping), found {}",
                    kind(schema)
                ),
            ));
        };
        for key in top.keys() {
            if !FORM_KEYWORDS.contains(&key.as_str()) {
                return Err(err(
                    &[key],
                    format!(
                        "{key:?} is not supported in a form; a form takes {}",
                        supported(FORM_KEYWORDS)
                    ),
                ));
            }
        }
        match top.get("type") {
            Some(Value::String(t)) if t == "object" => {}
            Some(_) => {
                return Err(err(
                    &["type"],
                    "must be object: a form is the JSON Schema of an object, its fields under properties",
                ));
            }
            None => {
                return Err(err(
                    &[],
                    "must be the JSON Schema of an object: give it type: object and the fields under properties",
                ));
            }
        }
        if let Some(extra) = top.get("additionalProperties")
            && extra != &Value::Bool(false)
        {
            return Err(err(
                &["additionalProperties"],
                "may only be false: a form takes the fields it declares and nothing else (the default)",
            ));
        }
        let title = top.get("title").map(|t| text(t, &["title"])).transpose()?;
        let description = top
            .get("description")
            .map(|t| text(t, &["description"]))
            .transpose()?;
        let empty = Map::new();
        let properties = match top.get("properties") {
            None => &empty,
            Some(Value::Object(p)) => p,
            Some(other) => {
                return Err(err(
                    &["properties"],
                    format!(
                        "must be a mapping of field names to fields, found {}",
                        kind(other)
                    ),
                ));
            }
        };
        let required = Self::required(top.get("required"), properties)?;
        let mut fields = Vec::with_capacity(properties.len());
        for (name, property) in properties {
            if !is_field_name(name) {
                return Err(err(
                    &["properties", name],
                    format!(
                        "field name {name:?} is not supported: use letters, digits, '_' and '-', starting with a letter or '_', at most 64 characters"
                    ),
                ));
            }
            let mut field = Field::parse(name, property)?;
            field.required = required.contains(name);
            fields.push(field);
        }
        Ok(Form {
            title,
            description,
            fields,
            schema: schema.clone(),
        })
    }

    fn required(
        value: Option<&Value>,
        properties: &Map<String, Value>,
    ) -> Result<Vec<String>, SchemaError> {
        let Some(value) = value else {
            return Ok(Vec::new());
        };
        let path = ["required"];
        let Some(items) = value.as_array() else {
            return Err(err(
                &path,
                format!("must be a list of field names, found {}", kind(value)),
            ));
        };
        let mut names: Vec<String> = Vec::with_capacity(items.len());
        for item in items {
            let name = text(item, &path)?;
            if !properties.contains_key(&name) {
                return Err(err(
                    &path,
                    format!("names {name:?}, which is not a field under properties"),
                ));
            }
            if names.contains(&name) {
                return Err(err(&path, format!("names {name:?} twice")));
            }
            names.push(name);
        }
        Ok(names)
    }

    /// Whether an approval without input (a Slack button) can pass: no
    /// field is required.
    pub fn has_required(&self) -> bool {
        self.fields.iter().any(|f| f.required)
    }

    /// The schema an off-the-shelf JSON Schema validator checks exactly as
    /// [`Form::validate`] does: the schema as written, with
    /// `additionalProperties: false` written out (this subset's default).
    pub fn effective_schema(&self) -> Value {
        let mut schema = self.schema.clone();
        if let Value::Object(map) = &mut schema {
            map.insert("additionalProperties".into(), Value::Bool(false));
        }
        schema
    }

    /// An approver's input as it is stored: `given` (an empty object when
    /// they gave none) with each default filled in for a field left out,
    /// checked. Every error, each with its path.
    pub fn complete(&self, given: Option<&Value>) -> Result<Value, Vec<InputError>> {
        let mut input = given.cloned().unwrap_or_else(|| Value::Object(Map::new()));
        if let Value::Object(map) = &mut input {
            for field in &self.fields {
                if let Some(default) = &field.default
                    && !map.contains_key(&field.name)
                {
                    map.insert(field.name.clone(), default.clone());
                }
            }
        }
        self.validate(&input)?;
        Ok(input)
    }

    /// Check `input` against the form as JSON Schema would (draft
    /// 2020-12, with `additionalProperties: false`): every error, each
    /// with its path. Defaults are not applied (see [`Form::complete`]).
    pub fn validate(&self, input: &Value) -> Result<(), Vec<InputError>> {
        let Some(map) = input.as_object() else {
            return Err(vec![InputError {
                path: String::new(),
                message: format!("the input must be a JSON object, found {}", kind(input)),
            }]);
        };
        let mut errors = Vec::new();
        for field in &self.fields {
            match map.get(&field.name) {
                Some(value) => {
                    if let Err(message) = field.check(value) {
                        errors.push(InputError {
                            path: format!("/{}", field.name),
                            message,
                        });
                    }
                }
                None if field.required => errors.push(InputError {
                    path: format!("/{}", field.name),
                    message: "is required".into(),
                }),
                None => {}
            }
        }
        for name in map.keys() {
            if !self.fields.iter().any(|f| &f.name == name) {
                let known: Vec<&str> = self.fields.iter().map(|f| f.name.as_str()).collect();
                errors.push(InputError {
                    path: format!("/{}", pointer_escape(name)),
                    message: if known.is_empty() {
                        "is not a field of this form (it has none)".into()
                    } else {
                        format!(
                            "is not a field of this form (its fields: {})",
                            known.join(", ")
                        )
                    },
                });
            }
        }
        if errors.is_empty() {
            Ok(())
        } else {
            Err(errors)
        }
    }

    pub fn field(&self, name: &str) -> Option<&Field> {
        self.fields.iter().find(|f| f.name == name)
    }
}

/// RFC 6901: `~` as `~0`, `/` as `~1`.
fn pointer_escape(name: &str) -> String {
    name.replace('~', "~0").replace('/', "~1")
}

impl Field {
    fn parse(name: &str, schema: &Value) -> Result<Field, SchemaError> {
        let at = |key: &'static str| -> Vec<&str> { vec!["properties", name, key] };
        let Some(map) = schema.as_object() else {
            return Err(err(
                &["properties", name],
                format!(
                    "field {name:?} must be a mapping (its schema), found {}",
                    kind(schema)
                ),
            ));
        };
        for key in map.keys() {
            if !FIELD_KEYWORDS.contains(&key.as_str()) {
                return Err(err(
                    &["properties", name, key],
                    format!(
                        "{key:?} is not supported in a form's field; a field takes {}",
                        supported(FIELD_KEYWORDS)
                    ),
                ));
            }
        }
        let type_name = match map.get("type") {
            Some(Value::String(t)) => t.as_str(),
            Some(other) => {
                return Err(err(
                    &at("type"),
                    format!(
                        "must be one of string, number, integer, boolean, found {}",
                        kind(other)
                    ),
                ));
            }
            None => {
                return Err(err(
                    &["properties", name],
                    format!("field {name:?} needs a type: string, number, integer or boolean"),
                ));
            }
        };
        let only_for = |keys: &[&'static str], types: &str| -> Result<(), SchemaError> {
            for key in keys {
                if map.contains_key(*key) {
                    return Err(err(
                        &at(key),
                        format!(
                            "{key} applies to {types} fields, and field {name:?} is {type_name}"
                        ),
                    ));
                }
            }
            Ok(())
        };
        const TEXT_ONLY: [&str; 3] = ["enum", "minLength", "maxLength"];
        const NUMBER_ONLY: [&str; 4] =
            ["minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"];
        let kind_of = match type_name {
            "string" => {
                only_for(&NUMBER_ONLY, "number and integer")?;
                let min_length = map
                    .get("minLength")
                    .map(|v| count(v, &at("minLength")))
                    .transpose()?;
                let max_length = map
                    .get("maxLength")
                    .map(|v| count(v, &at("maxLength")))
                    .transpose()?;
                if let (Some(min), Some(max)) = (min_length, max_length)
                    && min > max
                {
                    return Err(err(
                        &at("minLength"),
                        format!("minLength {min} is above maxLength {max}: no text would do"),
                    ));
                }
                let choices = match map.get("enum") {
                    None => None,
                    Some(Value::Array(items)) => {
                        if items.is_empty() {
                            return Err(err(&at("enum"), "is empty: no value would do"));
                        }
                        let mut choices: Vec<String> = Vec::with_capacity(items.len());
                        for item in items {
                            let choice = text(item, &at("enum")).map_err(|_| {
                                err(
                                    &at("enum"),
                                    format!(
                                        "may list strings only (a select of text choices), found {}",
                                        kind(item)
                                    ),
                                )
                            })?;
                            if choices.contains(&choice) {
                                return Err(err(&at("enum"), format!("lists {choice:?} twice")));
                            }
                            choices.push(choice);
                        }
                        Some(choices)
                    }
                    Some(other) => {
                        return Err(err(
                            &at("enum"),
                            format!("must be a list of strings, found {}", kind(other)),
                        ));
                    }
                };
                FieldKind::Text {
                    min_length,
                    max_length,
                    choices,
                }
            }
            "number" | "integer" => {
                only_for(&TEXT_ONLY, "string")?;
                let bound =
                    |key: &'static str| map.get(key).map(|v| number(v, &at(key))).transpose();
                let kind = FieldKind::Number {
                    integer: type_name == "integer",
                    minimum: bound("minimum")?,
                    maximum: bound("maximum")?,
                    exclusive_minimum: bound("exclusiveMinimum")?,
                    exclusive_maximum: bound("exclusiveMaximum")?,
                };
                if let FieldKind::Number {
                    minimum,
                    maximum,
                    exclusive_minimum,
                    exclusive_maximum,
                    ..
                } = &kind
                {
                    let low = [*minimum, *exclusive_minimum]
                        .into_iter()
                        .flatten()
                        .reduce(f64::max);
                    let high = [*maximum, *exclusive_maximum]
                        .into_iter()
                        .flatten()
                        .reduce(f64::min);
                    let exclusive = exclusive_minimum.is_some() || exclusive_maximum.is_some();
                    if let (Some(low), Some(high)) = (low, high)
                        && (low > high || (low == high && exclusive))
                    {
                        return Err(err(
                            &["properties", name],
                            format!("field {name:?}: its bounds leave no number that would do"),
                        ));
                    }
                }
                kind
            }
            "boolean" => {
                only_for(&TEXT_ONLY, "string")?;
                only_for(&NUMBER_ONLY, "number and integer")?;
                FieldKind::Boolean
            }
            other => {
                return Err(err(
                    &at("type"),
                    format!(
                        "type {other:?} is not supported in a form's field: use string, number, integer or boolean"
                    ),
                ));
            }
        };
        let mut field = Field {
            name: name.to_string(),
            title: map
                .get("title")
                .map(|t| text(t, &at("title")))
                .transpose()?,
            description: map
                .get("description")
                .map(|t| text(t, &at("description")))
                .transpose()?,
            required: false,
            default: None,
            kind: kind_of,
        };
        if let Some(default) = map.get("default") {
            if let Err(why) = field.check(default) {
                return Err(err(
                    &at("default"),
                    format!("default {default} does not fit field {name:?}: it {why}"),
                ));
            }
            field.default = Some(default.clone());
        }
        Ok(field)
    }

    /// The type a JSON Schema validator would name for this field.
    pub fn type_name(&self) -> &'static str {
        match &self.kind {
            FieldKind::Text { .. } => "string",
            FieldKind::Number { integer: true, .. } => "integer",
            FieldKind::Number { .. } => "number",
            FieldKind::Boolean => "boolean",
        }
    }

    /// Check one value given for this field: why it does not fit.
    pub fn check(&self, value: &Value) -> Result<(), String> {
        match &self.kind {
            FieldKind::Boolean => match value {
                Value::Bool(_) => Ok(()),
                other => Err(format!("must be true or false, found {}", kind(other))),
            },
            FieldKind::Text {
                min_length,
                max_length,
                choices,
            } => {
                let Value::String(text) = value else {
                    return Err(format!("must be text, found {}", kind(value)));
                };
                if let Some(choices) = choices
                    && !choices.contains(text)
                {
                    let listed: Vec<String> = choices.iter().map(|c| format!("{c:?}")).collect();
                    return Err(format!("must be one of {}", listed.join(", ")));
                }
                // JSON Schema counts characters (code points), not bytes.
                let length = text.chars().count() as u64;
                if let Some(min) = min_length
                    && length < *min
                {
                    return Err(format!("must be at least {min} character(s) long"));
                }
                if let Some(max) = max_length
                    && length > *max
                {
                    return Err(format!("must be at most {max} character(s) long"));
                }
                Ok(())
            }
            FieldKind::Number {
                integer,
                minimum,
                maximum,
                exclusive_minimum,
                exclusive_maximum,
            } => {
                let Value::Number(n) = value else {
                    return Err(format!(
                        "must be {}, found {}",
                        if *integer {
                            "a whole number"
                        } else {
                            "a number"
                        },
                        kind(value)
                    ));
                };
                let Some(x) = n.as_f64() else {
                    return Err("must be a number".into());
                };
                if *integer && !(n.is_i64() || n.is_u64() || x.fract() == 0.0) {
                    return Err(format!("must be a whole number, found {n}"));
                }
                if let Some(min) = minimum
                    && x < *min
                {
                    return Err(format!("must be at least {min}"));
                }
                if let Some(max) = maximum
                    && x > *max
                {
                    return Err(format!("must be at most {max}"));
                }
                if let Some(min) = exclusive_minimum
                    && x <= *min
                {
                    return Err(format!("must be more than {min}"));
                }
                if let Some(max) = exclusive_maximum
                    && x >= *max
                {
                    return Err(format!("must be less than {max}"));
                }
                Ok(())
            }
        }
    }
}

#[cfg(test)]
mod tests;
