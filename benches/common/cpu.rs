//! The CPU time a process has used, from /proc: how a bench measures
//! whether a figure is bound by the machine's cores.

/// CPU seconds (user + system) a process has used so far, from
/// /proc/PID/stat (utime and stime, in clock ticks of 1/100 s on Linux).
pub fn cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // The command name (field 2) may hold spaces; the fields after it don't.
    let after = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
    let fields: Vec<&str> = after.split_whitespace().collect();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    // utime and stime are fields 14 and 15; `after` starts at field 3.
    (ticks(11) + ticks(12)) / 100.0
}
