//! The OpenAI-compatible model client. (Being built.)

use serde_json::Value;

use super::{CallContext, ModelRequest, ToolError};

pub async fn call(
    _client: &reqwest::Client,
    _request: ModelRequest<'_>,
    call: &CallContext,
) -> Result<Value, ToolError> {
    Err(ToolError::new(format!(
        "step {:?}: model client not built yet",
        call.step_id
    )))
}
