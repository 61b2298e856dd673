//! `tollgate runs list|show|cancel|retry|fail` (DESIGN §6, §9): see and
//! handle runs.
//!
//! `list` and `show` only read: pointed at a place with no store they say
//! where they looked and exit 3, creating nothing. `cancel`, `retry` and
//! `fail` change a run, so they need the spec (its agent and its
//! `approvals.approvers`); `retry` and `fail` are an operator's way out for
//! a run that stopped between pauses.

use std::path::PathBuf;

use clap::Subcommand;
use serde_json::json;

use super::approvals::Listing;
use super::args::{RunOpArgs, StoreArgs};
use super::common::SpecSource;
use super::exit::{self, ExitFailure};
use super::render::{self, indent, one_line, timestamp};
use super::store_location;
use crate::domain::events::EventKind;
use crate::domain::run_state::{RunRecord, RunStatus};
use crate::engine::tools::CustomTools;
use crate::store::{RunQuery, SharedStore};

/// clap value parser for `--status`: any run status, by its stored name.
fn status_arg(text: &str) -> Result<RunStatus, String> {
    RunStatus::parse(text).ok_or_else(|| {
        let known: Vec<&str> = RunStatus::ALL.iter().map(|s| s.as_str()).collect();
        format!(
            "{text:?} is not a run status; use one of {}",
            known.join(", ")
        )
    })
}

#[derive(Debug, Subcommand)]
pub enum RunsCommand {
    /// List runs, newest first.
    List {
        /// Only this spec's agent; its default state file is used.
        #[arg(long)]
        spec: Option<PathBuf>,
        #[command(flatten)]
        store: StoreArgs,
        /// Only runs with this status (running, awaiting_approval,
        /// completed, rejected, failed, expired, skipped, stuck, cancelled).
        #[arg(long, value_name = "S", value_parser = status_arg)]
        status: Option<RunStatus>,
        /// At most this many runs.
        #[arg(long)]
        limit: Option<usize>,
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
        /// Print the run ids alone, newest first, one per line, for a shell
        /// to read (`RUN_ID=$(... runs list --quiet | head -n1)` takes the
        /// newest).
        #[arg(long, short, conflicts_with = "json")]
        quiet: bool,
    },
    /// Show one run: its state, the approval it last paused at, its events.
    Show {
        /// The run's id.
        #[arg(value_parser = super::args::run_id_arg)]
        run_id: String,
        /// The spec whose default state file holds the run.
        #[arg(long)]
        spec: Option<PathBuf>,
        #[command(flatten)]
        store: StoreArgs,
        /// Print the run and its events as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Cancel a waiting or running run: it ends `cancelled`, and the
    /// approval it waits on becomes CANCELLED (kept in the audit trail).
    Cancel {
        /// The run's id.
        #[arg(value_parser = super::args::run_id_arg)]
        run_id: String,
        /// The spec the run belongs to. Required by tollgate; an exported
        /// server uses the spec built into it.
        #[arg(long)]
        spec: Option<PathBuf>,
        #[command(flatten)]
        store: StoreArgs,
        /// Why (kept in the `run_cancelled` event and on the approval).
        #[arg(long)]
        reason: Option<String>,
        /// Who cancels (default: $USER); must be in `approvals.approvers`
        /// when the spec sets it.
        #[arg(long, value_name = "NAME")]
        by: Option<String>,
        /// Print one JSON event per line.
        #[arg(long)]
        json: bool,
    },
    /// Drive a stuck or failed run on from its last durable point, here. A
    /// step that was in flight is called again with the same
    /// Idempotency-Key. A run an operator failed (`runs fail`) is refused
    /// (exit 4, naming who failed it, when and why) unless --force.
    #[command(mut_arg("spec", |spec| spec.help(
        "The spec the run belongs to: the retry drives the run on under it, and checks \
         its approvers. Required by tollgate; an exported server uses the spec built into it."
    )))]
    Retry {
        #[command(flatten)]
        run: RunOpArgs,
        /// Retry even a run an operator failed, undoing that decision (the
        /// retry's `run_recovered` event records that it was forced).
        #[arg(long)]
        force: bool,
    },
    /// End a stuck run `failed`, with a reason, in the audit trail.
    Fail {
        #[command(flatten)]
        run: RunOpArgs,
        /// Why the run is failed (kept in the run's error and its events).
        #[arg(long)]
        reason: String,
    },
}

pub async fn run(
    command: RunsCommand,
    embedded: Option<&SpecSource>,
    custom: &CustomTools,
) -> Result<i32, ExitFailure> {
    match command {
        RunsCommand::List {
            spec,
            store,
            status,
            limit,
            json,
            quiet,
        } => {
            let source = spec.as_deref().map(|p| SpecSource::File(p.to_path_buf()));
            let listing = Listing::from_flags(json, quiet);
            list(source.as_ref().or(embedded), &store, status, limit, listing).await
        }
        RunsCommand::Show {
            run_id,
            spec,
            store,
            json,
        } => {
            let source = spec.as_deref().map(|p| SpecSource::File(p.to_path_buf()));
            show(&run_id, source.as_ref().or(embedded), &store, json).await
        }
        RunsCommand::Cancel {
            run_id,
            spec,
            store,
            reason,
            by,
            json,
        } => {
            let source = SpecSource::resolve(spec.as_deref(), embedded)?;
            cancel(&run_id, &source, &store, reason, by, json, custom).await
        }
        RunsCommand::Retry { run, force } => retry(run, force, embedded, custom).await,
        RunsCommand::Fail { run, reason } => fail(run, &reason, embedded, custom).await,
    }
}

/// The store, with overdue approvals expired first (as `approvals` does),
/// so that a run whose approval ran out reads `expired`.
async fn open_swept(
    store: &StoreArgs,
    spec: Option<&SpecSource>,
) -> Result<SharedStore, ExitFailure> {
    let store = super::store_location::open_existing(store, spec)?;
    store.expire_due(crate::support::time::now()).await?;
    Ok(store)
}

async fn list(
    spec: Option<&SpecSource>,
    store_args: &StoreArgs,
    status: Option<RunStatus>,
    limit: Option<usize>,
    listing: Listing,
) -> Result<i32, ExitFailure> {
    let agent_id = match spec {
        Some(source) => Some(source.load()?.agent.clone()),
        None => None,
    };
    let store = open_swept(store_args, spec).await?;
    let wanted = limit.unwrap_or(usize::MAX);
    let mut runs: Vec<RunRecord> = Vec::new();
    let mut cursor = None;
    while runs.len() < wanted {
        let page = store
            .list_runs(&RunQuery {
                agent_id: agent_id.clone(),
                status,
                limit: (wanted - runs.len()).min(500),
                cursor: cursor.take(),
                text: None,
            })
            .await?;
        runs.extend(page.runs);
        match page.next_cursor {
            Some(next) => cursor = Some(next),
            None => break,
        }
    }
    match listing {
        Listing::Json => {
            say!("{}", render::pretty(&json!({ "runs": runs })));
            return Ok(exit::OK);
        }
        Listing::Ids => {
            for run in &runs {
                say!("{}", run.id);
            }
            return Ok(exit::OK);
        }
        Listing::Table => {}
    }
    if runs.is_empty() {
        say!("no runs");
        return Ok(exit::OK);
    }
    let row = |c: [&str; 5]| {
        format!(
            "{:<36}  {:<20}  {:<17}  {:<20}  {}",
            c[0], c[1], c[2], c[3], c[4]
        )
    };
    say!("{}", row(["RUN", "AGENT", "STATUS", "UPDATED", "ERROR"]));
    for r in &runs {
        let error = r.error.as_deref().map(one_line).unwrap_or_default();
        say!(
            "{}",
            row([
                &r.id,
                &r.agent_id,
                r.status.as_str(),
                &timestamp(r.updated_at),
                &error
            ])
        );
    }
    Ok(exit::OK)
}

async fn show(
    run_id: &str,
    spec: Option<&SpecSource>,
    store_args: &StoreArgs,
    json: bool,
) -> Result<i32, ExitFailure> {
    let store = super::store_location::open_existing(store_args, spec)?;
    let run = store.get_run(run_id).await?.ok_or_else(|| {
        ExitFailure::new(
            exit::NOT_FOUND,
            format!("run_not_found: no run with id {run_id}"),
        )
    })?;
    let approval = match store.latest_approval_key(run_id).await? {
        Some(key) => {
            store
                .approval_as_of(&key, crate::support::time::now())
                .await?
        }
        None => None,
    };
    let events = store.run_events(run_id, 0).await?;
    if json {
        say!(
            "{}",
            render::pretty(&json!({ "run": run, "approval": approval, "events": events }))
        );
        return Ok(exit::OK);
    }
    say!("run:         {}", run.id);
    say!("status:      {}", run.status);
    say!("agent:       {}", run.agent_id);
    say!("created:     {}", timestamp(run.created_at));
    say!("updated:     {}", timestamp(run.updated_at));
    if let Some(error) = &run.error {
        say!("error:       {error}");
    }
    if let (Some(owner), Some(until)) = (&run.owner, run.lease_until) {
        // A lease past its end means nobody drives the run: the next
        // serving process recovers it (DESIGN §9).
        let state = if until > crate::support::time::now() {
            "live"
        } else {
            "expired: a serving process will recover the run"
        };
        say!(
            "driver:      {owner}, lease until {} ({state})",
            timestamp(until)
        );
    }
    for event in &events {
        if let EventKind::RunCancelled { by, reason } = &event.kind {
            say!("cancelled by {by}{}", reason_suffix(reason.as_deref()));
        }
    }
    if let Some(record) = &approval {
        say!(
            "approval:    {} ({}, step {})",
            record.key,
            record.status,
            record.step_id
        );
    }
    say!("outputs:\n{}", indent(&render::pretty(&json!(run.outputs))));
    say!("events:");
    for event in &events {
        say!(
            "  {:>4}  {}  {}",
            event.seq,
            timestamp(event.at),
            event.kind.name()
        );
    }
    Ok(exit::OK)
}

async fn cancel(
    run_id: &str,
    source: &SpecSource,
    store_args: &StoreArgs,
    reason: Option<String>,
    by: Option<String>,
    json: bool,
    custom: &CustomTools,
) -> Result<i32, ExitFailure> {
    let spec = source.load()?;
    let store = open_swept(store_args, Some(source)).await?;
    let agent = super::common::agent(spec, store, custom)?;
    let by = super::common::decider(by.as_deref());
    let cancelled = agent.cancel(run_id, &by, reason.clone()).await?;
    if json {
        say!(
            "{}",
            serde_json::to_string(&cancelled.event).unwrap_or_default()
        );
        return Ok(exit::OK);
    }
    say!(
        "run {run_id} cancelled by {by} (it was {}){}",
        cancelled.was,
        reason_suffix(reason.as_deref())
    );
    if let Some(record) = &cancelled.approval {
        say!("approval {} is CANCELLED", record.key);
    }
    if cancelled.was == RunStatus::Running {
        eprintln!(
            "note: the run was running; the step it is in finishes in the process driving it"
        );
    }
    Ok(exit::OK)
}

fn reason_suffix(reason: Option<&str>) -> String {
    reason.map(|r| format!(": {r}")).unwrap_or_default()
}

/// The spec an operator's command acts under, and an agent on the store
/// that already holds the run (nothing is created).
fn operator_agent(
    args: &RunOpArgs,
    embedded: Option<&SpecSource>,
    custom: &CustomTools,
) -> Result<(SpecSource, crate::AgentRun), ExitFailure> {
    let source = SpecSource::resolve(args.spec.as_deref(), embedded)?;
    let spec = source.load()?;
    let store = store_location::open_existing(&args.store, Some(&source))?;
    let agent = super::common::agent(spec, store, custom)?;
    Ok((source, agent))
}

/// Take the run over and drive it here to its next pause or its end.
async fn retry(
    args: RunOpArgs,
    force: bool,
    embedded: Option<&SpecSource>,
    custom: &CustomTools,
) -> Result<i32, ExitFailure> {
    let (source, agent) = operator_agent(&args, embedded, custom)?;
    let mut events = agent.subscribe();
    let by = super::common::decider(args.by.as_deref());
    let owned = agent.claim_retry(&args.run_id, &by, force).await?;
    let outcome = agent.resume_retried(owned).await;
    if args.json {
        render::drain_events(&mut events);
    }
    let outcome = outcome?;
    if !args.json {
        render::outcome(&outcome, &source);
    }
    Ok(exit::for_status(outcome.status))
}

async fn fail(
    args: RunOpArgs,
    reason: &str,
    embedded: Option<&SpecSource>,
    custom: &CustomTools,
) -> Result<i32, ExitFailure> {
    if reason.trim().is_empty() {
        return Err(ExitFailure::bad_input(
            "--reason must say why the run is failed",
        ));
    }
    let (_, agent) = operator_agent(&args, embedded, custom)?;
    let mut events = agent.subscribe();
    let by = super::common::decider(args.by.as_deref());
    let run = agent.fail_stuck(&args.run_id, reason, &by).await?;
    if args.json {
        render::drain_events(&mut events);
    } else {
        say!(
            "run {} failed: {}",
            run.id,
            run.error.as_deref().unwrap_or(reason)
        );
    }
    Ok(exit::OK)
}
