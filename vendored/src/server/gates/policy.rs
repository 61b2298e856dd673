//! The `policy` of a gate request (`POST /gates`, MCP `request_approval`):
//! the team policy a YAML gate writes (DESIGN §13), as JSON, read into the
//! same [`GatePolicy`] with the same checks, each refusal naming the field
//! at fault. Groups are the served spec's (`approvals.groups`, or
//! `TOLLGATE_GROUP_<NAME>`): a request names them, it cannot define them.

use std::time::Duration;

use serde::Deserialize;

use crate::policy::{Escalation, GatePolicy, Groups, OnTimeout, RejectWhen, RuleSpec};
use crate::server::openapi::schema::request_type;
use crate::time::{format_duration, parse_duration};

request_type! {
    /// Who must agree, and what happens while the request waits and when
    /// its time runs out: the keys a YAML gate takes (DESIGN §13). Left
    /// out, the request is a plain gate: one decision by anyone
    /// `approvals.approvers` allows settles it.
    #[derive(Debug, Default, Deserialize)]
    #[serde(deny_unknown_fields)]
    pub(crate) struct PolicyBody {
        /// All required: at least `min` votes from members of each
        /// `group` (a group of the served spec).
        rules: Option<Vec<RuleBody>>,
        /// `any` (one reject ends it, the default) or `when_unreachable`.
        reject: Option<String>,
        /// Whether the requester may vote on it. On by default for a plain
        /// gate, off for one with rules.
        allow_self_approval: Option<bool>,
        /// `false` lets one vote count toward every rule whose group has
        /// the voter; by default it counts toward one.
        voter_counts_once: Option<bool>,
        /// Every decision must give a reason.
        require_reason: Option<bool>,
        /// `expire` (the default), `reject`, `approve` or `continue` (a
        /// reject with the timeout as its reason).
        on_timeout: Option<String>,
        /// Reminders, as ascending percentages of the request's time
        /// (`["50%", "90%"]`).
        remind: Option<Vec<String>>,
        /// After `after` of waiting, members of the groups in `add` may
        /// decide too.
        escalate: Option<Vec<EscalationBody>>,
    }
}

request_type! {
    /// One rule: at least `min` votes from members of `group`.
    #[derive(Debug, Deserialize)]
    #[serde(deny_unknown_fields)]
    pub(crate) struct RuleBody {
        group: String,
        min: u64,
    }
}

request_type! {
    /// One escalation: after `after` (`4h`), add the members of `add`.
    #[derive(Debug, Deserialize)]
    #[serde(deny_unknown_fields)]
    pub(crate) struct EscalationBody {
        after: String,
        add: Vec<String>,
    }
}

impl PolicyBody {
    /// The policy, checked as the spec checks a gate's: rules over known
    /// groups that their members can meet, reminders from 1% to 99%
    /// ascending, escalations sooner than `ttl` adding known groups.
    pub(crate) fn resolve(self, groups: &Groups, ttl: Duration) -> Result<GatePolicy, String> {
        let mut policy = GatePolicy::plain();
        for (i, rule) in self.rules.unwrap_or_default().into_iter().enumerate() {
            let at = format!("policy.rules[{i}]");
            let members = known_group(groups, &rule.group, &format!("{at}.group"))?;
            if rule.min < 1 {
                return Err(format!("{at}.min must be at least 1, found 0"));
            }
            if rule.min > members.len() as u64 {
                return Err(format!(
                    "{at}.min is {} but group {:?} has {} member(s): the rule could never be met",
                    rule.min,
                    rule.group,
                    members.len()
                ));
            }
            if policy.rules.iter().any(|r| r.group == rule.group) {
                return Err(format!(
                    "{at}: group {:?} has two rules: write one rule with the larger min",
                    rule.group
                ));
            }
            policy.rules.push(RuleSpec {
                group: rule.group,
                min: u32::try_from(rule.min).unwrap_or(u32::MAX),
            });
        }
        if let Some(reject) = self.reject {
            policy.reject = RejectWhen::parse(&reject).ok_or_else(|| {
                format!("policy.reject is {reject:?}: use any or when_unreachable")
            })?;
        }
        policy.allow_self_approval = self.allow_self_approval;
        if let Some(once) = self.voter_counts_once {
            policy.voter_counts_once = once;
        }
        policy.require_reason = self.require_reason.unwrap_or(false);
        if let Some(action) = self.on_timeout {
            policy.on_timeout = OnTimeout::parse(&action).ok_or_else(|| {
                format!("policy.on_timeout is {action:?}: use expire, reject, approve or continue")
            })?;
        }
        if let Some(remind) = self.remind {
            policy.remind = percents(&remind)?;
        }
        if let Some(escalate) = self.escalate {
            policy.escalate = escalations(groups, escalate, ttl)?;
        }
        Ok(policy)
    }
}

fn known_group<'a>(groups: &'a Groups, name: &str, at: &str) -> Result<&'a [String], String> {
    groups.get(name).map(Vec::as_slice).ok_or_else(|| {
        let known: Vec<&str> = groups.keys().map(String::as_str).collect();
        if known.is_empty() {
            format!("{at}: group {name:?} is not defined: the served spec has no approvals.groups")
        } else {
            format!(
                "{at}: group {name:?} is not defined in the served spec's approvals.groups ({})",
                known.join(", ")
            )
        }
    })
}

fn percents(given: &[String]) -> Result<Vec<u8>, String> {
    if given.is_empty() {
        return Err("policy.remind is empty: leave it out for no reminders".into());
    }
    let mut percents: Vec<u8> = Vec::with_capacity(given.len());
    for (i, text) in given.iter().enumerate() {
        let percent = text
            .trim()
            .strip_suffix('%')
            .and_then(|n| n.trim().parse::<u8>().ok())
            .filter(|p| (1..=99).contains(p))
            .ok_or_else(|| {
                format!(
                    "policy.remind[{i}] must be a percentage of the request's time from 1% to 99%, such as \"50%\", found {text:?}"
                )
            })?;
        if let Some(last) = percents.last().filter(|last| **last >= percent) {
            return Err(format!(
                "policy.remind must be ascending: {percent}% comes after {last}%"
            ));
        }
        percents.push(percent);
    }
    Ok(percents)
}

fn escalations(
    groups: &Groups,
    given: Vec<EscalationBody>,
    ttl: Duration,
) -> Result<Vec<Escalation>, String> {
    if given.is_empty() {
        return Err("policy.escalate is empty: leave it out for no escalation".into());
    }
    let mut escalations = Vec::with_capacity(given.len());
    for (i, entry) in given.into_iter().enumerate() {
        let at = format!("policy.escalate[{i}]");
        let after =
            parse_duration(&entry.after).map_err(|e| format!("{at}.after: {e} (such as 4h)"))?;
        if after >= ttl {
            return Err(format!(
                "{at}.after is {}, not shorter than the request's ttl of {}: it would expire first",
                format_duration(after),
                format_duration(ttl)
            ));
        }
        if entry.add.is_empty() {
            return Err(format!("{at}.add is empty: name a group to add"));
        }
        let mut add: Vec<String> = Vec::with_capacity(entry.add.len());
        for (j, name) in entry.add.into_iter().enumerate() {
            known_group(groups, &name, &format!("{at}.add[{j}]"))?;
            if add.contains(&name) {
                return Err(format!("{at}.add names group {name:?} twice"));
            }
            add.push(name);
        }
        escalations.push(Escalation { after, add });
    }
    Ok(escalations)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn groups() -> Groups {
        Groups::from([
            ("finance".to_string(), vec!["ann".into(), "bo".into()]),
            ("security".to_string(), vec!["cy".into()]),
        ])
    }

    fn resolve(body: serde_json::Value) -> Result<GatePolicy, String> {
        let body: PolicyBody = serde_json::from_value(body).map_err(|e| e.to_string())?;
        body.resolve(&groups(), Duration::from_secs(24 * 3600))
    }

    #[test]
    fn a_full_policy_reads_as_a_yaml_gate_would() {
        let policy = resolve(json!({
            "rules": [{"group": "finance", "min": 2}],
            "reject": "when_unreachable",
            "require_reason": true,
            "on_timeout": "reject",
            "remind": ["50%", "90%"],
            "escalate": [{"after": "4h", "add": ["security"]}],
        }))
        .unwrap();
        assert_eq!(
            policy.rules,
            [RuleSpec {
                group: "finance".into(),
                min: 2
            }]
        );
        assert_eq!(policy.reject, RejectWhen::WhenUnreachable);
        assert!(policy.require_reason && policy.voter_counts_once);
        assert!(!policy.self_approval_allowed());
        assert_eq!(policy.on_timeout, OnTimeout::Reject);
        assert_eq!(policy.remind, [50, 90]);
        assert_eq!(policy.escalate[0].after, Duration::from_secs(4 * 3600));
        assert_eq!(resolve(json!({})).unwrap(), GatePolicy::plain());
    }

    #[test]
    fn each_refusal_names_the_field_at_fault() {
        for (body, says) in [
            (
                json!({"rules": [{"group": "legal", "min": 1}]}),
                "policy.rules[0].group: group \"legal\" is not defined",
            ),
            (
                json!({"rules": [{"group": "finance", "min": 0}]}),
                "policy.rules[0].min must be at least 1",
            ),
            (
                json!({"rules": [{"group": "finance", "min": 3}]}),
                "could never be met",
            ),
            (json!({"reject": "all"}), "policy.reject is \"all\""),
            (
                json!({"on_timeout": "later"}),
                "policy.on_timeout is \"later\"",
            ),
            (json!({"remind": ["90%", "50%"]}), "ascending"),
            (json!({"remind": ["100%"]}), "policy.remind[0]"),
            (
                json!({"escalate": [{"after": "2d", "add": ["security"]}]}),
                "policy.escalate[0].after is 2d",
            ),
            (
                json!({"escalate": [{"after": "1h", "add": ["nobody"]}]}),
                "policy.escalate[0].add[0]",
            ),
            (json!({"quorum": 2}), "unknown field `quorum`"),
        ] {
            let err = resolve(body.clone()).unwrap_err();
            assert!(err.contains(says), "{body}: {err}");
        }
    }
}
