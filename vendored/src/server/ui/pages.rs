//! The inbox's pages: one module per page, each with its typed context
//! (a [`Page`](super::render::templates::Page)), the pure function that
//! builds it from what was read, and its handlers.

pub(crate) mod approval;
pub(crate) mod history;
pub(crate) mod inbox;
pub(crate) mod link;
pub(crate) mod login;
pub(crate) mod notifications;
pub(crate) mod refusal;
pub(crate) mod runs;

#[cfg(test)]
mod tests;

use serde::Serialize;
use serde_json::{Map, Value};

use super::render::payload;
use crate::domain::pending_approval::ApprovalRecord;

/// A step's output, as the approval and run pages show it.
#[derive(Debug, Serialize)]
pub(crate) struct Output {
    step: String,
    raw: String,
}

impl Output {
    /// Every output, in the run's order.
    pub fn all(outputs: &Map<String, Value>) -> Vec<Output> {
        outputs
            .iter()
            .map(|(step, output)| Output {
                step: step.clone(),
                raw: payload::shown(output).0,
            })
            .collect()
    }
}

/// What a record asks, as the pages word it when the gate has no message.
pub(crate) fn message_of(record: &ApprovalRecord) -> String {
    record
        .message
        .clone()
        .unwrap_or_else(|| format!("Approve step {}?", record.step_id))
}

/// A filter's value: blank is no filter.
pub(crate) fn blank_to_none(value: Option<String>) -> Option<String> {
    value
        .map(|v| v.trim().to_string())
        .filter(|v| !v.is_empty())
}
