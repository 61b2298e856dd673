//! HTTP plumbing shared by the API's routes, the inbox and MCP: who the
//! caller is (auth), connections and their limits, request extraction and
//! its errors, logging, origins, paging links, throttling, a run's event
//! feed, and the state every handler shares.

pub(crate) mod auth;
pub(crate) mod conn;
pub(crate) mod error;
pub(crate) mod extract;
pub(crate) mod feed;
pub(crate) mod logging;
pub(crate) mod origin;
pub(crate) mod paging;
pub(crate) mod state;
pub(crate) mod throttle;
