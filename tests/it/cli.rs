//! The CLI contract (DESIGN §6): commands, output and exit statuses.

use crate::common;
use crate::common::{assert_stderr_contains, assert_stdout_contains};

use std::io::Write;
use std::process::Stdio;

use common::*;
use serde_json::json;
use tollgate_runtime::pending_approval::Claim;
use tollgate_runtime::{Decision, Spec};

mod errors_and_help;

fn run_interactive(ws: &Workspace, answers: &str, extra: &[&str]) -> std::process::Output {
    let mut child = ws
        .tollgate()
        .args([
            "run",
            ws.spec_arg(),
            "--input",
            r#"{"order_id": "I-1"}"#,
            "--by",
            "tester",
        ])
        .args(extra)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(answers.as_bytes())
        .unwrap();
    child.wait_with_output().unwrap()
}

#[test]
fn validate_accepts_a_good_spec_and_hash_prints_64_hex() {
    let ws = Workspace::new(GATED_SPEC);
    let out = ws.validate();
    assert_success(&out);
    assert!(stdout(&out).contains("ok"));

    let out = ws
        .tollgate()
        .args(["hash", ws.spec_arg()])
        .output()
        .unwrap();
    assert_success(&out);
    let hash = stdout(&out).trim().to_string();
    assert_eq!(hash.len(), 64);
    assert!(
        hash.chars()
            .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase())
    );
    assert_eq!(hash, Spec::parse(GATED_SPEC, "x").unwrap().hash.to_string());
}

#[test]
fn validate_reports_file_line_and_column_with_exit_2() {
    let ws = Workspace::new(&GATED_SPEC.replace("set:\n      order", "sett:\n      order"));
    let out = ws.validate();
    assert_exit(&out, 2);
    let err = stderr(&out);
    let prefix = format!("error: {}:", ws.spec_arg());
    assert!(err.starts_with(&prefix), "{err}");
    let position: Vec<&str> = err[prefix.len()..].splitn(3, ':').collect();
    assert!(
        position[0].parse::<usize>().is_ok() && position[1].parse::<usize>().is_ok(),
        "{err}"
    );

    let missing = ws
        .tollgate()
        .args(["validate", "nope.yaml"])
        .output()
        .unwrap();
    assert_exit(&missing, 2);
    assert_stderr_contains(&missing, "nope.yaml");
}

#[test]
fn interactive_run_approves_on_stdin() {
    let ws = Workspace::new(GATED_SPEC);
    let out = run_interactive(&ws, "y\n", &[]);
    assert_success(&out);
    assert!(stderr(&out).contains("Ship order I-1?"), "{}", stderr(&out));
    assert!(stdout(&out).contains("completed"), "{}", stdout(&out));
    assert_stdout_contains(&out, r#""by": "tester""#);
    assert!(
        !ws.state_db().exists(),
        "the interactive run keeps nothing on disk"
    );
}

#[test]
fn interactive_reject_exits_5_and_edit_replaces_the_payload() {
    let ws = Workspace::new(GATED_SPEC);
    let out = run_interactive(&ws, "n\nnot now\n", &[]);
    assert_exit(&out, 5);

    // After invalid JSON the prompt asks for the JSON again, so the retyped
    // payload is taken as such (not as an answer to y/n/e).
    let out = run_interactive(
        &ws,
        "maybe\ne\n{broken\n{\"order\": \"EDITED\"}\n",
        &["--json"],
    );
    assert_success(&out);
    let events = events(&stdout(&out));
    let completed = events
        .iter()
        .find(|e| e["type"] == "run_completed")
        .unwrap();
    assert_eq!(completed["outputs"]["act"]["shipped"], json!("EDITED"));
    assert!(stderr(&out).contains("please answer"), "{}", stderr(&out));
    assert!(stderr(&out).contains("not valid JSON"), "{}", stderr(&out));
}

#[test]
fn interactive_run_with_closed_stdin_fails_without_deciding() {
    let ws = Workspace::new(GATED_SPEC);
    let out = run_interactive(&ws, "", &[]);
    assert_exit(&out, 1);
    assert!(stderr(&out).contains("--persist"), "{}", stderr(&out));
}

#[test]
fn json_output_is_one_event_per_line_with_run_id_seq_and_at() {
    let ws = Workspace::new(GATED_SPEC);
    let out = run_interactive(&ws, "y\n", &["--json"]);
    assert_success(&out);
    let events = events(&stdout(&out));
    let types: Vec<&str> = events.iter().map(|e| e["type"].as_str().unwrap()).collect();
    assert_eq!(
        types,
        [
            "run_started",
            "step_started",
            "step_completed",
            "step_started",
            "awaiting_approval",
            "approval_resolved",
            "step_completed",
            "step_started",
            "step_completed",
            "step_started",
            "step_completed",
            "run_completed"
        ]
    );
    for (i, e) in events.iter().enumerate() {
        assert_eq!(e["seq"], json!(i + 1));
        assert!(e["run_id"].is_string() && e["at"].is_string());
    }
    assert_eq!(events[6]["replayed"], json!(true));
}

#[test]
fn persisted_pause_then_decisions_and_their_exit_codes() {
    let ws = Workspace::new(GATED_SPEC);
    let key = ws.pause_run(r#"{"order_id": "P-7"}"#);

    let show = ws
        .tollgate()
        .args(["approvals", "show", &key, "--spec", ws.spec_arg(), "--json"])
        .output()
        .unwrap();
    assert_success(&show);
    let record: serde_json::Value = serde_json::from_str(&stdout(&show)).unwrap();
    assert_eq!(record["status"], "PENDING");
    assert_eq!(record["message"], "Ship order P-7?");

    let list = ws
        .tollgate()
        .args(["approvals", "list", "--spec", ws.spec_arg()])
        .output()
        .unwrap();
    assert_success(&list);
    assert!(stdout(&list).contains(&key) && stdout(&list).contains("Ship order P-7?"));

    let bad_payload = ws
        .decide("approve", &key)
        .args(["--payload", "{nope"])
        .output()
        .unwrap();
    assert_exit(&bad_payload, 2);

    let approve = ws
        .decide("approve", &key)
        .args(["--by", "alice"])
        .args(["--reason", "looks right"])
        .output()
        .unwrap();
    assert_success(&approve);
    assert_stdout_contains(&approve, "completed");

    let again = ws
        .decide("reject", &key)
        .args(["--by", "bob"])
        .output()
        .unwrap();
    assert_exit(&again, 4);
    let err = stderr(&again);
    assert!(
        err.contains("already_resolved") && err.contains("approved by alice"),
        "{err}"
    );

    let unknown = ws
        .tollgate()
        .args([
            "approvals",
            "approve",
            "00000000-0000-4000-8000-000000000000",
        ])
        .args(["--spec", ws.spec_arg()])
        .output()
        .unwrap();
    assert_exit(&unknown, 3);
    assert!(stderr(&unknown).contains("approval_not_found"));

    let nowhere = ws.tollgate().args(["approvals", "list"]).output().unwrap();
    assert_exit(&nowhere, 2);

    let bad_input = ws
        .tollgate()
        .args(["run", ws.spec_arg(), "--persist", "--input", "{oops"])
        .output()
        .unwrap();
    assert_exit(&bad_input, 2);
    assert!(stderr(&bad_input).contains("--input"));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_claim_whose_run_never_finished_is_listed_as_stuck() {
    let ws = Workspace::new(GATED_SPEC);
    let key = ws.pause_run(r#"{"order_id": "X-1"}"#);
    // Claim without resuming: what a crash right after the claim leaves.
    let store = open_store(&ws.state_db());
    let spec = Spec::load(&ws.spec).unwrap();
    store
        .claim(&Claim {
            input: None,
            key: key.clone(),
            decision: Decision::Approve { reason: None },
            decided_by: "crashed-worker".into(),
            now: tollgate_runtime::time::now(),
            spec_hash: spec.hash.to_string(),
            pinned: false,
            timeout: None,
            then: tollgate_runtime::pending_approval::AfterClaim::Release,
        })
        .await
        .unwrap();

    let stuck = ws
        .tollgate()
        .args([
            "approvals",
            "list",
            "--spec",
            ws.spec_arg(),
            "--stuck",
            "--json",
        ])
        .output()
        .unwrap();
    assert_success(&stuck);
    let listed: serde_json::Value = serde_json::from_str(&stdout(&stuck)).unwrap();
    assert_eq!(listed["stuck"][0]["record"]["key"], json!(key));
    assert_eq!(
        listed["stuck"][0]["record"]["decided_by"],
        json!("crashed-worker")
    );

    let pending = ws
        .tollgate()
        .args(["approvals", "list", "--spec", ws.spec_arg(), "--json"])
        .output()
        .unwrap();
    let listed: serde_json::Value = serde_json::from_str(&stdout(&pending)).unwrap();
    assert_eq!(
        listed["approvals"],
        json!([]),
        "a claimed record is not pending"
    );

    // Never silently re-run: approving again is a conflict.
    let again = ws.decide("approve", &key).output().unwrap();
    assert_exit(&again, 4);
}

#[test]
fn a_closed_stdout_is_not_a_panic() {
    // `tollgate approvals show KEY | head -0`: the reader is gone before the
    // output is written.
    let ws = Workspace::new(GATED_SPEC);
    let key = ws.pause_run(r#"{"order_id": "H-1"}"#);
    let mut child = ws
        .tollgate()
        .args(["approvals", "show", &key, "--spec", ws.spec_arg()])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    assert!(!stderr(&out).contains("panicked"), "{}", stderr(&out));
    assert_exit(&out, 0);
}

#[test]
fn an_empty_line_while_editing_goes_back_to_the_question() {
    let ws = Workspace::new(GATED_SPEC);
    let out = run_interactive(&ws, "e\n\ny\n", &["--json"]);
    assert_success(&out);
    let events = events(&stdout(&out));
    let completed = events
        .iter()
        .find(|e| e["type"] == "run_completed")
        .unwrap();
    assert_eq!(completed["outputs"]["act"]["shipped"], json!("I-1"));
}

#[test]
fn a_winning_reject_exits_5_and_a_lost_one_4() {
    let ws = Workspace::new(GATED_SPEC);
    let key = ws.pause_run(r#"{"order_id": "R-1"}"#);
    let reject = ws
        .decide("reject", &key)
        .args(["--reason", "no stock"])
        .output()
        .unwrap();
    assert_exit(&reject, 5);
    assert!(stdout(&reject).contains("rejected"), "{}", stdout(&reject));

    let again = ws.decide("reject", &key).output().unwrap();
    assert_exit(&again, 4);
}

#[test]
fn reject_help_offers_no_payload() {
    let ws = Workspace::new(GATED_SPEC);
    let reject = ws
        .tollgate()
        .args(["approvals", "reject", "--help"])
        .output()
        .unwrap();
    assert_success(&reject);
    // (--payload-digest is the digest of the payload shown, not an edit.)
    assert!(
        !stdout(&reject).contains("--payload "),
        "{}",
        stdout(&reject)
    );
    assert!(stdout(&reject).contains("--payload-digest"));
    let approve = ws
        .tollgate()
        .args(["approvals", "approve", "--help"])
        .output()
        .unwrap();
    assert_stdout_contains(&approve, "--payload");

    let refused = ws
        .decide("reject", "some-key")
        .args(["--payload", "{}"])
        .output()
        .unwrap();
    assert_exit(&refused, 2);
}

#[test]
fn read_and_decide_commands_never_create_a_store() {
    let ws = Workspace::new(GATED_SPEC);
    let elsewhere = ws.path().join("elsewhere").join("state.db");
    let elsewhere = elsewhere.to_str().unwrap();
    let url = format!("sqlite://{elsewhere}");
    let key = "00000000-0000-4000-8000-000000000000";
    let cases: Vec<(Vec<&str>, String)> = vec![
        (
            vec!["approvals", "list", "--spec", ws.spec_arg()],
            ws.state_db().display().to_string(),
        ),
        (
            vec!["approvals", "list", "--stuck", "--spec", ws.spec_arg()],
            ws.state_db().display().to_string(),
        ),
        (
            vec!["approvals", "show", key, "--spec", ws.spec_arg()],
            ws.state_db().display().to_string(),
        ),
        (
            vec!["approvals", "list", "--state", elsewhere],
            elsewhere.to_string(),
        ),
        (
            vec!["approvals", "list", "--database-url", &url],
            elsewhere.to_string(),
        ),
        (
            vec!["approvals", "approve", key, "--spec", ws.spec_arg()],
            ws.state_db().display().to_string(),
        ),
        (
            vec!["approvals", "reject", key, "--spec", ws.spec_arg()],
            ws.state_db().display().to_string(),
        ),
    ];
    for (args, looked_at) in cases {
        let out = ws.tollgate().args(&args).output().unwrap();
        assert_exit(&out, 3);
        let err = stderr(&out);
        assert!(
            err.contains(&format!("no state store at {looked_at}")),
            "{args:?}: {err}"
        );
    }
    assert!(!ws.path().join(".tollgate").exists());
    assert!(!ws.path().join("elsewhere").exists());
}

const GUARDED_SPEC: &str = r#"version: 1
agent: guarded-desk
approvals:
  approvers: [alice]
tools:
  ship:
    http: { url: "http://127.0.0.1:9/ship" }
    approval: required
steps:
  - id: act
    tool: ship
    with: { order: "{{ input.order_id }}" }
"#;

#[test]
fn a_decider_not_among_the_approvers_exits_6_and_the_record_stays_pending() {
    let ws = Workspace::new(GUARDED_SPEC);
    let key = ws.pause_run(r#"{"order_id": "G-1"}"#);
    let out = ws
        .decide("approve", &key)
        .args(["--by", "mallory"])
        .output()
        .unwrap();
    assert_exit(&out, 6);
    assert_stderr_contains(&out, "error: forbidden: ");
    assert_eq!(ws.list_json()["approvals"][0]["key"], json!(key));
}

#[test]
fn a_decided_record_answers_already_resolved_whatever_the_payload() {
    let ws = Workspace::new(GUARDED_SPEC);
    let key = ws.pause_run(r#"{"order_id": "G-2"}"#);
    let reject = ws
        .decide("reject", &key)
        .args(["--by", "alice"])
        .output()
        .unwrap();
    assert_exit(&reject, 5);
    // Not an object, so not valid tool arguments: but the record is decided,
    // and that is the answer.
    let late = ws
        .decide("approve", &key)
        .args(["--by", "alice", "--payload", "[1,2]"])
        .output()
        .unwrap();
    assert_exit(&late, 4);
    assert_stderr_contains(&late, "error: already_resolved: ");
}

/// An approval step's payload is a mapping (validate refuses any other), so
/// an edit that is not one is refused and the gate stays open.
#[test]
fn an_edited_gate_payload_that_is_not_a_mapping_is_refused_and_the_gate_stays_open() {
    let ws = Workspace::new(GATED_SPEC);
    let key = ws.pause_run(r#"{"order_id": "P-1"}"#);
    for payload in [r#""just text""#, "[1, 2]", "7"] {
        let refused = ws
            .decide("approve", &key)
            .args(["--by", "alice", "--payload", payload])
            .output()
            .unwrap();
        assert_exit(&refused, 2);
        assert_stderr_contains(&refused, "must be a JSON object");
    }
    let approved = ws
        .decide("approve", &key)
        .args(["--by", "alice", "--payload", r#"{"order": "P-2"}"#])
        .output()
        .unwrap();
    assert_success(&approved);
    assert_stdout_contains(&approved, "P-2");
}

/// `2026-12-01T09:08:00Z`: RFC 3339, UTC, to the second.
fn is_cli_time(word: &str) -> bool {
    let b = word.as_bytes();
    b.len() == 20
        && word.ends_with('Z')
        && b[10] == b'T'
        && [4, 7].iter().all(|&i| b[i] == b'-')
        && [13, 16].iter().all(|&i| b[i] == b':')
        && b.iter()
            .enumerate()
            .all(|(i, c)| [4, 7, 10, 13, 16, 19].contains(&i) || c.is_ascii_digit())
}

/// Every word that looks like part of a time (starts with a year, or `UTC`).
fn time_words(text: &str) -> Vec<String> {
    text.split(|c: char| c.is_whitespace() || c == '(' || c == ')')
        .filter(|w| w.starts_with("20") && w.len() > 4 && w.as_bytes()[4] == b'-' || *w == "UTC")
        .map(str::to_string)
        .collect()
}

#[test]
fn the_cli_prints_every_time_as_rfc3339_utc_seconds() {
    let ws =
        Workspace::new(&GATED_SPEC.replace("    approval:\n", "    approval:\n      ttl: 1h\n"));
    // Paused two hours ago (through the library, on a clock set back) with a
    // one-hour TTL: expired for every command below, with no wait.
    let key = tokio::runtime::Runtime::new()
        .unwrap()
        .block_on(ws.pause_run_with_clock(serde_json::json!({"order_id": "T-1"}), hours_ago(2)))
        .key;
    let paused = ws
        .tollgate()
        .args([
            "run",
            ws.spec_arg(),
            "--persist",
            "--input",
            r#"{"order_id": "T-2"}"#,
        ])
        .output()
        .unwrap();
    let list = ws
        .tollgate()
        .args(["approvals", "list", "--spec", ws.spec_arg()])
        .output()
        .unwrap();
    let show = ws
        .tollgate()
        .args(["approvals", "show", &key, "--spec", ws.spec_arg()])
        .output()
        .unwrap();
    // Past its one-hour ttl: deciding now names when it expired.
    let expired = ws.decide("approve", &key).output().unwrap();
    assert_exit(&expired, 3);
    let shown_after = ws
        .tollgate()
        .args(["approvals", "show", &key, "--spec", ws.spec_arg()])
        .output()
        .unwrap();

    let mut seen = 0;
    for out in [&paused, &list, &show, &expired, &shown_after] {
        let text = format!("{}{}", stdout(out), stderr(out));
        let words = time_words(&text);
        assert!(!words.is_empty(), "no time printed in:\n{text}");
        for word in words {
            assert!(is_cli_time(&word), "{word:?} in:\n{text}");
            seen += 1;
        }
    }
    assert!(seen >= 6);
    assert_stderr_contains(&expired, "approval_expired");
}

/// Durations and JSON arguments are parsed by clap: a bad one is a usage
/// error in clap's own format (the flag, the value, why), exit 2, before
/// anything runs or any store is opened; from the environment too. `@FILE`
/// still reads the JSON from a file.
#[test]
fn bad_durations_and_json_arguments_fail_in_clap_with_exit_2() {
    let ws = Workspace::new(GATED_SPEC);
    let spec = ws.spec_arg();
    for args in [
        vec!["run", spec, "--input", "{oops"],
        vec!["run", spec, "--persist", "--input", "@missing.json"],
        vec![
            "approvals",
            "approve",
            "k",
            "--spec",
            spec,
            "--payload",
            "[1,",
        ],
        // null is refused as over HTTP: "no edit" or "replace with null"?
        vec![
            "approvals",
            "approve",
            "k",
            "--spec",
            spec,
            "--payload",
            "null",
        ],
        vec!["serve", spec, "--shutdown-grace", "soon"],
        vec!["serve", spec, "--header-timeout", "10"],
        vec!["serve", spec, "--body-timeout", "1x"],
        vec!["serve", spec, "--idle-timeout", ""],
    ] {
        let out = ws.tollgate().args(&args).output().unwrap();
        assert_exit(&out, 2);
        let err = stderr(&out);
        let (flag, value) = (args[args.len() - 2], args[args.len() - 1]);
        assert!(
            err.contains(&format!("invalid value '{value}' for '{flag} <")),
            "{args:?}: {err}"
        );
        assert!(err.contains("try '--help'"), "{args:?}: {err}");
    }
    assert!(!ws.state_db().exists(), "no store was created");

    let out = ws
        .tollgate()
        .args(["serve", spec])
        .env(tollgate_runtime::env::SHUTDOWN_GRACE, "soon")
        .output()
        .unwrap();
    assert_exit(&out, 2);
    assert_stderr_contains(&out, "invalid value 'soon' for '--shutdown-grace <");

    // An environment-only setting with a bad duration names the variable.
    let out = ws
        .tollgate()
        .args(["run", spec, "--persist"])
        .env(tollgate_runtime::env::SQLITE_BUSY_TIMEOUT, "soon")
        .output()
        .unwrap();
    assert_exit(&out, 2);
    assert_stderr_contains(&out, tollgate_runtime::env::SQLITE_BUSY_TIMEOUT);
    assert!(!ws.state_db().exists(), "no store was created");

    std::fs::write(ws.path().join("input.json"), r#"{"order_id": "F-1"}"#).unwrap();
    let key = ws.pause_run("@input.json");
    let show = ws
        .tollgate()
        .args(["approvals", "show", &key, "--spec", spec, "--json"])
        .output()
        .unwrap();
    assert_success(&show);
    assert_stdout_contains(&show, "Ship order F-1?");
}

/// `specs list|show`: every version a run started under, once, with what
/// still uses it; the current spec marked; a version by a unique prefix,
/// its source as written.
#[test]
fn specs_list_and_show_the_stored_versions_with_their_use() {
    let ws = Workspace::new(GATED_SPEC);
    let first = Spec::parse(GATED_SPEC, "agent.yaml").unwrap().hash;
    ws.pause_run(r#"{"order_id": "V-1"}"#);
    ws.pause_run(r#"{"order_id": "V-2"}"#);
    let specs = |args: &[&str]| ws.tollgate().arg("specs").args(args).output().unwrap();

    let list = specs(&["list", "--spec", ws.spec_arg()]);
    assert_success(&list);
    let text = stdout(&list);
    let row = text
        .lines()
        .find(|l| l.contains(first.short()))
        .unwrap_or_else(|| panic!("no row for {}:\n{text}", first.short()));
    assert!(row.starts_with('*'), "the current spec is marked: {row}");
    let words: Vec<&str> = row.split_whitespace().collect();
    assert_eq!(words[2], "shipping-desk");
    assert_eq!(
        &words[5..],
        ["2", "2"],
        "two pending, two waiting runs: {row}"
    );
    assert_eq!(
        text.lines().count(),
        2,
        "one row per hash, however many runs"
    );

    // A deploy: the message changes, so the hash does; one run starts on it.
    let second_text = GATED_SPEC.replace("Ship order", "Really ship order");
    ws.write_spec(&second_text);
    let second = Spec::parse(&second_text, "agent.yaml").unwrap().hash;
    let key = ws.pause_run(r#"{"order_id": "V-3"}"#);
    let rejected = ws.decide("reject", &key).output().unwrap();
    assert_exit(&rejected, 5);

    let list = specs(&["list", "--spec", ws.spec_arg(), "--json"]);
    assert_success(&list);
    let listed: serde_json::Value = serde_json::from_str(&stdout(&list)).unwrap();
    let versions = listed["versions"].as_array().unwrap();
    let summary: Vec<(&str, bool, u64, u64)> = versions
        .iter()
        .map(|v| {
            (
                v["hash"].as_str().unwrap(),
                v["current"].as_bool().unwrap(),
                v["pending_approvals"].as_u64().unwrap(),
                v["live_runs"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        summary,
        [(second.as_str(), true, 0, 0), (first.as_str(), false, 2, 2)],
        "newest first; the rejected run is over"
    );
    let other_agent = specs(&["list", "--spec", ws.spec_arg(), "--agent", "nobody"]);
    assert_success(&other_agent);
    assert_stdout_contains(&other_agent, "no spec versions stored");

    // The old version by a prefix: as stored, and its source as written.
    let state = ws.state_db();
    let state = state.to_str().unwrap();
    let shown = specs(&["show", &first.as_str()[..8], "--state", state]);
    assert_success(&shown);
    assert_stdout_contains(&shown, first.as_str());
    assert_stdout_contains(&shown, "pending:     2");
    assert_stdout_contains(&shown, "current:     no");
    let source = specs(&["show", &first.as_str()[..8], "--state", state, "--source"]);
    assert_success(&source);
    assert_eq!(stdout(&source), GATED_SPEC);
    let json = specs(&["show", second.as_str(), "--spec", ws.spec_arg(), "--json"]);
    assert_success(&json);
    let shown: serde_json::Value = serde_json::from_str(&stdout(&json)).unwrap();
    assert_eq!(shown["current"], true);
    assert_eq!(shown["document"]["agent"], "shipping-desk");
    assert_eq!(shown["source"], second_text.as_str());

    let unknown = specs(&["show", "ffffffff", "--state", state]);
    assert_exit(&unknown, 3);
    assert_stderr_contains(&unknown, "spec_not_found");
    let not_hex = specs(&["show", "v1", "--state", state]);
    assert_exit(&not_hex, 2);
    // Read-only commands: pointed at nothing, nothing is created.
    let missing = ws.path().join("elsewhere.db");
    let nowhere = specs(&["list", "--state", missing.to_str().unwrap()]);
    assert_exit(&nowhere, 3);
    assert!(!missing.exists());
}

/// Before, `approvals approve` in a process without a variable the run's
/// next call needs recorded the approval, and then the run failed at that
/// call: approved, and never done. Now the decision is refused before its
/// claim (exit 4, `spec_unavailable`, naming the variable) and the approval
/// stays pending; a reject, which calls nothing, still goes through.
#[test]
fn an_approval_that_this_process_could_not_carry_out_is_refused_before_its_claim() {
    let ws = Workspace::new(
        r#"version: 1
agent: payouts
tools:
  pay:
    http:
      method: POST
      url: http://127.0.0.1:9/pay
      headers: { Authorization: "Bearer ${PAY_TOKEN}" }
    approval: required
steps:
  - id: pay
    tool: pay
    with: { amount: 5 }
"#,
    );
    let out = ws
        .tollgate()
        .env("PAY_TOKEN", "t0ken")
        .args(["run", ws.spec_arg(), "--persist", "--json", "--input", "{}"])
        .output()
        .expect("run tollgate");
    assert_success(&out);
    let key = awaiting_key(&stdout(&out)).expect("paused");

    let approve = ws
        .decide("approve", &key)
        .env_remove("PAY_TOKEN")
        .args(["--by", "alice"])
        .output()
        .unwrap();
    assert_exit(&approve, 4);
    assert_stderr_contains(&approve, "spec_unavailable");
    assert_stderr_contains(&approve, "PAY_TOKEN");
    let show = ws
        .tollgate()
        .args(["approvals", "show", &key, "--spec", ws.spec_arg(), "--json"])
        .output()
        .unwrap();
    assert_success(&show);
    let record: serde_json::Value = serde_json::from_str(&stdout(&show)).unwrap();
    assert_eq!(record["status"], "PENDING", "nothing was decided: {record}");

    let reject = ws
        .decide("reject", &key)
        .env_remove("PAY_TOKEN")
        .args(["--by", "alice"])
        .output()
        .unwrap();
    assert_exit(&reject, 5);
}
