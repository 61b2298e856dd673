//! http.md: every route of the OpenAPI document a server serves, read from
//! the document itself (`GET /openapi.json` answers the same), so the
//! page lists what the server routes and nothing else.

use std::fmt::Write as _;

use serde_json::Value;
use tollgate_runtime::Spec;

use super::{header, one_line};

/// A spec with a gate and no webhook: its document has every fixed route
/// (a spec's own webhook path is the one route a spec adds).
const SPEC: &str = "version: 1
agent: reference
steps:
  - id: confirm
    approval: { message: \"Go?\" }
";

/// The OpenAPI document of a server that serves [`SPEC`].
pub fn document() -> Value {
    match Spec::parse(SPEC, "reference.yaml") {
        Ok(spec) => tollgate_runtime::server::openapi::document(&spec),
        // The spec above is fixed and valid; a runtime that stops reading
        // it shows here as a page saying so, and the stale-page test fails.
        Err(e) => serde_json::json!({ "paths": {}, "info": { "description": e.to_string() } }),
    }
}

const METHODS: [&str; 5] = ["get", "post", "put", "patch", "delete"];

pub fn page(document: &Value) -> String {
    let mut out = header(
        "HTTP API",
        "Every route `tollgate serve` and every exported server answer, from the OpenAPI document they serve at `GET /openapi.json` (which also holds the request and answer schemas). A spec's `trigger.webhook.path` adds one more route, `POST` at that path. Routes marked *no token* take no `Authorization: Bearer` header; every other one does when `TOLLGATE_API_TOKENS` is set. Errors are `{\"error\": {\"code\", \"message\"}}` (see errors.md).",
    );
    out.push_str(&routes(document));
    out
}

/// The routes of `document`: a table of every route, then a section
/// (`## METHOD PATH`) for each.
pub fn routes(document: &Value) -> String {
    let mut out = String::new();
    let Some(paths) = document["paths"].as_object() else {
        return out;
    };
    let mut routes: Vec<(&String, &str, &Value)> = Vec::new();
    for (path, item) in paths {
        for method in METHODS {
            if let Some(operation) = item.get(method) {
                routes.push((path, method, operation));
            }
        }
    }
    routes.sort_by(|a, b| (a.0, method_rank(a.1)).cmp(&(b.0, method_rank(b.1))));
    out.push_str("\n| method | path | summary |\n|---|---|---|\n");
    for (path, method, operation) in &routes {
        let _ = writeln!(
            out,
            "| {} | `{path}` | {} |",
            method.to_uppercase(),
            one_line(operation["summary"].as_str().unwrap_or(""))
        );
    }
    for (path, method, operation) in &routes {
        out.push('\n');
        out.push_str(&route(path, method, operation));
    }
    out
}

fn method_rank(method: &str) -> usize {
    METHODS
        .iter()
        .position(|m| *m == method)
        .unwrap_or(METHODS.len())
}

fn route(path: &str, method: &str, operation: &Value) -> String {
    let mut out = format!("## `{} {path}`\n\n", method.to_uppercase());
    let summary = operation["summary"].as_str().unwrap_or("");
    let _ = write!(out, "{}", one_line(summary));
    let open = operation["security"]
        .as_array()
        .is_some_and(|list| list.is_empty());
    out.push_str(if open { "\n\n*No token.*\n\n" } else { "\n\n" });
    if let Some(text) = operation["description"].as_str() {
        for paragraph in text.split("\n\n") {
            let _ = writeln!(out, "{}\n", one_line(paragraph));
        }
    }
    if let Some(parameters) = operation["parameters"].as_array() {
        out.push_str("Parameters:\n\n");
        for parameter in parameters {
            let required = if parameter["required"].as_bool() == Some(true) {
                ", required"
            } else {
                ""
            };
            let _ = writeln!(
                out,
                "- `{}` ({}{required}): {}",
                parameter["name"].as_str().unwrap_or(""),
                parameter["in"].as_str().unwrap_or(""),
                one_line(parameter["description"].as_str().unwrap_or(""))
            );
        }
        out.push('\n');
    }
    if let Some(content) = operation["requestBody"]["content"].as_object() {
        let bodies: Vec<String> = content
            .iter()
            .map(|(media_type, body)| match schema_name(&body["schema"]) {
                Some(name) => format!("`{media_type}` ({name})"),
                None => format!("`{media_type}`"),
            })
            .collect();
        let _ = writeln!(out, "Body: {}\n", bodies.join(", "));
    }
    if let Some(responses) = operation["responses"].as_object() {
        out.push_str("Answers:\n\n");
        for (status, response) in responses {
            let media: Vec<String> = response["content"]
                .as_object()
                .map(|content| {
                    content
                        .iter()
                        .map(|(media_type, body)| match schema_name(&body["schema"]) {
                            Some(name) => format!("`{media_type}` ({name})"),
                            None => format!("`{media_type}`"),
                        })
                        .collect()
                })
                .unwrap_or_default();
            let media = if media.is_empty() {
                String::new()
            } else {
                format!(" [{}]", media.join(", "))
            };
            let _ = writeln!(
                out,
                "- `{status}`: {}{media}",
                one_line(response["description"].as_str().unwrap_or(""))
            );
        }
        out.push('\n');
    }
    out
}

/// `Run` for `{"$ref": "#/components/schemas/Run"}`.
fn schema_name(schema: &Value) -> Option<&str> {
    schema["$ref"].as_str()?.rsplit('/').next()
}
