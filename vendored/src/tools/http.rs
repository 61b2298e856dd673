//! HTTP tools. (Being built: see the issue on steps that do real work.)

use serde_json::Value;

use super::{CallContext, ToolError};
use crate::spec::{HttpToolSpec, ToolSpec};

/// The process-wide client: one connection pool for every tool and model call.
pub fn client() -> Result<reqwest::Client, ToolError> {
    reqwest::Client::builder()
        .build()
        .map_err(|e| ToolError::new(format!("cannot build the HTTP client: {e}")))
}

pub async fn call(
    _client: &reqwest::Client,
    tool: &ToolSpec,
    _spec: &HttpToolSpec,
    _call: &CallContext,
) -> Result<Value, ToolError> {
    Err(ToolError::new(format!(
        "http tool {:?}: not built yet",
        tool.name
    )))
}
