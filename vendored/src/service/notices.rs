//! Operating the outbox (DESIGN §14): what the API, the inbox's
//! notifications page and `tollgate notifications` share. A notice as a
//! client sees it, one page of them with an opaque cursor, and an
//! operator's retry of one notice, refused in words when the notice is
//! unknown or not failed or dead.
//!
//! Nothing here can show a secret: a notice's target is stored as the spec
//! wrote it (a `${NAME}` reference stays one), and its last error is
//! written without URLs or credentials by the worker.

use chrono::{DateTime, Utc};
use serde::Serialize;
use serde_json::Value;

use crate::domain::notices::{NoticeChannel, NoticeEvent, NoticeStatus};
use crate::service::schema::response_type;
use crate::store::{
    MAX_NOTICE_PAGE, NoticeQuery, Outbox, OutboxNotice, RetryNotices, StoreError, StoreResult,
};

response_type! {
    /// A notice in the outbox: one message to one channel and recipient,
    /// about one change to an approval.
    #[derive(Debug, Serialize)]
    pub(crate) struct NoticeView {
        /// The notice's id (a UUID): every delivery of it carries this id
        /// (a webhook's `webhook-id`), so a receiver can de-duplicate.
        pub id: String,
        /// The approval it tells of.
        pub key: String,
        pub run_id: String,
        pub event: NoticeEvent,
        pub channel: NoticeChannel,
        /// Where it goes, as the spec wrote it: a webhook's URL reference
        /// (`${NAME}`), a decider's name (email), the Slack channel.
        pub target: String,
        pub status: NoticeStatus,
        /// Sends tried so far.
        pub attempts: u64,
        pub created_at: DateTime<Utc>,
        /// When it is due (`pending`, `failed`); when it was last due
        /// otherwise.
        pub next_at: DateTime<Utc>,
        /// Why the last send failed (never a secret or a URL).
        #[serde(skip_serializing_if = "Option::is_none")]
        pub last_error: Option<String>,
        /// When it was delivered (`sent` only).
        #[serde(skip_serializing_if = "Option::is_none")]
        pub sent_at: Option<DateTime<Utc>>,
        /// What every channel writes from: the event, the approval, its
        /// links.
        pub body: Value,
    }
}

impl NoticeView {
    pub fn new(row: OutboxNotice) -> NoticeView {
        let notice = row.notice;
        NoticeView {
            body: serde_json::to_value(&notice.body).unwrap_or(Value::Null),
            id: notice.id,
            key: notice.key,
            run_id: notice.run_id,
            event: notice.event,
            channel: notice.channel,
            target: notice.target,
            status: row.status,
            attempts: u64::from(row.attempts),
            created_at: notice.created_at,
            next_at: row.next_at,
            last_error: row.last_error,
            sent_at: row.sent_at,
        }
    }
}

response_type! {
    /// GET /notifications: one page, newest first.
    #[derive(Debug, Serialize)]
    pub(crate) struct NoticesPage {
        pub notifications: Vec<NoticeView>,
        /// Pass as `?cursor=` for the next page; `null` on the last one.
        pub next_cursor: Option<String>,
    }
}

response_type! {
    /// POST /notifications/{id}/retry and POST /notifications/retry.
    #[derive(Debug, Serialize)]
    pub(crate) struct Retried {
        /// How many notices were made due again.
        pub retried: u64,
    }
}

/// Which notices to list (the store's query without its position).
#[derive(Debug, Clone, Default)]
pub(crate) struct NoticeFilter {
    pub statuses: Vec<NoticeStatus>,
    pub key: Option<String>,
    pub channel: Option<NoticeChannel>,
}

/// One page of notices, newest first, and the cursor of the next.
pub(crate) struct NoticeRows {
    pub notices: Vec<OutboxNotice>,
    pub next_cursor: Option<String>,
}

/// The cursor of a page's last notice: `created_at|id`.
pub(crate) fn cursor_of(notice: &OutboxNotice) -> String {
    format!(
        "{}|{}",
        crate::support::time::format_utc(notice.notice.created_at),
        notice.notice.id
    )
}

/// A cursor back into the store's position; `StoreError::InvalidCursor`
/// names one that is not a cursor of ours.
pub(crate) fn parse_cursor(cursor: &str) -> Result<(DateTime<Utc>, String), StoreError> {
    match cursor.split_once('|') {
        Some((at, id)) if !id.is_empty() => match crate::support::time::parse_utc(at) {
            Some(at) => Ok((at, id.to_string())),
            None => Err(StoreError::InvalidCursor(cursor.to_string())),
        },
        _ => Err(StoreError::InvalidCursor(cursor.to_string())),
    }
}

/// Up to `limit` notices (1 to [`MAX_NOTICE_PAGE`]) after `cursor`.
/// One more is asked for to learn whether a next page exists.
pub(crate) async fn page(
    store: &(impl Outbox + ?Sized),
    filter: &NoticeFilter,
    limit: usize,
    cursor: Option<&str>,
) -> StoreResult<NoticeRows> {
    let limit = limit.clamp(1, MAX_NOTICE_PAGE);
    let before = cursor.map(parse_cursor).transpose()?;
    let mut notices = store
        .list_notices(&NoticeQuery {
            statuses: filter.statuses.clone(),
            key: filter.key.clone(),
            channel: filter.channel,
            limit: (limit + 1).min(MAX_NOTICE_PAGE),
            before,
        })
        .await?;
    // A full page of the store's largest: whether more follow is unknown,
    // so the cursor is given (the next page may be empty).
    let more = notices.len() > limit || notices.len() == MAX_NOTICE_PAGE;
    notices.truncate(limit);
    let next_cursor = if more {
        notices.last().map(cursor_of)
    } else {
        None
    };
    Ok(NoticeRows {
        notices,
        next_cursor,
    })
}

/// Why an operator's retry of one notice did nothing.
#[derive(Debug, thiserror::Error)]
pub(crate) enum RetryRefused {
    #[error("no notice with id {0}")]
    NotFound(String),
    #[error("notice {id} is {status}: only a failed or dead notice can be retried")]
    NotRetriable { id: String, status: NoticeStatus },
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Make notice `id` due now, if it is failed or dead (with a fresh retry
/// window; its webhook endpoint, if disabled, is enabled again).
pub(crate) async fn retry_one(
    store: &(impl Outbox + ?Sized),
    id: &str,
    now: DateTime<Utc>,
) -> Result<u64, RetryRefused> {
    let Some(notice) = store.get_notice(id).await? else {
        return Err(RetryRefused::NotFound(id.to_string()));
    };
    let refused = |status| RetryRefused::NotRetriable {
        id: id.to_string(),
        status,
    };
    if !matches!(notice.status, NoticeStatus::Failed | NoticeStatus::Dead) {
        return Err(refused(notice.status));
    }
    match store
        .retry_notices(&RetryNotices::One(id.to_string()), now)
        .await?
    {
        // Delivered or taken by a worker since it was read.
        0 => {
            let status = store
                .get_notice(id)
                .await?
                .map_or(notice.status, |n| n.status);
            Err(refused(status))
        }
        n => Ok(n),
    }
}

/// Every dead notice made due now; how many.
pub(crate) async fn retry_dead(
    store: &(impl Outbox + ?Sized),
    now: DateTime<Utc>,
) -> StoreResult<u64> {
    store.retry_notices(&RetryNotices::AllDead, now).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cursor_round_trips_and_a_foreign_one_is_refused() {
        let at = crate::support::time::parse_utc("2026-12-01T09:08:00.123456Z").expect("time");
        let text = format!("{}|abc", crate::support::time::format_utc(at));
        assert_eq!(parse_cursor(&text).expect("ours"), (at, "abc".to_string()));
        for bad in ["", "abc", "not-a-time|abc", "2026-12-01T09:08:00Z|"] {
            assert!(
                matches!(parse_cursor(bad), Err(StoreError::InvalidCursor(c)) if c == bad),
                "{bad:?}"
            );
        }
    }
}
