//! The `steps:` list: a step of each kind, and the `on_crash` and `on_spec_change` keys tools take too.

use serde_json::{Map, Value};

use super::super::marked::{Entry, Node, Resolved};
use super::super::{
    ApprovalStep, DedupeStep, GateStep, Guardrail, ModelOutput, ModelStep, OnCrash, OnReject,
    OnSpecChange, SpecError, Step, StepKind,
};
use super::reader::{Fields, Place};
use super::{Cx, DEFAULT_CONFIDENCE, MAX_ID_LEN, Result, is_identifier};
use crate::domain::expr::{self, Shape};
use crate::domain::policy::GatePolicy;

/// The only action an `if` step can take.
const REQUEST_HUMAN_APPROVAL: &str = "request_human_approval";

/// `tool, model, approval, if, dedupe, set`: the keys that decide a step's kind.
fn step_kinds() -> String {
    StepKind::SCHEMAS
        .iter()
        .map(|(kind, _)| *kind)
        .collect::<Vec<_>>()
        .join(", ")
}

impl Cx<'_> {
    pub(super) fn step(&self, node: &Node, index: usize) -> Result<Step> {
        let numbered = format!("step {}", index + 1);
        let Some(entries) = node.entries() else {
            return Err(self.type_err(node, "a mapping", &numbered));
        };
        // The id is read before the kind (and so the schema) is known.
        let id_fields = Fields::unchecked(self, node, entries, Place::in_(numbered.clone()));
        let id_node = id_fields.required("id")?;
        let id = self.string(id_node, &id_fields.label("id"))?;
        if !is_identifier(&id) {
            return Err(self.err(
                id_node.pos,
                format!(
                    "invalid step id {id:?}: use lowercase letters, digits and '_', starting with a letter or '_', at most {MAX_ID_LEN} characters (templates read steps.<id>, where '-' would be a minus)"
                ),
            ));
        }
        let step_name = format!("step {id:?}");
        let place = Place::in_(step_name.clone());

        let kinds: Vec<&Entry> = entries
            .iter()
            .filter(|e| StepKind::schema(&e.key).is_some())
            .collect();
        let kind_key = match kinds.as_slice() {
            [] => {
                if let Some(then) = entries.iter().find(|e| e.key == "then") {
                    return Err(self.then_without_if(then, &step_name));
                }
                let kinds = step_kinds();
                return Err(match entries.iter().find(|e| e.key != "id") {
                    Some(stray) => self.err(
                        stray.key_pos,
                        format!(
                            "unknown step kind {:?} in {step_name} (a step has one of: {kinds})",
                            stray.key
                        ),
                    ),
                    None => self.err(
                        node.pos,
                        format!("unknown step kind in {step_name}: it needs one of {kinds}"),
                    ),
                });
            }
            [one] => one,
            [first, second, ..] => {
                return Err(self.err(
                    second.key_pos,
                    format!(
                        "{step_name} has two kinds, {:?} and {:?} (a step has exactly one of: {})",
                        first.key,
                        second.key,
                        step_kinds()
                    ),
                ));
            }
        };
        let Some(allowed) = StepKind::schema(&kind_key.key) else {
            // Unreachable: `kinds` holds only keys with a schema.
            return Err(self.err(kind_key.key_pos, "unknown step kind"));
        };
        if kind_key.key != "if" {
            if let Some(then) = entries.iter().find(|e| e.key == "then") {
                return Err(self.then_without_if(then, &step_name));
            }
        }
        let fields = self.mapping(node, &place, allowed, &step_name)?;
        let value = &kind_key.value;

        let kind = match kind_key.key.as_str() {
            "tool" => {
                let tool = self.string(value, &fields.label("tool"))?;
                let with = match fields.get("with") {
                    Some(node) => self.object(node, &fields.label("with"))?,
                    None => Value::Object(Map::new()),
                };
                StepKind::Tool { tool, with }
            }
            "model" => StepKind::Model(self.model_step(&fields, value, &step_name)?),
            "approval" => StepKind::Approval(self.approval_step(&fields, value, &step_name)?),
            "if" => StepKind::Gate(self.gate_step(&fields, value)?),
            "dedupe" => StepKind::Dedupe(self.dedupe_step(&fields, value, &step_name)?),
            _ => StepKind::Set {
                values: self.object(value, &fields.label("set"))?,
            },
        };
        Ok(Step { id, kind })
    }

    fn then_without_if(&self, then: &Entry, step_name: &str) -> SpecError {
        self.err(
            then.key_pos,
            format!(
                "\"then\" in {step_name} is allowed only together with \"if\" (e.g. if: \"{{{{ input.amount > 100 }}}}\", then: {REQUEST_HUMAN_APPROVAL})"
            ),
        )
    }

    fn model_step(&self, step: &Fields<'_>, node: &Node, step_name: &str) -> Result<ModelStep> {
        let place = Place::in_(format!("the model of {step_name}"));
        let fields = self.mapping(node, &place, &ModelStep::SCHEMA, &step.label("model"))?;
        let prompt = fields.required_string("prompt")?;
        let output = match fields.get("output") {
            Some(node) => match self.choice(node, &fields.label("output"), &["text", "json"])? {
                "json" => ModelOutput::Json,
                _ => ModelOutput::Text,
            },
            None => ModelOutput::Text,
        };
        // As with a tool's approval, an empty `guardrail:` must not mean "no gate".
        let guardrail = match step.entry("guardrail").map(|e| &e.value) {
            Some(node) => {
                let place = Place::in_(format!("the guardrail of {step_name}"));
                let g = self.mapping(node, &place, &Guardrail::SCHEMA, &step.label("guardrail"))?;
                let min_node = g.required("min_confidence")?;
                let label = g.label("min_confidence");
                let min_confidence = match min_node.scalar().map(|s| s.resolved) {
                    Some(Resolved::Int(i)) => i as f64,
                    Some(Resolved::Float(f)) => f,
                    _ => return Err(self.type_err(min_node, "a number", &label)),
                };
                if !(0.0..=1.0).contains(&min_confidence) {
                    return Err(self.err(
                        min_node.pos,
                        format!(
                            "{label} must be between 0 and 1, found {}",
                            min_node.scalar().map_or("", |s| s.text.as_str())
                        ),
                    ));
                }
                let confidence = match g.get("confidence") {
                    Some(node) => {
                        let text = self.string(node, &g.label("confidence"))?;
                        if !text.contains("{{") {
                            return Err(self.err(
                                node.pos,
                                format!(
                                    "{} must be an expression over the output, e.g. \"{DEFAULT_CONFIDENCE}\", found {text:?}",
                                    g.label("confidence")
                                ),
                            ));
                        }
                        text
                    }
                    None => DEFAULT_CONFIDENCE.to_string(),
                };
                let ttl = g.opt_duration("ttl")?;
                self.no_form(&g, "a model step's output is what the model returned")?;
                Some(Guardrail {
                    min_confidence,
                    confidence,
                    message: g.opt_string("message")?,
                    ttl,
                    on_spec_change: self.on_spec_change(&g)?,
                    policy: self.gate_policy(&g, ttl.unwrap_or(self.default_ttl))?,
                })
            }
            None => None,
        };
        Ok(ModelStep {
            prompt,
            system: fields.opt_string("system")?,
            output,
            name: fields.opt_string("name")?,
            base_url: fields.opt_string("base_url")?,
            api_key: fields.opt_string("api_key")?,
            timeout: fields.opt_duration("timeout")?,
            guardrail,
            on_crash: self.on_crash(&fields)?,
        })
    }

    fn approval_step(
        &self,
        step: &Fields<'_>,
        node: &Node,
        step_name: &str,
    ) -> Result<ApprovalStep> {
        if node.is_null() {
            return Ok(ApprovalStep {
                message: None,
                ttl: None,
                payload: None,
                on_reject: OnReject::Fail,
                on_spec_change: None,
                policy: GatePolicy::plain(),
            });
        }
        let place = Place::in_(format!("the approval of {step_name}"));
        let fields = self.mapping(node, &place, &ApprovalStep::SCHEMA, &step.label("approval"))?;
        let on_reject = match fields.get("on_reject") {
            Some(node) => {
                match self.choice(node, &fields.label("on_reject"), &["fail", "continue"])? {
                    "continue" => OnReject::Continue,
                    _ => OnReject::Fail,
                }
            }
            None => OnReject::Fail,
        };
        let ttl = fields.opt_duration("ttl")?;
        Ok(ApprovalStep {
            message: fields.opt_string("message")?,
            ttl,
            payload: self.gate_payload(&fields)?,
            on_reject,
            on_spec_change: self.on_spec_change(&fields)?,
            policy: self.gate_policy(&fields, ttl.unwrap_or(self.default_ttl))?,
        })
    }

    fn gate_step(&self, step: &Fields<'_>, condition_node: &Node) -> Result<GateStep> {
        let condition = self.string(condition_node, &step.label("if"))?;
        if !condition.contains("{{") {
            return Err(self.err(
                condition_node.pos,
                format!(
                    "{} must be an expression in {{{{ }}}}, e.g. \"{{{{ steps.assess.output.amount > 100 }}}}\", found {condition:?}",
                    step.label("if")
                ),
            ));
        }
        let then = step.required("then")?;
        if then.as_str() != Some(REQUEST_HUMAN_APPROVAL) {
            let found = match then.as_str() {
                Some(s) => format!("{s:?}"),
                None => then.type_name().to_string(),
            };
            return Err(self.err(
                then.pos,
                format!(
                    "{} must be {REQUEST_HUMAN_APPROVAL} (the only action an if step takes), found {found}",
                    step.label("then")
                ),
            ));
        }
        let ttl = step.opt_duration("ttl")?;
        Ok(GateStep {
            condition,
            message: step.opt_string("message")?,
            ttl,
            payload: self.gate_payload(step)?,
            on_spec_change: self.on_spec_change(step)?,
            policy: self.gate_policy(step, ttl.unwrap_or(self.default_ttl))?,
        })
    }

    /// The `payload:` of an approval or `if` step: what the person approves
    /// or edits, and what later steps read by field
    /// (`steps.<id>.output.payload.note`). So a mapping, or one whole
    /// `{{ expr }}` (which keeps its value's type) that must give a mapping
    /// when the run pauses (workflow.rs checks that). Plain text, a number,
    /// a list, or text with a template in it (which renders to a string)
    /// can never be one.
    fn gate_payload(&self, fields: &Fields<'_>) -> Result<Option<Value>> {
        let Some(node) = fields.get("payload") else {
            return Ok(None);
        };
        let found = match node.as_str() {
            _ if node.entries().is_some() => return Ok(Some(node.to_value())),
            Some(text) => match expr::shape(text) {
                Shape::Lone(_) => return Ok(Some(node.to_value())),
                Shape::Literal => format!("the text {text:?}"),
                Shape::Mixed => {
                    format!("{text:?}, text with a template in it, which renders to a string")
                }
            },
            None => node.type_name().to_string(),
        };
        Err(self.err(
            node.pos,
            format!(
                "{} must be a mapping of fields, e.g. {{ amount: \"{{{{ input.amount }}}}\" }}, or one expression that gives one, e.g. \"{{{{ steps.draft.output }}}}\"; found {found}",
                fields.label("payload")
            ),
        ))
    }

    fn dedupe_step(&self, step: &Fields<'_>, node: &Node, step_name: &str) -> Result<DedupeStep> {
        let place = Place::in_(format!("the dedupe of {step_name}"));
        let fields = self.mapping(node, &place, &DedupeStep::SCHEMA, &step.label("dedupe"))?;
        let key_node = fields.required("key")?;
        let key = self.non_empty_string(key_node, &fields.label("key"))?;
        let ttl_node = fields.required("ttl")?;
        let ttl = self.duration(ttl_node, &fields.label("ttl"))?;
        let release_on_failure = match fields.get("release_on_failure") {
            Some(node) => self.bool(node, &fields.label("release_on_failure"))?,
            None => true,
        };
        Ok(DedupeStep {
            key,
            ttl,
            release_on_failure,
        })
    }

    /// `on_spec_change: refuse | pin | auto` of the spec's approvals or of
    /// one gate.
    pub(super) fn on_spec_change(&self, fields: &Fields<'_>) -> Result<Option<OnSpecChange>> {
        let Some(node) = fields.get("on_spec_change") else {
            return Ok(None);
        };
        let names: Vec<&str> = OnSpecChange::ALL.iter().map(|p| p.as_str()).collect();
        let chosen = self.choice(node, &fields.label("on_spec_change"), &names)?;
        Ok(OnSpecChange::parse(chosen))
    }

    /// `on_crash: retry | stuck` of a tool or a model step.
    pub(super) fn on_crash(&self, fields: &Fields<'_>) -> Result<Option<OnCrash>> {
        let Some(node) = fields.get("on_crash") else {
            return Ok(None);
        };
        Ok(Some(
            match self.choice(node, &fields.label("on_crash"), &["retry", "stuck"])? {
                "retry" => OnCrash::Retry,
                _ => OnCrash::Stuck,
            },
        ))
    }
}
