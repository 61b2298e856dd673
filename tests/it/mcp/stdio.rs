//! `tollgate mcp SPEC` on stdio, started by the official MCP Python
//! client as its server process.

use super::{DESK_SPEC, PythonRun, client_script};
use crate::common::{Workspace, tollgate_bin};

#[test]
fn tollgate_mcp_serves_the_tools_on_stdio_and_hears_a_cli_decision() {
    let ws = Workspace::new(DESK_SPEC);
    let state = ws.state_db();
    let mut client = PythonRun::start(
        &client_script(),
        &[
            "stdio",
            tollgate_bin(),
            ws.spec_arg(),
            state.to_str().unwrap(),
        ],
        &[],
    );
    let listed = client.next_json();
    assert_eq!(listed["protocol"], "2025-06-18", "{listed}");
    assert_eq!(listed["tools"].as_array().unwrap().len(), 4);
    let asked = client.next_json();
    assert_eq!(asked["asked"]["state"], "pending", "{asked}");
    // The stdio process asks as --as NAME, a requester.
    assert_eq!(asked["asked"]["requested_by"], "desk-agent");
    let cli = client.next_json();
    assert_eq!(cli["cli"], 0, "{cli}");
    let last = client.next_json();
    let last = &last["final"];
    assert_eq!(last["state"], "decided", "{last}");
    assert_eq!(last["decision"]["by"], "alice");
    assert_eq!(last["decision"]["reason"], "looks right");
    let (code, stderr) = client.finish();
    assert_eq!(code, Some(0), "{stderr}");
}
