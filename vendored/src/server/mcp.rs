//! The MCP server (DESIGN §14): the gate-request service
//! (`service/gates`) as four tools, `request_approval`,
//! `wait_for_approval`, `get_approval` and `cancel_approval`, for any
//! agent whose host speaks the Model Context Protocol.
//!
//! Two transports share one protocol handler:
//! - Streamable HTTP at `POST /mcp` (`http.rs`), behind the same bearer
//!   tokens as `/gates` (a `requester` token is enough) and the same
//!   Origin checks as every route; stateless.
//! - stdio (`stdio.rs`), `tollgate mcp SPEC`, for a client that starts
//!   the server itself.
//!
//! The protocol is small enough to write out (JSON-RPC 2.0, five methods,
//! `jsonrpc.rs` and `protocol.rs`) rather than take the Rust MCP SDK
//! (`rmcp`), which would add some twenty crates (schemars and its derive
//! among them) to every exported server's build for the same wire.
//!
//! The tools' schemas are the API's own types' (`schemas.rs`): the
//! arguments of `request_approval` are `POST /gates`'s body, and every
//! tool answers with `GET /gates/{key}`'s view.

mod batch;
mod http;
mod jsonrpc;
mod protocol;
mod schemas;
mod stdio;
mod tools;

pub(crate) use http::post;
pub(crate) use stdio::run as serve_stdio;

#[cfg(test)]
mod tests {
    //! The protocol over a real agent and store (in memory), as either
    //! transport hands it messages.

    use std::sync::Arc;

    use serde_json::{Value, json};

    use super::protocol::{self, Context};
    use crate::server::http::state::AppState;
    use crate::service::{Caller, Scope};
    use crate::store::PendingQuery;

    fn state() -> (AppState, tokio::sync::watch::Sender<bool>) {
        let spec = crate::Spec::parse(
            "version: 1\nagent: desk\nsteps:\n  - id: s\n    set: { a: 1 }\n",
            "desk.yaml",
        )
        .unwrap();
        let store: crate::SharedStore = Arc::new(crate::store::MemoryStore::new());
        let (stop, shutdown) = tokio::sync::watch::channel(false);
        let agent = crate::AgentRun::new(Arc::new(spec), store);
        (crate::server::standalone_state(agent, shutdown), stop)
    }

    async fn call(state: &AppState, who: &str, message: Value) -> Option<Value> {
        let caller = Caller(who.into());
        let context = Context {
            state,
            caller: &caller,
            scope: Scope::Requester,
        };
        protocol::handle(&context, message).await
    }

    fn tool_call(id: u64, name: &str, arguments: Value) -> Value {
        json!({ "jsonrpc": "2.0", "id": id, "method": "tools/call",
                "params": { "name": name, "arguments": arguments } })
    }

    async fn stored(state: &AppState) -> usize {
        let query = PendingQuery {
            agent_id: None,
            now: crate::support::time::now(),
            limit: 100,
            cursor: None,
        };
        state
            .agent
            .store()
            .list_pending(&query)
            .await
            .unwrap()
            .approvals
            .len()
    }

    #[tokio::test]
    async fn methods_notifications_and_unknown_methods() {
        let (state, _stop) = state();
        let listed = call(
            &state,
            "bot",
            json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}),
        )
        .await
        .unwrap();
        let names: Vec<&str> = listed["result"]["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["name"].as_str().unwrap())
            .collect();
        assert_eq!(
            names,
            [
                "request_approval",
                "wait_for_approval",
                "get_approval",
                "cancel_approval"
            ]
        );
        let pong = call(
            &state,
            "bot",
            json!({"jsonrpc": "2.0", "id": "p", "method": "ping"}),
        )
        .await;
        assert_eq!(
            pong,
            Some(json!({"jsonrpc": "2.0", "id": "p", "result": {}}))
        );
        let quiet = call(
            &state,
            "bot",
            json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        )
        .await;
        assert_eq!(quiet, None);
        let unknown = call(
            &state,
            "bot",
            json!({"jsonrpc": "2.0", "id": 2, "method": "resources/list"}),
        )
        .await
        .unwrap();
        assert_eq!(unknown["error"]["code"], -32601);
        assert_eq!(unknown["id"], 2);
    }

    #[tokio::test]
    async fn bad_arguments_are_invalid_params_and_store_nothing() {
        let (state, _stop) = state();
        for (arguments, says) in [
            (
                json!({ "payload": {} }),
                "request_approval: missing required argument message",
            ),
            (
                json!({ "message": "Pay?", "payload": {}, "ttl": 30 }),
                "request_approval: ttl must be a string or null, not a number",
            ),
            (
                json!({ "message": "Pay?", "payload": {}, "amount": 3 }),
                "request_approval: unknown argument amount",
            ),
        ] {
            let answer = call(
                &state,
                "bot",
                tool_call(3, "request_approval", arguments.clone()),
            )
            .await
            .unwrap();
            assert_eq!(answer["error"]["code"], -32602, "{arguments}: {answer}");
            let message = answer["error"]["message"].as_str().unwrap();
            assert!(message.starts_with(says), "{arguments}: {message}");
        }
        let unknown = call(&state, "bot", tool_call(4, "approve", json!({})))
            .await
            .unwrap();
        assert_eq!(unknown["error"]["code"], -32602);
        assert!(
            unknown["error"]["message"]
                .as_str()
                .unwrap()
                .contains("unknown tool \"approve\"")
        );
        let not_object = call(&state, "bot", tool_call(5, "get_approval", json!(["k"])))
            .await
            .unwrap();
        assert_eq!(not_object["error"]["code"], -32602);
        assert_eq!(stored(&state).await, 0);
    }

    #[tokio::test]
    async fn a_request_is_followed_by_its_requester_and_no_one_else() {
        let (state, _stop) = state();
        let asked = call(
            &state,
            "bot",
            tool_call(1, "request_approval", json!({ "message": "Refund 5?", "payload": { "cents": 500 }, "idempotency_key": "r-1" })),
        )
        .await
        .unwrap();
        let result = &asked["result"];
        assert_eq!(result["isError"], false, "{asked}");
        let view = &result["structuredContent"];
        assert_eq!(view["state"], "pending");
        assert_eq!(view["requested_by"], "bot");
        let text: Value =
            serde_json::from_str(result["content"][0]["text"].as_str().unwrap()).unwrap();
        assert_eq!(&text, view);
        let key = view["key"].as_str().unwrap().to_string();
        assert_eq!(stored(&state).await, 1);

        // Waiting no time answers at once, pending.
        let waited = call(
            &state,
            "bot",
            tool_call(
                2,
                "wait_for_approval",
                json!({ "key": key, "timeout_seconds": 0 }),
            ),
        )
        .await
        .unwrap();
        assert_eq!(waited["result"]["structuredContent"]["state"], "pending");

        // Another requester does not see it: a tool error, not a protocol one.
        let other = call(
            &state,
            "eve",
            tool_call(3, "get_approval", json!({ "key": key })),
        )
        .await
        .unwrap();
        assert_eq!(other["result"]["isError"], true, "{other}");
        let error: Value =
            serde_json::from_str(other["result"]["content"][0]["text"].as_str().unwrap()).unwrap();
        assert_eq!(error["error"]["code"], "approval_not_found");

        // The same idempotency key with another request is refused.
        let conflict = call(
            &state,
            "bot",
            tool_call(4, "request_approval", json!({ "message": "Refund 9?", "payload": { "cents": 900 }, "idempotency_key": "r-1" })),
        )
        .await
        .unwrap();
        assert_eq!(conflict["result"]["isError"], true);
        assert!(
            conflict["result"]["content"][0]["text"]
                .as_str()
                .unwrap()
                .contains("idempotency_conflict")
        );

        let cancelled = call(
            &state,
            "bot",
            tool_call(
                5,
                "cancel_approval",
                json!({ "key": key, "reason": "not needed" }),
            ),
        )
        .await
        .unwrap();
        let view = &cancelled["result"]["structuredContent"];
        assert_eq!(view["state"], "cancelled", "{cancelled}");
        assert_eq!(view["decision"]["reason"], "not needed");
    }
}
