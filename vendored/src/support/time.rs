//! UTC timestamps and human durations (`7d`, `24h`, `30m`, `1s`, `500ms`).
//!
//! Stored timestamps use one fixed-width RFC 3339 form with microseconds and
//! a `Z`, so they sort as text in SQLite and read well in an audit.

use std::fmt::Debug;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{DateTime, SecondsFormat, Utc};
use tokio::sync::watch;

/// Where everything that decides by time reads it: a run's timestamps, an
/// approval's expiry, a claim's deadline, the next schedule tick. A value
/// passed to what reads time (never a global), so tests running side by
/// side in one process can each hold their own [`ManualClock`].
pub trait Clock: Send + Sync + Debug {
    /// The current time, at microsecond precision (see [`now`]).
    fn now(&self) -> DateTime<Utc>;

    /// Resolves once [`Clock::now`] has reached `deadline`: a timer on the
    /// system clock; on a [`ManualClock`], when it is set or advanced there.
    fn sleep_until(
        &self,
        deadline: DateTime<Utc>,
    ) -> Pin<Box<dyn Future<Output = ()> + Send + '_>> {
        let wait = (deadline - self.now()).to_std().unwrap_or(Duration::ZERO);
        Box::pin(tokio::time::sleep(wait))
    }
}

/// A cheap shared handle to a clock.
pub type SharedClock = Arc<dyn Clock>;

/// The real time ([`now`]): what every run, gate and server uses unless
/// given another clock.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> DateTime<Utc> {
        now()
    }
}

/// The system clock as a [`SharedClock`].
pub fn system() -> SharedClock {
    Arc::new(SystemClock)
}

/// A clock that stands still until told otherwise, for tests: pass it (as
/// a [`SharedClock`]) to an `AgentRun`, a `Gate` or a watcher, then
/// [`ManualClock::advance`] it to make an approval expire or a schedule
/// tick come without waiting. Whatever sleeps on it (`sleep_until`) wakes
/// when the time it waits for is reached.
#[derive(Debug)]
pub struct ManualClock {
    now: watch::Sender<DateTime<Utc>>,
    /// The deadline of every `sleep_until` future alive now.
    sleeping: Mutex<Vec<DateTime<Utc>>>,
}

impl ManualClock {
    /// A clock showing `start` (kept to the microsecond, like [`now`]).
    pub fn new(start: DateTime<Utc>) -> ManualClock {
        ManualClock {
            now: watch::Sender::new(micros(start)),
            sleeping: Mutex::new(Vec::new()),
        }
    }

    /// A clock showing the current system time.
    pub fn starting_now() -> ManualClock {
        ManualClock::new(now())
    }

    /// Set the time (it may go backwards) and wake the sleepers it reaches.
    pub fn set(&self, t: DateTime<Utc>) {
        self.now.send_replace(micros(t));
    }

    /// Move the time forward by `d` (saturating at the latest storable
    /// time) and wake the sleepers it reaches.
    pub fn advance(&self, d: Duration) {
        self.now.send_modify(|t| *t = add(*t, d));
    }

    /// How many tasks sleep on this clock until a time it has not reached
    /// (one woken by the last `set` or `advance` but not run yet is not
    /// counted): a test waits for a scheduler or a waiter to be asleep
    /// before it moves the clock, or to be asleep again after.
    pub fn sleepers(&self) -> usize {
        let now = self.now();
        self.sleeping().iter().filter(|d| **d > now).count()
    }

    fn sleeping(&self) -> std::sync::MutexGuard<'_, Vec<DateTime<Utc>>> {
        // A list of instants, consistent after every statement.
        self.sleeping.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl Clock for ManualClock {
    fn now(&self) -> DateTime<Utc> {
        *self.now.borrow()
    }

    fn sleep_until(
        &self,
        deadline: DateTime<Utc>,
    ) -> Pin<Box<dyn Future<Output = ()> + Send + '_>> {
        let mut rx = self.now.subscribe();
        self.sleeping().push(deadline);
        let asleep = Asleep {
            clock: self,
            deadline,
        };
        Box::pin(async move {
            let _asleep = asleep;
            // The sender lives as long as `self`, which outlives this future.
            let _ = rx.wait_for(|t| *t >= deadline).await;
        })
    }
}

/// One entry of [`ManualClock::sleeping`], removed with its future.
struct Asleep<'a> {
    clock: &'a ManualClock,
    deadline: DateTime<Utc>,
}

impl Drop for Asleep<'_> {
    fn drop(&mut self) {
        let mut sleeping = self.clock.sleeping();
        if let Some(i) = sleeping.iter().position(|d| *d == self.deadline) {
            sleeping.swap_remove(i);
        }
    }
}

fn micros(t: DateTime<Utc>) -> DateTime<Utc> {
    DateTime::from_timestamp_micros(t.timestamp_micros()).unwrap_or(t)
}

pub fn now() -> DateTime<Utc> {
    // Microsecond precision: what every store keeps, so a value read back
    // compares equal to the one written.
    let t = Utc::now();
    DateTime::from_timestamp_micros(t.timestamp_micros()).unwrap_or(t)
}

pub fn format_utc(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Micros, true)
}

pub fn parse_utc(s: &str) -> Option<DateTime<Utc>> {
    DateTime::parse_from_rfc3339(s)
        .ok()
        .map(|t| t.with_timezone(&Utc))
}

/// The latest instant a store can hold: stored timestamps have a four-digit
/// year (they sort as text in SQLite and parse back as RFC 3339), so
/// 9999-12-31T23:59:59.999999Z is the end of time for tollgate.
pub fn max_storable() -> DateTime<Utc> {
    // 253402300799 s is 9999-12-31T23:59:59Z.
    DateTime::from_timestamp(253_402_300_799, 999_999_000).unwrap_or(DateTime::<Utc>::MAX_UTC)
}

/// True when `t` can be written and read back by every store.
pub fn is_storable(t: DateTime<Utc>) -> bool {
    use chrono::Datelike;
    (0..=9999).contains(&t.year())
}

/// `now + ttl` would lie past [`max_storable`].
#[derive(Debug, Clone, thiserror::Error, PartialEq, Eq)]
#[error(
    "a duration of {seconds} s from {from} ends after 9999-12-31T23:59:59Z, the latest time a store can hold"
)]
pub struct OutOfRange {
    pub seconds: u64,
    pub from: String,
}

/// `t + d`, or [`OutOfRange`] when the result could not be stored: an
/// approval's `expires_at` is computed with this, so a huge TTL is an error
/// at the pause instead of a row nobody can read back.
pub fn checked_add(t: DateTime<Utc>, d: Duration) -> Result<DateTime<Utc>, OutOfRange> {
    chrono::Duration::from_std(d)
        .ok()
        .and_then(|d| t.checked_add_signed(d))
        .filter(|end| is_storable(*end))
        .ok_or_else(|| OutOfRange {
            seconds: d.as_secs(),
            from: format_utc(t),
        })
}

/// `t + d`, saturating at [`max_storable`] instead of overflowing (leases,
/// claims: a bound in the far future is as good as the end of time).
pub fn add(t: DateTime<Utc>, d: Duration) -> DateTime<Utc> {
    checked_add(t, d).unwrap_or_else(|_| max_storable())
}

/// Duration units, largest first: the order a duration writes them in.
const DURATION_UNITS: [(&str, u64); 6] = [
    ("w", 7 * 86_400_000),
    ("d", 86_400_000),
    ("h", 3_600_000),
    ("m", 60_000),
    ("s", 1_000),
    ("ms", 1),
];

/// Parse a duration such as `7d`, `24h`, `30m`, `90s`, `500ms` or `1h30m`.
///
/// The grammar, strict so that a typo is an error rather than a guess:
/// one or more `NUMBER UNIT` parts with nothing between them (no spaces,
/// signs or fractions), where NUMBER is decimal digits and UNIT is one of
/// `w d h m s ms`; each unit at most once, largest first (`1h30m`, not
/// `30m1h` or `1h1h`), and the total greater than zero. Surrounding
/// whitespace is ignored. Sums saturate rather than overflow (callers
/// bound them).
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let s = text.trim();
    if s.is_empty() {
        return Err("empty duration".into());
    }
    let mut total = Duration::ZERO;
    let mut rest = s;
    // Index in DURATION_UNITS of the last unit written: the next must be smaller.
    let mut last: Option<usize> = None;
    let mut seen = [false; DURATION_UNITS.len()];
    while !rest.is_empty() {
        let digits = rest.chars().take_while(|c| c.is_ascii_digit()).count();
        if digits == 0 {
            return Err(format!(
                "invalid duration {text:?}: expected a number followed by ms, s, m, h, d or w (e.g. 30m, 7d, 1h30m)"
            ));
        }
        let n: u64 = rest[..digits]
            .parse()
            .map_err(|_| format!("invalid duration {text:?}: number too large"))?;
        rest = &rest[digits..];
        let unit_len = rest.chars().take_while(|c| c.is_ascii_alphabetic()).count();
        let unit = &rest[..unit_len];
        rest = &rest[unit_len..];
        let Some(index) = DURATION_UNITS.iter().position(|(u, _)| *u == unit) else {
            return Err(if unit.is_empty() {
                format!(
                    "invalid duration {text:?}: missing unit after {n} (use ms, s, m, h, d or w)"
                )
            } else {
                format!(
                    "invalid duration {text:?}: unknown unit {unit:?} (use ms, s, m, h, d or w)"
                )
            });
        };
        if seen[index] {
            return Err(format!(
                "invalid duration {text:?}: the unit {unit:?} appears twice (write each unit once, e.g. 1h30m)"
            ));
        }
        seen[index] = true;
        if let Some(previous) = last {
            let before = DURATION_UNITS[previous].0;
            if index < previous {
                return Err(format!(
                    "invalid duration {text:?}: {unit:?} comes after the smaller unit {before:?} (write units largest first, e.g. 1h30m)"
                ));
            }
        }
        last = Some(index);
        let part = Duration::from_millis(n.saturating_mul(DURATION_UNITS[index].1));
        total = total.saturating_add(part);
    }
    if total.is_zero() {
        return Err(format!(
            "invalid duration {text:?}: must be greater than zero"
        ));
    }
    Ok(total)
}

/// The inverse of [`parse_duration`] for whole milliseconds: `7d`, `2d`,
/// `1h30m`, `90s` -> `1m30s`, `500ms`, largest units first, in the units a
/// spec is written in (days at most: `approvals.ttl: 7d` reads back as `7d`,
/// not `1w`). Sub-millisecond parts are dropped; zero is `0s`.
pub fn format_duration(d: Duration) -> String {
    const UNITS: &[(&str, u128)] = &[
        ("d", 86_400_000),
        ("h", 3_600_000),
        ("m", 60_000),
        ("s", 1_000),
        ("ms", 1),
    ];
    let mut ms = d.as_millis();
    if ms == 0 {
        return "0s".to_string();
    }
    let mut out = String::new();
    for (unit, size) in UNITS {
        if ms >= *size {
            out.push_str(&format!("{}{unit}", ms / size));
            ms %= size;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_in_spec_units_largest_first() {
        assert_eq!(format_duration(Duration::from_secs(7 * 86_400)), "7d");
        assert_eq!(format_duration(Duration::from_secs(14 * 86_400)), "14d");
        assert_eq!(format_duration(Duration::from_secs(5400)), "1h30m");
        assert_eq!(format_duration(Duration::from_secs(90)), "1m30s");
        assert_eq!(format_duration(Duration::from_millis(500)), "500ms");
        assert_eq!(format_duration(Duration::from_millis(1_001)), "1s1ms");
        assert_eq!(format_duration(Duration::ZERO), "0s");
    }

    #[test]
    fn formatted_durations_parse_back_to_themselves() {
        let mut samples = vec![1, 999, 1_000, 59_999, 60_000, 3_600_000, 86_400_000];
        samples.extend([5_400_000, 604_800_000, 90_061_001, 315_360_000_000]);
        // A spread of irregular values too.
        let mut x: u64 = 1;
        for _ in 0..500 {
            x = x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
            samples.push(1 + x % 400_000_000_000);
        }
        for ms in samples {
            let d = Duration::from_millis(ms);
            let text = format_duration(d);
            assert_eq!(parse_duration(&text), Ok(d), "{ms}ms formatted as {text}");
        }
        // And parsing then formatting is canonical: compounds normalise.
        assert_eq!(format_duration(parse_duration("90m").unwrap()), "1h30m");
        assert_eq!(format_duration(parse_duration("1w").unwrap()), "7d");
    }

    #[test]
    fn parses_units_and_compounds() {
        assert_eq!(parse_duration("7d").unwrap(), Duration::from_secs(604_800));
        assert_eq!(parse_duration("1h30m").unwrap(), Duration::from_secs(5400));
        assert_eq!(parse_duration("500ms").unwrap(), Duration::from_millis(500));
        assert_eq!(
            parse_duration("2w").unwrap(),
            Duration::from_secs(1_209_600)
        );
    }

    #[test]
    fn rejects_bad_durations_with_a_reason() {
        assert!(parse_duration("").is_err());
        assert!(parse_duration("7").unwrap_err().contains("missing unit"));
        assert!(parse_duration("3x").unwrap_err().contains("unknown unit"));
        assert!(
            parse_duration("0s")
                .unwrap_err()
                .contains("greater than zero")
        );
        assert!(
            parse_duration("d")
                .unwrap_err()
                .contains("expected a number")
        );
    }

    #[test]
    fn each_unit_is_written_once_largest_first() {
        for repeated in ["1h1h", "1h30m1h", "5ms5ms", "1d2d"] {
            let err = parse_duration(repeated).unwrap_err();
            assert!(err.contains("appears twice"), "{repeated}: {err}");
        }
        for unordered in ["30m1h", "1s1m", "5ms1s", "1d1w"] {
            let err = parse_duration(unordered).unwrap_err();
            assert!(err.contains("largest first"), "{unordered}: {err}");
        }
        for other in [
            "1h 30m",
            "+1h",
            "-1h",
            "1.5h",
            "1H",
            " 1h30m5s ",
            "1w2d3h4m5s6ms",
        ] {
            let parsed = parse_duration(other);
            match other {
                " 1h30m5s " => assert_eq!(parsed, Ok(Duration::from_secs(5405))),
                "1w2d3h4m5s6ms" => assert_eq!(
                    parsed,
                    Ok(Duration::from_millis(
                        ((9 * 24 + 3) * 3600 + 4 * 60 + 5) * 1000 + 6
                    ))
                ),
                _ => assert!(parsed.is_err(), "{other}: {parsed:?}"),
            }
        }
        // Parts of zero are allowed; the sum is what must not be.
        assert_eq!(parse_duration("1h0m"), Ok(Duration::from_secs(3600)));
        // A huge count saturates instead of overflowing.
        assert_eq!(
            parse_duration("18446744073709551615w"),
            Ok(Duration::from_millis(u64::MAX))
        );
    }

    #[test]
    fn sums_past_the_year_9999_are_an_error_and_add_saturates_at_a_storable_time() {
        let t = now();
        let huge = Duration::from_millis(99_999_999_999_999_999);
        let err = checked_add(t, huge).unwrap_err();
        assert!(err.to_string().contains("9999-12-31"), "{err}");
        assert_eq!(add(t, huge), max_storable());
        let end = format_utc(max_storable());
        assert_eq!(end, "9999-12-31T23:59:59.999999Z");
        assert_eq!(parse_utc(&end), Some(max_storable()));
        assert!(checked_add(t, Duration::from_secs(86_400)).is_ok());
    }

    #[tokio::test]
    async fn a_manual_clock_moves_only_when_told_and_wakes_its_sleepers() {
        let start = parse_utc("2026-01-05T09:00:00.123456789Z").unwrap();
        let clock = Arc::new(ManualClock::new(start));
        assert_eq!(format_utc(clock.now()), "2026-01-05T09:00:00.123456Z");
        assert_eq!(clock.now(), clock.now(), "it stands still");
        let deadline = clock.now() + chrono::TimeDelta::seconds(60);
        let sleeper = {
            let clock = Arc::clone(&clock);
            tokio::spawn(async move { clock.sleep_until(deadline).await })
        };
        let mut asleep = false;
        for _ in 0..500 {
            if clock.sleepers() == 1 {
                asleep = true;
                break;
            }
            tokio::task::yield_now().await;
        }
        assert!(asleep, "the sleeper subscribed");
        clock.advance(Duration::from_secs(59));
        tokio::task::yield_now().await;
        assert!(!sleeper.is_finished(), "59 s is not 60 s");
        clock.advance(Duration::from_secs(1));
        tokio::time::timeout(Duration::from_secs(30), sleeper)
            .await
            .expect("woken when its time came")
            .unwrap();
        assert_eq!(clock.sleepers(), 0);
        // A deadline already reached resolves at once; set goes anywhere.
        clock.sleep_until(start).await;
        clock.set(start);
        assert_eq!(clock.now(), micros(start));
        let system: SharedClock = system();
        assert!(system.now() > start);
    }

    #[test]
    fn timestamps_round_trip_at_fixed_width() {
        let t = now();
        let s = format_utc(t);
        assert_eq!(s.len(), "2026-01-01T00:00:00.000000Z".len());
        assert_eq!(parse_utc(&s), Some(t));
    }
}
