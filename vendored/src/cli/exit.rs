//! Exit statuses (DESIGN §6) and the error type that carries one.
//!
//! 0 done (or paused and persisted), 1 run failed, 2 bad input or usage,
//! 3 not found or expired, 4 conflict (already resolved, spec changed; set by
//! `ApprovalError::exit_code`), 5 rejected, 6 forbidden (the decider is not
//! in the spec's `approvals.approvers`).

use std::fmt;

use crate::{ApprovalError, RunError, RunStatus, SpecError};

pub const OK: i32 = 0;
pub const RUN_FAILED: i32 = 1;
pub const BAD_INPUT: i32 = 2;
pub const NOT_FOUND: i32 = 3;
pub const REJECTED: i32 = 5;
pub const FORBIDDEN: i32 = 6;

/// An error that ends the command with a specific exit status.
#[derive(Debug)]
pub struct Failure {
    pub code: i32,
    pub message: String,
}

impl Failure {
    pub fn new(code: i32, message: impl Into<String>) -> Failure {
        Failure {
            code,
            message: message.into(),
        }
    }

    pub fn bad_input(message: impl Into<String>) -> Failure {
        Failure::new(BAD_INPUT, message)
    }
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Failure {}

impl From<SpecError> for Failure {
    fn from(e: SpecError) -> Self {
        Failure::bad_input(e.to_string())
    }
}

impl From<ApprovalError> for Failure {
    fn from(e: ApprovalError) -> Self {
        Failure::new(e.exit_code(), format!("{}: {e}", e.code()))
    }
}

impl From<RunError> for Failure {
    fn from(e: RunError) -> Self {
        match e {
            RunError::Approval(a) => a.into(),
            RunError::NoPendingApproval(_) => Failure::new(NOT_FOUND, e.to_string()),
            RunError::WrongAgent { .. } => Failure::bad_input(e.to_string()),
            RunError::Store(_) => Failure::new(RUN_FAILED, e.to_string()),
        }
    }
}

impl From<crate::StoreError> for Failure {
    fn from(e: crate::StoreError) -> Self {
        RunError::from(e).into()
    }
}

/// The exit status for how a run stands.
pub fn for_status(status: RunStatus) -> i32 {
    match status {
        RunStatus::Completed | RunStatus::AwaitingApproval | RunStatus::Skipped => OK,
        RunStatus::Rejected => REJECTED,
        RunStatus::Expired => NOT_FOUND,
        RunStatus::Failed | RunStatus::Running => RUN_FAILED,
    }
}
