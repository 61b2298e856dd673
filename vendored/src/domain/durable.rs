//! Durable runs between pauses (DESIGN §9): who drives a run, for how long,
//! and how often serving processes look for runs whose driver stopped.
//!
//! A run being executed is owned by one process (its node id) under a
//! lease that the driver renews in the background while a step is in
//! flight and clears at each durable point (a pause, an end). A `running`
//! run whose lease ran out (or that has none: stored before leases
//! existed) is orphaned: every serving process claims orphans at start-up
//! and periodically, one winner per run, and resumes each from its last
//! durable point. Every write a driver makes is conditional on still
//! owning the run, so a driver that lost its run (recovered elsewhere,
//! cancelled, failed by an operator) stops at its next write.
//!
//! A process does not wait out the lease of an owner it can see is dead:
//! one on the same host (same kernel boot, same pid namespace) whose
//! process is gone, or whose pid now belongs to a process started later
//! ([`owner`]). Its runs are taken over at once, with the same one-winner
//! conditional write, on the exact owner string.

use std::sync::OnceLock;
use std::time::Duration;

/// How long a lease lasts when nothing else is configured. Long enough
/// that a busy database or a slow step's renewal never lets a live run be
/// taken over; short enough that a crashed process's runs resume soon.
pub const DEFAULT_LEASE: Duration = Duration::from_secs(30);

/// The shortest lease accepted: renewals run every third of it.
pub const MIN_LEASE: Duration = Duration::from_millis(300);

/// Orphans claimed per recovery round; the next round takes the rest.
pub const RECOVER_BATCH: usize = 100;

pub mod owner;

/// This process's identity as a run owner, made once per process: host,
/// pid, a random part, and (where /proc tells) the process's start time,
/// the kernel's boot id and its pid namespace ([`owner`]). The random part
/// and the start time tell apart two processes that reuse a pid (a
/// restarted container), so a new process never mistakes a dead one's
/// runs for its own; the rest lets a process on the same host see that a
/// run's owner died without waiting out its lease.
pub fn node_id() -> &'static str {
    static ID: OnceLock<String> = OnceLock::new();
    ID.get_or_init(|| owner::Identity::current().to_string())
}

/// Whether the process that wrote `owner` still runs, as this process
/// sees it on this host's process table (see [`owner::judge`]).
pub fn owner_liveness(owner: &str, one_kernel: bool) -> owner::Liveness {
    owner::judge(owner::Identity::current(), owner, one_kernel, &owner::Proc)
}

/// How often a driver renews its lease: three renewals fit in one lease,
/// so one slow or failed renewal does not let it lapse.
pub fn renew_every(lease: Duration) -> Duration {
    lease / 3
}

/// How long to wait before the next recovery round: around half a lease
/// (an orphan waits at most a lease and a half), jittered so that servers
/// started together do not all scan at the same instants.
pub fn next_recovery_in(
    lease: Duration,
    jitter: &mut crate::support::backoff::Backoff,
) -> Duration {
    let half = lease / 2;
    half / 2 + jitter.wait_after(1).min(half)
}

/// `TOLLGATE_RUN_LEASE`, checked: a duration such as `30s` of at least
/// [`MIN_LEASE`]; unset means [`DEFAULT_LEASE`].
pub fn lease_from_env() -> Result<Duration, String> {
    match std::env::var(crate::support::env::RUN_LEASE) {
        Ok(text) if !text.trim().is_empty() => parse_lease(&text),
        _ => Ok(DEFAULT_LEASE),
    }
}

/// A lease length from text (`30s`, `2m`, `500ms`).
pub fn parse_lease(text: &str) -> Result<Duration, String> {
    let lease = crate::support::time::parse_duration(text.trim()).map_err(|e| {
        format!(
            "{}={text:?} is not a duration: {e}",
            crate::support::env::RUN_LEASE
        )
    })?;
    if lease < MIN_LEASE {
        return Err(format!(
            "{}={text:?} is too short: a run lease must be at least {}ms",
            crate::support::env::RUN_LEASE,
            MIN_LEASE.as_millis()
        ));
    }
    Ok(lease)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_node_id_names_host_and_pid_and_stays_the_same() {
        let id = node_id();
        assert!(id.contains(&format!(":{}:", std::process::id())), "{id}");
        assert_eq!(id, node_id());
    }

    #[test]
    fn recovery_waits_around_half_a_lease() {
        let mut jitter = crate::support::backoff::Backoff::seeded(
            Duration::from_secs(10),
            Duration::from_secs(10),
            7,
        );
        for _ in 0..100 {
            let wait = next_recovery_in(Duration::from_secs(20), &mut jitter);
            assert!(wait >= Duration::from_secs(5) && wait <= Duration::from_secs(15));
        }
    }
}
