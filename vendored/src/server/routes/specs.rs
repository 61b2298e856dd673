//! /specs/plan: the deploy preview over HTTP (DESIGN §12), the same report
//! `tollgate plan` prints with `--json` (`engine::deploy_plan`).
//!
//! `GET` plans the spec this server serves against the stored versions (a
//! node that was deployed ahead of the others sees what it will do to
//! theirs); `POST` plans the spec in the body, the one about to be
//! deployed. Both only read.

use axum::extract::State;
use axum::{Extension, Json};

use crate::domain::spec::Spec;
use crate::engine::deploy_plan::{DeployPlan, plan_deploy};
use crate::server::http::extract::SpecBody;
use crate::server::http::state::AppState;
use crate::service::ApiError;
use crate::service::Caller;

/// What a spec error in a posted body names as its file.
const POSTED_SPEC: &str = "posted spec";

/// GET /specs/plan: the served spec against the stored versions.
pub(super) async fn plan_served(
    State(state): State<AppState>,
    Extension(_caller): Extension<Caller>,
) -> Result<Json<DeployPlan>, ApiError> {
    let now = state.agent.clock().now();
    let plan = plan_deploy(&**state.agent.store(), state.agent.spec(), now).await?;
    Ok(Json(plan))
}

/// POST /specs/plan: the spec in the body (YAML) against the stored
/// versions. A spec that does not parse is 400 `invalid_request`, its
/// line and column in the message (`posted spec:LINE:COL: ...`).
pub(super) async fn plan_posted(
    State(state): State<AppState>,
    Extension(_caller): Extension<Caller>,
    SpecBody(body): SpecBody,
) -> Result<Json<DeployPlan>, ApiError> {
    let spec =
        Spec::parse_bytes(&body, POSTED_SPEC).map_err(|e| ApiError::invalid(e.to_string()))?;
    let now = state.agent.clock().now();
    let plan = plan_deploy(&**state.agent.store(), &spec, now).await?;
    Ok(Json(plan))
}
