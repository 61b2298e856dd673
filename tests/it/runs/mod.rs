//! Runs end to end through the real binary and the library: pauses, decisions, expiry, crashes and the side effects they may or may not repeat.

mod chaos_sigkill;
mod crash_recovery;
mod dedupe;
mod expiry;
mod gate_crash;
mod http_tools;
mod idempotency_keys;
mod model_step;
mod one_write_decision;
mod operations;
mod race;
mod recovery;
mod same_host_recovery;
mod spec_changed;
mod two_phase;
