//! The integration tests, as one binary: one module per capability, and
//! shared helpers in `common`. One binary links tokio, axum, rusqlite and
//! reqwest once instead of once per test file, which is most of the build
//! time of `cargo test` on a cold cache.
//!
//! Run one capability or one file with a name filter:
//! `cargo test --test it server::`, `cargo test --test it spec::errors`.

#[macro_use]
mod common;

mod browser;
mod cli;
mod deploys;
mod docs_links;
mod export;
mod gate_api;
mod gates;
mod layers;
mod mcp;
mod notifications;
mod quickstart;
mod reference;
mod runs;
mod secrets;
mod server;
mod slack;
mod spec;
mod store;
mod team;
mod ui;
mod versions;

// The export file walker is the generator's own (src/export/walk.rs): the
// parity test reads vendored/ exactly as an export does.
#[path = "../../src/export/walk.rs"]
mod export_walk;
