//! Marked tree -> typed spec, by hand rather than through serde, so every
//! error can name the exact node: the unknown key, the value of the wrong
//! type, the mapping that lacks a required key.
//!
//! Messages name places in spec terms (`tool "lookup_order"`, `step
//! "refund"`, `approvals.notify.slack`), and an unknown key lists the keys
//! that are allowed where it was found.

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::Value;

use super::marked::{Resolved, Tree};
use super::{ApprovalDefaults, Spec, SpecError, SpecHash, TriggerSpec};
use reader::Place;

mod notify;
mod policy;
mod reader;
mod sections;
mod steps;
mod tools;

type Result<T> = std::result::Result<T, SpecError>;

/// The groups of a spec without `approvals.groups`.
const NO_GROUPS: &BTreeMap<String, Vec<String>> = &BTreeMap::new();

/// A guardrail's `confidence` when it writes none (validate.rs reads it too).
pub const DEFAULT_CONFIDENCE: &str = "{{ output.confidence }}";
/// DNS label length: agent ids end up in hostnames and database rows.
const MAX_ID_LEN: usize = 63;

/// `document` is the tree as JSON, moved in rather than copied: a spec near
/// the size limits should not hold one more copy of itself.
pub fn to_spec(
    tree: &Tree,
    document: Value,
    source: std::sync::Arc<str>,
    origin: &str,
) -> Result<Spec> {
    let cx = Cx {
        origin,
        groups: NO_GROUPS,
        default_ttl: super::DEFAULT_APPROVAL_TTL,
        allow_self_approval: false,
    };
    let top = cx.mapping(&tree.root, &Place::Top, &Spec::SCHEMA, "the spec")?;

    let version_node = top.required("version")?;
    let version = match version_node.scalar().map(|s| s.resolved) {
        Some(Resolved::Int(1)) => 1,
        Some(Resolved::Int(n)) => {
            return Err(cx.err(
                version_node.pos,
                format!("unsupported spec version {n} (this tollgate reads version 1)"),
            ));
        }
        _ => return Err(cx.type_err(version_node, "an integer", &top.label("version"))),
    };

    let agent_node = top.required("agent")?;
    let agent = cx.string(agent_node, &top.label("agent"))?;
    if !is_agent_id(&agent) {
        return Err(cx.err(
            agent_node.pos,
            format!(
                "invalid agent id {agent:?}: use lowercase letters, digits and '-', starting with a letter or digit, not ending with '-', at most {MAX_ID_LEN} characters"
            ),
        ));
    }

    let description = top.opt_string("description")?;
    let trigger = match top.get("trigger") {
        Some(node) => cx.trigger(node)?,
        None => TriggerSpec::default(),
    };
    let approvals = match top.get("approvals") {
        Some(node) => cx.approvals(node)?,
        None => ApprovalDefaults::default(),
    };
    // Gates read the groups and the spec's ttl from here on.
    let cx = Cx {
        origin,
        groups: &approvals.groups,
        default_ttl: approvals.ttl,
        allow_self_approval: approvals.allow_self_approval,
    };
    let model = match top.get("model") {
        Some(node) => Some(cx.model_config(node)?),
        None => None,
    };
    let tools = match top.get("tools") {
        Some(node) => cx.tools(node)?,
        None => BTreeMap::new(),
    };

    let steps_node = top.required("steps")?;
    let Some(items) = steps_node.items() else {
        return Err(cx.type_err(steps_node, "a sequence", &top.label("steps")));
    };
    if items.is_empty() {
        return Err(cx.err(
            steps_node.pos,
            "\"steps\" is empty: a spec needs at least one step",
        ));
    }
    let steps = items
        .iter()
        .enumerate()
        .map(|(i, node)| cx.step(node, i))
        .collect::<Result<Vec<_>>>()?;

    Ok(Spec {
        version,
        agent,
        description,
        trigger,
        approvals,
        model,
        tools,
        steps,
        hash: SpecHash::of_document(&document),
        document,
        source,
    })
}

/// `^[a-z0-9][a-z0-9-]*$`, not ending with '-', at most 63 characters.
fn is_agent_id(id: &str) -> bool {
    let mut chars = id.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_lowercase() || c.is_ascii_digit())
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        && !id.ends_with('-')
        && id.len() <= MAX_ID_LEN
}

/// `^[a-z_][a-z0-9_]*$`, at most 63 characters: step ids are read in
/// templates as `steps.<id>` (a '-' would be a minus there) and tool names
/// become Rust identifiers in an export.
pub fn is_identifier(id: &str) -> bool {
    let mut chars = id.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_lowercase() || c == '_')
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
        && id.len() <= MAX_ID_LEN
}

/// What every reader needs: the spec's origin for errors, and the spec-wide
/// approval defaults gates read. Its methods live in the submodules, one
/// concern each (`reader`, `sections`, `tools`, `steps`, `policy`, `notify`).
struct Cx<'a> {
    origin: &'a str,
    /// `approvals.groups` as written: gates' rules name them.
    groups: &'a BTreeMap<String, Vec<String>>,
    /// `approvals.ttl`: a gate's time when it gives none.
    default_ttl: Duration,
    /// `approvals.allow_self_approval`: a gate's when it writes none.
    allow_self_approval: bool,
}

#[cfg(test)]
mod tests;
