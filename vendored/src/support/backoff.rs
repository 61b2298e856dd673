//! Jittered exponential backoff, the one schedule behind every retry: HTTP
//! tool calls, Slack posts and edits, the watcher's reconnects and a
//! waiter's re-reads.
//!
//! Waits use "full jitter": the n-th wait is uniform in `[0, ceiling(n)]`,
//! where the ceiling doubles from `base` and stops at `cap`. Without jitter
//! every node that lost its database at the same moment would retry at the
//! same moments too, and hit the restarted server in lockstep.
//!
//! The randomness only has to differ between processes and between
//! instances, not resist prediction, so it is a SplitMix64 generator seeded
//! from the clock, the process id and a per-process counter rather than a
//! `rand` dependency every export would have to build.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// An exponential backoff with full jitter, capped.
#[derive(Debug, Clone)]
pub struct Backoff {
    base: Duration,
    cap: Duration,
    /// Consecutive failures counted by [`Backoff::next_wait`].
    failures: u32,
    rng: SplitMix64,
}

impl Backoff {
    /// Waits whose ceiling starts at `base` and doubles up to `cap`.
    pub fn new(base: Duration, cap: Duration) -> Backoff {
        Backoff::seeded(base, cap, fresh_seed())
    }

    /// The same with a fixed seed, for reproducible tests.
    pub fn seeded(base: Duration, cap: Duration, seed: u64) -> Backoff {
        Backoff {
            base: base.min(cap),
            cap,
            failures: 0,
            rng: SplitMix64(seed),
        }
    }

    /// The longest wait after `failures` consecutive failures (1-based):
    /// `base * 2^(failures - 1)`, at most `cap`.
    pub fn ceiling(&self, failures: u32) -> Duration {
        let factor = 2u32.saturating_pow(failures.saturating_sub(1));
        self.base.saturating_mul(factor).min(self.cap)
    }

    /// A wait for after the `failures`-th consecutive failure, uniform in
    /// `[0, ceiling(failures)]`. For callers that count attempts themselves.
    pub fn wait_after(&mut self, failures: u32) -> Duration {
        let ceiling = u64::try_from(self.ceiling(failures).as_nanos()).unwrap_or(u64::MAX);
        // Scale a 64-bit draw onto 0..=ceiling without modulo bias worth
        // speaking of.
        let draw = (u128::from(self.rng.next_u64()) * (u128::from(ceiling) + 1)) >> 64;
        Duration::from_nanos(u64::try_from(draw).unwrap_or(ceiling))
    }

    /// Count one more failure and return the wait before trying again.
    pub fn next_wait(&mut self) -> Duration {
        self.failures = self.failures.saturating_add(1);
        self.wait_after(self.failures)
    }

    /// After a success: the next failure starts from `base` again.
    pub fn reset(&mut self) {
        self.failures = 0;
    }
}

/// `Retry-After` as a wait from `now`: delay-seconds or an HTTP date (RFC
/// 9110 §10.2.3). A date in the past is no wait; anything else is `None`.
/// Callers cap the result: a header must not park a retry for days.
pub fn retry_after(value: &str, now: SystemTime) -> Option<Duration> {
    let value = value.trim();
    if let Ok(seconds) = value.parse::<u64>() {
        return Some(Duration::from_secs(seconds));
    }
    let at = httpdate::parse_http_date(value).ok()?;
    Some(at.duration_since(now).unwrap_or(Duration::ZERO))
}

/// SplitMix64 (Steele, Lea, Flood 2014): tiny, fast and well mixed, which
/// is all jitter needs. Public because the same seed gives the same
/// sequence on every machine, which is what a replayable test wants too
/// (the workspace's property and chaos tests draw from it). Not for
/// anything that must resist prediction.
#[derive(Debug, Clone)]
pub struct SplitMix64(u64);

impl SplitMix64 {
    pub fn new(seed: u64) -> SplitMix64 {
        SplitMix64(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
}

/// A seed that differs between processes (clock, pid) and between
/// instances of one process (a counter), mixed so that nearby inputs give
/// unrelated sequences.
fn fresh_seed() -> u64 {
    static INSTANCES: AtomicU64 = AtomicU64::new(0);
    let instance = INSTANCES.fetch_add(1, Ordering::Relaxed);
    let clock = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    let pid = u64::from(std::process::id());
    let mut mix =
        SplitMix64(clock ^ pid.rotate_left(32) ^ instance.wrapping_mul(0x9E37_79B9_7F4A_7C15));
    mix.next_u64()
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn ceilings_double_from_the_base_and_stop_at_the_cap() {
        let b = Backoff::seeded(100 * MS, 1000 * MS, 1);
        let ceilings: Vec<_> = (1..=6).map(|n| b.ceiling(n)).collect();
        assert_eq!(
            ceilings,
            [100 * MS, 200 * MS, 400 * MS, 800 * MS, 1000 * MS, 1000 * MS]
        );
        assert_eq!(b.ceiling(0), 100 * MS, "no failure yet counts as the first");
        assert_eq!(b.ceiling(u32::MAX), 1000 * MS, "no overflow");
        let inverted = Backoff::seeded(5 * MS, 2 * MS, 1);
        assert_eq!(inverted.ceiling(1), 2 * MS, "the cap wins over the base");
    }

    #[test]
    fn every_wait_is_within_its_ceiling_and_they_spread() {
        let mut b = Backoff::new(100 * MS, 30_000 * MS);
        for failures in 1..=20 {
            for _ in 0..200 {
                let wait = b.wait_after(failures);
                assert!(wait <= b.ceiling(failures), "{wait:?} after {failures}");
            }
        }
        // Full jitter: the waits are spread over the range, not bunched.
        let waits: Vec<_> = (0..1000).map(|_| b.wait_after(10)).collect();
        let ceiling = b.ceiling(10);
        assert!(waits.iter().any(|w| *w < ceiling / 4));
        assert!(waits.iter().any(|w| *w > ceiling * 3 / 4));
    }

    #[test]
    fn next_wait_counts_failures_and_reset_starts_over() {
        let mut b = Backoff::seeded(10 * MS, 10_000 * MS, 7);
        for n in 1..=8 {
            assert!(b.next_wait() <= b.ceiling(n));
        }
        for _ in 0..100 {
            b.reset();
            assert!(b.next_wait() <= 10 * MS, "back to the base's ceiling");
        }
    }

    #[test]
    fn two_instances_do_not_retry_in_lockstep() {
        let sequence = |b: &mut Backoff| (0..16).map(|_| b.next_wait()).collect::<Vec<_>>();
        let (mut a, mut b) = (
            Backoff::new(200 * MS, 30_000 * MS),
            Backoff::new(200 * MS, 30_000 * MS),
        );
        assert_ne!(sequence(&mut a), sequence(&mut b));
        // The same seed is the same sequence (what tests may rely on).
        let (mut c, mut d) = (
            Backoff::seeded(200 * MS, 30_000 * MS, 42),
            Backoff::seeded(200 * MS, 30_000 * MS, 42),
        );
        assert_eq!(sequence(&mut c), sequence(&mut d));
    }

    #[test]
    fn retry_after_reads_seconds_and_http_dates() {
        let now = UNIX_EPOCH + Duration::from_secs(784_111_777); // Sun, 06 Nov 1994 08:49:37 GMT
        assert_eq!(retry_after(" 120 ", now), Some(Duration::from_secs(120)));
        assert_eq!(
            retry_after("Sun, 06 Nov 1994 08:51:37 GMT", now),
            Some(Duration::from_secs(120))
        );
        assert_eq!(
            retry_after("Sun, 06 Nov 1994 08:00:00 GMT", now),
            Some(Duration::ZERO),
            "a date in the past is no wait"
        );
        // The obsolete forms RFC 9110 still asks recipients to accept.
        assert_eq!(
            retry_after("Sunday, 06-Nov-94 08:51:37 GMT", now),
            Some(Duration::from_secs(120))
        );
        assert_eq!(
            retry_after("Sun Nov  6 08:51:37 1994", now),
            Some(Duration::from_secs(120))
        );
        for bad in ["", "soon", "-5", "1.5", "Sun, 06 Nov 1994 25:00:00 GMT"] {
            assert_eq!(retry_after(bad, now), None, "{bad:?}");
        }
    }
}
