//! The deploy preview (DESIGN §12, `tollgate plan`, `GET|POST /specs/plan`):
//! what deploying a spec will do to the pauses and runs that wait on other
//! versions of its agent.
//!
//! One report, [`DeployPlan`], gathered here from the store and built from
//! the domain's comparison (`spec::diff`: [`diff`], [`plan_pause`]); the
//! CLI prints it as text or JSON and the server answers it as JSON, so the
//! three say the same thing. Reads only.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde::Serialize;

use crate::domain::pending_approval::{ApprovalRecord, Phase};
use crate::domain::run_state::{RunRecord, RunStatus};
use crate::domain::spec::{Classification, Outcome, SpecDiff, diff, plan_pause, policy_for_pause};
use crate::domain::spec::{OnSpecChange, Spec, SpecHash};
use crate::domain::spec_version::SpecVersionUse;
use crate::store::{PendingQuery, Queries, RunQuery, SpecVersions, StoreResult};

/// Rows read per page while gathering: pending approvals and live runs of
/// one agent, read to the end.
const PAGE: usize = 500;

/// Everything the preview says about deploying one spec.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DeployPlan {
    /// The agent of the spec being deployed; only its versions, approvals
    /// and runs are looked at.
    pub agent: String,
    /// The full hash of the spec being deployed.
    pub spec_hash: String,
    /// Its `approvals.on_spec_change`: the policy of every gate that does
    /// not set its own, and what a run recovered on another version gets.
    pub policy: OnSpecChange,
    /// How many versions of the agent the store holds, this one included
    /// if it is stored. Zero: nothing of this agent is stored.
    pub stored_versions: usize,
    /// The other versions that pending approvals or live runs are on,
    /// newest first (versions the store does not hold last).
    pub versions: Vec<VersionPlan>,
    /// Each pending approval on another version, oldest first.
    pub approvals: Vec<ApprovalPlan>,
    /// Runs on other versions that are running or stuck.
    pub live_runs: LiveRuns,
    pub summary: PlanSummary,
}

/// Another version of the agent that something still waits or runs on.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct VersionPlan {
    pub hash: String,
    /// When a process first and last recorded it; `null` when the store
    /// does not hold the version (a pause older than stored versions).
    pub first_seen: Option<DateTime<Utc>>,
    pub last_seen: Option<DateTime<Utc>>,
    /// Its unexpired PENDING approvals.
    pub pending_approvals: u64,
    /// Its runs that are `running` (driven, or to be recovered).
    pub running_runs: u64,
    /// Its runs that are `stuck` (waiting for an operator).
    pub stuck_runs: u64,
    /// Why the version cannot be compared or run by this build: it is not
    /// stored, or its stored source does not parse (or parses to another
    /// hash) here.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub problem: Option<String>,
    /// The step-level difference from this version to the deployed one;
    /// `null` when there is a `problem`.
    pub diff: Option<SpecDiff>,
    /// The environment variables (names only) this version needs to run,
    /// listed when something will run on it after the deploy (a pinned
    /// pause, or a live run under `pin`/`auto`): the deploy must keep them
    /// set.
    pub required_env: Vec<String>,
}

/// One pending approval on another version, and what approving it will do
/// once the spec is deployed.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ApprovalPlan {
    pub key: String,
    pub run_id: String,
    /// The version it paused under.
    pub spec_hash: String,
    /// The step it paused at, in its version.
    pub step: String,
    pub phase: Phase,
    /// The deployed version's step it corresponds to, when there is one.
    pub new_step: Option<String>,
    /// How its gate compares; `null` when its version cannot be read.
    pub classification: Option<Classification>,
    /// The deployed version's policy for this gate.
    pub policy: OnSpecChange,
    pub outcome: Outcome,
    /// Approve cannot resume it: `refused` (409 `spec_changed`), or pinned
    /// to a version this build cannot load.
    pub stranded: bool,
    pub created_at: DateTime<Utc>,
    pub expires_at: DateTime<Utc>,
}

/// Live runs on other versions and what a process serving the deployed
/// spec does with them.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LiveRuns {
    pub running: u64,
    pub stuck: u64,
    pub outcome: LiveRunOutcome,
}

crate::named_enum! {
    /// What happens to a run of another version that a process serving
    /// the deployed spec recovers (or an operator retries).
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
    #[serde(rename_all = "snake_case")]
    pub enum LiveRunOutcome {
        /// `refuse`: it is not driven under another spec; it ends `stuck`
        /// for an operator (serve its version again and retry, or fail it).
        EndsStuck = "ends_stuck",
        /// `pin` or `auto`: it goes on under the version it started on.
        ContinuesOnItsVersion = "continues_on_its_version",
    }
}

/// The counts of the summary line.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct PlanSummary {
    /// Every unexpired PENDING approval of the agent.
    pub pending: u64,
    /// On the deployed version already: approve works as always.
    pub current: u64,
    /// Will resume on the version they paused under.
    pub pinned: u64,
    /// Will resume on the deployed version (`auto`, gate unchanged).
    pub moves_to_new: u64,
    /// Approve will answer 409 `spec_changed` (reject still works).
    pub refused: u64,
    /// Refused, or pinned to a version this build cannot load.
    pub stranded: u64,
}

/// Plan deploying `new` against what `store` holds at `now`.
pub async fn plan_deploy<S>(store: &S, new: &Spec, now: DateTime<Utc>) -> StoreResult<DeployPlan>
where
    S: SpecVersions + Queries + ?Sized,
{
    let agent = new.agent.as_str();
    let stored = store.list_spec_versions(Some(agent), now).await?;
    let pending = pending_approvals(store, agent, now).await?;
    let live = live_runs(store, agent).await?;

    // Every other version a pending approval or a live run is on, stored
    // or not, newest first as the store lists them (those it does not
    // hold last).
    let mut hashes: Vec<&str> = pending
        .iter()
        .map(|a| a.spec_hash.as_str())
        .chain(live.iter().map(|r| r.spec_hash.as_str()))
        .filter(|h| *h != new.hash.as_str())
        .collect();
    let position = |hash: &str| stored.iter().position(|v| v.hash == hash);
    hashes.sort_by_key(|h| (position(h).unwrap_or(usize::MAX), *h));
    hashes.dedup();
    let mut loaded: BTreeMap<&str, Result<Spec, String>> = BTreeMap::new();
    for hash in &hashes {
        loaded.insert(hash, load_version(store, hash).await?);
    }

    let mut approvals = Vec::new();
    let mut summary = PlanSummary::default();
    for record in &pending {
        summary.pending += 1;
        if record.spec_hash == new.hash.as_str() {
            summary.current += 1;
            continue;
        }
        let old = loaded
            .get(record.spec_hash.as_str())
            .and_then(|v| v.as_ref().ok());
        let plan = approval_plan(record, old, new, &BTreeMap::new());
        match plan.outcome {
            Outcome::Current => summary.current += 1,
            Outcome::Pinned => summary.pinned += 1,
            Outcome::MovesToNew => summary.moves_to_new += 1,
            Outcome::Refused => summary.refused += 1,
        }
        if plan.stranded {
            summary.stranded += 1;
        }
        approvals.push(plan);
    }
    approvals.sort_by(|a, b| (a.created_at, &a.key).cmp(&(b.created_at, &b.key)));

    let live_outcome = match new.approvals.on_spec_change {
        OnSpecChange::Refuse => LiveRunOutcome::EndsStuck,
        OnSpecChange::Pin | OnSpecChange::Auto => LiveRunOutcome::ContinuesOnItsVersion,
    };
    let versions: Vec<VersionPlan> = hashes
        .iter()
        .map(|hash| {
            let on = Uses {
                stored: stored.iter().find(|v| v.hash == *hash),
                approvals: &approvals,
                live: &live,
                live_outcome,
            };
            let spec = loaded.remove(hash).unwrap_or_else(|| Err(not_stored(hash)));
            version_plan(hash, spec, new, on)
        })
        .collect();
    let live_runs = LiveRuns {
        running: versions.iter().map(|v| v.running_runs).sum(),
        stuck: versions.iter().map(|v| v.stuck_runs).sum(),
        outcome: live_outcome,
    };

    Ok(DeployPlan {
        agent: new.agent.clone(),
        spec_hash: new.hash.to_string(),
        policy: new.approvals.on_spec_change,
        stored_versions: stored.len(),
        versions,
        approvals,
        live_runs,
        summary,
    })
}

/// What uses one older version, for [`version_plan`].
struct Uses<'a> {
    stored: Option<&'a SpecVersionUse>,
    /// Every planned approval (of any version).
    approvals: &'a [ApprovalPlan],
    /// Every live run of the agent (of any version).
    live: &'a [RunRecord],
    live_outcome: LiveRunOutcome,
}

/// The older version `hash` (parsed, or why it cannot be) under `new`.
fn version_plan(hash: &str, spec: Result<Spec, String>, new: &Spec, on: Uses<'_>) -> VersionPlan {
    let runs = |status: RunStatus| {
        on.live
            .iter()
            .filter(|r| r.spec_hash == hash && r.status == status)
            .count() as u64
    };
    let (running_runs, stuck_runs) = (runs(RunStatus::Running), runs(RunStatus::Stuck));
    let mine = || on.approvals.iter().filter(|a| a.spec_hash == hash);
    // Something runs on this version after the deploy: a pinned pause
    // once approved, or a live run under `pin`/`auto`.
    let runs_on = mine().any(|a| a.outcome == Outcome::Pinned)
        || (on.live_outcome == LiveRunOutcome::ContinuesOnItsVersion
            && running_runs + stuck_runs > 0);
    let (problem, diff, required_env) = match spec {
        Ok(old) => {
            let env = if runs_on {
                old.required_secrets().into_iter().map(|s| s.name).collect()
            } else {
                Vec::new()
            };
            (None, Some(diff(&old, new)), env)
        }
        Err(problem) => (Some(problem), None, Vec::new()),
    };
    VersionPlan {
        hash: hash.to_string(),
        first_seen: on.stored.map(|v| v.first_seen),
        last_seen: on.stored.map(|v| v.last_seen),
        pending_approvals: mine().count() as u64,
        running_runs,
        stuck_runs,
        problem,
        diff,
        required_env,
    }
}

/// One pending approval under `new`. `old` is its version, when this build
/// can read it.
fn approval_plan(
    record: &ApprovalRecord,
    old: Option<&Spec>,
    new: &Spec,
    map: &BTreeMap<String, String>,
) -> ApprovalPlan {
    let (new_step, classification, policy, outcome, readable) = match old {
        Some(old) => {
            let plan = plan_pause(old, new, &record.step_id, record.phase, map);
            (
                plan.new_step,
                Some(plan.classification),
                plan.policy,
                plan.outcome,
                true,
            )
        }
        None => {
            // Without its version the gate cannot be compared: `auto`
            // cannot move it, so it stays on its (unreadable) version.
            let policy = policy_for_pause(new, &record.step_id, map);
            let outcome = match policy {
                OnSpecChange::Refuse => Outcome::Refused,
                OnSpecChange::Pin | OnSpecChange::Auto => Outcome::Pinned,
            };
            let new_step = new
                .steps
                .iter()
                .find(|s| s.id == record.step_id)
                .map(|s| s.id.clone());
            (new_step, None, policy, outcome, false)
        }
    };
    let stranded = match outcome {
        Outcome::Refused => true,
        Outcome::Pinned => !readable,
        Outcome::Current | Outcome::MovesToNew => false,
    };
    ApprovalPlan {
        key: record.key.clone(),
        run_id: record.run_id.clone(),
        spec_hash: record.spec_hash.clone(),
        step: record.step_id.clone(),
        phase: record.phase,
        new_step,
        classification,
        policy,
        outcome,
        stranded,
        created_at: record.created_at,
        expires_at: record.expires_at,
    }
}

/// The stored version `hash`, parsed, or why this build cannot use it:
/// the one reading of a stored version, for the plan and for a decision
/// or a move on an older version (`run/versions.rs`).
pub(crate) async fn load_version<S>(store: &S, hash: &str) -> StoreResult<Result<Spec, String>>
where
    S: SpecVersions + ?Sized,
{
    let Some(version) = store.get_spec_version(hash).await? else {
        return Ok(Err(not_stored(hash)));
    };
    let origin = format!("stored version {}", SpecHash::short_of(hash));
    Ok(match Spec::parse(&version.source, &origin) {
        Ok(spec) if spec.hash.as_str() == hash => Ok(spec),
        Ok(spec) => Err(format!(
            "its stored source hashes to {} in this build, not {}",
            spec.hash.short(),
            SpecHash::short_of(hash)
        )),
        Err(e) => Err(format!("its stored source does not parse here: {e}")),
    })
}

fn not_stored(hash: &str) -> String {
    format!(
        "version {} is not in the store (paused before versions were kept, or removed)",
        SpecHash::short_of(hash)
    )
}

/// Every unexpired PENDING approval of `agent`, read page by page.
pub(crate) async fn pending_approvals<S>(
    store: &S,
    agent: &str,
    now: DateTime<Utc>,
) -> StoreResult<Vec<ApprovalRecord>>
where
    S: Queries + ?Sized,
{
    let mut found = Vec::new();
    let mut query = PendingQuery {
        agent_id: Some(agent.to_string()),
        now,
        limit: PAGE,
        cursor: None,
    };
    loop {
        let page = store.list_pending(&query).await?;
        // Gate requests belong to no spec version: a deploy does nothing
        // to them, and no migration moves them.
        found.extend(page.approvals.into_iter().filter(|a| !a.is_gate_request()));
        match page.next_cursor {
            Some(cursor) => query.cursor = Some(cursor),
            None => return Ok(found),
        }
    }
}

/// `agent`'s runs that are running or stuck, read page by page. A run
/// waiting on an approval is planned through its approval.
async fn live_runs<S>(store: &S, agent: &str) -> StoreResult<Vec<RunRecord>>
where
    S: Queries + ?Sized,
{
    let mut found = Vec::new();
    for status in [RunStatus::Running, RunStatus::Stuck] {
        let mut query = RunQuery {
            agent_id: Some(agent.to_string()),
            status: Some(status),
            limit: PAGE,
            cursor: None,
            text: None,
        };
        loop {
            let page = store.list_runs(&query).await?;
            found.extend(page.runs);
            match page.next_cursor {
                Some(cursor) => query.cursor = Some(cursor),
                None => break,
            }
        }
    }
    Ok(found)
}

#[cfg(test)]
mod tests;
