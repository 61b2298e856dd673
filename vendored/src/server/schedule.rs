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

use super::state::AppState;
use super::tasks;

/// How long a tick's claim is kept: far longer than any clock skew.
const TICK_CLAIM_TTL: Duration = Duration::from_secs(24 * 3600);

/// A server that fell behind by more than this (a suspended host) skips
/// the missed ticks instead of firing them in a burst.
const MAX_CATCH_UP: chrono::TimeDelta = chrono::TimeDelta::seconds(60);

/// One parsed schedule entry.
pub(crate) struct Entry {
    pub index: usize,
    pub expression: String,
    pub cron: croner::Cron,
    pub input: Value,
}

/// Parse every entry of the spec's schedule, or say which is wrong.
pub(crate) fn entries(spec: &crate::spec::Spec) -> Result<Vec<Entry>, String> {
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
    format!("schedule:{agent}:{index}:{}", crate::time::format_utc(tick))
}

/// Fire `entry` at each of its ticks until shutdown.
pub(crate) async fn run(state: AppState, entry: Entry, mut shutdown: watch::Receiver<bool>) {
    let mut after = crate::time::now();
    loop {
        let tick = match entry.cron.find_next_occurrence(&after, false) {
            Ok(tick) => tick,
            Err(e) => {
                tracing::warn!(schedule = entry.index + 1, cron = %entry.expression, error = %e, "schedule has no next tick; it stops");
                return;
            }
        };
        let wait = (tick - crate::time::now())
            .to_std()
            .unwrap_or(Duration::ZERO);
        tokio::select! {
            _ = tokio::time::sleep(wait) => {}
            _ = shutdown.changed() => return,
        }
        if *shutdown.borrow() {
            return;
        }
        fire(&state, &entry, tick).await;
        let now = crate::time::now();
        after = if now - tick > MAX_CATCH_UP { now } else { tick };
    }
}

async fn fire(state: &AppState, entry: &Entry, tick: DateTime<Utc>) {
    let now = crate::time::now();
    let key = tick_key(state.agent_id(), entry.index, tick);
    let claimed = state
        .agent
        .store()
        // Ticks are never released, so the owner is informational only.
        .claim_key(
            &key,
            "scheduler",
            now,
            crate::time::add(now, TICK_CLAIM_TTL),
        )
        .await;
    match claimed {
        Ok(true) => {}
        Ok(false) => {
            tracing::debug!(tick = %crate::time::format_utc(tick), "schedule tick taken by another server");
            return;
        }
        Err(e) => {
            tracing::warn!(error = %e, tick = %crate::time::format_utc(tick), "cannot claim a schedule tick; skipped");
            return;
        }
    }
    let trigger = json!({
        "kind": "schedule",
        "cron": entry.expression,
        "index": entry.index,
        "scheduled_at": crate::time::format_utc(tick),
        "received_at": crate::time::format_utc(now),
    });
    if let Err(e) = tasks::start_run(
        &state.agent,
        &state.background,
        entry.input.clone(),
        trigger,
    )
    .await
    {
        tracing::error!(error = %e, tick = %crate::time::format_utc(tick), "cannot start the scheduled run");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::ScheduleTrigger;

    fn parse(cron: &str) -> Result<croner::Cron, String> {
        ScheduleTrigger {
            cron: cron.into(),
            input: json!({}),
        }
        .parse_cron()
    }

    #[test]
    fn five_and_six_field_expressions() {
        let start = crate::time::parse_utc("2026-01-05T08:59:30Z").unwrap(); // a Monday
        let weekdays = parse("0 9 * * 1-5").unwrap();
        assert_eq!(
            weekdays.find_next_occurrence(&start, false).unwrap(),
            crate::time::parse_utc("2026-01-05T09:00:00Z").unwrap()
        );
        let every_second = parse("* * * * * *").unwrap();
        assert_eq!(
            every_second.find_next_occurrence(&start, false).unwrap(),
            crate::time::parse_utc("2026-01-05T08:59:31Z").unwrap()
        );
        // Sunday is 0: the next Sunday 09:00 after a Monday.
        let sundays = parse("0 9 * * 0").unwrap();
        assert_eq!(
            sundays.find_next_occurrence(&start, false).unwrap(),
            crate::time::parse_utc("2026-01-11T09:00:00Z").unwrap()
        );
    }

    #[test]
    fn bad_expressions_are_errors() {
        for bad in ["", "* * *", "61 * * * *", "* * * * 9", "every day"] {
            let err = parse(bad).unwrap_err();
            assert!(err.contains("invalid cron expression"), "{bad}: {err}");
        }
    }

    #[test]
    fn tick_keys_name_agent_entry_and_time() {
        let tick = crate::time::parse_utc("2026-01-05T09:00:00Z").unwrap();
        assert_eq!(
            tick_key("refund-desk", 1, tick),
            "schedule:refund-desk:1:2026-01-05T09:00:00.000000Z"
        );
    }
}
