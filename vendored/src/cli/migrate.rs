//! `tollgate approvals migrate`: move pending approvals made under older
//! spec versions onto the spec given (the engine's `AgentRun::migrate`),
//! printing each key's result. Without `--dry-run` it shows what would
//! move first and asks (or needs `--yes` when nobody can be asked).

use std::collections::BTreeMap;
use std::io::IsTerminal;

use super::args::MigrateArgs;
use super::common::SpecSource;
use super::exit::{self, ExitFailure};
use crate::engine::tools::CustomTools;
use crate::support::time::SharedClock;
use crate::{MigrateOutcome, MigrateReport, MigrateRequest, MigrateResult, MigrateSelection};

pub async fn run(
    args: MigrateArgs,
    embedded: Option<&SpecSource>,
    custom: &CustomTools,
    clock: &SharedClock,
) -> Result<i32, ExitFailure> {
    let source = SpecSource::resolve(args.to.as_deref(), embedded)
        .map_err(|_| ExitFailure::bad_input("--to SPEC is required"))?;
    let spec = source.load()?;
    let selection = selection(&args)?;
    let map = mapping(&args.map)?;
    let store = super::store_location::open_existing(&args.store, Some(&source))?;
    store.expire_due(clock.now()).await?;
    // Moving approvals runs no step: the spec's `rust:` tools need not be
    // registered here (tollgate registers none), as `plan` does not need them.
    let agent = super::common::records_agent(spec, store, custom)?.with_clock(clock.clone());
    let selection = match selection {
        MigrateSelection::From(prefix) => MigrateSelection::From(
            agent
                .resolve_from(&prefix)
                .await?
                .map_err(|why| ExitFailure::bad_input(format!("--from {prefix}: {why}")))?,
        ),
        other => other,
    };
    let mut request = MigrateRequest {
        selection,
        map,
        by: super::common::decider(args.by.as_deref()),
        dry_run: true,
    };
    let preview = agent.migrate(&request).await?;
    if args.dry_run || preview.count(MigrateOutcome::WouldMove) == 0 {
        print(&preview, args.json);
        return Ok(status(&preview));
    }
    if !args.yes {
        if !std::io::stdin().is_terminal() {
            print(&preview, args.json);
            return Err(ExitFailure::bad_input(
                "nothing was moved: pass --yes to move them (stdin is not a terminal to ask)",
            ));
        }
        print(&preview, false);
        if !confirmed(preview.count(MigrateOutcome::WouldMove), &preview.to)? {
            eprintln!("nothing was moved");
            return Ok(exit::OK);
        }
    }
    request.dry_run = false;
    let report = agent.migrate(&request).await?;
    print(&report, args.json);
    Ok(status(&report))
}

/// 0 when every selected approval moved (or would, or already was on the
/// version); 4 (conflict) when one did not fit and stayed as it was.
fn status(report: &MigrateReport) -> i32 {
    if report.count(MigrateOutcome::Refused) > 0 {
        exit::CONFLICT
    } else {
        exit::OK
    }
}

fn selection(args: &MigrateArgs) -> Result<MigrateSelection, ExitFailure> {
    Ok(match (&args.key, args.all, &args.step, &args.from) {
        (Some(key), false, None, None) => MigrateSelection::Key(key.clone()),
        (None, true, None, None) => MigrateSelection::All,
        (None, false, Some(step), None) => MigrateSelection::Step(step.clone()),
        (None, false, None, Some(from)) => {
            MigrateSelection::From(crate::check_from_prefix(from).map_err(ExitFailure::bad_input)?)
        }
        _ => {
            return Err(ExitFailure::bad_input(
                "give exactly one of --key KEY, --all, --step STEP_ID, --from HASH",
            ));
        }
    })
}

fn mapping(pairs: &[(String, String)]) -> Result<BTreeMap<String, String>, ExitFailure> {
    let mut map = BTreeMap::new();
    for (old, new) in pairs {
        if let Some(earlier) = map.insert(old.clone(), new.clone()) {
            return Err(ExitFailure::bad_input(format!(
                "--map {old}=... is given twice ({earlier} and {new})"
            )));
        }
    }
    Ok(map)
}

fn confirmed(count: usize, to: &str) -> Result<bool, ExitFailure> {
    super::common::ask_yes(&format!(
        "Move {count} approval(s) onto spec {}?",
        crate::SpecHash::short_of(to)
    ))
}

fn print(report: &MigrateReport, json: bool) {
    if json {
        say!(
            "{}",
            serde_json::to_string_pretty(report)
                .unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"))
        );
        return;
    }
    let to = crate::SpecHash::short_of(&report.to);
    if report.results.is_empty() {
        say!("no pending approval to move onto spec {to}");
        return;
    }
    for result in &report.results {
        say!("{}", line(result));
        if let Some(reason) = &result.reason {
            say!("    why: {reason}");
        }
        if let Some(after) = &result.message_after
            && result.message_before.as_ref() != Some(after)
        {
            say!(
                "    message: {:?} -> {:?}",
                result.message_before.as_deref().unwrap_or(""),
                after
            );
        }
        if let Some(after) = &result.payload_after
            && after != &result.payload_before
        {
            say!("    payload: {} -> {}", result.payload_before, after);
        }
    }
    let done = if report.dry_run {
        format!("{} would move", report.count(MigrateOutcome::WouldMove))
    } else {
        format!("{} moved", report.count(MigrateOutcome::Moved))
    };
    say!(
        "{done}, {} refused, {} already current (onto spec {to}{})",
        report.count(MigrateOutcome::Refused),
        report.count(MigrateOutcome::Current),
        if report.dry_run {
            "; dry run: nothing changed"
        } else {
            ""
        }
    );
}

fn line(r: &MigrateResult) -> String {
    let to_step = match &r.to_step {
        Some(step) if step != &r.step => format!(" -> {step}"),
        _ => String::new(),
    };
    let class = r.classification.map_or("-", |c| c.as_str());
    format!(
        "{}  {}  {}{to_step} ({})  {}  {}",
        r.key,
        crate::SpecHash::short_of(&r.from),
        r.step,
        r.phase,
        class,
        r.outcome
    )
}
