//! The team approval policy as the spec writes it (DESIGN §13):
//! `approvals.groups`, and the policy keys every gate takes (`rules`,
//! `reject`, `allow_self_approval`, `voter_counts_once`, `require_reason`,
//! `on_timeout`, `remind`, `escalate`, `form`).
//!
//! Everything a spec can get wrong here is an error at the value that is
//! wrong, including a set of rules the groups as written can never meet:
//! a quorum is never lowered to what the members can give. What this
//! version of tollgate does not enforce yet is read in full here and
//! refused afterwards, in one place (`unsupported.rs`).

use std::collections::BTreeMap;
use std::time::Duration;

use super::super::marked::Node;
use super::super::schema::{Schema, value};
use super::reader::{Fields, Place};
use super::{Cx, MAX_ID_LEN, Result, is_identifier};
use crate::domain::form::Form;
use crate::domain::policy::{
    Escalation, GatePolicy, OnTimeout, RejectWhen, RequestField, RequestLimits, Roster, RuleSpec,
};
use crate::support::time::format_duration;

/// One `rules:` entry.
const RULE_SCHEMA: Schema = Schema::new(&[value("group"), value("min")]);
/// One `escalate:` entry.
const ESCALATION_SCHEMA: Schema = Schema::new(&[value("after"), value("add")]);

impl Cx<'_> {
    /// `approvals.groups: { finance: [alice, bob], ... }`: names are
    /// identifiers (as tool names are: they become variable names), each
    /// group has members, each member once.
    pub(super) fn groups(&self, fields: &Fields<'_>) -> Result<BTreeMap<String, Vec<String>>> {
        let Some(node) = fields.get("groups") else {
            return Ok(BTreeMap::new());
        };
        let label = fields.label("groups");
        let Some(entries) = node.entries() else {
            return Err(self.type_err(node, "a mapping of group names to members", &label));
        };
        let mut groups = BTreeMap::new();
        for e in entries {
            if !is_identifier(&e.key) {
                return Err(self.err(
                    e.key_pos,
                    format!(
                        "invalid group name {:?} in {label}: use lowercase letters, digits and '_', starting with a letter or '_', at most {MAX_ID_LEN} characters",
                        e.key
                    ),
                ));
            }
            let group = format!("group {:?} in approvals.groups", e.key);
            let Some(items) = e.value.items() else {
                return Err(self.type_err(&e.value, "a sequence of members", &group));
            };
            if items.is_empty() {
                return Err(self.err(
                    e.value.pos,
                    format!("{group} is empty: a rule over it could never be met"),
                ));
            }
            let mut members: Vec<String> = Vec::with_capacity(items.len());
            for (i, item) in items.iter().enumerate() {
                let label = format!("member {} of {group}", i + 1);
                let member = self.non_empty_string(item, &label)?;
                // Token names have neither, and `TOLLGATE_GROUP_<NAME>`
                // splits at commas and trims.
                if member.contains(|c: char| c == ',' || c.is_whitespace()) {
                    return Err(self.err(
                        item.pos,
                        format!("{label} is {member:?}: a member is an API-token name, without commas or spaces"),
                    ));
                }
                if members.contains(&member) {
                    return Err(
                        self.err(item.pos, format!("{member:?} is listed twice in {group}"))
                    );
                }
                members.push(member);
            }
            groups.insert(e.key.clone(), members);
        }
        Ok(groups)
    }

    /// `approvals.requests: {may_set: [...], on_timeout: [...],
    /// max_reminders: N}`: what a gate request may set (DESIGN §13); each
    /// key left out keeps its default. `on_timeout: approve` is refused:
    /// a requester could approve its own request by waiting.
    pub(super) fn request_limits(&self, fields: &Fields<'_>) -> Result<RequestLimits> {
        let mut limits = RequestLimits::default();
        let Some(node) = fields.get("requests") else {
            return Ok(limits);
        };
        let place = Place::in_("approvals.requests");
        let requests = self.mapping(
            node,
            &place,
            &crate::domain::spec::REQUEST_LIMITS_SCHEMA,
            "\"requests\" in approvals",
        )?;
        if let Some(node) = requests.get("may_set") {
            let label = requests.label("may_set");
            let names: Vec<&str> = RequestField::ALL.iter().map(|f| f.as_str()).collect();
            limits.may_set = self
                .distinct_choices(node, &label, &names)?
                .into_iter()
                .filter_map(|(_, chosen)| RequestField::parse(chosen))
                .collect();
        }
        if let Some(node) = requests.get("on_timeout") {
            let label = requests.label("on_timeout");
            let names: Vec<&str> = OnTimeout::ALL.iter().map(|t| t.as_str()).collect();
            let mut allowed = Vec::new();
            for (item, chosen) in self.distinct_choices(node, &label, &names)? {
                match OnTimeout::parse(chosen) {
                    Some(OnTimeout::Approve) => {
                        return Err(self.err(
                            item.pos,
                            format!(
                                "{label} may not hold approve: a request that may time out approved lets whoever asks approve their own request by waiting (a gate in the spec may still write on_timeout: approve)"
                            ),
                        ));
                    }
                    Some(action) => allowed.push(action),
                    None => {}
                }
            }
            limits.on_timeout = allowed;
        }
        if let Some(node) = requests.get("max_reminders") {
            let label = requests.label("max_reminders");
            let max = self.int(node, &label)?;
            limits.max_reminders =
                u32::try_from(max)
                    .ok()
                    .filter(|m| *m <= 99)
                    .ok_or_else(|| {
                        self.err(
                            node.pos,
                            format!("{label} must be from 0 to 99, found {max}"),
                        )
                    })?;
        }
        Ok(limits)
    }

    /// A sequence of distinct words from `choices`, each with its node.
    fn distinct_choices<'n, 'c>(
        &self,
        node: &'n Node,
        label: &str,
        choices: &[&'c str],
    ) -> Result<Vec<(&'n Node, &'c str)>> {
        let Some(items) = node.items() else {
            return Err(self.type_err(node, "a sequence", label));
        };
        let mut chosen: Vec<(&Node, &str)> = Vec::with_capacity(items.len());
        for (i, item) in items.iter().enumerate() {
            let word = self.choice(item, &format!("entry {} of {label}", i + 1), choices)?;
            if chosen.iter().any(|(_, w)| *w == word) {
                return Err(self.err(item.pos, format!("{word:?} is listed twice in {label}")));
            }
            chosen.push((item, word));
        }
        Ok(chosen)
    }

    /// The policy keys of the gate `fields` (a mapping whose schema has
    /// them). `ttl` is the gate's time in force (its own, else the spec's).
    pub(super) fn gate_policy(&self, fields: &Fields<'_>, ttl: Duration) -> Result<GatePolicy> {
        let mut policy = GatePolicy::plain();
        policy.rules = self.rules(fields)?;
        if let Some(node) = fields.get("reject") {
            let names: Vec<&str> = RejectWhen::ALL.iter().map(|r| r.as_str()).collect();
            let chosen = self.choice(node, &fields.label("reject"), &names)?;
            policy.reject = RejectWhen::parse(chosen).unwrap_or_default();
        }
        // As written on the gate, else the spec's `approvals.allow_self_approval`
        // when that opts out (left `None` otherwise: the default, barred).
        policy.allow_self_approval = fields
            .get("allow_self_approval")
            .map(|n| self.bool(n, &fields.label("allow_self_approval")))
            .transpose()?
            .or(self.allow_self_approval.then_some(true));
        if let Some(node) = fields.get("voter_counts_once") {
            policy.voter_counts_once = self.bool(node, &fields.label("voter_counts_once"))?;
        }
        if let Some(node) = fields.get("require_reason") {
            policy.require_reason = self.bool(node, &fields.label("require_reason"))?;
        }
        if let Some(node) = fields.get("on_timeout") {
            let names: Vec<&str> = OnTimeout::ALL.iter().map(|t| t.as_str()).collect();
            let chosen = self.choice(node, &fields.label("on_timeout"), &names)?;
            policy.on_timeout = OnTimeout::parse(chosen).unwrap_or_default();
        }
        policy.remind = self.remind(fields)?;
        policy.escalate = self.escalate(fields, ttl)?;
        policy.form = self.form(fields)?;
        policy.notify = self.gate_notify(fields)?;
        self.satisfiable(fields, &policy)?;
        Ok(policy)
    }

    /// `rules: [{group: finance, min: 2}, ...]`.
    fn rules(&self, fields: &Fields<'_>) -> Result<Vec<RuleSpec>> {
        let Some(node) = fields.get("rules") else {
            return Ok(Vec::new());
        };
        let label = fields.label("rules");
        let Some(items) = node.items() else {
            return Err(self.type_err(node, "a sequence of {group, min}", &label));
        };
        if items.is_empty() {
            return Err(self.err(
                node.pos,
                format!("{label} is empty: omit it for a gate that any approver decides alone"),
            ));
        }
        let mut rules: Vec<RuleSpec> = Vec::with_capacity(items.len());
        for (i, item) in items.iter().enumerate() {
            let what = format!("rule {} in {}", i + 1, fields.place.name());
            let entry = self.mapping(item, &Place::in_(what.clone()), &RULE_SCHEMA, &what)?;
            let group_node = entry.required("group")?;
            let (group, members) = self.known_group(group_node, &entry.label("group"))?;
            if rules.iter().any(|r| r.group == group) {
                return Err(self.err(
                    group_node.pos,
                    format!(
                        "group {group:?} has two rules in {}: write one rule with the larger min",
                        fields.place.name()
                    ),
                ));
            }
            let min_node = entry.required("min")?;
            let min_label = entry.label("min");
            let min = self.int(min_node, &min_label)?;
            if min < 1 {
                return Err(self.err(
                    min_node.pos,
                    format!("{min_label} must be at least 1, found {min}"),
                ));
            }
            if min > members.len() as i128 {
                return Err(self.err(
                    min_node.pos,
                    format!(
                        "{min_label} is {min} but group {group:?} has {} member(s): the rule could never be met",
                        members.len()
                    ),
                ));
            }
            rules.push(RuleSpec {
                group,
                min: u32::try_from(min).unwrap_or(u32::MAX),
            });
        }
        Ok(rules)
    }

    /// A group name that `approvals.groups` defines, with its members.
    fn known_group(&self, node: &Node, label: &str) -> Result<(String, &'_ Vec<String>)> {
        let name = self.string(node, label)?;
        match self.groups.get(&name) {
            Some(members) => Ok((name, members)),
            None => {
                let defined = if self.groups.is_empty() {
                    "approvals.groups defines none".to_string()
                } else {
                    let names: Vec<&str> = self.groups.keys().map(String::as_str).collect();
                    format!("approvals.groups defines: {}", names.join(", "))
                };
                Err(self.err(
                    node.pos,
                    format!("{label}: unknown group {name:?} ({defined})"),
                ))
            }
        }
    }

    /// `remind: [50%, 90%]`: percentages of the gate's time, from 1% to
    /// 99%, ascending.
    fn remind(&self, fields: &Fields<'_>) -> Result<Vec<u8>> {
        let Some(node) = fields.get("remind") else {
            return Ok(Vec::new());
        };
        let label = fields.label("remind");
        let Some(items) = node.items() else {
            return Err(self.type_err(
                node,
                "a sequence of percentages such as [50%, 90%]",
                &label,
            ));
        };
        if items.is_empty() {
            return Err(self.err(
                node.pos,
                format!("{label} is empty: omit it for no reminders"),
            ));
        }
        let mut percents: Vec<u8> = Vec::with_capacity(items.len());
        for item in items {
            let percent = item
                .as_str()
                .and_then(|s| s.trim().strip_suffix('%'))
                .and_then(|n| n.trim().parse::<u8>().ok())
                .filter(|p| (1..=99).contains(p));
            let Some(percent) = percent else {
                let found = match item.as_str() {
                    Some(s) => format!("{s:?}"),
                    None => item.type_name().to_string(),
                };
                return Err(self.err(
                    item.pos,
                    format!(
                        "an entry of {label} must be a percentage of the gate's time from 1% to 99%, such as 50%, found {found}"
                    ),
                ));
            };
            if let Some(last) = percents.last().filter(|last| **last >= percent) {
                return Err(self.err(
                    item.pos,
                    format!("{label} must be ascending: {percent}% comes after {last}%"),
                ));
            }
            percents.push(percent);
        }
        Ok(percents)
    }

    /// `escalate: [{after: 4h, add: [security]}]`: `after` shorter than
    /// the gate's time (else the gate expires first), `add` existing groups.
    fn escalate(&self, fields: &Fields<'_>, ttl: Duration) -> Result<Vec<Escalation>> {
        let Some(node) = fields.get("escalate") else {
            return Ok(Vec::new());
        };
        let label = fields.label("escalate");
        let Some(items) = node.items() else {
            return Err(self.type_err(node, "a sequence of {after, add}", &label));
        };
        if items.is_empty() {
            return Err(self.err(
                node.pos,
                format!("{label} is empty: omit it for no escalation"),
            ));
        }
        let mut escalations = Vec::with_capacity(items.len());
        for (i, item) in items.iter().enumerate() {
            let what = format!("escalation {} in {}", i + 1, fields.place.name());
            let entry = self.mapping(item, &Place::in_(what.clone()), &ESCALATION_SCHEMA, &what)?;
            let after_node = entry.required("after")?;
            let after = self.duration(after_node, &entry.label("after"))?;
            if after >= ttl {
                return Err(self.err(
                    after_node.pos,
                    format!(
                        "{} is {}, not shorter than the gate's ttl of {}: the gate would expire first",
                        entry.label("after"),
                        format_duration(after),
                        format_duration(ttl)
                    ),
                ));
            }
            let add_node = entry.required("add")?;
            let add_label = entry.label("add");
            let Some(names) = add_node.items() else {
                return Err(self.type_err(add_node, "a sequence of group names", &add_label));
            };
            if names.is_empty() {
                return Err(self.err(
                    add_node.pos,
                    format!("{add_label} is empty: name a group to add"),
                ));
            }
            let mut add: Vec<String> = Vec::with_capacity(names.len());
            for name_node in names {
                let (name, _) = self.known_group(name_node, &add_label)?;
                if add.contains(&name) {
                    return Err(self.err(
                        name_node.pos,
                        format!("{add_label} names group {name:?} twice"),
                    ));
                }
                add.push(name);
            }
            escalations.push(Escalation { after, add });
        }
        Ok(escalations)
    }

    /// `form:` a JSON Schema of the approver's input, in the subset
    /// `domain/form.rs` supports; anything outside it is an error at the
    /// keyword, never ignored.
    fn form(&self, fields: &Fields<'_>) -> Result<Option<Form>> {
        let Some(node) = fields.get("form") else {
            return Ok(None);
        };
        let label = fields.label("form");
        if node.entries().is_none() {
            return Err(self.type_err(node, "a mapping (a JSON Schema)", &label));
        }
        Form::parse(&node.to_value()).map(Some).map_err(|e| {
            // The keyword at fault: the key of the last entry the path
            // reaches, else the deepest mapping it reaches.
            let mut at = node;
            let mut pos = node.pos;
            for key in &e.path {
                match at.entry(key) {
                    Some(entry) => {
                        pos = entry.key_pos;
                        at = &entry.value;
                    }
                    None => break,
                }
            }
            let place = if e.path.is_empty() {
                label.clone()
            } else {
                format!("{} in {label}", e.path.join("."))
            };
            self.err(pos, format!("{place}: {}", e.message))
        })
    }

    /// `form:` on a gate whose step output has no place for the approver's
    /// input (a tool's approval, a guardrail): refused, rather than the
    /// input asked for and then dropped. `why` says what the output is.
    pub(super) fn no_form(&self, fields: &Fields<'_>, why: &str) -> Result<()> {
        match fields.entry("form").filter(|e| !e.value.is_null()) {
            Some(entry) => Err(self.err(
                entry.key_pos,
                format!(
                    "{} is not supported on this gate: {why}, so the approver's input would have nowhere to go; ask for input on an approval step (or an if step's request_human_approval), whose output carries it as input",
                    fields.label("form")
                ),
            )),
            None => Ok(()),
        }
    }

    /// The rules can be met by the groups as written, with nobody left out
    /// as a requester (who that is is known only when a run pauses; the
    /// pause checks again then).
    fn satisfiable(&self, fields: &Fields<'_>, policy: &GatePolicy) -> Result<()> {
        let Some(node) = fields.get("rules") else {
            return Ok(());
        };
        match Roster::resolve(policy, self.groups, Vec::new()) {
            Ok(_) => Ok(()),
            Err(e) => Err(self.err(
                node.pos,
                format!("{}: {}", fields.label("rules"), e.message),
            )),
        }
    }
}

#[cfg(test)]
mod tests;
