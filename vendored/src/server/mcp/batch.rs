//! A JSON-RPC batch, handled by both transports: its messages run
//! concurrently, at most [`BATCH_CONCURRENCY`] at once, and the answers
//! come back in the batch's order. One after another, a batch of
//! `wait_for_approval` calls held its connection for the sum of the
//! waits; now it holds it for about the longest few.

use futures_util::StreamExt;
use serde_json::Value;

use super::jsonrpc::BATCH_CONCURRENCY;
use super::protocol::{self, Context};

/// The answers to a batch's requests (notifications and responses get
/// none), in the batch's order; `None` when there are none to send.
pub(super) async fn handle(context: &Context<'_>, messages: Vec<Value>) -> Option<Value> {
    let answers: Vec<Option<Value>> = futures_util::stream::iter(messages)
        .map(|message| protocol::handle(context, message))
        .buffered(BATCH_CONCURRENCY)
        .collect()
        .await;
    let answers: Vec<Value> = answers.into_iter().flatten().collect();
    (!answers.is_empty()).then_some(Value::Array(answers))
}
