//! The `{{ tool.name }}` tool of agent.yaml (`rust: {}`){% if tool.approval_required %}; `approval: required`: every call waits for a person first{% endif %}.
//!
//! This file is yours: `tollgate export` wrote it when the tool first
//! appeared in the spec and never rewrites it. src/main.rs registers the
//! tool's value (`.tool("{{ tool.name }}", tools::{{ tool.type_name }}::new())`): give
//! `{{ tool.type_name }}` the configuration, clients or pools it needs as fields, and
//! build them there. One value serves every call, from many runs at once.

use tollgate_runtime::serde_json::Value;
use tollgate_runtime::tools::{CallContext, CustomTool, ToolError};

/// The `{{ tool.name }}` tool.
pub struct {{ tool.type_name }} {}

impl {{ tool.type_name }} {
    pub fn new() -> {{ tool.type_name }} {
        {{ tool.type_name }} {}
    }
}

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
