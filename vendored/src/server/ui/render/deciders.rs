//! Who may decide a gate, as the pages say it (DESIGN §13): its groups
//! or the approvers, and, by name, who may not because they asked for it
//! (separation of duties: whoever started the run, made the gate request
//! or edited the payload, unless the gate allows self-approval). The same
//! facts `links::may_decide_record` checks, so the page never promises a
//! decision the server would refuse.

use crate::domain::links::Deciders;
use crate::domain::pending_approval::ApprovalRecord;
use crate::domain::policy::{RESERVED_NAMES, requesters_of};

/// Who may not decide `record` for having asked for it, by name. Names
/// no token can hold (`webhook`, `schedule`, `local`, ...) are left out:
/// they bar nobody who could decide.
pub(crate) fn barred(record: &ApprovalRecord, deciders: Deciders<'_>) -> Vec<String> {
    let allowed = match &record.roster {
        Some(roster) => roster.allow_self_approval,
        None => deciders.allow_self_approval,
    };
    if allowed {
        return Vec::new();
    }
    requesters_of(record)
        .into_iter()
        .filter(|name| !RESERVED_NAMES.contains(&name.as_str()))
        .collect()
}

/// `; not agent (separation of duties)`, or nothing when nobody is barred.
pub(crate) fn barred_note(record: &ApprovalRecord, deciders: Deciders<'_>) -> String {
    let names = barred(record, deciders);
    if names.is_empty() {
        String::new()
    } else {
        format!("; not {} (separation of duties)", names.join(", "))
    }
}

/// Who may decide `record`: `2 of finance, 1 of security` on a gate with
/// rules; else the approvers (and whom escalations added), or `open`
/// ("anyone with an API token") when the spec lists none; then who may
/// not, for having asked.
pub(crate) fn who_decides(record: &ApprovalRecord, deciders: Deciders<'_>, open: &str) -> String {
    let base = match &record.roster {
        Some(roster) if !roster.rules.is_empty() => roster
            .rules
            .iter()
            .map(|rule| format!("{} of {}", rule.min, rule.group))
            .collect::<Vec<_>>()
            .join(", "),
        roster => {
            let added = roster
                .as_ref()
                .map(|r| r.added.as_slice())
                .unwrap_or_default();
            match deciders.approvers {
                Some(names) if names.is_empty() && added.is_empty() => {
                    "nobody (approvals.approvers is empty)".to_string()
                }
                Some(names) => {
                    let mut all: Vec<&str> = names.iter().map(String::as_str).collect();
                    all.extend(
                        added
                            .iter()
                            .filter(|a| !names.contains(a))
                            .map(String::as_str),
                    );
                    all.join(", ")
                }
                None => open.to_string(),
            }
        }
    };
    format!("{base}{}", barred_note(record, deciders))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn record(trigger: serde_json::Value) -> ApprovalRecord {
        let mut record: ApprovalRecord = serde_json::from_value(json!({
            "key": "k", "run_id": "r", "agent_id": "desk", "spec_hash": "h",
            "step_index": 0, "step_id": "refund", "phase": "before",
            "message": null, "payload": {}, "outputs": {}, "input": {},
            "trigger": {}, "status": "PENDING", "decision_data": null,
            "decided_by": null, "decided_at": null,
            "created_at": "2026-12-01T10:00:00Z", "expires_at": "2026-12-02T10:00:00Z",
        }))
        .expect("a record");
        record.trigger = trigger;
        record
    }

    #[test]
    fn the_agent_that_asked_is_named_as_barred() {
        let asked = record(json!({"kind": "api", "started_by": "agent"}));
        let open = Deciders::approvers(None);
        assert_eq!(
            who_decides(&asked, open, "anyone with an API token"),
            "anyone with an API token; not agent (separation of duties)"
        );
        let listed = ["alice".to_string(), "bob".to_string()];
        assert_eq!(
            who_decides(&asked, Deciders::approvers(Some(&listed)), "x"),
            "alice, bob; not agent (separation of duties)"
        );
        let allowed = Deciders {
            approvers: None,
            allow_self_approval: true,
        };
        assert_eq!(who_decides(&asked, allowed, "anyone"), "anyone");
        // A webhook's run bars nobody a token could be.
        let hooked = record(json!({"kind": "webhook"}));
        assert_eq!(who_decides(&hooked, open, "anyone"), "anyone");
        assert_eq!(
            who_decides(&hooked, Deciders::approvers(Some(&[])), "anyone"),
            "nobody (approvals.approvers is empty)"
        );
    }

    #[test]
    fn a_gate_with_rules_names_its_groups_and_its_requesters() {
        let mut team = record(json!({"kind": "api", "started_by": "agent"}));
        team.roster = Some(
            serde_json::from_value(json!({
                "rules": [
                    {"group": "finance", "min": 2, "members": ["alice", "bob"]},
                    {"group": "security", "min": 1, "members": ["dave"]},
                ],
                "reject": "any", "allow_self_approval": false,
                "voter_counts_once": true, "require_reason": false,
                "requesters": ["agent", "bob"],
            }))
            .expect("a roster"),
        );
        assert_eq!(
            who_decides(&team, Deciders::approvers(None), "anyone"),
            "2 of finance, 1 of security; not agent, bob (separation of duties)"
        );
    }
}
