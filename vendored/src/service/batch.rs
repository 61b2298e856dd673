//! One result per key of a batch of decisions (DESIGN §13): the answer of
//! `POST /approvals/batch` and what `tollgate approvals approve|reject
//! --all --json` prints. Each key is decided on its own; a refusal is
//! described with the same code and message the single-key route answers.

use serde::Serialize;

use crate::engine::run::{DecisionOutcome, RunError};
use crate::service::ApiError;
use crate::service::schema::response_type;

/// The most entries one batch may hold: a batch is one request, and one
/// answer must not grow without bound.
pub(crate) const MAX_BATCH: usize = 500;

/// Decisions claimed at once: each claim is its own conditional write, so
/// a few at a time keep a large batch from taking every store connection.
pub(crate) const CONCURRENT_DECISIONS: usize = 8;

/// `status` of an entry that was not decided (see `error`).
pub(crate) const REFUSED: &str = "refused";

response_type! {
    /// Why one entry was not decided: the code and message the single-key
    /// route would have answered with.
    #[derive(Debug, Clone, Serialize)]
    pub(crate) struct BatchError {
        pub code: String,
        pub message: String,
    }
}

response_type! {
    /// One entry's result.
    #[derive(Debug, Clone, Serialize)]
    pub(crate) struct BatchResult {
        pub key: String,
        /// The record's status after the decision (`APPROVED`, `REJECTED`,
        /// `MODIFIED`; `PENDING` when it was a vote that left the gate
        /// open, see `progress`), or `refused` (see `error`).
        pub status: String,
        /// Present (`true`) when the caller had already made this decision
        /// (or cast this vote): nothing new was written.
        #[serde(skip_serializing_if = "std::ops::Not::not")]
        pub repeated: bool,
        /// With `PENDING`: every rule's progress with this vote counted,
        /// e.g. `finance 1 of 2; security 0 of 1`.
        #[serde(skip_serializing_if = "Option::is_none")]
        pub progress: Option<String>,
        /// With `refused`: why; the approval is as it was.
        #[serde(skip_serializing_if = "Option::is_none")]
        pub error: Option<BatchError>,
    }
}

response_type! {
    /// The answer to `POST /approvals/batch`: one result per entry, in the
    /// order given.
    #[derive(Debug, Clone, Serialize)]
    pub(crate) struct BatchResults {
        pub results: Vec<BatchResult>,
    }
}

impl BatchResult {
    /// What a decision came to: claimed (now, or earlier by the same
    /// caller), or a vote recorded that left its gate open.
    pub fn decided(outcome: &DecisionOutcome) -> Self {
        let record = outcome.record();
        let (repeated, progress) = match outcome {
            DecisionOutcome::Resumes(_) | DecisionOutcome::Finished { .. } => (false, None),
            DecisionOutcome::Repeated(_) => (true, None),
            DecisionOutcome::Voted(vote) => (false, Some(vote.tally.summary())),
            DecisionOutcome::VoteRepeated(vote) => (true, Some(vote.tally.summary())),
        };
        BatchResult {
            key: record.key.clone(),
            status: record.status.as_str().to_string(),
            repeated,
            progress,
            error: None,
        }
    }

    /// A refusal as the HTTP API words it (a store failure's detail is
    /// logged, not sent).
    pub fn refused(key: String, error: &ApiError) -> Self {
        Self::refusal(key, error.code(), error.public_message())
    }

    /// A refusal as a terminal shows it: the code the API would answer
    /// with, and the whole message (the operator may read store details).
    pub fn refused_here(key: String, error: RunError) -> Self {
        let error = ApiError::from(error);
        Self::refusal(key, error.code(), error.to_string())
    }

    fn refusal(key: String, code: &str, message: String) -> Self {
        BatchResult {
            key,
            status: REFUSED.to_string(),
            repeated: false,
            progress: None,
            error: Some(BatchError {
                code: code.to_string(),
                message,
            }),
        }
    }

    pub fn is_refused(&self) -> bool {
        self.error.is_some()
    }
}
