//! `tollgate approvals list|show|approve|reject` (and `migrate`, in
//! `migrate.rs`; `approve|reject --all`, in `batch.rs`).

use serde_json::{Value, json};

use super::args::{ApprovalsCommand, DecideArgs, StoreArgs};
use super::batch::Verdict;
use super::common::SpecSource;
use super::exit::{self, ExitFailure};
use super::render;
use crate::domain::links::{
    Deciders, LINK_SECRET_ENV, LinkSigner, UNBOUND_LINKS_ENV, is_decider_of, may_decide_record,
};
use crate::domain::policy::Channel;
use crate::engine::run::{AgentRun, Ballot, DecisionOutcome};
use crate::engine::tools::CustomTools;
use crate::service::votes::{ListedLedgers, VotesView};
use crate::store::{
    ApprovalQuery, PendingPage, PendingQuery, SharedStore, SpecFilter, SpecFilterError,
    SpecSelector,
};
use crate::support::time::SharedClock;
use crate::{ApprovalRecord, ApprovalStatus, Decision};

/// Run an `approvals` subcommand. `embedded` is the spec built into an
/// exported server (tollgate has none and requires `--spec`).
pub async fn run(
    command: ApprovalsCommand,
    embedded: Option<&SpecSource>,
    custom: &CustomTools,
) -> Result<i32, ExitFailure> {
    // A process of its own reads the system clock; what it decides by
    // (expiry, "as of now") is read from this one value.
    let clock = crate::support::time::system();
    match command {
        ApprovalsCommand::List {
            spec,
            store,
            json,
            stuck,
            limit,
            step,
            query,
            spec_version,
            quiet,
        } => {
            let source = spec.as_deref().map(|p| SpecSource::File(p.to_path_buf()));
            let filters = ListFilters {
                // Empty values filter nothing, as absent ones.
                step_id: step.filter(|s| !s.is_empty()),
                text: query.filter(|q| !q.is_empty()),
                spec: spec_version
                    .filter(|s| !s.is_empty())
                    .map(|s| SpecSelector::parse(&s))
                    .transpose()
                    .map_err(|e| ExitFailure::bad_input(format!("--spec-version: {e}")))?,
            };
            list(
                source.as_ref().or(embedded),
                &store,
                Listing::from_flags(json, quiet),
                stuck,
                limit,
                &filters,
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
        ApprovalsCommand::Votes {
            key,
            spec,
            store,
            json,
        } => {
            let source = spec.as_deref().map(|p| SpecSource::File(p.to_path_buf()));
            votes(&key, source.as_ref().or(embedded), &store, json, &clock).await
        }
        ApprovalsCommand::Approve(args) if args.decide.all => {
            super::batch::run(
                args.decide,
                Verdict::Approve { input: args.input },
                embedded,
                custom,
                &clock,
            )
            .await
        }
        ApprovalsCommand::Reject(args) if args.all => {
            super::batch::run(args, Verdict::Reject, embedded, custom, &clock).await
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
            let input = args.input;
            decide(args.decide, decision, input, embedded, custom, &clock).await
        }
        ApprovalsCommand::Reject(args) => {
            let decision = Decision::Reject {
                reason: args.reason.clone(),
            };
            decide(args, decision, None, embedded, custom, &clock).await
        }
        ApprovalsCommand::Migrate(args) => {
            super::migrate::run(args, embedded, custom, &clock).await
        }
    }
}

/// Open an existing store (these commands never create one) and expire what
/// is overdue first, so nothing listed or decided here is past its time.
pub(super) async fn open_swept(
    store: &StoreArgs,
    spec: Option<&SpecSource>,
    clock: &SharedClock,
) -> Result<SharedStore, ExitFailure> {
    let store = super::store_location::open_existing(store, spec)?;
    store.expire_due(clock.now()).await?;
    Ok(store)
}

/// `approvals list --step/--query/--spec-version`: narrow the pending list.
pub(super) struct ListFilters {
    pub step_id: Option<String>,
    pub text: Option<String>,
    pub spec: Option<SpecSelector>,
}

/// `--spec-version` as the store's filter: `current` and `stale` compare
/// with the spec given (`served`), a hash prefix names one stored version.
async fn spec_filter(
    selector: &SpecSelector,
    served: Option<&str>,
    store: &SharedStore,
    agent_id: Option<&str>,
    now: chrono::DateTime<chrono::Utc>,
) -> Result<SpecFilter, ExitFailure> {
    let needs_spec = matches!(selector, SpecSelector::Current | SpecSelector::Stale);
    let served = match served {
        Some(served) => served,
        None if needs_spec => {
            return Err(ExitFailure::bad_input(
                "--spec-version current|stale compares with the spec: give --spec SPEC",
            ));
        }
        // A hash does not compare with any spec.
        None => "",
    };
    match selector
        .resolve(served, store.as_ref(), agent_id, now)
        .await
    {
        Ok(filter) => Ok(filter),
        Err(SpecFilterError::Store(e)) => Err(e.into()),
        Err(e) => Err(ExitFailure::bad_input(format!("--spec-version: {e}"))),
    }
}

/// One page of the pending list: through `list_approvals` when filtered,
/// else `list_pending` as ever (the same rows, order and cursor form).
pub(super) async fn pending_page(
    store: &SharedStore,
    query: PendingQuery,
    filters: &ListFilters,
    spec: Option<&SpecFilter>,
) -> Result<PendingPage, ExitFailure> {
    if filters.step_id.is_none() && filters.text.is_none() && spec.is_none() {
        return Ok(store.list_pending(&query).await?);
    }
    let page = store
        .list_approvals(&ApprovalQuery {
            agent_id: query.agent_id,
            statuses: vec![ApprovalStatus::Pending],
            step_id: filters.step_id.clone(),
            text: filters.text.clone(),
            text_in_context: false,
            spec: spec.cloned(),
            now: query.now,
            limit: query.limit,
            cursor: query.cursor,
        })
        .await?;
    Ok(PendingPage {
        approvals: page.approvals,
        next_cursor: page.next_cursor,
        unreadable: page.unreadable,
    })
}

/// How a listing prints.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Listing {
    /// A table for people (the default).
    Table,
    /// One JSON document (`--json`).
    Json,
    /// The keys (or run ids) alone, one per line, in the listing's order
    /// (`--quiet`): what a shell script takes with `$(... | head -n1)`,
    /// without a JSON tool. An empty listing prints nothing.
    Ids,
}

impl Listing {
    /// From the flags; clap refuses `--json` with `--quiet`.
    pub(super) fn from_flags(json: bool, quiet: bool) -> Listing {
        match (json, quiet) {
            (true, _) => Listing::Json,
            (false, true) => Listing::Ids,
            (false, false) => Listing::Table,
        }
    }
}

async fn list(
    spec: Option<&SpecSource>,
    store_args: &StoreArgs,
    listing: Listing,
    stuck: bool,
    limit: Option<usize>,
    filters: &ListFilters,
    clock: &SharedClock,
) -> Result<i32, ExitFailure> {
    let loaded = match spec {
        Some(source) => Some(source.load()?),
        None => None,
    };
    let agent_id = loaded.as_ref().map(|spec| spec.agent.clone());
    // The version the listing compares with: the spec given.
    let served = loaded.as_ref().map(|spec| spec.hash.as_str().to_string());
    let store = open_swept(store_args, spec, clock).await?;
    let spec_filter = match &filters.spec {
        Some(selector) => Some(
            spec_filter(
                selector,
                served.as_deref(),
                &store,
                agent_id.as_deref(),
                clock.now(),
            )
            .await?,
        ),
        None => None,
    };
    if stuck {
        let mut claims = store
            .list_stuck(agent_id.as_deref(), crate::support::time::now())
            .await?;
        if let Some(limit) = limit {
            claims.truncate(limit);
        }
        match listing {
            Listing::Json => say!("{}", render::pretty(&json!({ "stuck": claims }))),
            Listing::Ids => claims.iter().for_each(|c| say!("{}", c.record.key)),
            Listing::Table => {
                let records: Vec<_> = claims.into_iter().map(|c| c.record).collect();
                render::stuck_table(&records);
            }
        }
        return Ok(exit::OK);
    }
    let mut approvals = Vec::new();
    let mut unreadable = Vec::new();
    let mut cursor = None;
    let wanted = limit.unwrap_or(usize::MAX);
    loop {
        let query = PendingQuery {
            agent_id: agent_id.clone(),
            now: clock.now(),
            limit: (wanted - approvals.len()).min(500),
            cursor: cursor.take(),
        };
        let page = pending_page(&store, query, filters, spec_filter.as_ref()).await?;
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
    if listing == Listing::Ids {
        for record in &approvals {
            say!("{}", record.key);
        }
        return Ok(exit::OK);
    }
    let progress = progress_of(&store, &approvals).await?;
    if listing == Listing::Json {
        let approvals: Vec<Value> = approvals
            .iter()
            .map(|record| {
                let mut value = listed_json(record, served.as_deref());
                if let (Some(line), Some(fields)) =
                    (progress.get(&record.key), value.as_object_mut())
                {
                    fields.insert("progress".into(), line.clone().into());
                }
                value
            })
            .collect();
        let listing = if unreadable.is_empty() {
            json!({ "approvals": approvals })
        } else {
            json!({ "approvals": approvals, "unreadable": unreadable })
        };
        say!("{}", render::pretty(&listing));
    } else {
        render::table(&approvals, served.as_deref(), &progress);
    }
    Ok(exit::OK)
}

/// Each listed gate with rules, by key: its rules' progress ("finance 1 of
/// 2; security 0 of 1"), from the ledgers read in one query, as GET
/// /approvals has it.
async fn progress_of(
    store: &crate::SharedStore,
    records: &[ApprovalRecord],
) -> Result<std::collections::BTreeMap<String, String>, ExitFailure> {
    let ledgers = ListedLedgers::read(store.as_ref(), records).await?;
    Ok(records
        .iter()
        .filter_map(|record| Some((record.key.clone(), ledgers.progress(record)?)))
        .collect())
}

/// A listed record as JSON: the record, and, when a spec was given,
/// `spec_current` (whether it paused under that spec), as the API has it.
fn listed_json(record: &ApprovalRecord, served: Option<&str>) -> Value {
    let mut value = json!(record);
    if let (Some(served), Some(fields)) = (served, value.as_object_mut()) {
        fields.insert("spec_current".into(), record.is_current_for(served).into());
    }
    value
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
) -> Result<i32, ExitFailure> {
    // Read first: a bad link secret is refused before anything else.
    let links = LinkSigner::from_env().map_err(|e| ExitFailure::bad_input(e.to_string()))?;
    if shown.link_for.is_some_and(|name| name.trim().is_empty()) {
        return Err(ExitFailure::bad_input("--link-for needs a name"));
    }
    let store = super::store_location::open_existing(store_args, spec)?;
    // As of now: overdue reads EXPIRED even before a sweep marked it.
    let record = store
        .approval_as_of(key, clock.now())
        .await?
        .ok_or_else(|| crate::ApprovalError::NotFound { key: key.into() })?;
    // The spec, when at hand, says who may decide; without it the server
    // still checks who may when the link is used.
    let spec = spec.and_then(|source| source.load().ok());
    let deciders = spec.as_ref().map(|spec| spec.deciders_of(&record));
    let link = link(&record, links.as_ref(), shown.link_for, deciders)?;
    if shown.json {
        let mut value = json!(record);
        if let Some(fields) = value.as_object_mut() {
            // What `approve --payload-digest` takes to decide on exactly
            // this payload.
            fields.insert("payload_digest".into(), record.payload_digest().into());
            if let Some(url) = &link {
                fields.insert("link".into(), url.clone().into());
            }
        }
        say!("{}", render::pretty(&value));
    } else {
        render::record(&record);
        // Only a PENDING record has a link to show (or to say is off).
        if record.status == ApprovalStatus::Pending {
            match (&link, &links) {
                (Some(url), _) => say!("link:        {url}"),
                (None, Some(_)) => say!(
                    "link:        none: --link-for NAME shows one that decides as NAME ({UNBOUND_LINKS_ENV} is off)"
                ),
                (None, None) => say!("link:        off (set {LINK_SECRET_ENV})"),
            }
        }
    }
    Ok(exit::OK)
}

/// `approvals votes KEY`: the ledger of one gate and its rules' progress.
async fn votes(
    key: &str,
    spec: Option<&SpecSource>,
    store_args: &StoreArgs,
    json: bool,
    clock: &SharedClock,
) -> Result<i32, ExitFailure> {
    let store = super::store_location::open_existing(store_args, spec)?;
    let record = store
        .approval_as_of(key, clock.now())
        .await?
        .ok_or_else(|| crate::ApprovalError::NotFound { key: key.into() })?;
    let view = VotesView::new(&record, store.votes(key).await?);
    if json {
        say!("{}", render::pretty(&json!(view)));
        return Ok(exit::OK);
    }
    say!("approval {} is {}", view.key, view.status);
    for rule in &view.rules {
        say!(
            "rule {}: {} of {} (counted: {}; may still vote: {})",
            rule.group,
            rule.counted.len(),
            rule.min,
            list_or_none(&rule.counted),
            list_or_none(&rule.may_still_vote)
        );
    }
    if !view.requesters.is_empty() {
        say!(
            "may not vote (started or edited the run): {}",
            view.requesters.join(", ")
        );
    }
    if view.votes.is_empty() {
        say!("no votes yet");
    }
    for vote in &view.votes {
        say!(
            "{:>3}  {}  {} {}{}{} via {}{}",
            vote.seq,
            crate::support::time::format_utc(vote.at),
            vote.voter,
            vote.decision,
            vote.rule
                .as_deref()
                .map(|r| format!(" ({r})"))
                .unwrap_or_default(),
            vote.reason
                .as_deref()
                .map(|r| format!(": {r}"))
                .unwrap_or_default(),
            vote.channel,
            if vote.superseded {
                "  [superseded by a later edit]"
            } else {
                ""
            }
        );
        if let Some(input) = &vote.input {
            say!("     input: {input}");
        }
    }
    Ok(exit::OK)
}

fn list_or_none(names: &[String]) -> String {
    if names.is_empty() {
        "none".into()
    } else {
        names.join(", ")
    }
}

/// The record's signed link, computed now (links are never stored):
/// bound to `--link-for NAME`; without it, an unbound link when
/// TOLLGATE_UNBOUND_LINKS is on and `link` may decide, else none (a
/// terminal has no single viewer to bind a link to). `None` when links are
/// off or the record is no longer PENDING. Asked for with `--link-for`, a
/// link that cannot be made is an error instead, as is a link for someone
/// the spec's deciders (when the spec is at hand) leave out: it would be
/// refused.
fn link(
    record: &ApprovalRecord,
    links: Option<&LinkSigner>,
    link_for: Option<&str>,
    deciders: Option<Deciders<'_>>,
) -> Result<Option<String>, ExitFailure> {
    let pending = record.status == ApprovalStatus::Pending;
    let list = deciders.and_then(|d| d.approvers);
    match (links, link_for) {
        (Some(_), Some(name)) if deciders.is_some_and(|d| !may_decide_record(record, d, name)) => {
            let why = match &record.roster {
                _ if is_decider_of(record, list, name) => {
                    "they asked for it (separation of duties)"
                }
                Some(roster) if !roster.rules.is_empty() => "not in the gate's groups",
                _ => "not in approvals.approvers",
            };
            Err(ExitFailure::new(
                exit::FORBIDDEN,
                format!(
                    "cannot make a link for {name}: {why}, so deciding through it would be refused"
                ),
            ))
        }
        (Some(links), Some(name)) if pending => Ok(Some(links.url(&record.key, Some(name)))),
        (Some(links), None) if pending => Ok(links.unattended_link(&record.key, list)),
        (_, None) => Ok(None),
        (None, Some(name)) => Err(ExitFailure::bad_input(format!(
            "cannot make a link for {name}: signed links are off: set {LINK_SECRET_ENV}"
        ))),
        (Some(_), Some(name)) => Err(ExitFailure::new(
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

async fn decide(
    args: DecideArgs,
    decision: Decision,
    input: Option<serde_json::Value>,
    embedded: Option<&SpecSource>,
    custom: &CustomTools,
    clock: &SharedClock,
) -> Result<i32, ExitFailure> {
    // clap requires KEY without --all (and the batch path takes --all).
    let key = args
        .key
        .clone()
        .ok_or_else(|| ExitFailure::bad_input("give the approval KEY, or --all"))?;
    let source = SpecSource::resolve(args.spec.as_deref(), embedded)?;
    let spec = source.load()?;
    let store = open_swept(&args.store, Some(&source), clock).await?;
    let agent = super::common::agent(spec, store, custom)?.with_clock(clock.clone());
    let mut events = agent.subscribe();
    let decided_by = super::common::decider(args.by.as_deref());
    let ballot = Ballot::new(decision, &decided_by, Channel::Cli)
        .shown(args.payload_digest.clone())
        .with_input(input);
    let outcome = agent.vote(&key, ballot).await?;
    let (recorded, note) = match &outcome {
        DecisionOutcome::Resumes(_) | DecisionOutcome::Finished { .. } => {
            return finish_decided(&agent, outcome, &mut events, &source, args.json).await;
        }
        DecisionOutcome::Repeated(record) => {
            return answer_repeat(&agent, record, &decided_by, &source, args.json).await;
        }
        DecisionOutcome::Voted(recorded) => (recorded, "vote recorded"),
        DecisionOutcome::VoteRepeated(recorded) => (recorded, "your vote was already recorded"),
    };
    {
        // A vote on a gate that counts votes, which did not settle it.
        if args.json {
            render::drain_events(&mut events);
        } else {
            say!(
                "{note}: {} voted {} on approval {}; the gate waits for more: {}",
                recorded.vote.voter,
                recorded.vote.decision,
                key,
                recorded.tally.summary()
            );
        }
        Ok(exit::OK)
    }
}

/// A decision that won here: resume the run in this process and say how
/// it stands. A winning reject that ends the run exits 5 (DESIGN §6), as
/// for `run`, so a script can tell it from an approval.
async fn finish_decided(
    agent: &AgentRun,
    outcome: DecisionOutcome,
    events: &mut tokio::sync::broadcast::Receiver<crate::Event>,
    source: &SpecSource,
    json: bool,
) -> Result<i32, ExitFailure> {
    let run = agent.resume_claimed(outcome).await;
    if json {
        render::drain_events(events);
    }
    let run = run?;
    if !json {
        render::outcome(&run, source);
    }
    Ok(exit::for_status(run.status))
}

/// A retry of the decision that won (the first answer was lost): done,
/// exit 0, whatever the run did since; nothing runs again.
async fn answer_repeat(
    agent: &AgentRun,
    record: &ApprovalRecord,
    decided_by: &str,
    source: &SpecSource,
    json: bool,
) -> Result<i32, ExitFailure> {
    eprintln!(
        "note: approval {} was already {} by {} at {}: the same decision, so nothing was done again",
        record.key,
        record.status.past_tense(),
        decided_by,
        record
            .decided_at
            .map(crate::support::time::format_utc)
            .unwrap_or_default()
    );
    let run = agent.stored_outcome(&record.run_id).await?;
    if json {
        // No event happened; one line with the stored decision and run.
        say!(
            "{}",
            json!({ "repeated": true, "approval": record, "run": run })
        );
    } else {
        render::outcome(&run, source);
    }
    Ok(exit::OK)
}
