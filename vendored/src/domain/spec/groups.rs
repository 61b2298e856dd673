//! The approval groups in force: `approvals.groups` as written, each
//! group's members replaced by `TOLLGATE_GROUP_<NAME>` when that is set,
//! so an exported server changes who decides without a rebuild.
//!
//! Parsing stays pure: the environment comes in as a function, read where
//! the spec is loaded to serve or run it. An override never lowers a
//! quorum: a set but empty variable is an error, and so is one that leaves
//! a gate's rules unmet, naming the variable, the gate and the rule.

use std::collections::BTreeSet;

use super::{Spec, Step, StepKind};
use crate::domain::policy::{GatePolicy, Groups, Roster};
use crate::support::env;

/// Why the groups in force cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PolicyError {
    #[error(
        "{variable} is set but empty: it would leave group {group:?} without members (unset it to use the members the spec lists)"
    )]
    EmptyGroup { variable: String, group: String },
    #[error(
        "{variable} has an empty member (entry {entry}): list members by API-token name, separated by commas"
    )]
    EmptyMember { variable: String, entry: usize },
    #[error("{variable} lists {member:?}: a member is an API-token name, without spaces")]
    BadMember { variable: String, member: String },
    #[error("{variable} lists {member:?} twice")]
    DuplicateMember { variable: String, member: String },
    /// A gate's rule asks more of a group than its members can give.
    #[error("{variable} has {} but {gate} needs {min} of {group}", members_text(*.members))]
    TooFewMembers {
        variable: String,
        members: usize,
        gate: String,
        min: u32,
        group: String,
    },
    /// Another way the members in force leave a gate's rules unmet (a
    /// member shared between two rules who counts once).
    #[error("with the members from {variables}, {gate} can never be approved: {message}")]
    Unsatisfiable {
        /// The overriding variables of the gate's groups, comma-separated.
        variables: String,
        gate: String,
        message: String,
    },
}

impl Spec {
    /// The groups in force: `approvals.groups`, each group's members
    /// replaced by `env(TOLLGATE_GROUP_<NAME>)` (comma-separated, trimmed)
    /// when it returns a value. A variable for a group the spec does not
    /// define is never asked for. Every gate's rules are checked against
    /// the result as at validate.
    pub fn resolve_groups(
        &self,
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<Groups, PolicyError> {
        let mut groups = Groups::new();
        let mut overridden = BTreeSet::new();
        for (group, written) in &self.approvals.groups {
            let variable = env::group_members(group);
            let members = match env(&variable) {
                Some(text) => {
                    overridden.insert(group.as_str());
                    members_from(&text, &variable, group)?
                }
                None => written.clone(),
            };
            groups.insert(group.clone(), members);
        }
        if overridden.is_empty() {
            return Ok(groups);
        }
        for (gate, policy) in self.gates() {
            let Err(unmet) = Roster::resolve(policy, &groups, Vec::new()) else {
                continue;
            };
            let variables: Vec<String> = named_groups(policy)
                .into_iter()
                .filter(|g| overridden.contains(g))
                .map(env::group_members)
                .collect();
            let rule = policy.rules.iter().find(|r| r.group == unmet.group);
            let size = groups.get(&unmet.group).map_or(0, Vec::len);
            return Err(match rule {
                Some(rule)
                    if overridden.contains(rule.group.as_str())
                        && (size as u64) < rule.min as u64 =>
                {
                    PolicyError::TooFewMembers {
                        variable: env::group_members(&rule.group),
                        members: size,
                        gate,
                        min: rule.min,
                        group: rule.group.clone(),
                    }
                }
                _ => PolicyError::Unsatisfiable {
                    variables: variables.join(", "),
                    gate,
                    message: unmet.message,
                },
            });
        }
        Ok(groups)
    }

    /// Every gate with its policy, named as messages name it: each gated
    /// tool once (`tool "pay"`), then the steps' own gates (`step "check"`).
    fn gates(&self) -> Vec<(String, &GatePolicy)> {
        let tools = self
            .tools
            .values()
            .filter(|t| t.approval_required)
            .map(|t| (format!("tool {:?}", t.name), &t.policy));
        let steps = self
            .steps
            .iter()
            .filter(|s| !matches!(s.kind, StepKind::Tool { .. }))
            .filter_map(|s: &Step| Some((format!("step {:?}", s.id), self.policy_of(s)?)));
        tools.chain(steps).collect()
    }
}

/// "1 member", "2 members".
fn members_text(count: usize) -> String {
    match count {
        1 => "1 member".to_string(),
        n => format!("{n} members"),
    }
}

/// `alice, bob` -> its members: never empty, each once.
fn members_from(text: &str, variable: &str, group: &str) -> Result<Vec<String>, PolicyError> {
    if text.trim().is_empty() {
        return Err(PolicyError::EmptyGroup {
            variable: variable.to_string(),
            group: group.to_string(),
        });
    }
    let mut members: Vec<String> = Vec::new();
    for (i, member) in text.split(',').map(str::trim).enumerate() {
        if member.is_empty() {
            return Err(PolicyError::EmptyMember {
                variable: variable.to_string(),
                entry: i + 1,
            });
        }
        if member.contains(char::is_whitespace) {
            return Err(PolicyError::BadMember {
                variable: variable.to_string(),
                member: member.to_string(),
            });
        }
        if members.iter().any(|m| m == member) {
            return Err(PolicyError::DuplicateMember {
                variable: variable.to_string(),
                member: member.to_string(),
            });
        }
        members.push(member.to_string());
    }
    Ok(members)
}

/// The groups a policy names (its rules' and its escalations'), each once.
pub(super) fn named_groups(policy: &GatePolicy) -> BTreeSet<&str> {
    policy
        .rules
        .iter()
        .map(|r| r.group.as_str())
        .chain(
            policy
                .escalate
                .iter()
                .flat_map(|e| e.add.iter().map(String::as_str)),
        )
        .collect()
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::super::Spec;
    use super::PolicyError;

    const SPEC: &str = r#"version: 1
agent: desk
approvals:
  groups: { finance: [alice, bob, carol], security: [dave], spare: [erin] }
tools:
  pay:
    http: { url: "https://x.example" }
    approval: { rules: [{ group: finance, min: 1 }] }
steps:
  - id: check
    approval:
      rules: [{ group: finance, min: 2 }, { group: security, min: 1 }]
  - id: refund
    tool: pay
"#;

    fn spec() -> Spec {
        Spec::parse(SPEC, "t.yaml").unwrap_or_else(|e| panic!("{e}"))
    }

    /// An environment of `vars`, recording every name asked for.
    fn env<'a>(
        vars: &'a [(&str, &str)],
        asked: &'a std::cell::RefCell<Vec<String>>,
    ) -> impl Fn(&str) -> Option<String> + 'a {
        move |name| {
            asked.borrow_mut().push(name.to_string());
            vars.iter()
                .find(|(n, _)| *n == name)
                .map(|(_, v)| v.to_string())
        }
    }

    fn members(list: &[&str]) -> Vec<String> {
        list.iter().map(|m| m.to_string()).collect()
    }

    #[test]
    fn without_overrides_the_groups_are_as_written_and_only_their_variables_are_read() {
        let asked = Default::default();
        let groups = spec()
            .resolve_groups(env(&[("TOLLGATE_GROUP_LEGAL", "zoe")], &asked))
            .unwrap();
        assert_eq!(groups, spec().approvals.groups);
        assert_eq!(
            *asked.borrow(),
            [
                "TOLLGATE_GROUP_FINANCE",
                "TOLLGATE_GROUP_SECURITY",
                "TOLLGATE_GROUP_SPARE"
            ]
        );
    }

    #[test]
    fn a_variable_replaces_its_groups_members_trimmed() {
        let asked = Default::default();
        let groups = spec()
            .resolve_groups(env(
                &[
                    ("TOLLGATE_GROUP_FINANCE", " frank , gina,hal "),
                    ("TOLLGATE_GROUP_SPARE", "ivy"),
                ],
                &asked,
            ))
            .unwrap();
        assert_eq!(
            groups,
            BTreeMap::from([
                ("finance".to_string(), members(&["frank", "gina", "hal"])),
                ("security".to_string(), members(&["dave"])),
                ("spare".to_string(), members(&["ivy"])),
            ])
        );
    }

    #[test]
    fn an_override_never_leaves_a_group_empty_or_a_rule_unmet() {
        let cases: [(&[(&str, &str)], &str); 7] = [
            (
                &[("TOLLGATE_GROUP_FINANCE", "  ")],
                "TOLLGATE_GROUP_FINANCE is set but empty: it would leave group \"finance\" without members (unset it to use the members the spec lists)",
            ),
            (
                &[("TOLLGATE_GROUP_FINANCE", "")],
                "TOLLGATE_GROUP_FINANCE is set but empty: it would leave group \"finance\" without members (unset it to use the members the spec lists)",
            ),
            (
                &[("TOLLGATE_GROUP_FINANCE", "alice,,bob")],
                "TOLLGATE_GROUP_FINANCE has an empty member (entry 2): list members by API-token name, separated by commas",
            ),
            (
                &[("TOLLGATE_GROUP_FINANCE", "alice bob, carol")],
                "TOLLGATE_GROUP_FINANCE lists \"alice bob\": a member is an API-token name, without spaces",
            ),
            (
                &[("TOLLGATE_GROUP_FINANCE", "alice, bob, alice")],
                "TOLLGATE_GROUP_FINANCE lists \"alice\" twice",
            ),
            (
                &[("TOLLGATE_GROUP_FINANCE", "alice")],
                "TOLLGATE_GROUP_FINANCE has 1 member but step \"check\" needs 2 of finance",
            ),
            (
                // dave is both groups' only member left who could count
                // for finance's second vote and security's one.
                &[("TOLLGATE_GROUP_FINANCE", "alice, dave")],
                "with the members from TOLLGATE_GROUP_FINANCE, step \"check\" can never be approved: rule security of 1 can never be met: it needs 1 vote(s) and at most 0 member(s) can give one (a voter counts toward one rule only: voter_counts_once)",
            ),
        ];
        for (vars, error) in cases {
            let asked = Default::default();
            let got = spec().resolve_groups(env(vars, &asked)).unwrap_err();
            assert_eq!(got.to_string(), error, "{vars:?}");
        }
    }

    #[test]
    fn a_tool_gate_is_named_by_its_tool() {
        let source = SPEC.replace("min: 1 }] }", "min: 2 }] }");
        let spec = Spec::parse(&source, "t.yaml").unwrap();
        let asked = Default::default();
        let got = spec
            .resolve_groups(env(&[("TOLLGATE_GROUP_FINANCE", "alice")], &asked))
            .unwrap_err();
        assert_eq!(
            got,
            PolicyError::TooFewMembers {
                variable: "TOLLGATE_GROUP_FINANCE".into(),
                members: 1,
                gate: "tool \"pay\"".into(),
                min: 2,
                group: "finance".into(),
            }
        );
        assert_eq!(
            got.to_string(),
            "TOLLGATE_GROUP_FINANCE has 1 member but tool \"pay\" needs 2 of finance"
        );
    }
}
