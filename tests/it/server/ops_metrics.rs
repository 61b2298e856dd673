//! GET /metrics on a real `tollgate serve`: Prometheus text format 0.0.4,
//! read by a strict parser here (every line a HELP, a TYPE or a sample of
//! the family announced; histogram buckets cumulative and `+Inf` equal to
//! `_count`), and values that follow what happens: a pause, a decision, a
//! step's duration, a run's end, and a claim conflict between two deciders
//! racing. A second server on the same file reports the same store gauges
//! and counters of its own, its SQLite writer's included.

use crate::common;
use crate::common::server;
use crate::common::stub_server;

use std::collections::BTreeMap;
use std::time::Duration;

use common::Workspace;
use serde_json::json;
use server::{Api, Served, code};
use stub_server::{Response, StubServer};

/// The agent starts the runs that alice and bob decide: whoever starts a
/// run may not decide its gates.
const TOKENS: &str = "agent:token-for-agent,alice:token-for-alice,bob:token-for-bob";
/// How long the downstream takes: the `ship` step's duration is at least this.
const SHIP_DELAY: Duration = Duration::from_millis(300);

fn spec(stub_url: &str) -> String {
    format!(
        r#"version: 1
agent: metered-desk
description: Ship once a person says so.
tools:
  ship:
    http:
      method: POST
      url: "{stub_url}"
      json: {{ n: "{{{{ input.n }}}}" }}
steps:
  - id: prepare
    set: {{ n: "{{{{ input.n }}}}" }}
  - id: gate
    approval:
      message: "Ship {{{{ input.n }}}}?"
  - id: ship
    tool: ship
    with: {{}}
"#
    )
}

/// A parsed exposition: families by name.
#[derive(Debug, Default)]
struct Exposition {
    families: BTreeMap<String, Family>,
}

#[derive(Debug, Default)]
struct Family {
    kind: String,
    help: String,
    samples: Vec<Sample>,
}

#[derive(Debug, Clone)]
struct Sample {
    /// The sample's own name (`x_bucket`, `x_sum`, ... for a histogram).
    name: String,
    labels: BTreeMap<String, String>,
    value: f64,
}

/// Parse `text` as format 0.0.4, strictly: panics naming the line that is
/// not a `# HELP`, a `# TYPE` or a sample of the family just announced.
fn parse(text: &str) -> Exposition {
    assert!(text.ends_with('\n'), "the exposition ends with a line feed");
    let mut out = Exposition::default();
    let mut current: Option<String> = None;
    for (n, line) in text.lines().enumerate() {
        let at = || format!("line {}: {line:?}", n + 1);
        if let Some(rest) = line.strip_prefix("# HELP ") {
            let (name, help) = rest.split_once(' ').unwrap_or_else(|| panic!("{}", at()));
            assert!(valid_name(name), "{}", at());
            assert!(
                !out.families.contains_key(name),
                "family announced twice, {}",
                at()
            );
            out.families.insert(
                name.to_string(),
                Family {
                    help: help.to_string(),
                    ..Family::default()
                },
            );
            current = Some(name.to_string());
        } else if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').unwrap_or_else(|| panic!("{}", at()));
            assert_eq!(
                Some(name),
                current.as_deref(),
                "TYPE after its HELP, {}",
                at()
            );
            assert!(
                ["counter", "gauge", "histogram", "summary", "untyped"].contains(&kind),
                "{}",
                at()
            );
            let family = out.families.get_mut(name).unwrap();
            assert!(family.kind.is_empty(), "two TYPE lines, {}", at());
            assert!(family.samples.is_empty(), "TYPE after samples, {}", at());
            family.kind = kind.to_string();
        } else {
            assert!(!line.starts_with('#') && !line.is_empty(), "{}", at());
            let sample = parse_sample(line).unwrap_or_else(|why| panic!("{why}, {}", at()));
            let family_name = current
                .clone()
                .unwrap_or_else(|| panic!("no family, {}", at()));
            let family = out.families.get_mut(&family_name).unwrap();
            let allowed: Vec<String> = match family.kind.as_str() {
                "histogram" => ["_bucket", "_sum", "_count"]
                    .iter()
                    .map(|s| format!("{family_name}{s}"))
                    .collect(),
                "" => panic!("sample before TYPE, {}", at()),
                _ => vec![family_name.clone()],
            };
            assert!(
                allowed.contains(&sample.name),
                "not of {family_name}, {}",
                at()
            );
            family.samples.push(sample);
        }
    }
    for (name, family) in &out.families {
        assert!(!family.kind.is_empty(), "{name} has no TYPE");
        assert!(!family.help.trim().is_empty(), "{name} has no HELP text");
        if family.kind == "histogram" {
            check_histogram(name, family);
        }
    }
    out
}

fn valid_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_' || c == ':')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':')
}

/// `name{label="value",...} value`, label values with `\\`, `\"`, `\n`.
fn parse_sample(line: &str) -> Result<Sample, String> {
    let name_end = line
        .find(['{', ' '])
        .ok_or("no value after the sample name")?;
    let name = &line[..name_end];
    if !valid_name(name) {
        return Err(format!("bad metric name {name:?}"));
    }
    let mut labels = BTreeMap::new();
    let mut rest = &line[name_end..];
    if let Some(inner) = rest.strip_prefix('{') {
        let mut chars = inner.char_indices().peekable();
        loop {
            let start = chars.peek().map(|(i, _)| *i).ok_or("unclosed labels")?;
            if inner[start..].starts_with('}') {
                rest = &inner[start + 1..];
                break;
            }
            let eq = inner[start..].find("=\"").ok_or("label without =\"")? + start;
            let label = &inner[start..eq];
            if !valid_name(label) || label.contains(':') {
                return Err(format!("bad label name {label:?}"));
            }
            while chars.peek().is_some_and(|(i, _)| *i <= eq + 1) {
                chars.next();
            }
            let mut value = String::new();
            loop {
                match chars.next().ok_or("unterminated label value")? {
                    (_, '"') => break,
                    (_, '\\') => match chars.next().ok_or("dangling escape")?.1 {
                        '\\' => value.push('\\'),
                        '"' => value.push('"'),
                        'n' => value.push('\n'),
                        other => return Err(format!("bad escape \\{other}")),
                    },
                    (_, '\n') => return Err("raw line feed in a label value".into()),
                    (_, c) => value.push(c),
                }
            }
            if labels.insert(label.to_string(), value).is_some() {
                return Err(format!("label {label} twice"));
            }
            match chars.peek() {
                Some((_, ',')) => {
                    chars.next();
                }
                Some((_, '}')) => {}
                _ => return Err("expected , or } after a label".into()),
            }
        }
    }
    let value = rest.strip_prefix(' ').ok_or("no space before the value")?;
    if value.contains(' ') {
        return Err("a timestamp or trailing text after the value".into());
    }
    let value = match value {
        "+Inf" => f64::INFINITY,
        "-Inf" => f64::NEG_INFINITY,
        "NaN" => f64::NAN,
        v => v.parse().map_err(|e| format!("bad value {v:?}: {e}"))?,
    };
    Ok(Sample {
        name: name.to_string(),
        labels,
        value,
    })
}

/// Per label set: `le` buckets ascending with counts that never fall,
/// ending at `+Inf`, which equals `_count`; and one `_sum`.
fn check_histogram(name: &str, family: &Family) {
    let mut series: BTreeMap<Vec<(String, String)>, Vec<&Sample>> = BTreeMap::new();
    for sample in &family.samples {
        let key = sample
            .labels
            .iter()
            .filter(|(k, _)| *k != "le")
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        series.entry(key).or_default().push(sample);
    }
    for (labels, samples) in series {
        let buckets: Vec<(f64, f64)> = samples
            .iter()
            .filter(|s| s.name == format!("{name}_bucket"))
            .map(|s| {
                let le = s.labels.get("le").expect("a bucket has le");
                let bound = if le == "+Inf" {
                    f64::INFINITY
                } else {
                    le.parse().expect("le is a number")
                };
                (bound, s.value)
            })
            .collect();
        assert!(!buckets.is_empty(), "{name}{labels:?} has no buckets");
        for pair in buckets.windows(2) {
            assert!(pair[0].0 < pair[1].0, "{name}{labels:?}: le not ascending");
            assert!(pair[0].1 <= pair[1].1, "{name}{labels:?}: counts fall");
        }
        let (last_bound, inf) = *buckets.last().unwrap();
        assert!(last_bound.is_infinite(), "{name}{labels:?}: no +Inf bucket");
        let one = |suffix: &str| -> f64 {
            let found: Vec<_> = samples
                .iter()
                .filter(|s| s.name == format!("{name}{suffix}"))
                .collect();
            assert_eq!(found.len(), 1, "{name}{labels:?}: one {suffix}");
            found[0].value
        };
        assert_eq!(inf, one("_count"), "{name}{labels:?}: +Inf != _count");
        assert!(one("_sum") >= 0.0);
    }
}

impl Exposition {
    /// The value of `name` with exactly `labels` (panics when absent).
    fn value(&self, name: &str, labels: &[(&str, &str)]) -> f64 {
        self.find(name, labels)
            .unwrap_or_else(|| panic!("no {name}{labels:?} in {:#?}", self.families))
    }

    fn find(&self, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
        let wanted: BTreeMap<String, String> = labels
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        self.families
            .values()
            .flat_map(|f| &f.samples)
            .find(|s| s.name == name && s.labels == wanted)
            .map(|s| s.value)
    }
}

async fn scrape(api: &Api, served: &Served) -> Exposition {
    let mut request = api.http.get(served.url("/metrics"));
    if let Some(token) = &api.token {
        request = request.bearer_auth(token);
    }
    let response = request.send().await.expect("GET /metrics");
    assert_eq!(response.status().as_u16(), 200);
    assert_eq!(
        response.headers()["content-type"],
        "text/plain; version=0.0.4; charset=utf-8"
    );
    parse(&response.text().await.expect("body"))
}

/// The runs gauge for every status, as a map.
fn runs(metrics: &Exposition) -> BTreeMap<&'static str, f64> {
    tollgate_runtime::RunStatus::ALL
        .iter()
        .map(|s| {
            (
                s.as_str(),
                metrics.value("tollgate_runs", &[("status", s.as_str())]),
            )
        })
        .collect()
}

fn decisions(metrics: &Exposition, outcome: &str) -> f64 {
    metrics.value("tollgate_decisions_total", &[("outcome", outcome)])
}

fn ship_histogram(metrics: &Exposition, suffix: &str, le: Option<&str>) -> f64 {
    let mut labels = vec![("step", "ship"), ("kind", "tool")];
    if let Some(le) = le {
        labels.push(("le", le));
    }
    metrics.value(&format!("tollgate_step_duration_seconds{suffix}"), &labels)
}

#[tokio::test(flavor = "multi_thread")]
async fn metrics_follow_pauses_decisions_conflicts_and_run_ends() {
    let stub =
        StubServer::start(|_| Response::json(200, json!({"shipped": true})).delayed(SHIP_DELAY));
    let ws = Workspace::new(&spec(&stub.url("/ship")));
    let state = ws.path().join("state.db");
    let env = [("TOLLGATE_API_TOKENS", TOKENS)];
    let served = Served::start(&ws.spec, &state, &env, &[]);
    let alice = Api::with_token("token-for-alice");
    let bob = Api::with_token("token-for-bob");
    let agent = Api::with_token("token-for-agent");

    // Behind the API's token, like every route but the probes.
    let (status, body) = Api::new().get(&served.url("/metrics")).await;
    assert_eq!(status, 401, "{body}");
    assert_eq!(code(&body), "unauthorized", "{body}");

    let start = scrape(&alice, &served).await;
    let family = &start.families["tollgate_build_info"];
    assert_eq!(family.kind, "gauge");
    let info = &family.samples[0];
    assert_eq!(info.labels["agent"], "metered-desk");
    assert_eq!(info.labels["version"], env!("CARGO_PKG_VERSION"));
    assert_eq!(info.value, 1.0);
    let hash = common::stdout(&ws.tollgate().args(["hash"]).arg(&ws.spec).output().unwrap());
    assert_eq!(info.labels["spec_hash"], hash.trim());
    assert_eq!(start.families["tollgate_decisions_total"].kind, "counter");
    assert_eq!(
        start.families["tollgate_claim_conflicts_total"].kind,
        "counter"
    );
    assert_eq!(
        start.families["tollgate_step_duration_seconds"].kind,
        "histogram"
    );
    assert_eq!(start.families["tollgate_pending_approvals"].kind, "gauge");
    // Only the gate can pause: it has a series, at zero.
    assert_eq!(
        start.value("tollgate_pending_approvals", &[("step", "gate")]),
        0.0
    );
    assert_eq!(
        start.find("tollgate_pending_approvals", &[("step", "ship")]),
        None
    );
    assert!(
        runs(&start).values().all(|n| *n == 0.0),
        "{:?}",
        runs(&start)
    );
    assert_eq!(start.value("tollgate_stuck_runs", &[]), 0.0);
    // Every approval here is on the served spec: none is stale.
    assert_eq!(
        start.families["tollgate_stale_pending_approvals"].kind,
        "gauge"
    );
    assert_eq!(start.value("tollgate_stale_pending_approvals", &[]), 0.0);
    for outcome in ["approved", "rejected", "modified", "expired", "cancelled"] {
        assert_eq!(decisions(&start, outcome), 0.0, "{outcome}");
    }
    assert_eq!(start.value("tollgate_claim_conflicts_total", &[]), 0.0);
    assert_eq!(ship_histogram(&start, "_count", None), 0.0);

    // Two runs pause at the gate.
    let first = agent.pause(&served, json!({"n": 1})).await;
    let second = agent.pause(&served, json!({"n": 2})).await;
    let paused = scrape(&alice, &served).await;
    assert_eq!(
        paused.value("tollgate_pending_approvals", &[("step", "gate")]),
        2.0
    );
    assert_eq!(runs(&paused)["awaiting_approval"], 2.0);
    assert_eq!(paused.value("tollgate_stale_pending_approvals", &[]), 0.0);
    // The pure step before the gate ran twice; the gate's pause is not a duration.
    assert_eq!(
        paused.value(
            "tollgate_step_duration_seconds_count",
            &[("step", "prepare"), ("kind", "set")]
        ),
        2.0
    );
    assert_eq!(
        paused.value(
            "tollgate_step_duration_seconds_count",
            &[("step", "gate"), ("kind", "approval")]
        ),
        0.0
    );

    // Approve the first: the run ships (a timed tool call) and completes.
    let (status, body) = alice
        .post(
            &served.url(&format!("/approvals/{}/approve", first.key)),
            json!({}),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    alice
        .wait_for_status(&served, &first.run_id, "completed")
        .await;
    let decided = scrape(&alice, &served).await;
    assert_eq!(decisions(&decided, "approved"), 1.0);
    assert_eq!(
        decided.value("tollgate_pending_approvals", &[("step", "gate")]),
        1.0
    );
    let counts = runs(&decided);
    assert_eq!(
        (counts["completed"], counts["awaiting_approval"]),
        (1.0, 1.0)
    );
    assert_eq!(ship_histogram(&decided, "_count", None), 1.0);
    assert!(ship_histogram(&decided, "_sum", None) >= SHIP_DELAY.as_secs_f64());
    assert_eq!(ship_histogram(&decided, "_bucket", Some("0.1")), 0.0);
    assert_eq!(ship_histogram(&decided, "_bucket", Some("+Inf")), 1.0);

    // Alice approves and Bob rejects the second at once: one wins, the
    // other is refused (409 already_resolved) and counted as a conflict.
    let url = |verb: &str| served.url(&format!("/approvals/{}/{verb}", second.key));
    let (approve_url, reject_url) = (url("approve"), url("reject"));
    let (approve, reject) = tokio::join!(
        alice.post(&approve_url, json!({})),
        bob.post(&reject_url, json!({"reason": "no"})),
    );
    let mut answers = [approve.0, reject.0];
    answers.sort();
    assert_eq!(answers, [200, 409], "{approve:?} {reject:?}");
    let loser = if approve.0 == 409 {
        &approve.1
    } else {
        &reject.1
    };
    assert_eq!(code(loser), "already_resolved", "{loser}");
    let outcome = if approve.0 == 200 {
        "completed"
    } else {
        "rejected"
    };
    alice
        .wait_for_status(&served, &second.run_id, outcome)
        .await;
    let raced = scrape(&alice, &served).await;
    assert_eq!(raced.value("tollgate_claim_conflicts_total", &[]), 1.0);
    assert_eq!(
        decisions(&raced, "approved") + decisions(&raced, "rejected"),
        2.0
    );
    assert_eq!(
        raced.value("tollgate_pending_approvals", &[("step", "gate")]),
        0.0
    );
    let counts = runs(&raced);
    assert_eq!(counts["awaiting_approval"], 0.0);
    assert_eq!(counts["completed"] + counts["rejected"], 2.0, "{counts:?}");

    // A repeat of the winning decision is neither a decision nor a conflict.
    let (winner, verb, body) = if approve.0 == 200 {
        (&alice, "approve", json!({}))
    } else {
        (&bob, "reject", json!({"reason": "no"}))
    };
    let (status, _) = winner.post(&url(verb), body).await;
    assert_eq!(status, 200);
    let repeated = scrape(&alice, &served).await;
    assert_eq!(repeated.value("tollgate_claim_conflicts_total", &[]), 1.0);
    assert_eq!(
        decisions(&repeated, "approved") + decisions(&repeated, "rejected"),
        2.0
    );

    // A second server on the same file: the store's gauges agree, the
    // counters are its own (nothing decided there yet).
    let other = Served::start(&ws.spec, &state, &env, &[]);
    let theirs = scrape(&bob, &other).await;
    assert_eq!(runs(&theirs), runs(&repeated));
    assert_eq!(
        decisions(&theirs, "approved") + decisions(&theirs, "rejected"),
        0.0
    );
    assert_eq!(ship_histogram(&theirs, "_count", None), 0.0);
}

#[tokio::test(flavor = "multi_thread")]
async fn cancels_and_expiries_count_as_decisions() {
    let ws = Workspace::new(
        r#"version: 1
agent: quick-desk
steps:
  - id: gate
    approval: { message: "Quick?", ttl: 1h }
"#,
    );
    let state = ws.path().join("state.db");
    // Paused two hours ago with a one-hour TTL: the server's start-up
    // sweep expires it.
    let overdue = ws
        .pause_run_in(&state, json!({}), common::hours_ago(2))
        .await;
    let served = Served::start(&ws.spec, &state, &[], &[]);
    let api = Api::new();
    let waiting = api.pause(&served, json!({})).await;
    let (status, body) = api
        .post(
            &served.url(&format!("/runs/{}/cancel", waiting.run_id)),
            json!({"reason": "duplicate"}),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    api.wait_for_status(&served, &overdue.run_id, "expired")
        .await;
    let metrics = scrape(&api, &served).await;
    assert_eq!(decisions(&metrics, "cancelled"), 1.0);
    assert_eq!(decisions(&metrics, "expired"), 1.0);
    let counts = runs(&metrics);
    assert_eq!((counts["cancelled"], counts["expired"]), (1.0, 1.0));
    assert_eq!(
        metrics.value("tollgate_pending_approvals", &[("step", "gate")]),
        0.0
    );
}

/// The four `tollgate_store_*` counters of a server's SQLite writer.
fn writer(metrics: &Exposition) -> [f64; 4] {
    [
        "tollgate_store_commits_total",
        "tollgate_store_writes_total",
        "tollgate_store_writer_busy_seconds_total",
        "tollgate_store_commit_seconds_total",
    ]
    .map(|name| {
        assert_eq!(metrics.families[name].kind, "counter", "{name}");
        metrics.value(name, &[])
    })
}

#[tokio::test(flavor = "multi_thread")]
async fn the_sqlite_writer_counts_its_commits_writes_and_busy_time() {
    let ws = Workspace::new(
        r#"version: 1
agent: busy-desk
steps:
  - id: gate
    approval: { message: "Go?" }
"#,
    );
    let state = ws.path().join("state.db");
    let served = Served::start(&ws.spec, &state, &[], &[]);
    let api = Api::new();
    // Start-up wrote (the spec's version, the write check): counted.
    let [commits, writes, busy, committing] = writer(&scrape(&api, &served).await);
    assert!(commits >= 1.0 && writes >= commits, "{commits} {writes}");
    assert!(
        busy >= committing && committing > 0.0,
        "{busy} {committing}"
    );

    // 16 runs paused, then approved all at once: every write counted once,
    // and concurrent ones may share commits, never the other way round.
    let mut paused = Vec::new();
    for n in 0..16 {
        paused.push(api.pause(&served, json!({ "n": n })).await);
    }
    let approvals = paused.iter().map(|p| {
        let api = api.clone();
        let url = served.url(&format!("/approvals/{}/approve", p.key));
        async move { api.post(&url, json!({})).await }
    });
    for (status, body) in common::join_all(approvals).await {
        assert_eq!(status, 200, "{body}");
    }
    for p in &paused {
        api.wait_for_status(&served, &p.run_id, "completed").await;
    }
    let [commits2, writes2, busy2, committing2] = writer(&scrape(&api, &served).await);
    // At least a pause and a decision per run.
    assert!(writes2 - writes >= 32.0, "{writes} -> {writes2}");
    assert!(
        commits2 > commits && commits2 - commits <= writes2 - writes,
        "commits {commits} -> {commits2}, writes {writes} -> {writes2}"
    );
    assert!(busy2 > busy && committing2 > committing && busy2 >= committing2);

    // Another server on the file counts its own writer's work only.
    let other = Served::start(&ws.spec, &state, &[], &[]);
    let [_, theirs, ..] = writer(&scrape(&api, &other).await);
    assert!(theirs < writes2 - writes, "{theirs}");
}

#[test]
fn the_parser_here_is_strict() {
    // Its own checks, so a lenient parser cannot let a bad exposition by.
    let good = "# HELP a_total Things.\n# TYPE a_total counter\na_total{x=\"q\\\"\\n\\\\\"} 3\n";
    assert_eq!(parse(good).value("a_total", &[("x", "q\"\n\\")]), 3.0);
    for bad in [
        "a_total 3\n",                                  // no family
        "# HELP a x\na 1\n",                            // no TYPE
        "# HELP a x\n# TYPE a gauge\nb 1\n",            // another family's sample
        "# HELP a x\n# TYPE a gauge\na{x=\"1} 1\n",     // unterminated
        "# HELP a x\n# TYPE a gauge\na{x=\"\\t\"} 1\n", // bad escape
        "# HELP a x\n# TYPE a gauge\na 1 2 3\n",        // trailing text
        "# HELP h x\n# TYPE h histogram\nh_bucket{le=\"1\"} 2\nh_bucket{le=\"+Inf\"} 1\nh_sum 1\nh_count 1\n",
        "# HELP h x\n# TYPE h histogram\nh_bucket{le=\"+Inf\"} 2\nh_sum 1\nh_count 1\n",
    ] {
        let result = std::panic::catch_unwind(|| parse(bad));
        assert!(result.is_err(), "accepted: {bad:?}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_model_step_paused_by_its_guardrail_still_counts_its_call() {
    let stub = StubServer::start(|_| {
        crate::common::model_stub::json_reply(json!({"confidence": 0.1})).delayed(SHIP_DELAY)
    });
    let ws = Workspace::new(
        r#"version: 1
agent: assessed-desk
model:
  base_url: ${MODEL_BASE_URL}
  api_key: ${MODEL_API_KEY}
  name: gpt-test
steps:
  - id: assess
    model:
      prompt: "Assess."
      output: json
    guardrail: { min_confidence: 0.8 }
"#,
    );
    let base = stub.url("/v1");
    let served = Served::start(
        &ws.spec,
        &ws.state_db(),
        &[("MODEL_API_KEY", "model-key"), ("MODEL_BASE_URL", &base)],
        &[],
    );
    let api = Api::new();
    api.pause(&served, json!({})).await;
    let metrics = scrape(&api, &served).await;
    let labels = [("step", "assess"), ("kind", "model")];
    assert_eq!(
        metrics.value("tollgate_step_duration_seconds_count", &labels),
        1.0
    );
    assert!(
        metrics.value("tollgate_step_duration_seconds_sum", &labels) >= SHIP_DELAY.as_secs_f64()
    );
    assert_eq!(
        metrics.value("tollgate_pending_approvals", &[("step", "assess")]),
        1.0
    );
}
