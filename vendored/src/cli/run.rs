//! `tollgate run`: one run of a spec, interactive or persisted.

use std::io::{BufRead, Write};
use std::sync::Arc;

use serde_json::{Value, json};

use super::args::RunArgs;
use super::common::SpecSource;
use super::exit::{self, ExitFailure};
use super::render;
use crate::engine::tools::CustomTools;
use crate::store::{MemoryStore, SharedStore};
use crate::{ApprovalRecord, Decision, RunOutcome, RunStatus};

pub async fn run(args: RunArgs, custom: &CustomTools) -> Result<i32, ExitFailure> {
    let source = SpecSource::File(args.spec.clone());
    let spec = source.load()?;
    if args.persist {
        super::preflight::require_env_to_run(
            &spec,
            &format!("cannot run {} with --persist", spec.agent),
        )?;
    }
    let store: SharedStore = if args.persist {
        super::store_location::open(&args.store, Some(&source))?
    } else {
        Arc::new(MemoryStore::new())
    };
    let agent = super::common::agent(spec, store, custom)?;
    if args.persist {
        agent.sweep_expired().await?;
    }
    let mut events = agent.subscribe();
    let trigger = json!({ "kind": "cli", "received_at": crate::support::time::format_utc(agent.clock().now()) });
    // Persisted, the run is stored (and leased to this process) before its
    // first step, as `serve` does: should this process die mid-step, a
    // serving process recovers it. In memory there is nothing to recover.
    let mut outcome = if args.persist {
        let created = agent.create(args.input, trigger).await?;
        agent.drive_created(created).await?
    } else {
        agent.start(args.input, trigger).await?
    };
    if args.json {
        render::drain_events(&mut events);
    }
    if !args.persist {
        let decided_by = super::common::decider(args.by.as_deref());
        while let Some(record) = outcome.pending.clone() {
            let decision = prompt(&record)?;
            outcome = agent
                .resume_by_key(&record.key, decision, &decided_by)
                .await?;
            if args.json {
                render::drain_events(&mut events);
            }
        }
    }
    finish(&outcome, &source, args.json)
}

fn finish(outcome: &RunOutcome, source: &SpecSource, json: bool) -> Result<i32, ExitFailure> {
    if !json {
        render::outcome(outcome, source);
    } else if outcome.status == RunStatus::Failed {
        eprintln!(
            "error: run {} failed: {}",
            outcome.run_id,
            outcome.error.as_deref().unwrap_or("unknown error")
        );
    }
    Ok(exit::for_status(outcome.status))
}

/// Ask on stdin: approve, reject or edit. Never decides on its own: a closed
/// stdin is an error, since without --persist the pause would be lost.
fn prompt(record: &ApprovalRecord) -> Result<Decision, ExitFailure> {
    let stderr = std::io::stderr();
    let mut err = stderr.lock();
    let _ = writeln!(
        err,
        "\nstep {} needs approval ({}): {}",
        record.step_id,
        record.phase.as_str(),
        record.message.as_deref().unwrap_or("")
    );
    if !record.payload.is_null() {
        let _ = writeln!(err, "payload:\n{}", render::pretty(&record.payload));
    }
    loop {
        let answer = ask(&mut err, "approve? [y]es / [n]o / [e]dit payload: ")?;
        match answer.trim().to_ascii_lowercase().as_str() {
            "y" | "yes" => return Ok(Decision::Approve { reason: None }),
            "n" | "no" => {
                let reason = ask(&mut err, "reason (optional): ")?;
                let reason = Some(reason.trim().to_string()).filter(|r| !r.is_empty());
                return Ok(Decision::Reject { reason });
            }
            "e" | "edit" => {
                if let Some(payload) = ask_payload(&mut err)? {
                    return Ok(Decision::Modify {
                        payload,
                        reason: None,
                    });
                }
            }
            _ => {
                let _ = writeln!(err, "please answer y, n or e");
            }
        }
    }
}

/// Ask for the edited payload until it is valid JSON: after a typo the
/// person retypes the JSON, not the y/n/e answer. An empty line goes back
/// to the question (`None`).
fn ask_payload(err: &mut impl Write) -> Result<Option<Value>, ExitFailure> {
    loop {
        let text = ask(err, "new payload (JSON, one line; empty to go back): ")?;
        let text = text.trim();
        if text.is_empty() {
            return Ok(None);
        }
        if let Err(e) = super::common::check_depth(text) {
            let _ = writeln!(err, "the payload {e}; type it again");
            continue;
        }
        match serde_json::from_str::<Value>(text) {
            Ok(payload) => return Ok(Some(payload)),
            Err(e) => {
                let _ = writeln!(err, "not valid JSON ({e}); type it again");
            }
        }
    }
}

fn ask(err: &mut impl Write, question: &str) -> Result<String, ExitFailure> {
    let _ = write!(err, "{question}");
    let _ = err.flush();
    let mut line = String::new();
    let read = std::io::stdin()
        .lock()
        .read_line(&mut line)
        .map_err(|e| ExitFailure::new(exit::RUN_FAILED, format!("cannot read stdin: {e}")))?;
    if read == 0 {
        return Err(ExitFailure::new(
            exit::RUN_FAILED,
            "stdin closed before a decision; the pause was not kept (use --persist to keep it)",
        ));
    }
    Ok(line)
}
