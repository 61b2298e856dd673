//! What the CLI prints: run outcomes, approval records, event lines.

use std::io::Write;

use serde_json::Value;
use tokio::sync::broadcast;

use super::common::SpecSource;
use crate::{ApprovalRecord, Event, RunOutcome, RunStatus};

/// Print every event already published on `events` as one JSON line each.
pub fn drain_events(events: &mut broadcast::Receiver<Event>) {
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    while let Ok(event) = events.try_recv() {
        if let Ok(line) = serde_json::to_string(&event) {
            let _ = writeln!(out, "{line}");
        }
    }
}

/// A human summary of where a run stands.
pub fn outcome(outcome: &RunOutcome, spec: &SpecSource) {
    match outcome.status {
        RunStatus::Completed => {
            say!("run {} completed", outcome.run_id);
            say!("{}", pretty(&Value::Object(outcome.outputs.clone())));
        }
        RunStatus::AwaitingApproval => {
            if let Some(record) = &outcome.pending {
                say!(
                    "run {} paused at step {} ({}): {}",
                    outcome.run_id,
                    record.step_id,
                    record.phase.as_str(),
                    record.message.as_deref().unwrap_or("")
                );
                say!("key: {}", record.key);
                say!("expires: {}", timestamp(record.expires_at));
                say!(
                    "approve: {} approvals approve {}{}",
                    program_name(),
                    record.key,
                    spec.spec_flag()
                );
            }
        }
        RunStatus::Rejected => say!("run {} rejected", outcome.run_id),
        RunStatus::Skipped => say!(
            "run {} skipped: its dedupe key was already claimed",
            outcome.run_id
        ),
        RunStatus::Failed => eprintln!(
            "run {} failed: {}",
            outcome.run_id,
            outcome.error.as_deref().unwrap_or("unknown error")
        ),
        RunStatus::Expired => say!("run {} expired", outcome.run_id),
        RunStatus::Running => say!("run {} is still running", outcome.run_id),
        RunStatus::Stuck => eprintln!(
            "run {} is stuck: {}",
            outcome.run_id,
            outcome
                .error
                .as_deref()
                .unwrap_or("a step was in flight when its process stopped")
        ),
        RunStatus::Cancelled => say!("run {} cancelled", outcome.run_id),
    }
}

/// One record, for `approvals show`.
pub fn record(r: &ApprovalRecord) {
    say!("key:         {}", r.key);
    say!("status:      {}", r.status);
    say!("agent:       {}", r.agent_id);
    say!("run:         {}", r.run_id);
    say!(
        "step:        {} (#{}, phase {})",
        r.step_id,
        r.step_index,
        r.phase.as_str()
    );
    say!("message:     {}", r.message.as_deref().unwrap_or(""));
    say!(
        "spec:        {}",
        &r.spec_hash.get(..12).unwrap_or(&r.spec_hash)
    );
    say!("created:     {}", timestamp(r.created_at));
    say!("expires:     {}", timestamp(r.expires_at));
    if let Some(by) = &r.decided_by {
        say!("decided by:  {by}");
    }
    if let Some(at) = r.decided_at {
        say!("decided at:  {}", timestamp(at));
    }
    if let Some(reason) = r.reason() {
        say!("reason:      {reason}");
    }
    if let Some(input) = r.approver_input() {
        say!("input:       {input}");
    }
    if let Some(roster) = &r.roster {
        for rule in &roster.rules {
            say!(
                "rule:        {} of {} ({})",
                rule.min,
                rule.group,
                rule.members.join(", ")
            );
        }
        if !roster.requesters.is_empty() && !roster.allow_self_approval {
            say!("may not vote: {}", roster.requesters.join(", "));
        }
    }
    say!("digest:      {}", r.payload_digest());
    say!("payload:\n{}", indent(&pretty(&r.payload)));
    if let Some(revised) = r.roster.as_ref().and_then(|o| o.revised_payload.as_ref()) {
        say!(
            "edited by a vote (asked about now):\n{}",
            indent(&pretty(revised))
        );
    }
    if let Some(edited) = r.modified_payload() {
        say!("edited payload:\n{}", indent(&pretty(edited)));
    }
}

/// A table of records, for `approvals list`.
/// Pending records; with `served` (the hash of the spec given), a record
/// paused under another version says so before its message.
/// `progress` holds each gate with rules' progress, by key: shown before
/// its message.
pub fn table(
    records: &[ApprovalRecord],
    served: Option<&str>,
    progress: &std::collections::BTreeMap<String, String>,
) {
    print_table(
        records,
        "no pending approvals",
        ["KEY", "AGENT", "STEP", "PHASE", "EXPIRES", "MESSAGE"],
        |r| {
            let message = one_line(r.message.as_deref().unwrap_or(""));
            let message = match served {
                Some(served) if !r.is_current_for(served) => format!(
                    "[stale (spec {})] {message}",
                    crate::domain::spec::SpecHash::short_of(&r.spec_hash)
                ),
                _ => message,
            };
            let message = match progress.get(&r.key) {
                Some(line) => format!("[{line}] {message}"),
                None => message,
            };
            [
                r.phase.as_str().to_string(),
                timestamp(r.expires_at),
                message,
            ]
        },
    );
}

/// Decided records whose run never finished, for `approvals list --stuck`.
pub fn stuck_table(records: &[ApprovalRecord]) {
    print_table(
        records,
        "no stuck claims",
        ["KEY", "AGENT", "STEP", "STATUS", "DECIDED BY", "DECIDED AT"],
        |r| {
            [
                r.status.as_str().to_string(),
                r.decided_by.clone().unwrap_or_default(),
                r.decided_at.map(timestamp).unwrap_or_default(),
            ]
        },
    );
}

/// The pre-flight table of `approvals approve|reject --all`: what will be
/// decided, with the digest each decision will be checked against.
pub fn batch_table(records: &[ApprovalRecord]) {
    let row = |c: [&str; 5]| {
        format!(
            "{:<36}  {:<16}  {:<20}  {:<71}  {}",
            c[0], c[1], c[2], c[3], c[4]
        )
    };
    say!(
        "{}",
        row(["KEY", "STEP", "CREATED", "PAYLOAD DIGEST", "MESSAGE"])
    );
    for r in records {
        say!(
            "{}",
            row([
                &r.key,
                &r.step_id,
                &timestamp(r.created_at),
                &r.payload_digest(),
                &one_line(r.message.as_deref().unwrap_or("")),
            ])
        );
    }
}

/// Key, agent and step, then three columns of the caller's choosing.
fn print_table(
    records: &[ApprovalRecord],
    empty: &str,
    header: [&str; 6],
    rest: impl Fn(&ApprovalRecord) -> [String; 3],
) {
    if records.is_empty() {
        say!("{empty}");
        return;
    }
    let row = |c: [&str; 6]| {
        format!(
            "{:<36}  {:<20}  {:<16}  {:<10}  {:<20}  {}",
            c[0], c[1], c[2], c[3], c[4], c[5]
        )
    };
    say!("{}", row(header));
    for r in records {
        let [a, b, c] = rest(r);
        say!("{}", row([&r.key, &r.agent_id, &r.step_id, &a, &b, &c]));
    }
}

/// This binary's name as the user typed it (tollgate, or an exported server).
fn program_name() -> String {
    std::env::args_os()
        .next()
        .and_then(|arg0| {
            std::path::Path::new(&arg0)
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
        })
        .unwrap_or_else(|| "tollgate".into())
}

pub fn pretty(v: &Value) -> String {
    serde_json::to_string_pretty(v).unwrap_or_else(|_| v.to_string())
}

/// The one form the CLI prints times in: RFC 3339 UTC to the second
/// (`2026-12-01T09:08:00Z`); `--json` keeps the stored microseconds.
pub fn timestamp(t: chrono::DateTime<chrono::Utc>) -> String {
    t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

pub(crate) fn indent(text: &str) -> String {
    text.lines()
        .map(|l| format!("  {l}"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// `text` on one line, cut to 60 characters.
pub(crate) fn one_line(text: &str) -> String {
    let flat: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if flat.chars().count() > 60 {
        let cut: String = flat.chars().take(59).collect();
        format!("{cut}…")
    } else {
        flat
    }
}
