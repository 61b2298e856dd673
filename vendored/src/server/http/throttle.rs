//! Throttles for guessing: wrong tokens at /ui/login and bad signatures on
//! signed links (/a/...), counted per client address.
//!
//! After [`Policy::free`] failures in a row a client is locked out for
//! [`Policy::base`], doubling with every further failure up to
//! [`Policy::cap`]: every request of the kind throttled answers 429 with
//! `Retry-After` until then, the right token or link included (answering
//! it would tell a guesser which guess was right, so a lockout would not
//! slow guessing at all). A success forgets the client's failures, and
//! so does [`Policy::forget`] of quiet.
//!
//! Keyed by address alone: the sign-in form submits a token and nothing
//! else, so there is no account name to count against. A key per wrong
//! token (or its digest prefix) would only count a guess repeated, which
//! a guesser never does; one shared key would let anyone lock everyone
//! out. IPv6 clients are counted per /64, the block one host usually has.
//!
//! Memory is bounded: at most [`Policy::capacity`] clients are tracked.
//! When full, the quiet ones are dropped first, then the one whose last
//! failure is oldest, so a client cycling through addresses can push out
//! others' counts but never grow the table.
//!
//! Not `governor`: it is a rate limiter (GCRA cells per key), not a count
//! of failures with growing lockouts, and brings several crates (dashmap,
//! quanta, nonzero_ext, ...) to the tree for what these hundred lines do.
//! Time comes from the server's [`Clock`](crate::support::time::Clock), so tests
//! advance a manual clock instead of sleeping.

use std::collections::HashMap;
use std::net::{IpAddr, Ipv6Addr, SocketAddr};
use std::sync::Mutex;
use std::time::Duration;

use axum::extract::{ConnectInfo, FromRequestParts};
use axum::http::request::Parts;
use chrono::{DateTime, Utc};

/// How a throttle counts.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Policy {
    /// Failures in a row allowed before the first lockout.
    pub free: u32,
    /// The first lockout; each further failure doubles it.
    pub base: Duration,
    /// The longest lockout.
    pub cap: Duration,
    /// Quiet time after which a client's failures are forgotten.
    pub forget: Duration,
    /// The most clients tracked at once.
    pub capacity: usize,
}

impl Policy {
    /// Sign-in and links: 5 tries, then 5 s, 10 s, 20 s, ... up to 15 min.
    pub const GUESSES: Policy = Policy {
        free: 5,
        base: Duration::from_secs(5),
        cap: Duration::from_secs(15 * 60),
        forget: Duration::from_secs(60 * 60),
        capacity: 4096,
    };

    /// The lockout after `failures` in a row (none below `free`).
    fn lockout(&self, failures: u32) -> Option<Duration> {
        let over = failures.checked_sub(self.free)?;
        // 2^over, without overflowing on a very long run of failures.
        let factor = 1u32.checked_shl(over.min(31)).unwrap_or(u32::MAX);
        Some(self.base.saturating_mul(factor).min(self.cap))
    }
}

/// Who is counted: an IPv4 address, or an IPv6 address's /64.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct ClientKey(IpAddr);

impl ClientKey {
    pub fn of(addr: IpAddr) -> ClientKey {
        match addr {
            IpAddr::V4(v4) => ClientKey(IpAddr::V4(v4)),
            IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
                Some(v4) => ClientKey(IpAddr::V4(v4)),
                None => {
                    let s = v6.segments();
                    ClientKey(IpAddr::V6(Ipv6Addr::new(
                        s[0], s[1], s[2], s[3], 0, 0, 0, 0,
                    )))
                }
            },
        }
    }
}

impl std::fmt::Display for ClientKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.0 {
            IpAddr::V4(v4) => write!(f, "{v4}"),
            IpAddr::V6(v6) => write!(f, "{v6}/64"),
        }
    }
}

/// A locked-out client: try again after this long.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Lockout {
    pub retry_after: Duration,
}

impl Lockout {
    /// `Retry-After` in whole seconds, rounded up, at least 1.
    pub fn retry_after_secs(&self) -> u64 {
        let secs = self.retry_after.as_secs();
        let rounded = if self.retry_after.subsec_nanos() > 0 {
            secs + 1
        } else {
            secs
        };
        rounded.max(1)
    }
}

#[derive(Debug, Clone, Copy)]
struct Entry {
    failures: u32,
    locked_until: Option<DateTime<Utc>>,
    last: DateTime<Utc>,
}

/// Failure counts per client, bounded.
#[derive(Debug)]
pub(crate) struct Throttle {
    policy: Policy,
    entries: Mutex<HashMap<ClientKey, Entry>>,
}

impl Throttle {
    pub fn new(policy: Policy) -> Throttle {
        Throttle {
            policy,
            entries: Mutex::new(HashMap::new()),
        }
    }

    /// `Err` while `client` is locked out.
    pub fn check(&self, client: ClientKey, now: DateTime<Utc>) -> Result<(), Lockout> {
        let entries = self.lock();
        match entries.get(&client).and_then(|e| e.locked_until) {
            Some(until) if until > now => Err(Lockout {
                retry_after: (until - now).to_std().unwrap_or(Duration::ZERO),
            }),
            _ => Ok(()),
        }
    }

    /// Count a failure of `client`; `Some` when it starts a lockout (the
    /// caller logs it: one line per lockout).
    pub fn fail(&self, client: ClientKey, now: DateTime<Utc>) -> Option<Lockout> {
        let mut entries = self.lock();
        if !entries.contains_key(&client) && entries.len() >= self.policy.capacity {
            self.make_room(&mut entries, now);
        }
        let forget =
            chrono::Duration::from_std(self.policy.forget).unwrap_or(chrono::Duration::MAX);
        let entry = entries.entry(client).or_insert(Entry {
            failures: 0,
            locked_until: None,
            last: now,
        });
        if now - entry.last > forget {
            entry.failures = 0;
        }
        entry.failures = entry.failures.saturating_add(1);
        entry.last = now;
        let lockout = self.policy.lockout(entry.failures)?;
        let until = chrono::Duration::from_std(lockout)
            .ok()
            .and_then(|d| now.checked_add_signed(d))
            .unwrap_or(DateTime::<Utc>::MAX_UTC);
        entry.locked_until = Some(until);
        Some(Lockout {
            retry_after: lockout,
        })
    }

    /// A success: `client`'s failures are forgotten.
    pub fn succeed(&self, client: ClientKey) {
        self.lock().remove(&client);
    }

    /// How many clients are tracked.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.lock().len()
    }

    /// Drop the quiet entries; if none was, the one whose last failure is
    /// oldest, a client not locked out before one that is.
    fn make_room(&self, entries: &mut HashMap<ClientKey, Entry>, now: DateTime<Utc>) {
        let forget =
            chrono::Duration::from_std(self.policy.forget).unwrap_or(chrono::Duration::MAX);
        entries.retain(|_, e| {
            let locked = e.locked_until.is_some_and(|until| until > now);
            locked || now - e.last <= forget
        });
        if entries.len() < self.policy.capacity {
            return;
        }
        if let Some(oldest) = entries
            .iter()
            .min_by_key(|(_, e)| (e.locked_until.is_some_and(|until| until > now), e.last))
            .map(|(key, _)| *key)
        {
            entries.remove(&oldest);
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<ClientKey, Entry>> {
        // A panic while holding the lock leaves counts, not broken
        // invariants: carry on with them.
        self.entries
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// The client address of a request: the TCP peer the connection came from
/// (server/http/conn.rs puts it on every request). `X-Forwarded-For` is never
/// read: any client can write it. `None` when the request did not come
/// through a socket (a router called in a test).
#[derive(Debug, Clone, Copy)]
pub(crate) struct ClientAddr(pub Option<IpAddr>);

impl ClientAddr {
    /// The throttle key: requests without an address share one key (the
    /// unspecified address), so they are throttled too.
    pub fn key(&self) -> ClientKey {
        ClientKey::of(self.0.unwrap_or(IpAddr::V6(Ipv6Addr::UNSPECIFIED)))
    }
}

impl<S: Send + Sync> FromRequestParts<S> for ClientAddr {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, Self::Rejection> {
        Ok(ClientAddr(
            parts
                .extensions
                .get::<ConnectInfo<SocketAddr>>()
                .map(|info| info.0.ip()),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv4Addr;

    fn at(secs: i64) -> DateTime<Utc> {
        DateTime::<Utc>::from_timestamp(1_800_000_000 + secs, 0).unwrap()
    }

    fn client(n: u8) -> ClientKey {
        ClientKey::of(IpAddr::V4(Ipv4Addr::new(10, 0, 0, n)))
    }

    #[test]
    fn lockouts_start_after_the_free_failures_and_double_up_to_the_cap() {
        let p = Policy::GUESSES;
        assert_eq!(p.lockout(4), None);
        assert_eq!(p.lockout(5), Some(Duration::from_secs(5)));
        assert_eq!(p.lockout(6), Some(Duration::from_secs(10)));
        assert_eq!(p.lockout(7), Some(Duration::from_secs(20)));
        assert_eq!(p.lockout(12), Some(Duration::from_secs(640)));
        assert_eq!(p.lockout(13), Some(p.cap));
        assert_eq!(p.lockout(u32::MAX), Some(p.cap));
    }

    #[test]
    fn a_client_is_locked_out_refused_meanwhile_and_free_again_after() {
        let t = Throttle::new(Policy::GUESSES);
        let c = client(1);
        for i in 0..4 {
            assert_eq!(t.fail(c, at(i)), None, "failure {i}");
            assert!(t.check(c, at(i)).is_ok());
        }
        let first = t.fail(c, at(4)).expect("the 5th failure locks out");
        assert_eq!(first.retry_after, Duration::from_secs(5));
        let refused = t.check(c, at(6)).unwrap_err();
        assert_eq!(refused.retry_after_secs(), 3);
        // Others are not affected.
        assert!(t.check(client(2), at(6)).is_ok());
        assert!(t.check(c, at(9)).is_ok(), "the lockout is over");
        // The next failure locks out for twice as long.
        assert_eq!(
            t.fail(c, at(9)).map(|l| l.retry_after),
            Some(Duration::from_secs(10))
        );
        assert!(t.check(c, at(18)).is_err());
        assert!(t.check(c, at(19)).is_ok());
        // A success forgets everything.
        t.succeed(c);
        assert_eq!(t.fail(c, at(20)), None);
    }

    #[test]
    fn failures_are_forgotten_after_a_quiet_hour() {
        let t = Throttle::new(Policy::GUESSES);
        let c = client(1);
        for i in 0..4 {
            t.fail(c, at(i));
        }
        let later = 3 + 3601;
        assert_eq!(t.fail(c, at(later)), None, "counting starts again");
    }

    #[test]
    fn the_table_never_grows_past_its_capacity() {
        let policy = Policy {
            capacity: 64,
            ..Policy::GUESSES
        };
        let t = Throttle::new(policy);
        // A client cycling through addresses, each failing once.
        for n in 0..10_000u32 {
            let addr = IpAddr::V4(Ipv4Addr::from(0x0a00_0000 + n));
            t.fail(ClientKey::of(addr), at(i64::from(n)));
            assert!(t.len() <= 64, "{} entries after {n}", t.len());
        }
        // A lockout still being served survives eviction of older quiet ones.
        let t = Throttle::new(policy);
        let locked = client(200);
        for i in 0..5 {
            t.fail(locked, at(i));
        }
        for n in 0..63u8 {
            t.fail(client(n), at(0));
        }
        t.fail(client(250), at(1));
        assert!(t.len() <= 64);
        assert!(t.check(locked, at(2)).is_err(), "the lockout was kept");
    }

    #[test]
    fn ipv6_clients_count_per_64_and_mapped_ipv4_as_ipv4() {
        let a: IpAddr = "2001:db8:1:2:aaaa::1".parse().unwrap();
        let b: IpAddr = "2001:db8:1:2:bbbb::9".parse().unwrap();
        let c: IpAddr = "2001:db8:1:3::1".parse().unwrap();
        assert_eq!(ClientKey::of(a), ClientKey::of(b));
        assert_ne!(ClientKey::of(a), ClientKey::of(c));
        assert_eq!(ClientKey::of(a).to_string(), "2001:db8:1:2::/64");
        let mapped: IpAddr = "::ffff:127.0.0.1".parse().unwrap();
        assert_eq!(
            ClientKey::of(mapped),
            ClientKey::of(IpAddr::V4(Ipv4Addr::LOCALHOST))
        );
    }

    #[test]
    fn retry_after_rounds_up_to_whole_seconds() {
        let l = |ms| Lockout {
            retry_after: Duration::from_millis(ms),
        };
        assert_eq!(l(0).retry_after_secs(), 1);
        assert_eq!(l(1).retry_after_secs(), 1);
        assert_eq!(l(1000).retry_after_secs(), 1);
        assert_eq!(l(1001).retry_after_secs(), 2);
    }
}
