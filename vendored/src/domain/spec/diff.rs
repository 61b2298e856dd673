//! Two versions of one spec compared on their parsed definitions (DESIGN
//! §12): which steps were added, removed, renamed or changed, what a pause
//! made under the old version looks like under the new one, and what the
//! `on_spec_change` policy will do with it.
//!
//! Everything here reads the typed [`Spec`], never the text, so a change of
//! formatting, key order or comments changes nothing. A step is compared
//! with what it uses: a tool step with the tool's definition, a model step
//! with the `model:` settings it falls back to, a gate with the approval
//! settings in force for it (its own, else `approvals:`).
//!
//! Pure functions: `tollgate plan`, `GET /specs/plan`, approve and migrate
//! call them with the two versions they hold.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::groups::named_groups;
use super::{
    ApprovalStep, GateStep, Guardrail, ModelConfig, ModelStep, OnSpecChange, Spec, Step, StepKind,
    ToolSpec,
};
use crate::domain::pending_approval::Phase;
use crate::domain::policy::GatePolicy;

crate::named_enum! {
    /// What differs in a step, in the terms of a gate.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
    #[serde(rename_all = "snake_case")]
    pub enum Change {
        /// The gate's message template.
        Message = "message",
        /// What the person approves or edits: an approval or `if` step's
        /// `payload:`, or the `with:` arguments of a tool gate.
        Payload = "payload",
        /// The call a step makes: the tool it names and the tool's
        /// definition, a tool step's `with:` (when the tool is no gate), a
        /// model call (prompt, system, output, model settings), `on_crash`.
        ToolCall = "tool_call",
        /// How the gate decides: whether the step is a gate at all, an `if`
        /// condition, a guardrail's threshold, `on_reject`, a tool gate's
        /// `when`, its team approval policy (rules, reject, self-approval,
        /// ..., and the members of the groups it names as written), and the
        /// approval settings (TTL, approvers, reminders). A changed
        /// `on_spec_change` is not a change of the gate (see `Settings`).
        Policy = "policy",
        /// Anything else: a `set` or `dedupe` step's definition, another
        /// kind under the same id, or a new place among the other steps.
        Other = "other",
    }
}

crate::named_enum! {
    /// A pause made under the old version, seen from the new one. When
    /// several apply, the first in this order wins: `step_removed`,
    /// `policy_changed`, `payload_changed`, `message_changed`, and
    /// `identical_gate` when none does.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
    #[serde(rename_all = "snake_case")]
    pub enum Classification {
        /// The gate is the same: message, payload, call and policy.
        IdenticalGate = "identical_gate",
        /// Only the message template differs.
        MessageChanged = "message_changed",
        /// What is approved differs: the payload template or the call the
        /// gate guards (its tool, the tool's definition, its model call).
        PayloadChanged = "payload_changed",
        /// How the gate decides differs (see [`Change::Policy`]).
        PolicyChanged = "policy_changed",
        /// The new version has no such gate: no step with the id (or the
        /// id it is mapped to), or one that does not pause the same way
        /// (another kind, another phase, no gate). A renamed-looking step
        /// counts as removed until a mapping names it.
        StepRemoved = "step_removed",
    }
}

crate::named_enum! {
    /// What approving the pause will do once the new version is deployed.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
    #[serde(rename_all = "snake_case")]
    pub enum Outcome {
        /// The two versions are one (same hash): approve works as always.
        Current = "current",
        /// `refuse`: approve answers 409 `spec_changed`; reject works.
        Refused = "refused",
        /// `pin`, or `auto` for a gate that changed: the run resumes on the
        /// version it paused under.
        Pinned = "pinned",
        /// `auto` and the gate is unchanged for the resumed part
        /// ([`gate_unchanged_for_resume`]): the run resumes on the new version.
        MovesToNew = "moves_to_new",
    }
}

crate::named_enum! {
    /// A top-level section of the spec. `steps` is compared step by step.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
    #[serde(rename_all = "snake_case")]
    pub enum TopLevel {
        Agent = "agent",
        Description = "description",
        Trigger = "trigger",
        Approvals = "approvals",
        Model = "model",
        Tools = "tools",
    }
}

/// The step-level difference between two versions.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SpecDiff {
    /// Steps only the new version has (renamed-looking ones left out).
    pub added: Vec<StepRef>,
    /// Steps only the old version has (renamed-looking ones left out).
    pub removed: Vec<StepRef>,
    /// A removed and an added step of the same kind whose definitions are
    /// equal but for the id, where neither could pair with another step.
    /// A guess shown to the operator: a pause at `from` is still
    /// `step_removed` until `--map from=to` says so.
    pub renamed: Vec<RenamedStep>,
    /// Steps in both versions (same id) that differ, in the new order.
    pub changed: Vec<ChangedStep>,
    /// Top-level sections that differ, in the order the spec lists them.
    pub top_level: Vec<TopLevel>,
}

impl SpecDiff {
    pub fn is_empty(&self) -> bool {
        self.added.is_empty()
            && self.removed.is_empty()
            && self.renamed.is_empty()
            && self.changed.is_empty()
            && self.top_level.is_empty()
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StepRef {
    pub id: String,
    /// The key that makes the step its kind: tool, model, approval, if,
    /// dedupe, set.
    pub kind: String,
    /// Position in `steps:` of its version, from 1.
    pub number: usize,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RenamedStep {
    pub from: String,
    pub to: String,
    pub kind: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChangedStep {
    pub id: String,
    /// Its kind in the new version.
    pub kind: String,
    /// Its kind in the old version, when that was another.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub old_kind: Option<String>,
    /// Sorted, each once.
    pub changes: Vec<Change>,
}

/// One pause of the old version under the new one.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PausePlan {
    /// The step it paused at, in the old version.
    pub step: String,
    pub phase: Phase,
    /// The step of the new version it corresponds to (the same id or the
    /// mapped one), when the new version has it.
    pub new_step: Option<String>,
    pub classification: Classification,
    /// The policy in force: the new version's, for this gate.
    pub policy: OnSpecChange,
    pub outcome: Outcome,
}

/// Compare every step and top-level section of `old` and `new`.
pub fn diff(old: &Spec, new: &Spec) -> SpecDiff {
    let in_new: HashMap<&str, &Step> = new.steps.iter().map(|s| (s.id.as_str(), s)).collect();
    let in_old: HashMap<&str, &Step> = old.steps.iter().map(|s| (s.id.as_str(), s)).collect();
    let removed: Vec<(usize, &Step)> = numbered(old)
        .filter(|(_, s)| !in_new.contains_key(s.id.as_str()))
        .collect();
    let added: Vec<(usize, &Step)> = numbered(new)
        .filter(|(_, s)| !in_old.contains_key(s.id.as_str()))
        .collect();
    let renamed = renamed_looking(old, new, &removed, &added);
    let paired_from: BTreeSet<&str> = renamed.iter().map(|r| r.from.as_str()).collect();
    let paired_to: BTreeSet<&str> = renamed.iter().map(|r| r.to.as_str()).collect();

    let moved = moved_steps(old, new);
    let changed = new
        .steps
        .iter()
        .filter_map(|b| {
            let a = in_old.get(b.id.as_str())?;
            let mut changes = compare(old, a, new, b).changes;
            if moved.contains(b.id.as_str()) {
                changes.insert(Change::Other);
            }
            if changes.is_empty() {
                return None;
            }
            let (old_kind, kind) = (a.kind.key(), b.kind.key());
            Some(ChangedStep {
                id: b.id.clone(),
                kind: kind.to_string(),
                old_kind: (old_kind != kind).then(|| old_kind.to_string()),
                changes: changes.into_iter().collect(),
            })
        })
        .collect();

    SpecDiff {
        added: step_refs(&added, &paired_to),
        removed: step_refs(&removed, &paired_from),
        renamed,
        changed,
        top_level: top_level(old, new),
    }
}

/// Classify the pause at `step` (an id of `old`), phase `phase`, under
/// `new`. `map` names a step's id in the new version (old id -> new id);
/// a step it does not name keeps its id. Only the gate itself is looked
/// at, not its place: a change to any other step, or a step added before
/// it, leaves the classification alone (and is what
/// [`gate_unchanged_for_resume`] looks at).
pub fn classify_pause(
    old: &Spec,
    new: &Spec,
    step: &str,
    phase: Phase,
    map: &BTreeMap<String, String>,
) -> Classification {
    let Some((a, b)) = same_gate(old, new, step, phase, map) else {
        return Classification::StepRemoved;
    };
    let changes = compare(old, a, new, b).changes;
    let has = |c: Change| changes.contains(&c);
    // `other` cannot come from two steps that pause the same way (see
    // `compare`); were it to, it must not read as an identical gate.
    if has(Change::Policy) || has(Change::Other) {
        Classification::PolicyChanged
    } else if has(Change::Payload) || has(Change::ToolCall) {
        Classification::PayloadChanged
    } else if has(Change::Message) {
        Classification::MessageChanged
    } else {
        Classification::IdenticalGate
    }
}

/// The `auto` policy's rule: may the pause at `step`/`phase` of `old`
/// resume on `new`? True only when the run, moved, would go on exactly as
/// if it had paused under `new`:
///
/// - the same agent (templates read `run.agent`);
/// - the gate: the step (same id, or the one `map` names) at the same
///   position, of the same kind, pausing at the same phase, with the same
///   message and payload templates, the same call (tool and its
///   definition, model call) and the same decision rules (an `if`
///   condition, a guardrail's threshold, `on_reject`, a tool gate's
///   `when`, and the team approval policy: its rules, how rejects and
///   timeouts end it, escalations, the form, and the members of the groups
///   it names. A pause's roster was resolved from these, so moving it past
///   a change of who decides would count votes under rules nobody set).
///   Only the approval settings may differ (TTL, approvers, reminders;
///   `on_spec_change` is never compared): they decide
///   who may approve and until when, not what the run computes;
/// - every step before it: the same ids, kinds and definitions (with the
///   tools and model settings they use), in the same order, under the
///   same rule. The run's stored outputs came from the old steps, and the
///   new version's later steps read them.
///
/// The rule is deliberately the whole prefix rather than "the steps the
/// rest reads": a template may read `steps` whole (`{{ steps | tojson }}`),
/// a run's result holds every step's output, and a `dedupe` step's claim
/// is a side effect no template shows, so reading the templates would not
/// be exact. `map` renames the paused step only: earlier steps keep their
/// ids, because the run's outputs are stored under them.
pub fn gate_unchanged_for_resume(
    old: &Spec,
    new: &Spec,
    step: &str,
    phase: Phase,
    map: &BTreeMap<String, String>,
) -> bool {
    if old.agent != new.agent {
        return false;
    }
    let Some((a, b)) = same_gate(old, new, step, phase, map) else {
        return false;
    };
    let (Some(i), Some(j)) = (old.step_index(&a.id), new.step_index(&b.id)) else {
        return false;
    };
    i == j
        && !compare(old, a, new, b).beyond_settings
        && old.steps[..i]
            .iter()
            .zip(&new.steps[..j])
            .all(|(x, y)| x.id == y.id && !compare(old, x, new, y).beyond_settings)
}

/// The policy in force for a pause at `step` of `old` once `new` is
/// deployed: the new version's, since that is the spec being deployed and
/// the one its author just wrote. The gate's own `on_spec_change` in the
/// new version (its mapped step), else the new `approvals.on_spec_change`,
/// which is also what a gate gone from the new version gets.
pub fn policy_for_pause(new: &Spec, step: &str, map: &BTreeMap<String, String>) -> OnSpecChange {
    match new_step(new, step, map) {
        Some(b) => new.on_spec_change(b),
        None => new.approvals.on_spec_change,
    }
}

/// Everything `plan` shows for one pause: its classification, the policy
/// in force and what approving it will do.
pub fn plan_pause(
    old: &Spec,
    new: &Spec,
    step: &str,
    phase: Phase,
    map: &BTreeMap<String, String>,
) -> PausePlan {
    let policy = policy_for_pause(new, step, map);
    let outcome = if old.hash == new.hash {
        Outcome::Current
    } else {
        match policy {
            OnSpecChange::Refuse => Outcome::Refused,
            OnSpecChange::Pin => Outcome::Pinned,
            OnSpecChange::Auto if gate_unchanged_for_resume(old, new, step, phase, map) => {
                Outcome::MovesToNew
            }
            OnSpecChange::Auto => Outcome::Pinned,
        }
    };
    PausePlan {
        step: step.to_string(),
        phase,
        new_step: new_step(new, step, map).map(|s| s.id.clone()),
        classification: classify_pause(old, new, step, phase, map),
        policy,
        outcome,
    }
}

/// The step of `new` that `step` of the old version corresponds to.
fn new_step<'s>(new: &'s Spec, step: &str, map: &BTreeMap<String, String>) -> Option<&'s Step> {
    let id = map.get(step).map_or(step, String::as_str);
    new.steps.iter().find(|s| s.id == id)
}

/// The old and new step of a pause when both pause the same way (same
/// gate kind, and the phase the pause was made at).
fn same_gate<'o, 'n>(
    old: &'o Spec,
    new: &'n Spec,
    step: &str,
    phase: Phase,
    map: &BTreeMap<String, String>,
) -> Option<(&'o Step, &'n Step)> {
    let a = old.steps.iter().find(|s| s.id == step)?;
    let b = new_step(new, step, map)?;
    let (gate_a, gate_b) = (gate_of(old, a)?, gate_of(new, b)?);
    (gate_a == gate_b && gate_a.1 == phase).then_some((a, b))
}

/// Which of the four gates a step is, and when it pauses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum GateKind {
    /// A tool with `approval: required`.
    Tool,
    /// A model step's guardrail.
    Guardrail,
    Approval,
    If,
}

fn gate_of(spec: &Spec, step: &Step) -> Option<(GateKind, Phase)> {
    match &step.kind {
        StepKind::Approval(_) => Some((GateKind::Approval, Phase::Before)),
        StepKind::Gate(_) => Some((GateKind::If, Phase::Before)),
        StepKind::Model(m) => m
            .guardrail
            .as_ref()
            .map(|_| (GateKind::Guardrail, Phase::After)),
        StepKind::Tool { tool, .. } => spec
            .tools
            .get(tool)
            .filter(|t| t.approval_required)
            .map(|_| (GateKind::Tool, Phase::Before)),
        StepKind::Dedupe(_) | StepKind::Set { .. } => None,
    }
}

/// A gate's approval settings as in force: its own, else the spec's.
/// `on_spec_change` is not one of them: it says what a deploy does to the
/// gate's pauses, not how the gate decides, and the policy in force is the
/// new version's whatever the old one said ([`policy_for_pause`]). Were it
/// compared, adopting `pin` in a deploy would show every gate as
/// `policy_changed` and hide what really changed in it.
#[derive(Debug, PartialEq)]
struct Settings<'s> {
    ttl: Duration,
    approvers: Option<&'s Vec<String>>,
}

fn settings<'s>(spec: &'s Spec, step: &Step) -> Settings<'s> {
    let own_ttl = match &step.kind {
        StepKind::Approval(a) => a.ttl,
        StepKind::Gate(g) => g.ttl,
        StepKind::Model(m) => m.guardrail.as_ref().and_then(|g| g.ttl),
        StepKind::Tool { tool, .. } => spec.tools.get(tool).and_then(|t| t.ttl),
        StepKind::Dedupe(_) | StepKind::Set { .. } => None,
    };
    Settings {
        ttl: own_ttl.unwrap_or(spec.approvals.ttl),
        approvers: spec.approvals.approvers.as_ref(),
    }
}

/// How two definitions of one step differ (their ids aside).
#[derive(Debug, Default)]
struct StepDelta {
    changes: BTreeSet<Change>,
    /// Something differs besides the approval settings (TTL, approvers),
    /// which decide who may approve and until when but
    /// nothing a run computes.
    beyond_settings: bool,
}

impl StepDelta {
    fn note(&mut self, differs: bool, change: Change) {
        if differs {
            self.changes.insert(change);
            self.beyond_settings = true;
        }
    }

    fn note_settings(&mut self, differ: bool) {
        if differ {
            self.changes.insert(Change::Policy);
        }
    }
}

/// Compare step `a` of `old` with step `b` of `new`, each with what it
/// uses from its spec. Two steps that pause the same way never differ by
/// `other`: each of their fields is a message, a payload, a call or a
/// policy.
///
/// Every struct is taken apart field by field, so a field added to the
/// spec language does not compile here until it is given a place: a field
/// this comparison skipped would let `auto` move a run past a change.
fn compare(old: &Spec, a: &Step, new: &Spec, b: &Step) -> StepDelta {
    let mut d = StepDelta::default();
    let (gate_a, gate_b) = (gate_of(old, a), gate_of(new, b));
    if a.kind.key() != b.kind.key() {
        d.note(true, Change::Other);
        return d;
    }
    // A gate added or taken away (a tool's `approval: required`, a
    // guardrail). The TTLs and policies of two gates are compared as in
    // force, in `settings`.
    d.note(gate_a != gate_b, Change::Policy);
    if gate_a.is_some() && gate_b.is_some() {
        d.note_settings(settings(old, a) != settings(new, b));
        if let (Some(x), Some(y)) = (old.policy_of(a), new.policy_of(b)) {
            compare_policies(&mut d, old, x, new, y);
        }
    }
    match (&a.kind, &b.kind) {
        (
            StepKind::Tool {
                tool: tool_a,
                with: with_a,
            },
            StepKind::Tool {
                tool: tool_b,
                with: with_b,
            },
        ) => {
            // A tool gate's payload is the call's arguments.
            let arguments = if gate_a.is_some() || gate_b.is_some() {
                Change::Payload
            } else {
                Change::ToolCall
            };
            d.note(with_a != with_b, arguments);
            d.note(tool_a != tool_b, Change::ToolCall);
            match (old.tools.get(tool_a), new.tools.get(tool_b)) {
                (Some(x), Some(y)) => compare_tools(&mut d, x, y),
                // A validated spec defines every tool its steps name.
                _ => d.note(true, Change::ToolCall),
            }
        }
        (StepKind::Model(x), StepKind::Model(y)) => {
            d.note(model_call(old, x) != model_call(new, y), Change::ToolCall);
            if let (Some(g), Some(h)) = (&x.guardrail, &y.guardrail) {
                let Guardrail {
                    min_confidence,
                    confidence,
                    message,
                    ttl: _,
                    on_spec_change: _,
                    policy: _,
                } = g;
                d.note(*message != h.message, Change::Message);
                d.note(
                    *min_confidence != h.min_confidence || *confidence != h.confidence,
                    Change::Policy,
                );
            }
        }
        (StepKind::Approval(x), StepKind::Approval(y)) => {
            let ApprovalStep {
                message,
                ttl: _,
                payload,
                on_reject,
                on_spec_change: _,
                policy: _,
            } = x;
            d.note(*message != y.message, Change::Message);
            d.note(*payload != y.payload, Change::Payload);
            d.note(*on_reject != y.on_reject, Change::Policy);
        }
        (StepKind::Gate(x), StepKind::Gate(y)) => {
            let GateStep {
                condition,
                message,
                ttl: _,
                payload,
                on_spec_change: _,
                policy: _,
            } = x;
            d.note(*condition != y.condition, Change::Policy);
            d.note(*message != y.message, Change::Message);
            d.note(*payload != y.payload, Change::Payload);
        }
        (StepKind::Dedupe(x), StepKind::Dedupe(y)) => d.note(x != y, Change::Other),
        (StepKind::Set { values: x }, StepKind::Set { values: y }) => d.note(x != y, Change::Other),
        // Kinds were compared above.
        _ => d.note(true, Change::Other),
    }
    d
}

/// The definitions of the tool two tool steps call (names compared by the
/// caller). `approval`, `ttl`, `on_spec_change` and the policy belong to
/// the gate: `gate_of`, `settings` and `compare_policies`.
fn compare_tools(d: &mut StepDelta, x: &ToolSpec, y: &ToolSpec) {
    let ToolSpec {
        name: _,
        kind,
        approval_required: _,
        when,
        policy: _,
        message,
        ttl: _,
        idempotent,
        on_crash: _,
        on_spec_change: _,
    } = x;
    d.note(
        *kind != y.kind || *idempotent != y.idempotent || x.on_crash() != y.on_crash(),
        Change::ToolCall,
    );
    d.note(*message != y.message, Change::Message);
    // Whether the gate fires at all.
    d.note(*when != y.when, Change::Policy);
}

/// The team approval policies of two gates (DESIGN §13), with the members
/// as written of the groups each names: all of it decides who may vote and
/// what settles the gate, except `remind`, which only says when to nudge
/// (a setting, as the TTL is).
fn compare_policies(d: &mut StepDelta, old: &Spec, x: &GatePolicy, new: &Spec, y: &GatePolicy) {
    let GatePolicy {
        rules,
        reject,
        allow_self_approval: _,
        voter_counts_once,
        require_reason,
        on_timeout,
        remind,
        escalate,
        form,
        // Where its notices go: who hears, not who decides or what. Like
        // `approvals.notify.slack`, it is no change of the gate, so `auto`
        // moves a pause past it (the pause keeps the routes it stored).
        notify: _,
    } = x;
    let members = |spec: &Spec, policy: &GatePolicy| -> Vec<(String, Vec<String>)> {
        named_groups(policy)
            .into_iter()
            .map(|g| {
                let written = spec.approvals.groups.get(g).cloned().unwrap_or_default();
                (g.to_string(), written)
            })
            .collect()
    };
    d.note(
        *rules != y.rules
            || *reject != y.reject
            // As in force: an omitted `allow_self_approval` is its default.
            || x.self_approval_allowed() != y.self_approval_allowed()
            || *voter_counts_once != y.voter_counts_once
            || *require_reason != y.require_reason
            || *on_timeout != y.on_timeout
            || *escalate != y.escalate
            || *form != y.form
            || members(old, x) != members(new, y),
        Change::Policy,
    );
    d.note_settings(*remind != y.remind);
}

/// The model call as the engine makes it: the step's settings, each
/// falling back to the spec's `model:` (engine/tools/model/endpoint.rs).
/// The guardrail is the gate, compared apart.
fn model_call<'s>(spec: &'s Spec, m: &'s ModelStep) -> impl PartialEq + 's {
    let ModelStep {
        prompt,
        system,
        output,
        name,
        base_url,
        api_key,
        timeout,
        guardrail: _,
        on_crash: _,
    } = m;
    let shared = spec.model.as_ref();
    let setting = move |own: &'s Option<String>, of: fn(&ModelConfig) -> &Option<String>| {
        own.as_ref().or_else(|| shared.and_then(|c| of(c).as_ref()))
    };
    (
        (prompt, system, *output, m.on_crash()),
        setting(name, |c| &c.name),
        setting(base_url, |c| &c.base_url),
        setting(api_key, |c| &c.api_key),
        timeout.or_else(|| shared.and_then(|c| c.timeout)),
    )
}

fn numbered(spec: &Spec) -> impl Iterator<Item = (usize, &Step)> {
    spec.steps.iter().enumerate().map(|(i, s)| (i + 1, s))
}

fn step_refs(steps: &[(usize, &Step)], leave_out: &BTreeSet<&str>) -> Vec<StepRef> {
    steps
        .iter()
        .filter(|(_, s)| !leave_out.contains(s.id.as_str()))
        .map(|(number, s)| StepRef {
            id: s.id.clone(),
            kind: s.kind.key().to_string(),
            number: *number,
        })
        .collect()
}

/// Pairs of a removed and an added step that are equal but for the id,
/// kept only where the pairing is unambiguous: the removed step equals
/// exactly one added step and that one equals no other removed step.
fn renamed_looking(
    old: &Spec,
    new: &Spec,
    removed: &[(usize, &Step)],
    added: &[(usize, &Step)],
) -> Vec<RenamedStep> {
    let equal: Vec<Vec<usize>> = removed
        .iter()
        .map(|(_, a)| {
            added
                .iter()
                .enumerate()
                .filter(|(_, (_, b))| compare(old, a, new, b).changes.is_empty())
                .map(|(k, _)| k)
                .collect()
        })
        .collect();
    removed
        .iter()
        .zip(&equal)
        .filter_map(|((_, a), candidates)| {
            let [k] = candidates.as_slice() else {
                return None;
            };
            let claimed = equal.iter().filter(|c| c.contains(k)).count();
            (claimed == 1).then(|| RenamedStep {
                from: a.id.clone(),
                to: added[*k].1.id.clone(),
                kind: a.kind.key().to_string(),
            })
        })
        .collect()
}

/// The steps of both versions whose place among the other common steps
/// changed: all but a longest run of common steps kept in the same order
/// (a longest increasing subsequence of their new positions, so moving
/// one step marks that step only).
fn moved_steps<'n>(old: &Spec, new: &'n Spec) -> BTreeSet<&'n str> {
    let in_old: BTreeSet<&str> = old.steps.iter().map(|s| s.id.as_str()).collect();
    let common_new: Vec<&str> = new
        .steps
        .iter()
        .map(|s| s.id.as_str())
        .filter(|id| in_old.contains(id))
        .collect();
    let new_position: HashMap<&str, usize> = common_new
        .iter()
        .enumerate()
        .map(|(i, id)| (*id, i))
        .collect();
    // New positions, in the old order.
    let positions: Vec<usize> = old
        .steps
        .iter()
        .filter_map(|s| new_position.get(s.id.as_str()).copied())
        .collect();
    // Patience sorting: tails[len - 1] ends the increasing run of that
    // length with the smallest last value; `before` links each back.
    let mut tails: Vec<usize> = Vec::new();
    let mut before: Vec<Option<usize>> = vec![None; positions.len()];
    for (i, &p) in positions.iter().enumerate() {
        let at = tails.partition_point(|&t| positions[t] < p);
        if at > 0 {
            before[i] = Some(tails[at - 1]);
        }
        if at == tails.len() {
            tails.push(i);
        } else {
            tails[at] = i;
        }
    }
    let mut kept = vec![false; positions.len()];
    let mut at = tails.last().copied();
    while let Some(i) = at {
        kept[i] = true;
        at = before[i];
    }
    positions
        .iter()
        .zip(kept)
        .filter(|(_, kept)| !kept)
        .map(|(&p, _)| common_new[p])
        .collect()
}

fn top_level(old: &Spec, new: &Spec) -> Vec<TopLevel> {
    [
        (TopLevel::Agent, old.agent != new.agent),
        (TopLevel::Description, old.description != new.description),
        (TopLevel::Trigger, old.trigger != new.trigger),
        (TopLevel::Approvals, old.approvals != new.approvals),
        (TopLevel::Model, old.model != new.model),
        (TopLevel::Tools, old.tools != new.tools),
    ]
    .into_iter()
    .filter_map(|(section, differs)| differs.then_some(section))
    .collect()
}

#[cfg(test)]
mod tests;
