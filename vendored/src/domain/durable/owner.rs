//! Who drives a run, recorded well enough that a process on the same
//! host can tell, without waiting out the lease, that the driver died.
//!
//! A run's owner is a string (`tollgate_runs.owner`), so the identity is
//! encoded in it rather than in new columns: nothing to migrate in three
//! stores, an older binary still reads and compares owners as opaque
//! strings, and the take-over stays one conditional write on the exact
//! string. The format:
//!
//! ```text
//! HOST:PID:RANDOM:START:BOOT_ID:PID_NS[.TIME_NS]
//! ```
//!
//! `START` is the process's start time in clock ticks since boot
//! (`/proc/PID/stat` field 22), `BOOT_ID` the kernel's
//! `/proc/sys/kernel/random/boot_id`, `PID_NS` and `TIME_NS` the inode
//! numbers of its pid and time namespaces. An owner written by an older
//! version (`HOST:PID:RANDOM`) or by a process that could not read these
//! has no stamp, and its runs wait for the lease as before.
//!
//! The verdict ([`judge`]) errs one way only: it says "dead" when the
//! owner cannot be running, and "unknown" (wait for the lease) whenever
//! it cannot be sure. A pid alone proves nothing (pids are reused, and
//! every container has its own pid 1), a host name alone proves nothing
//! (containers on different machines share names), so a pid is compared
//! only within one kernel boot and one pid namespace, together with its
//! start time.

use std::fmt;
use std::sync::OnceLock;

/// A run owner's identity, parsed from or formatted to the owner string.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    pub host: String,
    pub pid: u32,
    /// Tells apart two processes with one pid when there is no stamp.
    pub random: String,
    /// `None`: the process could not read its own process table (not
    /// Linux, no /proc), or an owner string of an older version.
    pub stamp: Option<Stamp>,
}

/// What pins a process down on its host: its start and where its pid means
/// something.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stamp {
    /// Clock ticks since boot (`/proc/PID/stat` field 22).
    pub start: u64,
    /// `/proc/sys/kernel/random/boot_id`: a new one at every boot.
    pub boot_id: String,
    /// The pid namespace's inode: pids compare only within one.
    pub pid_ns: u64,
    /// The time namespace's inode (kernels since 5.6): start times are
    /// shown shifted by the reader's time namespace, so they compare only
    /// within one.
    pub time_ns: Option<u64>,
}

impl Identity {
    /// This process's identity, read once.
    pub fn current() -> &'static Identity {
        static ID: OnceLock<Identity> = OnceLock::new();
        ID.get_or_init(|| {
            let random = uuid::Uuid::new_v4().simple().to_string();
            Identity {
                host: host_name(),
                pid: std::process::id(),
                random: random[..8].to_string(),
                stamp: proc::own_stamp(),
            }
        })
    }

    /// The identity an owner string records, or `None` for one without a
    /// stamp (an older version's `HOST:PID:RANDOM`, or anything else).
    pub fn parse(owner: &str) -> Option<Identity> {
        let mut parts = owner.rsplitn(6, ':');
        let ns = parts.next()?;
        let boot_id = parts.next()?;
        let start = parts.next()?;
        let random = parts.next()?;
        let pid = parts.next()?;
        let host = parts.next()?;
        let (pid_ns, time_ns) = match ns.split_once('.') {
            Some((pid_ns, time_ns)) => (pid_ns, Some(number(time_ns)?)),
            None => (ns, None),
        };
        let is_random = random.len() == 8 && random.bytes().all(|b| b.is_ascii_hexdigit());
        if host.is_empty() || !is_boot_id(boot_id) || !is_random {
            return None;
        }
        Some(Identity {
            host: host.to_string(),
            pid: u32::try_from(number(pid)?).ok()?,
            random: random.to_string(),
            stamp: Some(Stamp {
                start: number(start)?,
                boot_id: boot_id.to_string(),
                pid_ns: number(pid_ns)?,
                time_ns,
            }),
        })
    }
}

impl fmt::Display for Identity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}:{}", self.host, self.pid, self.random)?;
        if let Some(stamp) = &self.stamp {
            write!(f, ":{}:{}:{}", stamp.start, stamp.boot_id, stamp.pid_ns)?;
            if let Some(time_ns) = stamp.time_ns {
                write!(f, ".{time_ns}")?;
            }
        }
        Ok(())
    }
}

/// A boot id as the kernel writes it: a UUID in lower-case hex.
fn is_boot_id(text: &str) -> bool {
    text.len() == 36
        && text
            .bytes()
            .all(|b| b == b'-' || b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// Digits only (no sign, no spaces), as the format writes them.
fn number(text: &str) -> Option<u64> {
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    text.parse().ok()
}

fn host_name() -> String {
    read_proc_file("/proc/sys/kernel/hostname")
        .ok()
        .or_else(|| std::env::var("HOSTNAME").ok())
        .map(|h| h.trim().to_string())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "localhost".into())
}

/// Whether a run's owner still runs, as far as this process can tell.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Liveness {
    Alive,
    /// It cannot be running: its runs may be taken over now. Says why.
    Dead(String),
    /// Cannot tell (another host, another container, an older owner
    /// string): its runs wait for the lease. Says why.
    Unknown(String),
}

/// What the process table says about a pid (in this process's pid
/// namespace).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Probe {
    /// No process has this pid.
    Gone,
    /// A process has it, started at `start` (clock ticks since boot);
    /// `exited` when every thread of it has exited (a zombie its parent
    /// has not reaped yet: it runs nothing any more).
    Present { start: u64, exited: bool },
    /// It may exist, but it cannot be read (hidden by `hidepid`, say).
    Unreadable,
}

/// The process table a verdict reads: the real one ([`Proc`]), or a
/// test's.
pub trait Processes {
    fn probe(&self, pid: u32) -> Probe;
}

/// This host's process table, through `kill(pid, 0)` and `/proc`.
pub struct Proc;

impl Processes for Proc {
    fn probe(&self, pid: u32) -> Probe {
        proc::probe(pid)
    }
}

/// Whether `owner` still runs, judged by `me` through `processes`.
/// `one_kernel`: every process sharing the store runs on one kernel (a
/// SQLite file: its locks and shared memory work only there), so an owner
/// with this host's name and another boot id ran before a reboot. On a
/// store shared across machines (PostgreSQL) another boot id may as well
/// be another machine with the same name, so it waits for the lease.
pub fn judge(me: &Identity, owner: &str, one_kernel: bool, processes: &impl Processes) -> Liveness {
    if owner == me.to_string() {
        return Liveness::Alive;
    }
    let Some(mine) = &me.stamp else {
        return Liveness::Unknown("this process cannot read its host's process table".into());
    };
    let Some(them) = Identity::parse(owner) else {
        return Liveness::Unknown("the owner records no process start time".into());
    };
    let Some(theirs) = &them.stamp else {
        return Liveness::Unknown("the owner records no process start time".into());
    };
    if theirs.boot_id != mine.boot_id {
        if one_kernel && them.host == me.host {
            return Liveness::Dead(format!(
                "host {} booted again since (boot id {})",
                them.host, theirs.boot_id
            ));
        }
        return Liveness::Unknown(format!(
            "another host (boot id {}, not this one's)",
            theirs.boot_id
        ));
    }
    if theirs.pid_ns != mine.pid_ns || theirs.time_ns != mine.time_ns {
        return Liveness::Unknown("another container on this host (another pid namespace)".into());
    }
    match processes.probe(them.pid) {
        Probe::Gone => Liveness::Dead(format!("process {} is gone", them.pid)),
        Probe::Present { exited: true, .. } => Liveness::Dead(format!(
            "process {} exited (its parent has not reaped it yet)",
            them.pid
        )),
        // Two live processes never share a pid: another start time means
        // the pid was reused after the owner died.
        Probe::Present { start, .. } if start != theirs.start => Liveness::Dead(format!(
            "process {} is gone (its pid now belongs to another process)",
            them.pid
        )),
        Probe::Present { .. } => Liveness::Alive,
        Probe::Unreadable => Liveness::Unknown(format!("cannot read process {}", them.pid)),
    }
}

#[cfg(target_os = "linux")]
mod proc {
    use super::{Probe, Stamp, read_proc_file};

    /// This process's stamp, or `None` when /proc does not describe it
    /// (no /proc, or a /proc of another pid namespace: its `self` would
    /// not be this process's pid).
    pub(super) fn own_stamp() -> Option<Stamp> {
        let stat = read_proc_file("/proc/self/stat").ok()?;
        let (pid, start, _) = parse_stat(&stat)?;
        if pid != std::process::id() {
            return None;
        }
        let boot_id = read_proc_file("/proc/sys/kernel/random/boot_id").ok()?;
        let boot_id = boot_id.trim().to_ascii_lowercase();
        if !super::is_boot_id(&boot_id) {
            return None;
        }
        Some(Stamp {
            start,
            boot_id,
            pid_ns: namespace("pid")?,
            time_ns: namespace("time"),
        })
    }

    /// The inode of this process's namespace `kind` (`pid:[4026531836]`).
    fn namespace(kind: &str) -> Option<u64> {
        let link = std::fs::read_link(format!("/proc/self/ns/{kind}")).ok()?;
        let link = link.to_str()?;
        link.strip_prefix(kind)?
            .strip_prefix(":[")?
            .strip_suffix(']')?
            .parse()
            .ok()
    }

    /// Pid, start time (field 22) and state (field 3) of a `stat` line.
    /// The command name (field 2) is in parentheses and may hold spaces
    /// and parentheses itself, so fields are counted after the last `)`.
    pub(super) fn parse_stat(stat: &str) -> Option<(u32, u64, char)> {
        let (head, tail) = stat.rsplit_once(')')?;
        let pid = head.split_once(' ')?.0.trim().parse().ok()?;
        let mut fields = tail.split_ascii_whitespace();
        let state = fields.next()?.chars().next()?;
        // Field 3 was the state; field 22 is 19 further on.
        let start = fields.nth(18)?.parse().ok()?;
        Some((pid, start, state))
    }

    /// Whether a pid has a process: `kill(pid, 0)` sends nothing and
    /// answers for every process of this pid namespace, even one /proc
    /// hides (`hidepid`) or one of another user (EPERM: it exists).
    fn exists(pid: u32) -> Option<bool> {
        let pid = libc::pid_t::try_from(pid).ok().filter(|p| *p > 0)?;
        // SAFETY: signal 0 only checks that the process exists and may be
        // signalled; no signal is sent, no memory is touched.
        if unsafe { libc::kill(pid, 0) } == 0 {
            return Some(true);
        }
        match std::io::Error::last_os_error().raw_os_error() {
            Some(libc::ESRCH) => Some(false),
            Some(libc::EPERM) => Some(true),
            _ => None,
        }
    }

    pub(super) fn probe(pid: u32) -> Probe {
        match exists(pid) {
            Some(false) => return Probe::Gone,
            None => return Probe::Unreadable,
            Some(true) => {}
        }
        let Ok(stat) = read_proc_file(format!("/proc/{pid}/stat")) else {
            // Exited in between, or hidden from this process: ask again.
            return match exists(pid) {
                Some(false) => Probe::Gone,
                _ => Probe::Unreadable,
            };
        };
        let Some((_, start, state)) = parse_stat(&stat) else {
            return Probe::Unreadable;
        };
        let exited = match state {
            'Z' | 'X' => match threads_all_exited(pid) {
                Some(all) => all,
                None => return Probe::Unreadable,
            },
            _ => false,
        };
        Probe::Present { start, exited }
    }

    /// A zombie leader may still have live threads (it called
    /// `pthread_exit`): the process has exited only if every thread has.
    fn threads_all_exited(pid: u32) -> Option<bool> {
        for task in std::fs::read_dir(format!("/proc/{pid}/task")).ok()? {
            let path = task.ok()?.path().join("stat");
            let Ok(stat) = read_proc_file(&path) else {
                // A thread that ended while we looked.
                continue;
            };
            let (_, _, state) = parse_stat(&stat)?;
            if !matches!(state, 'Z' | 'X') {
                return Some(false);
            }
        }
        Some(true)
    }
}

#[cfg(not(target_os = "linux"))]
mod proc {
    use super::{Probe, Stamp};

    /// No /proc: owners from here carry no stamp and wait for the lease.
    pub(super) fn own_stamp() -> Option<Stamp> {
        None
    }

    pub(super) fn probe(_pid: u32) -> Probe {
        Probe::Unreadable
    }
}

/// A file under /proc, read whole. The one place this module reads a file:
/// /proc is never a database file, so no SQLite lock can be dropped here.
#[expect(
    clippy::disallowed_methods,
    reason = "reads a /proc file, never a database file"
)]
fn read_proc_file(path: impl AsRef<std::path::Path>) -> std::io::Result<String> {
    std::fs::read_to_string(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    const BOOT: &str = "22c18875-893f-4611-a06b-4bcbb422b49c";
    const OTHER_BOOT: &str = "0d6d3f9e-41a7-4d8c-9a51-6c1f0e2b7a44";

    fn me() -> Identity {
        Identity {
            host: "box".into(),
            pid: 100,
            random: "0123abcd".into(),
            stamp: Some(Stamp {
                start: 5000,
                boot_id: BOOT.into(),
                pid_ns: 4026531836,
                time_ns: Some(4026531834),
            }),
        }
    }

    /// A process table with one entry.
    struct Table(u32, Probe);

    impl Processes for Table {
        fn probe(&self, pid: u32) -> Probe {
            if pid == self.0 {
                self.1.clone()
            } else {
                Probe::Gone
            }
        }
    }

    fn owner(host: &str, pid: u32, start: u64, boot: &str, ns: &str) -> String {
        format!("{host}:{pid}:89abcdef:{start}:{boot}:{ns}")
    }

    #[test]
    fn an_owner_string_round_trips_and_an_old_one_has_no_stamp() {
        let me = me();
        let text = me.to_string();
        assert_eq!(
            text,
            format!("box:100:0123abcd:5000:{BOOT}:4026531836.4026531834")
        );
        assert_eq!(Identity::parse(&text), Some(me));
        // A host name with colons still parses: fields count from the end.
        let odd = owner("a:b", 7, 1, BOOT, "9");
        assert_eq!(Identity::parse(&odd).map(|i| i.host), Some("a:b".into()));
        for old in [
            "box:100:0123abcd",
            "node-b",
            "",
            &owner("box", 7, 1, "not-a-boot-id", "9"),
            &owner("box", 7, 1, BOOT, "-9"),
            &owner("", 7, 1, BOOT, "9"),
        ] {
            assert_eq!(Identity::parse(old), None, "{old:?}");
        }
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn this_process_is_alive_by_its_own_pid_and_start_time() {
        let me = Identity::current();
        let stamp = me.stamp.clone().expect("a stamp on Linux");
        assert_eq!(me.pid, std::process::id());
        // Another owner string naming this very process (another random
        // part: as another thread of the test harness would see it).
        let same = Identity {
            random: "ffffffff".into(),
            ..me.clone()
        };
        assert_eq!(judge(me, &same.to_string(), true, &Proc), Liveness::Alive);
        // The same pid with another start time is a process that had
        // this pid before: dead, though the pid is alive.
        let earlier = Identity {
            stamp: Some(Stamp {
                start: stamp.start.saturating_sub(1),
                ..stamp.clone()
            }),
            ..same.clone()
        };
        assert!(
            matches!(
                judge(me, &earlier.to_string(), true, &Proc),
                Liveness::Dead(_)
            ),
            "a reused pid"
        );
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn a_pid_with_no_process_is_dead_on_the_real_process_table() {
        let mut child = std::process::Command::new("true")
            .spawn()
            .expect("spawn true");
        let pid = child.id();
        child.wait().expect("reaped");
        let me = Identity::current();
        let stamp = me.stamp.clone().expect("a stamp on Linux");
        let gone = Identity {
            pid,
            stamp: Some(stamp),
            ..me.clone()
        };
        // Its pid may have been given to a new process meanwhile: then
        // that one's start time differs, and the owner is dead all the same.
        assert!(
            matches!(judge(me, &gone.to_string(), true, &Proc), Liveness::Dead(_)),
            "{:?}",
            Proc.probe(pid)
        );
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn a_live_child_is_alive_and_a_zombie_child_is_dead() {
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .expect("spawn sleep");
        let pid = child.id();
        let Probe::Present { start, exited } = Proc.probe(pid) else {
            panic!("a live child is present: {:?}", Proc.probe(pid));
        };
        assert!(!exited);
        let me = Identity::current();
        let stamp = me.stamp.clone().expect("a stamp on Linux");
        let owner = Identity {
            pid,
            stamp: Some(Stamp { start, ..stamp }),
            ..me.clone()
        }
        .to_string();
        assert_eq!(judge(me, &owner, true, &Proc), Liveness::Alive);
        child.kill().expect("SIGKILL");
        // Not reaped yet: a zombie, which runs nothing any more. Wait for
        // the kernel to have made it one (SIGKILL is asynchronous).
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while judge(me, &owner, true, &Proc) == Liveness::Alive {
            assert!(std::time::Instant::now() < deadline, "never a zombie");
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        assert!(matches!(judge(me, &owner, true, &Proc), Liveness::Dead(_)));
        child.wait().expect("reaped");
    }

    #[test]
    fn a_pid_reused_by_a_later_process_is_dead_and_the_same_start_is_alive() {
        let me = me();
        let owner = owner("box", 42, 7000, BOOT, "4026531836.4026531834");
        let reused = Table(
            42,
            Probe::Present {
                start: 9000,
                exited: false,
            },
        );
        assert!(matches!(
            judge(&me, &owner, true, &reused),
            Liveness::Dead(_)
        ));
        let same = Table(
            42,
            Probe::Present {
                start: 7000,
                exited: false,
            },
        );
        assert_eq!(judge(&me, &owner, true, &same), Liveness::Alive);
        assert!(matches!(
            judge(&me, &owner, true, &Table(42, Probe::Unreadable)),
            Liveness::Unknown(_)
        ));
        assert!(matches!(
            judge(&me, &owner, true, &Table(1, Probe::Unreadable)),
            Liveness::Dead(_)
        ));
    }

    #[test]
    fn another_boot_id_is_a_reboot_only_on_one_kernel_and_by_the_same_name() {
        let me = me();
        // Whatever the process table says: it is another boot's.
        let alive = Table(
            42,
            Probe::Present {
                start: 7000,
                exited: false,
            },
        );
        let rebooted = owner("box", 42, 7000, OTHER_BOOT, "4026531836.4026531834");
        assert!(matches!(
            judge(&me, &rebooted, true, &alive),
            Liveness::Dead(_)
        ));
        // A store shared across machines: maybe another machine named box.
        assert!(matches!(
            judge(&me, &rebooted, false, &alive),
            Liveness::Unknown(_)
        ));
        let elsewhere = owner("other", 42, 7000, OTHER_BOOT, "4026531836.4026531834");
        assert!(matches!(
            judge(&me, &elsewhere, true, &Table(1, Probe::Gone)),
            Liveness::Unknown(_)
        ));
    }

    #[test]
    fn another_pid_or_time_namespace_or_an_old_owner_waits_for_the_lease() {
        let me = me();
        let gone = Table(1, Probe::Gone);
        for owner in [
            owner("box", 42, 7000, BOOT, "4026532000.4026531834"),
            owner("box", 42, 7000, BOOT, "4026531836.4026532001"),
            owner("box", 42, 7000, BOOT, "4026531836"),
            "box:42:89abcdef".to_string(),
        ] {
            assert!(
                matches!(judge(&me, &owner, true, &gone), Liveness::Unknown(_)),
                "{owner}"
            );
        }
        // A process that cannot read its own table judges nobody dead.
        let blind = Identity {
            stamp: None,
            ..me.clone()
        };
        let dead = owner("box", 42, 7000, BOOT, "4026531836.4026531834");
        assert!(matches!(
            judge(&blind, &dead, true, &gone),
            Liveness::Unknown(_)
        ));
        assert_eq!(judge(&me, &me.to_string(), true, &gone), Liveness::Alive);
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn a_stat_line_is_read_after_the_command_name_whatever_it_holds() {
        let line = "4242 (a) b (c) S 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 777 19 20\n";
        assert_eq!(proc::parse_stat(line), Some((4242, 777, 'S')));
        assert_eq!(proc::parse_stat("4242 (short) S 1 2"), None);
    }
}
