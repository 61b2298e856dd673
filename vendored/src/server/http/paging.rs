//! Paging, written once for the API's list routes and the inbox's pages.
//!
//! - The API (GET /approvals, GET /runs): `?limit=` from 1 to
//!   [`MAX_LIMIT`], [`DEFAULT_LIMIT`] when absent, anything else 400
//!   `invalid_request`; `?cursor=` is the `next_cursor` of the page before,
//!   empty meaning the first page.
//! - The pages (/ui, /ui/history, /ui/runs): [`UI_PAGE`] rows a page; the
//!   way back is a `trail` of the cursors before this page (the store's
//!   cursors go forward only), carried in the links, so "Newer" and
//!   "Older" are plain links that keep the filters.

use serde::Serialize;

use crate::service::ApiError;

/// Rows per API page when `?limit=` is absent.
pub(crate) const DEFAULT_LIMIT: usize = 50;
/// The largest `?limit=` the API takes.
pub(crate) const MAX_LIMIT: usize = 500;
/// Rows per page of the inbox's lists.
pub(crate) const UI_PAGE: usize = 25;

/// The API's `?limit=`, checked: [`DEFAULT_LIMIT`] when absent.
pub(crate) fn limit(asked: Option<usize>) -> Result<usize, ApiError> {
    let limit = asked.unwrap_or(DEFAULT_LIMIT);
    if !(1..=MAX_LIMIT).contains(&limit) {
        return Err(ApiError::invalid(format!(
            "limit must be between 1 and {MAX_LIMIT}, found {limit}"
        )));
    }
    Ok(limit)
}

/// The API's `?cursor=`: empty is absent (the first page).
pub(crate) fn cursor(given: Option<String>) -> Option<String> {
    given.filter(|c| !c.is_empty())
}

/// Where a page of the inbox's lists is: its cursor (`None` on the first
/// page) and the cursors of the pages before it, newest last, joined by
/// newlines (`""` stands for the first page).
#[derive(Debug, Default, Clone)]
pub(crate) struct Position {
    pub cursor: Option<String>,
    trail: Option<String>,
}

/// The links of a page to the pages before and after it, as query strings
/// (the filters, the cursor and the trail).
#[derive(Debug, Default, Clone, PartialEq, Serialize)]
pub(crate) struct PageLinks {
    /// "Newer": the page before; `None` on the first page.
    pub prev: Option<String>,
    /// "Older": the page after; `None` on the last page.
    pub next: Option<String>,
}

impl Position {
    /// From a page's `?cursor=&trail=`: a blank cursor is the first page.
    pub fn new(cursor: Option<String>, trail: Option<String>) -> Position {
        Position {
            cursor: cursor
                .map(|c| c.trim().to_string())
                .filter(|c| !c.is_empty()),
            trail,
        }
    }

    pub fn is_first(&self) -> bool {
        self.cursor.is_none()
    }

    /// The links from this page, keeping `filters` (those set), given the
    /// store's `next_cursor` for the page after.
    pub fn links(&self, filters: &[(&str, Option<&str>)], next_cursor: Option<&str>) -> PageLinks {
        // `Some("")` is a trail of one entry: the first page (no cursor).
        let trail: Vec<&str> = self
            .trail
            .as_deref()
            .map(|t| t.split('\n').collect())
            .unwrap_or_default();
        let encode = |pairs: Vec<(&str, String)>| {
            let mut all: Vec<(&str, String)> = filters
                .iter()
                .filter_map(|(k, v)| v.map(|v| (*k, v.to_string())))
                .collect();
            all.extend(pairs);
            serde_urlencoded::to_string(all).unwrap_or_default()
        };
        let next = next_cursor.map(|next| {
            let mut newer = trail.clone();
            newer.push(self.cursor.as_deref().unwrap_or(""));
            encode(vec![
                ("cursor", next.to_string()),
                ("trail", newer.join("\n")),
            ])
        });
        let prev = trail.split_last().map(|(last, rest)| {
            let mut pairs = Vec::new();
            if !last.is_empty() {
                pairs.push(("cursor", last.to_string()));
            }
            if !rest.is_empty() {
                pairs.push(("trail", rest.join("\n")));
            }
            encode(pairs)
        });
        PageLinks { prev, next }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn query(text: &str) -> Vec<(String, String)> {
        serde_urlencoded::from_str(text).unwrap()
    }

    fn at(cursor: Option<&str>, trail: Option<&str>) -> Position {
        Position::new(cursor.map(String::from), trail.map(String::from))
    }

    #[test]
    fn limits_default_and_are_bounded() {
        assert_eq!(limit(None).unwrap(), DEFAULT_LIMIT);
        assert_eq!(limit(Some(1)).unwrap(), 1);
        assert_eq!(limit(Some(MAX_LIMIT)).unwrap(), MAX_LIMIT);
        assert!(limit(Some(0)).is_err());
        assert!(limit(Some(MAX_LIMIT + 1)).is_err());
        assert_eq!(cursor(Some(String::new())), None);
        assert_eq!(cursor(Some("c".into())).as_deref(), Some("c"));
    }

    #[test]
    fn links_go_forward_and_back_keeping_the_filters() {
        let filters = [("step", Some("gate")), ("q", None)];
        // First page: no way back; forward carries the cursor and a trail.
        let links = at(None, None).links(&filters, Some("c1"));
        assert!(links.prev.is_none());
        assert_eq!(
            query(&links.next.unwrap()),
            [
                ("step".into(), "gate".into()),
                ("cursor".into(), "c1".into()),
                ("trail".into(), "".into())
            ]
        );
        // Second page (cursor c1, trail [""]): back to the first page.
        let links = at(Some("c1"), Some("")).links(&filters, Some("c2"));
        assert_eq!(
            query(&links.prev.unwrap()),
            [("step".to_string(), "gate".to_string())]
        );
        let next = query(&links.next.unwrap());
        assert_eq!(next[2], ("trail".into(), "\nc1".into()));
        // Third page: back to the second.
        let links = at(Some("c2"), Some("\nc1")).links(&filters, None);
        assert!(links.next.is_none());
        assert_eq!(
            query(&links.prev.unwrap()),
            [
                ("step".into(), "gate".into()),
                ("cursor".into(), "c1".into()),
                ("trail".into(), "".into())
            ]
        );
        assert!(at(Some("  "), None).is_first());
    }
}
