//! The `{{ tool.name }}` tool of agent.yaml (`rust: {}`){% if tool.approval_required %}; `approval: required`: every call waits for a person first{% endif %}.
//!
//! This file is yours: `tollgate export` wrote it when the tool first
//! appeared in the spec and never rewrites it. The generated
//! src/tools/mod.rs registers what `tool` below returns: build the tool
//! there, with the configuration, clients or pools it needs as fields of
//! `{{ tool.type_name }}`. One value serves every call, from many runs at once.

use tollgate_runtime::serde_json::Value;
use tollgate_runtime::tools::{CallContext, CustomTool, ToolEnv, ToolError};

/// Builds the `{{ tool.name }}` tool, once, when a command that runs the spec
/// starts. `env` has the tool's name, the agent and the environment:
/// `env.var("NAME")` fails naming the variable when it is not set, and
/// `env.secret("NAME")` also keeps its value out of the store and the logs.
/// An error stops the server before it serves (exit 2), with its message.
pub fn tool(_env: &ToolEnv) -> Result<{{ tool.type_name }}, ToolError> {
    Ok({{ tool.type_name }} {})
}

/// The `{{ tool.name }}` tool.
pub struct {{ tool.type_name }} {}

#[tollgate_runtime::async_trait]
impl CustomTool for {{ tool.type_name }} {
    /// `args` are the step's evaluated `with:` arguments (or the edited
    /// ones, after a person modified them at a gate); the value returned is
    /// the step's output. `call` has the run and step ids and the call's
    /// idempotency key, the same on every retry.
    async fn call(&self, _args: Value, _call: &CallContext) -> Result<Value, ToolError> {
        Err(ToolError::new(
            "tool \"{{ tool.name }}\" is not implemented yet: implement {{ tool.type_name }}::call in {{ tool.file }}",
        ))
    }
}
