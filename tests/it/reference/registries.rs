//! The registries the reference pages come from hold every fact the code
//! has: a variable read, a metric written, an error code answered or an
//! event emitted that its registry lacks fails here, so a hand-kept table
//! cannot pass.

use crate::common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use common::Workspace;
use common::server::Served;
use serde_json::json;
use tollgate_runtime::events::{EVENT_TYPES, Event, EventKind};
use tollgate_runtime::metrics::FAMILIES;
use tollgate_runtime::policy::{Channel, VoteDecision};

/// Every `.rs` file under the runtime's and tollgate's sources, with its text.
fn sources() -> Vec<(String, String)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    for dir in ["vendored/src", "src"] {
        for entry in walkdir::WalkDir::new(root.join(dir)).sort_by_file_name() {
            let entry = entry.expect("walk the sources");
            if entry.path().extension().is_some_and(|e| e == "rs") {
                let text = std::fs::read_to_string(entry.path()).expect("read a source file");
                let name = entry.path().strip_prefix(root).unwrap_or(entry.path());
                files.push((name.display().to_string(), text));
            }
        }
    }
    assert!(files.len() > 100, "the sources were found");
    files
}

/// Each string literal in `text` that starts with `start` (the quote
/// included), as the name it spells: `"TOLLGATE_LISTEN"` -> `TOLLGATE_LISTEN`.
fn literals<'a>(text: &'a str, start: &str, name_char: fn(char) -> bool) -> Vec<&'a str> {
    text.match_indices(start)
        .map(|(at, _)| {
            let rest = &text[at + 1..];
            let end = rest.find(|c| !name_char(c)).unwrap_or(rest.len());
            &rest[..end]
        })
        .collect()
}

/// The `TOLLGATE_*` names in `files` that the env registry does not list
/// (a registry name ending in `_` is a prefix: `TOLLGATE_GROUP_<NAME>`).
fn unregistered_variables(files: &[(String, String)]) -> Vec<String> {
    let registered = |name: &str| {
        tollgate_runtime::env::ALL.iter().any(|v| {
            v.name == name || (v.name.ends_with('_') && name.starts_with(v.name) && name != v.name)
        })
    };
    let mut found = Vec::new();
    for (file, text) in files {
        for name in literals(text, "\"TOLLGATE_", |c| {
            c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_'
        }) {
            if !registered(name) {
                found.push(format!("{file}: {name}"));
            }
        }
    }
    found
}

#[test]
fn every_tollgate_variable_the_code_names_is_in_the_env_registry() {
    let missing = unregistered_variables(&sources());
    assert!(
        missing.is_empty(),
        "read but not in tollgate_runtime::env::ALL (vendored/src/support/env.rs):\n{}",
        missing.join("\n")
    );
}

#[test]
fn the_variable_scan_catches_a_variable_read_by_name_that_the_registry_lacks() {
    let files = vec![(
        "new.rs".to_string(),
        r#"let a = std::env::var("TOLLGATE_LISTEN"); let b = std::env::var("TOLLGATE_NEW_KNOB");
           let c = std::env::var("TOLLGATE_GROUP_FINANCE");"#
            .to_string(),
    )];
    assert_eq!(
        unregistered_variables(&files),
        ["new.rs: TOLLGATE_NEW_KNOB"]
    );
}

#[test]
fn the_error_registry_lists_exactly_the_codes_the_server_answers_with() {
    // One value of every ApiError variant (a variant without one fails to
    // compile in server/openapi/errors.rs), through ApiError::code.
    let mut answered: BTreeSet<&str> = tollgate_runtime::server::openapi::statuses_by_code()
        .into_keys()
        .collect();
    answered.insert(tollgate_runtime::server::NOT_READY);
    let registered: BTreeSet<&str> = tollgate_runtime::server::ERROR_CODES
        .iter()
        .map(|c| c.code)
        .collect();
    assert_eq!(
        registered.len(),
        tollgate_runtime::server::ERROR_CODES.len(),
        "a code listed twice"
    );
    assert_eq!(
        answered.difference(&registered).collect::<Vec<_>>(),
        Vec::<&&str>::new(),
        "answered but not in tollgate_runtime::server::ERROR_CODES (vendored/src/service/error.rs)"
    );
    assert_eq!(
        registered.difference(&answered).collect::<Vec<_>>(),
        Vec::<&&str>::new(),
        "in the registry but never answered"
    );
    for code in tollgate_runtime::server::ERROR_CODES {
        assert!(
            !code.meaning.trim().is_empty(),
            "{} has no meaning",
            code.code
        );
    }
}

#[test]
fn every_metric_name_in_code_that_writes_metrics_is_registered() {
    let names: BTreeSet<&str> = FAMILIES.iter().map(|f| f.name).collect();
    assert_eq!(names.len(), FAMILIES.len(), "a family listed twice");
    let mut missing = Vec::new();
    for (file, text) in sources() {
        if !(text.contains("Exposition") || text.contains("MetricFamily")) {
            continue;
        }
        for name in literals(&text, "\"tollgate_", |c| {
            c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_'
        }) {
            if !names.contains(name) {
                missing.push(format!("{file}: {name}"));
            }
        }
    }
    assert!(
        missing.is_empty(),
        "metric names not in tollgate_runtime::metrics::FAMILIES (vendored/src/engine/metrics.rs):\n{}",
        missing.join("\n")
    );
}

/// `GET /metrics` of a real server on SQLite writes every family (writer
/// stats included), each as the registry says, and no other.
#[tokio::test(flavor = "multi_thread")]
async fn a_servers_metrics_are_exactly_the_registered_families() {
    let ws = Workspace::new(
        "version: 1\nagent: metered\nsteps:\n  - id: gate\n    approval: { message: \"Go?\" }\n",
    );
    let served = Served::start(&ws.spec, &ws.path().join("state.db"), &[], &[]);
    let text = reqwest::get(served.url("/metrics"))
        .await
        .expect("GET /metrics")
        .text()
        .await
        .expect("body");
    let mut written: BTreeMap<&str, &str> = BTreeMap::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').expect("# TYPE name kind");
            written.insert(name, kind);
        }
    }
    let registered: BTreeMap<&str, &str> = FAMILIES.iter().map(|f| (f.name, f.kind)).collect();
    assert_eq!(written, registered, "{text}");
    // Each sample's labels are its family's (a histogram adds `le`).
    for line in text.lines().filter(|l| !l.starts_with('#')) {
        let name = line.split(['{', ' ']).next().unwrap_or_default();
        let family = FAMILIES
            .iter()
            .filter(|f| name.starts_with(f.name))
            .max_by_key(|f| f.name.len())
            .unwrap_or_else(|| panic!("a sample of no family: {line}"));
        if let Some(labels) = line.split_once('{').and_then(|(_, l)| l.split_once('}')) {
            for pair in labels.0.split("\",") {
                let label = pair.split('=').next().unwrap_or_default();
                assert!(
                    family.labels.contains(&label) || label == "le",
                    "{line}: label {label} is not one of {:?}",
                    family.labels
                );
            }
        }
    }
}

/// One event of every kind, each optional field set. A kind added to
/// `EventKind` fails to compile in `sample_covers` until it has a sample.
fn samples() -> Vec<EventKind> {
    let at = chrono::DateTime::<chrono::Utc>::UNIX_EPOCH;
    let some = || Some("x".to_string());
    vec![
        EventKind::RunStarted {
            agent: "a".into(),
            spec_hash: "h".into(),
            input: tollgate_runtime::json_doc::JsonDoc::from_value(&json!({})),
        },
        EventKind::StepStarted {
            step: "s".into(),
            index: 0,
        },
        EventKind::StepCompleted {
            step: "s".into(),
            index: 0,
            output: json!(1),
            replayed: true,
        },
        EventKind::AwaitingApproval {
            key: "k".into(),
            step: "s".into(),
            phase: tollgate_runtime::Phase::Before,
            message: some(),
            payload: json!({}),
            expires_at: at,
        },
        EventKind::ApprovalResolved {
            key: "k".into(),
            decision: "approve".into(),
            decided_by: "d".into(),
            reason: some(),
            input: Some(json!({})),
            pinned_to: some(),
        },
        EventKind::ApprovalMigrated {
            key: "k".into(),
            from: "a".into(),
            to: "b".into(),
            by: "o".into(),
            map: Default::default(),
            auto: true,
        },
        EventKind::ApprovalVote {
            key: "k".into(),
            voter: "v".into(),
            decision: VoteDecision::Approve,
            rule: some(),
            reason: some(),
            channel: Channel::Api,
            payload_digest: "d".into(),
            input: Some(json!({})),
            supersedes: true,
            progress: "p".into(),
        },
        EventKind::ApprovalReminded {
            key: "k".into(),
            step: "s".into(),
            percent: 50,
            expires_at: at,
        },
        EventKind::ApprovalEscalated {
            key: "k".into(),
            step: "s".into(),
            groups: vec![],
            added: vec![],
        },
        EventKind::GateSkipped {
            step: "s".into(),
            when: "w".into(),
            value: json!(false),
        },
        EventKind::RunCompleted {
            outputs: Default::default(),
        },
        EventKind::RunRejected { reason: some() },
        EventKind::RunExpired { key: "k".into() },
        EventKind::RunSkipped {
            step: "s".into(),
            dedupe_key: "d".into(),
        },
        EventKind::RunFailed {
            error: "e".into(),
            by: some(),
            reason: some(),
        },
        EventKind::RunCancelled {
            by: "o".into(),
            reason: some(),
        },
        EventKind::RunRecovered {
            by: "n".into(),
            from_step: some(),
            forced: true,
        },
        EventKind::RunStuck {
            step: "s".into(),
            reason: "r".into(),
        },
    ]
}

/// Never false: the match is what fails to compile on a new kind.
fn sample_covers(kind: &EventKind) -> bool {
    match kind {
        EventKind::RunStarted { .. }
        | EventKind::StepStarted { .. }
        | EventKind::StepCompleted { .. }
        | EventKind::AwaitingApproval { .. }
        | EventKind::ApprovalResolved { .. }
        | EventKind::ApprovalMigrated { .. }
        | EventKind::ApprovalVote { .. }
        | EventKind::ApprovalReminded { .. }
        | EventKind::ApprovalEscalated { .. }
        | EventKind::GateSkipped { .. }
        | EventKind::RunCompleted { .. }
        | EventKind::RunRejected { .. }
        | EventKind::RunExpired { .. }
        | EventKind::RunSkipped { .. }
        | EventKind::RunFailed { .. }
        | EventKind::RunCancelled { .. }
        | EventKind::RunRecovered { .. }
        | EventKind::RunStuck { .. } => true,
    }
}

#[test]
fn every_event_type_and_field_a_run_writes_is_in_the_event_registry() {
    let samples = samples();
    let mut seen = BTreeSet::new();
    for kind in samples {
        assert!(sample_covers(&kind));
        let event = Event {
            run_id: "r".into(),
            seq: 1,
            at: chrono::DateTime::UNIX_EPOCH,
            kind,
        };
        let value = serde_json::to_value(&event).expect("serialise an event");
        let name = value["type"].as_str().expect("type").to_string();
        let entry = EVENT_TYPES
            .iter()
            .find(|t| t.name == name)
            .unwrap_or_else(|| panic!("{name} is not in tollgate_runtime::events::EVENT_TYPES"));
        let written: BTreeSet<&str> = value
            .as_object()
            .expect("an object")
            .keys()
            .map(String::as_str)
            .filter(|k| !["run_id", "seq", "at", "type"].contains(k))
            .collect();
        let registered: BTreeSet<&str> = entry.fields.iter().map(|(f, _)| *f).collect();
        assert_eq!(written, registered, "the fields of {name}: {value}");
        seen.insert(name);
    }
    let registered: BTreeSet<String> = EVENT_TYPES.iter().map(|t| t.name.to_string()).collect();
    assert_eq!(
        seen, registered,
        "every registered type is one a run writes"
    );
}

/// The env registry's defaults for variables whose flag has no clap
/// default (durations, sizes) are the constants the code falls back to.
#[test]
fn the_env_registrys_written_defaults_are_the_codes_own() {
    use tollgate_runtime::env;
    use tollgate_runtime::time::parse_duration;
    let default = |name: &str| {
        env::ALL
            .iter()
            .find(|v| v.name == name)
            .unwrap_or_else(|| panic!("{name} is registered"))
            .default
    };
    let durations = [
        (
            env::BODY_TIMEOUT,
            tollgate_runtime::server::DEFAULT_BODY_TIMEOUT,
        ),
        (
            env::HEADER_TIMEOUT,
            tollgate_runtime::server::DEFAULT_HEADER_TIMEOUT,
        ),
        (
            env::IDLE_TIMEOUT,
            tollgate_runtime::server::DEFAULT_IDLE_TIMEOUT,
        ),
        (
            env::SHUTDOWN_GRACE,
            tollgate_runtime::server::DEFAULT_SHUTDOWN_GRACE,
        ),
        (
            env::NOTIFY_RETRY_WINDOW,
            tollgate_runtime::notify::outbox::DEFAULT_RETRY_WINDOW,
        ),
        (env::RUN_LEASE, tollgate_runtime::durable::DEFAULT_LEASE),
        (
            env::SQLITE_BUSY_TIMEOUT,
            tollgate_runtime::store::SqliteOptions::default().busy_timeout,
        ),
    ];
    for (name, constant) in durations {
        assert_eq!(parse_duration(default(name)), Ok(constant), "{name}");
    }
    assert_eq!(
        default(env::DB_POOL_SIZE),
        tollgate_runtime::store::DEFAULT_POOL_SIZE.to_string()
    );
}
