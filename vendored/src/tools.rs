//! Tools: what a `tool:` or `model:` step calls.
//!
//! The engine only knows the [`ToolInvoker`] trait, so HTTP tools, the model
//! client and custom Rust tools can be swapped or extended (an exported crate
//! registers its `rust:` tools) without touching the workflow.

use async_trait::async_trait;
use serde_json::Value;
use thiserror::Error;

use crate::spec::{ModelConfig, ModelStep, ToolSpec};

/// Why a tool or model call failed. The message never contains a secret value.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("{message}")]
pub struct ToolError {
    pub message: String,
}

impl ToolError {
    pub fn new(message: impl Into<String>) -> ToolError {
        ToolError {
            message: message.into(),
        }
    }
}

/// Identity of one call, for idempotency keys and logs.
#[derive(Debug, Clone)]
pub struct CallContext {
    pub run_id: String,
    pub step_id: String,
    /// Set when the call was approved by a person: derived from the approval
    /// key and the step, stable across repeats of the same approved call.
    pub idempotency_key: Option<String>,
}

/// A fully evaluated model request.
#[derive(Debug, Clone)]
pub struct ModelRequest<'a> {
    pub step: &'a ModelStep,
    /// The spec's `model:` block, if any.
    pub defaults: Option<&'a ModelConfig>,
    pub system: Option<String>,
    pub prompt: String,
}

#[async_trait]
pub trait ToolInvoker: Send + Sync {
    /// Call a tool with evaluated arguments; returns the step's output.
    async fn call_tool(
        &self,
        tool: &ToolSpec,
        args: &Value,
        call: &CallContext,
    ) -> Result<Value, ToolError>;

    /// Ask a model; returns the step's output.
    async fn call_model(
        &self,
        request: ModelRequest<'_>,
        call: &CallContext,
    ) -> Result<Value, ToolError>;
}

/// The invoker used until real tools are configured: every call fails with a
/// message that says so (nothing is silently skipped).
#[derive(Debug, Default)]
pub struct Unavailable;

#[async_trait]
impl ToolInvoker for Unavailable {
    async fn call_tool(
        &self,
        tool: &ToolSpec,
        _args: &Value,
        _call: &CallContext,
    ) -> Result<Value, ToolError> {
        Err(ToolError::new(format!(
            "tool {:?} cannot be called: no tool invoker is configured",
            tool.name
        )))
    }

    async fn call_model(
        &self,
        _request: ModelRequest<'_>,
        call: &CallContext,
    ) -> Result<Value, ToolError> {
        Err(ToolError::new(format!(
            "step {:?} cannot call a model: no model client is configured",
            call.step_id
        )))
    }
}

/// The `Idempotency-Key` for a call approved under `approval_key` at `step_id`:
/// derived from both, never the approval key itself (which is a capability
/// to decide).
pub fn idempotency_key(approval_key: &str, step_id: &str) -> String {
    use sha2::{Digest, Sha256};
    let digest = Sha256::digest(format!("tollgate-idempotency\0{approval_key}\0{step_id}"));
    let mut out = String::from("tg-");
    for b in &digest[..16] {
        out.push_str(&format!("{b:02x}"));
    }
    out
}
