//! The payload of each gate, as far as the spec tells it.
//!
//! A gate's payload is a template evaluated when the run pauses: a tool's
//! `with:` (an `approval: required` tool), an approval or `if` step's
//! `payload:`, a guarded model step's output. A template's keys are
//! known; a value's type is known when it is a literal or a string with
//! text around its `{{ }}` (it renders to a string); a lone `{{ expr }}`
//! keeps the type of whatever it evaluates to, so it is left open.

use serde_json::{Map, Value, json};

use crate::domain::expr::{self, Shape};
use crate::domain::spec::{ModelOutput, Spec, Step, StepKind};

/// One gate of the spec.
pub struct Gate<'a> {
    pub step: &'a Step,
    /// What pauses there, for the description.
    pub kind: &'static str,
    pub payload: Value,
}

/// Every step of `spec` that can pause, in order, with its payload schema.
pub fn gates(spec: &Spec) -> Vec<Gate<'_>> {
    spec.steps
        .iter()
        .filter_map(|step| {
            let (kind, payload) = match &step.kind {
                StepKind::Tool { tool, with } => {
                    spec.tools.get(tool).filter(|t| t.approval_required)?;
                    let payload = template(with);
                    (
                        "the arguments of an `approval: required` tool call",
                        payload,
                    )
                }
                StepKind::Approval(approval) => (
                    "an approval step's payload",
                    approval.payload.as_ref().map_or_else(null, template),
                ),
                StepKind::Gate(gate) => (
                    "an `if` gate's payload",
                    gate.payload.as_ref().map_or_else(null, template),
                ),
                StepKind::Model(model) => {
                    model.guardrail.as_ref()?;
                    (
                        "a guarded model step's output (reviewed after the call)",
                        model_output(model.output),
                    )
                }
                StepKind::Dedupe(_) | StepKind::Set { .. } => return None,
            };
            Some(Gate {
                step,
                kind,
                payload,
            })
        })
        .collect()
}

fn null() -> Value {
    json!({ "type": "null" })
}

/// A model's output: `{"text": ...}` or the reply's JSON object; either
/// with the call's token usage under `_usage`.
fn model_output(output: ModelOutput) -> Value {
    match output {
        ModelOutput::Text => json!({
            "type": "object",
            "properties": { "text": { "type": "string" }, "_usage": {} },
            "required": ["text"]
        }),
        ModelOutput::Json => json!({
            "type": "object",
            "properties": { "_usage": {} }
        }),
    }
}

/// The schema of what `template` evaluates to (see the module doc).
pub fn template(template: &Value) -> Value {
    match template {
        Value::Null => json!({ "type": "null" }),
        Value::Bool(_) => json!({ "type": "boolean" }),
        Value::Number(n) if n.is_i64() || n.is_u64() => json!({ "type": "integer" }),
        Value::Number(_) => json!({ "type": "number" }),
        Value::String(text) => match expr::shape(text) {
            Shape::Lone(_) => json!({}),
            Shape::Literal | Shape::Mixed => json!({ "type": "string" }),
        },
        Value::Array(items) => json!({
            "type": "array",
            "prefixItems": items.iter().map(self::template).collect::<Vec<_>>(),
            "items": false
        }),
        Value::Object(fields) => {
            let properties: Map<String, Value> = fields
                .iter()
                .map(|(k, v)| (k.clone(), self::template(v)))
                .collect();
            let required: Vec<&String> = fields.keys().collect();
            json!({
                "type": "object",
                "properties": properties,
                "required": required,
                "additionalProperties": false
            })
        }
    }
}
