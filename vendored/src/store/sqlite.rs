//! STUB: the SQLite store is being built.
use std::path::Path;

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use super::{
    Claimed, Pause, PendingPage, PendingQuery, RunEnd, StateStore, StoreError, StoreResult,
    StuckClaim,
};
use crate::events::Event;
use crate::pending_approval::{ApprovalRecord, Claim};
use crate::run_state::RunRecord;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Synchronous {
    #[default]
    Full,
    Normal,
}

#[derive(Debug, Clone, Default)]
pub struct SqliteOptions {
    pub synchronous: Synchronous,
}

enum Never {}

pub struct SqliteStore(Never);

impl SqliteStore {
    pub fn open(_path: &Path, _options: SqliteOptions) -> StoreResult<SqliteStore> {
        Err(StoreError::Database("sqlite store not built yet".into()))
    }
}

#[async_trait]
impl StateStore for SqliteStore {
    fn describe(&self) -> String {
        match self.0 {}
    }
    async fn create_run(&self, _: &RunRecord, _: &[Event]) -> StoreResult<()> {
        match self.0 {}
    }
    async fn append_events(&self, _: &str, _: &[Event]) -> StoreResult<()> {
        match self.0 {}
    }
    async fn pause_run(&self, _: &Pause, _: &[Event]) -> StoreResult<()> {
        match self.0 {}
    }
    async fn end_run(&self, _: &RunEnd, _: &[Event]) -> StoreResult<()> {
        match self.0 {}
    }
    async fn claim(&self, _: &Claim) -> StoreResult<Claimed> {
        match self.0 {}
    }
    async fn get_approval(&self, _: &str) -> StoreResult<Option<ApprovalRecord>> {
        match self.0 {}
    }
    async fn pending_for_run(
        &self,
        _: &str,
        _: DateTime<Utc>,
    ) -> StoreResult<Option<ApprovalRecord>> {
        match self.0 {}
    }
    async fn list_pending(&self, _: &PendingQuery) -> StoreResult<PendingPage> {
        match self.0 {}
    }
    async fn list_stuck(&self, _: Option<&str>) -> StoreResult<Vec<StuckClaim>> {
        match self.0 {}
    }
    async fn expire_due(&self, _: DateTime<Utc>) -> StoreResult<Vec<ApprovalRecord>> {
        match self.0 {}
    }
    async fn get_run(&self, _: &str) -> StoreResult<Option<RunRecord>> {
        match self.0 {}
    }
    async fn run_events(&self, _: &str, _: u64) -> StoreResult<Vec<Event>> {
        match self.0 {}
    }
    async fn claim_key(&self, _: &str, _: DateTime<Utc>, _: DateTime<Utc>) -> StoreResult<bool> {
        match self.0 {}
    }
    async fn release_key(&self, _: &str) -> StoreResult<()> {
        match self.0 {}
    }
}
