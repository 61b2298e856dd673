//! One notice as a mail to one decider: a `multipart/alternative` of plain
//! text and HTML written from the notice's body ([`NoticeBody`]), the same
//! facts in both.
//!
//! What a mail says is what the notice says: the event, the gate's message,
//! the agent, the step, the expiry, rule progress, who decided and why, the
//! payload's digest and a short preview of it (never the whole payload, which
//! may be large or sensitive: the approval's page has it), and the signed
//! link bound to this decider when there is one. The subject names the
//! event, the agent and the step only: subjects are shown in lists, push
//! notifications and server logs, so the gate's message and the payload,
//! which are run data, stay out of it.
//!
//! Everything from a run (message, payload preview, reason, names) is
//! HTML-escaped in the HTML part: it is untrusted text.
//!
//! `Message-ID` is `<{notice id}@tollgate>` and `X-Tollgate-Notice` carries
//! the id too, so a notice sent twice (delivery is at least once) is
//! recognisably the same message, and mail clients that de-duplicate on
//! `Message-ID` show it once.

use std::fmt::Write as _;

use lettre::Message;
use lettre::message::header::{HeaderName, HeaderValue};
use lettre::message::{Mailbox, MultiPart};

use crate::domain::notices::{NoticeBody, NoticeEvent};

/// The header carrying the notice id.
pub const NOTICE_HEADER: &str = "X-Tollgate-Notice";

/// Why a mail could not be written.
#[derive(Debug, thiserror::Error)]
pub enum ComposeError {
    #[error("notice id is not usable in a Message-ID (letters, digits, `-`, `.` and `_` only)")]
    NoticeId,
    #[error("cannot build the mail: {0}")]
    Build(#[from] lettre::error::Error),
}

/// The mailbox of a decider: their name shown beside the address, unless the
/// name is the address.
pub fn recipient(name: &str, address: lettre::Address) -> Mailbox {
    let same = AsRef::<str>::as_ref(&address).eq_ignore_ascii_case(name);
    let display = (!same).then(|| name.to_string());
    Mailbox::new(display, address)
}

/// The mail for one notice to one decider. `link` is the signed link bound
/// to that decider (computed by the caller, never stored).
pub fn compose(
    body: &NoticeBody,
    to: Mailbox,
    from: Mailbox,
    id: &str,
    link: Option<&str>,
) -> Result<Message, ComposeError> {
    let message_id = message_id(id)?;
    let notice_header = HeaderValue::new(HeaderName::new_from_ascii_str(NOTICE_HEADER), id.into());
    Ok(Message::builder()
        .message_id(Some(message_id))
        .raw_header(notice_header)
        // The time of the change, not of this attempt: a notice resent after
        // an outage is the same message, and says when it happened.
        .date(body.timestamp.into())
        .from(from)
        .to(to)
        .subject(subject(body))
        .multipart(MultiPart::alternative_plain_html(
            text(body, id, link),
            html(body, id, link),
        ))?)
}

/// `<{id}@tollgate>`, for an id of letters, digits, `-`, `.` and `_` (a
/// notice id is a UUID).
pub fn message_id(id: &str) -> Result<String, ComposeError> {
    let usable = |c: char| c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | '_');
    if id.is_empty() || !id.chars().all(usable) {
        return Err(ComposeError::NoticeId);
    }
    Ok(format!("<{id}@tollgate>"))
}

/// The event, the agent and the step: nothing a run wrote.
pub fn subject(body: &NoticeBody) -> String {
    format!(
        "{}: {} at step {}",
        title(body.event),
        body.data.agent,
        body.data.step
    )
}

fn title(event: NoticeEvent) -> &'static str {
    match event {
        NoticeEvent::Requested => "Approval requested",
        NoticeEvent::Voted => "Vote recorded",
        NoticeEvent::Approved => "Approved",
        NoticeEvent::Rejected => "Rejected",
        NoticeEvent::Expired => "Expired",
        NoticeEvent::Cancelled => "Cancelled",
        NoticeEvent::Reminded => "Reminder: approval waiting",
        NoticeEvent::Escalated => "Escalated: approval waiting",
    }
}

/// One sentence saying what happened.
fn headline(body: &NoticeBody) -> String {
    let d = &body.data;
    let gate = format!("{} at step {}", d.agent, d.step);
    let by = |verb: &str| match &d.by {
        Some(by) => format!(" {verb} {by}"),
        None => String::new(),
    };
    match body.event {
        NoticeEvent::Requested => format!("{gate} is waiting for a decision."),
        NoticeEvent::Voted => match &d.by {
            Some(voter) => format!("{voter} voted on {gate}; it still waits for more votes."),
            None => format!("A vote was recorded on {gate}; it still waits for more votes."),
        },
        NoticeEvent::Approved => format!("{gate} was approved{}.", by("by")),
        NoticeEvent::Rejected => format!("{gate} was rejected{}.", by("by")),
        NoticeEvent::Expired => format!("{gate} expired without a decision."),
        NoticeEvent::Cancelled => {
            format!("{gate} no longer waits: its run was cancelled{}.", by("by"))
        }
        NoticeEvent::Reminded => match d.percent {
            Some(percent) => format!(
                "Reminder: {gate} is still waiting for a decision ({percent}% of its time has passed)."
            ),
            None => format!("Reminder: {gate} is still waiting for a decision."),
        },
        NoticeEvent::Escalated => {
            format!("{gate} was escalated: more people may decide it now, you among them.")
        }
    }
}

/// The facts, label and value, in the order both parts show them.
fn facts(body: &NoticeBody) -> Vec<(&'static str, String)> {
    let d = &body.data;
    let mut facts = Vec::new();
    if let Some(message) = &d.message {
        facts.push(("Message", message.clone()));
    }
    facts.push(("Agent", d.agent.clone()));
    facts.push(("Step", format!("{} ({})", d.step, d.phase)));
    facts.push(("Status", d.status.past_tense().to_string()));
    facts.push((
        "Expires",
        d.expires_at.format("%Y-%m-%d %H:%M:%S UTC").to_string(),
    ));
    if let Some(progress) = &d.progress {
        facts.push(("Progress", progress.clone()));
    }
    if let Some(by) = &d.by {
        let label = match body.event {
            NoticeEvent::Voted => "Voted by",
            NoticeEvent::Cancelled => "Cancelled by",
            _ => "Decided by",
        };
        facts.push((label, by.clone()));
    }
    if let Some(reason) = &d.reason {
        facts.push(("Reason", reason.clone()));
    }
    if !d.added.is_empty() {
        facts.push(("May decide now", d.added.join(", ")));
    }
    facts.push(("Run", d.run_id.clone()));
    facts.push(("Approval key", d.key.clone()));
    facts.push(("Payload digest", d.payload_digest.clone()));
    facts
}

const LINK_NOTE: &str =
    "The link shows the approval; nothing is decided until you choose on that page.";

/// The plain-text part.
pub fn text(body: &NoticeBody, id: &str, link: Option<&str>) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "{}\n", headline(body));
    let facts = facts(body);
    let width = facts
        .iter()
        .map(|(label, _)| label.len())
        .max()
        .unwrap_or(0)
        + 1;
    for (label, value) in &facts {
        let value = value.replace('\n', &format!("\n{:width$} ", ""));
        let _ = writeln!(out, "{:width$} {value}", format!("{label}:"));
    }
    let _ = writeln!(out, "\nPayload preview:");
    for line in body.data.payload_preview.lines() {
        let _ = writeln!(out, "    {line}");
    }
    if let Some(link) = link {
        let _ = writeln!(out, "\nReview and decide: {link}\n{LINK_NOTE}");
    }
    let _ = writeln!(
        out,
        "\n-- \nNotice {id} ({}), sent by tollgate.",
        body.event
    );
    out
}

/// The HTML part: the same facts, escaped, and the link as a button.
pub fn html(body: &NoticeBody, id: &str, link: Option<&str>) -> String {
    let mut out = String::from(
        "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"></head>\
         <body style=\"font-family: sans-serif; color: #1f2328;\">\n",
    );
    let _ = writeln!(out, "<p>{}</p>", escape(&headline(body)));
    out.push_str("<table style=\"border-collapse: collapse;\">\n");
    for (label, value) in facts(body) {
        let _ = writeln!(
            out,
            "<tr><th style=\"text-align: left; vertical-align: top; padding: 2px 12px 2px 0;\">{}</th>\
             <td style=\"white-space: pre-wrap;\">{}</td></tr>",
            escape(label),
            escape(&value)
        );
    }
    out.push_str("</table>\n<p><strong>Payload preview</strong></p>\n");
    let _ = writeln!(
        out,
        "<pre style=\"background: #f6f8fa; padding: 8px;\">{}</pre>",
        escape(&body.data.payload_preview)
    );
    if let Some(link) = link {
        let _ = writeln!(
            out,
            "<p><a href=\"{}\" style=\"display: inline-block; padding: 8px 16px; \
             background: #1f6feb; color: #ffffff; text-decoration: none; border-radius: 6px;\">\
             Review and decide</a></p>\n<p style=\"font-size: small;\">{}</p>",
            escape(link),
            escape(LINK_NOTE)
        );
    }
    let _ = writeln!(
        out,
        "<p style=\"font-size: small; color: #59636e;\">Notice {} ({}), sent by tollgate.</p>\n</body></html>",
        escape(id),
        escape(body.event.as_str())
    );
    out
}

/// HTML-escape text for an element or a quoted attribute.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::notices::NoticeData;
    use crate::domain::pending_approval::{ApprovalStatus, Phase};

    fn body(event: NoticeEvent) -> NoticeBody {
        let at = crate::support::time::parse_utc("2026-12-03T18:00:00Z").expect("time");
        NoticeBody {
            event,
            timestamp: at,
            data: NoticeData {
                key: "0b7e4d8c-key".into(),
                run_id: "run-1".into(),
                agent: "refund-desk".into(),
                step: "large".into(),
                phase: Phase::Before,
                message: Some("Refund <b>250</b> & \"close\"?".into()),
                status: ApprovalStatus::Pending,
                expires_at: at,
                payload_digest: "sha256:abc123".into(),
                payload_preview: "{\n  \"card\": \"<script>\"\n}".into(),
                progress: Some("finance 1 of 2".into()),
                by: None,
                reason: None,
                percent: None,
                added: Vec::new(),
                link: None,
            },
        }
    }

    fn mailbox(text: &str) -> Mailbox {
        text.parse().expect("mailbox")
    }

    #[test]
    fn the_subject_names_the_event_the_agent_and_the_step_only() {
        let b = body(NoticeEvent::Requested);
        assert_eq!(subject(&b), "Approval requested: refund-desk at step large");
        assert_eq!(
            subject(&body(NoticeEvent::Escalated)),
            "Escalated: approval waiting: refund-desk at step large"
        );
    }

    #[test]
    fn the_html_part_escapes_run_data_and_both_parts_carry_the_link() {
        let b = body(NoticeEvent::Requested);
        let link = "https://tollgate.example/a/key/sig?x=1&y=2";
        let html = html(&b, "n-1", Some(link));
        assert!(
            html.contains("Refund &lt;b&gt;250&lt;/b&gt; &amp; &quot;close&quot;?"),
            "{html}"
        );
        assert!(html.contains("&quot;&lt;script&gt;&quot;"), "{html}");
        assert!(
            !html.contains("<script>") && !html.contains("<b>"),
            "{html}"
        );
        assert!(
            html.contains("href=\"https://tollgate.example/a/key/sig?x=1&amp;y=2\""),
            "{html}"
        );
        let text = text(&b, "n-1", Some(link));
        assert!(text.contains(link), "{text}");
        assert!(text.contains("Refund <b>250</b>"), "{text}");
        assert!(text.contains("Progress:"), "{text}");
        assert!(text.contains("sha256:abc123"), "{text}");
        assert!(!super::text(&b, "n-1", None).contains("Review and decide"));
    }

    #[test]
    fn the_headline_says_what_happened() {
        let mut b = body(NoticeEvent::Approved);
        b.data.by = Some("alice".into());
        assert!(
            text(&b, "n", None).starts_with("refund-desk at step large was approved by alice.")
        );
        let mut b = body(NoticeEvent::Reminded);
        b.data.percent = Some(50);
        assert!(text(&b, "n", None).contains("(50% of its time has passed)"));
        let mut b = body(NoticeEvent::Voted);
        b.data.by = Some("bob".into());
        assert!(text(&b, "n", None).starts_with("bob voted on refund-desk at step large"));
    }

    #[test]
    fn message_id_and_notice_header_come_from_the_notice_id() {
        let id = "5f0c1d2e-8a9b-4c3d-9e8f-0a1b2c3d4e5f";
        let message = compose(
            &body(NoticeEvent::Requested),
            recipient("alice", "alice@example.com".parse().expect("address")),
            mailbox("Tollgate <tollgate@example.com>"),
            id,
            None,
        )
        .expect("compose");
        let raw = String::from_utf8(message.formatted()).expect("utf-8");
        assert!(
            raw.contains(&format!("Message-ID: <{id}@tollgate>\r\n")),
            "{raw}"
        );
        assert!(
            raw.contains(&format!("X-Tollgate-Notice: {id}\r\n")),
            "{raw}"
        );
        assert!(raw.contains("multipart/alternative"), "{raw}");
        assert!(raw.contains("To: alice <alice@example.com>\r\n"), "{raw}");
        assert!(raw.contains("Date: Thu, 03 Dec 2026 18:00:00"), "{raw}");
        assert!(matches!(message_id("a b"), Err(ComposeError::NoticeId)));
        assert!(matches!(message_id(""), Err(ComposeError::NoticeId)));
    }
}
