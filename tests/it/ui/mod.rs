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
mod runs;
mod sessions;
mod throttle;

/// `tollgate serve` whose one API token is alice's, and an API client
/// holding it.
fn served_for_alice(ws: &Workspace) -> (Served, Api) {
    let served = Served::start(
        &ws.spec,
        &ws.state_db(),
        &[("TOLLGATE_API_TOKENS", "alice:tok-a")],
        &[],
    );
    (served, Api::with_token("tok-a"))
}
