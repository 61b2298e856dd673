//! What the templates know about a spec: everything they print, computed
//! once, so the templates only lay it out.

use std::collections::BTreeSet;

use serde_json::Value;
use tollgate_runtime::Spec;
use tollgate_runtime::spec::{ModelOutput, StepKind, ToolKind};

use super::env_refs::{EnvVar, env_vars};
use super::gates::{Gate, gates};
use super::layout::{self, LayoutEntry};
use super::{ExportError, lockfile, names, vendored};
use tollgate_runtime::time::format_duration;

pub struct Model<'a> {
    pub spec: &'a Spec,
    pub agent: &'a str,
    /// The Cargo package and binary name.
    pub package: String,
    pub description: Option<&'a str>,
    pub spec_hash: &'a str,
    pub spec_hash_short: &'a str,
    pub steps: Vec<StepRow>,
    pub gates: Vec<Gate>,
    pub env_vars: Vec<EnvVar>,
    pub rust_tools: Vec<RustTool>,
    pub webhook: Option<Webhook>,
    pub schedules: Vec<String>,
    pub default_ttl: String,
    pub approvers: Option<String>,
    pub slack_channel: Option<&'a str>,
    pub files: &'static [LayoutEntry],
    /// The `tokio` requirement of the exported Cargo.toml (the locked minor).
    pub tokio_version: String,
    pub rust_version: &'static str,
    /// A JSON object naming the `input.*` fields the spec reads, for examples.
    pub example_input: String,
}

pub struct StepRow {
    pub number: usize,
    pub id: String,
    pub what: String,
    /// `before` or `after` when the step can pause.
    pub pauses: Option<&'static str>,
}

pub struct RustTool {
    pub name: String,
    pub type_name: String,
    /// `approval: required`: every call pauses first.
    pub approval_required: bool,
}

pub struct Webhook {
    pub path: String,
    /// The environment variable holding the HMAC secret, when it is a `${NAME}`.
    pub secret: Option<String>,
}

impl<'a> Model<'a> {
    pub fn new(spec: &'a Spec) -> Result<Model<'a>, ExportError> {
        let lock_names = lockfile::package_names();
        let package = names::package_name(&spec.agent, |n| lock_names.contains(n));

        let rust_tool_names = spec
            .tools
            .values()
            .filter(|t| matches!(t.kind, ToolKind::Rust))
            .map(|t| t.name.as_str());
        let types = names::type_names(rust_tool_names)?;
        let rust_tools = types
            .into_iter()
            .map(|(name, type_name)| RustTool {
                name: name.to_string(),
                type_name,
                approval_required: spec.tools.get(name).is_some_and(|t| t.approval_required),
            })
            .collect();

        let steps = spec
            .steps
            .iter()
            .enumerate()
            .map(|(i, step)| StepRow {
                number: i + 1,
                id: step.id.clone(),
                what: describe_step(spec, &step.kind),
                pauses: spec.step_can_pause(step).then_some(match &step.kind {
                    StepKind::Model(_) => "after",
                    _ => "before",
                }),
            })
            .collect();

        let webhook = spec.trigger.webhook.as_ref().map(|w| Webhook {
            path: w.path.clone(),
            secret: w.secret.as_deref().map(|s| {
                tollgate_runtime::secrets::references(s)
                    .first()
                    .map(|r| r.name.to_string())
                    .unwrap_or_else(|| "the secret written in agent.yaml".to_string())
            }),
        });

        Ok(Model {
            spec,
            agent: &spec.agent,
            package,
            description: spec.description.as_deref(),
            spec_hash: spec.hash.as_str(),
            spec_hash_short: spec.hash.short(),
            steps,
            gates: gates(spec),
            env_vars: env_vars(spec),
            rust_tools,
            webhook,
            schedules: spec
                .trigger
                .schedule
                .iter()
                .map(|s| s.cron.clone())
                .collect(),
            default_ttl: format_duration(spec.approvals.ttl),
            approvers: spec.approvals.approvers.as_ref().map(|a| {
                a.iter()
                    .map(|n| format!("`{n}`"))
                    .collect::<Vec<_>>()
                    .join(", ")
            }),
            slack_channel: spec
                .approvals
                .notify
                .slack
                .as_ref()
                .map(|s| s.channel.as_str()),
            files: layout::FILES,
            tokio_version: lockfile::tokio_requirement(),
            rust_version: vendored::rust_version().unwrap_or("1.85"),
            example_input: example_input(&spec.document),
        })
    }

    pub fn has_gate(&self) -> bool {
        self.spec.has_gate()
    }
}

fn describe_step(spec: &Spec, kind: &StepKind) -> String {
    match kind {
        StepKind::Tool { tool, .. } => match spec.tools.get(tool).map(|t| &t.kind) {
            Some(ToolKind::Http(h)) => format!("calls tool `{tool}` ({} {})", h.method, h.url),
            Some(ToolKind::Rust) => format!("calls tool `{tool}` (Rust, in `src/custom_tools.rs`)"),
            None => format!("calls tool `{tool}`"),
        },
        StepKind::Model(m) => {
            let output = match m.output {
                ModelOutput::Json => "JSON",
                ModelOutput::Text => "text",
            };
            match &m.guardrail {
                Some(g) => format!(
                    "asks the model ({output}); pauses when confidence < {}",
                    g.min_confidence
                ),
                None => format!("asks the model ({output})"),
            }
        }
        StepKind::Approval(_) => "asks a person to approve".to_string(),
        StepKind::Gate(g) => format!("asks a person to approve when `{}`", g.condition),
        StepKind::Dedupe(d) => format!(
            "skips the run when `{}` was seen in the last {}",
            d.key,
            format_duration(d.ttl)
        ),
        StepKind::Set { .. } => "sets values".to_string(),
    }
}

/// `{"order_id": "..."}` from the `input.<field>` references in the spec.
fn example_input(document: &Value) -> String {
    let mut fields = BTreeSet::new();
    collect_input_fields(document, &mut fields);
    let object: serde_json::Map<String, Value> = fields
        .into_iter()
        .map(|f| (f, Value::String("...".to_string())))
        .collect();
    Value::Object(object).to_string()
}

fn collect_input_fields(value: &Value, out: &mut BTreeSet<String>) {
    match value {
        Value::String(text) => {
            let mut rest = text.as_str();
            while let Some(at) = rest.find("input.") {
                // Only `input.` starting a name: not `myinput.` or `steps.input.`.
                let before = rest[..at].chars().next_back();
                rest = &rest[at + "input.".len()..];
                if before.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_' || c == '.') {
                    continue;
                }
                let field: String = rest
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                    .collect();
                if !field.is_empty() {
                    out.insert(field);
                }
            }
        }
        Value::Array(items) => items.iter().for_each(|v| collect_input_fields(v, out)),
        Value::Object(map) => map.values().for_each(|v| collect_input_fields(v, out)),
        _ => {}
    }
}
