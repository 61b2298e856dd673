//! How every bench reports a figure: the median of several samples with the
//! smallest and largest beside it, so one lucky or unlucky run on a shared
//! machine neither makes nor breaks a number; comparisons are ratios of
//! medians.
#![allow(dead_code)] // each bench uses part of it

/// Samples per figure unless a bench says otherwise.
pub const SAMPLES: usize = 5;

/// The median, smallest and largest of a figure's samples.
#[derive(Debug, Clone, Copy)]
pub struct Stats {
    pub median: f64,
    pub min: f64,
    pub max: f64,
}

impl Stats {
    pub fn of(samples: &[f64]) -> Stats {
        assert!(!samples.is_empty(), "a figure needs at least one sample");
        let mut s = samples.to_vec();
        s.sort_by(|a, b| a.total_cmp(b));
        let mid = s.len() / 2;
        let median = if s.len() % 2 == 1 {
            s[mid]
        } else {
            (s[mid - 1] + s[mid]) / 2.0
        };
        Stats {
            median,
            min: s[0],
            max: s[s.len() - 1],
        }
    }

    /// `median (min..max)` with `decimals` places.
    pub fn show(&self, decimals: usize) -> String {
        format!(
            "{:.*} ({:.*}..{:.*})",
            decimals, self.median, decimals, self.min, decimals, self.max
        )
    }
}

/// One aligned line of a bench's table: what, median (min..max), the target.
pub fn row(what: &str, figure: &str, target: &str) -> String {
    format!("{what:<46} {figure:>26}   {target}")
        .trim_end()
        .to_string()
}

/// A numeric knob from the environment, or its default.
pub fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}
