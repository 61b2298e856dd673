//! UTC timestamps and human durations (`7d`, `24h`, `30m`, `1s`, `500ms`).
//!
//! Stored timestamps use one fixed-width RFC 3339 form with microseconds and
//! a `Z`, so they sort as text in SQLite and read well in an audit.

use std::time::Duration;

use chrono::{DateTime, SecondsFormat, Utc};

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

/// Parse a duration such as `7d`, `24h`, `30m`, `90s`, `500ms` or `1h30m`.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let s = text.trim();
    if s.is_empty() {
        return Err("empty duration".into());
    }
    let mut total = Duration::ZERO;
    let mut rest = s;
    while !rest.is_empty() {
        let digits = rest.chars().take_while(|c| c.is_ascii_digit()).count();
        if digits == 0 {
            return Err(format!(
                "invalid duration {text:?}: expected a number followed by ms, s, m, h, d or w (e.g. 30m, 7d)"
            ));
        }
        let n: u64 = rest[..digits]
            .parse()
            .map_err(|_| format!("invalid duration {text:?}: number too large"))?;
        rest = &rest[digits..];
        let unit_len = rest.chars().take_while(|c| c.is_ascii_alphabetic()).count();
        let unit = &rest[..unit_len];
        rest = &rest[unit_len..];
        let part = match unit {
            "ms" => Duration::from_millis(n),
            "s" => Duration::from_secs(n),
            "m" => Duration::from_secs(n.saturating_mul(60)),
            "h" => Duration::from_secs(n.saturating_mul(3600)),
            "d" => Duration::from_secs(n.saturating_mul(86_400)),
            "w" => Duration::from_secs(n.saturating_mul(7 * 86_400)),
            "" => {
                return Err(format!(
                    "invalid duration {text:?}: missing unit after {n} (use ms, s, m, h, d or w)"
                ));
            }
            other => {
                return Err(format!(
                    "invalid duration {text:?}: unknown unit {other:?} (use ms, s, m, h, d or w)"
                ));
            }
        };
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

    #[test]
    fn timestamps_round_trip_at_fixed_width() {
        let t = now();
        let s = format_utc(t);
        assert_eq!(s.len(), "2026-01-01T00:00:00.000000Z".len());
        assert_eq!(parse_utc(&s), Some(t));
    }
}
