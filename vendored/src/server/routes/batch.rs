//! POST /approvals/batch: many decisions in one request (DESIGN §13).
//!
//! Each entry is decided on its own, exactly as `POST /approvals/{key}/
//! approve|reject` decides it (`decide::decide`, its own conditional claim
//! and digest check), so one key's refusal never touches another's. Only a
//! malformed body refuses the whole batch, before anything is decided.

use std::collections::HashSet;

use axum::extract::State;
use axum::{Extension, Json};
use futures_util::stream::{self, StreamExt};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::domain::pending_approval::Decision;
use crate::domain::policy::Channel;
use crate::engine::run::Ballot;
use crate::server::http::extract::{JsonBody, edited_payload, present};
use crate::server::http::state::AppState;
use crate::service::ApiError;
use crate::service::Caller;
use crate::service::batch::{BatchResult, BatchResults, CONCURRENT_DECISIONS, MAX_BATCH};
use crate::service::decide;
use crate::service::schema::{Components, Schema, request_type};

/// `approve` or `reject`; an approve with a `payload` is a modify.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(super) enum BatchDecision {
    Approve,
    Reject,
}

impl Schema for BatchDecision {
    fn schema(_: &mut Components) -> Value {
        json!({ "type": "string", "enum": ["approve", "reject"] })
    }
}

request_type! {
    /// One decision of a batch.
    #[derive(Debug, Deserialize)]
    #[serde(deny_unknown_fields)]
    pub(super) struct BatchEntry {
        /// The approval key.
        key: String,
        decision: BatchDecision,
        /// Why, recorded with the decision.
        reason: Option<String>,
        /// With `approve` only: approve with this payload instead
        /// (MODIFIED); `null` is refused.
        #[serde(default, deserialize_with = "present")]
        payload: Option<Value>,
        /// The approval's `payload_digest` as the decider saw it: this
        /// entry is refused (`payload_changed`) if the payload has changed
        /// since.
        payload_digest: Option<String>,
        /// With `approve` only: the approver's input, on a gate with a
        /// `form:` (refused, `invalid_input`, when it does not fit).
        input: Option<Value>,
    }
}

request_type! {
    /// Decisions on several approvals, each decided on its own.
    #[derive(Debug, Deserialize)]
    #[serde(deny_unknown_fields)]
    pub(super) struct BatchBody {
        /// 1 to 500 entries, each key at most once.
        decisions: Vec<BatchEntry>,
    }
}

/// POST /approvals/batch -> 200 with one result per entry, in order.
/// Refused as a whole (400) only when the body is malformed: no entries or
/// more than 500, a key given twice, a reject with a payload, a null
/// payload.
pub(super) async fn decide(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    JsonBody(body): JsonBody<BatchBody>,
) -> Result<Json<BatchResults>, ApiError> {
    let ballots = ballots(body.decisions, &caller.0)?;
    let results = stream::iter(ballots)
        .map(|(key, ballot)| {
            let state = state.clone();
            async move {
                // The run resumes in the background, as after one decision.
                match decide::decide(&state.agent, &state.background, key.clone(), ballot).await {
                    Ok(answered) => BatchResult::decided(&answered.outcome),
                    Err(e) => BatchResult::refused(key, &ApiError::from(e)),
                }
            }
        })
        .buffered(CONCURRENT_DECISIONS)
        .collect()
        .await;
    Ok(Json(BatchResults { results }))
}

/// Each entry as the ballot the single-key route would cast, in order; a
/// malformed batch is refused naming the entry (`decisions[i]`, from 0)
/// and its key.
fn ballots(entries: Vec<BatchEntry>, by: &str) -> Result<Vec<(String, Ballot)>, ApiError> {
    if entries.is_empty() || entries.len() > MAX_BATCH {
        return Err(ApiError::invalid(format!(
            "decisions holds {} entries: give 1 to {MAX_BATCH}",
            entries.len()
        )));
    }
    let mut seen = HashSet::new();
    let mut ballots = Vec::with_capacity(entries.len());
    for (i, entry) in entries.into_iter().enumerate() {
        let at = format!("decisions[{i}] (key {:?})", entry.key);
        if !seen.insert(entry.key.clone()) {
            return Err(ApiError::invalid(format!(
                "{at}: key {:?} is given twice; decide each approval once per batch",
                entry.key
            )));
        }
        let payload =
            edited_payload(entry.payload).map_err(|e| ApiError::invalid(format!("{at}: {e}")))?;
        if entry.decision == BatchDecision::Reject && entry.input.is_some() {
            return Err(ApiError::invalid(format!(
                "{at}: a reject takes no input (only an approve can carry the approver's input)"
            )));
        }
        let decision = match (entry.decision, payload) {
            (BatchDecision::Reject, Some(_)) => {
                return Err(ApiError::invalid(format!(
                    "{at}: a reject takes no payload (only an approve can carry an edited one)"
                )));
            }
            (BatchDecision::Approve, Some(payload)) => Decision::Modify {
                payload,
                reason: entry.reason,
            },
            (BatchDecision::Approve, None) => Decision::Approve {
                reason: entry.reason,
            },
            (BatchDecision::Reject, None) => Decision::Reject {
                reason: entry.reason,
            },
        };
        let ballot = Ballot::new(decision, by, Channel::Api)
            .shown(entry.payload_digest)
            .with_input(entry.input);
        ballots.push((entry.key, ballot));
    }
    Ok(ballots)
}
