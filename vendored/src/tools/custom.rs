//! Custom tools: `rust: {}` in a spec, implemented in Rust by the user of an
//! exported crate (or any program embedding the runtime).

use std::collections::BTreeMap;
use std::sync::Arc;

use async_trait::async_trait;
use serde_json::Value;
use thiserror::Error;

use super::{CallContext, ToolError};
use crate::spec::{Spec, ToolKind};

/// A tool implemented in Rust. `args` are the step's evaluated `with:`
/// arguments (or the edited ones, after a modify decision).
#[async_trait]
pub trait CustomTool: Send + Sync {
    async fn call(&self, args: Value, call: &CallContext) -> Result<Value, ToolError>;
}

/// Registered custom tools, by tool name.
#[derive(Default, Clone)]
pub struct CustomTools {
    tools: BTreeMap<String, Arc<dyn CustomTool>>,
}

/// A spec names `rust:` tools this program does not implement.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error(
    "tool{} {} {} implemented in Rust (`rust: {{}}`) and not available here: export the spec with `tollgate export SPEC --out DIR` and implement {} in DIR/src/custom_tools.rs",
    if .names.len() == 1 { "" } else { "s" },
    .names.iter().map(|n| format!("{n:?}")).collect::<Vec<_>>().join(", "),
    if .names.len() == 1 { "is" } else { "are" },
    if .names.len() == 1 { "it" } else { "them" }
)]
pub struct MissingCustomTools {
    pub names: Vec<String>,
}

impl CustomTools {
    pub fn new() -> CustomTools {
        CustomTools::default()
    }

    pub fn register(&mut self, name: &str, tool: Arc<dyn CustomTool>) -> &mut CustomTools {
        self.tools.insert(name.to_string(), tool);
        self
    }

    pub fn contains(&self, name: &str) -> bool {
        self.tools.contains_key(name)
    }

    /// Every `rust:` tool of the spec must be registered.
    pub fn check(&self, spec: &Spec) -> Result<(), MissingCustomTools> {
        let names: Vec<String> = spec
            .tools
            .values()
            .filter(|t| matches!(t.kind, ToolKind::Rust) && !self.contains(&t.name))
            .map(|t| t.name.clone())
            .collect();
        if names.is_empty() {
            Ok(())
        } else {
            Err(MissingCustomTools { names })
        }
    }

    pub async fn call(
        &self,
        name: &str,
        args: &Value,
        call: &CallContext,
    ) -> Result<Value, ToolError> {
        match self.tools.get(name) {
            // Whatever the tool returns is stored: it passes the process's
            // redactor like every HTTP and model reply.
            Some(tool) => {
                let redactor = crate::secrets::known();
                let output = tool
                    .call(args.clone(), call)
                    .await
                    .map_err(|e| ToolError::new(redactor.text(&e.message)))?;
                // Stored and wrapped again, like a reply from outside.
                let limit = crate::json_depth::MAX_JSON_DEPTH;
                if crate::json_depth::value_depth(&output, limit) > limit {
                    return Err(ToolError::new(format!(
                        "tool {name:?} returned JSON nested deeper than {limit} levels of objects and arrays, the most a run accepts; its output is not kept"
                    )));
                }
                Ok(redactor.value(output))
            }
            None => Err(ToolError::new(format!(
                "tool {name:?} is implemented in Rust and not registered in this program"
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    struct Nested(usize);

    #[async_trait]
    impl CustomTool for Nested {
        async fn call(&self, _args: Value, _call: &CallContext) -> Result<Value, ToolError> {
            let mut v = json!(1);
            for _ in 0..self.0 {
                v = json!([v]);
            }
            Ok(v)
        }
    }

    #[tokio::test]
    async fn an_output_nested_past_max_json_depth_is_an_error() {
        let limit = crate::json_depth::MAX_JSON_DEPTH;
        let mut tools = CustomTools::new();
        tools.register("ok", Arc::new(Nested(limit)));
        tools.register("deep", Arc::new(Nested(limit + 1)));
        let call = CallContext {
            run_id: "r".into(),
            step_id: "s".into(),
            idempotency_key: None,
            scope: crate::expr::Context::new(),
        };
        assert!(tools.call("ok", &json!({}), &call).await.is_ok());
        let err = tools.call("deep", &json!({}), &call).await.unwrap_err();
        assert!(
            err.message
                .contains("\"deep\" returned JSON nested deeper than 100"),
            "{}",
            err.message
        );
    }
}
