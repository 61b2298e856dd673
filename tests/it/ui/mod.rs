//! The approvals inbox (server/ui) over real loopback HTTP against real
//! `tollgate serve` processes, without a browser (tests/it/browser drives
//! Chromium): headers, sessions, CSRF, decisions by plain form POST,
//! escaping, signed links, loopback mode and redirects.

use crate::common::Workspace;
use crate::common::server::{Api, Served};

pub(crate) mod client;
mod decisions;
mod gate_requests;
mod headers;
mod links;
mod live;
mod loopback;
mod paging;
mod reasons;
mod runs;
mod sessions;
mod throttle;
mod wide;

/// `tollgate serve` with two API tokens, alice's and the agent's, and an
/// API client holding alice's.
fn served_for_alice(ws: &Workspace) -> (Served, Api) {
    let served = Served::start(
        &ws.spec,
        &ws.state_db(),
        &[("TOLLGATE_API_TOKENS", "agent:tok-agent,alice:tok-a")],
        &[],
    );
    (served, Api::with_token("tok-a"))
}

/// The agent's API client, for a server of [`served_for_alice`]: it starts
/// the runs alice decides (whoever starts a run may not decide its gates).
fn agent() -> Api {
    Api::with_token("tok-agent")
}
