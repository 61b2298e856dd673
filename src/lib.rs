//! The `tollgate` library: the parts of the CLI that tests and other tools
//! call directly. Today that is the exporter, a pure generator (spec -> file
//! plan) plus the writer that puts a plan on disk, and the reference
//! pages' generator (`tollgate reference`).

pub mod export;
pub mod reference;
