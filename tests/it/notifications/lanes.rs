//! Delivery lanes (DESIGN §14, issue 41): a real `tollgate serve` sends
//! each webhook's notices in a lane of its own, so a receiver that hangs,
//! fails, redirects or floods holds up only its own notices. The bounds
//! are structural (the issue's): with a receiver that holds every
//! connection open for longer than the test lives (well past 40 s), a
//! healthy receiver still gets the notices of 24 pauses within 8 s. No
//! test waits out a send timeout.

use std::time::{Duration, Instant};

use serde_json::json;

use super::webhook::{Receiver, SECRET};
use crate::common::server::{Api, Served};
use crate::common::{Workspace, assert_success, stdout};

/// The bound: 24 pauses reach the healthy receiver within 8 s.
const PAUSES: usize = 24;
const WITHIN: Duration = Duration::from_secs(8);

/// A spec notifying each of `hooks` (`${NAME}` of the URL; every one signs
/// with `${HOOK_SECRET}`).
fn spec(hooks: &[&str]) -> String {
    let mut text = String::from("version: 1\nagent: lanes\napprovals:\n  notify:\n    webhooks:\n");
    for hook in hooks {
        text.push_str(&format!(
            "      - url: \"${{{hook}}}\"\n        secret: \"${{HOOK_SECRET}}\"\n"
        ));
    }
    text.push_str(
        "steps:\n  - id: refund\n    approval:\n      message: \"Refund {{ input.amount }} EUR?\"\n",
    );
    text
}

/// The receivers' URLs as the server's environment.
fn env<'a>(hooks: &'a [(&'a str, &'a Receiver)], urls: &'a [String]) -> Vec<(&'a str, &'a str)> {
    let mut env: Vec<(&str, &str)> = hooks
        .iter()
        .zip(urls)
        .map(|((name, _), url)| (*name, url.as_str()))
        .collect();
    env.push(("HOOK_SECRET", SECRET));
    env
}

fn verified(receiver: &Receiver) -> usize {
    receiver
        .requests()
        .iter()
        .filter(|r| r["verified"] == json!(true))
        .count()
}

/// Pause [`PAUSES`] runs, then wait until `healthy` verified that many
/// notices; the time from the first pause, or `None` past [`WITHIN`].
async fn pauses_reach(served: &Served, healthy: &Receiver) -> Option<Duration> {
    let api = Api::new();
    let start = Instant::now();
    for amount in 0..PAUSES {
        api.pause(served, json!({ "amount": amount })).await;
    }
    loop {
        if verified(healthy) >= PAUSES {
            return Some(start.elapsed());
        }
        if start.elapsed() > WITHIN {
            return None;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The one-hanging-one-healthy case on `start`'s store.
async fn a_hanging_receiver_leaves_a_healthy_one_alone(
    start: impl FnOnce(&Workspace, &[(&str, &str)]) -> Served,
) {
    let ws = Workspace::new(&spec(&["HOOK_HANG", "HOOK_OK"]));
    let hanging = Receiver::start(&["--mode", "hang"]);
    let healthy = Receiver::start(&[]);
    let hooks = [("HOOK_HANG", &hanging), ("HOOK_OK", &healthy)];
    let urls: Vec<String> = hooks.iter().map(|(_, r)| r.url()).collect();
    let served = start(&ws, &env(&hooks, &urls));
    let took = pauses_reach(&served, &healthy).await;
    println!(
        "lanes: {PAUSES} pauses reached the healthy receiver beside a hanging one in {took:?}"
    );
    assert!(
        took.is_some(),
        "the healthy receiver got {} of {PAUSES} notices within {WITHIN:?} beside a hanging one",
        verified(&healthy)
    );
    // The hanging receiver holds its lane's share of connections, no more.
    assert!(
        hanging.requests().len() <= tollgate_runtime::notify::lanes::DEFAULT_PER_LANE,
        "{} sends to the hanging receiver at once",
        hanging.requests().len()
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_hanging_webhook_does_not_hold_up_a_healthy_one_on_sqlite() {
    a_hanging_receiver_leaves_a_healthy_one_alone(|ws, env| {
        Served::start(
            &ws.spec,
            &ws.state_db(),
            env,
            &["--notify-retry-window", "60s"],
        )
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_hanging_webhook_does_not_hold_up_a_healthy_one_on_postgres() {
    let db = crate::common::postgres::database();
    a_hanging_receiver_leaves_a_healthy_one_alone(|ws, env| {
        Served::start_on_database(&ws.spec, &db.url, env, &["--notify-retry-window", "60s"])
    })
    .await;
}

/// The value of `series` (name and labels) in a Prometheus text.
fn sample(text: &str, series: &str) -> Option<f64> {
    text.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' '))
        .and_then(|v| v.parse().ok())
}

/// Five receivers (the issue's): one hangs, one answers 500, one
/// redirects, one answers with a body of a gigabyte, one is healthy. The
/// healthy one gets its notices within the same bound, and each stuck
/// endpoint is visible in `/metrics` and `notifications list` as a lane
/// labelled by channel and `scheme://host:port` only.
#[tokio::test(flavor = "multi_thread")]
async fn five_hostile_and_healthy_receivers_each_keep_to_their_lane() {
    let ws = Workspace::new(&spec(&[
        "HOOK_HANG",
        "HOOK_500",
        "HOOK_REDIRECT",
        "HOOK_HUGE",
        "HOOK_OK",
    ]));
    let hanging = Receiver::start(&["--mode", "hang"]);
    let failing = Receiver::start(&["--fail-first", "1000000"]);
    let redirecting = Receiver::start(&["--mode", "redirect"]);
    let huge = Receiver::start(&["--mode", "huge"]);
    let healthy = Receiver::start(&[]);
    let hooks = [
        ("HOOK_HANG", &hanging),
        ("HOOK_500", &failing),
        ("HOOK_REDIRECT", &redirecting),
        ("HOOK_HUGE", &huge),
        ("HOOK_OK", &healthy),
    ];
    let urls: Vec<String> = hooks.iter().map(|(_, r)| r.url()).collect();
    let env = env(&hooks, &urls);
    let served = Served::start(
        &ws.spec,
        &ws.state_db(),
        &env,
        &["--notify-retry-window", "60s"],
    );
    let took = pauses_reach(&served, &healthy).await;
    println!(
        "lanes: {PAUSES} pauses reached the healthy receiver beside four hostile ones in {took:?}"
    );
    assert!(
        took.is_some(),
        "the healthy receiver got {} of {PAUSES} notices within {WITHIN:?} beside four hostile ones",
        verified(&healthy)
    );
    // Each hostile receiver was tried (its lane is not starved by the
    // others either).
    for (name, receiver) in &hooks[..4] {
        assert!(!receiver.requests().is_empty(), "{name} was never tried");
    }

    let origin = |r: &Receiver| {
        let url = r.url();
        let path = url.find("/hook").expect("a path");
        url[..path].to_string()
    };
    let (_, text) = scrape(&served).await;
    for (name, receiver) in &hooks[..4] {
        let series = format!(
            "tollgate_notifications_lane_in_flight{{channel=\"webhook\",endpoint=\"{}\"}}",
            origin(receiver)
        );
        assert!(
            sample(&text, &series).is_some(),
            "no lane of {name} in:\n{text}"
        );
    }
    let hang_lane = |family: &str| {
        sample(
            &text,
            &format!(
                "{family}{{channel=\"webhook\",endpoint=\"{}\"}}",
                origin(&hanging)
            ),
        )
        .unwrap_or_else(|| panic!("no {family} of the hanging lane in:\n{text}"))
    };
    assert_eq!(
        hang_lane("tollgate_notifications_lane_in_flight"),
        tollgate_runtime::notify::lanes::DEFAULT_PER_LANE as f64,
        "the hanging lane holds its share"
    );
    assert!(hang_lane("tollgate_notifications_lane_waiting") > 0.0);
    assert!(hang_lane("tollgate_notifications_lane_oldest_waiting_seconds") > 0.0);
    assert!(
        !text.contains("/hook") && !text.contains("token"),
        "a lane label shows a path or a query:\n{text}"
    );

    // The operator's list shows the lanes and their states.
    let out = ws
        .tollgate()
        .args(["notifications", "list", "--spec", ws.spec_arg()])
        .output()
        .expect("run tollgate");
    assert_success(&out);
    let listed = stdout(&out);
    let lane_line = |r: &Receiver| {
        listed
            .lines()
            .find(|l| l.starts_with("webhook") && l.contains(&format!("{} ", origin(r))))
            .unwrap_or_else(|| panic!("no lane of {} in:\n{listed}", origin(r)))
            .to_string()
    };
    // Queued behind its own hanging sends (failing once their timeout
    // ends: either way, the endpoint's own trouble).
    let hang_line = lane_line(&hanging);
    assert!(
        hang_line.contains("queued") || hang_line.contains("failing"),
        "{hang_line}"
    );
    assert!(
        !listed.contains("url-token-value"),
        "the list shows a URL's query:\n{listed}"
    );
}

async fn scrape(served: &Served) -> (u16, String) {
    let response = reqwest::get(served.url("/metrics")).await.expect("scrape");
    let status = response.status().as_u16();
    (status, response.text().await.expect("text"))
}
