//! The engine: runs a spec against a store. Starting, deciding, resuming
//! and driving runs ([`run`]), what one step does ([`workflow`]), the
//! tools steps call ([`tools`]), approval gates for Rust code ([`gate`])
//! and what the process counted ([`metrics`]); what deploying another
//! version would do to what waits ([`deploy_plan`]). Refers to the domain, the
//! store and support, never to notify, the server or the CLI.

pub mod deploy_plan;
pub mod gate;
pub mod metrics;
pub mod run;
pub mod tools;
pub mod workflow;
