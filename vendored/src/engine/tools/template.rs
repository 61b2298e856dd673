//! Templates evaluated for an outgoing call (URLs, headers, bodies, model
//! prompts and credentials): spec-written `${NAME}` references resolve to
//! secret values here, and only here, at the moment of the call.
//!
//! The secret never enters a template or its context (see `secrets::seal`);
//! every value used is remembered so that whatever comes back (a response
//! body echoing a header, an error message) can be redacted.

use serde_json::Value;

use crate::domain::expr::{self, Context};
use crate::engine::tools::ToolError;
use crate::support::secrets::{self, Redactor, SecretError};

/// Where secret values come from: the environment, or a test's table.
type SecretLookup = dyn Fn(&str) -> Option<String> + Send + Sync;

/// Secret resolution for one call: where values come from, which were used.
pub struct CallSecrets {
    lookup: Box<SecretLookup>,
    used: Vec<String>,
}

impl Default for CallSecrets {
    fn default() -> Self {
        CallSecrets::from_env()
    }
}

impl CallSecrets {
    /// Values from the process environment (the normal case).
    /// Every value found is also remembered process-wide
    /// (`secrets::remember`), so any later reply or log line is redacted
    /// of it, not only this call's.
    pub fn from_env() -> CallSecrets {
        CallSecrets::with_lookup(|name| {
            let value = std::env::var(name).ok();
            if let Some(v) = &value {
                secrets::remember(v);
            }
            value
        })
    }

    pub fn with_lookup(
        lookup: impl Fn(&str) -> Option<String> + Send + Sync + 'static,
    ) -> CallSecrets {
        CallSecrets {
            lookup: Box::new(lookup),
            used: Vec::new(),
        }
    }

    /// A redactor for every secret value this call used and every one the
    /// process knows.
    pub fn redactor(&self) -> Redactor {
        let mut values = secrets::known_values();
        values.extend(self.used.iter().cloned());
        Redactor::new(values)
    }

    /// Evaluate one spec string for the call and resolve its secrets.
    pub fn string(&mut self, template: &str, ctx: &Context) -> Result<String, ToolError> {
        match self.value(&Value::String(template.to_string()), ctx)? {
            Value::String(s) => Ok(s),
            Value::Null => Ok(String::new()),
            other => Ok(other.to_string()),
        }
    }

    /// Evaluate a spec value (strings inside are templates) for the call.
    pub fn value(&mut self, template: &Value, ctx: &Context) -> Result<Value, ToolError> {
        let sealed = seal_value(template);
        let evaluated = expr::evaluate_value(&sealed, ctx).map_err(|e| {
            // The message quotes the template; show it as written.
            ToolError::new(secrets::unseal_as_written(&e.message))
        })?;
        self.unseal_value(evaluated)
    }

    /// Evaluate one spec string, handing each secret value to `place` with
    /// the byte offset its `${...}` has in `template`.
    pub fn string_placed(
        &mut self,
        template: &str,
        ctx: &Context,
        mut place: impl FnMut(usize, String) -> String,
    ) -> Result<String, ToolError> {
        let sealed = secrets::seal_with_offsets(template);
        let evaluated = expr::evaluate_value(&Value::String(sealed.into_owned()), ctx)
            .map_err(|e| ToolError::new(secrets::unseal_as_written(&e.message)))?;
        let text = match evaluated {
            Value::String(s) => s,
            Value::Null => String::new(),
            other => other.to_string(),
        };
        secrets::unseal_each(
            &text,
            &self.lookup,
            &mut self.used,
            |offset, value| match offset {
                Some(offset) => place(offset, value),
                None => value,
            },
        )
        .map_err(secret_error)
    }

    /// Resolve a plain spec string with no template syntax (a credential).
    pub fn literal(&mut self, text: &str) -> Result<String, ToolError> {
        let sealed = secrets::seal(text);
        secrets::unseal_with(&sealed, &self.lookup, &mut self.used).map_err(secret_error)
    }

    fn unseal_value(&mut self, value: Value) -> Result<Value, ToolError> {
        Ok(match value {
            Value::String(s) => Value::String(
                secrets::unseal_with(&s, &self.lookup, &mut self.used).map_err(secret_error)?,
            ),
            Value::Array(items) => Value::Array(
                items
                    .into_iter()
                    .map(|v| self.unseal_value(v))
                    .collect::<Result<_, _>>()?,
            ),
            Value::Object(map) => {
                let mut out = serde_json::Map::with_capacity(map.len());
                for (k, v) in map {
                    out.insert(k, self.unseal_value(v)?);
                }
                Value::Object(out)
            }
            other => other,
        })
    }
}

fn secret_error(e: SecretError) -> ToolError {
    ToolError::new(e.to_string())
}

fn seal_value(value: &Value) -> Value {
    match value {
        Value::String(s) => Value::String(secrets::seal(s).into_owned()),
        Value::Array(items) => Value::Array(items.iter().map(seal_value).collect()),
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(k, v)| (k.clone(), seal_value(v)))
                .collect(),
        ),
        other => other.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn secrets() -> CallSecrets {
        CallSecrets::with_lookup(|n| (n == "SHOP_TOKEN").then(|| "tok-123456".to_string()))
    }

    #[test]
    fn spec_references_resolve_and_data_references_do_not() {
        let ctx = Context::new().with("args", json!({"id": "${SHOP_TOKEN}"}));
        let mut s = secrets();
        let url = s
            .string("https://shop/{{ args.id }}?t=${SHOP_TOKEN}", &ctx)
            .unwrap();
        assert_eq!(url, "https://shop/${SHOP_TOKEN}?t=tok-123456");
        assert_eq!(
            s.redactor().text("echo tok-123456"),
            "echo [redacted]",
            "the used value can be redacted"
        );
    }

    #[test]
    fn a_missing_variable_names_it_and_never_a_value() {
        let mut s = CallSecrets::with_lookup(|_| None);
        let err = s.string("Bearer ${NOPE}", &Context::new()).unwrap_err();
        assert_eq!(
            err.message,
            "environment variable NOPE is not set (referenced as ${NOPE})"
        );
    }

    #[test]
    fn template_errors_quote_the_template_as_written() {
        let mut s = secrets();
        let err = s
            .string("${SHOP_TOKEN} {{ missing.x }}", &Context::new())
            .unwrap_err();
        assert!(err.message.contains("${SHOP_TOKEN}"), "{}", err.message);
        assert!(!err.message.contains("tok-123456"));
    }
}
