//! The `policy` of a gate request (`POST /gates`, MCP `request_approval`):
//! the team policy a YAML gate writes (DESIGN §13), as JSON, read into the
//! same [`GatePolicy`] with the same checks, each refusal naming the field
//! at fault. Groups are the served spec's (`approvals.groups`, or
//! `TOLLGATE_GROUP_<NAME>`): a request names them, it cannot define them.
//!
//! Whoever asks may only make the decision harder to reach: the served
//! spec's `approvals.requests` says which fields a request may set
//! ([`RequestLimits`]), a rule or an escalation may only name groups whose
//! members the spec's `approvals.approvers` already allows, and a request
//! can never let its requesters decide (`allow_self_approval`) nor ask to
//! be approved when its time runs out (unless the spec says so, which it
//! cannot: see `approvals.requests.on_timeout`). Anything else is refused
//! with the field named; nothing is silently ignored.

use std::time::Duration;

use serde::Deserialize;

use crate::domain::policy::{
    Escalation, GatePolicy, Groups, OnTimeout, RejectWhen, RequestField, RequestLimits, RuleSpec,
};
use crate::service::schema::request_type;
use crate::support::time::{format_duration, parse_duration};

request_type! {
    /// Who must agree, and what happens while the request waits and when
    /// its time runs out: the keys a YAML gate takes (DESIGN §13), as far
    /// as the served spec's `approvals.requests` lets a request set them
    /// (by default `rules` and `require_reason`; `on_timeout` as it lists;
    /// `remind` up to its `max_reminders`). Left out, the request is a
    /// plain gate: one decision by anyone `approvals.approvers` allows,
    /// other than who asked, settles it.
    #[derive(Debug, Default, Deserialize)]
    #[serde(deny_unknown_fields)]
    pub(crate) struct PolicyBody {
        /// All required: at least `min` votes from members of each
        /// `group` (a group of the served spec).
        rules: Option<Vec<RuleBody>>,
        /// `any` (one reject ends it, the default) or `when_unreachable`.
        reject: Option<String>,
        /// Never settable by a request: whoever asks never decides (the
        /// served spec's `approvals.allow_self_approval` opts out for the
        /// whole spec). Present, it is refused.
        allow_self_approval: Option<bool>,
        /// `false` lets one vote count toward every rule whose group has
        /// the voter; by default it counts toward one.
        voter_counts_once: Option<bool>,
        /// Every decision must give a reason.
        require_reason: Option<bool>,
        /// `expire` (the default), `reject` or `continue` (a reject with the
        /// timeout as its reason): those the served spec's
        /// `approvals.requests.on_timeout` lists. Never `approve`.
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

/// What the served spec lets a request set, and whom it lets decide.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Allowed<'a> {
    /// The groups in force (`approvals.groups`, `TOLLGATE_GROUP_<NAME>`).
    pub groups: &'a Groups,
    /// `approvals.approvers`: a request's rules and escalations stay
    /// within it.
    pub approvers: Option<&'a [String]>,
    /// `approvals.requests`.
    pub limits: &'a RequestLimits,
    /// `approvals.allow_self_approval`: the requests' setting too.
    pub allow_self_approval: bool,
}

impl Allowed<'_> {
    /// `field` at `at` may be set, or the refusal naming both.
    pub(crate) fn may_set(&self, field: RequestField, at: &str) -> Result<(), String> {
        if self.limits.may_set(field) {
            return Ok(());
        }
        Err(format!(
            "{at}: a request may not set {field}: the served spec's approvals.requests.may_set allows {}",
            self.limits.may_set_list()
        ))
    }

    /// The members of group `name` (named at `at`), when the approvers
    /// allow every one of them: else the request would widen who decides.
    fn narrowing_group<'g>(&'g self, name: &str, at: &str) -> Result<&'g [String], String> {
        let members = known_group(self.groups, name, at)?;
        if let Some(approvers) = self.approvers {
            let outside: Vec<&str> = members
                .iter()
                .filter(|m| !approvers.contains(m))
                .map(String::as_str)
                .collect();
            if !outside.is_empty() {
                return Err(format!(
                    "{at}: group {name:?} has members the served spec's approvals.approvers leaves out ({}): a request may narrow who decides, never widen it",
                    outside.join(", ")
                ));
            }
        }
        Ok(members)
    }
}

impl PolicyBody {
    /// The policy, checked as the spec checks a gate's (rules over known
    /// groups that their members can meet, reminders from 1% to 99%
    /// ascending, escalations sooner than `ttl` adding known groups) and
    /// against what `allowed` lets a request set.
    pub(crate) fn resolve(self, allowed: Allowed<'_>, ttl: Duration) -> Result<GatePolicy, String> {
        let mut policy = GatePolicy::plain();
        if self.allow_self_approval.is_some() {
            return Err("policy.allow_self_approval: a request may not choose whether those who ask may decide it (whoever asks never decides; the served spec's approvals.allow_self_approval opts out for the whole spec)".into());
        }
        policy.allow_self_approval = allowed.allow_self_approval.then_some(true);
        if let Some(rules) = self.rules {
            allowed.may_set(RequestField::Rules, "policy.rules")?;
            for (i, rule) in rules.into_iter().enumerate() {
                let at = format!("policy.rules[{i}]");
                let members = allowed.narrowing_group(&rule.group, &format!("{at}.group"))?;
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
        }
        if let Some(reject) = self.reject {
            allowed.may_set(RequestField::Reject, "policy.reject")?;
            policy.reject = RejectWhen::parse(&reject).ok_or_else(|| {
                format!("policy.reject is {reject:?}: use any or when_unreachable")
            })?;
        }
        if let Some(once) = self.voter_counts_once {
            allowed.may_set(RequestField::VoterCountsOnce, "policy.voter_counts_once")?;
            policy.voter_counts_once = once;
        }
        if let Some(required) = self.require_reason {
            allowed.may_set(RequestField::RequireReason, "policy.require_reason")?;
            policy.require_reason = required;
        }
        if let Some(action) = self.on_timeout {
            let limits = allowed.limits;
            policy.on_timeout = OnTimeout::parse(&action)
                .filter(|a| limits.on_timeout.contains(a))
                .ok_or_else(|| {
                    format!(
                        "policy.on_timeout is {action:?}: the served spec's approvals.requests.on_timeout allows {}",
                        limits.on_timeout_list()
                    )
                })?;
        }
        if let Some(remind) = self.remind {
            let max = allowed.limits.max_reminders;
            if remind.len() as u64 > u64::from(max) {
                return Err(format!(
                    "policy.remind asks for {} reminders: the served spec's approvals.requests.max_reminders is {max}",
                    remind.len()
                ));
            }
            policy.remind = percents(&remind)?;
        }
        if let Some(escalate) = self.escalate {
            allowed.may_set(RequestField::Escalate, "policy.escalate")?;
            policy.escalate = escalations(allowed, escalate, ttl)?;
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
    allowed: Allowed<'_>,
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
            allowed.narrowing_group(&name, &format!("{at}.add[{j}]"))?;
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
            ("ops".to_string(), vec!["mallory".into()]),
        ])
    }

    /// Every field a request can set, allowed.
    fn open_limits() -> RequestLimits {
        RequestLimits {
            may_set: RequestField::ALL.to_vec(),
            ..RequestLimits::default()
        }
    }

    fn resolve_with(
        body: serde_json::Value,
        limits: &RequestLimits,
        approvers: Option<&[String]>,
    ) -> Result<GatePolicy, String> {
        let body: PolicyBody = serde_json::from_value(body).map_err(|e| e.to_string())?;
        let groups = groups();
        let allowed = Allowed {
            groups: &groups,
            approvers,
            limits,
            allow_self_approval: false,
        };
        body.resolve(allowed, Duration::from_secs(24 * 3600))
    }

    fn resolve(body: serde_json::Value) -> Result<GatePolicy, String> {
        resolve_with(body, &open_limits(), None)
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

    #[test]
    fn a_request_never_decides_itself_nor_widens_who_decides() {
        let limits = RequestLimits::default();
        let approvers = [
            "alice".to_string(),
            "carol".to_string(),
            "ann".to_string(),
            "bo".to_string(),
        ];
        let approvers = Some(approvers.as_slice());
        for (body, says) in [
            // Approved by waiting: no person decided.
            (
                json!({"on_timeout": "approve"}),
                "policy.on_timeout is \"approve\": the served spec's approvals.requests.on_timeout allows expire, reject, continue",
            ),
            (
                json!({"allow_self_approval": true}),
                "policy.allow_self_approval: a request may not choose",
            ),
            (
                json!({"allow_self_approval": false}),
                "policy.allow_self_approval",
            ),
            // A group the approvers leave out would widen who decides.
            (
                json!({"rules": [{"group": "ops", "min": 1}]}),
                "policy.rules[0].group: group \"ops\" has members the served spec's approvals.approvers leaves out (mallory)",
            ),
            // Fields the spec does not let requests set, named.
            (
                json!({"escalate": [{"after": "1h", "add": ["ops"]}]}),
                "policy.escalate: a request may not set escalate: the served spec's approvals.requests.may_set allows rules, require_reason, ttl",
            ),
            (
                json!({"reject": "when_unreachable"}),
                "policy.reject: a request may not set reject",
            ),
            (
                json!({"voter_counts_once": false}),
                "policy.voter_counts_once: a request may not set voter_counts_once",
            ),
            (
                json!({"remind": ["10%", "20%", "30%", "40%"]}),
                "policy.remind asks for 4 reminders: the served spec's approvals.requests.max_reminders is 3",
            ),
        ] {
            let err = resolve_with(body.clone(), &limits, approvers).unwrap_err();
            assert!(err.contains(says), "{body}: {err}");
        }
        // Narrowing is allowed: a group within the approvers, more votes,
        // a reason, a few reminders, another timeout the spec allows.
        let narrowed = resolve_with(
            json!({
                "rules": [{"group": "finance", "min": 2}],
                "require_reason": true,
                "remind": ["50%", "90%"],
                "on_timeout": "reject",
            }),
            &limits,
            approvers,
        )
        .unwrap();
        assert_eq!(narrowed.rules.len(), 1);
        assert!(!narrowed.self_approval_allowed());
        // With escalation allowed, it still stays within the approvers.
        let err = resolve_with(
            json!({"escalate": [{"after": "1h", "add": ["ops"]}]}),
            &open_limits(),
            approvers,
        )
        .unwrap_err();
        assert!(
            err.contains("policy.escalate[0].add[0]: group \"ops\" has members"),
            "{err}"
        );
        // Nothing may set a field when the spec allows none.
        let closed = RequestLimits {
            may_set: vec![],
            ..RequestLimits::default()
        };
        let err = resolve_with(json!({"require_reason": true}), &closed, None).unwrap_err();
        assert!(err.contains("may_set allows nothing"), "{err}");
    }
}
