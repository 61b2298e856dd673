//! Tools: what a `tool:` or `model:` step calls.
//!
//! The engine only knows the [`ToolInvoker`] trait, so HTTP tools, the model
//! client and custom Rust tools can be swapped or extended (an exported crate
//! registers its `rust:` tools) without touching the workflow.

pub mod custom;
pub mod http;
pub mod model;
pub mod template;

use std::sync::Arc;

use async_trait::async_trait;
use serde_json::Value;
use thiserror::Error;

use crate::expr::Context;
use crate::spec::{ModelConfig, ModelStep, Spec, ToolKind, ToolSpec};

pub use custom::{CustomTool, CustomTools, MissingCustomTools};

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

/// Identity and scope of one call.
#[derive(Debug, Clone)]
pub struct CallContext {
    pub run_id: String,
    pub step_id: String,
    /// Set when the call was approved by a person: derived from the approval
    /// key and the step, stable across repeats of the same approved call.
    pub idempotency_key: Option<String>,
    /// What the tool's own templates can read: the run's context plus `args`.
    pub scope: Context,
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

/// The tools of a real process: HTTP tools and the model client over one
/// shared connection pool, and the custom Rust tools registered with it.
#[derive(Clone)]
pub struct Toolbox {
    http: reqwest::Client,
    custom: Arc<CustomTools>,
}

impl Toolbox {
    pub fn new() -> Result<Toolbox, ToolError> {
        Ok(Toolbox {
            http: http::client()?,
            custom: Arc::new(CustomTools::default()),
        })
    }

    /// Use these custom (`rust:`) tool implementations.
    pub fn with_custom_tools(mut self, custom: CustomTools) -> Toolbox {
        self.custom = Arc::new(custom);
        self
    }

    /// Refuse a spec whose `rust:` tools have no implementation here.
    pub fn check(&self, spec: &Spec) -> Result<(), MissingCustomTools> {
        self.custom.check(spec)
    }
}

#[async_trait]
impl ToolInvoker for Toolbox {
    async fn call_tool(
        &self,
        tool: &ToolSpec,
        args: &Value,
        call: &CallContext,
    ) -> Result<Value, ToolError> {
        match &tool.kind {
            ToolKind::Http(spec) => http::call(&self.http, tool, spec, call).await,
            ToolKind::Rust => self.custom.call(&tool.name, args, call).await,
        }
    }

    async fn call_model(
        &self,
        request: ModelRequest<'_>,
        call: &CallContext,
    ) -> Result<Value, ToolError> {
        model::call(&self.http, request, call).await
    }
}

/// The `Idempotency-Key` for a call approved under `approval_key` at `step_id`:
/// derived from both, never the approval key itself (which is a capability
/// to decide).
pub fn idempotency_key(approval_key: &str, step_id: &str) -> String {
    use sha2::{Digest, Sha256};
    let digest = Sha256::digest(format!("tollgate-idempotency\0{approval_key}\0{step_id}"));
    format!("tg-{}", crate::hex::encode(&digest[..16]))
}
