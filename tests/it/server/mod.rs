//! `tollgate serve` over real loopback HTTP: the API contract (DESIGN §5), its limits and its behaviour across restarts and processes.

mod approvals_batch;
mod approvals_filters;
mod auth_config;
mod connection_limits;
mod errors;
mod events;
mod extractors_fuzz;
mod json_depth;
mod links;
mod openapi;
mod ops_logs;
mod ops_metrics;
mod ops_readyz;
mod origin;
mod postgres;
mod race;
mod read_only;
mod repeated_decisions;
mod responses;
mod restart;
mod runs_endpoints;
mod schedule;
mod stale_approvals;
mod startup;
mod trigger_scrubbing;
mod webhook;
