//! What a piece of work asked the kernel to write: bytes and write calls,
//! from this process's `/proc/self/io` (Linux). At `synchronous=NORMAL` a
//! commit rarely waits for the disk, so the bytes SQLite hands the kernel
//! (WAL frames: one 4 KiB page plus a header per page a commit dirtied, and
//! checkpoint copies) are what a commit costs; these counters show why one
//! workload's commits cost more than another's.
#![allow(dead_code)] // each bench uses part of it

/// Counters at one moment; subtract two to get what happened in between.
#[derive(Debug, Clone, Copy, Default)]
pub struct IoCounters {
    /// Bytes passed to write-like system calls (`wchar`).
    pub bytes: u64,
    /// Write-like system calls (`syscw`).
    pub calls: u64,
}

impl IoCounters {
    /// Now, or `None` where `/proc/self/io` is not readable.
    pub fn now() -> Option<IoCounters> {
        let text = std::fs::read_to_string("/proc/self/io").ok()?;
        let field = |name: &str| {
            text.lines()
                .find_map(|line| line.strip_prefix(name)?.trim().parse::<u64>().ok())
        };
        Some(IoCounters {
            bytes: field("wchar:")?,
            calls: field("syscw:")?,
        })
    }

    /// What happened since `earlier`, per unit of work.
    pub fn per(self, earlier: IoCounters, units: usize) -> PerUnit {
        let units = units.max(1) as f64;
        PerUnit {
            bytes: self.bytes.saturating_sub(earlier.bytes) as f64 / units,
            calls: self.calls.saturating_sub(earlier.calls) as f64 / units,
        }
    }
}

/// Writes per unit of work (per cycle, per commit).
#[derive(Debug, Clone, Copy, Default)]
pub struct PerUnit {
    pub bytes: f64,
    pub calls: f64,
}

/// Measure `work`'s writes per unit; `None` where the counters are missing.
pub fn measure<T>(units: usize, work: impl FnOnce() -> T) -> (T, Option<PerUnit>) {
    let before = IoCounters::now();
    let out = work();
    let per = match (before, IoCounters::now()) {
        (Some(b), Some(a)) => Some(a.per(b, units)),
        _ => None,
    };
    (out, per)
}
