//! `tollgate plan SPEC` (DESIGN §12): before a deploy, what the spec will
//! do to every pending approval and live run on another version of its
//! agent. The report is the engine's ([`crate::deploy_plan`]); this prints
//! it as text or as JSON (`--json`, the shape `GET /specs/plan` answers).
//!
//! Reads only: pointed at a place with no store, it says where it looked
//! and exits 3, creating nothing. `--fail-on stranded` exits 4 after the
//! plan when a pending approval could not be approved after the deploy.

use std::path::PathBuf;

use clap::{Args, ValueEnum};

use super::args::StoreArgs;
use super::common::SpecSource;
use super::exit::{self, ExitFailure};
use super::render::{self, timestamp};
use crate::domain::spec::SpecDiff;
use crate::domain::spec::SpecHash;
use crate::engine::deploy_plan::{DeployPlan, LiveRunOutcome, VersionPlan, plan_deploy};

#[derive(Debug, Args)]
pub struct PlanArgs {
    /// The spec about to be deployed (YAML). Its `on_spec_change` policies
    /// decide each outcome.
    pub spec: PathBuf,
    // Default: the spec's default state file, or an exported server's own.
    #[command(flatten)]
    pub store: StoreArgs,
    /// Print the plan as JSON (the shape `GET /specs/plan` answers).
    #[arg(long)]
    pub json: bool,
    /// Exit 4 (after printing the plan) when any pending approval is
    /// stranded: refused (approve would answer 409 `spec_changed`), or
    /// pinned to a version this build cannot load.
    #[arg(long, value_name = "WHAT")]
    pub fail_on: Option<FailOn>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum FailOn {
    Stranded,
}

/// `embedded` is an exported server's own spec: its store is the default
/// (the spec planned is still SPEC).
pub async fn run(args: PlanArgs, embedded: Option<&SpecSource>) -> Result<i32, ExitFailure> {
    let source = SpecSource::File(args.spec.clone());
    let spec = source.load()?;
    let store =
        super::store_location::open_existing(&args.store, Some(embedded.unwrap_or(&source)))?;
    let plan = plan_deploy(&*store, &spec, crate::support::time::now()).await?;
    if args.json {
        say!("{}", render::pretty(&serde_json::json!(plan)));
    } else {
        print_plan(&plan, &store.describe(), &args.spec.display().to_string());
    }
    let stranded = plan.summary.stranded;
    if args.fail_on == Some(FailOn::Stranded) && stranded > 0 {
        return Err(ExitFailure::new(
            exit::CONFLICT,
            format!(
                "stranded: {stranded} pending approval{} could not be approved after this deploy (--fail-on stranded)",
                plural(stranded)
            ),
        ));
    }
    Ok(exit::OK)
}

fn print_plan(plan: &DeployPlan, store: &str, spec: &str) {
    say!(
        "plan: deploying {} {} (approvals.on_spec_change: {}) against {store}",
        plan.agent,
        SpecHash::short_of(&plan.spec_hash),
        plan.policy
    );
    if plan.stored_versions == 0 {
        say!(
            "nothing of agent {} is stored there: no pending approvals or runs to plan for",
            plan.agent
        );
        return;
    }
    if plan.versions.is_empty() {
        say!(
            "no pending approval or live run of {} is on another version",
            plan.agent
        );
    }
    for version in &plan.versions {
        print_version(version);
    }
    if !plan.approvals.is_empty() {
        say!("");
        say!("pending approvals on other versions:");
        let row = |c: [&str; 7]| {
            format!(
                "  {:<36}  {:<12}  {:<20}  {:<16}  {:<7}  {:<18}  {}",
                c[0], c[1], c[2], c[3], c[4], c[5], c[6]
            )
        };
        say!(
            "{}",
            row([
                "KEY",
                "VERSION",
                "STEP (PHASE)",
                "CLASSIFICATION",
                "POLICY",
                "OUTCOME",
                "RUN"
            ])
        );
        for a in &plan.approvals {
            let step = match &a.new_step {
                Some(to) if *to != a.step => format!("{} ({}) -> {to}", a.step, a.phase),
                _ => format!("{} ({})", a.step, a.phase),
            };
            let outcome = if a.stranded {
                format!("{} (stranded)", a.outcome)
            } else {
                a.outcome.to_string()
            };
            say!(
                "{}",
                row([
                    &a.key,
                    SpecHash::short_of(&a.spec_hash),
                    &step,
                    a.classification.map_or("unknown", |c| c.as_str()),
                    a.policy.as_str(),
                    &outcome,
                    &a.run_id,
                ])
            );
        }
    }
    let live = &plan.live_runs;
    if live.running + live.stuck > 0 {
        say!("");
        let what = match live.outcome {
            LiveRunOutcome::EndsStuck => {
                "under refuse, a process serving this spec that recovers or retries one ends it stuck (serve its version again to finish it)"
            }
            LiveRunOutcome::ContinuesOnItsVersion => {
                "under pin/auto, each goes on under the version it started on"
            }
        };
        say!(
            "live runs on other versions: {} running, {} stuck: {what}",
            live.running,
            live.stuck
        );
    }
    let s = &plan.summary;
    say!("");
    let mut line = format!(
        "{} pending approval{}: {} current, {} pinned, {} moving to the new version, {} refused (stranded)",
        s.pending,
        plural(s.pending),
        s.current,
        s.pinned,
        s.moves_to_new,
        s.refused
    );
    let pinned_stranded = s.stranded - s.refused.min(s.stranded);
    if pinned_stranded > 0 {
        line.push_str(&format!(
            "; {pinned_stranded} pinned to a version this build cannot load (stranded)"
        ));
    }
    say!("{line}");
    if s.refused > 0 {
        say!(
            "to keep the refused ones decidable: when you deploy, move them onto {spec} with \
             `tollgate approvals migrate --to {spec} --all` (each shown under its new gate; \
             --dry-run lists what would move), or set `on_spec_change: auto` under `approvals:` \
             in {spec} (each resumes on the version it paused under, and one whose gate is \
             unchanged moves to the new version) or `pin`"
        );
    }
}

fn print_version(v: &VersionPlan) {
    say!("");
    let seen = match (v.first_seen, v.last_seen) {
        (Some(first), Some(last)) => {
            format!(
                "first seen {}, last seen {}",
                timestamp(first),
                timestamp(last)
            )
        }
        _ => "not stored".to_string(),
    };
    say!(
        "version {}  {seen}  pending {}, running {}, stuck {}",
        SpecHash::short_of(&v.hash),
        v.pending_approvals,
        v.running_runs,
        v.stuck_runs
    );
    if let Some(problem) = &v.problem {
        say!("  cannot compare: {problem}");
    }
    if let Some(diff) = &v.diff {
        print_diff(diff);
    }
    if !v.required_env.is_empty() {
        say!(
            "  runs on after the deploy; keep these set: {}",
            v.required_env.join(", ")
        );
    }
}

fn print_diff(d: &SpecDiff) {
    if d.is_empty() {
        say!("  no step or section differs (formatting only)");
    }
    for s in &d.added {
        say!("  added:    {} ({}, step {})", s.id, s.kind, s.number);
    }
    for s in &d.removed {
        say!("  removed:  {} ({}, step {})", s.id, s.kind, s.number);
    }
    for r in &d.renamed {
        say!(
            "  renamed?: {} -> {} ({}; a pause at {} counts as removed unless migrated with --map {}={})",
            r.from,
            r.to,
            r.kind,
            r.from,
            r.from,
            r.to
        );
    }
    for c in &d.changed {
        let changes: Vec<&str> = c.changes.iter().map(|c| c.as_str()).collect();
        let kind = match &c.old_kind {
            Some(old) => format!("{old} -> {}", c.kind),
            None => c.kind.clone(),
        };
        say!("  changed:  {} ({kind}): {}", c.id, changes.join(", "));
    }
    if !d.top_level.is_empty() {
        let sections: Vec<&str> = d.top_level.iter().map(|t| t.as_str()).collect();
        say!("  sections: {}", sections.join(", "));
    }
}

fn plural(n: u64) -> &'static str {
    if n == 1 { "" } else { "s" }
}
