//! `examples/clients/mcp_agent.py`, the README's MCP agent, run as a user
//! would run it against a real `tollgate serve`, decided by a person
//! (an HTTP client with a full token) while it waits.

use serde_json::json;

use super::{DESK_SPEC, PythonRun, TOKENS};
use crate::common::Workspace;
use crate::common::server::{Api, Served};

#[tokio::test(flavor = "multi_thread")]
async fn the_mcp_agent_example_acts_on_the_edited_payload() {
    let ws = Workspace::new(DESK_SPEC);
    let served = Served::start(
        &ws.spec,
        &ws.state_db(),
        &[("TOLLGATE_API_TOKENS", TOKENS)],
        &[],
    );
    let example =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/clients/mcp_agent.py");
    let mut agent = PythonRun::start(
        &example,
        &[],
        &[
            ("TOLLGATE_URL", served.base.as_str()),
            ("TOLLGATE_TOKEN", "tok-bot"),
        ],
    );
    let line = tokio::task::block_in_place(|| agent.next_line());
    let key = line
        .strip_prefix("waiting for approval ")
        .unwrap_or_else(|| panic!("{line}"))
        .to_string();
    // The approver lowers the refund, from another process.
    let (status, decided) = Api::with_token("tok-alice")
        .post(
            &served.url(&format!("/approvals/{key}/approve")),
            json!({ "reason": "half now", "payload": { "order": "A-1042", "cents": 6250, "reason": "damaged in transit" } }),
        )
        .await;
    assert_eq!(status, 200, "{decided}");
    let line = tokio::task::block_in_place(|| agent.next_line());
    assert_eq!(
        line,
        r#"approved by alice: refunding {"cents": 6250, "order": "A-1042", "reason": "damaged in transit"}"#
    );
    let (code, stderr) = agent.finish();
    assert_eq!(code, Some(0), "{stderr}");
}
