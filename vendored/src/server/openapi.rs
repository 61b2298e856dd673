//! The OpenAPI 3.1 document of the HTTP API, built from the server's own
//! types: served at `GET /openapi.json` and written into every export
//! (`openapi.json`).
//!
//! Each request and response type states its schema where it is defined
//! (`schema.rs`); `routes/openapi.rs` pairs them with the routes; the
//! error codes come from `ApiError` (`errors.rs`); the spec adds its
//! webhook path and, per gate, the payload's shape (`gates.rs`).
//!
//! Why not `schemars` or `utoipa`: either puts a derive crate and its
//! proc-macro chain into every exported server's build, where build time
//! is counted (issue 15). The subset of JSON Schema used here is small
//! enough to write, and `check.rs` holds live answers to it in tests.
//! Only tests need that checker, so it is compiled for them alone (this
//! crate's unit tests, or the `openapi-check` feature), never in an export.

#[cfg(any(test, feature = "openapi-check"))]
mod check;
mod errors;
mod gates;
mod migrate;
mod plan;
pub(crate) use crate::service::schema;
#[cfg(test)]
mod tests;

use serde_json::{Map, Value, json};

#[cfg(any(test, feature = "openapi-check"))]
pub use check::schema_errors;
pub use errors::statuses_by_code;
pub use schema::Components;
use schema::Schema;

use crate::domain::spec::Spec;

/// The OpenAPI version written.
pub const OPENAPI_VERSION: &str = "3.1.0";

/// The document for `spec`: every route, its types, and the spec's own
/// webhook and gates. Deterministic (an export writes it byte for byte).
pub fn document(spec: &Spec) -> Value {
    let mut components = Components::default();
    let mut paths = Map::new();
    let mut operations = super::routes::operations();
    if let Some(hook) = &spec.trigger.webhook {
        operations.push(webhook(&hook.path, hook.secret.is_some()));
    }
    for operation in operations {
        let (path, method, object) = operation.into_json(&mut components);
        let entry = paths
            .entry(path)
            .or_insert_with(|| Value::Object(Map::new()));
        entry[method] = object;
    }
    per_gate_payloads(spec, &mut components);

    let mut description = String::new();
    if let Some(text) = &spec.description {
        description.push_str(text);
        description.push_str("\n\n");
    }
    description.push_str(
        "Served by tollgate: runs of this agent pause at approval gates until a person decides. \
         With `TOLLGATE_API_TOKENS` set every API route takes `Authorization: Bearer <token>`; \
         without it the server listens on loopback only and takes no token.",
    );
    json!({
        "openapi": OPENAPI_VERSION,
        "info": {
            "title": spec.agent,
            "description": description,
            "version": spec.hash.as_str(),
        },
        "tags": [
            { "name": "runs", "description": "Start, watch and steer runs." },
            { "name": "approvals", "description": "The approvals inbox: pending gates and their decisions." },
            { "name": "gates", "description": "Approvals asked for by any agent (`/gates`; also as MCP tools at `/mcp`): request, wait for the decision, cancel." },
            { "name": "notifications", "description": "The outbox: notices of approvals sent by webhook, email and Slack, and their retries." },
            { "name": "specs", "description": "Spec versions: what deploying a spec does to the approvals and runs waiting on other versions." },
            { "name": "operations", "description": "Health, readiness, metrics and this document." },
            { "name": "slack", "description": "Slack interactivity (signed by Slack)." },
            { "name": "webhook", "description": "The spec's webhook trigger." },
        ],
        "security": [{ "bearer": [] }],
        "paths": paths,
        "components": {
            "schemas": components.into_map(),
            "securitySchemes": {
                "bearer": {
                    "type": "http",
                    "scheme": "bearer",
                    "description": "One of the tokens in TOLLGATE_API_TOKENS; its name is recorded as `decided_by` and `cancelled_by`. A token configured as `name/requester:token` may call the `gates` routes (and `/mcp`) only: elsewhere 403 `insufficient_scope`."
                }
            }
        }
    })
}

/// How a route authenticates its caller.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Auth {
    /// `Authorization: Bearer <token>` (when tokens are configured).
    Bearer,
    /// Anyone.
    Public,
    /// Slack's request signature.
    Slack,
    /// The webhook's signature, when the spec sets `secret`.
    Webhook { signed: bool },
}

type SchemaFn = fn(&mut Components) -> Value;

enum Content {
    Json(SchemaFn),
    EventStream,
    /// Text of this media type (`/metrics`: Prometheus exposition).
    Text(&'static str),
    Empty,
}

struct Reply {
    status: u16,
    description: &'static str,
    content: Content,
}

enum Body {
    Json(SchemaFn),
    /// Any JSON value (a webhook's body is the run's `input`).
    AnyJson,
    /// A spec's YAML text, under each media type the route takes.
    Text {
        media_types: &'static [&'static str],
        description: &'static str,
    },
    /// `application/x-www-form-urlencoded` with one field.
    Form {
        field: &'static str,
        description: &'static str,
    },
}

/// One route as the document describes it; built by `routes/openapi.rs`.
pub struct Operation {
    method: &'static str,
    path: String,
    id: &'static str,
    summary: &'static str,
    description: Option<&'static str>,
    tag: &'static str,
    auth: Auth,
    query: Option<SchemaFn>,
    headers: Vec<(&'static str, bool, &'static str)>,
    body: Option<Body>,
    replies: Vec<Reply>,
}

impl Operation {
    pub fn new(
        method: &'static str,
        path: &'static str,
        id: &'static str,
        summary: &'static str,
    ) -> Operation {
        Operation {
            method,
            path: path.to_string(),
            id,
            summary,
            description: None,
            tag: "runs",
            auth: Auth::Bearer,
            query: None,
            headers: Vec::new(),
            body: None,
            replies: Vec::new(),
        }
    }

    pub fn method(&self) -> &str {
        self.method
    }

    pub fn path(&self) -> &str {
        &self.path
    }

    pub fn describe(mut self, text: &'static str) -> Operation {
        self.description = Some(text);
        self
    }

    pub fn tag(mut self, tag: &'static str) -> Operation {
        self.tag = tag;
        self
    }

    pub fn auth(mut self, auth: Auth) -> Operation {
        self.auth = auth;
        self
    }

    /// The query string, read into `T`.
    pub fn query<T: Schema>(mut self) -> Operation {
        self.query = Some(T::schema);
        self
    }

    pub fn header(
        mut self,
        name: &'static str,
        required: bool,
        description: &'static str,
    ) -> Operation {
        self.headers.push((name, required, description));
        self
    }

    /// A JSON body read into `T`.
    pub fn body<T: Schema>(mut self) -> Operation {
        self.body = Some(Body::Json(T::schema));
        self
    }

    /// A text body (a spec's YAML) under any of `media_types`.
    pub fn text_body(
        mut self,
        media_types: &'static [&'static str],
        description: &'static str,
    ) -> Operation {
        self.body = Some(Body::Text {
            media_types,
            description,
        });
        self
    }

    pub fn form(mut self, field: &'static str, description: &'static str) -> Operation {
        self.body = Some(Body::Form { field, description });
        self
    }

    /// A JSON answer of type `T` with `status`.
    pub fn json<T: Schema>(mut self, status: u16, description: &'static str) -> Operation {
        self.replies.push(Reply {
            status,
            description,
            content: Content::Json(T::schema),
        });
        self
    }

    pub fn event_stream(mut self, status: u16, description: &'static str) -> Operation {
        self.replies.push(Reply {
            status,
            description,
            content: Content::EventStream,
        });
        self
    }

    /// A text answer of `media_type`, e.g. `text/plain; version=0.0.4`.
    pub fn text(
        mut self,
        status: u16,
        media_type: &'static str,
        description: &'static str,
    ) -> Operation {
        self.replies.push(Reply {
            status,
            description,
            content: Content::Text(media_type),
        });
        self
    }

    pub fn empty(mut self, status: u16, description: &'static str) -> Operation {
        self.replies.push(Reply {
            status,
            description,
            content: Content::Empty,
        });
        self
    }

    /// `(path, method, operation object)`.
    fn into_json(self, components: &mut Components) -> (String, &'static str, Value) {
        // The webhook's path is the spec's, matched as written: no
        // `{name}` in it is a parameter.
        let mut parameters: Vec<Value> = match self.auth {
            Auth::Webhook { .. } => Vec::new(),
            _ => path_parameters(&self.path),
        };
        if let Some(query) = self.query {
            parameters.extend(query_parameters(query));
        }
        for (name, required, description) in &self.headers {
            parameters.push(json!({
                "name": name,
                "in": "header",
                "required": required,
                "description": description,
                "schema": { "type": "string" }
            }));
        }
        if let Auth::Slack = self.auth {
            for name in ["X-Slack-Request-Timestamp", "X-Slack-Signature"] {
                parameters.push(json!({
                    "name": name, "in": "header", "required": true,
                    "description": "Slack's request signature (v0), checked against the signing secret.",
                    "schema": { "type": "string" }
                }));
            }
        }
        if let Auth::Webhook { signed: true } = self.auth {
            parameters.push(json!({
                "name": "X-Tollgate-Signature", "in": "header", "required": true,
                "description": "`t=<unix time>,v1=<hex HMAC-SHA256 of \"<t>.<body>\">` (replays refused), or `sha256=<hex HMAC-SHA256 of the body>`, keyed with the spec's webhook secret.",
                "schema": { "type": "string" }
            }));
        }

        let error = errors::error_schema(components);
        let mut responses = Map::new();
        for reply in self.replies {
            let mut response = json!({ "description": reply.description });
            match reply.content {
                Content::Json(schema) => {
                    response["content"] =
                        json!({ "application/json": { "schema": schema(components) } });
                }
                Content::EventStream => {
                    response["content"] =
                        json!({ "text/event-stream": { "schema": { "type": "string" } } });
                }
                Content::Text(media_type) => {
                    response["content"] = json!({ media_type: { "schema": { "type": "string" } } });
                }
                Content::Empty => {}
            }
            responses.insert(reply.status.to_string(), response);
        }
        if self.auth == Auth::Bearer {
            responses.insert(
                "401".into(),
                json!({
                    "description": "No token, or one that matches no configured token (`unauthorized`).",
                    "content": { "application/json": { "schema": error.clone() } }
                }),
            );
        }
        responses.insert(
            "default".into(),
            json!({
                "description": "A failure: the status and `error.code` say which (see the Error schema).",
                "content": { "application/json": { "schema": error } }
            }),
        );

        // Keys in reading order: what it is, what it takes, what it answers.
        let mut object = Map::new();
        object.insert("operationId".into(), json!(self.id));
        object.insert("summary".into(), json!(self.summary));
        if let Some(text) = self.description {
            object.insert("description".into(), json!(text));
        }
        object.insert("tags".into(), json!([self.tag]));
        if self.auth != Auth::Bearer {
            object.insert("security".into(), json!([]));
        }
        if !parameters.is_empty() {
            object.insert("parameters".into(), Value::Array(parameters));
        }
        if let Some(body) = self.body {
            let content = match body {
                Body::Json(schema) => {
                    json!({ "application/json": { "schema": schema(components) } })
                }
                Body::AnyJson => json!({ "application/json": { "schema": {} } }),
                Body::Text {
                    media_types,
                    description,
                } => {
                    let schema = json!({ "type": "string", "description": description });
                    let by_type: Map<String, Value> = media_types
                        .iter()
                        .map(|t| (t.to_string(), json!({ "schema": schema.clone() })))
                        .collect();
                    Value::Object(by_type)
                }
                Body::Form { field, description } => json!({
                    "application/x-www-form-urlencoded": { "schema": {
                        "type": "object",
                        "properties": { field: { "type": "string", "description": description } },
                        "required": [field]
                    } }
                }),
            };
            object.insert(
                "requestBody".into(),
                json!({ "required": true, "content": content }),
            );
        }
        object.insert("responses".into(), Value::Object(responses));
        let object = Value::Object(object);
        (self.path, self.method, object)
    }
}

/// The spec's webhook: POST its path to start a run with the JSON body as
/// `input`.
fn webhook(path: &str, signed: bool) -> Operation {
    let mut operation = Operation::new("post", "/", "webhook", "Start a run from the webhook")
        .describe("The spec's `trigger.webhook`: the JSON body is the run's `input`.")
        .tag("webhook")
        .auth(Auth::Webhook { signed })
        .json::<crate::service::views::RunStarted>(202, "The run is stored and starting.");
    // OpenAPI reads `{...}` in a path as a parameter and has no escape for
    // it, so literal braces are written percent-encoded.
    operation.path = path.replace('{', "%7B").replace('}', "%7D");
    operation.body = Some(Body::AnyJson);
    operation
}

/// `{name}` segments, each a required string.
fn path_parameters(path: &str) -> Vec<Value> {
    path.split('/')
        .filter_map(|segment| segment.strip_prefix('{')?.strip_suffix('}'))
        .map(|name| {
            let description = match name {
                "id" => "A run's id.",
                "key" => "An approval key.",
                "id_or_key" => "A run's id (its latest gate) or an approval key.",
                _ => "",
            };
            json!({
                "name": name,
                "in": "path",
                "required": true,
                "description": description,
                "schema": { "type": "string" }
            })
        })
        .collect()
}

/// A query type's fields as query parameters.
fn query_parameters(query: SchemaFn) -> Vec<Value> {
    // The query type's component is not part of the document: its fields
    // are the parameters.
    let mut scratch = Components::default();
    let reference = query(&mut scratch);
    let object = reference
        .get("$ref")
        .and_then(Value::as_str)
        .and_then(|r| r.rsplit('/').next())
        .and_then(|name| scratch.get(name))
        .cloned()
        .unwrap_or(reference);
    let required: Vec<&str> = object
        .get("required")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    let Some(properties) = object.get("properties").and_then(Value::as_object) else {
        return Vec::new();
    };
    properties
        .iter()
        .map(|(name, schema)| {
            let mut schema = schema.clone();
            let description = schema.as_object_mut().and_then(|s| s.remove("description"));
            // A query string has no null: a field left out is `None`.
            if let Some(Value::Array(kinds)) = schema.get("type") {
                let kinds: Vec<Value> = kinds.iter().filter(|k| *k != "null").cloned().collect();
                if let [kind] = kinds.as_slice() {
                    schema["type"] = kind.clone();
                }
            }
            let mut parameter = json!({
                "name": name,
                "in": "query",
                "required": required.contains(&name.as_str()),
            });
            if let Some(description) = description {
                parameter["description"] = description;
            }
            parameter["schema"] = schema;
            parameter
        })
        .collect()
}

/// With gates, `ApprovalView` is one of: a record of a gate of this spec
/// (its `payload` of that gate's shape), or a record paused under another
/// version of the spec (`spec_hash` differs), whose shape this spec does
/// not know.
fn per_gate_payloads(spec: &Spec, components: &mut Components) {
    let gates = gates::gates(spec);
    let Some(generic) = components.get("ApprovalView").cloned() else {
        return;
    };
    if gates.is_empty() {
        return;
    }
    let hash = spec.hash.as_str();
    let mut variants = Vec::new();
    for gate in &gates {
        let name = format!("GatePayload.{}", gate.step.id);
        let shape = schema::describe(
            gate.payload.clone(),
            &format!("The payload at step `{}`: {}.", gate.step.id, gate.kind),
        );
        components.insert(&name, shape);
        variants.push(json!({
            "description": format!("A record of the gate at step `{}`.", gate.step.id),
            "properties": {
                "spec_hash": { "const": hash },
                "spec_current": { "const": true },
                "step_id": { "const": gate.step.id },
                "payload": schema::reference(&name)
            }
        }));
    }
    variants.push(json!({
        "description": "A record paused under another version of the spec: its payload's shape is that version's.",
        "properties": {
            "spec_hash": { "not": { "const": hash } },
            "spec_current": { "const": false }
        }
    }));
    components.insert(
        "ApprovalView",
        json!({ "allOf": [generic, { "oneOf": variants }] }),
    );
}
