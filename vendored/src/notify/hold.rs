//! Lane holds (issue 43): a receiver that rate-limits (Slack's 429, a
//! webhook's 429 or 503 with `Retry-After`) says when to come back, and
//! that is true of every notice it would receive, not only of the one it
//! refused. The delivery worker holds the notice's whole lane (see
//! [`crate::notify::lanes`]) until then: notices of a held lane are not
//! sent, nor counted as tried, before the hold ends. Other lanes keep
//! flowing.
//!
//! For Slack the lane is the workspace, which is what Slack rate-limits:
//! a server serves one spec, so one bot token, so one workspace, and
//! [`crate::notify::lanes::label`] gives every Slack notice of a server
//! one lane (the API's `host:port`; never the token nor a hash of it,
//! since labels are stored).
//!
//! The holds are this worker's own, in memory: another process sharing
//! the store learns of a rate limit from its own first refusal, which
//! costs one request per process, and nothing is stored that a crash
//! could leave behind.

use std::collections::HashMap;
use std::sync::Mutex;

use chrono::{DateTime, Utc};

use crate::domain::notices::NoticeChannel;

/// The lanes held now, each until when: a lane is its channel and its
/// label, as the store keeps it (an SMTP server's and the Slack API's
/// labels are both `host:port`).
#[derive(Debug, Default)]
pub struct LaneHolds {
    held: Mutex<HashMap<(NoticeChannel, String), DateTime<Utc>>>,
}

impl LaneHolds {
    pub fn new() -> LaneHolds {
        LaneHolds::default()
    }

    /// Hold `lane` of `channel` until `until`. A lane already held longer
    /// stays held longer: two refusals answered out of order must not
    /// shorten the wait the later-ending one asked for.
    pub fn hold(&self, channel: NoticeChannel, lane: &str, until: DateTime<Utc>) {
        let mut held = self.lock();
        let end = held.entry((channel, lane.to_string())).or_insert(until);
        if until > *end {
            *end = until;
        }
    }

    /// Until when `lane` of `channel` is held at `now`; `None` when it is
    /// not (or no longer: an ended hold is forgotten here, so the map
    /// holds only the lanes rate-limited now).
    pub fn held_until(
        &self,
        channel: NoticeChannel,
        lane: &str,
        now: DateTime<Utc>,
    ) -> Option<DateTime<Utc>> {
        let mut held = self.lock();
        let key = (channel, lane.to_string());
        match held.get(&key) {
            Some(until) if *until > now => Some(*until),
            Some(_) => {
                held.remove(&key);
                None
            }
            None => None,
        }
    }

    /// How many lanes are held (ended holds not yet looked at included).
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The map, even after a panic elsewhere while it was locked: every
    /// write to it is a single insert or remove, so it is never left half
    /// done.
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<(NoticeChannel, String), DateTime<Utc>>> {
        self.held
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    fn at(secs: i64) -> DateTime<Utc> {
        Utc.timestamp_opt(1_700_000_000 + secs, 0).unwrap()
    }

    #[test]
    fn a_held_lane_waits_until_its_end_and_then_is_forgotten() {
        let holds = LaneHolds::new();
        assert_eq!(
            holds.held_until(NoticeChannel::Slack, "slack.com:443", at(0)),
            None
        );
        holds.hold(NoticeChannel::Slack, "slack.com:443", at(2));
        assert_eq!(
            holds.held_until(NoticeChannel::Slack, "slack.com:443", at(0)),
            Some(at(2))
        );
        assert_eq!(
            holds.held_until(NoticeChannel::Slack, "slack.com:443", at(1)),
            Some(at(2)),
            "still held a second later"
        );
        assert_eq!(
            holds.held_until(NoticeChannel::Slack, "slack.com:443", at(2)),
            None,
            "free at its end"
        );
        assert!(holds.is_empty(), "an ended hold is forgotten");
    }

    #[test]
    fn a_hold_is_kept_to_its_lane() {
        let holds = LaneHolds::new();
        holds.hold(NoticeChannel::Slack, "slack.com:443", at(10));
        assert_eq!(
            holds.held_until(NoticeChannel::Webhook, "https://hooks.example:443", at(0)),
            None,
            "another lane flows"
        );
        assert_eq!(
            holds.held_until(NoticeChannel::Email, "slack.com:443", at(0)),
            None,
            "one label on another channel is another lane"
        );
        assert_eq!(holds.len(), 1);
    }

    #[test]
    fn a_shorter_hold_does_not_cut_a_longer_one() {
        let holds = LaneHolds::new();
        holds.hold(NoticeChannel::Webhook, "https://hooks.example:443", at(30));
        holds.hold(NoticeChannel::Webhook, "https://hooks.example:443", at(5));
        assert_eq!(
            holds.held_until(NoticeChannel::Webhook, "https://hooks.example:443", at(10)),
            Some(at(30))
        );
        holds.hold(NoticeChannel::Webhook, "https://hooks.example:443", at(60));
        assert_eq!(
            holds.held_until(NoticeChannel::Webhook, "https://hooks.example:443", at(40)),
            Some(at(60)),
            "a longer one extends it"
        );
    }
}
