//! One module per command.

pub mod approvals;
pub mod run;
pub mod serve;
pub mod spec;

use std::path::Path;
use std::sync::Arc;

use serde_json::Value;
use tollgate_runtime::tools::Toolbox;
use tollgate_runtime::{AgentRun, SharedStore, Spec};

use crate::exit::Failure;

/// Load and validate a spec, or fail with exit 2 and its position.
pub fn load_spec(path: &Path) -> Result<Arc<Spec>, Failure> {
    Ok(Arc::new(Spec::load(path)?))
}

/// The agent with this process's tools. A spec whose `rust:` tools are not
/// built into this binary is refused up front (exit 2), before any run starts.
pub fn agent(spec: Arc<Spec>, store: SharedStore) -> Result<AgentRun, Failure> {
    let tools = Toolbox::new().map_err(|e| Failure::new(crate::exit::RUN_FAILED, e.message))?;
    tools
        .check(&spec)
        .map_err(|e| Failure::bad_input(e.to_string()))?;
    Ok(AgentRun::new(spec, store).with_tools(Arc::new(tools)))
}

/// Parse `JSON` or `@FILE` given on the command line.
pub fn parse_json_arg(flag: &str, text: &str) -> Result<Value, Failure> {
    let (source, origin) = match text.strip_prefix('@') {
        Some(path) => (
            std::fs::read_to_string(path)
                .map_err(|e| Failure::bad_input(format!("{flag}: cannot read {path}: {e}")))?,
            path.to_string(),
        ),
        None => (text.to_string(), "the argument".to_string()),
    };
    serde_json::from_str(&source)
        .map_err(|e| Failure::bad_input(format!("{flag}: {origin} is not valid JSON: {e}")))
}

/// Who decides: --by, else $USER, else "cli".
pub fn decider(by: Option<&str>) -> String {
    by.map(str::to_string)
        .or_else(|| std::env::var("USER").ok().filter(|u| !u.is_empty()))
        .unwrap_or_else(|| "cli".to_string())
}
