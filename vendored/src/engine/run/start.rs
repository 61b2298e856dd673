//! Starting runs: at once (stored at its first durable point), or created
//! durably first and driven after (a server answers with the id in between),
//! or created only if a key (a schedule tick, a webhook request) is free.
//! Each path stores the spec's version first, once per process
//! ([`AgentRun::record_spec`]).

use serde_json::{Map, Value};

use super::event_log::EventLog;
use super::{AgentRun, RunError, RunOutcome, fresh_context};
use crate::domain::events::EventKind;
use crate::domain::pending_approval;
use crate::domain::run_state::{RunRecord, RunStatus};
use crate::support::json_doc::JsonDoc;

/// A run stored by [`AgentRun::create`] and not executed yet: hand it to
/// [`AgentRun::drive_created`]. It carries what the creation wrote, so the
/// driver never reads back what this process just stored.
pub struct CreatedRun {
    run: RunRecord,
    log: EventLog,
}

impl CreatedRun {
    pub fn run_id(&self) -> &str {
        &self.run.id
    }

    /// The run was written with its first events: announce them.
    fn stored(run: RunRecord, mut log: EventLog) -> CreatedRun {
        log.published();
        CreatedRun { run, log }
    }
}

impl AgentRun {
    /// Start a run and drive it to its first pause or its end.
    ///
    /// The run is stored with its first durable point: its first pause, its
    /// end, or the first step that calls out or claims a dedupe key,
    /// whichever comes first. Nothing outside this call can see the run
    /// before that (the caller learns its id from the outcome), so a run
    /// that reaches its gate through pure steps costs one commit, not two.
    pub async fn start(
        &self,
        input: impl Into<JsonDoc>,
        trigger: Value,
    ) -> Result<RunOutcome, RunError> {
        self.record_spec().await?;
        let (run, mut log) = self.new_run(input, trigger);
        log.unstored = Some(run.clone());
        self.drive(fresh_context(run), 0, None, log).await
    }

    /// Record a new run (durably, owned by this process) without executing
    /// it; [`AgentRun::drive_created`] executes it. Lets a server answer
    /// with the run id before the steps run: should this process die in
    /// between, the run's lease runs out and a serving process recovers it.
    pub async fn create(
        &self,
        input: impl Into<JsonDoc>,
        trigger: Value,
    ) -> Result<CreatedRun, RunError> {
        self.record_spec().await?;
        let (run, log) = self.new_owned_run(input, trigger);
        self.store.create_run(&run, log.pending()).await?;
        Ok(CreatedRun::stored(run, log))
    }

    /// [`AgentRun::create`] if `once` can be claimed, in one write (see
    /// [`crate::store::RunLog::create_run_once`]): how a schedule tick
    /// or a signed webhook request starts at most one run, and never none
    /// once claimed. `None` when the key is taken: no run was created.
    pub async fn create_once(
        &self,
        input: impl Into<JsonDoc>,
        trigger: Value,
        once: &crate::store::KeyClaim,
    ) -> Result<Option<CreatedRun>, RunError> {
        self.record_spec().await?;
        let (run, log) = self.new_owned_run(input, trigger);
        if !self
            .store
            .create_run_once(once, &run, log.pending())
            .await?
        {
            return Ok(None);
        }
        Ok(Some(CreatedRun::stored(run, log)))
    }

    /// A new run owned by this process under a fresh lease, not stored yet.
    fn new_owned_run(&self, input: impl Into<JsonDoc>, trigger: Value) -> (RunRecord, EventLog) {
        let (mut run, mut log) = self.new_run(input, trigger);
        let lease = self.new_lease();
        run.owner = Some(lease.owner.clone());
        run.lease_until = Some(lease.until);
        log.owner = Some(lease.owner);
        log.lease.set(Some(lease.until));
        (run, log)
    }

    /// A new run and its `run_started` event, not stored yet.
    fn new_run(&self, input: impl Into<JsonDoc>, mut trigger: Value) -> (RunRecord, EventLog) {
        let input = input.into();
        pending_approval::scrub_trigger(&mut trigger);
        let now = self.clock.now();
        let run = RunRecord {
            id: new_run_id(),
            agent_id: self.spec.agent.clone(),
            spec_hash: self.spec.hash.to_string(),
            status: RunStatus::Running,
            input: input.clone(),
            trigger,
            outputs: Map::new(),
            error: None,
            created_at: now,
            updated_at: now,
            owner: None,
            lease_until: None,
        };
        let mut log = EventLog::new(&run.id, 1, self.events.clone(), &self.clock);
        log.emit(EventKind::RunStarted {
            agent: run.agent_id.clone(),
            spec_hash: run.spec_hash.clone(),
            input,
        });
        (run, log)
    }

    /// Execute a run created with [`AgentRun::create`] from its first step.
    pub async fn drive_created(&self, created: CreatedRun) -> Result<RunOutcome, RunError> {
        let CreatedRun { run, log } = created;
        self.drive(fresh_context(run), 0, None, log).await
    }
}

/// A new run id: a UUID v7, so ids sort by creation time. Every index keyed
/// by run id (runs, events, a run's approvals) then grows at its end, where
/// the pages are already cached, instead of dirtying a random page per insert:
/// fewer pages per commit and a smaller working set as the store grows. The
/// 74 random bits keep ids unguessable enough for what they are (approval
/// keys, the correlation key, stay v4: fully random).
fn new_run_id() -> String {
    uuid::Uuid::now_v7().to_string()
}
