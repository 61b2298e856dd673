//! `tollgate specs list|show` (DESIGN §12): the spec versions runs started
//! under, as the store keeps them, with what still uses each one.
//!
//! Both only read: pointed at a place with no store they say where they
//! looked and exit 3, creating nothing. The current spec (`--spec`, or an
//! exported server's own) is marked.

use std::path::PathBuf;

use clap::Subcommand;
use serde_json::json;

use super::args::StoreArgs;
use super::common::SpecSource;
use super::exit::{self, ExitFailure};
use super::render::{self, timestamp};
use crate::domain::spec::SpecHash;
use crate::domain::spec_version::SpecVersionUse;

#[derive(Debug, Subcommand)]
pub enum SpecsCommand {
    /// List the stored spec versions, newest first, with their pending
    /// approvals and their runs that are not over (running, waiting or
    /// stuck). The current spec is marked `*`.
    List {
        /// The current spec: marked in the list; its agent's versions only
        /// (unless --agent), from its default state file.
        #[arg(long)]
        spec: Option<PathBuf>,
        /// Only this agent's versions.
        #[arg(long, value_name = "AGENT")]
        agent: Option<String>,
        #[command(flatten)]
        store: StoreArgs,
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Show one stored spec version by its hash (or a prefix of it that
    /// only one version has).
    Show {
        /// The version's spec hash: its 64 hex digits, or a prefix of them
        /// that only one stored version has.
        hash: String,
        /// The current spec (says whether this version is it; its default
        /// state file is used).
        #[arg(long)]
        spec: Option<PathBuf>,
        #[command(flatten)]
        store: StoreArgs,
        /// Print JSON (with the canonical document and the source).
        #[arg(long, conflicts_with = "source")]
        json: bool,
        /// Print the version's YAML source as it was written, and nothing
        /// else (secrets are `${NAME}` references in it, never values).
        #[arg(long)]
        source: bool,
    },
}

pub async fn run(command: SpecsCommand, embedded: Option<&SpecSource>) -> Result<i32, ExitFailure> {
    match command {
        SpecsCommand::List {
            spec,
            agent,
            store,
            json,
        } => {
            let source = spec.map(SpecSource::File);
            list(source.as_ref().or(embedded), agent, &store, json).await
        }
        SpecsCommand::Show {
            hash,
            spec,
            store,
            json,
            source,
        } => {
            let spec_source = spec.map(SpecSource::File);
            let output = if source {
                Output::Source
            } else if json {
                Output::Json
            } else {
                Output::Text
            };
            show(&hash, spec_source.as_ref().or(embedded), &store, output).await
        }
    }
}

/// The current spec's agent and hash, when there is one.
fn current(spec: Option<&SpecSource>) -> Result<Option<(String, String)>, ExitFailure> {
    Ok(match spec {
        Some(source) => {
            let spec = source.load()?;
            Some((spec.agent.clone(), spec.hash.to_string()))
        }
        None => None,
    })
}

async fn list(
    spec: Option<&SpecSource>,
    agent: Option<String>,
    store_args: &StoreArgs,
    json: bool,
) -> Result<i32, ExitFailure> {
    let current = current(spec)?;
    let agent = agent.or_else(|| current.as_ref().map(|(agent, _)| agent.clone()));
    let store = super::store_location::open_existing(store_args, spec)?;
    let versions = store
        .list_spec_versions(agent.as_deref(), crate::support::time::now())
        .await?;
    let is_current = |v: &SpecVersionUse| current.as_ref().is_some_and(|(_, h)| *h == v.hash);
    if json {
        let rows: Vec<_> = versions
            .iter()
            .map(|v| {
                let mut row = json!(v);
                row["current"] = json!(is_current(v));
                row
            })
            .collect();
        say!("{}", render::pretty(&json!({ "versions": rows })));
        return Ok(exit::OK);
    }
    if versions.is_empty() {
        say!("no spec versions stored");
        return Ok(exit::OK);
    }
    let row = |c: [&str; 7]| {
        format!(
            "{:<1} {:<12}  {:<20}  {:<20}  {:<20}  {:>7}  {:>7}",
            c[0], c[1], c[2], c[3], c[4], c[5], c[6]
        )
    };
    say!(
        "{}",
        row([
            "",
            "HASH",
            "AGENT",
            "FIRST SEEN",
            "LAST SEEN",
            "PENDING",
            "RUNNING"
        ])
        .trim_end()
    );
    for v in &versions {
        let mark = if is_current(v) { "*" } else { "" };
        say!(
            "{}",
            row([
                mark,
                SpecHash::short_of(&v.hash),
                &v.agent_id,
                &timestamp(v.first_seen),
                &timestamp(v.last_seen),
                &v.pending_approvals.to_string(),
                &v.live_runs.to_string(),
            ])
        );
    }
    if let Some((_, hash)) = &current {
        if !versions.iter().any(|v| v.hash == *hash) {
            say!(
                "(the current spec, {}, is not stored yet: it is when it first runs or is served)",
                SpecHash::short_of(hash)
            );
        }
    }
    Ok(exit::OK)
}

enum Output {
    Text,
    Json,
    Source,
}

async fn show(
    wanted: &str,
    spec: Option<&SpecSource>,
    store_args: &StoreArgs,
    output: Output,
) -> Result<i32, ExitFailure> {
    let wanted = wanted.trim().to_ascii_lowercase();
    if wanted.is_empty() || !wanted.bytes().all(|b| b.is_ascii_hexdigit()) || wanted.len() > 64 {
        return Err(ExitFailure::bad_input(format!(
            "{wanted:?} is not a spec hash: give its 64 hex digits, or a prefix of them"
        )));
    }
    let current = current(spec)?;
    let store = super::store_location::open_existing(store_args, spec)?;
    // Every version, to resolve a prefix and to count what uses it: a
    // store holds one row per deployed spec, so this stays small.
    let listed = store
        .list_spec_versions(None, crate::support::time::now())
        .await?;
    let matches: Vec<&SpecVersionUse> = listed
        .iter()
        .filter(|v| v.hash.starts_with(&wanted))
        .collect();
    let usage = match matches.as_slice() {
        [one] => *one,
        [] => {
            return Err(ExitFailure::new(
                exit::NOT_FOUND,
                format!("spec_not_found: no stored spec version has the hash {wanted}"),
            ));
        }
        many => {
            let hashes: Vec<&str> = many.iter().map(|v| SpecHash::short_of(&v.hash)).collect();
            return Err(ExitFailure::bad_input(format!(
                "{wanted} is the start of {} stored hashes ({}): give more digits",
                many.len(),
                hashes.join(", ")
            )));
        }
    };
    let version = store.get_spec_version(&usage.hash).await?.ok_or_else(|| {
        ExitFailure::new(
            exit::NOT_FOUND,
            format!("spec_not_found: spec version {} is gone", usage.hash),
        )
    })?;
    let is_current = current.as_ref().is_some_and(|(_, h)| *h == version.hash);
    match output {
        Output::Source => {
            // As written, byte for byte (its own final newline or none).
            use std::io::Write as _;
            let _ = std::io::stdout()
                .lock()
                .write_all(version.source.as_bytes());
        }
        Output::Json => {
            let canonical: serde_json::Value = serde_json::from_str(&version.canonical)
                .unwrap_or_else(|_| json!(version.canonical));
            say!(
                "{}",
                render::pretty(&json!({
                    "hash": version.hash,
                    "agent_id": version.agent_id,
                    "first_seen": version.first_seen,
                    "last_seen": version.last_seen,
                    "pending_approvals": usage.pending_approvals,
                    "live_runs": usage.live_runs,
                    "current": is_current,
                    "document": canonical,
                    "source": version.source,
                }))
            );
        }
        Output::Text => {
            say!("hash:        {}", version.hash);
            say!("agent:       {}", version.agent_id);
            say!("first seen:  {}", timestamp(version.first_seen));
            say!("last seen:   {}", timestamp(version.last_seen));
            say!("pending:     {}", usage.pending_approvals);
            say!("running:     {}", usage.live_runs);
            say!("current:     {}", if is_current { "yes" } else { "no" });
            say!(
                "source:      {} lines (--source prints it)",
                version.source.lines().count()
            );
        }
    }
    Ok(exit::OK)
}
