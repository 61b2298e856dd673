//! `tollgate approvals approve|reject --all [--step S] [--query Q] [--yes]`:
//! decide every pending approval of the spec's agent that the filters
//! select (DESIGN §13). It shows them first and asks (or needs `--yes` when
//! nobody can be asked); each is then decided on its own, checked against
//! the payload digest the table showed, so an approval edited in between
//! is refused rather than decided unseen. The runs resume here, as after
//! `approvals approve KEY`.

use std::io::IsTerminal;

use futures_util::stream::{self, StreamExt};

use super::approvals::{ListFilters, open_swept, pending_page};
use super::args::DecideArgs;
use super::common::SpecSource;
use super::exit::{self, ExitFailure};
use super::render;
use crate::domain::policy::Channel;
use crate::engine::run::{AgentRun, Ballot, DecisionOutcome};
use crate::engine::tools::CustomTools;
use crate::service::batch::{BatchResult, BatchResults, CONCURRENT_DECISIONS};
use crate::store::{PendingQuery, SharedStore};
use crate::support::time::SharedClock;
use crate::{ApprovalRecord, Decision};

/// What `--all` decides on every selected approval.
#[derive(Debug, Clone)]
pub enum Verdict {
    /// With the same approver's input for each (`--input`), checked
    /// against each gate's own form.
    Approve {
        input: Option<serde_json::Value>,
    },
    Reject,
}

impl Verdict {
    fn decision(&self, reason: Option<String>) -> Decision {
        match self {
            Verdict::Approve { .. } => Decision::Approve { reason },
            Verdict::Reject => Decision::Reject { reason },
        }
    }

    fn input(&self) -> Option<serde_json::Value> {
        match self {
            Verdict::Approve { input } => input.clone(),
            Verdict::Reject => None,
        }
    }

    fn verb(&self) -> &'static str {
        match self {
            Verdict::Approve { .. } => "approve",
            Verdict::Reject => "reject",
        }
    }
}

/// One selected approval's result, and how its run stands after it.
struct BatchLine {
    result: BatchResult,
    /// The run's status once it resumed here, or why it could not.
    run: Option<String>,
}

pub async fn run(
    args: DecideArgs,
    verdict: Verdict,
    embedded: Option<&SpecSource>,
    custom: &CustomTools,
    clock: &SharedClock,
) -> Result<i32, ExitFailure> {
    let source = SpecSource::resolve(args.spec.as_deref(), embedded)?;
    let spec = source.load()?;
    let store = open_swept(&args.store, Some(&source), clock).await?;
    let filters = ListFilters {
        // Empty values filter nothing, as for `approvals list`.
        step_id: args.step.clone().filter(|s| !s.is_empty()),
        text: args.query.clone().filter(|q| !q.is_empty()),
        spec: None,
    };
    let selected = select(&store, &spec.agent, &filters, clock).await?;
    if selected.is_empty() {
        if args.json {
            say!("{}", render::pretty(&serde_json::json!({ "results": [] })));
        } else {
            say!("no pending approvals to {}", verdict.verb());
        }
        return Ok(exit::OK);
    }
    let ask = !args.yes && std::io::stdin().is_terminal();
    // The table is for a person; `--json` keeps stdout to the results
    // unless someone is asked at the terminal.
    if !args.json || ask {
        render::batch_table(&selected);
        say!("{} approval(s) selected", selected.len());
    }
    if !args.yes {
        if !ask {
            return Err(ExitFailure::bad_input(format!(
                "nothing was decided: pass --yes to {} these {} approval(s) (stdin is not a terminal to ask)",
                verdict.verb(),
                selected.len()
            )));
        }
        if !confirmed(&verdict, selected.len())? {
            eprintln!("nothing was decided");
            return Ok(exit::OK);
        }
    }
    let agent = super::common::agent(spec, store, custom)?.with_clock(clock.clone());
    let by = super::common::decider(args.by.as_deref());
    let decided: Vec<BatchLine> = stream::iter(selected)
        .map(|record| {
            let ballot = Ballot::new(verdict.decision(args.reason.clone()), &by, Channel::Cli)
                .shown(Some(record.payload_digest()))
                .with_input(verdict.input());
            decide(&agent, record.key, ballot)
        })
        .buffered(CONCURRENT_DECISIONS)
        .collect()
        .await;
    let refused = decided.iter().any(|d| d.result.is_refused());
    if args.json {
        let results = BatchResults {
            results: decided.into_iter().map(|d| d.result).collect(),
        };
        say!("{}", render::pretty(&serde_json::json!(results)));
    } else {
        for d in &decided {
            say!("{}", line(d));
        }
    }
    // As `approvals migrate`: 4 (conflict) when one was refused.
    Ok(if refused { exit::CONFLICT } else { exit::OK })
}

/// Every pending approval of `agent_id` the filters select, page by page,
/// newest first (as `approvals list` shows them).
async fn select(
    store: &SharedStore,
    agent_id: &str,
    filters: &ListFilters,
    clock: &SharedClock,
) -> Result<Vec<ApprovalRecord>, ExitFailure> {
    let mut selected = Vec::new();
    let mut cursor = None;
    loop {
        let query = PendingQuery {
            agent_id: Some(agent_id.to_string()),
            now: clock.now(),
            limit: 500,
            cursor: cursor.take(),
        };
        let page = pending_page(store, query, filters, None).await?;
        for row in &page.unreadable {
            eprintln!(
                "note: skipped approval {} (its stored record is unreadable: {})",
                row.key, row.error
            );
        }
        selected.extend(page.approvals);
        match page.next_cursor {
            Some(next) => cursor = Some(next),
            None => return Ok(selected),
        }
    }
}

/// Claim one decision and resume its run here; a refusal is this key's
/// result only.
async fn decide(agent: &AgentRun, key: String, ballot: Ballot) -> BatchLine {
    let outcome = match agent.vote(&key, ballot).await {
        Ok(outcome) => outcome,
        Err(e) => {
            return BatchLine {
                result: BatchResult::refused_here(key, e),
                run: None,
            };
        }
    };
    let result = BatchResult::decided(&outcome);
    let run = match outcome {
        // A vote that left its gate open: the run waits for more.
        DecisionOutcome::Voted(_) | DecisionOutcome::VoteRepeated(_) => None,
        // The decision is made whatever the resume does; a run that fails
        // after it is the run's outcome, not a refused decision. A repeat
        // drives nothing: it says how the run stands.
        DecisionOutcome::Resumes(_)
        | DecisionOutcome::Finished { .. }
        | DecisionOutcome::Repeated(_) => Some(match agent.resume_claimed(outcome).await {
            Ok(run) => format!("run {} {}", run.run_id, run.status),
            Err(e) => format!("the run did not resume here: {e}"),
        }),
    };
    BatchLine { result, run }
}

fn line(d: &BatchLine) -> String {
    let r = &d.result;
    if let Some(error) = &r.error {
        return format!("{}  refused  {}: {}", r.key, error.code, error.message);
    }
    let mut line = format!("{}  {}", r.key, r.status);
    if r.repeated {
        line.push_str(" (repeated: already decided so by you)");
    }
    if let Some(progress) = &r.progress {
        line.push_str(&format!(
            "  vote recorded; the gate waits for more: {progress}"
        ));
    }
    if let Some(run) = &d.run {
        line.push_str(&format!("  {run}"));
    }
    line
}

fn confirmed(verdict: &Verdict, count: usize) -> Result<bool, ExitFailure> {
    let verb = match verdict {
        Verdict::Approve { .. } => "Approve",
        Verdict::Reject => "Reject",
    };
    super::common::ask_yes(&format!("{verb} {count} approvals?"))
}
