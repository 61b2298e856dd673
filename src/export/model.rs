//! What the templates know about a spec: everything they print, computed
//! once, so the templates only lay it out.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Map, Value};
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
    /// `approvals.on_spec_change`: what approving a pause made under an
    /// older spec version does (the README's "Deploying a changed spec").
    pub on_spec_change: &'static str,
    /// The gates whose own `on_spec_change` differs from it, as
    /// `(step, policy)`.
    pub on_spec_change_overrides: Vec<(String, &'static str)>,
    pub slack_channel: Option<&'a str>,
    /// The files of the export, as its README lists them.
    pub files: Vec<&'static LayoutEntry>,
    /// The `tokio` requirement of the exported Cargo.toml (the locked minor).
    pub tokio_version: String,
    pub rust_version: &'static str,
    /// The runtime's optional features the spec uses (`Spec::needed_features`),
    /// each with the first place that needs it: the exported Cargo.toml
    /// turns on these and no others, so code the spec cannot reach is not
    /// compiled.
    pub runtime_features: Vec<RuntimeFeature>,
    /// A JSON object naming the `input.*` fields the spec reads, for examples.
    pub example_input: String,
    /// What the export's workflow test (tests/workflow.rs) stubs and decides.
    pub workflow: WorkflowTest,
}

/// An optional runtime feature an export turns on, and why.
pub struct RuntimeFeature {
    /// As written in Cargo.toml (`http-client`).
    pub name: &'static str,
    /// The first place in the spec that needs it.
    pub needed_at: String,
}

impl Model<'_> {
    /// The `features = [...]` list of the runtime dependency, empty when
    /// the spec needs none.
    pub fn runtime_features_toml(&self) -> String {
        let names: Vec<String> = self
            .runtime_features
            .iter()
            .map(|f| format!("\"{}\"", f.name))
            .collect();
        names.join(", ")
    }
}

/// The workflow test written into an export (`tests/workflow.rs`): every
/// tool and model step answered by a stub shaped like what the spec reads
/// of its output, and the spec's first gate.
pub struct WorkflowTest {
    /// Reply by tool name, for every tool a step calls.
    pub tool_replies: Map<String, Value>,
    /// Reply by step id, for every model step.
    pub model_replies: Map<String, Value>,
    /// The first step that surely pauses with these stubs: an approval
    /// step, a tool with `approval: required`, or a guardrail (its stub
    /// answers with confidence 0). `if:` gates before it are approved.
    pub first_gate: Option<String>,
}

impl WorkflowTest {
    /// `{"tools": {...}, "models": {...}}`, pretty-printed.
    pub fn stubs_json(&self) -> String {
        let stubs = serde_json::json!({
            "tools": self.tool_replies,
            "models": self.model_replies,
        });
        serde_json::to_string_pretty(&stubs).unwrap_or_else(|_| stubs.to_string())
    }
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
    /// Its module in `src/tools/mod.rs`, and the `#[path]` of its file when
    /// the module name is not the file's.
    pub module: String,
    pub module_path: Option<String>,
    /// `src/tools/<name>.rs`.
    pub file: String,
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
            .map(|(name, type_name)| {
                let module = names::tool_module(name);
                RustTool {
                    name: name.to_string(),
                    type_name,
                    file: format!("src/tools/{}", module.file),
                    module_path: module.path_attr().map(str::to_string),
                    module: module.ident,
                    approval_required: spec.tools.get(name).is_some_and(|t| t.approval_required),
                }
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

        let gates = gates(spec);
        let on_spec_change_overrides = gates
            .iter()
            .filter(|g| g.on_spec_change != spec.approvals.on_spec_change)
            .map(|g| (g.step.clone(), g.on_spec_change.as_str()))
            .collect();

        Ok(Model {
            spec,
            agent: &spec.agent,
            package,
            description: spec.description.as_deref(),
            spec_hash: spec.hash.as_str(),
            spec_hash_short: spec.hash.short(),
            steps,
            gates,
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
            on_spec_change: spec.approvals.on_spec_change.as_str(),
            on_spec_change_overrides,
            slack_channel: spec
                .approvals
                .notify
                .slack
                .as_ref()
                .map(|s| s.channel.as_str()),
            files: layout::listed(),
            tokio_version: lockfile::tokio_requirement(),
            rust_version: vendored::rust_version().unwrap_or("1.85"),
            runtime_features: spec
                .needed_features()
                .into_iter()
                .map(|n| RuntimeFeature {
                    name: n.feature.name(),
                    needed_at: n.at,
                })
                .collect(),
            example_input: example_input(&spec.document),
            workflow: workflow_test(spec),
        })
    }

    pub fn has_gate(&self) -> bool {
        self.spec.has_gate()
    }

    /// The spec names approval groups (team approvals, DESIGN §13).
    pub fn has_groups(&self) -> bool {
        !self.spec.approvals.groups.is_empty()
    }

    /// The variables `serve` needs set before it starts (referenced
    /// without a default somewhere in the spec): its start-up preflight
    /// refuses to serve while one is unset.
    pub fn required_env_vars(&self) -> Vec<String> {
        self.spec
            .required_secrets()
            .into_iter()
            .map(|required| required.name)
            .collect()
    }
}

fn describe_step(spec: &Spec, kind: &StepKind) -> String {
    match kind {
        StepKind::Tool { tool, .. } => match spec.tools.get(tool).map(|t| &t.kind) {
            Some(ToolKind::Http(h)) => format!("calls tool `{tool}` ({} {})", h.method, h.url),
            Some(ToolKind::Rust) => format!(
                "calls tool `{tool}` (Rust, in `src/tools/{}`)",
                names::tool_module(tool).file
            ),
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

/// What the export's workflow test stubs: each tool and model step answers
/// with an object holding every `steps.<id>.output.<path>` the spec reads
/// (numbers, which templates print and conditions compare), and a
/// guardrail's step a confidence of 0 at the first gate (so it pauses) and
/// 1 elsewhere.
fn workflow_test(spec: &Spec) -> WorkflowTest {
    let mut read: BTreeMap<String, Value> = BTreeMap::new();
    collect_output_paths(&spec.document, &mut read);
    let first_gate = spec
        .steps
        .iter()
        .filter(|step| spec.step_can_pause(step))
        .find(|step| match &step.kind {
            StepKind::Gate(_) => false,
            StepKind::Model(m) => m.guardrail.as_ref().is_some_and(|g| g.min_confidence > 0.0),
            _ => true,
        })
        .map(|step| step.id.clone());
    let reply = |step: &str| {
        read.get(step)
            .cloned()
            .unwrap_or_else(|| Value::Object(Map::new()))
    };
    let mut tool_replies = Map::new();
    let mut model_replies = Map::new();
    for step in &spec.steps {
        match &step.kind {
            StepKind::Tool { tool, .. } => {
                let entry = tool_replies
                    .entry(tool.clone())
                    .or_insert_with(|| Value::Object(Map::new()));
                merge_shape(entry, reply(&step.id));
            }
            StepKind::Model(m) => {
                let mut output = reply(&step.id);
                if m.guardrail.is_some() {
                    let confidence = if first_gate.as_deref() == Some(step.id.as_str()) {
                        0
                    } else {
                        1
                    };
                    merge_shape(&mut output, serde_json::json!({ "confidence": confidence }));
                }
                model_replies.insert(step.id.clone(), output);
            }
            _ => {}
        }
    }
    WorkflowTest {
        tool_replies,
        model_replies,
        first_gate,
    }
}

/// Every `steps.<id>.output.<a>.<b>` in the spec's strings, as nested
/// objects by step id with 1 at the leaves.
fn collect_output_paths(value: &Value, out: &mut BTreeMap<String, Value>) {
    match value {
        Value::String(text) => {
            let mut rest = text.as_str();
            while let Some(at) = rest.find("steps.") {
                let before = rest[..at].chars().next_back();
                rest = &rest[at + "steps.".len()..];
                if before.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_' || c == '.') {
                    continue;
                }
                let path: String = rest
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'))
                    .collect();
                let mut parts = path.split('.').filter(|p| !p.is_empty());
                let (Some(step), Some("output")) = (parts.next(), parts.next()) else {
                    continue;
                };
                let fields: Vec<&str> = parts.collect();
                let mut shape = Value::from(1);
                for field in fields.iter().rev() {
                    let mut object = Map::new();
                    object.insert((*field).to_string(), shape);
                    shape = Value::Object(object);
                }
                if !shape.is_object() {
                    shape = Value::Object(Map::new());
                }
                let entry = out
                    .entry(step.to_string())
                    .or_insert_with(|| Value::Object(Map::new()));
                merge_shape(entry, shape);
            }
        }
        Value::Array(items) => items.iter().for_each(|v| collect_output_paths(v, out)),
        Value::Object(map) => map.values().for_each(|v| collect_output_paths(v, out)),
        _ => {}
    }
}

/// Merge `more` into `into`: objects field by field; an object wins over a
/// leaf (a path read both whole and by field).
fn merge_shape(into: &mut Value, more: Value) {
    match (into, more) {
        (Value::Object(a), Value::Object(b)) => {
            for (k, v) in b {
                match a.get_mut(&k) {
                    Some(existing) => merge_shape(existing, v),
                    None => {
                        a.insert(k, v);
                    }
                }
            }
        }
        (into @ Value::Number(_), more @ Value::Object(_)) => *into = more,
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn workflow_stubs_answer_with_what_the_spec_reads_and_the_first_sure_gate() {
        let yaml = r#"
version: 1
agent: a
model:
  base_url: http://127.0.0.1:9/v1
  name: m
tools:
  look:
    http: { url: "http://127.0.0.1:9/{{ args.id }}" }
  pay:
    http: { method: POST, url: "http://127.0.0.1:9/pay" }
    approval: required
steps:
  - id: find
    tool: look
    with: { id: "{{ input.id }}" }
  - id: assess
    model: { prompt: "{{ steps.find.output.order.total }} {{ steps.find.output | tojson }}", output: json }
    guardrail: { min_confidence: 0.5 }
  - id: big
    if: "{{ steps.assess.output.amount > 100 }}"
    then: request_human_approval
  - id: refund
    tool: pay
    with: { amount: "{{ steps.assess.output.amount }}", n: "{{ steps.find.output.order.n }}" }
"#;
        let spec = Spec::parse(yaml, "agent.yaml").unwrap();
        let w = workflow_test(&spec);
        let stubs: Value = serde_json::from_str(&w.stubs_json()).unwrap();
        assert_eq!(
            stubs,
            serde_json::json!({
                "tools": { "look": { "order": { "n": 1, "total": 1 } }, "pay": {} },
                "models": { "assess": { "amount": 1, "confidence": 0 } },
            })
        );
        assert_eq!(w.first_gate.as_deref(), Some("assess"));
    }
}
