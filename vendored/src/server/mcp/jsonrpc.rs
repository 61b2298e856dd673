//! JSON-RPC 2.0 as MCP uses it: what a message is, and the answers' shape.
//!
//! Both transports (`http.rs`, `stdio.rs`) read a message (or, for clients
//! of protocol 2025-03-26, a batch) with [`parse`], sort each one with
//! [`classify`], and write what `protocol.rs` answers.

use serde_json::{Value, json};

/// The text is not JSON.
pub(crate) const PARSE_ERROR: i64 = -32700;
/// JSON, but not a JSON-RPC 2.0 message.
pub(crate) const INVALID_REQUEST: i64 = -32600;
pub(crate) const METHOD_NOT_FOUND: i64 = -32601;
/// Missing or ill-typed parameters (a tool's arguments, an unknown tool).
pub(crate) const INVALID_PARAMS: i64 = -32602;

/// Deepest a message may nest: a gate's payload may nest as deep as
/// `POST /gates` takes it ([`crate::support::json_depth::MAX_JSON_DEPTH`]), under
/// the message, its `params` and `arguments`.
const MAX_MESSAGE_DEPTH: usize = crate::support::json_depth::MAX_JSON_DEPTH + 3;

/// The most messages one batch may hold; a larger batch is refused whole
/// (`-32600`, no message of it handled). With [`BATCH_CONCURRENCY`], it
/// bounds what one POST holds: a batch of waits ends within a few waits'
/// time, never hours.
pub(crate) const MAX_BATCH: usize = 32;

/// How many of a batch's messages are handled at once; the answers keep
/// the batch's order.
pub(crate) const BATCH_CONCURRENCY: usize = 8;

/// A JSON-RPC error: its code, a message for a person, and data for code.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct RpcError {
    pub code: i64,
    pub message: String,
    pub data: Option<Value>,
}

impl RpcError {
    pub(crate) fn new(code: i64, message: impl Into<String>) -> RpcError {
        RpcError {
            code,
            message: message.into(),
            data: None,
        }
    }

    pub(crate) fn invalid_params(message: impl Into<String>) -> RpcError {
        RpcError::new(INVALID_PARAMS, message)
    }
}

/// What came in: one message, or a batch of them.
#[derive(Debug)]
pub(crate) enum Parsed {
    Single(Value),
    Batch(Vec<Value>),
}

/// Read a transport's bytes. A failure is the error response to send
/// (its `id` null: no message was read).
pub(crate) fn parse(bytes: &[u8]) -> Result<Parsed, Value> {
    if crate::support::json_depth::text_depth(bytes) > MAX_MESSAGE_DEPTH {
        return Err(failure(
            Value::Null,
            RpcError::new(
                INVALID_REQUEST,
                format!(
                    "the message nests deeper than {MAX_MESSAGE_DEPTH} levels of objects and arrays, the most tollgate accepts"
                ),
            ),
        ));
    }
    // A key twice would be read as its last, where a proxy may read the
    // first; and a message of very many keys costs far more than its bytes.
    if let Err(e) = crate::support::json_keys::check_keys(bytes) {
        return Err(failure(
            Value::Null,
            RpcError::new(INVALID_REQUEST, format!("the message is refused: {e}")),
        ));
    }
    let value: Value = serde_json::from_slice(bytes).map_err(|e| {
        failure(
            Value::Null,
            RpcError::new(PARSE_ERROR, format!("the message is not valid JSON: {e}")),
        )
    })?;
    match value {
        Value::Array(items) if items.is_empty() => Err(failure(
            Value::Null,
            RpcError::new(INVALID_REQUEST, "an empty batch: send at least one message"),
        )),
        Value::Array(items) if items.len() > MAX_BATCH => Err(failure(
            Value::Null,
            RpcError::new(
                INVALID_REQUEST,
                format!(
                    "a batch of {} messages: send at most {MAX_BATCH} in one batch",
                    items.len()
                ),
            ),
        )),
        Value::Array(items) => Ok(Parsed::Batch(items)),
        other => Ok(Parsed::Single(other)),
    }
}

/// One message, sorted.
#[derive(Debug, PartialEq)]
pub(crate) enum Incoming {
    /// Asks for an answer with this `id`.
    Request {
        id: Value,
        method: String,
        params: Option<Value>,
    },
    /// Wants no answer.
    Notification { method: String },
    /// A client's answer to a request of ours. This server sends none, so
    /// such a message is taken and ignored.
    Response,
    /// Not a JSON-RPC 2.0 message: answered with this error.
    Invalid { id: Value, error: RpcError },
}

pub(crate) fn classify(message: Value) -> Incoming {
    let Value::Object(mut fields) = message else {
        return Incoming::Invalid {
            id: Value::Null,
            error: RpcError::new(
                INVALID_REQUEST,
                format!(
                    "a message must be a JSON object, found {}",
                    crate::support::json_kind::json_kind(&message)
                ),
            ),
        };
    };
    let id = fields.remove("id");
    // An id to answer with: a string or a number, as given; anything else
    // (null included, which MCP forbids) cannot be answered to.
    let usable_id = id.clone().filter(|id| id.is_string() || id.is_number());
    let answer_id = usable_id.clone().unwrap_or(Value::Null);
    let invalid = |message: String| Incoming::Invalid {
        id: answer_id.clone(),
        error: RpcError::new(INVALID_REQUEST, message),
    };
    if fields.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        return invalid("\"jsonrpc\": \"2.0\" is required".into());
    }
    let Some(method) = fields.remove("method") else {
        if fields.contains_key("result") || fields.contains_key("error") {
            return Incoming::Response;
        }
        return invalid("a message needs a \"method\" (or a \"result\" or \"error\")".into());
    };
    let Value::String(method) = method else {
        return invalid("\"method\" must be a string".into());
    };
    let params = fields.remove("params");
    if params.as_ref().is_some_and(|p| !p.is_object()) {
        return match usable_id {
            Some(id) => Incoming::Invalid {
                id,
                error: RpcError::invalid_params(format!("{method}: params must be a JSON object")),
            },
            // A notification is never answered, even when malformed.
            None => Incoming::Notification { method },
        };
    }
    match (id, usable_id) {
        (None, _) => Incoming::Notification { method },
        (Some(_), Some(id)) => Incoming::Request { id, method, params },
        (Some(_), None) => invalid("\"id\" must be a string or a number".into()),
    }
}

/// A result for request `id`.
pub(crate) fn success(id: Value, result: Value) -> Value {
    json!({ "jsonrpc": "2.0", "id": id, "result": result })
}

/// An error for request `id` (null when it could not be read).
pub(crate) fn failure(id: Value, error: RpcError) -> Value {
    let mut body = json!({ "code": error.code, "message": error.message });
    if let Some(data) = error.data {
        body["data"] = data;
    }
    json!({ "jsonrpc": "2.0", "id": id, "error": body })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_are_sorted_by_their_fields() {
        assert_eq!(
            classify(json!({"jsonrpc": "2.0", "id": 7, "method": "ping"})),
            Incoming::Request {
                id: json!(7),
                method: "ping".into(),
                params: None
            }
        );
        assert_eq!(
            classify(json!({"jsonrpc": "2.0", "id": "a", "method": "tools/list", "params": {}})),
            Incoming::Request {
                id: json!("a"),
                method: "tools/list".into(),
                params: Some(json!({}))
            }
        );
        assert_eq!(
            classify(json!({"jsonrpc": "2.0", "method": "notifications/initialized"})),
            Incoming::Notification {
                method: "notifications/initialized".into()
            }
        );
        assert_eq!(
            classify(json!({"jsonrpc": "2.0", "id": 1, "result": {}})),
            Incoming::Response
        );
    }

    #[test]
    fn what_is_not_json_rpc_is_refused_with_the_id_when_there_is_one() {
        for (message, id, code, says) in [
            (
                json!([1]),
                Value::Null,
                INVALID_REQUEST,
                "must be a JSON object",
            ),
            (
                json!({"id": 1, "method": "ping"}),
                json!(1),
                INVALID_REQUEST,
                "jsonrpc",
            ),
            (
                json!({"jsonrpc": "1.0", "id": 1, "method": "ping"}),
                json!(1),
                INVALID_REQUEST,
                "jsonrpc",
            ),
            (
                json!({"jsonrpc": "2.0", "id": 2}),
                json!(2),
                INVALID_REQUEST,
                "needs a \"method\"",
            ),
            (
                json!({"jsonrpc": "2.0", "id": 3, "method": 5}),
                json!(3),
                INVALID_REQUEST,
                "must be a string",
            ),
            (
                json!({"jsonrpc": "2.0", "id": null, "method": "ping"}),
                Value::Null,
                INVALID_REQUEST,
                "\"id\"",
            ),
            (
                json!({"jsonrpc": "2.0", "id": [1], "method": "ping"}),
                Value::Null,
                INVALID_REQUEST,
                "\"id\"",
            ),
            (
                json!({"jsonrpc": "2.0", "id": 4, "method": "ping", "params": [1]}),
                json!(4),
                INVALID_PARAMS,
                "params must be a JSON object",
            ),
        ] {
            match classify(message.clone()) {
                Incoming::Invalid { id: got, error } => {
                    assert_eq!(got, id, "{message}");
                    assert_eq!(error.code, code, "{message}");
                    assert!(error.message.contains(says), "{message}: {}", error.message);
                }
                other => panic!("{message}: {other:?}"),
            }
        }
    }

    #[test]
    fn bad_text_is_a_parse_error_and_an_empty_batch_is_invalid() {
        let answer = parse(b"{not json").unwrap_err();
        assert_eq!(answer["error"]["code"], PARSE_ERROR);
        assert_eq!(answer["id"], Value::Null);
        let answer = parse(b"[]").unwrap_err();
        assert_eq!(answer["error"]["code"], INVALID_REQUEST);
        let deep = format!("{}{}", "[".repeat(200), "]".repeat(200));
        let answer = parse(deep.as_bytes()).unwrap_err();
        assert!(
            answer["error"]["message"]
                .as_str()
                .unwrap()
                .contains("nests deeper"),
            "{answer}"
        );
        assert!(matches!(parse(b"[{}, {}]"), Ok(Parsed::Batch(items)) if items.len() == 2));
    }

    #[test]
    fn answers_carry_the_id_and_the_data() {
        assert_eq!(
            success(json!(1), json!({})),
            json!({"jsonrpc": "2.0", "id": 1, "result": {}})
        );
        assert_eq!(
            failure(
                json!("x"),
                RpcError {
                    data: Some(json!({"a": 1})),
                    ..RpcError::invalid_params("no")
                }
            ),
            json!({"jsonrpc": "2.0", "id": "x", "error": {"code": -32602, "message": "no", "data": {"a": 1}}})
        );
    }
}
