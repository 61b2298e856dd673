//! Explicit migration (DESIGN §12, `approvals migrate`): pending approvals
//! made under older versions moved, with their runs, onto the version this
//! handle runs. Each key gets its own result; one that does not fit says
//! why and stays as it was. A move is the store's conditional write
//! ([`crate::store::Approvals::move_approval`]), so a migrate racing a
//! decision of the same key: exactly one of them goes first.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::Serialize;
use serde_json::Value;

use super::{AgentRun, RunError};
use crate::domain::pending_approval::{
    ApprovalError, ApprovalMove, ApprovalRecord, ApprovalStatus, Phase,
};
use crate::domain::spec::{Classification, Spec, classify_pause, diff};
use crate::engine::workflow::{RunContext, render_pause};

/// Which pending approvals to move.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MigrateSelection {
    /// This one key.
    Key(String),
    /// Every pending approval of the agent on another version.
    All,
    /// Those paused at this step (its id in their version).
    Step(String),
    /// Those on versions whose hash starts with this (at least 8 hex).
    From(String),
}

/// A migration asked for.
#[derive(Debug, Clone)]
pub struct MigrateRequest {
    pub selection: MigrateSelection,
    /// Old step id -> new step id, for gates renamed in the new version.
    pub map: BTreeMap<String, String>,
    /// Who migrates (the `approval_migrated` event's `by`).
    pub by: String,
    /// Work everything out, write nothing.
    pub dry_run: bool,
}

crate::named_enum! {
    /// What became of one pending approval.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
    #[serde(rename_all = "snake_case")]
    pub enum MigrateOutcome {
        /// Moved onto the new version.
        Moved = "moved",
        /// `--dry-run`: it would move.
        WouldMove = "would_move",
        /// It does not fit the new version (or the store refused the
        /// move): `reason` says why; nothing of it changed.
        Refused = "refused",
        /// Already on the new version.
        Current = "current",
    }
}

/// One pending approval's result.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MigrateResult {
    pub key: String,
    pub run_id: String,
    /// The version it was on.
    pub from: String,
    pub step: String,
    pub phase: Phase,
    /// Its step in the new version, when it has one.
    pub to_step: Option<String>,
    pub classification: Option<Classification>,
    pub outcome: MigrateOutcome,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    pub message_before: Option<String>,
    /// As the new version renders it (when it fits).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message_after: Option<String>,
    pub payload_before: Value,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub payload_after: Option<Value>,
}

/// A migration's answer: the version moved to and each key's result.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MigrateReport {
    pub to: String,
    pub dry_run: bool,
    pub results: Vec<MigrateResult>,
}

impl MigrateReport {
    /// How many have `outcome`.
    pub fn count(&self, outcome: MigrateOutcome) -> usize {
        self.results.iter().filter(|r| r.outcome == outcome).count()
    }
}

impl AgentRun {
    /// Move the selected pending approvals onto this handle's version (see
    /// the module). A `Key` that is not a pending approval of this agent is
    /// an error (not found, decided, expired); every other refusal is a
    /// result.
    pub async fn migrate(&self, request: &MigrateRequest) -> Result<MigrateReport, RunError> {
        // An operator's action, checked like a decision.
        if !crate::domain::links::may_decide(
            self.serving.approvals.approvers.as_deref(),
            &request.by,
        ) {
            return Err(RunError::MigrateForbidden {
                by: request.by.clone(),
            });
        }
        let now = self.clock.now();
        let selected = self.select(&request.selection, now).await?;
        let mut results = Vec::with_capacity(selected.len());
        for record in selected {
            results.push(self.migrate_one(&record, request).await?);
        }
        Ok(MigrateReport {
            to: self.spec.hash.to_string(),
            dry_run: request.dry_run,
            results,
        })
    }

    async fn select(
        &self,
        selection: &MigrateSelection,
        now: chrono::DateTime<chrono::Utc>,
    ) -> Result<Vec<ApprovalRecord>, RunError> {
        if let MigrateSelection::Key(key) = selection {
            let not_found = || ApprovalError::NotFound { key: key.clone() };
            let record = self
                .store
                .approval_as_of(key, now)
                .await?
                .filter(|r| r.agent_id == self.spec.agent)
                .ok_or_else(not_found)?;
            return match record.status {
                ApprovalStatus::Pending => Ok(vec![record]),
                ApprovalStatus::Expired => Err(ApprovalError::Expired {
                    key: key.clone(),
                    expired_at: record.expires_at,
                }
                .into()),
                status => Err(ApprovalError::AlreadyResolved {
                    key: key.clone(),
                    status,
                    decided_by: record.decided_by,
                    decided_at: record.decided_at,
                }
                .into()),
            };
        }
        let pending = crate::engine::deploy_plan::pending_approvals(
            self.store.as_ref(),
            &self.spec.agent,
            now,
        )
        .await?;
        let mut chosen: Vec<ApprovalRecord> = pending
            .into_iter()
            .filter(|r| r.spec_hash != self.spec.hash.as_str())
            .filter(|r| match selection {
                MigrateSelection::All | MigrateSelection::Key(_) => true,
                MigrateSelection::Step(step) => &r.step_id == step,
                MigrateSelection::From(prefix) => r.spec_hash.starts_with(prefix.as_str()),
            })
            .collect();
        // Oldest first: the order they were asked in.
        chosen.sort_by(|a, b| (a.created_at, &a.key).cmp(&(b.created_at, &b.key)));
        Ok(chosen)
    }

    async fn migrate_one(
        &self,
        record: &ApprovalRecord,
        request: &MigrateRequest,
    ) -> Result<MigrateResult, RunError> {
        let mut result = MigrateResult {
            key: record.key.clone(),
            run_id: record.run_id.clone(),
            from: record.spec_hash.clone(),
            step: record.step_id.clone(),
            phase: record.phase,
            to_step: None,
            classification: None,
            outcome: MigrateOutcome::Refused,
            reason: None,
            message_before: record.message.clone(),
            message_after: None,
            payload_before: record.payload.clone(),
            payload_after: None,
        };
        if record.spec_hash == self.spec.hash.as_str() {
            result.outcome = MigrateOutcome::Current;
            result.to_step = Some(record.step_id.clone());
            return Ok(result);
        }
        let old = match self.load_version(&record.spec_hash).await? {
            Ok(old) => old,
            Err(reason) => return Ok(refused(result, reason)),
        };
        let planned = match self.fit(&old, record, &request.map) {
            Ok(planned) => planned,
            Err((classification, reason)) => {
                result.classification = classification;
                return Ok(refused(result, reason));
            }
        };
        result.classification = Some(planned.classification);
        result.to_step = Some(planned.to_move.step_id.clone());
        result.message_after = planned.to_move.message.clone();
        result.payload_after = Some(planned.to_move.payload.clone());
        if request.dry_run {
            result.outcome = MigrateOutcome::WouldMove;
            return Ok(result);
        }
        let to_move = ApprovalMove {
            by: request.by.clone(),
            now: self.clock.now(),
            ..planned.to_move
        };
        match self.store.move_approval(&to_move).await {
            Ok(moved) => {
                let _ = self.events.send(moved.event);
                result.outcome = MigrateOutcome::Moved;
                Ok(result)
            }
            Err(crate::store::StoreError::Approval(refusal)) => {
                Ok(refused(result, refusal.to_string()))
            }
            Err(e) => Err(e.into()),
        }
    }

    /// Does `record` (a pause of `old`) fit this version: a gate of the
    /// same kind and phase at its step (or the one `map` names), every
    /// step before it run by this run already (its outputs are what the
    /// new steps read), and the new gate rendering for it. The move to
    /// write when it does; why not, when it does not.
    fn fit(
        &self,
        old: &Arc<Spec>,
        record: &ApprovalRecord,
        map: &BTreeMap<String, String>,
    ) -> Result<Planned, (Option<Classification>, String)> {
        let new = &self.spec;
        let classification = classify_pause(old, new, &record.step_id, record.phase, map);
        let to_id = map.get(&record.step_id).unwrap_or(&record.step_id);
        if classification == Classification::StepRemoved {
            let hint = diff(old, new)
                .renamed
                .into_iter()
                .find(|r| r.from == record.step_id)
                .map(|r| {
                    format!(
                        "; it looks renamed to {}: add --map {}={}",
                        r.to, r.from, r.to
                    )
                })
                .unwrap_or_default();
            return Err((
                Some(classification),
                format!(
                    "the new version has no gate {to_id} that pauses as {} did ({} phase){hint}",
                    record.step_id, record.phase
                ),
            ));
        }
        let Some(index) = new.step_index(to_id) else {
            return Err((
                Some(classification),
                format!("no step {to_id} in the new version"),
            ));
        };
        if let Some(missing) = new.steps[..index]
            .iter()
            .find(|s| !record.outputs.contains_key(&s.id))
        {
            return Err((
                Some(classification),
                format!(
                    "step {} comes before {to_id} in the new version and this run never ran it",
                    missing.id
                ),
            ));
        }
        let ctx = RunContext {
            run_id: record.run_id.clone(),
            agent: record.agent_id.clone(),
            input: record.input.clone(),
            trigger: record.trigger.clone(),
            outputs: record.outputs.clone(),
            gate_key: None,
        };
        let rendered =
            render_pause(new, &new.steps[index], &ctx, &record.payload).map_err(|e| {
                (
                    Some(classification),
                    format!("the new version cannot render the gate for this run: {e}"),
                )
            })?;
        let mut renamed = BTreeMap::new();
        if to_id != &record.step_id {
            renamed.insert(record.step_id.clone(), to_id.clone());
        }
        Ok(Planned {
            classification,
            to_move: ApprovalMove {
                key: record.key.clone(),
                from: record.spec_hash.clone(),
                to: new.hash.to_string(),
                step_id: to_id.clone(),
                step_index: index,
                message: rendered.message,
                payload: rendered.payload,
                by: String::new(),
                map: renamed,
                auto: false,
                now: self.clock.now(),
            },
        })
    }
}

impl AgentRun {
    /// The one stored version of this agent that a `--from` prefix
    /// (checked by [`check_from_prefix`]) names. `--from` picks a version:
    /// a prefix no stored version of the agent starts with, or several do,
    /// is the caller's mistake, said as such (`Ok(Err(why))`), never an
    /// empty migration or one of two versions at once.
    pub async fn resolve_from(&self, prefix: &str) -> Result<Result<String, String>, RunError> {
        let mut hashes: Vec<String> = self
            .store
            .list_spec_versions(Some(&self.spec.agent), self.clock.now())
            .await?
            .into_iter()
            .map(|v| v.hash)
            .filter(|hash| hash.starts_with(prefix))
            .collect();
        hashes.sort();
        Ok(match hashes.as_slice() {
            [one] => Ok(one.clone()),
            [] => Err(format!(
                "no stored spec version of agent {} has a hash starting with {prefix} \
                 (see `tollgate specs list`)",
                self.spec.agent
            )),
            several => Err(format!(
                "{prefix} is the start of {} stored spec versions of agent {} ({}): \
                 give more of the hash",
                several.len(),
                self.spec.agent,
                several.join(", ")
            )),
        })
    }
}

/// A move worked out, not yet written.
struct Planned {
    classification: Classification,
    to_move: ApprovalMove,
}

fn refused(mut result: MigrateResult, reason: String) -> MigrateResult {
    result.outcome = MigrateOutcome::Refused;
    result.reason = Some(reason);
    result
}

/// A `--from` prefix: at least 8 hex characters.
pub fn check_from_prefix(prefix: &str) -> Result<String, String> {
    let lower = prefix.to_ascii_lowercase();
    if lower.len() < 8 || lower.len() > 64 || !lower.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(format!(
            "--from {prefix:?}: give a spec hash or a prefix of at least 8 hex characters \
             (see `tollgate specs list`)"
        ));
    }
    Ok(lower)
}
