//! What a person sees in Slack: the message announcing a pause (with
//! Approve and Reject buttons, and an "Open in browser" button carrying the
//! signed approval link when links are on), the same message once settled
//! (the buttons replaced by who decided what and when), and short
//! ephemeral replies. A gate with rules (DESIGN §13) also shows each
//! rule's progress and who has voted and who still may, as the ledger
//! stands when the message is rendered.
//!
//! Everything from a run (the gate's message, the payload) is data: it is
//! escaped for Slack's mrkdwn so it cannot mention `@channel` or fake links,
//! and bounded so a large payload cannot exceed Slack's block limits.

use chrono::{DateTime, Utc};
use serde_json::{Value, json};

use crate::domain::pending_approval::{ApprovalRecord, ApprovalStatus};
use crate::domain::policy::{Vote, VoteDecision};

pub const APPROVE_ACTION: &str = "tollgate_approve";
pub const REJECT_ACTION: &str = "tollgate_reject";
/// The "Open in browser" button: a `url` button, so Slack opens the signed
/// link; the click Slack still reports decides nothing (it is ignored).
pub const OPEN_ACTION: &str = "tollgate_open";
/// The actions block's id; it is replaced as a whole when the message is settled.
pub const ACTIONS_BLOCK: &str = "tollgate_decision";

/// The payload preview: this many characters of pretty JSON.
pub const PAYLOAD_PREVIEW_CHARS: usize = 1500;
/// The gate's message: Slack's section text allows 3000 characters.
const MESSAGE_CHARS: usize = 1000;

/// The `chat.postMessage` body announcing a pause. `link` is the absolute
/// signed link to the approval's page, made as the message is posted.
pub fn pending(channel: &str, record: &ApprovalRecord, link: Option<&str>) -> Value {
    pending_voted(channel, record, link, &[])
}

/// [`pending`] for a gate whose ledger is `votes`: a gate with rules shows
/// each rule's progress and who voted.
pub fn pending_voted(
    channel: &str,
    record: &ApprovalRecord,
    link: Option<&str>,
    votes: &[Vote],
) -> Value {
    let mut blocks = summary_blocks(record);
    blocks.extend(votes_block(record, votes));
    // The button says which payload the message showed: a click after the
    // payload was edited is refused (`payload_changed`), never counted.
    let value = super::interaction::button_value(&record.key, &record.payload_digest());
    let mut actions = json!({
        "type": "actions",
        "block_id": ACTIONS_BLOCK,
        "elements": [
            {
                "type": "button",
                "action_id": APPROVE_ACTION,
                "text": { "type": "plain_text", "text": "Approve" },
                "style": "primary",
                "value": value,
            },
            {
                "type": "button",
                "action_id": REJECT_ACTION,
                "text": { "type": "plain_text", "text": "Reject" },
                "style": "danger",
                "value": value,
                "confirm": {
                    "title": { "type": "plain_text", "text": "Reject this request?" },
                    "text": { "type": "mrkdwn", "text": "The run will not go ahead. This cannot be undone." },
                    "confirm": { "type": "plain_text", "text": "Reject" },
                    "deny": { "type": "plain_text", "text": "Cancel" },
                    "style": "danger",
                },
            },
        ],
    });
    if let (Some(link), Some(elements)) = (link, actions["elements"].as_array_mut()) {
        // In the actions block, so settling the message removes it with the
        // other buttons: the link works only while the approval is pending.
        elements.push(json!({
            "type": "button",
            "action_id": OPEN_ACTION,
            "text": { "type": "plain_text", "text": "Open in browser" },
            "url": link,
        }));
    }
    blocks.push(actions);
    blocks.push(key_context(record));
    json!({
        "channel": channel,
        "text": format!("Approval needed: {}", plain_title(record)),
        "blocks": blocks,
        // A run's data is not a link preview.
        "unfurl_links": false,
        "unfurl_media": false,
    })
}

/// The `chat.update` body of a still pending message after a vote that
/// did not settle it: the message as [`pending_voted`] renders it now,
/// buttons and all, in place of the one at `ts`.
pub fn voted(
    channel: &str,
    ts: &str,
    record: &ApprovalRecord,
    link: Option<&str>,
    votes: &[Vote],
) -> Value {
    let posted = pending_voted(channel, record, link, votes);
    json!({
        "channel": channel,
        "ts": ts,
        "text": posted["text"],
        "blocks": posted["blocks"],
    })
}

/// The `chat.update` body showing how a pause was settled: decided (by
/// whom, when, why) or expired. No buttons.
pub fn settled(channel: &str, ts: &str, record: &ApprovalRecord) -> Value {
    settled_voted(channel, ts, record, &[])
}

/// [`settled`] for a gate whose ledger is `votes`: a gate with rules keeps
/// showing how its votes ended.
pub fn settled_voted(channel: &str, ts: &str, record: &ApprovalRecord, votes: &[Vote]) -> Value {
    let outcome = outcome_line(record);
    let mut blocks = summary_blocks(record);
    blocks.extend(votes_block(record, votes));
    blocks.push(json!({
        "type": "section",
        "text": { "type": "mrkdwn", "text": outcome.mrkdwn },
    }));
    blocks.push(key_context(record));
    json!({
        "channel": channel,
        "ts": ts,
        "text": format!("{}: {}", outcome.plain, plain_title(record)),
        "blocks": blocks,
    })
}

/// An ephemeral reply to the person who clicked (only they see it).
pub fn ephemeral(text: &str) -> Value {
    json!({
        "response_type": "ephemeral",
        "replace_original": false,
        "text": text,
    })
}

fn summary_blocks(record: &ApprovalRecord) -> Vec<Value> {
    let title = match &record.message {
        Some(message) if !message.trim().is_empty() => escape(&truncate(message, MESSAGE_CHARS)),
        _ => format!("Step `{}` waits for a decision.", escape(&record.step_id)),
    };
    let mut blocks = vec![
        json!({
            "type": "section",
            "text": { "type": "mrkdwn", "text": format!("*Approval needed*\n{title}") },
        }),
        json!({
            "type": "section",
            "fields": [
                { "type": "mrkdwn", "text": format!("*Agent*\n{}", escape(&record.agent_id)) },
                { "type": "mrkdwn", "text": format!("*Step*\n`{}` ({})", escape(&record.step_id), record.phase.as_str()) },
                { "type": "mrkdwn", "text": format!("*Expires*\n{}", slack_date(record.expires_at)) },
                { "type": "mrkdwn", "text": format!("*Run*\n`{}`", escape(&record.run_id)) },
            ],
        }),
    ];
    // The payload the gate asks about now (a vote's edit, on a gate with
    // rules): what the buttons' digest is of, so a click decides on what
    // the message shows.
    let payload = record.current_payload();
    if !payload.is_null() {
        let label = if std::ptr::eq(payload, &record.payload) {
            "*Payload*"
        } else {
            "*Payload* (as edited by a vote)"
        };
        blocks.push(json!({
            "type": "section",
            "text": { "type": "mrkdwn", "text": format!("{label}\n```{}```", payload_preview(payload)) },
        }));
    }
    blocks
}

/// A gate with rules: "*Votes* finance 1 of 2; security 0 of 1", then a
/// line per rule (who counted, who may still vote) and the rejections.
/// Nothing for a plain gate.
fn votes_block(record: &ApprovalRecord, votes: &[Vote]) -> Option<Value> {
    let roster = record.roster.as_ref().filter(|r| !r.rules.is_empty())?;
    let tally = roster.tally(votes);
    let mut text = format!("*Votes* {}", escape(&tally.summary()));
    for progress in &tally.rules {
        text.push_str(&format!(
            "\n• *{}* {} of {}: ",
            escape(&progress.group),
            progress.counted.len(),
            progress.min
        ));
        if !progress.counted.is_empty() {
            text.push_str(&format!("approved by {}", people(&progress.counted)));
            if !progress.may_still_vote.is_empty() {
                text.push_str("; ");
            }
        }
        if !progress.may_still_vote.is_empty() {
            text.push_str(&format!(
                "may still vote: {}",
                people(&progress.may_still_vote)
            ));
        } else if progress.counted.is_empty() {
            text.push_str("nobody left who may vote");
        }
    }
    // Approvals past a rule's minimum count toward nothing, but were cast.
    let extra: Vec<String> = votes
        .iter()
        .filter(|v| !v.superseded && v.decision != VoteDecision::Reject)
        .filter(|v| !tally.rules.iter().any(|r| r.counted.contains(&v.voter)))
        .map(|v| v.voter.clone())
        .collect();
    if !extra.is_empty() {
        text.push_str(&format!("\n• also approved: {}", people(&extra)));
    }
    for vote in votes
        .iter()
        .filter(|v| !v.superseded && v.decision == VoteDecision::Reject)
    {
        text.push_str(&format!("\n• rejected by {}", who(&vote.voter)));
        if let Some(reason) = vote.reason.as_deref().filter(|r| !r.trim().is_empty()) {
            text.push_str(&format!(": {}", escape(&truncate(reason, 200))));
        }
    }
    if !roster.allow_self_approval && !roster.requesters.is_empty() {
        text.push_str(&format!(
            "\n_May not vote (started or edited the run): {}_",
            people(&roster.requesters)
        ));
    }
    Some(json!({
        "type": "section",
        "text": { "type": "mrkdwn", "text": truncate(&text, 2900) },
    }))
}

/// Names as [`who`] shows them, comma-separated.
fn people(names: &[String]) -> String {
    names.iter().map(|n| who(n)).collect::<Vec<_>>().join(", ")
}

fn key_context(record: &ApprovalRecord) -> Value {
    json!({
        "type": "context",
        "elements": [
            { "type": "mrkdwn", "text": format!("tollgate approval `{}`", escape(&record.key)) },
        ],
    })
}

struct Outcome {
    mrkdwn: String,
    plain: String,
}

fn outcome_line(record: &ApprovalRecord) -> Outcome {
    let verb = match record.status {
        ApprovalStatus::Approved => ":white_check_mark: *Approved*",
        ApprovalStatus::Modified => ":pencil2: *Approved with changes*",
        ApprovalStatus::Rejected => ":x: *Rejected*",
        ApprovalStatus::Cancelled => ":no_entry_sign: *Cancelled*",
        ApprovalStatus::Expired => {
            return Outcome {
                mrkdwn: format!(
                    ":hourglass: *Expired* {}: nobody decided in time.",
                    slack_date(record.expires_at)
                ),
                plain: format!(
                    "Expired at {}",
                    crate::support::time::format_utc(record.expires_at)
                ),
            };
        }
        // Not settled; shown only if a caller asks anyway.
        ApprovalStatus::Pending => ":hourglass_flowing_sand: *Pending*",
    };
    let by = record.decided_by.as_deref().unwrap_or("someone");
    let when = record
        .decided_at
        .map(|t| format!(" {}", slack_date(t)))
        .unwrap_or_default();
    let mut mrkdwn = format!("{verb} by {}{when}", who(by));
    if let Some(reason) = record.reason() {
        mrkdwn.push_str(&format!("\n>{}", escape(&truncate(reason, MESSAGE_CHARS))));
    }
    let plain = format!(
        "{} by {by}{}",
        record.status.past_tense(),
        record
            .decided_at
            .map(|t| format!(" at {}", crate::support::time::format_utc(t)))
            .unwrap_or_default()
    );
    Outcome {
        mrkdwn,
        plain: capitalize(&plain),
    }
}

/// `slack:U123` as a mention (Slack shows the person's name) followed by
/// the identity as recorded; anyone else as recorded.
fn who(decided_by: &str) -> String {
    match decided_by.strip_prefix("slack:") {
        Some(user) if is_slack_id(user) => format!("<@{user}> (`{}`)", escape(decided_by)),
        _ => format!("`{}`", escape(decided_by)),
    }
}

/// Slack user ids: upper-case letters and digits (`U024BE7LH`, `W123`).
pub fn is_slack_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= 32
        && id
            .chars()
            .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit())
}

/// The notification text (Slack parses it too, so it is escaped as well).
fn plain_title(record: &ApprovalRecord) -> String {
    let title = match &record.message {
        Some(message) if !message.trim().is_empty() => truncate(message, 200),
        _ => format!("step {} of {}", record.step_id, record.agent_id),
    };
    escape(&title)
}

/// Slack renders `<!date^...>` in the reader's time zone; the fallback is UTC.
fn slack_date(at: DateTime<Utc>) -> String {
    format!(
        "<!date^{}^{{date_short_pretty}} at {{time}}|{}>",
        at.timestamp(),
        crate::support::time::format_utc(at)
    )
}

/// Pretty JSON, at most [`PAYLOAD_PREVIEW_CHARS`] characters, safe inside
/// a code block.
pub fn payload_preview(payload: &Value) -> String {
    let pretty = serde_json::to_string_pretty(payload).unwrap_or_else(|_| payload.to_string());
    let mut text = truncate(&pretty, PAYLOAD_PREVIEW_CHARS);
    if text.len() < pretty.len() {
        text.push_str("\n… (truncated)");
    }
    // Three backticks would end the code block early.
    escape(&text).replace("```", "`\u{200b}``")
}

/// At most `max` characters, cut on a character boundary.
fn truncate(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((cut, _)) => text[..cut].to_string(),
        None => text.to_string(),
    }
}

/// Slack's mrkdwn escaping: `&`, `<` and `>` are control characters (links,
/// mentions, `<!channel>`).
fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

fn capitalize(text: &str) -> String {
    let mut chars = text.chars();
    match chars.next() {
        Some(first) => first.to_uppercase().chain(chars).collect(),
        None => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::pending_approval::sample_record;

    fn record() -> ApprovalRecord {
        let mut r = sample_record("6f1c2f0e-0000-4000-8000-000000000001", "run-1");
        r.agent_id = "refund-desk".into();
        r.step_id = "refund".into();
        r.message = Some("Refund <!channel> 250 & more?".into());
        r.payload = json!({ "order": "A-1", "note": "x".repeat(5000) });
        r.expires_at = r.created_at;
        r
    }

    #[test]
    fn the_pending_message_has_both_buttons_carrying_the_key() {
        let r = record();
        let body = pending("#refunds", &r, None);
        let actions = body["blocks"]
            .as_array()
            .unwrap()
            .iter()
            .find(|b| b["type"] == "actions")
            .unwrap();
        let buttons = actions["elements"].as_array().unwrap();
        assert_eq!(buttons[0]["action_id"], APPROVE_ACTION);
        assert_eq!(buttons[0]["style"], "primary");
        let value = format!("{} {}", r.key, r.payload_digest());
        assert_eq!(buttons[0]["value"], value.as_str());
        assert_eq!(buttons[1]["action_id"], REJECT_ACTION);
        assert_eq!(buttons[1]["style"], "danger");
        assert_eq!(buttons[1]["value"], value.as_str());
        assert!(buttons[1]["confirm"].is_object());
        assert_eq!(buttons.len(), 2, "no link without one");
        let text = body.to_string();
        assert!(!text.contains("<!channel>"), "run data is escaped");
        assert!(text.contains("&lt;!channel&gt;"));
    }

    #[test]
    fn a_link_is_an_open_in_browser_url_button_in_the_actions_block() {
        let r = record();
        let link = "https://approvals.example.com/a/k/sig";
        let body = pending("#refunds", &r, Some(link));
        let actions = body["blocks"]
            .as_array()
            .unwrap()
            .iter()
            .find(|b| b["type"] == "actions")
            .unwrap();
        let open = &actions["elements"][2];
        assert_eq!(open["type"], "button");
        assert_eq!(open["action_id"], OPEN_ACTION);
        assert_eq!(open["text"]["text"], "Open in browser");
        assert_eq!(open["url"], link);
        assert!(open.get("value").is_none(), "it carries no decision");
        // Settled: the actions block, the link with it, is gone.
        let mut decided = r.clone();
        decided.status = ApprovalStatus::Approved;
        assert!(!settled("C1", "1.2", &decided).to_string().contains(link));
    }

    fn team_record() -> (ApprovalRecord, Vec<Vote>) {
        use crate::domain::policy::{Channel, RejectWhen, Roster};
        let mut r = record();
        r.roster = Some(Roster {
            reject: RejectWhen::WhenUnreachable,
            voter_counts_once: false,
            ..Roster::sample(
                &[
                    ("finance", 2, &["alice", "slack:U024BE7LH", "carol"]),
                    ("security", 1, &["dave"]),
                ],
                &["bot"],
            )
        });
        let vote = |seq, voter: &str, decision, reason: Option<&str>| Vote {
            seq,
            voter: voter.into(),
            rule: None,
            decision,
            reason: reason.map(str::to_string),
            payload: None,
            channel: Channel::Slack,
            payload_digest: r.payload_digest(),
            input: None,
            superseded: false,
            at: crate::support::time::now(),
        };
        let votes = vec![
            vote(1, "slack:U024BE7LH", VoteDecision::Approve, None),
            vote(2, "carol", VoteDecision::Reject, Some("<!here> no")),
        ];
        (r, votes)
    }

    #[test]
    fn a_team_gate_shows_each_rules_progress_and_who_voted() {
        let (r, votes) = team_record();
        let body = pending_voted("#refunds", &r, None, &votes);
        let text = body.to_string();
        assert!(
            text.contains("*Votes* finance 1 of 2; security 0 of 1"),
            "{text}"
        );
        assert!(
            text.contains("approved by <@U024BE7LH> (`slack:U024BE7LH`); may still vote: `alice`"),
            "{text}"
        );
        assert!(
            text.contains("*security* 0 of 1: may still vote: `dave`"),
            "{text}"
        );
        assert!(
            text.contains("rejected by `carol`: &lt;!here&gt; no"),
            "{text}"
        );
        assert!(!text.contains("<!here>"), "a reason is escaped");
        assert!(text.contains("started or edited the run): `bot`"), "{text}");
        assert!(!buttons_of(&body).is_empty(), "still open");
        // The edit after a vote: the same message, in place, buttons kept.
        let edit = voted("C1", "1.2", &r, None, &votes);
        assert_eq!(edit["ts"], "1.2");
        assert_eq!(edit["blocks"], body["blocks"]);
        // Settled: the votes stay, the buttons go.
        let mut decided = r.clone();
        decided.status = ApprovalStatus::Rejected;
        let settled = settled_voted("C1", "1.2", &decided, &votes);
        assert!(settled.to_string().contains("*Votes* finance 1 of 2"));
        assert!(buttons_of(&settled).is_empty());
        // After a vote's edit the message shows the edit, which the
        // buttons' digest is of.
        let mut edited = r.clone();
        if let Some(roster) = edited.roster.as_mut() {
            roster.revised_payload = Some(json!({ "order": "A-1", "amount": 3 }));
        }
        let body = voted("C1", "1.2", &edited, None, &votes);
        let text = body.to_string();
        assert!(text.contains("(as edited by a vote)"), "{text}");
        assert!(text.contains("\\\"amount\\\": 3"), "{text}");
        assert!(!text.contains("xxxxx"), "not the original: {text}");
        let value = format!("{} {}", edited.key, edited.payload_digest());
        assert!(text.contains(&value), "{text}");
        // A plain gate shows no votes.
        assert!(
            !pending("#refunds", &record(), None)
                .to_string()
                .contains("*Votes*")
        );
    }

    fn buttons_of(body: &Value) -> Vec<Value> {
        body["blocks"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|b| b["type"] == "actions")
            .cloned()
            .collect()
    }

    #[test]
    fn the_payload_preview_is_bounded() {
        let preview = payload_preview(&record().payload);
        assert!(preview.chars().count() < PAYLOAD_PREVIEW_CHARS + 40);
        assert!(preview.ends_with("(truncated)"));
        assert_eq!(payload_preview(&json!("```")), "\"`\u{200b}``\"");
    }

    #[test]
    fn the_settled_message_shows_who_decided_and_has_no_buttons() {
        let mut r = record();
        r.status = ApprovalStatus::Approved;
        r.decided_by = Some("slack:U024BE7LH".into());
        r.decided_at = Some(crate::support::time::now());
        let body = settled("C1", "1.2", &r);
        assert!(
            body["blocks"]
                .as_array()
                .unwrap()
                .iter()
                .all(|b| b["type"] != "actions")
        );
        let text = body.to_string();
        assert!(text.contains("<@U024BE7LH>"));
        assert!(text.contains("slack:U024BE7LH"));
        assert!(
            body["text"]
                .as_str()
                .unwrap()
                .starts_with("Approved by slack:U024BE7LH")
        );
        r.status = ApprovalStatus::Expired;
        assert!(
            settled("C1", "1.2", &r)["text"]
                .as_str()
                .unwrap()
                .starts_with("Expired")
        );
    }
}
