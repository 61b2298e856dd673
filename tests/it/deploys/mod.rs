//! Pauses that survive deploys (DESIGN §12, issue 24): a pause made under
//! one version of the spec, decided after another was deployed, under each
//! `on_spec_change` policy; real `tollgate serve` processes on real SQLite
//! files, a counting stub for the approved side effect.

mod migrate;
mod policies;
mod rolling;
mod unavailable;
