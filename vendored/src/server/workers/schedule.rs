//! `trigger.schedule`: start a run at every cron tick, once across servers.
//!
//! Every server sharing a store computes the same tick times (UTC, from the
//! same expression), and each tick is claimed in the store under
//! `schedule:{agent}:{index}:{tick}` before its run starts: the first server
//! to claim it starts the run, the others skip it. Ticks that fall while no
//! server is up are not made up for later. A crash between the claim and
//! the run's creation loses that one tick (at most once, never twice).

use std::time::Duration;

use chrono::{DateTime, Utc};
use serde_json::{Value, json};
use tokio::sync::watch;

use crate::server::http::state::AppState;
use crate::service::tasks;
use crate::store::KeyClaim;
use crate::support::json_doc::JsonDoc;

/// How long a tick's claim is kept: far longer than any clock skew.
const TICK_CLAIM_TTL: Duration = Duration::from_secs(24 * 3600);

/// A server that fell behind by more than this (a suspended host) skips
/// the missed ticks instead of firing them in a burst.
const MAX_CATCH_UP: chrono::TimeDelta = chrono::TimeDelta::seconds(60);

/// One parsed schedule entry.
#[derive(Clone)]
pub(crate) struct Entry {
    pub index: usize,
    pub expression: String,
    pub cron: croner::Cron,
    pub input: Value,
}

/// Parse every entry of the spec's schedule, or say which is wrong.
pub(crate) fn entries(spec: &crate::domain::spec::Spec) -> Result<Vec<Entry>, String> {
    spec.trigger
        .schedule
        .iter()
        .enumerate()
        .map(|(index, trigger)| {
            let cron = trigger
                .parse_cron()
                .map_err(|e| format!("trigger.schedule entry {}: {e}", index + 1))?;
            Ok(Entry {
                index,
                expression: trigger.cron.clone(),
                cron,
                input: trigger.input.clone(),
            })
        })
        .collect()
}

/// The claim key of one tick.
pub fn tick_key(agent: &str, index: usize, tick: DateTime<Utc>) -> String {
    format!(
        "schedule:{agent}:{index}:{}",
        crate::support::time::format_utc(tick)
    )
}

/// Fire `entry` at each of its ticks until shutdown.
pub(crate) async fn run(state: AppState, entry: Entry, mut shutdown: watch::Receiver<bool>) {
    let clock = state.agent.clock().clone();
    let mut after = clock.now();
    loop {
        let tick = match entry.cron.find_next_occurrence(&after, false) {
            Ok(tick) => tick,
            Err(e) => {
                tracing::warn!(schedule = entry.index + 1, cron = %entry.expression, error = %e, "schedule has no next tick; it stops");
                return;
            }
        };
        tokio::select! {
            _ = clock.sleep_until(tick) => {}
            _ = shutdown.changed() => return,
        }
        if *shutdown.borrow() {
            return;
        }
        fire(&state, &entry, tick).await;
        let now = clock.now();
        after = if now - tick > MAX_CATCH_UP { now } else { tick };
    }
}

/// One tick: its claim and its run are one write, so of every server
/// sharing the store exactly one starts the tick's run, and a crash cannot
/// leave the tick claimed with no run.
async fn fire(state: &AppState, entry: &Entry, tick: DateTime<Utc>) {
    let now = state.agent.clock().now();
    let once = KeyClaim {
        key: tick_key(state.agent_id(), entry.index, tick),
        // Ticks are never released, so the owner is informational only.
        owner: "scheduler".into(),
        now,
        expires_at: crate::support::time::add(now, TICK_CLAIM_TTL),
    };
    let trigger = json!({
        "kind": "schedule",
        "cron": entry.expression,
        "index": entry.index,
        "scheduled_at": crate::support::time::format_utc(tick),
        "received_at": crate::support::time::format_utc(now),
    });
    let started = tasks::start_run_once(
        &state.agent,
        &state.background,
        JsonDoc::from_value(&entry.input),
        trigger,
        once,
    )
    .await;
    match started {
        Ok(Some(_)) => {}
        Ok(None) => {
            tracing::debug!(tick = %crate::support::time::format_utc(tick), "schedule tick taken by another server");
        }
        Err(e) => {
            tracing::error!(error = %e, tick = %crate::support::time::format_utc(tick), "cannot start the scheduled run; the tick is skipped");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::spec::ScheduleTrigger;

    fn parse(cron: &str) -> Result<croner::Cron, String> {
        ScheduleTrigger {
            cron: cron.into(),
            input: json!({}),
        }
        .parse_cron()
    }

    #[test]
    fn five_and_six_field_expressions() {
        let start = crate::support::time::parse_utc("2026-01-05T08:59:30Z").unwrap(); // a Monday
        let weekdays = parse("0 9 * * 1-5").unwrap();
        assert_eq!(
            weekdays.find_next_occurrence(&start, false).unwrap(),
            crate::support::time::parse_utc("2026-01-05T09:00:00Z").unwrap()
        );
        let every_second = parse("* * * * * *").unwrap();
        assert_eq!(
            every_second.find_next_occurrence(&start, false).unwrap(),
            crate::support::time::parse_utc("2026-01-05T08:59:31Z").unwrap()
        );
        // Sunday is 0: the next Sunday 09:00 after a Monday.
        let sundays = parse("0 9 * * 0").unwrap();
        assert_eq!(
            sundays.find_next_occurrence(&start, false).unwrap(),
            crate::support::time::parse_utc("2026-01-11T09:00:00Z").unwrap()
        );
    }

    #[test]
    fn bad_expressions_are_errors() {
        for bad in ["", "* * *", "61 * * * *", "* * * * 9", "every day"] {
            let err = parse(bad).unwrap_err();
            assert!(err.contains("invalid cron expression"), "{bad}: {err}");
        }
    }

    /// Polls `done` (a positive condition) every few milliseconds, failing
    /// after a generous deadline.
    async fn eventually(what: &str, mut done: impl FnMut() -> bool) {
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        while !done() {
            assert!(std::time::Instant::now() < deadline, "never: {what}");
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    /// The `scheduled_at` of every run completed so far, in order.
    fn drain(
        events: &mut [tokio::sync::broadcast::Receiver<crate::domain::events::Event>],
        fired: &mut Vec<String>,
    ) {
        for events in events {
            while let Ok(event) = events.try_recv() {
                if let crate::domain::events::EventKind::RunCompleted { outputs } = event.kind {
                    fired.push(outputs["note"]["at"].as_str().unwrap().to_string());
                }
            }
        }
    }

    fn ticks(minutes: &[u32]) -> Vec<String> {
        minutes
            .iter()
            .map(|m| format!("2026-01-05T09:{m:02}:00.000000Z"))
            .collect()
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn on_a_manual_clock_each_tick_fires_once_across_two_schedulers_and_a_jump_is_not_made_up()
     {
        use std::sync::Arc;

        use crate::engine::run::AgentRun;
        use crate::store::{MemoryStore, SharedStore};
        use crate::support::time::{ManualClock, parse_utc};

        let spec = crate::domain::spec::Spec::parse(
            "version: 1\nagent: minutely\ntrigger:\n  schedule:\n    - cron: \"* * * * *\"\n\
             steps:\n  - id: note\n    set: { at: \"{{ trigger.scheduled_at }}\" }\n",
            "t.yaml",
        )
        .unwrap();
        let spec = Arc::new(spec);
        let store: SharedStore = Arc::new(MemoryStore::new());
        let clock = Arc::new(ManualClock::new(parse_utc("2026-01-05T09:00:30Z").unwrap()));
        let (stop, shutdown) = watch::channel(false);
        let (mut servers, mut events) = (Vec::new(), Vec::new());
        for _ in 0..2 {
            // Two servers sharing a store and a clock.
            let agent = AgentRun::new(spec.clone(), store.clone()).with_clock(clock.clone());
            events.push(agent.subscribe());
            let state = crate::server::standalone_state(agent, shutdown.clone());
            let entry = entries(&spec).unwrap().remove(0);
            let task = tokio::spawn(run(state.clone(), entry, shutdown.clone()));
            servers.push((state, task));
        }
        let mut fired = Vec::new();

        eventually("both schedulers asleep", || clock.sleepers() == 2).await;
        for minute in 1..=3 {
            clock.set(parse_utc(&format!("2026-01-05T09:{minute:02}:00Z")).unwrap());
            eventually("the tick's run, and both asleep again", || {
                drain(&mut events, &mut fired);
                fired.len() == minute && clock.sleepers() == 2
            })
            .await;
        }
        assert_eq!(fired, ticks(&[1, 2, 3]));

        // Ten minutes pass at once (a suspended host): the tick that was due
        // fires, the nine missed after it are skipped, not fired in a burst.
        clock.advance(Duration::from_secs(600));
        eventually("the due tick's run, and both asleep again", || {
            drain(&mut events, &mut fired);
            fired.len() == 4 && clock.sleepers() == 2
        })
        .await;
        assert_eq!(fired, ticks(&[1, 2, 3, 4]));
        clock.set(parse_utc("2026-01-05T09:14:00Z").unwrap());
        eventually("the next tick's run, and both asleep again", || {
            drain(&mut events, &mut fired);
            fired.len() == 5 && clock.sleepers() == 2
        })
        .await;

        stop.send_replace(true);
        for (state, task) in servers {
            task.await.unwrap();
            state.background.wait_idle().await;
        }
        drain(&mut events, &mut fired);
        assert_eq!(fired, ticks(&[1, 2, 3, 4, 14]), "once per tick");
    }

    #[test]
    fn tick_keys_name_agent_entry_and_time() {
        let tick = crate::support::time::parse_utc("2026-01-05T09:00:00Z").unwrap();
        assert_eq!(
            tick_key("refund-desk", 1, tick),
            "schedule:refund-desk:1:2026-01-05T09:00:00.000000Z"
        );
    }
}
