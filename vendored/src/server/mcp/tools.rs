//! The four tools: what each takes and answers (their schemas), and the
//! call, made through the gate-request service (`service/gates`) that
//! `/gates` uses too, so a tool behaves exactly as that route does.
//!
//! Two kinds of failure, as MCP tells them apart: arguments that do not
//! fit the tool's input schema (or an unknown tool) are the caller's
//! protocol error, JSON-RPC -32602 with a message naming the argument,
//! and nothing is stored; a call the service refuses (not found, already
//! decided, an idempotency conflict, a ttl it cannot read) is the tool's
//! answer, `isError: true`, its text the API's error body, for the model
//! to read and act on.

use std::time::Duration;

use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use super::jsonrpc::RpcError;
use super::schemas::{first_problem, inline_schema};
use crate::server::http::state::AppState;
use crate::service::ApiError;
use crate::service::gates::{GateView, Gates, MAX_WAIT, NewGate};
use crate::service::schema::{Schema, request_type};
use crate::service::{Caller, Scope};

/// How long `wait_for_approval` waits when the call names no timeout.
pub(crate) const DEFAULT_WAIT: Duration = Duration::from_secs(30);

request_type! {
    #[derive(Debug, Deserialize)]
    #[serde(deny_unknown_fields)]
    pub(crate) struct KeyArgs {
        /// The approval's key, as `request_approval` answered it.
        pub key: String,
    }
}

request_type! {
    #[derive(Debug, Deserialize)]
    #[serde(deny_unknown_fields)]
    pub(crate) struct WaitArgs {
        /// The approval's key, as `request_approval` answered it.
        pub key: String,
        /// How long to wait for a decision, in seconds: 30 unless given,
        /// at most 60 (a longer wait is cut to 60). 0 answers at once.
        /// While still `pending` when the wait ends, call again.
        pub timeout_seconds: Option<u64>,
    }
}

request_type! {
    #[derive(Debug, Deserialize)]
    #[serde(deny_unknown_fields)]
    pub(crate) struct CancelArgs {
        /// The approval's key, as `request_approval` answered it.
        pub key: String,
        /// Why it is no longer needed, recorded with the cancel.
        pub reason: Option<String>,
    }
}

/// A tool as `tools/list` shows it.
pub(crate) struct Tool {
    pub name: &'static str,
    pub title: &'static str,
    pub description: &'static str,
    pub input_schema: fn() -> Value,
    /// MCP's behaviour hints (2025-03-26): what a client may tell its user.
    pub read_only: bool,
    pub destructive: bool,
    pub idempotent: bool,
}

pub(crate) const TOOLS: [Tool; 4] = [
    Tool {
        name: "request_approval",
        title: "Ask a person to approve an action",
        description: "Asks a person to approve an action before you take it, and answers at once with the request (its `key`, `state: pending`). Then call `wait_for_approval` with the key until `state` is no longer `pending`. `message` says what is asked and why, for the person deciding; `payload` is what would be done (the approver may edit it: act on the decision's `payload`, not your own). Give an `idempotency_key` to make a retry of this call answer with the same request instead of asking twice. You (and the `requester` you name) can never decide your own request: another person does. A `policy` may only make the decision harder to reach (groups within the approvers, more votes, a reason required), as the server's spec allows; it can never make the request approve itself when its time runs out.",
        input_schema: inline_schema::<NewGate>,
        read_only: false,
        destructive: false,
        idempotent: false,
    },
    Tool {
        name: "wait_for_approval",
        title: "Wait for a decision",
        description: "Waits up to `timeout_seconds` (30 unless given, at most 60) for the request to be decided, then answers with it as it stands. `state`: `decided` (`approved: true` means a person other than you approved it, named in `decision.by`: act on `decision.payload`, which may be an edited version of what you asked; `approved: false` means rejected: do not act), `expired` or `cancelled` (nobody approved: do not act), or `pending` (nobody decided yet: call again). A request whose policy says `on_timeout: reject` or `continue` is decided `approved: false` by `timeout` when its time runs out. Waiting changes nothing.",
        input_schema: inline_schema::<WaitArgs>,
        read_only: true,
        destructive: false,
        idempotent: true,
    },
    Tool {
        name: "get_approval",
        title: "Look up a request",
        description: "Answers with the request as it stands, at once (see `wait_for_approval` for what `state` means).",
        input_schema: inline_schema::<KeyArgs>,
        read_only: true,
        destructive: false,
        idempotent: true,
    },
    Tool {
        name: "cancel_approval",
        title: "Withdraw a request",
        description: "Withdraws a pending request you no longer need: it becomes `cancelled` and can no longer be approved. A request already decided or expired cannot be cancelled (the error says which); cancelling one already cancelled answers with it.",
        input_schema: inline_schema::<CancelArgs>,
        read_only: false,
        destructive: true,
        idempotent: true,
    },
];

impl Tool {
    /// Its entry in `tools/list`.
    pub(crate) fn listing(&self) -> Value {
        json!({
            "name": self.name,
            "title": self.title,
            "description": self.description,
            "inputSchema": (self.input_schema)(),
            "outputSchema": output_schema(),
            "annotations": {
                "title": self.title,
                "readOnlyHint": self.read_only,
                "destructiveHint": self.destructive,
                "idempotentHint": self.idempotent,
                // It reaches people (the inbox, Slack, mail).
                "openWorldHint": true,
            },
        })
    }
}

/// Every tool answers with the request as it stands.
pub(crate) fn output_schema() -> Value {
    inline_schema::<GateView>()
}

/// `tools/call`: `params` as the client sent them.
pub(crate) async fn call(
    state: &AppState,
    caller: &Caller,
    scope: Scope,
    params: Option<Value>,
) -> Result<Value, RpcError> {
    let mut params = params.unwrap_or_else(|| json!({}));
    let name = match params.get("name") {
        Some(Value::String(name)) => name.clone(),
        Some(_) => {
            return Err(RpcError::invalid_params(
                "tools/call: name must be a string",
            ));
        }
        None => {
            return Err(RpcError::invalid_params(
                "tools/call: name is required (one of request_approval, wait_for_approval, get_approval, cancel_approval)",
            ));
        }
    };
    let Some(tool) = TOOLS.iter().find(|t| t.name == name) else {
        return Err(RpcError::invalid_params(format!(
            "unknown tool {name:?}: this server has request_approval, wait_for_approval, get_approval and cancel_approval"
        )));
    };
    let arguments = match params.get_mut("arguments").map(Value::take) {
        None | Some(Value::Null) => json!({}),
        Some(Value::Object(map)) => Value::Object(map),
        Some(other) => {
            return Err(RpcError::invalid_params(format!(
                "{name}: arguments must be a JSON object, not {}",
                crate::support::json_kind::json_kind(&other)
            )));
        }
    };
    let gates = Gates::new(state, caller, scope);
    let answer = match tool.name {
        "request_approval" => {
            let body: NewGate = arguments_of(tool, arguments)?;
            if crate::support::json_depth::value_depth(
                &body.payload,
                crate::support::json_depth::MAX_JSON_DEPTH,
            ) > crate::support::json_depth::MAX_JSON_DEPTH
            {
                return Err(RpcError::invalid_params(format!(
                    "{name}: payload nests deeper than {} levels of objects and arrays, the most tollgate accepts",
                    crate::support::json_depth::MAX_JSON_DEPTH
                )));
            }
            gates.create(body).await.map(|created| created.view)
        }
        "wait_for_approval" => {
            let args: WaitArgs = arguments_of(tool, arguments)?;
            let wait = args
                .timeout_seconds
                .map_or(DEFAULT_WAIT, Duration::from_secs)
                .min(MAX_WAIT);
            gates.wait(&args.key, wait).await
        }
        "get_approval" => {
            let args: KeyArgs = arguments_of(tool, arguments)?;
            gates.get(&args.key).await
        }
        _ => {
            let args: CancelArgs = arguments_of(tool, arguments)?;
            let reason = args.reason.filter(|r| !r.trim().is_empty());
            gates.cancel(&args.key, reason).await
        }
    };
    Ok(result(answer))
}

/// The arguments as `T`, or the -32602 that says which one is wrong.
fn arguments_of<T: DeserializeOwned + Schema>(
    tool: &Tool,
    arguments: Value,
) -> Result<T, RpcError> {
    if let Some(problem) = first_problem(&(tool.input_schema)(), &arguments, "") {
        return Err(RpcError::invalid_params(format!(
            "{}: {problem}",
            tool.name
        )));
    }
    serde_json::from_value(arguments).map_err(|e| {
        RpcError::invalid_params(format!("{}: the arguments do not fit: {e}", tool.name))
    })
}

/// A call's result: the request as structured content and as text (for
/// clients that read only text), or the service's refusal as an error
/// result.
pub(crate) fn result(answer: Result<GateView, ApiError>) -> Value {
    match answer {
        Ok(view) => {
            let view = serde_json::to_value(&view).unwrap_or(Value::Null);
            json!({
                "content": [{ "type": "text", "text": view.to_string() }],
                "structuredContent": view,
                "isError": false,
            })
        }
        Err(e) => json!({
            "content": [{ "type": "text", "text": e.body().to_string() }],
            "isError": true,
        }),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::server::openapi::schema_errors;

    /// For each tool, each argument object: the checker that names the
    /// argument, the published schema (read by the API's own schema
    /// checker) and serde must give the same verdict.
    fn agree<T: DeserializeOwned + Schema>(tool: &str, bodies: &[Value]) {
        let tool = TOOLS.iter().find(|t| t.name == tool).unwrap();
        let schema = (tool.input_schema)();
        let document = json!({});
        for body in bodies {
            let by_serde = serde_json::from_value::<T>(body.clone()).is_ok();
            let by_checker = first_problem(&schema, body, "");
            let by_schema = schema_errors(&document, &schema, body);
            assert_eq!(by_serde, by_checker.is_none(), "{body}: {by_checker:?}");
            assert_eq!(by_serde, by_schema.is_empty(), "{body}: {by_schema:?}");
        }
    }

    #[test]
    fn input_schemas_accept_what_serde_accepts_and_no_more() {
        agree::<NewGate>(
            "request_approval",
            &[
                json!({ "message": "Pay?", "payload": { "cents": 5 } }),
                json!({ "message": "Pay?", "payload": null, "ttl": "1h", "step": "pay", "requester": "ann", "idempotency_key": "k1" }),
                json!({ "message": "Pay?", "payload": [1], "ttl": null }),
                json!({ "message": "Pay?", "payload": 1, "policy": { "rules": [{ "group": "finance", "min": 2 }], "require_reason": true } }),
                json!({ "message": "Pay?", "payload": 1, "policy": { "rules": [{ "group": "finance", "min": "2" }] } }),
                json!({ "message": "Pay?", "payload": 1, "policy": { "rulez": [] } }),
                json!({ "message": "Pay?", "payload": 1, "policy": "strict" }),
                json!({ "message": "Pay?" }),
                json!({ "payload": {} }),
                json!({ "message": 5, "payload": {} }),
                json!({ "message": "Pay?", "payload": {}, "ttl": 30 }),
                json!({ "message": "Pay?", "payload": {}, "amount": 30 }),
            ],
        );
        agree::<WaitArgs>(
            "wait_for_approval",
            &[
                json!({ "key": "k" }),
                json!({ "key": "k", "timeout_seconds": 10 }),
                json!({ "key": "k", "timeout_seconds": null }),
                json!({ "key": "k", "timeout_seconds": -1 }),
                json!({ "key": "k", "timeout_seconds": "10" }),
                json!({ "key": "k", "timeout_seconds": 1.5 }),
                json!({ "timeout_seconds": 10 }),
                json!({ "key": 7 }),
                json!({ "key": "k", "wait": 10 }),
            ],
        );
        agree::<KeyArgs>(
            "get_approval",
            &[
                json!({ "key": "k" }),
                json!({}),
                json!({ "key": null }),
                json!({ "key": "k", "x": 1 }),
            ],
        );
        agree::<CancelArgs>(
            "cancel_approval",
            &[
                json!({ "key": "k" }),
                json!({ "key": "k", "reason": "done" }),
                json!({ "key": "k", "reason": null }),
                json!({ "key": "k", "reason": 5 }),
                json!({ "reason": "done" }),
            ],
        );
    }

    #[test]
    fn every_tool_has_object_schemas_without_references() {
        for tool in &TOOLS {
            let listing = tool.listing();
            for field in ["inputSchema", "outputSchema"] {
                let schema = &listing[field];
                assert_eq!(schema["type"], "object", "{} {field}", tool.name);
                assert!(
                    !schema.to_string().contains("$ref"),
                    "{} {field}",
                    tool.name
                );
            }
        }
    }

    #[test]
    fn an_error_result_carries_the_api_error() {
        let answer = result(Err(ApiError::IdempotencyConflict("used before".into())));
        assert_eq!(answer["isError"], true);
        let text: Value =
            serde_json::from_str(answer["content"][0]["text"].as_str().unwrap()).unwrap();
        assert_eq!(text["error"]["code"], "idempotency_conflict");
        assert_eq!(text["error"]["message"], "used before");
        assert!(answer.get("structuredContent").is_none());
    }
}
