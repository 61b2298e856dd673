//! /notifications: the outbox, for operators (DESIGN §14). List notices
//! (newest first, by status, approval and channel), show one, and send
//! failed or dead ones again. Read from the shared store, so every server
//! on it answers the same.

use axum::extract::{RawQuery, State};
use axum::{Extension, Json};
use serde::Deserialize;

use crate::domain::notices::{NoticeChannel, NoticeStatus};
use crate::server::http::extract::{JsonBody, PathParam};
use crate::server::http::paging;
use crate::server::http::state::AppState;
use crate::service::ApiError;
use crate::service::Caller;
use crate::service::notices::{self, NoticeFilter, NoticeView, NoticesPage, Retried, RetryRefused};
use crate::service::schema::request_type;

request_type! {
    #[derive(Debug, Default)]
    pub(super) struct ListParams {
        /// Only notices with these statuses (repeat it: `?status=failed&status=dead`); all unless given.
        status: Option<Vec<NoticeStatus>>,
        /// Only the notices of this approval.
        key: Option<String>,
        /// Only notices sent on this channel.
        channel: Option<NoticeChannel>,
        /// Notices per page: 1 to 500, 50 unless given.
        limit: Option<usize>,
        /// `next_cursor` of the page before (of the same filters).
        cursor: Option<String>,
    }
}

impl ListParams {
    /// Read from the query string by hand: `status` may be repeated,
    /// which a plain query struct cannot take. Unknown or malformed
    /// parameters are refused, as on the other routes.
    fn parse(query: Option<&str>) -> Result<ListParams, ApiError> {
        let pairs: Vec<(String, String)> = serde_urlencoded::from_str(query.unwrap_or(""))
            .map_err(|e| ApiError::invalid(format!("malformed query string: {e}")))?;
        let mut params = ListParams::default();
        for (name, value) in pairs {
            match name.as_str() {
                "status" => {
                    let status = NoticeStatus::parse(&value).ok_or_else(|| {
                        ApiError::invalid(format!(
                            "status: {value:?} is not a notice status; use {}",
                            names(NoticeStatus::ALL.iter().map(|s| s.as_str()))
                        ))
                    })?;
                    params.status.get_or_insert_with(Vec::new).push(status);
                }
                "channel" => {
                    params.channel = Some(NoticeChannel::parse(&value).ok_or_else(|| {
                        ApiError::invalid(format!(
                            "channel: {value:?} is not a channel; use {}",
                            names(NoticeChannel::ALL.iter().map(|s| s.as_str()))
                        ))
                    })?);
                }
                "key" => params.key = Some(value).filter(|k| !k.is_empty()),
                "cursor" => params.cursor = Some(value),
                "limit" => {
                    params.limit = Some(value.parse().map_err(|_| {
                        ApiError::invalid(format!("limit: {value:?} is not a whole number"))
                    })?)
                }
                other => {
                    return Err(ApiError::invalid(format!(
                        "unknown query parameter {other:?}: use status, key, channel, limit or cursor"
                    )));
                }
            }
        }
        Ok(params)
    }
}

fn names<'a>(all: impl Iterator<Item = &'a str>) -> String {
    all.collect::<Vec<_>>().join(", ")
}

/// GET /notifications: `{notifications: [...], next_cursor}`, newest first.
pub(super) async fn list(
    State(state): State<AppState>,
    Extension(_caller): Extension<Caller>,
    RawQuery(query): RawQuery,
) -> Result<Json<NoticesPage>, ApiError> {
    let params = ListParams::parse(query.as_deref())?;
    let limit = paging::limit(params.limit)?;
    let cursor = paging::cursor(params.cursor);
    let filter = NoticeFilter {
        statuses: params.status.unwrap_or_default(),
        key: params.key,
        channel: params.channel,
    };
    let store = state.agent.store();
    let rows = notices::page(store.as_ref(), &filter, limit, cursor.as_deref()).await?;
    Ok(Json(NoticesPage {
        notifications: rows.notices.into_iter().map(NoticeView::new).collect(),
        next_cursor: rows.next_cursor,
    }))
}

/// GET /notifications/{id}: one notice, whatever its status.
pub(super) async fn show(
    State(state): State<AppState>,
    Extension(_caller): Extension<Caller>,
    PathParam(id): PathParam,
) -> Result<Json<NoticeView>, ApiError> {
    let notice = state
        .agent
        .store()
        .get_notice(&id)
        .await?
        .ok_or(ApiError::NoticeNotFound(id))?;
    Ok(Json(NoticeView::new(notice)))
}

/// POST /notifications/{id}/retry: send a failed or dead notice again.
pub(super) async fn retry(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    PathParam(id): PathParam,
) -> Result<Json<Retried>, ApiError> {
    let now = state.agent.clock().now();
    let retried = notices::retry_one(state.agent.store().as_ref(), &id, now).await?;
    tracing::info!(notice = %id, by = %caller.0, "notice retried: due now");
    Ok(Json(Retried { retried }))
}

request_type! {
    #[derive(Debug, Deserialize)]
    #[serde(deny_unknown_fields)]
    pub(super) struct RetryBody {
        /// `true`: send every dead notice again.
        all_dead: bool,
    }
}

/// POST /notifications/retry `{"all_dead": true}`: send every dead notice
/// again.
pub(super) async fn retry_all(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    JsonBody(body): JsonBody<RetryBody>,
) -> Result<Json<Retried>, ApiError> {
    if !body.all_dead {
        return Err(ApiError::invalid(
            "nothing to retry: send {\"all_dead\": true}, or POST /notifications/{id}/retry for one notice",
        ));
    }
    let now = state.agent.clock().now();
    let retried = notices::retry_dead(state.agent.store().as_ref(), now).await?;
    tracing::info!(retried, by = %caller.0, "dead notices retried: due now");
    Ok(Json(Retried { retried }))
}

impl From<RetryRefused> for ApiError {
    fn from(e: RetryRefused) -> Self {
        match e {
            RetryRefused::NotFound(id) => ApiError::NoticeNotFound(id),
            e @ RetryRefused::NotRetriable { .. } => ApiError::NoticeNotRetriable(e.to_string()),
            RetryRefused::Store(e) => e.into(),
        }
    }
}
