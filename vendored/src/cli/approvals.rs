//! `tollgate approvals list|show|approve|reject`.

use serde_json::json;

use super::args::{ApprovalsCommand, DecideArgs, StoreArgs};
use super::common::SpecSource;
use super::exit::{self, Failure};
use super::render;
use crate::links::{LINK_SECRET_ENV, LinkSigner};
use crate::store::{PendingQuery, SharedStore};
use crate::time::SharedClock;
use crate::tools::CustomTools;
use crate::{ApprovalRecord, ApprovalStatus, Decision};

/// Run an `approvals` subcommand. `embedded` is the spec built into an
/// exported server (tollgate has none and requires `--spec`).
pub async fn run(
    command: ApprovalsCommand,
    embedded: Option<&SpecSource>,
    custom: &CustomTools,
) -> Result<i32, Failure> {
    // A process of its own reads the system clock; what it decides by
    // (expiry, "as of now") is read from this one value.
    let clock = crate::time::system();
    match command {
        ApprovalsCommand::List {
            spec,
            store,
            json,
            stuck,
            limit,
        } => {
            let source = spec.as_deref().map(|p| SpecSource::File(p.to_path_buf()));
            list(
                source.as_ref().or(embedded),
                &store,
                json,
                stuck,
                limit,
                &clock,
            )
            .await
        }
        ApprovalsCommand::Show {
            key,
            spec,
            store,
            json,
            link_for,
        } => {
            let source = spec.as_deref().map(|p| SpecSource::File(p.to_path_buf()));
            let shown = Shown {
                json,
                link_for: link_for.as_deref(),
            };
            show(&key, source.as_ref().or(embedded), &store, shown, &clock).await
        }
        ApprovalsCommand::Approve(args) => {
            let decision = match args.payload {
                Some(payload) => Decision::Modify {
                    payload,
                    reason: args.decide.reason.clone(),
                },
                None => Decision::Approve {
                    reason: args.decide.reason.clone(),
                },
            };
            decide(args.decide, decision, embedded, custom, &clock).await
        }
        ApprovalsCommand::Reject(args) => {
            let decision = Decision::Reject {
                reason: args.reason.clone(),
            };
            decide(args, decision, embedded, custom, &clock).await
        }
    }
}

/// Open an existing store (these commands never create one) and expire what
/// is overdue first, so nothing listed or decided here is past its time.
async fn open_swept(
    store: &StoreArgs,
    spec: Option<&SpecSource>,
    clock: &SharedClock,
) -> Result<SharedStore, Failure> {
    let store = super::store_location::open_existing(store, spec)?;
    store.expire_due(clock.now()).await?;
    Ok(store)
}

async fn list(
    spec: Option<&SpecSource>,
    store_args: &StoreArgs,
    json: bool,
    stuck: bool,
    limit: Option<usize>,
    clock: &SharedClock,
) -> Result<i32, Failure> {
    let agent_id = match spec {
        Some(source) => Some(source.load()?.agent.clone()),
        None => None,
    };
    let store = open_swept(store_args, spec, clock).await?;
    if stuck {
        let mut claims = store
            .list_stuck(agent_id.as_deref(), crate::time::now())
            .await?;
        if let Some(limit) = limit {
            claims.truncate(limit);
        }
        if json {
            say!("{}", render::pretty(&json!({ "stuck": claims })));
        } else {
            let records: Vec<_> = claims.into_iter().map(|c| c.record).collect();
            render::stuck_table(&records);
        }
        return Ok(exit::OK);
    }
    let mut approvals = Vec::new();
    let mut unreadable = Vec::new();
    let mut cursor = None;
    let wanted = limit.unwrap_or(usize::MAX);
    loop {
        let page = store
            .list_pending(&PendingQuery {
                agent_id: agent_id.clone(),
                now: clock.now(),
                limit: (wanted - approvals.len()).min(500),
                cursor: cursor.take(),
            })
            .await?;
        approvals.extend(page.approvals);
        unreadable.extend(page.unreadable);
        match page.next_cursor {
            Some(next) if approvals.len() < wanted => cursor = Some(next),
            _ => break,
        }
    }
    // Rows that could not be decoded were skipped, not allowed to stop the
    // listing; each is named so that someone can look at it.
    for row in &unreadable {
        eprintln!(
            "note: skipped approval {} (its stored record is unreadable: {})",
            row.key, row.error
        );
    }
    if json && !unreadable.is_empty() {
        say!(
            "{}",
            render::pretty(&json!({ "approvals": approvals, "unreadable": unreadable }))
        );
    } else if json {
        say!("{}", render::pretty(&json!({ "approvals": approvals })));
    } else {
        render::table(&approvals);
    }
    Ok(exit::OK)
}

/// How `approvals show` prints.
struct Shown<'a> {
    json: bool,
    /// `--link-for`: the identity the shown link is bound to.
    link_for: Option<&'a str>,
}

async fn show(
    key: &str,
    spec: Option<&SpecSource>,
    store_args: &StoreArgs,
    shown: Shown<'_>,
    clock: &SharedClock,
) -> Result<i32, Failure> {
    // Read first: a bad link secret is refused before anything else.
    let links = LinkSigner::from_env().map_err(|e| Failure::bad_input(e.to_string()))?;
    if shown.link_for.is_some_and(|name| name.trim().is_empty()) {
        return Err(Failure::bad_input("--link-for needs a name"));
    }
    let store = super::store_location::open_existing(store_args, spec)?;
    // As of now: overdue reads EXPIRED even before a sweep marked it.
    let record = store
        .approval_as_of(key, clock.now())
        .await?
        .ok_or_else(|| crate::ApprovalError::NotFound { key: key.into() })?;
    let link = link(&record, links.as_ref(), shown.link_for)?;
    if let (Some(name), Some(source)) = (shown.link_for, spec) {
        warn_unless_approver(name, source);
    }
    if shown.json {
        let mut value = json!(record);
        if let (Some(url), Some(fields)) = (&link, value.as_object_mut()) {
            fields.insert("link".into(), url.clone().into());
        }
        say!("{}", render::pretty(&value));
    } else {
        render::record(&record);
        // Only a PENDING record has a link to show (or to say is off).
        if record.status == ApprovalStatus::Pending {
            match &link {
                Some(url) => say!("link:        {url}"),
                None => say!("link:        off (set {LINK_SECRET_ENV})"),
            }
        }
    }
    Ok(exit::OK)
}

/// The record's signed link, computed now (links are never stored):
/// `None` when links are off or the record is no longer PENDING. Asked for
/// with `--link-for`, a link that cannot be made is an error instead.
fn link(
    record: &ApprovalRecord,
    links: Option<&LinkSigner>,
    link_for: Option<&str>,
) -> Result<Option<String>, Failure> {
    let pending = record.status == ApprovalStatus::Pending;
    match (links, link_for) {
        (Some(links), bound) if pending => Ok(Some(links.url(&record.key, bound))),
        (_, None) => Ok(None),
        (None, Some(name)) => Err(Failure::bad_input(format!(
            "cannot make a link for {name}: signed links are off: set {LINK_SECRET_ENV}"
        ))),
        (Some(_), Some(name)) => Err(Failure::new(
            if record.status == ApprovalStatus::Expired {
                exit::NOT_FOUND
            } else {
                exit::CONFLICT
            },
            format!(
                "cannot make a link for {name}: approval {} is {}, and a link works only while it is PENDING",
                record.key, record.status
            ),
        )),
    }
}

/// A link bound to someone the spec's approvers list leaves out would be
/// refused when used: say so now. Only when the spec is at hand; a spec
/// that does not load is not this command's concern.
fn warn_unless_approver(name: &str, source: &SpecSource) {
    let Ok(spec) = source.load() else {
        return;
    };
    if let Some(approvers) = &spec.approvals.approvers
        && !approvers.iter().any(|a| a == name)
    {
        eprintln!(
            "warning: {name} is not in approvals.approvers: deciding through this link will be refused"
        );
    }
}

async fn decide(
    args: DecideArgs,
    decision: Decision,
    embedded: Option<&SpecSource>,
    custom: &CustomTools,
    clock: &SharedClock,
) -> Result<i32, Failure> {
    let source = SpecSource::resolve(args.spec.as_deref(), embedded)?;
    let spec = source.load()?;
    let store = open_swept(&args.store, Some(&source), clock).await?;
    let agent = super::common::agent(spec, store, custom)?.with_clock(clock.clone());
    let mut events = agent.subscribe();
    let decided_by = super::common::decider(args.by.as_deref());
    let claimed = agent.claim(&args.key, decision, &decided_by).await?;
    if claimed.is_repeat() {
        // A retry of the decision that won (the first answer was lost):
        // done, exit 0, whatever the run did since; nothing runs again.
        let record = &claimed.record;
        eprintln!(
            "note: approval {} was already {} by {} at {}: the same decision, so nothing was done again",
            record.key,
            record.status.past_tense(),
            decided_by,
            record
                .decided_at
                .map(crate::time::format_utc)
                .unwrap_or_default()
        );
        let record = record.clone();
        let outcome = agent.resume_claimed(claimed).await?;
        if args.json {
            // No event happened; one line with the stored decision and run.
            say!(
                "{}",
                json!({ "repeated": true, "approval": record, "run": outcome })
            );
        } else {
            render::outcome(&outcome, &source);
        }
        return Ok(exit::OK);
    }
    let outcome = agent.resume_claimed(claimed).await;
    if args.json {
        render::drain_events(&mut events);
    }
    let outcome = outcome?;
    if !args.json {
        render::outcome(&outcome, &source);
    }
    // How the run stands now, as for `run`: a winning reject that ends the
    // run exits 5 (DESIGN §6), so a script can tell it from an approval.
    Ok(exit::for_status(outcome.status))
}
