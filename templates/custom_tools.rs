//! The spec's `rust:` tools, implemented in Rust.
//!
//! This file is yours: `tollgate export` writes it once and never overwrites
//! your edits (a newer version goes beside it as custom_tools.rs.new).
//! Each tool is a type implementing `tollgate_runtime::tools::CustomTool`;
//! src/generated.rs registers it under the tool's name. `args` are the
//! step's evaluated `with:` arguments (or the edited ones, after a person
//! modified them at a gate); the value returned is the step's output.
{%- if m.rust_tools.is_empty() %}
//!
//! agent.yaml declares no `rust:` tools. To add one, declare it in the spec
//!
//! ```yaml
//! tools:
//!   score_risk:
//!     rust: {}
//! ```
//!
//! and export again: the export adds its registration to generated.rs and
//! writes a stub for it to custom_tools.rs.new, to copy here.
{%- else %}

use tollgate_runtime::serde_json::Value;
use tollgate_runtime::tools::{CallContext, CustomTool, ToolError};
{%- for tool in m.rust_tools %}

/// The `{{ tool.name }}` tool{% if tool.approval_required %} (`approval: required`: every call waits for a person first){% endif %}.
pub struct {{ tool.type_name }};

#[tollgate_runtime::async_trait]
impl CustomTool for {{ tool.type_name }} {
    async fn call(&self, _args: Value, _call: &CallContext) -> Result<Value, ToolError> {
        Err(ToolError::new(
            "tool \"{{ tool.name }}\" is not implemented yet: implement {{ tool.type_name }}::call in src/custom_tools.rs",
        ))
    }
}
{%- endfor %}
{%- endif %}
