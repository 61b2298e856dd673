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

/// `t + d`, saturating at the far future instead of overflowing.
pub fn add(t: DateTime<Utc>, d: Duration) -> DateTime<Utc> {
    chrono::Duration::from_std(d)
        .ok()
        .and_then(|d| t.checked_add_signed(d))
        .unwrap_or(DateTime::<Utc>::MAX_UTC)
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

#[cfg(test)]
mod tests {
    use super::*;

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
    fn timestamps_round_trip_at_fixed_width() {
        let t = now();
        let s = format_utc(t);
        assert_eq!(s.len(), "2026-01-01T00:00:00.000000Z".len());
        assert_eq!(parse_utc(&s), Some(t));
    }
}
