//! `tollgate approvals list|show|approve|reject`.

use std::path::Path;

use serde_json::json;
use tollgate_runtime::Decision;
use tollgate_runtime::store::{PendingQuery, SharedStore};

use crate::cli::{ApprovalsCommand, DecideArgs, StoreArgs};
use crate::exit::{self, Failure};
use crate::render;

pub async fn run(command: ApprovalsCommand) -> Result<i32, Failure> {
    match command {
        ApprovalsCommand::List {
            spec,
            store,
            json,
            stuck,
            limit,
        } => list(spec.as_deref(), &store, json, stuck, limit).await,
        ApprovalsCommand::Show {
            key,
            spec,
            store,
            json,
        } => show(&key, spec.as_deref(), &store, json).await,
        ApprovalsCommand::Approve(args) => {
            let decision = match &args.payload {
                Some(text) => Decision::Modify {
                    payload: super::parse_json_arg("--payload", text)?,
                    reason: args.reason.clone(),
                },
                None => Decision::Approve {
                    reason: args.reason.clone(),
                },
            };
            decide(args, decision).await
        }
        ApprovalsCommand::Reject(args) => {
            if args.payload.is_some() {
                return Err(Failure::bad_input(
                    "--payload goes with approve, not reject",
                ));
            }
            let decision = Decision::Reject {
                reason: args.reason.clone(),
            };
            decide(args, decision).await
        }
    }
}

/// Open the store and expire what is overdue first, so nothing listed or
/// decided here is past its time.
async fn open_swept(store: &StoreArgs, spec: Option<&Path>) -> Result<SharedStore, Failure> {
    let store = crate::state::open(store, spec)?;
    store.expire_due(tollgate_runtime::time::now()).await?;
    Ok(store)
}

async fn list(
    spec: Option<&Path>,
    store_args: &StoreArgs,
    json: bool,
    stuck: bool,
    limit: Option<usize>,
) -> Result<i32, Failure> {
    let agent_id = match spec {
        Some(path) => Some(super::load_spec(path)?.agent.clone()),
        None => None,
    };
    let store = open_swept(store_args, spec).await?;
    if stuck {
        let mut claims = store.list_stuck(agent_id.as_deref()).await?;
        if let Some(limit) = limit {
            claims.truncate(limit);
        }
        if json {
            println!("{}", render::pretty(&json!({ "stuck": claims })));
        } else {
            let records: Vec<_> = claims.into_iter().map(|c| c.record).collect();
            render::stuck_table(&records);
        }
        return Ok(exit::OK);
    }
    let mut approvals = Vec::new();
    let mut cursor = None;
    let wanted = limit.unwrap_or(usize::MAX);
    loop {
        let page = store
            .list_pending(&PendingQuery {
                agent_id: agent_id.clone(),
                now: tollgate_runtime::time::now(),
                limit: (wanted - approvals.len()).min(500),
                cursor: cursor.take(),
            })
            .await?;
        approvals.extend(page.approvals);
        match page.next_cursor {
            Some(next) if approvals.len() < wanted => cursor = Some(next),
            _ => break,
        }
    }
    if json {
        println!("{}", render::pretty(&json!({ "approvals": approvals })));
    } else {
        render::table(&approvals);
    }
    Ok(exit::OK)
}

async fn show(
    key: &str,
    spec: Option<&Path>,
    store_args: &StoreArgs,
    json: bool,
) -> Result<i32, Failure> {
    let store = crate::state::open(store_args, spec)?;
    let record = store
        .get_approval(key)
        .await?
        .ok_or_else(|| tollgate_runtime::ApprovalError::NotFound { key: key.into() })?;
    if json {
        println!("{}", render::pretty(&json!(record)));
    } else {
        render::record(&record);
    }
    Ok(exit::OK)
}

async fn decide(args: DecideArgs, decision: Decision) -> Result<i32, Failure> {
    let spec = super::load_spec(&args.spec)?;
    let store = open_swept(&args.store, Some(&args.spec)).await?;
    let agent = super::agent(spec, store)?;
    let mut events = agent.subscribe();
    let decided_by = super::decider(args.by.as_deref());
    let outcome = agent.resume_by_key(&args.key, decision, &decided_by).await;
    if args.json {
        render::drain_events(&mut events);
    }
    let outcome = outcome?;
    if !args.json {
        render::outcome(&outcome, &args.spec);
    }
    // The decision itself succeeded; a reject that ends the run is what the
    // caller asked for, so only a failed run is an error here.
    Ok(match outcome.status {
        tollgate_runtime::RunStatus::Rejected => exit::OK,
        status => exit::for_status(status),
    })
}
