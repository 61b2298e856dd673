//! A last log line when the process dies of a fatal signal.
//!
//! A process killed by SIGBUS or SIGSEGV otherwise vanishes with no word in
//! its log: an operator sees a restart and nothing else. The likeliest
//! SIGBUS here is SQLite's `-shm` index truncated under this process's
//! memory mapping (another process rebuilt it, or someone removed or copied
//! over the database's files while it ran), so the line says so.
//!
//! The handler may only do what is async-signal-safe: every line is built
//! when the handler is installed, and at the signal the handler only joins
//! a timestamp and that line on the stack and writes them to stderr in one
//! `write(2)` (one thread does, if several fault at once). It then puts back the action that was there before (Rust's
//! own stack-overflow handler, or the default) and lets the signal take
//! its course, so the process still dies of the same signal (its exit
//! status, a core dump) as it would have without this module.
//!
//! SIGKILL cannot be caught; SIGTERM and SIGINT are a graceful stop, not
//! a death, and are handled by `serve` (see server::shutdown).

use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, Ordering};

/// The signals that kill a process with no chance to log otherwise.
const FATAL: [(libc::c_int, &str, &str); 5] = [
    (
        libc::SIGBUS,
        "SIGBUS",
        "bus error: a memory-mapped file shrank under this process; with SQLite that is its \
         -shm index, truncated by another process or by hand (see docs/operating.md, \"Where the \
         state lives\")",
    ),
    (libc::SIGSEGV, "SIGSEGV", "invalid memory access"),
    (libc::SIGILL, "SIGILL", "illegal instruction"),
    (libc::SIGFPE, "SIGFPE", "arithmetic fault"),
    (libc::SIGABRT, "SIGABRT", "aborted"),
];

/// One prepared line per fatal signal, in text and JSON, and the actions
/// that were installed before ours.
struct Prepared {
    text: Vec<Vec<u8>>,
    json: Vec<Vec<u8>>,
    previous: Vec<libc::sigaction>,
}

static PREPARED: OnceLock<Prepared> = OnceLock::new();
static JSON: AtomicBool = AtomicBool::new(false);

/// Install the handlers (once per process; later calls do nothing).
pub fn install() {
    PREPARED.get_or_init(|| {
        let pid = std::process::id();
        let line =
            |name: &str, why: &str| format!("fatal signal {name} ({why}); process {pid} stops now");
        let text = FATAL
            .iter()
            .map(|(_, name, why)| {
                format!(" ERROR tollgate_runtime::fatal: {}\n", line(name, why)).into_bytes()
            })
            .collect();
        let json = FATAL
            .iter()
            .map(|(_, name, why)| {
                let rest = serde_json::json!({
                    "level": "ERROR",
                    "target": "tollgate_runtime::fatal",
                    "message": line(name, why),
                    "fields": {"signal": name, "pid": pid},
                });
                // The timestamp goes in front at the signal: `{"timestamp":"…",` + the rest.
                let rest = rest.to_string();
                format!(",{}\n", &rest[1..]).into_bytes()
            })
            .collect();
        let previous = FATAL
            .iter()
            .map(|(signal, ..)| install_one(*signal))
            .collect();
        Prepared {
            text,
            json,
            previous,
        }
    });
}

/// Write the last line as one JSON object (`TOLLGATE_LOG_FORMAT=json`).
pub fn log_as_json(json: bool) {
    JSON.store(json, Ordering::Relaxed);
}

fn install_one(signal: libc::c_int) -> libc::sigaction {
    // SAFETY: zeroed is a valid sigaction (no handler, empty mask); the
    // calls are given valid pointers to it and to `previous`.
    unsafe {
        let mut action: libc::sigaction = std::mem::zeroed();
        action.sa_sigaction = on_fatal as *const () as libc::sighandler_t;
        // On the alternate stack Rust sets up per thread: a stack overflow
        // must still get its line (and then Rust's own message).
        action.sa_flags = libc::SA_SIGINFO | libc::SA_ONSTACK;
        libc::sigemptyset(&mut action.sa_mask);
        let mut previous: libc::sigaction = std::mem::zeroed();
        libc::sigaction(signal, &action, &mut previous);
        previous
    }
}

extern "C" fn on_fatal(signal: libc::c_int, info: *mut libc::siginfo_t, _: *mut libc::c_void) {
    let Some(prepared) = PREPARED.get() else {
        return;
    };
    let Some(at) = FATAL.iter().position(|(s, ..)| *s == signal) else {
        return;
    };
    // Several threads can fault at once (every worker that touches a
    // truncated `-shm` mapping): one writes the line, the others wait for
    // it, so the log ends with one whole line, not pieces of several.
    if REPORTING.swap(true, Ordering::AcqRel) {
        wait_for_the_line();
    } else {
        let mut stamp = [0u8; 32];
        let stamp = timestamp(&mut stamp);
        let mut line = [0u8; LINE_BYTES];
        let json = JSON.load(Ordering::Relaxed);
        let line = compose(&mut line, stamp, prepared, at, json);
        // SAFETY: write(2) is async-signal-safe; the buffer outlives it.
        unsafe { write_all(line) };
        WRITTEN.store(true, Ordering::Release);
    }
    // SAFETY: sigaction(2) and raise(3) are async-signal-safe; `info` is
    // the kernel's.
    unsafe {
        libc::sigaction(signal, &prepared.previous[at], std::ptr::null_mut());
        // A fault (si_code > 0: SIGBUS, SIGSEGV from the hardware) happens
        // again when the handler returns, and meets the previous action. A
        // signal that was sent (kill, raise, abort) would not: send it again.
        if info.is_null() || (*info).si_code <= 0 {
            libc::raise(signal);
        }
    }
}

/// A thread is writing the last line.
static REPORTING: AtomicBool = AtomicBool::new(false);
/// The last line is written.
static WRITTEN: AtomicBool = AtomicBool::new(false);

/// Room for a prepared line and its timestamp: the longest is about 330
/// bytes. A line that does not fit is cut (it stays one write).
const LINE_BYTES: usize = 1024;

/// A thread that faulted second waits (at most a second) for the first to
/// write its line, so its own fault does not end the process mid-line.
fn wait_for_the_line() {
    let pause = libc::timespec {
        tv_sec: 0,
        tv_nsec: 1_000_000,
    };
    for _ in 0..1_000 {
        if WRITTEN.load(Ordering::Acquire) {
            return;
        }
        // SAFETY: nanosleep(2) is async-signal-safe; a valid timespec.
        unsafe { libc::nanosleep(&pause, std::ptr::null_mut()) };
    }
}

/// The whole line in `buf`, so it goes out in one `write(2)`: a pipe takes
/// a write of up to 4096 bytes whole, so no other thread's output lands
/// inside it.
fn compose<'a>(
    buf: &'a mut [u8; LINE_BYTES],
    stamp: &[u8],
    prepared: &Prepared,
    at: usize,
    json: bool,
) -> &'a [u8] {
    let parts: [&[u8]; 4] = if json {
        [b"{\"timestamp\":\"", stamp, b"\"", &prepared.json[at]]
    } else {
        [stamp, &prepared.text[at], b"", b""]
    };
    let mut len = 0;
    for part in parts {
        let n = part.len().min(LINE_BYTES - len);
        buf[len..len + n].copy_from_slice(&part[..n]);
        len += n;
    }
    &buf[..len]
}

unsafe fn write_all(mut bytes: &[u8]) {
    while !bytes.is_empty() {
        // SAFETY: the caller's buffer is valid for its length.
        let n = unsafe { libc::write(2, bytes.as_ptr().cast(), bytes.len()) };
        if n <= 0 {
            return;
        }
        bytes = &bytes[n as usize..];
    }
}

/// Now as `YYYY-MM-DDTHH:MM:SS.ffffffZ`, formatted without allocating
/// (clock_gettime is async-signal-safe; chrono is not promised to be).
fn timestamp(buf: &mut [u8; 32]) -> &[u8] {
    // SAFETY: a valid pointer to a timespec.
    let mut now: libc::timespec = unsafe { std::mem::zeroed() };
    unsafe { libc::clock_gettime(libc::CLOCK_REALTIME, &mut now) };
    let secs = now.tv_sec.max(0) as u64;
    let micros = (now.tv_nsec.max(0) as u64) / 1_000;
    let (year, month, day) = civil_from_days((secs / 86_400) as i64);
    let of_day = secs % 86_400;
    let fields: [(u64, usize); 7] = [
        (year.max(0) as u64, 4),
        (month, 2),
        (day, 2),
        (of_day / 3600, 2),
        (of_day / 60 % 60, 2),
        (of_day % 60, 2),
        (micros, 6),
    ];
    let separators = [b'-', b'-', b'T', b':', b':', b'.', b'Z'];
    let mut at = 0;
    for ((value, width), separator) in fields.iter().zip(separators) {
        for i in 0..*width {
            let digit = value / 10u64.pow((width - 1 - i) as u32) % 10;
            buf[at] = b'0' + digit as u8;
            at += 1;
        }
        buf[at] = separator;
        at += 1;
    }
    &buf[..at]
}

/// The proleptic Gregorian date of a day count since 1970-01-01 (Howard
/// Hinnant's `civil_from_days`).
fn civil_from_days(days: i64) -> (i64, u64, u64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u64;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u64;
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_timestamp_matches_chrono() {
        let mut buf = [0u8; 32];
        let before = chrono::Utc::now();
        let stamp = String::from_utf8(timestamp(&mut buf).to_vec()).expect("ascii");
        let parsed = chrono::DateTime::parse_from_rfc3339(&stamp).expect(&stamp);
        let after = chrono::Utc::now();
        assert!(parsed >= before && parsed <= after, "{stamp}");
    }

    #[test]
    fn a_line_is_whole_and_parses_in_either_format() {
        install();
        let prepared = PREPARED.get().expect("installed");
        let mut stamp = [0u8; 32];
        let stamp = timestamp(&mut stamp).to_vec();
        let mut buf = [0u8; LINE_BYTES];
        let json = compose(&mut buf, &stamp, prepared, 0, true).to_vec();
        let json = std::str::from_utf8(&json).expect("utf-8");
        assert!(json.ends_with('\n'), "{json}");
        let line: serde_json::Value = serde_json::from_str(json.trim_end()).expect(json);
        assert_eq!(line["fields"]["signal"], "SIGBUS");
        assert_eq!(
            line["timestamp"],
            std::str::from_utf8(&stamp).expect("ascii")
        );
        let mut buf = [0u8; LINE_BYTES];
        let text = compose(&mut buf, &stamp, prepared, 0, false).to_vec();
        let text = std::str::from_utf8(&text).expect("utf-8");
        assert!(
            text.starts_with(std::str::from_utf8(&stamp).expect("ascii")),
            "{text}"
        );
        assert!(
            text.contains("fatal signal SIGBUS") && text.ends_with('\n'),
            "{text}"
        );
    }

    #[test]
    fn days_become_dates() {
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(civil_from_days(11_016), (2000, 2, 29));
        assert_eq!(civil_from_days(20_788), (2026, 12, 1));
    }
}
