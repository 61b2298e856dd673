//! `tollgate mcp SPEC` on stdio, started by the official MCP Python
//! client as its server process.

use super::{DESK_SPEC, PythonRun, client_script};
use crate::common::{Workspace, tollgate_bin};

#[test]
fn tollgate_mcp_serves_the_tools_on_stdio_and_hears_a_cli_decision() {
    let ws = Workspace::new(DESK_SPEC);
    let state = ws.state_db();
    // Where a server on this store would have made it: `mcp --state`
    // refuses a directory that is not there (a typo), see below.
    std::fs::create_dir_all(state.parent().unwrap()).unwrap();
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

/// Before, `tollgate mcp --state` with a mistyped directory created it and
/// an empty store in it, and answered requests that no server would ever
/// list. Now it refuses (exit 3, naming the directory) and creates nothing.
#[test]
fn a_mistyped_state_directory_is_refused_and_nothing_is_created() {
    let ws = Workspace::new(DESK_SPEC);
    let missing = ws.path().join("no-such-dir");
    let state = missing.join("state.db");
    let out = ws
        .tollgate()
        .args(["mcp", ws.spec_arg(), "--state", state.to_str().unwrap()])
        .stdin(std::process::Stdio::null())
        .output()
        .expect("tollgate mcp");
    crate::common::assert_exit(&out, 3);
    crate::common::assert_stderr_contains(&out, "no directory");
    crate::common::assert_stderr_contains(&out, "no-such-dir");
    assert!(!missing.exists(), "nothing was created");
}
