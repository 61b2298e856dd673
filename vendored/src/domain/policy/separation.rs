//! Separation of duties (DESIGN §13): whoever asks never decides.
//!
//! The requesters of a gate are who started its run (the API token that
//! called `POST /runs`), who made a gate request (the token, and the
//! `requester` it asked on behalf of), and, on a gate that counts votes,
//! anyone who edited its payload since. By default none of them may decide
//! that gate, on any gate and any path; `allow_self_approval: true` on the
//! gate (or `approvals.allow_self_approval: true` for the whole spec) opts
//! out. One exemption: [`LOCAL_DECIDER`], the one person alone at a server
//! that has no tokens (it binds loopback only, and every caller is them).
//!
//! A gate that counts votes stores its requesters and its setting in its
//! roster when it pauses (the roster is the truth for it, and the store
//! checks it with the vote). A plain gate stores no roster: its requesters
//! come from the record's trigger, which never changes after the pause, so
//! checking them before the claim is as good as checking them in it.

use serde_json::Value;

use crate::domain::pending_approval::ApprovalRecord;

/// Who decides at a server without API tokens: exempt from separation of
/// duties (there is nobody else to decide). A token may not take this name.
pub const LOCAL_DECIDER: &str = "local";

/// The names tollgate gives callers that hold no token: the decider
/// without tokens, unbound links, a gate's own timeout, and the triggers
/// that start runs. No API token may take one of them, so that none can
/// pass for another caller (or for the exempt [`LOCAL_DECIDER`]).
pub const RESERVED_NAMES: [&str; 5] = [LOCAL_DECIDER, "link", "timeout", "webhook", "schedule"];

/// Who asked for the gates of a run or request, read from its trigger: the
/// token that started a run through the API (`started_by`), `webhook` or
/// `schedule` for a run its trigger started (no person holds those names,
/// so they bar nobody, and the ledger says who asked), the token that made
/// a gate request and the `requester` it named. A run started from the
/// command line names no identity.
pub fn requesters_from_trigger(trigger: &Value) -> Vec<String> {
    let text = |field: &str| trigger.get(field).and_then(Value::as_str);
    let mut names: Vec<&str> = match trigger.get("kind").and_then(Value::as_str) {
        Some("api") => text("started_by").into_iter().collect(),
        Some(kind @ ("webhook" | "schedule")) => vec![kind],
        Some("gate") => [text("requested_by"), text("requester")]
            .into_iter()
            .flatten()
            .collect(),
        _ => Vec::new(),
    };
    names.dedup();
    names.into_iter().map(str::to_string).collect()
}

/// Who asked for `record`'s gate: its roster's requesters (who edited the
/// payload included) when it has one, else those of its trigger.
pub fn requesters_of(record: &ApprovalRecord) -> Vec<String> {
    match &record.roster {
        Some(roster) => roster.requesters.clone(),
        None => requesters_from_trigger(&record.trigger),
    }
}

/// Whether `name` may not decide `record` because they asked for it.
/// `allow_self_approval` is the served spec's setting for the gate, used
/// when the record has no roster (a roster keeps the setting it paused
/// with).
pub fn barred_as_requester(record: &ApprovalRecord, allow_self_approval: bool, name: &str) -> bool {
    if name == LOCAL_DECIDER {
        return false;
    }
    match &record.roster {
        Some(roster) => !roster.allow_self_approval && roster.requesters.iter().any(|r| r == name),
        None => {
            !allow_self_approval
                && requesters_from_trigger(&record.trigger)
                    .iter()
                    .any(|r| r == name)
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn requesters_are_read_from_every_kind_of_trigger() {
        let of = |trigger: Value| requesters_from_trigger(&trigger);
        assert_eq!(of(json!({"kind": "api", "started_by": "bot"})), ["bot"]);
        assert_eq!(of(json!({"kind": "webhook"})), ["webhook"]);
        assert_eq!(of(json!({"kind": "schedule"})), ["schedule"]);
        assert_eq!(
            of(json!({"kind": "gate", "requested_by": "bot", "requester": "ann"})),
            ["bot", "ann"]
        );
        assert_eq!(
            of(json!({"kind": "gate", "requested_by": "bot", "requester": "bot"})),
            ["bot"]
        );
        assert_eq!(
            of(json!({"kind": "gate", "requested_by": "bot", "requester": null})),
            ["bot"]
        );
        assert!(of(json!({"kind": "cli"})).is_empty());
        assert!(of(json!({})).is_empty());
    }
}
