//! The error body and its stable codes, read from `ApiError` itself.
//!
//! One value of every variant goes through `ApiError::code` and
//! `ApiError::status`, so the document lists exactly the codes and
//! statuses the server answers with; `every_variant_is_listed` makes a new
//! variant a compile error here until it has its sample.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::schema::Components;
use crate::domain::pending_approval::{ApprovalError, ApprovalStatus};
use crate::service::ApiError;

/// `components.schemas.Error`: `{"error": {"code", "message"}}`.
pub fn error_schema(components: &mut Components) -> Value {
    components.named("Error", |_| {
        let statuses = statuses_as_sampled();
        let table: Vec<String> = statuses
            .iter()
            .map(|(code, statuses)| {
                let statuses: Vec<String> = statuses.iter().map(u16::to_string).collect();
                format!("`{code}`: {}", statuses.join(", "))
            })
            .collect();
        let codes: Vec<&str> = statuses.keys().copied().collect();
        json!({
            "type": "object",
            "description": "Every failure's body. `code` is stable (clients branch on it); `message` says what was wrong and where, for people.",
            "properties": {
                "error": {
                    "type": "object",
                    "properties": {
                        "code": {
                            "type": "string",
                            "enum": codes,
                            "description": format!("The code, and the HTTP status it comes with: {}.", table.join("; "))
                        },
                        "message": { "type": "string" },
                        "errors": {
                            "type": "array",
                            "description": "`invalid_input` only: each way the approver's input does not fit the gate's form, with the JSON Pointer of the field at fault (`/note`; empty for the input as a whole).",
                            "items": {
                                "type": "object",
                                "properties": {
                                    "path": { "type": "string" },
                                    "message": { "type": "string" }
                                },
                                "required": ["path", "message"],
                                "additionalProperties": false
                            }
                        }
                    },
                    "required": ["code", "message"],
                    "additionalProperties": false
                }
            },
            "required": ["error"],
            "additionalProperties": false
        })
    })
}

/// One value of each `ApiError` variant (and each decision refusal).
fn samples() -> Vec<ApiError> {
    let key = || "k".to_string();
    let at = chrono::DateTime::<chrono::Utc>::UNIX_EPOCH;
    let approvals = [
        ApprovalError::NotFound { key: key() },
        ApprovalError::Expired {
            key: key(),
            expired_at: at,
        },
        ApprovalError::AlreadyResolved {
            key: key(),
            status: ApprovalStatus::Approved,
            decided_by: None,
            decided_at: None,
        },
        ApprovalError::SpecChanged {
            key: key(),
            paused_with: String::new(),
            current: String::new(),
        },
        ApprovalError::NotOnVersion {
            key: key(),
            expected: String::new(),
            found: String::new(),
        },
        ApprovalError::Forbidden {
            key: key(),
            decided_by: String::new(),
        },
        ApprovalError::InvalidPayload {
            key: key(),
            reason: String::new(),
        },
        ApprovalError::SelfApproval {
            key: key(),
            voter: String::new(),
            asked_by: vec![],
        },
        ApprovalError::NotInGroups {
            key: key(),
            voter: String::new(),
            groups: vec![],
        },
        ApprovalError::AlreadyVoted {
            key: key(),
            voter: String::new(),
            decision: crate::domain::policy::VoteDecision::Approve,
        },
        ApprovalError::ReasonRequired { key: key() },
        ApprovalError::InvalidInput {
            key: key(),
            errors: vec![],
        },
        ApprovalError::PayloadChanged {
            key: key(),
            given: String::new(),
            current: String::new(),
        },
        ApprovalError::NotDue {
            key: key(),
            expires_at: chrono::DateTime::UNIX_EPOCH,
        },
    ];
    let mut all: Vec<ApiError> = approvals.into_iter().map(ApiError::Approval).collect();
    all.extend([
        ApiError::InvalidRequest(String::new()),
        ApiError::Unauthorized,
        ApiError::SlackSignature(crate::notify::slack::signature::SlackSignatureError::Stale),
        ApiError::WebhookSignature(crate::support::webhook_signature::WebhookSignatureError::Stale),
        ApiError::RunNotFound(String::new()),
        ApiError::NoticeNotFound(String::new()),
        ApiError::NoticeNotRetriable(String::new()),
        ApiError::RunNotCancellable {
            run_id: String::new(),
            status: "completed",
        },
        ApiError::CancelForbidden {
            run_id: String::new(),
            by: String::new(),
        },
        ApiError::RunConflict(String::new()),
        ApiError::SpecUnavailable(String::new()),
        ApiError::Forbidden(String::new()),
        ApiError::InsufficientScope {
            name: String::new(),
            scope: "",
        },
        ApiError::IdempotencyConflict(String::new()),
        ApiError::RunHasNoApproval(String::new()),
        ApiError::Replayed,
        ApiError::NotFound {
            method: String::new(),
            path: String::new(),
        },
        ApiError::MethodNotAllowed {
            method: String::new(),
            path: String::new(),
        },
        ApiError::UnsupportedMediaType(String::new()),
        ApiError::UnsupportedSpecMediaType(String::new()),
        ApiError::PayloadTooLarge { limit: 0 },
        ApiError::BadHost(String::new()),
        ApiError::ForbiddenOrigin(String::new()),
        ApiError::BodyTimeout {
            after: String::new(),
        },
        ApiError::MalformedHead,
        ApiError::UriTooLong,
        ApiError::HeadersTooLarge {
            max_bytes: 0,
            max_headers: 0,
        },
        ApiError::Unavailable(""),
        ApiError::StoreBusy(String::new()),
        ApiError::Internal(String::new()),
    ]);
    all
}

/// Never called: a variant added to `ApiError` or `ApprovalError` fails
/// to compile here, which is the reminder to add it to `samples`.
#[allow(dead_code)]
fn every_variant_is_listed(api: &ApiError) {
    match api {
        ApiError::Approval(refusal) => match refusal {
            ApprovalError::NotFound { .. }
            | ApprovalError::Expired { .. }
            | ApprovalError::AlreadyResolved { .. }
            | ApprovalError::SpecChanged { .. }
            | ApprovalError::NotOnVersion { .. }
            | ApprovalError::Forbidden { .. }
            | ApprovalError::InvalidPayload { .. }
            | ApprovalError::SelfApproval { .. }
            | ApprovalError::NotInGroups { .. }
            | ApprovalError::AlreadyVoted { .. }
            | ApprovalError::ReasonRequired { .. }
            | ApprovalError::InvalidInput { .. }
            | ApprovalError::PayloadChanged { .. }
            | ApprovalError::NotDue { .. } => {}
        },
        ApiError::InvalidRequest(_)
        | ApiError::Unauthorized
        | ApiError::SlackSignature(_)
        | ApiError::WebhookSignature(_)
        | ApiError::RunNotFound(_)
        | ApiError::NoticeNotFound(_)
        | ApiError::NoticeNotRetriable(_)
        | ApiError::RunNotCancellable { .. }
        | ApiError::CancelForbidden { .. }
        | ApiError::RunConflict(_)
        | ApiError::SpecUnavailable(_)
        | ApiError::Forbidden(_)
        | ApiError::InsufficientScope { .. }
        | ApiError::IdempotencyConflict(_)
        | ApiError::RunHasNoApproval(_)
        | ApiError::Replayed
        | ApiError::NotFound { .. }
        | ApiError::MethodNotAllowed { .. }
        | ApiError::UnsupportedMediaType(_)
        | ApiError::UnsupportedSpecMediaType(_)
        | ApiError::PayloadTooLarge { .. }
        | ApiError::BadHost(_)
        | ApiError::ForbiddenOrigin(_)
        | ApiError::BodyTimeout { .. }
        | ApiError::MalformedHead
        | ApiError::UriTooLong
        | ApiError::HeadersTooLarge { .. }
        | ApiError::Unavailable(_)
        | ApiError::StoreBusy(_)
        | ApiError::Internal(_) => {}
    }
}

/// Every code the server can answer with.
#[cfg(test)]
pub fn codes() -> Vec<&'static str> {
    samples().iter().map(ApiError::code).collect()
}

/// Each code an `ApiError` can carry, with the HTTP statuses it comes
/// with (ascending), read from one value of every variant: what
/// docs/reference/errors.md and the errors registry's test are built from.
pub fn statuses_by_code() -> BTreeMap<&'static str, Vec<u16>> {
    let mut statuses = statuses_as_sampled();
    for list in statuses.values_mut() {
        list.sort_unstable();
    }
    statuses
}

/// Each code's statuses in the order [`samples`] first meets them: the
/// order the document's `Error` schema has always listed them in (sorting
/// there would change every export's `openapi.json` for nothing).
fn statuses_as_sampled() -> BTreeMap<&'static str, Vec<u16>> {
    let mut statuses: BTreeMap<&'static str, Vec<u16>> = BTreeMap::new();
    for error in samples() {
        let entry = statuses.entry(error.code()).or_default();
        let status = error.status().as_u16();
        if !entry.contains(&status) {
            entry.push(status);
        }
    }
    statuses
}
