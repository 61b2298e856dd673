//! POST /slack/actions: Slack interactivity (a click on Approve or Reject).
//!
//! No bearer token: Slack signs the request (see `notify::slack::signature`).
//! Slack wants an answer within 3 seconds, so the handler only verifies,
//! claims (one conditional write) and answers 200; the run resumes in a
//! background task, and the message is edited by the notifier when it sees
//! the decision. A click that cannot decide (already resolved, expired,
//! spec changed, not an approver) changes nothing and the clicker is told
//! why in an ephemeral reply through the payload's `response_url`.

use axum::extract::{FromRequest, Request};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};

use crate::domain::pending_approval::ApprovalError;
use crate::domain::policy::Channel;
use crate::engine::run::{Ballot, DecisionOutcome, RunError};
use crate::notify::slack::interaction::{self, Click, Interaction};
use crate::notify::slack::signature::{self, SIGNATURE_HEADER, TIMESTAMP_HEADER};
use crate::server::http::extract::{BodyLimit, RawBody};
use crate::server::http::state::AppState;
use crate::service::ApiError;
use crate::service::decide;

/// Interaction payloads are a few KiB; nothing legitimate comes near this.
pub(crate) const SLACK_BODY_LIMIT: usize = 64 * 1024;

pub(super) async fn actions(
    axum::extract::State(state): axum::extract::State<AppState>,
    mut request: Request,
) -> Result<Response, ApiError> {
    let Some(slack) = state.slack.clone() else {
        return Err(ApiError::NotFound {
            method: "POST".into(),
            path: request.uri().path().to_string(),
        });
    };
    let limit = request
        .extensions()
        .get::<BodyLimit>()
        .map_or(SLACK_BODY_LIMIT, |l| l.0.min(SLACK_BODY_LIMIT));
    request.extensions_mut().insert(BodyLimit(limit));
    let headers = request.headers().clone();
    let RawBody(body) = RawBody::from_request(request, &()).await?;

    let secret = slack.signing_secret().map_err(|e| {
        // Names the variable, never a value.
        tracing::error!(error = %e, "cannot verify Slack requests; refusing them");
        ApiError::Unavailable("the Slack signing secret is not configured")
    })?;
    let now = state.agent.clock().now().timestamp();
    signature::verify(
        &secret,
        header(&headers, TIMESTAMP_HEADER),
        header(&headers, SIGNATURE_HEADER),
        &body,
        now,
    )
    .map_err(ApiError::from)?;

    let click = match interaction::parse(&body).map_err(|e| ApiError::invalid(e.to_string()))? {
        Interaction::Click(click) => click,
        Interaction::Ignored(why) => {
            tracing::debug!(why = %why, "Slack interaction ignored");
            return Ok(StatusCode::OK.into_response());
        }
    };
    let decided_by = click.decided_by();
    let ballot = Ballot::new(click.decision(), &decided_by, Channel::Slack)
        .shown(click.payload_digest.clone());
    let answered = decide::decide(&state.agent, &state.background, click.key.clone(), ballot).await;
    match answered.map(|answered| answered.outcome) {
        Ok(DecisionOutcome::Voted(vote) | DecisionOutcome::VoteRepeated(vote)) => {
            let progress = vote.tally.summary();
            let text = format!("Your vote is recorded; the request waits for more: {progress}.");
            reply_later(&state, &click, text);
        }
        // The notifier edits the message when it sees the decision.
        Ok(DecisionOutcome::Resumes(_) | DecisionOutcome::Finished { .. }) => {}
        // The same person clicked the same button again (a retry, or a
        // second click before the message was edited): their decision
        // stands; say so rather than "already resolved".
        Ok(DecisionOutcome::Repeated(record)) => {
            let at = record
                .decided_at
                .map(crate::support::time::format_utc)
                .unwrap_or_default();
            let text = format!(
                "Nothing changed: you ({}) already {} this request at {at}; your decision stands.",
                record.decided_by.as_deref().unwrap_or("you"),
                record.status.past_tense()
            );
            reply_later(&state, &click, text);
        }
        Err(RunError::Approval(ApprovalError::InvalidInput { errors, .. })) => {
            // A button cannot fill in a form: say where the form is.
            let place = state
                .links
                .as_ref()
                .and_then(|links| links.inbox_url(&click.key))
                .unwrap_or_else(|| format!("/ui/approvals/{}", click.key));
            let text = format!(
                "Nothing changed: this request asks for input a button cannot give ({}). Decide it in the inbox at {place}, or through its approval link.",
                crate::domain::form::describe(&errors)
            );
            tracing::info!(key = %click.key, decided_by = %decided_by, "Slack click refused: the gate's form needs input");
            reply_later(&state, &click, text);
        }
        Err(e) => {
            let text = refusal(&e);
            tracing::info!(key = %click.key, decided_by = %decided_by, reason = %e, "Slack click refused");
            reply_later(&state, &click, text);
        }
    }
    Ok(StatusCode::OK.into_response())
}

/// Tell the clicker in the background, so the 200 goes out now.
fn reply_later(state: &AppState, click: &Click, text: String) {
    let (Some(slack), Some(url)) = (state.slack.clone(), click.response_url.clone()) else {
        return;
    };
    tokio::spawn(async move { slack.tell(&url, &text).await });
}

/// What the clicker reads when the click changed nothing.
fn refusal(e: &RunError) -> String {
    match e {
        RunError::Approval(ApprovalError::AlreadyResolved { .. }) => {
            format!("Nothing changed: this request is already resolved. {e}.")
        }
        RunError::Approval(ApprovalError::Expired { .. }) => {
            format!("Nothing changed: this request has expired. {e}.")
        }
        RunError::Approval(
            ApprovalError::SpecChanged { .. } | ApprovalError::NotOnVersion { .. },
        ) => {
            format!("Nothing changed: the agent's spec has changed since this request. {e}.")
        }
        RunError::SpecUnavailable { .. } => {
            format!("Nothing changed: the spec version this request waits on cannot run here. {e}.")
        }
        RunError::Approval(ApprovalError::Forbidden { .. } | ApprovalError::NotInGroups { .. }) => {
            format!("Nothing changed: you are not allowed to decide this request. {e}.")
        }
        RunError::Approval(ApprovalError::SelfApproval { .. }) => {
            format!(
                "Nothing changed: you asked for this (you started the run, made the request or edited it), so you may not decide it. {e}."
            )
        }
        RunError::Approval(ApprovalError::AlreadyVoted { .. }) => {
            format!("Nothing changed: your vote on this request is already recorded. {e}.")
        }
        RunError::Approval(ApprovalError::PayloadChanged { .. }) => {
            format!("Nothing changed: the request was edited since this message; look again. {e}.")
        }
        RunError::Approval(ApprovalError::NotFound { .. }) | RunError::WrongAgent { .. } => {
            "Nothing changed: this server does not know this request.".to_string()
        }
        RunError::Approval(
            ApprovalError::InvalidPayload { .. }
            | ApprovalError::ReasonRequired { .. }
            | ApprovalError::InvalidInput { .. }
            | ApprovalError::NotDue { .. },
        )
        | RunError::NoPendingApproval(_)
        | RunError::CancelForbidden { .. }
        | RunError::NotDriven { .. }
        | RunError::Forbidden { .. }
        | RunError::MigrateForbidden { .. }
        | RunError::TaskDropped { .. }
        | RunError::Store(_) => {
            "Nothing changed: tollgate could not record your decision. Try again in a moment."
                .to_string()
        }
    }
}

fn header<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers.get(name).and_then(|v| v.to_str().ok())
}
