//! The store contract on every backend, and what happens when storage fails.

mod conformance;
mod conformance_pg;
mod faults;
mod outage_pg;
mod postgres_nul;
mod postgres_tls;
mod shared_file;
