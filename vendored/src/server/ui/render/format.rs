//! Times as people read them on a page, and ids as paths carry them.

use chrono::{DateTime, Utc};

/// `2026-12-01 09:08:05 UTC`: to the second, so that two runs started
/// in the same minute tell apart.
pub(crate) fn time(t: DateTime<Utc>) -> String {
    t.format("%Y-%m-%d %H:%M:%S UTC").to_string()
}

/// RFC 3339 with every stored digit, for a `title` (the whole timestamp
/// on hover).
pub(crate) fn full(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(chrono::SecondsFormat::AutoSi, true)
}

/// RFC 3339 to the second, for `<time datetime=...>`.
pub(crate) fn machine(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

/// What a path segment escapes: everything but RFC 3986's unreserved
/// characters (so a UUID or run id reads as itself).
const SEGMENT: &percent_encoding::AsciiSet = &percent_encoding::NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'_')
    .remove(b'.')
    .remove(b'~');

/// A path segment (a key, a run id), percent-encoded.
pub(crate) fn segment(text: &str) -> String {
    percent_encoding::utf8_percent_encode(text, SEGMENT).to_string()
}

/// A span as its two largest units: `45s`, `3m`, `2h 5m`, `4d 3h`.
pub(crate) fn span(from: DateTime<Utc>, to: DateTime<Utc>) -> String {
    let secs = (to - from).num_seconds().max(0);
    let (d, h, m) = (secs / 86_400, secs % 86_400 / 3600, secs % 3600 / 60);
    match (d, h, m) {
        (0, 0, 0) => format!("{secs}s"),
        (0, 0, m) => format!("{m}m"),
        (0, h, 0) => format!("{h}h"),
        (0, h, m) => format!("{h}h {m}m"),
        (d, 0, _) => format!("{d}d"),
        (d, h, _) => format!("{d}d {h}h"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spans_read_naturally() {
        let t = crate::support::time::parse_utc("2026-12-01T10:00:00Z").unwrap();
        let at = |s: i64| t + chrono::Duration::seconds(s);
        assert_eq!(span(t, at(45)), "45s");
        assert_eq!(span(t, at(180)), "3m");
        assert_eq!(span(t, at(7500)), "2h 5m");
        assert_eq!(span(t, at(7200)), "2h");
        assert_eq!(span(t, at(4 * 86_400 + 3 * 3600)), "4d 3h");
        assert_eq!(span(at(10), t), "0s");
        assert_eq!(
            time(t + chrono::Duration::milliseconds(7_250)),
            "2026-12-01 10:00:07 UTC"
        );
        assert_eq!(
            full(t + chrono::Duration::milliseconds(7_250)),
            "2026-12-01T10:00:07.250Z"
        );
    }
}
