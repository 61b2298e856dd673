//! The MCP methods this server answers, whatever the transport:
//! `initialize` (with version negotiation), `ping`, `tools/list`,
//! `tools/call`, and the notifications a client sends (taken, not
//! answered). Anything else is -32601.

use serde_json::{Value, json};

use super::jsonrpc::{self, INVALID_PARAMS, Incoming, METHOD_NOT_FOUND, RpcError};
use super::tools::{self, TOOLS};
use crate::server::http::state::AppState;
use crate::service::{Caller, Scope};

/// The protocol versions spoken, newest first. The tools need nothing of
/// a later revision; 2025-03-26 clients get `structuredContent` and
/// `outputSchema` too, fields they ignore, beside the same JSON as text.
pub(crate) const VERSIONS: [&str; 2] = ["2025-06-18", "2025-03-26"];

/// What a client told `initialize` it speaks, and what we answer.
pub(crate) fn negotiate(offered: &str) -> &'static str {
    VERSIONS
        .iter()
        .find(|v| **v == offered)
        .copied()
        // Not one of ours: answer our latest; the client decides whether
        // it can speak it (and disconnects if not), as the spec says.
        .unwrap_or(VERSIONS[0])
}

pub(crate) fn is_supported(version: &str) -> bool {
    VERSIONS.contains(&version)
}

/// What `initialize` tells the client (and through it, the model) about
/// using the tools.
pub(crate) const INSTRUCTIONS: &str = "tollgate asks people to approve actions before you take them. \
Call request_approval with a message (what you want to do and why, for the person deciding) and the payload (what you would do, as JSON); it answers at once with a key. \
Then call wait_for_approval with that key (it waits up to 60 seconds) until state is no longer \"pending\": \
\"decided\" with approved true means go ahead, acting on decision.payload (the approver may have edited it); approved false means do not. \
\"expired\" or \"cancelled\" means do not act. \
A decision can take minutes or hours: keep calling wait_for_approval, or come back later with get_approval. \
Use cancel_approval when the action is no longer needed. \
Give request_approval an idempotency_key when a retry must not ask twice.";

/// Who is calling, and where: what a method needs to answer.
pub(crate) struct Context<'a> {
    pub state: &'a AppState,
    pub caller: &'a Caller,
    pub scope: Scope,
}

/// One message in, its answer out (`None`: nothing to answer, a
/// notification or a response). Nothing is kept between messages: the
/// version `initialize` settles is the client's to remember, and no
/// method answers differently for it.
pub(crate) async fn handle(context: &Context<'_>, message: Value) -> Option<Value> {
    match jsonrpc::classify(message) {
        Incoming::Request { id, method, params } => {
            tracing::debug!(method, "MCP request");
            let answer = answer(context, &method, params).await;
            Some(match answer {
                Ok(result) => jsonrpc::success(id, result),
                Err(error) => jsonrpc::failure(id, error),
            })
        }
        Incoming::Notification { method } => {
            tracing::debug!(method, "MCP notification");
            None
        }
        Incoming::Response => None,
        Incoming::Invalid { id, error } => Some(jsonrpc::failure(id, error)),
    }
}

async fn answer(
    context: &Context<'_>,
    method: &str,
    params: Option<Value>,
) -> Result<Value, RpcError> {
    match method {
        "initialize" => initialize(params.as_ref()),
        "ping" => Ok(json!({})),
        "tools/list" => {
            Ok(json!({ "tools": TOOLS.iter().map(|t| t.listing()).collect::<Vec<_>>() }))
        }
        "tools/call" => tools::call(context.state, context.caller, context.scope, params).await,
        other => Err(RpcError::new(
            METHOD_NOT_FOUND,
            format!(
                "method {other:?} is not offered: this server answers initialize, ping, tools/list and tools/call"
            ),
        )),
    }
}

/// The answer to `initialize`.
pub(crate) fn initialize(params: Option<&Value>) -> Result<Value, RpcError> {
    let offered = match params.and_then(|p| p.get("protocolVersion")) {
        Some(Value::String(version)) => version.as_str(),
        Some(_) => {
            return Err(RpcError::new(
                INVALID_PARAMS,
                "initialize: protocolVersion must be a string such as \"2025-06-18\"",
            ));
        }
        None => {
            return Err(RpcError::new(
                INVALID_PARAMS,
                "initialize: protocolVersion is required (such as \"2025-06-18\")",
            ));
        }
    };
    Ok(json!({
        "protocolVersion": negotiate(offered),
        "capabilities": { "tools": { "listChanged": false } },
        "serverInfo": {
            "name": "tollgate",
            "title": "tollgate approvals",
            "version": env!("CARGO_PKG_VERSION"),
        },
        "instructions": INSTRUCTIONS,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_version_we_speak_is_echoed_and_any_other_gets_our_latest() {
        assert_eq!(negotiate("2025-06-18"), "2025-06-18");
        assert_eq!(negotiate("2025-03-26"), "2025-03-26");
        assert_eq!(negotiate("2024-11-05"), "2025-06-18");
        assert_eq!(negotiate("2099-01-01"), "2025-06-18");
        assert!(is_supported("2025-03-26") && !is_supported("2024-11-05"));
    }

    #[test]
    fn initialize_says_who_we_are_and_what_we_offer() {
        let result = initialize(Some(&json!({
            "protocolVersion": "2025-03-26",
            "capabilities": {},
            "clientInfo": { "name": "c", "version": "1" }
        })))
        .unwrap();
        assert_eq!(result["protocolVersion"], "2025-03-26");
        assert_eq!(result["serverInfo"]["name"], "tollgate");
        assert_eq!(result["serverInfo"]["version"], env!("CARGO_PKG_VERSION"));
        assert_eq!(
            result["capabilities"],
            json!({ "tools": { "listChanged": false } })
        );
        for tool in [
            "request_approval",
            "wait_for_approval",
            "get_approval",
            "cancel_approval",
        ] {
            assert!(INSTRUCTIONS.contains(tool), "{tool}");
        }
        let missing = initialize(Some(&json!({}))).unwrap_err();
        assert_eq!(missing.code, INVALID_PARAMS);
        assert!(
            missing.message.contains("protocolVersion"),
            "{}",
            missing.message
        );
        let typed = initialize(Some(&json!({ "protocolVersion": 2025 }))).unwrap_err();
        assert!(
            typed.message.contains("must be a string"),
            "{}",
            typed.message
        );
    }
}
