//! Exit statuses (DESIGN §6) and the error type that carries one.
//!
//! This file alone names the numbers: every command (the exporter's too)
//! uses these constants, and the domain's errors carry no exit status; the
//! mapping from each typed error to its status is here (`From` impls).

use std::fmt;

use crate::{ApprovalError, RunError, RunStatus, SpecError};

/// Done, or paused and persisted.
pub const OK: i32 = 0;
/// The run failed; or the command did (a store or write failure, `export
/// --check` finding files out of date).
pub const RUN_FAILED: i32 = 1;
/// Bad input or usage (clap's own errors exit with this too).
pub const BAD_INPUT: i32 = 2;
/// Not found or expired.
pub const NOT_FOUND: i32 = 3;
/// Conflict: already resolved, spec changed, files edited since the last
/// export.
pub const CONFLICT: i32 = 4;
/// The run ended rejected.
pub const REJECTED: i32 = 5;
/// The decider is not in the spec's `approvals.approvers`: the input is fine
/// and the record still pending, only someone else may decide it.
pub const FORBIDDEN: i32 = 6;

/// An error that ends the command with a specific exit status.
#[derive(Debug)]
pub struct ExitFailure {
    pub code: i32,
    pub message: String,
}

impl ExitFailure {
    pub fn new(code: i32, message: impl Into<String>) -> ExitFailure {
        ExitFailure {
            code,
            message: message.into(),
        }
    }

    pub fn bad_input(message: impl Into<String>) -> ExitFailure {
        ExitFailure::new(BAD_INPUT, message)
    }
}

impl fmt::Display for ExitFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for ExitFailure {}

impl From<SpecError> for ExitFailure {
    fn from(e: SpecError) -> Self {
        ExitFailure::bad_input(e.to_string())
    }
}

/// The exit status of a refused decision.
pub fn for_approval(e: &ApprovalError) -> i32 {
    match e {
        ApprovalError::NotFound { .. } | ApprovalError::Expired { .. } => NOT_FOUND,
        ApprovalError::AlreadyResolved { .. }
        | ApprovalError::SpecChanged { .. }
        | ApprovalError::NotOnVersion { .. }
        | ApprovalError::AlreadyVoted { .. }
        | ApprovalError::PayloadChanged { .. }
        | ApprovalError::NotDue { .. } => CONFLICT,
        ApprovalError::InvalidPayload { .. }
        | ApprovalError::ReasonRequired { .. }
        | ApprovalError::InvalidInput { .. } => BAD_INPUT,
        ApprovalError::Forbidden { .. }
        | ApprovalError::NotInGroups { .. }
        | ApprovalError::SelfApproval { .. } => FORBIDDEN,
    }
}

impl From<ApprovalError> for ExitFailure {
    fn from(e: ApprovalError) -> Self {
        ExitFailure::new(for_approval(&e), format!("{}: {e}", e.code()))
    }
}

impl From<RunError> for ExitFailure {
    fn from(e: RunError) -> Self {
        match e {
            RunError::Approval(a) => a.into(),
            RunError::NoPendingApproval(_) => ExitFailure::new(NOT_FOUND, e.to_string()),
            RunError::WrongAgent { .. } => ExitFailure::bad_input(e.to_string()),
            RunError::CancelForbidden { .. } => {
                ExitFailure::new(FORBIDDEN, format!("forbidden: {e}"))
            }
            RunError::Forbidden { .. } | RunError::MigrateForbidden { .. } => {
                ExitFailure::new(FORBIDDEN, e.to_string())
            }
            RunError::Store(crate::StoreError::RunNotFound(_)) => {
                ExitFailure::new(NOT_FOUND, format!("run_not_found: {e}"))
            }
            RunError::Store(crate::StoreError::RunNotCancellable { .. }) => {
                ExitFailure::new(CONFLICT, format!("run_not_cancellable: {e}"))
            }
            RunError::Store(crate::StoreError::WrongRunStatus { .. }) => {
                ExitFailure::new(CONFLICT, format!("run_conflict: {e}"))
            }
            RunError::Store(_) | RunError::TaskDropped { .. } => {
                ExitFailure::new(RUN_FAILED, e.to_string())
            }
            RunError::NotDriven { .. } => ExitFailure::new(CONFLICT, e.to_string()),
            // Led by its code, as over HTTP and like `spec_changed`: a
            // script tells "cannot run here" from "changed" by it.
            RunError::SpecUnavailable { .. } => {
                ExitFailure::new(CONFLICT, format!("spec_unavailable: {e}"))
            }
        }
    }
}

impl From<crate::StoreError> for ExitFailure {
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
        // Cancelled or stuck: the run did not finish its steps.
        RunStatus::Failed | RunStatus::Running | RunStatus::Stuck | RunStatus::Cancelled => {
            RUN_FAILED
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refused_decisions_map_to_their_exit_statuses_here() {
        let key = || "k".to_string();
        let cases = [
            (ApprovalError::NotFound { key: key() }, NOT_FOUND),
            (
                ApprovalError::Expired {
                    key: key(),
                    expired_at: chrono::Utc::now(),
                },
                NOT_FOUND,
            ),
            (
                ApprovalError::AlreadyResolved {
                    key: key(),
                    status: crate::ApprovalStatus::Rejected,
                    decided_by: None,
                    decided_at: None,
                },
                CONFLICT,
            ),
            (
                ApprovalError::SpecChanged {
                    key: key(),
                    paused_with: "a".into(),
                    current: "b".into(),
                },
                CONFLICT,
            ),
            (
                ApprovalError::Forbidden {
                    key: key(),
                    decided_by: "m".into(),
                },
                FORBIDDEN,
            ),
            (
                ApprovalError::InvalidPayload {
                    key: key(),
                    reason: "r".into(),
                },
                BAD_INPUT,
            ),
        ];
        for (error, want) in cases {
            let code = error.code();
            let failure = ExitFailure::from(error);
            assert_eq!(failure.code, want, "{failure}");
            assert!(failure.message.starts_with(code), "{failure}");
        }
        assert_eq!(
            (
                OK, RUN_FAILED, BAD_INPUT, NOT_FOUND, CONFLICT, REJECTED, FORBIDDEN
            ),
            (0, 1, 2, 3, 4, 5, 6),
            "DESIGN §6"
        );
    }
}
