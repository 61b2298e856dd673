//! What every handler shares: the use cases' [`Services`], and what only
//! the HTTP side needs (tokens, Slack, links, the change watcher, task
//! health).

use std::ops::Deref;
use std::sync::Arc;

use super::auth::ApiTokens;
use crate::domain::links::LinkSigner;
use crate::notify::SlackNotifier;
use crate::service::Services;
use crate::store::watch::ApprovalWatcher;

#[derive(Clone)]
pub(crate) struct AppState {
    pub services: Services,
    pub tokens: Arc<ApiTokens>,
    /// Set when the spec has `approvals.notify.slack`.
    pub slack: Option<Arc<SlackNotifier>>,
    /// Signs approval links; `None` when links are off. Links are made
    /// when a response is written, never stored.
    pub links: Option<LinkSigner>,
    /// Set when the store pushes changes made by other processes
    /// (PostgreSQL NOTIFY): wakes event streams of runs decided elsewhere.
    pub watcher: Option<ApprovalWatcher>,
    /// Which background tasks are down (died, waiting to restart):
    /// `/readyz` is not ready while any is.
    pub tasks: Arc<crate::server::workers::supervisor::TaskHealth>,
}

/// A handler reaches the use cases' state (`state.agent`, and `&state`
/// where a use case takes `&Services`) through its `AppState`.
impl Deref for AppState {
    type Target = Services;

    fn deref(&self) -> &Services {
        &self.services
    }
}
