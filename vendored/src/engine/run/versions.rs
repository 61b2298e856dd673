//! Pauses made under another version of the spec (DESIGN §12).
//!
//! A decision on such a pause follows the `on_spec_change` policy the
//! served spec sets for its gate ([`crate::domain::spec::policy_for_pause`]):
//!
//! - `refuse`: approve and modify answer `spec_changed` (the record stays
//!   PENDING); reject is allowed;
//! - `pin`: the run resumes on the version it paused under, loaded from the
//!   store and run by a handle that shares everything with this one (store,
//!   tools, clock, lease, events, metrics) but the spec;
//! - `auto`: as `pin`, except that a pause whose gate is unchanged for the
//!   resumed part ([`crate::domain::spec::gate_unchanged_for_resume`]) first
//!   moves, with its run, onto the served version (one conditional write,
//!   `approval_migrated`), and is then decided there as any other.
//!
//! Who may decide is the served spec's to say in every case: a deploy that
//! removes an approver removes them from the pauses of older versions too.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

use super::decide::Ballot;
use super::outcome::DecisionOutcome;
use super::{AgentRun, RunError};
use crate::domain::pending_approval::{ApprovalError, ApprovalMove, ApprovalRecord};
use crate::domain::spec::{
    OnSpecChange, Spec, SpecHash, gate_unchanged_for_resume, policy_for_pause,
};

/// Older versions this process loaded from the store, by hash: parsed
/// once, then shared. Only versions that parsed to their own hash are
/// kept; whether one can run here is checked on every use (cheap, and a
/// variable may be set by a restart, never within a process).
#[derive(Default)]
pub(super) struct Versions {
    parsed: Mutex<HashMap<String, Arc<Spec>>>,
}

impl Versions {
    fn get(&self, hash: &str) -> Option<Arc<Spec>> {
        self.lock().get(hash).cloned()
    }

    fn keep(&self, spec: Arc<Spec>) {
        self.lock().insert(spec.hash.to_string(), spec);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Arc<Spec>>> {
        // A panic while holding the map leaves it whole (inserts are
        // single calls): keep using it.
        self.parsed.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// What the served spec's policy makes of a pause on another version.
enum Route {
    /// `refuse`: answer `spec_changed`.
    Refuse,
    /// Resume on the version the pause was made under.
    Pin,
    /// `auto` and the gate is unchanged: move it to the served version.
    Move,
}

impl AgentRun {
    /// Decide `record` (read just now, PENDING, made under another version
    /// than the one this process serves) by the served spec's policy for
    /// its gate. A reject never comes here: it is allowed under any spec.
    pub(super) async fn claim_on_its_version(
        &self,
        record: &ApprovalRecord,
        ballot: Ballot,
    ) -> Result<DecisionOutcome, RunError> {
        let decided_by = ballot.by.as_str();
        let refused = || {
            RunError::Approval(ApprovalError::SpecChanged {
                key: record.key.clone(),
                paused_with: SpecHash::short_of(&record.spec_hash).to_string(),
                current: self.spec.hash.short().to_string(),
            })
        };
        // Who may decide is checked before anything is loaded or moved (a
        // gate's own timeout is no voter: `settle_by_timeout` checks it).
        if ballot.channel != crate::domain::policy::Channel::Timeout {
            self.check_voter(record, decided_by)?;
        }
        match self.route(record).await? {
            Route::Refuse => Err(refused()),
            Route::Pin => {
                let version = self.on_version(record).await?;
                let mut outcome = version.claim_here(&record.key, ballot).await?;
                // Only a run still to be driven needs its version's handle.
                if let DecisionOutcome::Resumes(resumption) = &mut outcome {
                    resumption.version = Some(Box::new(version));
                }
                Ok(outcome)
            }
            Route::Move => {
                self.move_to_served(record, decided_by).await?;
                self.claim_here(&record.key, ballot).await
            }
        }
    }

    /// The served spec's policy for the gate `record` paused at, and, for
    /// `auto`, whether the gate is unchanged (which needs the old version).
    async fn route(&self, record: &ApprovalRecord) -> Result<Route, RunError> {
        let no_map = BTreeMap::new();
        match policy_for_pause(&self.serving, &record.step_id, &no_map) {
            OnSpecChange::Refuse => Ok(Route::Refuse),
            OnSpecChange::Pin => Ok(Route::Pin),
            OnSpecChange::Auto => {
                let old = self.stored_version(record).await?;
                let unchanged = gate_unchanged_for_resume(
                    &old,
                    &self.spec,
                    &record.step_id,
                    record.phase,
                    &no_map,
                );
                Ok(if unchanged { Route::Move } else { Route::Pin })
            }
        }
    }

    /// Move `record`'s pause onto the served version: its gate is the same
    /// step at the same place with the same templates, and every step
    /// before it is unchanged, so its message and payload are as the
    /// served version renders them. Losing the move to another move of the
    /// same key is fine (the record is on the served version either way);
    /// anything else (decided, expired meanwhile) is the answer.
    async fn move_to_served(&self, record: &ApprovalRecord, by: &str) -> Result<(), RunError> {
        let to_move = ApprovalMove {
            key: record.key.clone(),
            from: record.spec_hash.clone(),
            to: self.spec.hash.to_string(),
            step_id: record.step_id.clone(),
            step_index: record.step_index,
            message: record.message.clone(),
            payload: record.payload.clone(),
            by: by.to_string(),
            map: BTreeMap::new(),
            auto: true,
            now: self.clock.now(),
        };
        match self.store.move_approval(&to_move).await {
            Ok(moved) => {
                let _ = self.events.send(moved.event);
                Ok(())
            }
            Err(crate::store::StoreError::Approval(ApprovalError::NotOnVersion {
                found, ..
            })) if self.spec.hash.as_str().starts_with(&found) => Ok(()),
            Err(e) => Err(e.into()),
        }
    }

    /// A handle that runs the version `record` paused under, checked to be
    /// runnable in this process.
    pub(super) async fn on_version(&self, record: &ApprovalRecord) -> Result<AgentRun, RunError> {
        let spec = self.stored_version(record).await?;
        self.runnable(&spec)
            .map_err(|reason| unavailable(record, reason))?;
        Ok(self.running(spec))
    }

    /// A handle that runs `spec` (an older version) for this one.
    fn running(&self, spec: Arc<Spec>) -> AgentRun {
        // Redaction must know the old version's secrets before a call of it
        // resolves one.
        crate::support::secrets::remember_env(spec.secret_names());
        // It is in the store: that is where it came from.
        let recorded = tokio::sync::OnceCell::new();
        let _ = recorded.set(());
        AgentRun {
            spec,
            spec_recorded: Arc::new(recorded),
            ..self.clone()
        }
    }

    /// The version `record` paused under, from this process's cache or the
    /// store.
    async fn stored_version(&self, record: &ApprovalRecord) -> Result<Arc<Spec>, RunError> {
        match self.load_version(&record.spec_hash).await? {
            Ok(spec) => Ok(spec),
            Err(reason) => Err(unavailable(record, reason)),
        }
    }

    /// The stored version `hash`, parsed (cached), or why it cannot be had.
    pub(super) async fn load_version(
        &self,
        hash: &str,
    ) -> Result<Result<Arc<Spec>, String>, RunError> {
        if let Some(spec) = self.versions.get(hash) {
            return Ok(Ok(spec));
        }
        let spec = match crate::engine::deploy_plan::load_version(self.store.as_ref(), hash).await?
        {
            Ok(spec) => spec,
            Err(reason) => return Ok(Err(reason)),
        };
        let spec = Arc::new(spec);
        self.versions.keep(spec.clone());
        Ok(Ok(spec))
    }

    /// Whether `spec` can run here: its `rust:` tools registered, its
    /// variables set; else what is missing.
    fn runnable(&self, spec: &Spec) -> Result<(), String> {
        let mut missing: Vec<String> = self
            .tools
            .missing_tools(spec)
            .into_iter()
            .map(|tool| format!("rust: tool {tool:?} is not registered in this binary"))
            .collect();
        // A stored version may need a runtime feature this build left out.
        if let Err(e) = spec.check_features() {
            missing.push(e.to_string());
        }
        missing.extend(
            spec.missing_secrets(|name| std::env::var_os(name).is_some())
                .into_iter()
                .map(|m| m.to_string()),
        );
        if missing.is_empty() {
            Ok(())
        } else {
            Err(missing.join("; "))
        }
    }

    /// The policy for a run found on another version than the served one
    /// by recovery or a retry: the served spec's for the gate it resumes
    /// at, else the spec's own. Under `pin` and `auto` the run goes on on
    /// its version (`auto` moves pauses only, at a decision).
    pub(super) fn keeps_its_version(&self, gate_step: Option<&str>) -> bool {
        let policy = match gate_step {
            Some(step) => policy_for_pause(&self.serving, step, &BTreeMap::new()),
            None => self.serving.approvals.on_spec_change,
        };
        policy != OnSpecChange::Refuse
    }

    /// A handle on version `hash` for a run recovery resumes, or why there
    /// can be none.
    pub(super) async fn for_recovered_run(&self, hash: &str) -> Result<AgentRun, String> {
        let spec = match self.load_version(hash).await {
            Ok(Ok(spec)) => spec,
            Ok(Err(reason)) => return Err(reason),
            Err(e) => return Err(format!("its spec version could not be read: {e}")),
        };
        self.runnable(&spec)?;
        Ok(self.running(spec))
    }
}

/// An older version that waiting approvals or live runs are on, which the
/// served spec keeps them on, and the variables it needs that are not set.
#[derive(Debug, Clone)]
pub struct VersionMissingEnv {
    pub version: crate::domain::spec_version::SpecVersionUse,
    pub missing: Vec<crate::domain::spec::MissingSecret>,
}

impl AgentRun {
    /// Whether the served spec keeps any pause on the version it was made
    /// under (`pin` or `auto`, at the top or at a gate).
    pub fn keeps_older_versions(&self) -> bool {
        self.serving.approvals.on_spec_change != OnSpecChange::Refuse
            || self
                .serving
                .steps
                .iter()
                .any(|step| self.serving.on_spec_change(step) != OnSpecChange::Refuse)
    }

    /// The older versions of this agent that PENDING approvals or live runs
    /// are on and that need a variable this process does not have, when
    /// the served spec keeps pauses on their versions: what `serve` checks
    /// before it binds (DESIGN §12), so a deploy that dropped a variable an
    /// old version needs fails at once, not when someone approves. A
    /// version that cannot be loaded is left to the decision, which says
    /// why (`spec_unavailable`).
    pub async fn older_versions_missing_env(&self) -> Result<Vec<VersionMissingEnv>, RunError> {
        if !self.keeps_older_versions() {
            return Ok(Vec::new());
        }
        let versions = self
            .store
            .list_spec_versions(Some(&self.serving.agent), self.clock.now())
            .await?;
        let mut found = Vec::new();
        for version in versions {
            let in_use = version.pending_approvals > 0 || version.live_runs > 0;
            if !in_use || version.hash == self.serving.hash.as_str() {
                continue;
            }
            let Ok(spec) = self.load_version(&version.hash).await? else {
                continue;
            };
            let missing = spec.missing_secrets(|name| std::env::var_os(name).is_some());
            if !missing.is_empty() {
                found.push(VersionMissingEnv { version, missing });
            }
        }
        Ok(found)
    }
}

fn unavailable(record: &ApprovalRecord, reason: String) -> RunError {
    RunError::SpecUnavailable {
        key: record.key.clone(),
        version: SpecHash::short_of(&record.spec_hash).to_string(),
        reason,
    }
}
