//! Tools: what a `tool:` or `model:` step calls.
//!
//! The engine only knows the [`ToolInvoker`] trait, so HTTP tools, the model
//! client and custom Rust tools can be swapped or extended (an exported crate
//! registers its `rust:` tools) without touching the workflow.

pub mod custom;
#[cfg(feature = "http-client")]
pub mod http;
#[cfg(feature = "http-client")]
pub mod model;
pub mod template;
pub mod tool_env;

use std::sync::Arc;

use async_trait::async_trait;
use serde_json::Value;
use thiserror::Error;

use crate::domain::expr::Context;
use crate::domain::spec::{ModelConfig, ModelStep, Spec, ToolKind, ToolSpec};

pub use custom::{CustomTool, CustomTools, CustomToolsError};
pub use tool_env::ToolEnv;

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
    /// The call's idempotency key, from [`idempotency_key`]: the same on
    /// every attempt, retry and recovery of this step of this run. `None`
    /// only where no run is behind the call (a unit test).
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

    /// The `rust:` tools `spec` declares that this invoker cannot call:
    /// what makes a stored older version unable to run here. HTTP tools and
    /// models are defined by the spec itself, so only custom tools can be
    /// missing.
    fn missing_tools(&self, _spec: &Spec) -> Vec<String> {
        Vec::new()
    }
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
    #[cfg(feature = "http-client")]
    http: reqwest::Client,
    custom: Arc<CustomTools>,
}

impl Toolbox {
    pub fn new() -> Result<Toolbox, ToolError> {
        Ok(Toolbox {
            #[cfg(feature = "http-client")]
            http: http::client()?,
            custom: Arc::new(CustomTools::default()),
        })
    }

    /// Use these custom (`rust:`) tool implementations.
    pub fn with_custom_tools(mut self, custom: CustomTools) -> Toolbox {
        self.custom = Arc::new(custom);
        self
    }

    /// Refuse a spec whose `rust:` tools have no implementation here, or
    /// implementations of tools the spec does not declare.
    pub fn check(&self, spec: &Spec) -> Result<(), CustomToolsError> {
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
            #[cfg(feature = "http-client")]
            ToolKind::Http(spec) => http::call(&self.http, tool, spec, call).await,
            #[cfg(not(feature = "http-client"))]
            ToolKind::Http(_) => Err(left_out(&format!("tools.{} (an http tool)", tool.name))),
            ToolKind::Rust => self.custom.call(&tool.name, args, call).await,
        }
    }

    async fn call_model(
        &self,
        request: ModelRequest<'_>,
        call: &CallContext,
    ) -> Result<Value, ToolError> {
        #[cfg(feature = "http-client")]
        return model::call(&self.http, request, call).await;
        #[cfg(not(feature = "http-client"))]
        {
            let _ = request;
            Err(left_out(&format!("steps.{} (a model step)", call.step_id)))
        }
    }

    fn missing_tools(&self, spec: &Spec) -> Vec<String> {
        self.custom.missing(spec)
    }
}

/// The error of a call this build cannot make (a server started with a
/// spec its Cargo.toml's features do not cover; start-up refuses that).
#[cfg(not(feature = "http-client"))]
fn left_out(at: &str) -> ToolError {
    ToolError::new(
        crate::domain::spec::MissingFeature {
            feature: crate::domain::spec::Feature::HttpClient,
            at: at.to_string(),
        }
        .to_string(),
    )
}

/// The `Idempotency-Key` of the call step `step_id` of run `run_id` makes.
///
/// A pure function of exactly three things: the run id, the step id, and
/// `gate_key`, the key of the approval that most recently gated the run
/// before (or at) this step, if any (see [`gate_key_for_step`]). Nothing
/// else goes in: not the arguments (a modify may edit them, a retry
/// re-evaluates them), not the attempt, not the process. So every attempt,
/// retry and recovery of one step sends the same key, and two steps or two
/// runs never share one. It is a digest, never the approval key itself
/// (which is a capability to decide). Crash recovery re-sends an in-doubt
/// call through this same function.
pub fn idempotency_key(run_id: &str, step_id: &str, gate_key: Option<&str>) -> String {
    use sha2::{Digest, Sha256};
    let mut hasher = Sha256::new();
    // Length-prefixed parts: no two inputs produce the same byte string.
    for part in [
        "tollgate-idempotency-v2",
        run_id,
        step_id,
        gate_key.unwrap_or(""),
    ] {
        hasher.update((part.len() as u64).to_be_bytes());
        hasher.update(part.as_bytes());
    }
    hasher.update([u8::from(gate_key.is_some())]);
    let digest = hasher.finalize();
    format!("tg-{}", crate::support::hex::encode(&digest[..16]))
}

/// The approval that most recently gated a run before (or at) step
/// `step_index`, from the run's approval records: the decided record
/// (approved, modified, or rejected with `on_reject: continue`) with the
/// highest step index not after `step_index`. Runs only move forward, so
/// that is the last gate the run passed. What recovery passes to
/// [`idempotency_key`] as `gate_key` to rebuild a step's key from the store.
pub fn gate_key_for_step(
    records: &[crate::domain::pending_approval::ApprovalRecord],
    step_index: usize,
) -> Option<&str> {
    use crate::domain::pending_approval::ApprovalStatus;
    records
        .iter()
        .filter(|r| r.step_index <= step_index)
        .filter(|r| {
            matches!(
                r.status,
                ApprovalStatus::Approved | ApprovalStatus::Modified | ApprovalStatus::Rejected
            )
        })
        .max_by_key(|r| (r.step_index, r.decided_at))
        .map(|r| r.key.as_str())
}

#[cfg(test)]
mod tests {
    use super::{gate_key_for_step, idempotency_key};
    use crate::domain::pending_approval::{ApprovalRecord, ApprovalStatus, sample_record};

    fn record(key: &str, step_index: usize, status: ApprovalStatus) -> ApprovalRecord {
        let mut record = sample_record(key, "r");
        record.step_index = step_index;
        record.step_id = format!("s{step_index}");
        record.status = status;
        record.decided_by = Some("x".into());
        record.decided_at = Some(record.created_at);
        record
    }

    #[test]
    fn the_gate_of_a_step_is_the_last_decided_one_at_or_before_it() {
        let records = [
            record("g1", 1, ApprovalStatus::Approved),
            record("g3", 3, ApprovalStatus::Rejected),
            record("g5", 5, ApprovalStatus::Pending),
        ];
        assert_eq!(gate_key_for_step(&records, 0), None);
        assert_eq!(
            gate_key_for_step(&records, 1),
            Some("g1"),
            "a tool's own gate"
        );
        assert_eq!(gate_key_for_step(&records, 2), Some("g1"));
        assert_eq!(
            gate_key_for_step(&records, 4),
            Some("g3"),
            "on_reject: continue"
        );
        assert_eq!(
            gate_key_for_step(&records, 6),
            Some("g3"),
            "pending is no gate yet"
        );
    }

    #[test]
    fn the_key_depends_on_run_step_and_gate_only() {
        let k = idempotency_key("r1", "s", Some("g"));
        assert_eq!(k, idempotency_key("r1", "s", Some("g")));
        assert_ne!(k, idempotency_key("r2", "s", Some("g")));
        assert_ne!(k, idempotency_key("r1", "t", Some("g")));
        assert_ne!(k, idempotency_key("r1", "s", Some("h")));
        assert_ne!(k, idempotency_key("r1", "s", None));
        assert_ne!(
            idempotency_key("r1", "s", Some("")),
            idempotency_key("r1", "s", None)
        );
        // No ambiguity where one part ends and the next begins.
        assert_ne!(
            idempotency_key("ab", "c", None),
            idempotency_key("a", "bc", None)
        );
        assert!(!k.contains('g') || !k.contains("g\0"));
        assert!(k.starts_with("tg-") && k.len() == 35);
    }
}
