//! A run's events as the timeline shows them (`timeline.html`, shared by
//! the approval and run pages; the script builds the same lines from the
//! stream's JSON).

use serde::Serialize;

use super::format;
use crate::domain::events::{Event, EventKind};

/// One line of the timeline.
#[derive(Debug, Serialize)]
pub(crate) struct TimelineEntry {
    seq: u64,
    kind: &'static str,
    at: String,
    at_machine: String,
    summary: String,
}

/// The timeline of `events`, in their order.
pub(crate) fn entries(events: &[Event]) -> Vec<TimelineEntry> {
    events
        .iter()
        .map(|e| TimelineEntry {
            seq: e.seq,
            kind: e.kind.name(),
            at: format::time(e.at),
            at_machine: format::machine(e.at),
            summary: summary(&e.kind),
        })
        .collect()
}

/// One line for an event, as the timeline shows it (the script builds the
/// same from the stream's JSON).
fn summary(kind: &EventKind) -> String {
    match kind {
        EventKind::RunStarted { .. } => "run started".into(),
        EventKind::StepStarted { step, .. } => format!("step {step} started"),
        EventKind::StepCompleted { step, replayed, .. } => {
            if *replayed {
                format!("step {step} completed (replayed)")
            } else {
                format!("step {step} completed")
            }
        }
        EventKind::AwaitingApproval { step, .. } => format!("waiting for approval at {step}"),
        EventKind::ApprovalResolved {
            decision,
            decided_by,
            reason,
            ..
        } => match reason {
            Some(reason) => format!("{decision} by {decided_by}: {reason}"),
            None => format!("{decision} by {decided_by}"),
        },
        EventKind::ApprovalMigrated { from, to, by, .. } => format!(
            "moved from spec {} to {} by {by}",
            crate::SpecHash::short_of(from),
            crate::SpecHash::short_of(to)
        ),
        EventKind::ApprovalVote {
            voter,
            decision,
            progress,
            ..
        } => format!("{voter} voted {decision}: {progress}"),
        EventKind::ApprovalReminded { step, percent, .. } => {
            format!("reminder at {step}: {percent}% of its time has passed")
        }
        EventKind::ApprovalEscalated { groups, added, .. } => format!(
            "escalated to {}: {} may decide now",
            groups.join(", "),
            if added.is_empty() {
                "nobody more".to_string()
            } else {
                added.join(", ")
            }
        ),
        EventKind::GateSkipped { step, when, .. } => {
            format!("no approval at {step}: {when} is false for this call")
        }
        EventKind::RunCompleted { .. } => "run completed".into(),
        EventKind::RunRejected { .. } => "run rejected".into(),
        EventKind::RunExpired { .. } => "run expired".into(),
        EventKind::RunSkipped { step, .. } => format!("run skipped at {step} (dedupe)"),
        EventKind::RunFailed { error, .. } => format!("run failed: {error}"),
        EventKind::RunCancelled { by, reason } => match reason {
            Some(reason) => format!("run cancelled by {by}: {reason}"),
            None => format!("run cancelled by {by}"),
        },
        EventKind::RunRecovered { by, .. } => format!("run recovered by {by}"),
        EventKind::RunStuck { step, reason } => format!("run stuck at {step}: {reason}"),
    }
}
