//! What the CLI prints: run outcomes, approval records, event lines.

use std::io::Write;
use std::path::Path;

use serde_json::Value;
use tokio::sync::broadcast;
use tollgate_runtime::{ApprovalRecord, Event, RunOutcome, RunStatus};

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
pub fn outcome(outcome: &RunOutcome, spec: &Path) {
    match outcome.status {
        RunStatus::Completed => {
            println!("run {} completed", outcome.run_id);
            println!("{}", pretty(&Value::Object(outcome.outputs.clone())));
        }
        RunStatus::AwaitingApproval => {
            if let Some(record) = &outcome.pending {
                println!(
                    "run {} paused at step {} ({}): {}",
                    outcome.run_id,
                    record.step_id,
                    record.phase.as_str(),
                    record.message.as_deref().unwrap_or("")
                );
                println!("key: {}", record.key);
                println!("expires: {}", timestamp(record.expires_at));
                println!(
                    "approve: tollgate approvals approve {} --spec {}",
                    record.key,
                    spec.display()
                );
            }
        }
        RunStatus::Rejected => println!("run {} rejected", outcome.run_id),
        RunStatus::Skipped => println!(
            "run {} skipped: its dedupe key was already claimed",
            outcome.run_id
        ),
        RunStatus::Failed => eprintln!(
            "run {} failed: {}",
            outcome.run_id,
            outcome.error.as_deref().unwrap_or("unknown error")
        ),
        RunStatus::Expired => println!("run {} expired", outcome.run_id),
        RunStatus::Running => println!("run {} is still running", outcome.run_id),
    }
}

/// One record, for `approvals show`.
pub fn record(r: &ApprovalRecord) {
    println!("key:         {}", r.key);
    println!("status:      {}", r.status);
    println!("agent:       {}", r.agent_id);
    println!("run:         {}", r.run_id);
    println!(
        "step:        {} (#{}, phase {})",
        r.step_id,
        r.step_index,
        r.phase.as_str()
    );
    println!("message:     {}", r.message.as_deref().unwrap_or(""));
    println!(
        "spec:        {}",
        &r.spec_hash.get(..12).unwrap_or(&r.spec_hash)
    );
    println!("created:     {}", timestamp(r.created_at));
    println!("expires:     {}", timestamp(r.expires_at));
    if let Some(by) = &r.decided_by {
        println!("decided by:  {by}");
    }
    if let Some(at) = r.decided_at {
        println!("decided at:  {}", timestamp(at));
    }
    if let Some(reason) = r.reason() {
        println!("reason:      {reason}");
    }
    println!("payload:\n{}", indent(&pretty(&r.payload)));
    if let Some(edited) = r.modified_payload() {
        println!("edited payload:\n{}", indent(&pretty(edited)));
    }
}

/// A table of records, for `approvals list`.
pub fn table(records: &[ApprovalRecord]) {
    if records.is_empty() {
        println!("no pending approvals");
        return;
    }
    println!(
        "{:<36}  {:<20}  {:<16}  {:<6}  {:<20}  MESSAGE",
        "KEY", "AGENT", "STEP", "PHASE", "EXPIRES"
    );
    for r in records {
        println!(
            "{:<36}  {:<20}  {:<16}  {:<6}  {:<20}  {}",
            r.key,
            r.agent_id,
            r.step_id,
            r.phase.as_str(),
            r.expires_at.format("%Y-%m-%d %H:%M:%SZ"),
            one_line(r.message.as_deref().unwrap_or(""))
        );
    }
}

pub fn pretty(v: &Value) -> String {
    serde_json::to_string_pretty(v).unwrap_or_else(|_| v.to_string())
}

fn timestamp(t: chrono::DateTime<chrono::Utc>) -> String {
    t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

fn indent(text: &str) -> String {
    text.lines()
        .map(|l| format!("  {l}"))
        .collect::<Vec<_>>()
        .join("\n")
}

fn one_line(text: &str) -> String {
    let flat: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if flat.chars().count() > 60 {
        let cut: String = flat.chars().take(59).collect();
        format!("{cut}…")
    } else {
        flat
    }
}

/// Decided records whose run never finished, for `approvals list --stuck`.
pub fn stuck_table(records: &[ApprovalRecord]) {
    if records.is_empty() {
        println!("no stuck claims");
        return;
    }
    println!(
        "{:<36}  {:<20}  {:<16}  {:<9}  {:<16}  DECIDED AT",
        "KEY", "AGENT", "STEP", "STATUS", "DECIDED BY"
    );
    for r in records {
        println!(
            "{:<36}  {:<20}  {:<16}  {:<9}  {:<16}  {}",
            r.key,
            r.agent_id,
            r.step_id,
            r.status.as_str(),
            r.decided_by.as_deref().unwrap_or(""),
            r.decided_at.map(timestamp).unwrap_or_default()
        );
    }
}
