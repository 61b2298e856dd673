//! The model client: one POST to any OpenAI-compatible chat-completions
//! endpoint per model step.
//!
//! Request: `POST {base_url}/chat/completions` (base_url default
//! `https://api.openai.com/v1`), `Authorization: Bearer {api_key}` when a key
//! is configured, body `{model, messages: [system?, user]}` plus
//! `response_format: {"type": "json_object"}` for `output: json`.
//! `base_url`, `api_key` and `name` come from the step, else the spec's
//! `model:` block, and are resolved (`${NAME}`) only here, at call time.
//!
//! Output (what `steps.<id>.output` holds):
//! - `output: json`: the reply's JSON object itself, so templates read
//!   `steps.assess.output.amount` and a guardrail reads `output.confidence`;
//!   plus the reserved key `_usage` (a key of that name in the reply is
//!   replaced).
//! - `output: text`: `{"text": "<reply>", "_usage": {...}}`.
//!
//! `_usage` is always `{prompt_tokens, completion_tokens, total_tokens}`;
//! each is a number when the endpoint reports it and null otherwise (always
//! present because templates treat a missing key as an error).
//!
//! No automatic retries: a model call may be billed, and a failed step fails
//! the run, which releases its dedupe keys so a retry is explicit.
//!
//! Errors say what went wrong and where (the endpoint's host, never the
//! key); the workflow prefixes the step. Every error and output passes the
//! call's redactor, so an endpoint echoing the key cannot put it in the store.

mod endpoint;
mod reply;

use std::time::Duration;

use serde_json::{Value, json};
use thiserror::Error;

use super::template::CallSecrets;
use super::{CallContext, ModelRequest, ToolError};
use crate::domain::spec::ModelOutput;

use endpoint::Endpoint;
pub use endpoint::{DEFAULT_BASE_URL, DEFAULT_TIMEOUT};

/// Longest excerpt of a reply quoted in an error.
pub const EXCERPT_CHARS: usize = 200;

/// Replies larger than this are refused rather than buffered.
const MAX_REPLY_BYTES: usize = 8 * 1024 * 1024;

/// Why a model call failed. Private on purpose: its text only leaves this
/// module through [`call_with_secrets`], which redacts it.
#[derive(Debug, Error)]
enum ModelError {
    /// A setting could not be resolved (an unset `${NAME}`).
    #[error("model {what}: {message}")]
    Setting { what: &'static str, message: String },
    #[error("no model name: set `name:` in the step's model or in the spec's `model:` block")]
    NoModelName,
    #[error("model base_url {base_url:?} is not a valid http(s) URL: {reason}")]
    BadBaseUrl { base_url: String, reason: String },
    #[error("model endpoint {host} did not answer within {}", secs(*.after))]
    Timeout { host: String, after: Duration },
    #[error("cannot reach model endpoint {host}: {reason}")]
    Unreachable { host: String, reason: String },
    #[error("model endpoint {host} answered HTTP {status}: {excerpt}")]
    Status {
        host: String,
        status: u16,
        excerpt: String,
    },
    #[error(
        "model endpoint {host} sent a reply larger than {} bytes",
        MAX_REPLY_BYTES
    )]
    TooLarge { host: String },
    #[error("model endpoint {host} sent an unusable reply: {problem}")]
    BadReply { host: String, problem: String },
    #[error("output: json needs a JSON object, but the answer from {host} is {problem}")]
    NotAnObject { host: String, problem: String },
}

fn secs(d: Duration) -> String {
    let ms = d.as_millis();
    if ms % 1000 == 0 {
        format!("{}s", ms / 1000)
    } else {
        format!("{ms}ms")
    }
}

/// Ask the model, resolving credentials from the environment.
pub async fn call(
    client: &reqwest::Client,
    request: ModelRequest<'_>,
    call: &CallContext,
) -> Result<Value, ToolError> {
    call_with_secrets(client, &request, call, CallSecrets::from_env()).await
}

/// Ask the model with credentials from `secrets` (tests pass a table).
///
/// The request carries the call's `Idempotency-Key`: a model call is a POST,
/// and DESIGN §9 gives every POST a run makes one. Providers that do not
/// know the header ignore it; gateways and providers that honour it answer
/// a re-sent call (`on_crash: retry`) from their cache instead of billing it
/// twice.
pub async fn call_with_secrets(
    client: &reqwest::Client,
    request: &ModelRequest<'_>,
    call: &CallContext,
    mut secrets: CallSecrets,
) -> Result<Value, ToolError> {
    let result = match Endpoint::resolve(request.step, request.defaults, &mut secrets) {
        Ok(endpoint) => ask(client, &endpoint, request, call.idempotency_key.as_deref()).await,
        Err(e) => Err(e),
    };
    // Once more over the finished result: an output may hold the key in an
    // escaped form the raw reply text did not show, and a resolution error
    // may come after some values were already used.
    let redactor = secrets.redactor();
    result
        .map(|output| redactor.value(output))
        .map_err(|e| ToolError::new(redactor.text(&e.to_string())))
}

async fn ask(
    client: &reqwest::Client,
    endpoint: &Endpoint,
    request: &ModelRequest<'_>,
    idempotency_key: Option<&str>,
) -> Result<Value, ModelError> {
    let output_kind = request.step.output;
    let body = request_body(&endpoint.model, request, output_kind);
    // Serialised by hand: reqwest's `json` feature is not enabled in this crate.
    let mut builder = client
        .post(endpoint.url.clone())
        .timeout(endpoint.timeout)
        .header(reqwest::header::CONTENT_TYPE, "application/json")
        .body(body.to_string());
    if let Some(key) = &endpoint.api_key {
        builder = builder.bearer_auth(key);
    }
    if let Some(key) = idempotency_key {
        builder = builder.header("Idempotency-Key", key);
    }
    let response = builder.send().await.map_err(|e| endpoint.transport(&e))?;
    let status = response.status();
    // Redacted before anything reads it, so no excerpt can cut a secret in
    // half and keep a piece the redactor would no longer recognise.
    let text = endpoint.redactor.text(&String::from_utf8_lossy(
        &read_body(response, endpoint).await?,
    ));
    if !status.is_success() {
        return Err(ModelError::Status {
            host: endpoint.host.clone(),
            status: status.as_u16(),
            excerpt: reply::excerpt(&text),
        });
    }
    let reply = reply::parse(&text).map_err(|problem| endpoint.bad_reply(problem))?;
    let output = match output_kind {
        ModelOutput::Json => {
            reply::json_object(&reply).map_err(|problem| ModelError::NotAnObject {
                host: endpoint.host.clone(),
                problem,
            })?
        }
        ModelOutput::Text => reply::text_output(&reply.content),
    };
    Ok(reply::with_usage(output, reply.usage))
}

fn request_body(model: &str, request: &ModelRequest<'_>, output: ModelOutput) -> Value {
    let mut messages = Vec::with_capacity(2);
    if let Some(system) = &request.system {
        messages.push(json!({ "role": "system", "content": system }));
    }
    messages.push(json!({ "role": "user", "content": request.prompt }));
    let mut body = json!({ "model": model, "messages": messages });
    if output == ModelOutput::Json {
        body["response_format"] = json!({ "type": "json_object" });
    }
    body
}

/// Read the reply body, refusing one that would not fit in memory sensibly.
async fn read_body(
    mut response: reqwest::Response,
    endpoint: &Endpoint,
) -> Result<Vec<u8>, ModelError> {
    let mut bytes = Vec::new();
    while let Some(chunk) = response.chunk().await.map_err(|e| endpoint.transport(&e))? {
        if bytes.len() + chunk.len() > MAX_REPLY_BYTES {
            return Err(ModelError::TooLarge {
                host: endpoint.host.clone(),
            });
        }
        bytes.extend_from_slice(&chunk);
    }
    Ok(bytes)
}

#[cfg(test)]
mod tests;
