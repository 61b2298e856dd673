//! What an exported server carries about itself: its spec, built in by
//! the generator (see the export's `src/generated.rs`), and the version of
//! the tollgate that generated it.
//!
//! Its own module rather than the CLI's: the server reads both too
//! (`App` serves the embedded spec, `/metrics` reports the version), and
//! the server does not depend on the command line. `cli::Embedded` and
//! `cli::about::GENERATOR_VERSION` name the same items, for exports'
//! generated code and older callers.

/// The tollgate version whose runtime this is. `vendored/` is copied byte
/// for byte into every export, so in an exported server it is the version
/// of the tollgate that generated it.
pub const GENERATOR_VERSION: &str = env!("CARGO_PKG_VERSION");

/// The spec built into an exported server (see its `src/generated.rs`).
#[derive(Debug, Clone, Copy)]
pub struct Embedded {
    pub agent: &'static str,
    /// The 64-hex hash the generator computed; checked against the parsed spec.
    pub spec_hash: &'static str,
    pub spec_yaml: &'static str,
    /// The file the spec came from, for error messages (`agent.yaml`).
    pub spec_file: &'static str,
}
