//! POST /approvals/migrate: `approvals migrate` over HTTP (DESIGN §12).
//! Pending approvals made under older versions move, with their runs,
//! onto the spec this server serves (`AgentRun::migrate`); each key gets
//! its own result. The caller is the one who migrates, checked against
//! `approvals.approvers` like a decision.

use std::collections::BTreeMap;

use axum::extract::State;
use axum::{Extension, Json};
use serde::Deserialize;

use crate::engine::run::{MigrateReport, MigrateRequest, MigrateSelection, check_from_prefix};
use crate::server::http::extract::JsonBody;
use crate::server::http::state::AppState;
use crate::service::ApiError;
use crate::service::Caller;
use crate::service::schema::request_type;

request_type! {
    /// Which pending approvals to move onto the served spec: exactly one
    /// of `key`, `all`, `step`, `from`.
    #[derive(Debug, Deserialize)]
    #[serde(deny_unknown_fields)]
    pub(super) struct MigrateBody {
        /// This pending approval.
        key: Option<String>,
        /// Every pending approval of the agent on another version.
        #[serde(default)]
        all: bool,
        /// Those paused at this step (its id in their version).
        step: Option<String>,
        /// Those on the version with this hash (or a prefix of 8+ hex).
        from: Option<String>,
        /// Gates renamed in the served version: old step id -> new one.
        #[serde(default)]
        map: BTreeMap<String, String>,
        /// Work out what would move and what would not; change nothing.
        #[serde(default)]
        dry_run: bool,
    }
}

/// POST /approvals/migrate -> 200 with each key's result (`moved`,
/// `would_move`, `refused` with a reason, `current`). A `key` that is not
/// pending is 404/409/410 as for a decision; a caller not on the approvers
/// list is 403.
pub(super) async fn migrate(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    JsonBody(body): JsonBody<MigrateBody>,
) -> Result<Json<MigrateReport>, ApiError> {
    let selection = match (body.key, body.all, body.step, body.from) {
        (Some(key), false, None, None) => MigrateSelection::Key(key),
        (None, true, None, None) => MigrateSelection::All,
        (None, false, Some(step), None) => MigrateSelection::Step(step),
        (None, false, None, Some(from)) => {
            MigrateSelection::From(check_from_prefix(&from).map_err(ApiError::invalid)?)
        }
        _ => {
            return Err(ApiError::invalid(
                "give exactly one of key, all: true, step, from",
            ));
        }
    };
    let selection = match selection {
        MigrateSelection::From(prefix) => MigrateSelection::From(
            state
                .agent
                .resolve_from(&prefix)
                .await?
                .map_err(|why| ApiError::invalid(format!("from {prefix}: {why}")))?,
        ),
        other => other,
    };
    let request = MigrateRequest {
        selection,
        map: body.map,
        by: caller.0,
        dry_run: body.dry_run,
    };
    Ok(Json(state.agent.migrate(&request).await?))
}
