//! Custom tools: `rust: {}` in a spec, implemented in Rust by the user of an
//! exported crate (or any program embedding the runtime).

use std::collections::BTreeMap;
use std::sync::Arc;

use async_trait::async_trait;
use serde_json::Value;
use thiserror::Error;

use super::{CallContext, ToolError};
use crate::domain::spec::{Spec, ToolKind};

/// A tool implemented in Rust: the value registered for a `rust:` tool of
/// the spec. It is a value, so it holds what it needs (configuration, an
/// HTTP client, a pool) in its fields; one value serves every call, from
/// many runs at once, so shared mutable state goes behind a lock or an atomic.
///
/// `args` are the step's evaluated `with:` arguments (or the edited ones,
/// after a modify decision); what it returns is the step's output.
///
/// ```
/// use std::sync::atomic::{AtomicU64, Ordering};
/// use tollgate_runtime::serde_json::{Value, json};
/// use tollgate_runtime::tools::{CallContext, CustomTool, ToolError};
///
/// pub struct ScoreRisk {
///     threshold: f64,
///     scored: AtomicU64,
/// }
///
/// #[tollgate_runtime::async_trait]
/// impl CustomTool for ScoreRisk {
///     async fn call(&self, args: Value, _call: &CallContext) -> Result<Value, ToolError> {
///         let amount = args["amount"].as_f64().ok_or_else(|| ToolError::new("amount must be a number"))?;
///         let n = self.scored.fetch_add(1, Ordering::Relaxed) + 1;
///         Ok(json!({ "risky": amount > self.threshold, "scored": n }))
///     }
/// }
/// # let _ = ScoreRisk { threshold: 100.0, scored: AtomicU64::new(0) };
/// ```
#[async_trait]
pub trait CustomTool: Send + Sync {
    async fn call(&self, args: Value, call: &CallContext) -> Result<Value, ToolError>;
}

/// Registered custom tools, by tool name.
#[derive(Default, Clone)]
pub struct CustomTools {
    tools: BTreeMap<String, Arc<dyn CustomTool>>,
    /// Registered by an exported crate's `main.rs` ([`crate::App`]), not by
    /// tollgate: what a missing tool's error tells the user to do differs.
    in_export: bool,
}

/// The registered tools do not match the spec's `rust:` tools.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum CustomToolsError {
    /// The spec declares `rust:` tools nothing registered.
    #[error(
        "tool{} {} {} implemented in Rust (`rust: {{}}`) and not registered in this program: export the spec with `tollgate export SPEC --out DIR`, implement {} in DIR/src/tools/NAME.rs and register {} in DIR/src/main.rs with `.tool(\"NAME\", ...)`",
        plural(.0),
        quoted(.0),
        if .0.len() == 1 { "is" } else { "are" },
        if .0.len() == 1 { "it" } else { "each" },
        if .0.len() == 1 { "it" } else { "each" }
    )]
    Missing(Vec<String>),
    /// [`CustomToolsError::Missing`] in an exported crate: the export
    /// exists, so the fix is in it: the tool's code in its file under
    /// src/tools/, and main.rs calling the generated registry
    /// (`.tools(tools::register)`), which a re-export never restores once
    /// deleted from main.rs.
    #[error(
        "tool{} {} {} implemented in Rust (`rust: {{}}`) and not registered in this server: {}; then rebuild. A tool file that is missing is written by exporting the spec again into this crate (`tollgate export SPEC --out DIR`)",
        plural(.0),
        quoted(.0),
        if .0.len() == 1 { "is" } else { "are" },
        registrations(.0)
    )]
    MissingInExport(Vec<String>),
    /// Tools registered under names the spec does not declare as `rust:`
    /// tools (a typo, or a tool the spec dropped).
    #[error(
        "tool{} {} registered in this program {} not a `rust:` tool of the spec ({}): remove the `.tool(...)` registration or declare the tool in the spec",
        plural(.unknown),
        quoted(.unknown),
        if .unknown.len() == 1 { "is" } else { "are" },
        if .declared.is_empty() { "it declares none".to_string() } else { format!("it declares {}", quoted(.declared)) }
    )]
    NotInSpec {
        unknown: Vec<String>,
        declared: Vec<String>,
    },
}

fn plural(names: &[String]) -> &'static str {
    if names.len() == 1 { "" } else { "s" }
}

/// For each tool: where its code goes and the line that registers it.
fn registrations(names: &[String]) -> String {
    names
        .iter()
        .map(|name| {
            format!(
                "implement {name:?} in src/tools/{} (its `tool` function builds it) and have src/main.rs call `.tools(tools::register)`, which registers every `rust:` tool of agent.yaml",
                tool_file(name)
            )
        })
        .collect::<Vec<_>>()
        .join("; ")
}

/// The file an export writes for the tool in src/tools/ (as tollgate's
/// `export::names::tool_module` names it): `NAME.rs`, but `mod_.rs` for a
/// tool named `mod`, since `mod.rs` declares the others.
pub(crate) fn tool_file(name: &str) -> String {
    if name == "mod" {
        "mod_.rs".to_string()
    } else {
        format!("{name}.rs")
    }
}

fn quoted(names: &[String]) -> String {
    names
        .iter()
        .map(|n| format!("{n:?}"))
        .collect::<Vec<_>>()
        .join(", ")
}

impl CustomTools {
    pub fn new() -> CustomTools {
        CustomTools::default()
    }

    /// The tools of an exported crate ([`crate::App`]): a missing one is
    /// explained in the crate's terms ([`CustomToolsError::MissingInExport`]).
    pub fn in_exported_crate(mut self) -> CustomTools {
        self.in_export = true;
        self
    }

    /// Register `tool` for the spec's `rust:` tool `name` (replacing an
    /// earlier registration of the name).
    pub fn register(&mut self, name: &str, tool: Arc<dyn CustomTool>) -> &mut CustomTools {
        self.tools.insert(name.to_string(), tool);
        self
    }

    pub fn contains(&self, name: &str) -> bool {
        self.tools.contains_key(name)
    }

    /// Every `rust:` tool of the spec must be registered, and nothing else.
    pub fn check(&self, spec: &Spec) -> Result<(), CustomToolsError> {
        let declared = declared(spec);
        let missing = self.missing(spec);
        if !missing.is_empty() {
            return Err(if self.in_export {
                CustomToolsError::MissingInExport(missing)
            } else {
                CustomToolsError::Missing(missing)
            });
        }
        let unknown: Vec<String> = self
            .tools
            .keys()
            .filter(|name| !declared.contains(name))
            .cloned()
            .collect();
        if !unknown.is_empty() {
            return Err(CustomToolsError::NotInSpec { unknown, declared });
        }
        Ok(())
    }

    /// The `rust:` tools `spec` declares that have no implementation here.
    pub fn missing(&self, spec: &Spec) -> Vec<String> {
        declared(spec)
            .into_iter()
            .filter(|name| !self.contains(name))
            .collect()
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
                let redactor = crate::support::secrets::known();
                let output = tool
                    .call(args.clone(), call)
                    .await
                    .map_err(|e| ToolError::new(redactor.text(&e.message)))?;
                // Stored and wrapped again, like a reply from outside.
                let limit = crate::support::json_depth::MAX_JSON_DEPTH;
                if crate::support::json_depth::value_depth(&output, limit) > limit {
                    return Err(ToolError::new(format!(
                        "tool {name:?} returned JSON nested deeper than {limit} levels of objects and arrays, the most a run accepts; its output is not kept"
                    )));
                }
                Ok(redactor.value(output))
            }
            None if self.in_export => Err(ToolError::new(format!(
                "tool {name:?} is implemented in Rust and not registered in this server: have src/main.rs call `.tools(tools::register)` and rebuild"
            ))),
            None => Err(ToolError::new(format!(
                "tool {name:?} is implemented in Rust and not registered in this program"
            ))),
        }
    }
}

/// The names of the `rust:` tools `spec` declares.
fn declared(spec: &Spec) -> Vec<String> {
    spec.tools
        .values()
        .filter(|t| matches!(t.kind, ToolKind::Rust))
        .map(|t| t.name.clone())
        .collect()
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

    fn spec(tools: &str) -> Spec {
        let yaml = format!(
            "version: 1\nagent: a\ntools:\n{tools}  web:\n    http:\n      url: http://127.0.0.1:9/x\nsteps:\n  - id: s\n    tool: web\n"
        );
        Spec::parse(&yaml, "agent.yaml").unwrap()
    }

    #[test]
    fn check_wants_every_rust_tool_registered_and_nothing_else() {
        let spec = spec("  score_risk:\n    rust: {}\n  file_case:\n    rust: {}\n");
        let mut tools = CustomTools::new();
        tools.register("score_risk", Arc::new(Nested(0)));
        let err = tools.check(&spec).unwrap_err();
        assert_eq!(err, CustomToolsError::Missing(vec!["file_case".into()]));
        assert!(
            err.to_string()
                .starts_with("tool \"file_case\" is implemented in Rust"),
            "{err}"
        );
        tools.register("file_case", Arc::new(Nested(0)));
        assert_eq!(tools.check(&spec), Ok(()));
        // An HTTP tool's name, or a name the spec does not have, is refused.
        tools.register("web", Arc::new(Nested(0)));
        tools.register("scor_risk", Arc::new(Nested(0)));
        let err = tools.check(&spec).unwrap_err();
        assert_eq!(
            err.to_string(),
            "tools \"scor_risk\", \"web\" registered in this program are not a `rust:` tool of the spec (it declares \"file_case\", \"score_risk\"): remove the `.tool(...)` registration or declare the tool in the spec"
        );
    }

    #[tokio::test]
    async fn an_output_nested_past_max_json_depth_is_an_error() {
        let limit = crate::support::json_depth::MAX_JSON_DEPTH;
        let mut tools = CustomTools::new();
        tools.register("ok", Arc::new(Nested(limit)));
        tools.register("deep", Arc::new(Nested(limit + 1)));
        let call = CallContext {
            run_id: "r".into(),
            step_id: "s".into(),
            idempotency_key: None,
            scope: crate::domain::expr::Context::new(),
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
