//! Schedules: a cron firing every second on two servers sharing a store
//! starts exactly one run per tick; a bad expression is refused up front.
//! (The scheduler's own rules, on a manual clock with no waiting, are unit
//! tests in vendored/src/server/workers/schedule.rs.)

use crate::common;
use crate::common::server;

use std::collections::BTreeMap;
use std::time::Duration;

use common::{Workspace, assert_exit, stderr};
use serde_json::Value;
use server::Served;

const EVERY_SECOND: &str = r#"version: 1
agent: tick-desk
trigger:
  schedule:
    - cron: "* * * * * *"
      input: { source: clock }
steps:
  - id: note
    set: { at: "{{ trigger.scheduled_at }}", source: "{{ input.source }}" }
"#;

/// (scheduled_at, status) of every run in the state file.
fn runs(db: &std::path::Path) -> Vec<(String, String)> {
    let conn = rusqlite::Connection::open(db).expect("open db");
    let mut stmt = conn
        .prepare(r#"SELECT "trigger", status FROM tollgate_runs"#)
        .expect("prepare");
    stmt.query_map([], |row| {
        Ok((row.get::<_, String>(0)?, row.get::<_, String>(1)?))
    })
    .expect("query")
    .map(|row| {
        let (trigger, status) = row.expect("row");
        let trigger: Value = serde_json::from_str(&trigger).expect("trigger JSON");
        assert_eq!(trigger["kind"], "schedule");
        (
            trigger["scheduled_at"]
                .as_str()
                .expect("scheduled_at")
                .to_string(),
            status,
        )
    })
    .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn one_run_per_tick_across_two_servers() {
    let ws = Workspace::new(EVERY_SECOND);
    let state = ws.path().join("state.db");
    let mut a = Served::start(&ws.spec, &state, &[], &[]);
    let mut b = Served::start(&ws.spec, &state, &[], &[]);
    let both_up = chrono::Utc::now();
    // Until three ticks after both were up have their runs (both servers
    // contend for each of them), with a generous deadline.
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    loop {
        let contended = runs(&state)
            .iter()
            .filter_map(|(tick, _)| tollgate_runtime::time::parse_utc(tick))
            .filter(|t| *t > both_up + chrono::TimeDelta::seconds(1))
            .count();
        if contended >= 3 {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no three ticks within a minute: {:?}\n{}\n{}",
            runs(&state),
            a.logs(),
            b.logs()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // A graceful stop drains the runs in flight: every run is finished and
    // no tick can fire after both have exited.
    assert_eq!(a.terminate(), Some(0), "{}", a.logs());
    assert_eq!(b.terminate(), Some(0), "{}", b.logs());

    let runs = runs(&state);
    let mut per_tick: BTreeMap<String, usize> = BTreeMap::new();
    for (tick, status) in &runs {
        assert_eq!(status, "completed", "tick {tick}");
        *per_tick.entry(tick.clone()).or_default() += 1;
    }
    assert!(
        per_tick.values().all(|&n| n == 1),
        "at most one run per tick: {per_tick:?}"
    );
    let ticks: Vec<chrono::DateTime<chrono::Utc>> = per_tick
        .keys()
        .map(|t| tollgate_runtime::time::parse_utc(t).expect("tick time"))
        .collect();
    assert!(ticks.len() >= 3, "ticks: {per_tick:?}");
    for pair in ticks.windows(2) {
        assert_eq!(
            (pair[1] - pair[0]).num_seconds(),
            1,
            "no tick skipped: {per_tick:?}"
        );
    }
}

#[test]
fn a_bad_cron_expression_is_a_spec_error() {
    let ws = Workspace::new(&EVERY_SECOND.replace("* * * * * *", "61 * * * *"));
    let out = ws.validate();
    assert_exit(&out, 2);
    let err = stderr(&out);
    assert!(err.contains("agent.yaml:5:"), "names the line: {err}");
    assert!(err.contains("invalid cron expression"), "{err}");

    let refused = Served::try_start(&ws.spec, &ws.path().join("state.db"), &[], &[])
        .err()
        .expect("serve refuses the spec");
    assert_eq!(refused.code, Some(2), "{}", refused.stderr);
    assert!(
        refused.stderr.contains("invalid cron expression"),
        "{}",
        refused.stderr
    );
}
