//! Paging written once for both SQL stores: the cursor, the approval
//! filter taken apart into what SQL can ask, and the pager that fills one
//! page from rows read batch by batch.

use chrono::{DateTime, Utc};

use super::{
    ApprovalPage, ApprovalQuery, PendingPage, PendingQuery, StoreError, StoreResult, UnreadableRow,
    expired_as_of,
};
use crate::domain::pending_approval::{ApprovalRecord, ApprovalStatus};

/// [`ApprovalQuery`] taken apart into what a store's query needs: which
/// stored rows each status asks for, and the text check a store applies to
/// a decoded record (where SQL can only approximate it).
pub(crate) struct ApprovalFilter<'a> {
    query: &'a ApprovalQuery,
    /// Stored PENDING rows that are not yet due (listed as PENDING).
    pub pending_live: bool,
    /// Stored PENDING rows that are overdue (listed as EXPIRED).
    pub pending_overdue: bool,
    /// Stored statuses other than PENDING to list.
    pub settled: Vec<ApprovalStatus>,
    /// The text filter, lowercased; `None` when absent or empty.
    needle: Option<String>,
    /// The same, as it sits inside a JSON string.
    json_needle: Option<String>,
}

impl<'a> ApprovalFilter<'a> {
    pub fn new(query: &'a ApprovalQuery) -> ApprovalFilter<'a> {
        let wants = |s: ApprovalStatus| query.statuses.is_empty() || query.statuses.contains(&s);
        ApprovalFilter {
            query,
            pending_live: wants(ApprovalStatus::Pending),
            pending_overdue: wants(ApprovalStatus::Expired),
            settled: ApprovalStatus::ALL
                .iter()
                .copied()
                .filter(|s| *s != ApprovalStatus::Pending && wants(*s))
                .collect(),
            needle: query
                .text
                .as_deref()
                .filter(|t| !t.is_empty())
                .map(str::to_lowercase),
            json_needle: query.text.as_deref().filter(|t| !t.is_empty()).map(|t| {
                let quoted = serde_json::Value::String(t.to_lowercase()).to_string();
                quoted[1..quoted.len() - 1].to_string()
            }),
        }
    }

    /// The text to search for, as given (for a store's LIKE pattern).
    pub fn text(&self) -> Option<&'a str> {
        self.query.text.as_deref().filter(|t| !t.is_empty())
    }

    /// The text filter alone: a case-insensitive substring of any of the
    /// searched fields.
    pub fn text_matches(&self, record: &ApprovalRecord) -> bool {
        let Some(needle) = &self.needle else {
            return true;
        };
        [
            record.message.as_deref(),
            Some(record.step_id.as_str()),
            Some(record.key.as_str()),
            Some(record.run_id.as_str()),
            record.decided_by.as_deref(),
        ]
        .into_iter()
        .flatten()
        .any(|field| field.to_lowercase().contains(needle.as_str()))
            || self.context_matches(record)
    }

    /// Whether the text filter searches the run's context too
    /// ([`ApprovalQuery::text_in_context`]).
    pub fn in_context(&self) -> bool {
        self.query.text_in_context && self.needle.is_some()
    }

    /// The run's context, when searched: the agent, and the input and the
    /// trigger (who started it) as the stores hold them, as JSON text (the
    /// needle as JSON escapes it).
    fn context_matches(&self, record: &ApprovalRecord) -> bool {
        let (Some(needle), Some(json_needle), true) =
            (&self.needle, &self.json_needle, self.in_context())
        else {
            return false;
        };
        record.agent_id.to_lowercase().contains(needle.as_str())
            || [record.input.to_string(), record.trigger.to_string()]
                .iter()
                .any(|text| text.to_lowercase().contains(json_needle.as_str()))
    }
}

/// Builds one [`ApprovalPage`] from rows a SQL store reads in order, batch
/// by batch. A store's SQL filters on everything but can only approximate
/// the text filter (it cannot compare PostgreSQL's JSON-string columns or
/// SQLite text past a NUL exactly), so it may return a few rows too many:
/// each is checked here, and a store reads another batch, from
/// [`ApprovalPager::after`], while the page is not full.
pub(crate) struct ApprovalPager<'a> {
    filter: &'a ApprovalFilter<'a>,
    now: DateTime<Utc>,
    fill: Fill,
    /// Where the next batch starts: the position of the last row offered.
    pub after: Option<(DateTime<Utc>, String)>,
    /// Whether the last batch moved `after` on.
    advanced: bool,
}

impl<'a> ApprovalPager<'a> {
    pub fn new(filter: &'a ApprovalFilter<'a>) -> StoreResult<ApprovalPager<'a>> {
        let query = filter.query;
        let after = match query.cursor.as_deref() {
            Some(text) => {
                let (at, key) = cursor::decode(text)?;
                let at = crate::support::time::parse_utc(&at)
                    .ok_or_else(|| StoreError::InvalidCursor(text.to_string()))?;
                Some((at, key))
            }
            None => None,
        };
        Ok(ApprovalPager {
            filter,
            now: query.now,
            fill: Fill::new(query.limit),
            after,
            advanced: false,
        })
    }

    /// How many rows a batch reads: one more than the page holds tells
    /// whether another page exists.
    pub fn batch(&self) -> usize {
        self.fill.batch()
    }

    /// Offer the next row in order: its key, its order time (`None` when
    /// that does not read) and the record as decoded. False once the page
    /// is complete.
    pub fn offer(
        &mut self,
        key: String,
        at: Option<DateTime<Utc>>,
        record: StoreResult<ApprovalRecord>,
    ) -> StoreResult<bool> {
        if self.fill.done {
            return Ok(false);
        }
        let entry = match record {
            Ok(record) => {
                let record = expired_as_of(record, self.now);
                self.filter.text_matches(&record).then_some(Ok(record))
            }
            Err(e @ StoreError::Corrupt(_)) => Some(Err(UnreadableRow::new(&key, &e))),
            Err(e) => return Err(e),
        };
        if let Some(entry) = entry
            && !self.fill.add(entry, at.map(|at| (at, key.as_str())))
        {
            return Ok(false);
        }
        if let Some(at) = at {
            self.after = Some((at, key));
            self.advanced = true;
        }
        Ok(true)
    }

    /// After a batch of `read` rows: whether to read another. Not when the
    /// page is complete, the rows ran out, or the batch did not move on (its
    /// rows' times did not read: reading again would loop).
    pub fn wants_more(&mut self, read: usize) -> bool {
        let done = self.fill.done;
        let more = !done && read == self.batch() && self.advanced;
        if !done && read == self.batch() && !self.advanced {
            self.fill.next_cursor = self.fill.last.take();
        }
        self.advanced = false;
        more
    }

    pub fn finish(self) -> ApprovalPage {
        let fill = self.fill;
        ApprovalPage {
            approvals: fill.approvals,
            next_cursor: fill.next_cursor,
            unreadable: fill.unreadable,
        }
    }
}

/// Builds one [`PendingPage`] from the rows of one read, newest first:
/// the store's SQL filters exactly, so every row belongs to the listing.
pub(crate) struct PendingPager {
    fill: Fill,
}

impl PendingPager {
    pub fn new(query: &PendingQuery) -> PendingPager {
        PendingPager {
            fill: Fill::new(query.limit),
        }
    }

    /// How many rows to read: one more than the page holds tells whether
    /// another page exists.
    pub fn batch(&self) -> usize {
        self.fill.batch()
    }

    /// Offer the next row in order, as decoded; `unreadable_at` gives the
    /// key and (when it reads) the creation time of a row that did not
    /// decode. False once the page is complete.
    pub fn offer(
        &mut self,
        record: StoreResult<ApprovalRecord>,
        unreadable_at: impl FnOnce() -> (String, Option<DateTime<Utc>>),
    ) -> StoreResult<bool> {
        if self.fill.done {
            return Ok(false);
        }
        Ok(match record {
            Ok(record) => {
                let (at, key) = (record.created_at, record.key.clone());
                self.fill.add(Ok(record), Some((at, key.as_str())))
            }
            Err(e @ StoreError::Corrupt(_)) => {
                let (key, at) = unreadable_at();
                let unreadable = UnreadableRow::new(&key, &e);
                self.fill
                    .add(Err(unreadable), at.map(|at| (at, key.as_str())))
            }
            Err(e) => return Err(e),
        })
    }

    pub fn finish(self) -> PendingPage {
        let fill = self.fill;
        PendingPage {
            approvals: fill.approvals,
            next_cursor: fill.next_cursor,
            unreadable: fill.unreadable,
        }
    }
}

/// What both pagers share: entries fill a page of `limit`; the entry after
/// a full page means there is a next page, which starts after the page's
/// last entry whose position reads.
/// The most stored JSON one page of approvals holds (inputs, payloads,
/// outputs, triggers), besides its row limit: a page of wide records stops
/// early and gives a `next_cursor`, so reading a page costs about this much
/// memory whatever the limit asked (tollgate issue 41). A page always holds
/// at least one record, however large.
pub const PAGE_BYTES: usize = 2 * 1024 * 1024;

struct Fill {
    limit: usize,
    /// The JSON bytes of the records in the page so far.
    bytes: usize,
    approvals: Vec<ApprovalRecord>,
    unreadable: Vec<UnreadableRow>,
    /// The position of the page's last row: the next page's cursor.
    last: Option<String>,
    next_cursor: Option<String>,
    done: bool,
}

impl Fill {
    fn new(limit: usize) -> Fill {
        Fill {
            limit: limit.max(1),
            bytes: 0,
            approvals: Vec::new(),
            unreadable: Vec::new(),
            last: None,
            next_cursor: None,
            done: false,
        }
    }

    fn batch(&self) -> usize {
        self.limit.saturating_add(1)
    }

    /// Add an entry at `position` (its order time and key, when the time
    /// reads). False, adding nothing, when the page was already full.
    fn add(
        &mut self,
        entry: Result<ApprovalRecord, UnreadableRow>,
        position: Option<(DateTime<Utc>, &str)>,
    ) -> bool {
        // One more row belongs to the listing (the page is full by rows, or
        // by bytes with at least one row): there is a next page.
        let size = entry.as_ref().map_or(0, json_bytes);
        let rows = self.approvals.len() + self.unreadable.len();
        if rows == self.limit || (rows > 0 && self.bytes.saturating_add(size) > PAGE_BYTES) {
            self.next_cursor = self.last.take();
            self.done = true;
            return false;
        }
        self.bytes = self.bytes.saturating_add(size);
        match entry {
            Ok(record) => self.approvals.push(record),
            Err(unreadable) => self.unreadable.push(unreadable),
        }
        if let Some((at, key)) = position {
            self.last = Some(cursor::encode(at, key));
        }
        true
    }
}

/// The SQL condition narrowing settled rows (`status <> 'PENDING'`) to
/// `statuses`: none when they are all of them, so that the query's
/// condition is exactly its partial index's and the planner walks that
/// index in order (PostgreSQL otherwise guesses the IN list selective and
/// sorts). A status this build does not know (a newer writer's) is then
/// listed, as unreadable, rather than hidden. The statuses are
/// [`ApprovalStatus`] names, never a caller's text.
/// How many bytes of JSON a record holds: its input's text and the
/// others as they serialize, counted without writing them anywhere.
fn json_bytes(record: &ApprovalRecord) -> usize {
    let mut counted = Counted(record.input.len());
    let values = [
        Some(&record.payload),
        Some(&record.trigger),
        record.decision_data.as_ref(),
    ];
    for value in values.into_iter().flatten() {
        let _ = serde_json::to_writer(&mut counted, value);
    }
    let _ = serde_json::to_writer(&mut counted, &record.outputs);
    counted.0
}

/// A writer that only counts.
struct Counted(usize);

impl std::io::Write for Counted {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0 += buf.len();
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

pub(crate) fn settled_statuses_sql(statuses: &[&str]) -> String {
    let every = ApprovalStatus::ALL
        .iter()
        .filter(|s| **s != ApprovalStatus::Pending)
        .all(|s| statuses.contains(&s.as_str()));
    if every {
        return String::new();
    }
    let quoted: Vec<String> = statuses.iter().map(|s| format!("'{s}'")).collect();
    format!(" AND status IN ({})", quoted.join(", "))
}

/// A `LIKE` pattern matching `text` anywhere, its `%`, `_` and `\`
/// matched literally (with `ESCAPE '\'`): the text is untrusted and is
/// bound as a parameter, never spliced into SQL.
pub(crate) fn like_pattern(text: &str) -> String {
    let mut pattern = String::with_capacity(text.len() + 2);
    pattern.push('%');
    for c in text.chars() {
        if matches!(c, '%' | '_' | '\\') {
            pattern.push('\\');
        }
        pattern.push(c);
    }
    pattern.push('%');
    pattern
}

/// The `LIKE` patterns of a runs search ([`crate::store::RunQuery::text`]):
/// one for plain text columns, one for JSON ones, where the text sits
/// escaped as JSON writes it (a `"` as `\"`). NULs are dropped: a bound
/// text parameter cannot hold one.
pub(crate) fn run_text_patterns(text: &str) -> (String, String) {
    let text = text.replace('\0', "");
    let quoted = serde_json::Value::String(text.clone()).to_string();
    let body = &quoted[1..quoted.len() - 1];
    (like_pattern(&text), like_pattern(body))
}

/// Cursor encoding shared by the stores: `created_at|key` of the last row.
pub(crate) mod cursor {
    use chrono::{DateTime, Utc};

    use super::StoreError;

    pub fn encode(created_at: DateTime<Utc>, key: &str) -> String {
        format!("{}|{}", crate::support::time::format_utc(created_at), key)
    }

    pub fn decode(cursor: &str) -> Result<(String, String), StoreError> {
        match cursor.split_once('|') {
            Some((at, key)) if crate::support::time::parse_utc(at).is_some() && !key.is_empty() => {
                Ok((at.to_string(), key.to_string()))
            }
            _ => Err(StoreError::InvalidCursor(cursor.to_string())),
        }
    }
}

#[cfg(test)]
mod listing_tests {
    use super::*;
    use crate::domain::pending_approval::sample_record;

    #[test]
    fn a_cursor_round_trips_its_time_and_key() {
        let at = crate::support::time::parse_utc("2026-03-01T09:00:00.123456Z").expect("time");
        let text = cursor::encode(at, "key|with|bars");
        assert_eq!(text, "2026-03-01T09:00:00.123456Z|key|with|bars");
        let (time, key) = cursor::decode(&text).expect("decode");
        assert_eq!(crate::support::time::parse_utc(&time), Some(at));
        // The time never holds a bar: the first one ends it, the key keeps
        // the rest.
        assert_eq!(key, "key|with|bars");
    }

    #[test]
    fn a_malformed_cursor_is_refused_naming_it() {
        for bad in [
            "",
            "no-bar",
            "|key",
            "2026-03-01T09:00:00Z|",
            "yesterday|key",
            "2026-13-01T09:00:00Z|key",
        ] {
            match cursor::decode(bad) {
                Err(e @ StoreError::InvalidCursor(_)) => {
                    assert_eq!(e.to_string(), format!("malformed cursor {bad:?}"));
                }
                other => panic!("{bad:?}: {other:?}"),
            }
        }
    }

    #[test]
    fn a_page_of_wide_records_stops_at_its_byte_budget_with_at_least_one() {
        let wide = |key: &str, bytes: usize| {
            let mut record = crate::domain::pending_approval::sample_record(key, "run");
            record.input = serde_json::json!({ "text": "x".repeat(bytes) }).into();
            record
        };
        let query = PendingQuery {
            agent_id: None,
            now: crate::support::time::now(),
            limit: 50,
            cursor: None,
        };
        let mut pager = PendingPager::new(&query);
        let third = PAGE_BYTES / 3;
        for key in ["a", "b", "c", "d"] {
            if !pager
                .offer(Ok(wide(key, third)), || unreachable!())
                .expect("offer")
            {
                break;
            }
        }
        let page = pager.finish();
        let keys: Vec<&str> = page.approvals.iter().map(|r| r.key.as_str()).collect();
        assert_eq!(keys, ["a", "b"], "a third more would pass the budget");
        assert!(page.next_cursor.is_some(), "the rest is on the next page");

        // One record larger than the budget still makes a page.
        let mut pager = PendingPager::new(&query);
        assert!(
            pager
                .offer(Ok(wide("huge", PAGE_BYTES * 2)), || unreachable!())
                .expect("offer")
        );
        assert!(
            !pager
                .offer(Ok(wide("next", 10)), || unreachable!())
                .expect("offer")
        );
        let page = pager.finish();
        assert_eq!(page.approvals.len(), 1);
        assert!(page.next_cursor.is_some());
    }

    #[test]
    fn like_metacharacters_are_escaped() {
        assert_eq!(like_pattern("50%"), "%50\\%%");
        assert_eq!(like_pattern("a_b"), "%a\\_b%");
        assert_eq!(like_pattern("c:\\x"), "%c:\\\\x%");
        assert_eq!(like_pattern("plain"), "%plain%");
        assert_eq!(like_pattern("' OR 1=1"), "%' OR 1=1%");
    }

    #[test]
    fn the_settled_condition_names_statuses_only_when_not_all() {
        assert_eq!(
            settled_statuses_sql(&["APPROVED", "REJECTED", "MODIFIED", "EXPIRED", "CANCELLED"]),
            ""
        );
        assert_eq!(
            settled_statuses_sql(&["APPROVED", "EXPIRED"]),
            " AND status IN ('APPROVED', 'EXPIRED')"
        );
    }

    fn query(statuses: Vec<ApprovalStatus>) -> ApprovalQuery {
        ApprovalQuery {
            agent_id: None,
            statuses,
            step_id: None,
            text: None,
            now: crate::support::time::now(),
            limit: 10,
            cursor: None,
            ..Default::default()
        }
    }

    #[test]
    fn statuses_map_to_the_rows_each_arm_reads() {
        use ApprovalStatus::*;
        let all = query(vec![]);
        let f = ApprovalFilter::new(&all);
        assert!(f.pending_live && f.pending_overdue);
        assert_eq!(
            f.settled,
            vec![Approved, Rejected, Modified, Expired, Cancelled]
        );

        let inbox = query(vec![Pending]);
        let f = ApprovalFilter::new(&inbox);
        assert!(f.pending_live && !f.pending_overdue && f.settled.is_empty());

        // EXPIRED reads overdue PENDING rows too.
        let expired = query(vec![Expired]);
        let f = ApprovalFilter::new(&expired);
        assert!(!f.pending_live && f.pending_overdue);
        assert_eq!(f.settled, vec![Expired]);
    }

    #[test]
    fn the_text_filter_is_a_case_insensitive_substring_of_the_searched_fields() {
        let mut record = sample_record("3f0a2b9e-key", "7c1d-run");
        record.message = Some("Refund ÉCU to Ada".into());
        record.decided_by = Some("Grace".into());
        let matches = |text: &str| {
            let q = ApprovalQuery {
                text: Some(text.into()),
                ..query(vec![])
            };
            ApprovalFilter::new(&q).text_matches(&record)
        };
        assert!(matches("refund"));
        assert!(matches("écu"), "the check folds beyond ASCII");
        assert!(matches("GRACE"));
        assert!(matches(&record.step_id.to_uppercase()));
        assert!(matches(&record.key[..8]));
        assert!(matches(&record.run_id));
        assert!(matches(""), "an empty text filters nothing");
        assert!(!matches("refund ada"));
    }
}
