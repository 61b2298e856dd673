//! Refusals as HTML pages: 403 (`#forbidden`; `data-reason="csrf"` for a
//! bad CSRF token), 404 (`#not-found`), an unusable signed link
//! (`#bad-link`), 405 for a method a page does not answer, and any other
//! error the API would have answered.

use axum::http::StatusCode;
use axum::response::Response;
use serde::Serialize;

use crate::server::ui::render::templates::{self, Chrome, Page};
use crate::service::ApiError;

/// A refusal: what was refused, and why.
#[derive(Debug, Serialize)]
pub(crate) struct RefusalPage<'a> {
    heading: &'a str,
    message: &'a str,
}

impl Page for RefusalPage<'_> {
    const TEMPLATE: &'static str = "refusal.html";
}

/// A refusal page with `status`: `<main>`'s id follows the status.
pub(crate) fn page(
    status: StatusCode,
    heading: &str,
    message: &str,
    reason: Option<&'static str>,
) -> Response {
    let main_id = match status {
        StatusCode::FORBIDDEN => "forbidden",
        StatusCode::NOT_FOUND => "not-found",
        _ => "refused",
    };
    let chrome = Chrome {
        title: heading.to_string(),
        main_id: Some(main_id),
        reason,
        ..Chrome::default()
    };
    templates::page(status, &RefusalPage { heading, message }, &chrome)
}

pub(crate) fn not_found() -> Response {
    page(
        StatusCode::NOT_FOUND,
        "Not found",
        "There is no such page, approval or run here.",
        None,
    )
}

pub(crate) fn method_not_allowed(method: &str) -> Response {
    page(
        StatusCode::METHOD_NOT_ALLOWED,
        "Not allowed",
        &format!("This page does not answer {method}: open it from the inbox instead."),
        None,
    )
}

/// A POST whose CSRF token is missing or wrong: nothing was changed.
pub(crate) fn csrf() -> Response {
    page(
        StatusCode::FORBIDDEN,
        "Form expired",
        "This form's security token is missing or does not match your session, so nothing was \
         changed. Go back, reload the page and try again.",
        Some("csrf"),
    )
}

/// A client locked out for guessing (server/http/throttle.rs): 429 with
/// `Retry-After`, nothing checked or changed.
pub(crate) fn too_many(what: &str, lockout: crate::server::http::throttle::Lockout) -> Response {
    let secs = lockout.retry_after_secs();
    let mut response = page(
        StatusCode::TOO_MANY_REQUESTS,
        "Too many attempts",
        &format!("Too many {what} from your address. Try again in {secs} seconds."),
        Some("throttled"),
    );
    response.headers_mut().insert(
        axum::http::header::RETRY_AFTER,
        axum::http::HeaderValue::from(secs),
    );
    response
}

/// A link that decides as nobody in particular, while unbound links are
/// off: nothing was changed.
pub(crate) fn unbound_off() -> Response {
    page(
        StatusCode::FORBIDDEN,
        "Link not usable",
        &format!(
            "This link is not bound to a person, and unbound links are off on this server              ({}). Ask for a link made for you.",
            crate::domain::links::UNBOUND_LINKS_ENV
        ),
        Some("unbound"),
    )
}

/// Someone the approvers allow-list does not name.
pub(crate) fn not_an_approver(name: &str) -> Response {
    forbidden(name, "not in approvals.approvers")
}

/// `name` may not decide `record`: not in its gate's groups (a gate with
/// rules), else not an approver.
pub(crate) fn not_a_decider(
    name: &str,
    record: &crate::domain::pending_approval::ApprovalRecord,
) -> Response {
    match &record.roster {
        Some(roster) if !roster.rules.is_empty() => {
            let groups: Vec<&str> = roster.rules.iter().map(|r| r.group.as_str()).collect();
            forbidden(name, &format!("not a member of {}", groups.join(" or ")))
        }
        _ => not_an_approver(name),
    }
}

fn forbidden(name: &str, why: &str) -> Response {
    page(
        StatusCode::FORBIDDEN,
        "Not allowed",
        &format!("{name} may not decide: {why}"),
        None,
    )
}

/// A signed link that cannot be used: a wrong signature, an approval no
/// longer pending, or links turned off. Which one is not said: the page
/// must not help anyone forge a link.
pub(crate) fn bad_link() -> Response {
    let chrome = Chrome {
        title: "Link not valid".into(),
        main_id: Some("bad-link"),
        ..Chrome::default()
    };
    let page = RefusalPage {
        heading: "This link is not valid",
        message: "The link is wrong, or the approval it was for is no longer waiting for a \
                  decision. Ask for a new link, or sign in to the approvals inbox.",
    };
    templates::page(StatusCode::NOT_FOUND, &page, &chrome)
}

/// An error of the API's own path, as a page: its status and message
/// (the API's message never holds a secret; internal errors say only that).
pub(crate) fn from_api(error: ApiError) -> Response {
    let status = error.status();
    match error {
        ApiError::Approval(crate::domain::pending_approval::ApprovalError::Forbidden {
            decided_by,
            ..
        }) => not_an_approver(&decided_by),
        ApiError::Approval(crate::domain::pending_approval::ApprovalError::NotFound { .. })
        | ApiError::RunNotFound(_) => not_found(),
        ApiError::Internal(detail) => {
            tracing::error!(error = %detail, "inbox request failed");
            page(
                status,
                "Internal error",
                "The server could not do this; its log says why.",
                None,
            )
        }
        other => page(status, heading_of(other.code()), &other.to_string(), None),
    }
}

/// What a person reads first on a refusal the API would have answered with
/// `code`; the message under it says the rest (who decided, when, why).
fn heading_of(code: &str) -> &'static str {
    match code {
        "already_resolved" => "Already decided",
        "already_voted" => "Already voted",
        "approval_expired" => "Expired",
        "spec_changed" | "spec_unavailable" => "The spec changed",
        "payload_changed" => "The payload changed",
        "invalid_input" | "invalid_request" => "Not accepted",
        "run_not_cancellable" => "Cannot be cancelled",
        "run_conflict" => "The run changed",
        "store_busy" | "unavailable" => "Try again",
        "forbidden" | "insufficient_scope" => "Not allowed",
        _ => "Not done",
    }
}
