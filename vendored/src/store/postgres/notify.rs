//! The push side of approval changes: `NOTIFY tollgate_approvals` in the
//! same transaction as every pause, decision and expiry, so a listener
//! hears of a change exactly when it commits (and never of one that rolled
//! back).
//!
//! Payload: `{"key": ..., "status": ..., "run_id": ...}`. PostgreSQL caps a
//! payload below 8000 bytes and fails the whole transaction past it, so a
//! change whose ids would not fit is announced as `{"overflow": true}`;
//! listeners treat any payload they cannot read as "something changed" and
//! re-check what they wait for.

use deadpool_postgres::GenericClient;
use serde::{Deserialize, Serialize};

use crate::domain::pending_approval::ApprovalStatus;
use crate::store::StoreResult;
use crate::store::feed::ApprovalChange;

/// The channel every tollgate node listens on.
pub(crate) const CHANNEL: &str = "tollgate_approvals";

/// Far below PostgreSQL's 8000-byte limit, leaving room for its framing.
const MAX_PAYLOAD: usize = 4000;

#[derive(Serialize)]
struct Payload<'a> {
    key: &'a str,
    status: ApprovalStatus,
    run_id: &'a str,
}

/// What a payload says changed; `None` for an overflow marker or anything
/// else unreadable.
pub(crate) fn parse(payload: &str) -> Option<ApprovalChange> {
    #[derive(Deserialize)]
    struct Incoming {
        key: String,
        status: ApprovalStatus,
        run_id: String,
    }
    let p: Incoming = serde_json::from_str(payload).ok()?;
    Some(ApprovalChange {
        key: p.key,
        run_id: p.run_id,
        status: p.status,
    })
}

fn encode(key: &str, run_id: &str, status: ApprovalStatus) -> String {
    let text = serde_json::to_string(&Payload {
        key,
        status,
        run_id,
    })
    .unwrap_or_default();
    if text.is_empty() || text.len() > MAX_PAYLOAD {
        return r#"{"overflow":true}"#.to_string();
    }
    text
}

/// Queue the notification in the caller's transaction; PostgreSQL delivers
/// it at commit.
pub(super) async fn send<C: GenericClient>(
    client: &C,
    key: &str,
    run_id: &str,
    status: ApprovalStatus,
) -> StoreResult<()> {
    let payload = encode(key, run_id, status);
    let stmt = client.prepare_cached("SELECT pg_notify($1, $2)").await?;
    client.execute(&stmt, &[&CHANNEL, &payload]).await?;
    Ok(())
}

/// [`send`] for each change, in one statement.
pub(super) async fn send_all<C: GenericClient>(
    client: &C,
    changes: &[(&str, &str, ApprovalStatus)],
) -> StoreResult<()> {
    if changes.is_empty() {
        return Ok(());
    }
    let payloads: Vec<String> = changes
        .iter()
        .map(|(key, run_id, status)| encode(key, run_id, *status))
        .collect();
    let stmt = client
        .prepare_cached("SELECT pg_notify($1, p) FROM unnest($2::text[]) AS p")
        .await?;
    client.execute(&stmt, &[&CHANNEL, &payloads]).await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn payloads_round_trip_and_oversized_ones_become_overflow_markers() {
        let text = encode("k-1", "run-1", ApprovalStatus::Approved);
        assert_eq!(
            text,
            r#"{"key":"k-1","status":"APPROVED","run_id":"run-1"}"#
        );
        let change = parse(&text).expect("readable");
        assert_eq!(
            (change.key.as_str(), change.run_id.as_str(), change.status),
            ("k-1", "run-1", ApprovalStatus::Approved)
        );
        let huge = "k".repeat(MAX_PAYLOAD);
        let text = encode(&huge, "run", ApprovalStatus::Pending);
        assert_eq!(text, r#"{"overflow":true}"#);
        assert!(parse(&text).is_none());
    }
}
