//! JSON Schemas of the API's types, stated by the types themselves.
//!
//! A request or response type is written inside [`response_type!`] or
//! [`request_type!`]: the macro emits the struct exactly as written and
//! derives its schema from the same field list (names, types, doc
//! comments, `serde` attributes), so a field cannot change without its
//! schema changing too. Doc comments there are published as the fields'
//! descriptions: write them for API clients, and notes for this code's
//! readers as `//` comments, which the document leaves out. A small trait and a macro rather than `schemars`:
//! schemars and its derive would reach every exported server's build for
//! one document (see `server/openapi.rs`).
//!
//! What serde does that the macro reads: `skip_serializing_if` makes a
//! response field optional; `default` or an `Option` type makes a request
//! field optional; `deny_unknown_fields` (requests) closes the object;
//! `flatten` puts the fields of an inline object schema (a stored record's,
//! see `impl Schema for ApprovalRecord`) in the struct's own. A response
//! object is always closed: a server sends the fields named here and no
//! others. Any other serde attribute that changes the wire shape (`rename`)
//! is not read: the round-trip test in `openapi/tests.rs` fails on it, and
//! then this file learns it.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde_json::{Map, Value, json};

use crate::domain::notices::{NoticeChannel, NoticeEvent, NoticeStatus};
use crate::domain::pending_approval::{ApprovalRecord, ApprovalStatus, Phase};
use crate::domain::run_state::RunStatus;

/// The named schemas of a document (`components.schemas`), filled as
/// types refer to one another.
#[derive(Debug, Default)]
pub struct Components {
    schemas: BTreeMap<String, Value>,
}

impl Components {
    /// A `$ref` to the component `name`, built by `build` the first time.
    pub fn named(&mut self, name: &str, build: impl FnOnce(&mut Components) -> Value) -> Value {
        if !self.schemas.contains_key(name) {
            // Held before the build, so a type that refers to itself ends.
            self.schemas.insert(name.to_string(), Value::Null);
            let schema = build(self);
            self.schemas.insert(name.to_string(), schema);
        }
        reference(name)
    }

    /// Put (or replace) a component as given.
    pub fn insert(&mut self, name: &str, schema: Value) {
        self.schemas.insert(name.to_string(), schema);
    }

    pub fn get(&self, name: &str) -> Option<&Value> {
        self.schemas.get(name)
    }

    pub fn into_map(self) -> Map<String, Value> {
        self.schemas.into_iter().collect()
    }
}

/// `{"$ref": "#/components/schemas/NAME"}`.
pub fn reference(name: &str) -> Value {
    json!({ "$ref": format!("#/components/schemas/{name}") })
}

/// A type with a JSON Schema (OpenAPI 3.1 is JSON Schema 2020-12).
pub trait Schema {
    /// True for `Option<T>`: a request may leave the field out.
    const OPTIONAL: bool = false;

    /// The type's schema; a named type registers itself in `components`
    /// and answers with a `$ref`.
    fn schema(components: &mut Components) -> Value;
}

impl Schema for String {
    fn schema(_: &mut Components) -> Value {
        json!({ "type": "string" })
    }
}

impl Schema for &'static str {
    fn schema(_: &mut Components) -> Value {
        json!({ "type": "string" })
    }
}

impl Schema for bool {
    fn schema(_: &mut Components) -> Value {
        json!({ "type": "boolean" })
    }
}

impl Schema for usize {
    fn schema(_: &mut Components) -> Value {
        json!({ "type": "integer", "minimum": 0 })
    }
}

impl Schema for u64 {
    fn schema(_: &mut Components) -> Value {
        json!({ "type": "integer", "minimum": 0 })
    }
}

/// Any JSON value.
impl Schema for Value {
    fn schema(_: &mut Components) -> Value {
        json!({})
    }
}

/// Any JSON value, kept as text (see [`crate::support::json_doc`]).
impl Schema for crate::support::json_doc::JsonDoc {
    fn schema(_: &mut Components) -> Value {
        json!({})
    }
}

/// Any JSON object.
impl Schema for Map<String, Value> {
    fn schema(_: &mut Components) -> Value {
        json!({ "type": "object" })
    }
}

impl Schema for BTreeMap<String, String> {
    fn schema(_: &mut Components) -> Value {
        json!({ "type": "object", "additionalProperties": { "type": "string" } })
    }
}

/// chrono's serde form: RFC 3339 in UTC.
impl Schema for DateTime<Utc> {
    fn schema(_: &mut Components) -> Value {
        json!({ "type": "string", "format": "date-time" })
    }
}

impl<T: Schema> Schema for Vec<T> {
    fn schema(components: &mut Components) -> Value {
        json!({ "type": "array", "items": T::schema(components) })
    }
}

/// The value or `null` (serde writes `None` as `null` unless the field
/// is skipped, and reads `null` as `None`).
impl<T: Schema> Schema for Option<T> {
    const OPTIONAL: bool = true;

    fn schema(components: &mut Components) -> Value {
        nullable(T::schema(components))
    }
}

/// `schema` or `null`.
pub fn nullable(schema: Value) -> Value {
    if schema.as_object().is_some_and(|s| s.is_empty()) {
        // Any value already includes null.
        return schema;
    }
    match schema.get("type").and_then(Value::as_str) {
        Some(kind) if schema.get("enum").is_none() => {
            let mut schema = schema.clone();
            schema["type"] = json!([kind, "null"]);
            schema
        }
        _ => json!({ "anyOf": [schema, { "type": "null" }] }),
    }
}

/// The names of a `named_enum!`, in its own table: the names serde uses
/// (`names.rs` tests that they agree).
fn named_enum(
    components: &mut Components,
    name: &str,
    description: &str,
    names: Vec<&'static str>,
) -> Value {
    components.named(
        name,
        |_| json!({ "type": "string", "enum": names, "description": description }),
    )
}

impl Schema for RunStatus {
    fn schema(components: &mut Components) -> Value {
        named_enum(
            components,
            "RunStatus",
            "A run's status.",
            RunStatus::ALL.iter().map(|s| s.as_str()).collect(),
        )
    }
}

impl Schema for ApprovalStatus {
    fn schema(components: &mut Components) -> Value {
        named_enum(
            components,
            "ApprovalStatus",
            "An approval record's status.",
            ApprovalStatus::ALL.iter().map(|s| s.as_str()).collect(),
        )
    }
}

impl Schema for NoticeStatus {
    fn schema(components: &mut Components) -> Value {
        named_enum(
            components,
            "NoticeStatus",
            "Where a notice is in its delivery: `pending` (not sent yet), `failed` (tried, retried at `next_at`), `sent`, `dead` (given up on: held for an operator's retry).",
            NoticeStatus::ALL.iter().map(|s| s.as_str()).collect(),
        )
    }
}

impl Schema for NoticeChannel {
    fn schema(components: &mut Components) -> Value {
        named_enum(
            components,
            "NoticeChannel",
            "How a notice is sent.",
            NoticeChannel::ALL.iter().map(|s| s.as_str()).collect(),
        )
    }
}

impl Schema for NoticeEvent {
    fn schema(components: &mut Components) -> Value {
        named_enum(
            components,
            "NoticeEvent",
            "What happened to the approval a notice tells of.",
            NoticeEvent::ALL.iter().map(|s| s.as_str()).collect(),
        )
    }
}

impl Schema for Phase {
    fn schema(components: &mut Components) -> Value {
        named_enum(
            components,
            "Phase",
            "When the gate paused: `before` the step's side effect, or `after` it (a model's output under review).",
            Phase::ALL.iter().map(|s| s.as_str()).collect(),
        )
    }
}

/// The stored approval record, field by field as serde writes it: an
/// inline object (no component of its own) for the views that flatten it
/// (`api::ApprovalView`). The round-trip test in `openapi/tests.rs` fails
/// if the record gains a field this leaves out (response objects are
/// closed).
impl Schema for ApprovalRecord {
    fn schema(components: &mut Components) -> Value {
        fn field<T: Schema>(name: &'static str, components: &mut Components) -> Field {
            Field {
                name,
                attributes: &[],
                optional_type: T::OPTIONAL,
                schema: T::schema(components),
            }
        }
        let c = components;
        object(
            Direction::Response,
            &[],
            vec![
                field::<String>("key", c),
                field::<String>("run_id", c),
                field::<String>("agent_id", c),
                Field {
                    name: "spec_hash",
                    attributes: &[
                        r#"doc = " The full hash of the spec version the run paused under (or was moved to); `null` for a gate request, which belongs to no spec version (see `origin`).""#,
                    ],
                    optional_type: false,
                    schema: json!({ "type": ["string", "null"] }),
                },
                field::<usize>("step_index", c),
                field::<String>("step_id", c),
                field::<Phase>("phase", c),
                field::<Option<String>>("message", c),
                field::<Value>("payload", c),
                field::<Map<String, Value>>("outputs", c),
                field::<Value>("input", c),
                field::<Value>("trigger", c),
                field::<ApprovalStatus>("status", c),
                field::<Option<Value>>("decision_data", c),
                field::<Option<String>>("decided_by", c),
                field::<Option<DateTime<Utc>>>("decided_at", c),
                field::<DateTime<Utc>>("created_at", c),
                field::<DateTime<Utc>>("expires_at", c),
                Field {
                    name: "roster",
                    attributes: &[
                        r#"doc = " A gate that counts votes (DESIGN §13): its rules with their members as resolved when the run paused, `reject`, `allow_self_approval`, `voter_counts_once`, `require_reason`, the `requesters` who may not vote, and `revised_payload` once a vote edited the payload. Absent for a plain gate.""#,
                        r#"serde(default, skip_serializing_if = "Option::is_none")"#,
                    ],
                    optional_type: true,
                    schema: json!({ "type": "object" }),
                },
                Field {
                    name: "origin",
                    attributes: &[
                        r#"doc = " What asked for this approval: a workflow run paused at a gate (`pause`: the spec version and step it paused at), or a gate request made through `POST /gates` or MCP `request_approval` (`request`: the caller that asked, `null` for a program's own request, and the digest of what was asked, by which an idempotent retry is told from another request).""#,
                    ],
                    optional_type: false,
                    schema: origin_schema(),
                },
            ],
        )
    }
}

/// The schema of an approval's `origin` (`ApprovalOrigin` as serialized).
fn origin_schema() -> Value {
    json!({
        "oneOf": [
            {
                "type": "object",
                "properties": {
                    "kind": { "const": "pause" },
                    "spec_hash": { "type": "string" },
                    "step_id": { "type": "string" }
                },
                "required": ["kind", "spec_hash", "step_id"],
                "additionalProperties": false
            },
            {
                "type": "object",
                "properties": {
                    "kind": { "const": "request" },
                    "requested_by": { "type": ["string", "null"] },
                    "fingerprint": { "type": ["string", "null"] }
                },
                "required": ["kind", "requested_by", "fingerprint"],
                "additionalProperties": false
            }
        ]
    })
}

/// Which way a type crosses the wire; it decides which fields are required.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// Serialized by the server: every field is sent unless it has
    /// `skip_serializing_if`.
    Response,
    /// Read by the server: a field may be left out when it is an
    /// `Option` or has `#[serde(default)]`.
    Request,
}

/// One field as the macros see it.
pub struct Field {
    pub name: &'static str,
    /// Each attribute as written (`stringify!`): docs and serde's.
    pub attributes: &'static [&'static str],
    pub optional_type: bool,
    pub schema: Value,
}

/// The object schema of a struct from its fields and attributes.
pub fn object(direction: Direction, attributes: &[&str], fields: Vec<Field>) -> Value {
    let mut properties = Map::new();
    let mut required = Vec::new();
    for field in fields {
        let serde = serde_args(field.attributes);
        if serde.contains(&"flatten") {
            // The field's own fields sit in this object: the properties and
            // required names of its inline object schema join this one's,
            // in order. (A `$ref` has none to join: the round-trip test
            // fails on such a field.)
            if let Some(inner) = field.schema.get("properties").and_then(Value::as_object) {
                properties.extend(inner.iter().map(|(k, v)| (k.clone(), v.clone())));
            }
            if let Some(inner) = field.schema.get("required").and_then(Value::as_array) {
                required.extend(inner.iter().cloned());
            }
            continue;
        }
        let may_be_absent = match direction {
            Direction::Response => serde.iter().any(|a| a.starts_with("skip_serializing_if")),
            Direction::Request => {
                field.optional_type
                    || serde
                        .iter()
                        .any(|a| *a == "default" || a.starts_with("default "))
            }
        };
        if !may_be_absent {
            required.push(Value::String(field.name.to_string()));
        }
        let mut schema = field.schema;
        if let Some(text) = doc_text(field.attributes) {
            schema = describe(schema, &text);
        }
        properties.insert(field.name.to_string(), schema);
    }
    let closed = match direction {
        Direction::Response => true,
        Direction::Request => serde_args(attributes).contains(&"deny_unknown_fields"),
    };
    let mut schema = json!({ "type": "object", "properties": properties });
    if !required.is_empty() {
        schema["required"] = Value::Array(required);
    }
    if closed {
        schema["additionalProperties"] = Value::Bool(false);
    }
    if let Some(text) = doc_text(attributes) {
        schema = describe(schema, &text);
    }
    schema
}

/// `schema` with a description. A `$ref` is wrapped, since in 3.1 its
/// siblings are allowed but tools differ on reading them.
pub fn describe(schema: Value, text: &str) -> Value {
    match schema {
        Value::Object(mut map) if !map.contains_key("$ref") => {
            map.insert("description".into(), Value::String(text.to_string()));
            Value::Object(map)
        }
        other => json!({ "allOf": [other], "description": text }),
    }
}

/// The arguments of every `serde(...)` attribute, split on top-level commas.
fn serde_args<'a>(attributes: &[&'a str]) -> Vec<&'a str> {
    attributes
        .iter()
        .filter_map(|a| a.strip_prefix("serde"))
        .filter_map(|a| a.trim().strip_prefix('(')?.strip_suffix(')'))
        .flat_map(split_top_level)
        .map(str::trim)
        .collect()
}

fn split_top_level(args: &str) -> Vec<&str> {
    let (mut parts, mut depth, mut start, mut quoted) = (Vec::new(), 0usize, 0, false);
    for (i, c) in args.char_indices() {
        match c {
            '"' => quoted = !quoted,
            '(' if !quoted => depth += 1,
            ')' if !quoted => depth = depth.saturating_sub(1),
            ',' if !quoted && depth == 0 => {
                parts.push(&args[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&args[start..]);
    parts
}

/// The doc comment, its lines joined as Markdown paragraphs read them.
pub fn doc_text(attributes: &[&str]) -> Option<String> {
    let lines: Vec<String> = attributes
        .iter()
        .filter_map(|a| a.strip_prefix("doc"))
        .filter_map(|a| a.trim_start().strip_prefix('='))
        .filter_map(|a| string_literal(a.trim()))
        .collect();
    if lines.is_empty() {
        return None;
    }
    let mut text = String::new();
    for line in lines {
        let line = line.strip_prefix(' ').unwrap_or(&line);
        if line.trim().is_empty() {
            text.push_str("\n\n");
        } else {
            if !text.is_empty() && !text.ends_with('\n') {
                text.push(' ');
            }
            text.push_str(line.trim_end());
        }
    }
    Some(text.trim().to_string())
}

/// The text of a Rust string literal as `stringify!` writes a doc
/// attribute's: `r"..."`, `r#"..."#` or `"..."` with escapes.
fn string_literal(literal: &str) -> Option<String> {
    if let Some(raw) = literal.strip_prefix('r') {
        let hashes = raw.len() - raw.trim_start_matches('#').len();
        let fence = "#".repeat(hashes);
        let inner = raw
            .strip_prefix(&fence)?
            .strip_prefix('"')?
            .strip_suffix(&fence)?
            .strip_suffix('"')?;
        return Some(inner.to_string());
    }
    let inner = literal.strip_prefix('"')?.strip_suffix('"')?;
    let mut out = String::with_capacity(inner.len());
    let mut chars = inner.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('n') => out.push('\n'),
            Some('t') => out.push('\t'),
            Some(other) => out.push(other),
            None => {}
        }
    }
    Some(out)
}

/// Write a struct the server sends, with its schema (see the module doc).
macro_rules! response_type {
    ($($body:tt)*) => {
        $crate::service::schema::api_type!(Response $($body)*);
    };
}

/// Write a struct the server reads (a JSON body or a query string), with
/// its schema (see the module doc).
macro_rules! request_type {
    ($($body:tt)*) => {
        $crate::service::schema::api_type!(Request $($body)*);
    };
}

macro_rules! api_type {
    (
        $direction:ident
        $(#[$meta:meta])*
        $vis:vis struct $name:ident {
            $( $(#[$fmeta:meta])* $fvis:vis $field:ident : $fty:ty ),* $(,)?
        }
    ) => {
        $(#[$meta])*
        $vis struct $name {
            $( $(#[$fmeta])* $fvis $field : $fty ),*
        }

        impl $crate::service::schema::Schema for $name {
            fn schema(
                components: &mut $crate::service::schema::Components,
            ) -> ::serde_json::Value {
                use $crate::service::schema as s;
                components.named(stringify!($name), |components| {
                    // A struct without fields does not use it.
                    let _ = &components;
                    s::object(
                        s::Direction::$direction,
                        &[$(stringify!($meta)),*],
                        vec![$(s::Field {
                            name: stringify!($field),
                            attributes: &[$(stringify!($fmeta)),*],
                            optional_type: <$fty as s::Schema>::OPTIONAL,
                            schema: <$fty as s::Schema>::schema(components),
                        }),*],
                    )
                })
            }
        }
    };
}

pub(crate) use api_type;
pub(crate) use request_type;
pub(crate) use response_type;
