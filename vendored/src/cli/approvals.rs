//! `tollgate approvals list|show|approve|reject`.

use serde_json::json;

use super::args::{ApprovalsCommand, DecideArgs, StoreArgs};
use super::common::SpecSource;
use super::exit::{self, Failure};
use super::render;
use crate::Decision;
use crate::store::{PendingQuery, SharedStore};
use crate::tools::CustomTools;

/// Run an `approvals` subcommand. `embedded` is the spec built into an
/// exported server (tollgate has none and requires `--spec`).
pub async fn run(
    command: ApprovalsCommand,
    embedded: Option<&SpecSource>,
    custom: &CustomTools,
) -> Result<i32, Failure> {
    match command {
        ApprovalsCommand::List {
            spec,
            store,
            json,
            stuck,
            limit,
        } => {
            let source = spec.as_deref().map(|p| SpecSource::File(p.to_path_buf()));
            list(source.as_ref().or(embedded), &store, json, stuck, limit).await
        }
        ApprovalsCommand::Show {
            key,
            spec,
            store,
            json,
        } => {
            let source = spec.as_deref().map(|p| SpecSource::File(p.to_path_buf()));
            show(&key, source.as_ref().or(embedded), &store, json).await
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
            decide(args.decide, decision, embedded, custom).await
        }
        ApprovalsCommand::Reject(args) => {
            let decision = Decision::Reject {
                reason: args.reason.clone(),
            };
            decide(args, decision, embedded, custom).await
        }
    }
}

/// Open an existing store (these commands never create one) and expire what
/// is overdue first, so nothing listed or decided here is past its time.
async fn open_swept(store: &StoreArgs, spec: Option<&SpecSource>) -> Result<SharedStore, Failure> {
    let store = super::store_location::open_existing(store, spec)?;
    store.expire_due(crate::time::now()).await?;
    Ok(store)
}

async fn list(
    spec: Option<&SpecSource>,
    store_args: &StoreArgs,
    json: bool,
    stuck: bool,
    limit: Option<usize>,
) -> Result<i32, Failure> {
    let agent_id = match spec {
        Some(source) => Some(source.load()?.agent.clone()),
        None => None,
    };
    let store = open_swept(store_args, spec).await?;
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
                now: crate::time::now(),
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

async fn show(
    key: &str,
    spec: Option<&SpecSource>,
    store_args: &StoreArgs,
    json: bool,
) -> Result<i32, Failure> {
    let store = super::store_location::open_existing(store_args, spec)?;
    // As of now: overdue reads EXPIRED even before a sweep marked it.
    let record = store
        .approval_as_of(key, crate::time::now())
        .await?
        .ok_or_else(|| crate::ApprovalError::NotFound { key: key.into() })?;
    if json {
        say!("{}", render::pretty(&json!(record)));
    } else {
        render::record(&record);
    }
    Ok(exit::OK)
}

async fn decide(
    args: DecideArgs,
    decision: Decision,
    embedded: Option<&SpecSource>,
    custom: &CustomTools,
) -> Result<i32, Failure> {
    let source = SpecSource::resolve(args.spec.as_deref(), embedded)?;
    let spec = source.load()?;
    let store = open_swept(&args.store, Some(&source)).await?;
    let agent = super::common::agent(spec, store, custom)?;
    let mut events = agent.subscribe();
    let decided_by = super::common::decider(args.by.as_deref());
    let outcome = agent.resume_by_key(&args.key, decision, &decided_by).await;
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
