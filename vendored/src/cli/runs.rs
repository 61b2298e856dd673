//! `runs retry` and `runs fail`: an operator's way out for a run that
//! stopped between pauses (DESIGN §6, §9).

use super::args::{RunOpArgs, RunsCommand};
use super::common::SpecSource;
use super::exit::{self, Failure};
use super::render;
use super::store_location;
use crate::tools::CustomTools;

pub async fn run(
    command: RunsCommand,
    embedded: Option<&SpecSource>,
    custom: &CustomTools,
) -> Result<i32, Failure> {
    match command {
        RunsCommand::Retry(args) => retry(args, embedded, custom).await,
        RunsCommand::Fail { run, reason } => fail(run, &reason, embedded, custom).await,
    }
}

/// Take the run over and drive it here to its next pause or its end.
async fn retry(
    args: RunOpArgs,
    embedded: Option<&SpecSource>,
    custom: &CustomTools,
) -> Result<i32, Failure> {
    let source = SpecSource::resolve(args.spec.as_deref(), embedded)?;
    let spec = source.load()?;
    let store = store_location::open_existing(&args.store, Some(&source))?;
    let agent = super::common::agent(spec, store, custom)?;
    let mut events = agent.subscribe();
    let by = super::common::decider(args.by.as_deref());
    let run = agent.claim_retry(&args.run_id, &by).await?;
    let outcome = agent.resume_retried(run).await;
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
) -> Result<i32, Failure> {
    if reason.trim().is_empty() {
        return Err(Failure::bad_input(
            "--reason must say why the run is failed",
        ));
    }
    let source = SpecSource::resolve(args.spec.as_deref(), embedded)?;
    let spec = source.load()?;
    let store = store_location::open_existing(&args.store, Some(&source))?;
    let agent = super::common::agent(spec, store, custom)?;
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
