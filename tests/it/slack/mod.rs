//! Slack approvals against a local Slack stub: posting, clicks, signatures, outages and what the store keeps.

mod approvals;
mod clicks;
mod outage;
mod outbox;
mod rate_limit;
mod signatures;
mod store;
