//! `tollgate notifications list|retry` (DESIGN §14): the outbox as the
//! store keeps it, and an operator's retry of failed or dead notices.
//!
//! Both work on an existing store only: pointed at a place with none they
//! say where they looked and exit 3, creating nothing. Targets are printed
//! as the spec wrote them (`${NAME}` references), never resolved, and a
//! last error is stored without secrets or URLs.

use std::path::PathBuf;

use clap::Subcommand;
use serde_json::json;

use super::args::StoreArgs;
use super::common::SpecSource;
use super::exit::{self, ExitFailure};
use super::render::{self, timestamp};
use crate::domain::notices::{NoticeChannel, NoticeStatus};
use crate::service::notices::{self, NoticeFilter, NoticeView, RetryRefused};
use crate::store::{LaneStats, MAX_NOTICE_PAGE, OutboxNotice};

/// Notices listed when `--limit` is not given.
const DEFAULT_LIMIT: usize = 50;

fn status_arg(text: &str) -> Result<NoticeStatus, String> {
    NoticeStatus::parse(text).ok_or_else(|| {
        let known: Vec<&str> = NoticeStatus::ALL.iter().map(|s| s.as_str()).collect();
        format!(
            "{text:?} is not a notice status; use one of {}",
            known.join(", ")
        )
    })
}

fn channel_arg(text: &str) -> Result<NoticeChannel, String> {
    NoticeChannel::parse(text).ok_or_else(|| {
        let known: Vec<&str> = NoticeChannel::ALL.iter().map(|s| s.as_str()).collect();
        format!("{text:?} is not a channel; use one of {}", known.join(", "))
    })
}

#[derive(Debug, Subcommand)]
pub enum NotificationsCommand {
    /// List notices in the outbox, newest first.
    ///
    /// Each one's id, event, channel, target (as written in the spec, a
    /// `${NAME}` reference never resolved), status, attempts, next try or
    /// send time, and last error; then the lanes with notices still to
    /// deliver (channel and endpoint host, state, waiting, in flight,
    /// failing).
    List {
        /// The spec whose default state file is used.
        #[arg(long)]
        spec: Option<PathBuf>,
        #[command(flatten)]
        store: StoreArgs,
        /// Only notices with this status (pending, failed, dead, sent);
        /// repeat it for several.
        #[arg(long, value_name = "S", value_parser = status_arg)]
        status: Vec<NoticeStatus>,
        /// Only the notices of this approval.
        #[arg(long, value_name = "KEY")]
        key: Option<String>,
        /// Only notices on this channel (webhook, email, slack).
        #[arg(long, value_name = "CHANNEL", value_parser = channel_arg)]
        channel: Option<NoticeChannel>,
        /// At most this many notices (default 50).
        #[arg(long)]
        limit: Option<usize>,
        /// Print JSON (as GET /notifications answers) instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Send a failed or dead notice again now (or, with --all-dead, every
    /// dead notice).
    ///
    /// Each gets a fresh retry window, and a webhook endpoint a 410
    /// disabled is enabled again. Exit 3 for an unknown id, 4 for a notice
    /// that is pending or sent.
    Retry {
        /// The notice's id (as `notifications list` shows it).
        #[arg(required_unless_present = "all_dead", conflicts_with = "all_dead")]
        id: Option<String>,
        /// Every dead notice.
        #[arg(long)]
        all_dead: bool,
        /// The spec whose default state file is used.
        #[arg(long)]
        spec: Option<PathBuf>,
        #[command(flatten)]
        store: StoreArgs,
        /// Print `{"retried": N}`.
        #[arg(long)]
        json: bool,
    },
}

pub async fn run(
    command: NotificationsCommand,
    embedded: Option<&SpecSource>,
) -> Result<i32, ExitFailure> {
    match command {
        NotificationsCommand::List {
            spec,
            store,
            status,
            key,
            channel,
            limit,
            json,
        } => {
            let source = spec.map(SpecSource::File);
            let filter = NoticeFilter {
                statuses: status,
                key: key.filter(|k| !k.is_empty()),
                channel,
            };
            let limit = limit.unwrap_or(DEFAULT_LIMIT);
            list(source.as_ref().or(embedded), &store, &filter, limit, json).await
        }
        NotificationsCommand::Retry {
            id,
            all_dead,
            spec,
            store,
            json,
        } => {
            let source = spec.map(SpecSource::File);
            retry(source.as_ref().or(embedded), &store, id, all_dead, json).await
        }
    }
}

async fn list(
    spec: Option<&SpecSource>,
    store_args: &StoreArgs,
    filter: &NoticeFilter,
    limit: usize,
    json: bool,
) -> Result<i32, ExitFailure> {
    if limit == 0 {
        return Err(ExitFailure::bad_input("--limit must be at least 1"));
    }
    let store = super::store_location::open_existing(store_args, spec)?;
    let mut rows: Vec<OutboxNotice> = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let want = (limit - rows.len()).min(MAX_NOTICE_PAGE);
        let page = notices::page(store.as_ref(), filter, want, cursor.as_deref()).await?;
        rows.extend(page.notices);
        match page.next_cursor {
            Some(next) if rows.len() < limit => cursor = Some(next),
            _ => break,
        }
    }
    if json {
        let listed: Vec<NoticeView> = rows.into_iter().map(NoticeView::new).collect();
        say!("{}", render::pretty(&json!({ "notifications": listed })));
        return Ok(exit::OK);
    }
    if rows.is_empty() {
        say!("no notices");
    } else {
        table(&rows);
    }
    let lanes: Vec<LaneStats> = store
        .lane_stats(crate::support::time::now())
        .await?
        .into_iter()
        .filter(|lane| filter.channel.is_none_or(|c| c == lane.channel))
        .collect();
    if !lanes.is_empty() {
        say!("");
        lane_table(&lanes);
    }
    Ok(exit::OK)
}

/// The lanes with notices still to deliver: each endpoint (a webhook's
/// `scheme://host:port`, an SMTP server, the Slack API host; never a path
/// or a credential), what it is doing, and its counts.
fn lane_table(lanes: &[LaneStats]) {
    let line = |c: [&str; 7]| {
        format!(
            "{:<7}  {:<40}  {:<9}  {:>7}  {:>9}  {:>7}  {}",
            c[0], c[1], c[2], c[3], c[4], c[5], c[6]
        )
        .trim_end()
        .to_string()
    };
    say!(
        "{}",
        line([
            "CHANNEL",
            "LANE",
            "STATE",
            "WAITING",
            "IN FLIGHT",
            "FAILING",
            "OLDEST WAITING SINCE"
        ])
    );
    for lane in lanes {
        say!(
            "{}",
            line([
                lane.channel.as_str(),
                &lane.endpoint,
                lane.state(),
                &lane.waiting.to_string(),
                &lane.in_flight.to_string(),
                &lane.failing.to_string(),
                &lane.oldest_waiting.map_or("-".to_string(), timestamp),
            ])
        );
    }
}

/// The list as a table; the last error, free text, comes last.
fn table(rows: &[OutboxNotice]) {
    let line = |c: [&str; 9]| {
        format!(
            "{:<36}  {:<20}  {:<18}  {:<7}  {:<24}  {:<7}  {:>8}  {:<25}  {}",
            c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7], c[8]
        )
        .trim_end()
        .to_string()
    };
    say!(
        "{}",
        line([
            "ID",
            "CREATED",
            "EVENT",
            "CHANNEL",
            "TARGET",
            "STATUS",
            "ATTEMPTS",
            "NEXT/SENT",
            "LAST ERROR"
        ])
    );
    for row in rows {
        let when = match (row.status, row.sent_at) {
            (NoticeStatus::Sent, Some(at)) => format!("sent {}", timestamp(at)),
            (status, _) if status.is_due_state() => format!("next {}", timestamp(row.next_at)),
            // Dead: nothing is due until an operator retries it.
            _ => "-".to_string(),
        };
        say!(
            "{}",
            line([
                &row.notice.id,
                &timestamp(row.notice.created_at),
                row.notice.event.as_str(),
                row.notice.channel.as_str(),
                &row.notice.target,
                row.status.as_str(),
                &row.attempts.to_string(),
                &when,
                row.last_error.as_deref().unwrap_or(""),
            ])
        );
    }
}

async fn retry(
    spec: Option<&SpecSource>,
    store_args: &StoreArgs,
    id: Option<String>,
    all_dead: bool,
    json: bool,
) -> Result<i32, ExitFailure> {
    let store = super::store_location::open_existing(store_args, spec)?;
    let now = crate::support::time::now();
    let retried = match (id, all_dead) {
        (_, true) => notices::retry_dead(store.as_ref(), now).await?,
        (Some(id), false) => {
            let n = notices::retry_one(store.as_ref(), &id, now)
                .await
                .map_err(refused)?;
            if !json {
                say!("notice {id} is due again: the delivery worker sends it next");
            }
            n
        }
        (None, false) => {
            return Err(ExitFailure::bad_input("give the notice ID, or --all-dead"));
        }
    };
    if json {
        say!("{}", json!({ "retried": retried }));
    } else if all_dead {
        let noun = if retried == 1 { "notice" } else { "notices" };
        say!("retried {retried} dead {noun}: due again now");
    }
    Ok(exit::OK)
}

/// A refused retry's exit status (DESIGN §6): 3 for an unknown id, 4 for a
/// notice that is pending or sent.
fn refused(e: RetryRefused) -> ExitFailure {
    match e {
        RetryRefused::NotFound(_) => ExitFailure::new(exit::NOT_FOUND, e.to_string()),
        RetryRefused::NotRetriable { .. } => ExitFailure::new(exit::CONFLICT, e.to_string()),
        RetryRefused::Store(e) => e.into(),
    }
}
