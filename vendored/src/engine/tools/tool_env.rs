//! What a `rust:` tool's constructor is given: the tool's name, the agent,
//! and its configuration from the environment. An exported crate's
//! generated `src/tools/mod.rs` calls each tool's `tool(env: &ToolEnv)` once,
//! when a command that runs the spec starts (see [`crate::App::build_tool`]).

use std::collections::BTreeMap;

use super::ToolError;

/// The context a tool is built in. Reading a variable that is not set is an
/// error naming the tool and the variable, so a server missing its
/// configuration stops at start-up (exit 2) rather than at the first call.
///
/// ```
/// use tollgate_runtime::tools::{ToolEnv, ToolError};
///
/// struct ScoreRisk { threshold: f64 }
///
/// fn tool(env: &ToolEnv) -> Result<ScoreRisk, ToolError> {
///     let threshold = env.optional_var("SCORE_RISK_THRESHOLD").unwrap_or("100".into());
///     let threshold = threshold.parse().map_err(|_| {
///         ToolError::new(format!("tool {:?}: SCORE_RISK_THRESHOLD must be a number", env.name()))
///     })?;
///     Ok(ScoreRisk { threshold })
/// }
///
/// let env = ToolEnv::with_vars("score_risk", "risk-review", [("SCORE_RISK_THRESHOLD", "250")]);
/// assert_eq!(tool(&env).unwrap().threshold, 250.0);
/// ```
#[derive(Debug, Clone)]
pub struct ToolEnv {
    name: String,
    agent: String,
    /// None: the process's environment. Some: these variables only (tests).
    vars: Option<BTreeMap<String, String>>,
}

impl ToolEnv {
    /// The tool `name` of `agent`, reading the process's environment.
    pub fn new(name: &str, agent: &str) -> ToolEnv {
        ToolEnv {
            name: name.to_string(),
            agent: agent.to_string(),
            vars: None,
        }
    }

    /// As [`ToolEnv::new`], with exactly these variables and none of the
    /// process's: for testing a tool's constructor.
    pub fn with_vars<K: Into<String>, V: Into<String>>(
        name: &str,
        agent: &str,
        vars: impl IntoIterator<Item = (K, V)>,
    ) -> ToolEnv {
        ToolEnv {
            name: name.to_string(),
            agent: agent.to_string(),
            vars: Some(
                vars.into_iter()
                    .map(|(k, v)| (k.into(), v.into()))
                    .collect(),
            ),
        }
    }

    /// The tool's name in the spec (`tools:` key).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The agent id (`agent:` in agent.yaml).
    pub fn agent(&self) -> &str {
        &self.agent
    }

    /// The variable `key`, or None when it is not set (or not UTF-8).
    pub fn optional_var(&self, key: &str) -> Option<String> {
        match &self.vars {
            Some(vars) => vars.get(key).cloned(),
            None => std::env::var(key).ok(),
        }
    }

    /// The variable `key`; an error naming the tool and `key` when it is
    /// not set. The message never holds a value.
    pub fn var(&self, key: &str) -> Result<String, ToolError> {
        self.optional_var(key).ok_or_else(|| {
            ToolError::new(format!(
                "tool {:?} needs the environment variable {key}, which is not set",
                self.name
            ))
        })
    }

    /// [`ToolEnv::var`] for a secret (an API key, a password): its value is
    /// also redacted from everything the process stores or logs, like the
    /// `${NAME}`s of the spec.
    pub fn secret(&self, key: &str) -> Result<String, ToolError> {
        let value = self.var(key)?;
        crate::support::secrets::remember(&value);
        Ok(value)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_variable_names_the_tool_and_the_variable_but_no_value() {
        let env = ToolEnv::with_vars("score_risk", "risk", [("SET", "v4lue")]);
        assert_eq!(env.name(), "score_risk");
        assert_eq!(env.agent(), "risk");
        assert_eq!(env.var("SET").unwrap(), "v4lue");
        assert_eq!(env.optional_var("UNSET"), None);
        let err = env.var("UNSET").unwrap_err();
        assert_eq!(
            err.message,
            "tool \"score_risk\" needs the environment variable UNSET, which is not set"
        );
    }

    #[test]
    fn a_secret_is_redacted_from_then_on() {
        let secret = "tool-env-secret-5f3a9c";
        let env = ToolEnv::with_vars("t", "a", [("API_KEY", secret)]);
        assert_eq!(env.secret("API_KEY").unwrap(), secret);
        let redacted = crate::support::secrets::known().text(&format!("key={secret}"));
        assert!(!redacted.contains(secret), "{redacted}");
    }
}
