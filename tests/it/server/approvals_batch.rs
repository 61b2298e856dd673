//! Batch decisions (issue 25 item 10, DESIGN §13) over real HTTP
//! (`POST /approvals/batch` on `tollgate serve`, a real SQLite file) and the
//! real CLI (`approvals approve|reject --all`): each key decided on its own
//! with its own result (decided, repeated, already resolved, expired,
//! unknown, a changed payload), the decided runs resumed, a malformed body
//! refused whole with nothing decided, and the CLI deciding exactly what it
//! showed, only with `--yes` when nobody can be asked.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use crate::common;
use crate::common::server::{Api, Paused, Served, code};
use common::Workspace;

/// A gate with a one-hour TTL, then a step that uses the decided payload.
const SPEC: &str = r#"version: 1
agent: batch-desk
steps:
  - id: gate
    approval:
      message: "Ship order {{ input.order_id }}?"
      payload: { order: "{{ input.order_id }}" }
      ttl: 1h
  - id: act
    set:
      shipped: "{{ steps.gate.output.payload.order }}"
"#;

/// `agent` starts the runs; alice and bob decide them (whoever starts a
/// run may not decide its gates).
const TOKENS: &str = "agent:tok-agent,alice:tok-alice,bob:tok-bob";

async fn batch(api: &Api, served: &Served, decisions: &[Value]) -> (u16, Value) {
    api.post(
        &served.url("/approvals/batch"),
        json!({ "decisions": decisions }),
    )
    .await
}

/// The results of a 200 answer, by key, checking there is one per entry
/// and in the order given.
fn results_by_key(answer: &Value, decisions: &[Value]) -> BTreeMap<String, Value> {
    let results = answer["results"]
        .as_array()
        .unwrap_or_else(|| panic!("results in {answer}"));
    let order: Vec<&Value> = results.iter().map(|r| &r["key"]).collect();
    let given: Vec<&Value> = decisions.iter().map(|d| &d["key"]).collect();
    assert_eq!(order, given, "one result per entry, in order");
    results
        .iter()
        .map(|r| (r["key"].as_str().expect("key").to_string(), r.clone()))
        .collect()
}

fn refused(result: &Value, code: &str) {
    assert_eq!(result["status"], "refused", "{result}");
    assert_eq!(result["error"]["code"], code, "{result}");
    assert!(
        result["error"]["message"]
            .as_str()
            .is_some_and(|m| !m.is_empty()),
        "{result}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_batch_of_fifty_decides_each_key_on_its_own_and_a_second_one_repeats() {
    let ws = Workspace::new(SPEC);
    let state = ws.state_db();
    let served = Served::start(&ws.spec, &state, &[("TOLLGATE_API_TOKENS", TOKENS)], &[]);
    let alice = Api::with_token("tok-alice");
    let bob = Api::with_token("tok-bob");
    let agent = Api::with_token("tok-agent");
    let mut paused: Vec<Paused> = Vec::new();
    for i in 0..50 {
        paused.push(
            agent
                .pause(&served, json!({ "order_id": format!("O-{i}") }))
                .await,
        );
    }
    // Paused two hours ago with a one-hour TTL: expired.
    let expired = ws
        .pause_run_in(&state, json!({ "order_id": "OLD" }), common::hours_ago(2))
        .await
        .key;

    // Decided before the batch: 0 by bob, 1 rejected by alice, 2 approved
    // by alice (the batch repeats that one exactly).
    let decide = |who: &Api, key: &str, verb: &str| {
        let who = who.clone();
        let url = served.url(&format!("/approvals/{key}/{verb}"));
        async move {
            let (status, body) = who.post(&url, json!({})).await;
            assert_eq!(status, 200, "{body}");
        }
    };
    decide(&bob, &paused[0].key, "approve").await;
    decide(&alice, &paused[1].key, "reject").await;
    decide(&alice, &paused[2].key, "approve").await;

    let mut decisions: Vec<Value> = Vec::new();
    for (i, p) in paused.iter().enumerate() {
        decisions.push(match i {
            3 => json!({ "key": p.key, "decision": "approve",
                         "payload_digest": format!("sha256:{}", "0".repeat(64)) }),
            4 => json!({ "key": p.key, "decision": "approve", "reason": "edited",
                         "payload": { "order": "O-4-edited" } }),
            5..=9 => json!({ "key": p.key, "decision": "reject", "reason": "not now" }),
            _ => json!({ "key": p.key, "decision": "approve" }),
        });
    }
    decisions.push(json!({ "key": expired, "decision": "approve" }));
    decisions.push(json!({ "key": "no-such-key", "decision": "approve" }));

    let (status, answer) = batch(&alice, &served, &decisions).await;
    assert_eq!(status, 200, "{answer}");
    let results = results_by_key(&answer, &decisions);
    refused(&results[&paused[0].key], "already_resolved");
    refused(&results[&paused[1].key], "already_resolved");
    assert_eq!(
        results[&paused[2].key],
        json!({ "key": paused[2].key, "status": "APPROVED", "repeated": true })
    );
    refused(&results[&paused[3].key], "payload_changed");
    assert_eq!(
        results[&paused[4].key],
        json!({ "key": paused[4].key, "status": "MODIFIED" })
    );
    for p in &paused[5..10] {
        assert_eq!(
            results[&p.key],
            json!({ "key": p.key, "status": "REJECTED" })
        );
    }
    for p in &paused[10..] {
        assert_eq!(
            results[&p.key],
            json!({ "key": p.key, "status": "APPROVED" })
        );
    }
    refused(&results[&expired], "approval_expired");
    refused(&results["no-such-key"], "approval_not_found");

    // Each decided run resumed in the background; the store says so.
    for (i, p) in paused.iter().enumerate() {
        let (record_status, run_status, decided_by) = match i {
            0 => ("APPROVED", "completed", "bob"),
            1 | 5..=9 => ("REJECTED", "rejected", "alice"),
            3 => ("PENDING", "awaiting_approval", ""),
            4 => ("MODIFIED", "completed", "alice"),
            _ => ("APPROVED", "completed", "alice"),
        };
        let run = alice.wait_for_status(&served, &p.run_id, run_status).await;
        let (status, record) = alice
            .get(&served.url(&format!("/approvals/{}", p.key)))
            .await;
        assert_eq!(status, 200, "{record}");
        assert_eq!(record["status"], record_status, "{i}: {record}");
        if !decided_by.is_empty() {
            assert_eq!(record["decided_by"], decided_by, "{i}: {record}");
        }
        if i == 4 {
            assert_eq!(run["outputs"]["act"]["shipped"], "O-4-edited", "{run}");
        }
    }
    // Read back from the file itself, not the server's answers.
    let store = common::open_store(&state);
    let rejected = store
        .get_approval(&paused[7].key)
        .await
        .expect("read")
        .expect("stored");
    assert_eq!(
        (rejected.status.as_str(), rejected.decided_by.as_deref()),
        ("REJECTED", Some("alice"))
    );
    assert!(
        rejected
            .decision_data
            .as_ref()
            .is_some_and(|d| d.to_string().contains("not now")),
        "{:?}",
        rejected.decision_data
    );

    // The same batch again: alice's own decisions are repeats, the rest
    // as refused as before (3 still pending, refused on its digest).
    let (status, again) = batch(&alice, &served, &decisions).await;
    assert_eq!(status, 200, "{again}");
    let again = results_by_key(&again, &decisions);
    refused(&again[&paused[0].key], "already_resolved");
    refused(&again[&paused[1].key], "already_resolved");
    refused(&again[&paused[3].key], "payload_changed");
    for (i, p) in paused
        .iter()
        .enumerate()
        .filter(|(i, _)| ![0, 1, 3].contains(i))
    {
        let status = results[&p.key]["status"].clone();
        assert_eq!(
            again[&p.key],
            json!({ "key": p.key, "status": status, "repeated": true }),
            "{i}"
        );
    }
    refused(&again[&expired], "approval_expired");
    refused(&again["no-such-key"], "approval_not_found");
    // Bob repeating alice's batch is told they are resolved.
    let (status, by_bob) = batch(&bob, &served, &decisions[10..12]).await;
    assert_eq!(status, 200, "{by_bob}");
    let by_bob = results_by_key(&by_bob, &decisions[10..12]);
    for p in &paused[10..12] {
        refused(&by_bob[&p.key], "already_resolved");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_malformed_batch_is_refused_whole_and_decides_nothing() {
    let ws = Workspace::new(SPEC);
    let served = Served::start(&ws.spec, &ws.state_db(), &[], &[]);
    let api = Api::new();
    let a = api.pause(&served, json!({ "order_id": "A" })).await;
    let b = api.pause(&served, json!({ "order_id": "B" })).await;
    let approve = |key: &str| json!({ "key": key, "decision": "approve" });

    let many: Vec<Value> = (0..501).map(|i| approve(&format!("k-{i}"))).collect();
    let cases: Vec<(Vec<Value>, Vec<&str>)> = vec![
        (vec![], vec!["decisions holds 0 entries", "1 to 500"]),
        (many, vec!["decisions holds 501 entries", "1 to 500"]),
        (
            vec![approve(&a.key), approve(&b.key), approve(&a.key)],
            vec!["decisions[2]", &a.key, "given twice"],
        ),
        (
            vec![
                approve(&a.key),
                json!({ "key": b.key, "decision": "reject", "payload": { "order": "X" } }),
            ],
            vec!["decisions[1]", &b.key, "a reject takes no payload"],
        ),
        (
            vec![json!({ "key": a.key, "decision": "approve", "payload": null })],
            vec!["decisions[0]", "payload is null"],
        ),
    ];
    for (decisions, words) in cases {
        let (status, body) = batch(&api, &served, &decisions).await;
        assert_eq!((status, code(&body)), (400, "invalid_request"), "{body}");
        let message = body["error"]["message"].as_str().expect("message");
        for word in words {
            assert!(message.contains(word), "{word:?} in {message:?}");
        }
    }
    // Not JSON of the shape: an unknown decision, a missing key.
    for body in [
        json!({ "decisions": [{ "key": a.key, "decision": "modify" }] }),
        json!({ "decisions": [{ "decision": "approve" }] }),
        json!({ "decision": [] }),
    ] {
        let (status, answer) = api.post(&served.url("/approvals/batch"), body).await;
        assert_eq!(
            (status, code(&answer)),
            (400, "invalid_request"),
            "{answer}"
        );
    }
    // Nothing was decided by any of them.
    for p in [&a, &b] {
        let (_, record) = api.get(&served.url(&format!("/approvals/{}", p.key))).await;
        assert_eq!(record["status"], "PENDING", "{record}");
    }
}

/// Two gates in a row, and a list of who may decide.
fn two_gates() -> String {
    super::two_gates::spec("batch-cli-desk", "approvers: [alice, bob]")
}

/// `tollgate approvals VERB --spec SPEC ARGS...` on the workspace's state.
fn cli(ws: &Workspace, verb: &str, args: &[&str]) -> std::process::Output {
    ws.tollgate()
        .args(["approvals", verb, "--spec", ws.spec_arg()])
        .args(args)
        .output()
        .expect("run tollgate")
}

/// The pending keys at `step`, as `approvals list` shows them, sorted.
fn pending_at(ws: &Workspace, step: &str) -> Vec<String> {
    let mut keys = super::two_gates::cli_listed(ws, &["--step", step]);
    keys.sort();
    keys
}

#[tokio::test(flavor = "multi_thread")]
async fn the_cli_decides_all_it_selected_after_showing_them_and_only_with_yes_when_nobody_is_asked()
{
    let ws = Workspace::new(&two_gates());
    let mut at_check = Vec::new();
    for order in ["O-1", "O-2", "O-3", "O-4"] {
        let record = ws
            .pause_run_in(
                &ws.state_db(),
                json!({ "order_id": order }),
                tollgate_runtime::time::system(),
            )
            .await;
        at_check.push(record);
    }
    // O-4 passes its check and waits to ship.
    let out = cli(&ws, "approve", &[&at_check[3].key, "--by", "alice"]);
    common::assert_success(&out);
    let shipping = pending_at(&ws, "ship");
    assert_eq!(shipping.len(), 1);
    let selected: Vec<_> = at_check[..3].to_vec();
    let mut selected_keys: Vec<String> = selected.iter().map(|r| r.key.clone()).collect();
    selected_keys.sort();
    assert_eq!(pending_at(&ws, "check"), selected_keys);

    // KEY and --all, --payload with --all: usage errors.
    let out = cli(&ws, "approve", &[&at_check[0].key, "--all", "--yes"]);
    common::assert_exit(&out, 2);
    let out = cli(&ws, "approve", &["--all", "--yes", "--payload", "{}"]);
    common::assert_exit(&out, 2);
    let out = cli(&ws, "approve", &["--step", "check"]);
    common::assert_exit(&out, 2);

    // No terminal and no --yes: the table, then nothing decided, exit 2.
    let out = cli(
        &ws,
        "approve",
        &["--all", "--step", "check", "--by", "alice"],
    );
    common::assert_exit(&out, 2);
    assert!(
        common::stderr(&out).contains("pass --yes"),
        "{}",
        common::stderr(&out)
    );
    let table = common::stdout(&out);
    for record in &selected {
        assert!(table.contains(&record.key), "{table}");
        assert!(table.contains(&record.payload_digest()), "{table}");
    }
    assert!(!table.contains(&shipping[0]), "{table}");
    assert_eq!(
        pending_at(&ws, "check"),
        selected_keys,
        "nothing was decided"
    );

    // Someone the approvers list leaves out: each key refused, exit 4.
    let out = cli(
        &ws,
        "approve",
        &[
            "--all", "--step", "check", "--yes", "--json", "--by", "mallory",
        ],
    );
    common::assert_exit(&out, 4);
    let answer: Value = serde_json::from_str(&common::stdout(&out)).expect("JSON");
    let results = answer["results"].as_array().expect("results");
    assert_eq!(results.len(), 3, "{answer}");
    for result in results {
        assert_eq!(result["status"], "refused", "{result}");
        assert_eq!(result["error"]["code"], "forbidden", "{result}");
    }
    assert_eq!(
        pending_at(&ws, "check"),
        selected_keys,
        "nothing was decided"
    );

    // --step check --yes: exactly the three at check, each run resumed
    // here to its next gate; the one waiting to ship is untouched.
    let out = cli(
        &ws,
        "approve",
        &["--all", "--step", "check", "--yes", "--by", "alice"],
    );
    common::assert_success(&out);
    let printed = common::stdout(&out);
    assert!(printed.contains("PAYLOAD DIGEST"), "{printed}");
    assert!(printed.contains("3 approval(s) selected"), "{printed}");
    for record in &selected {
        let line = printed
            .lines()
            .find(|l| l.starts_with(&format!("{}  APPROVED", record.key)))
            .unwrap_or_else(|| panic!("a result line for {} in {printed}", record.key));
        assert!(line.contains("awaiting_approval"), "{line}");
    }
    assert!(pending_at(&ws, "check").is_empty());
    let store = common::open_store(&ws.state_db());
    for record in &selected {
        let stored = store
            .get_approval(&record.key)
            .await
            .expect("read")
            .expect("stored");
        assert_eq!(
            (stored.status.as_str(), stored.decided_by.as_deref()),
            ("APPROVED", Some("alice"))
        );
    }
    let now_shipping = pending_at(&ws, "ship");
    assert_eq!(now_shipping.len(), 4);
    assert!(now_shipping.contains(&shipping[0]));

    // --json: the shape POST /approvals/batch answers with; a narrowing
    // --query selects one.
    let out = cli(
        &ws,
        "reject",
        &[
            "--all",
            "--step",
            "ship",
            "--query",
            "order O-2",
            "--yes",
            "--json",
            "--by",
            "bob",
            "--reason",
            "no",
        ],
    );
    common::assert_success(&out);
    let answer: Value = serde_json::from_str(&common::stdout(&out)).expect("JSON");
    let results = answer["results"].as_array().expect("results");
    assert_eq!(results.len(), 1, "{answer}");
    assert_eq!(results[0]["status"], "REJECTED", "{answer}");
    assert_eq!(pending_at(&ws, "ship").len(), 3);

    // Nothing selected: said so, exit 0.
    let out = cli(&ws, "approve", &["--all", "--step", "nowhere", "--yes"]);
    common::assert_success(&out);
    assert!(
        common::stdout(&out).contains("no pending approvals to approve"),
        "{}",
        common::stdout(&out)
    );
}

/// `tollgate approvals VERB --all ARGS...` on a terminal (`script` gives it
/// one), answering the question with `answer`.
fn cli_at_a_terminal(ws: &Workspace, verb: &str, args: &[&str], answer: &str) -> String {
    use std::io::Write as _;
    let command = [
        common::tollgate_bin(),
        "approvals",
        verb,
        "--all",
        "--spec",
        ws.spec_arg(),
    ]
    .iter()
    .chain(args)
    .map(|word| format!("'{word}'"))
    .collect::<Vec<_>>()
    .join(" ");
    let mut child = std::process::Command::new("script")
        .args(["-qec", &command, "/dev/null"])
        .current_dir(ws.path())
        .env_remove("TOLLGATE_DATABASE_URL")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("run script(1), which gives tollgate a terminal");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(answer.as_bytes())
        .expect("answer");
    let out = child.wait_with_output().expect("wait for script");
    common::assert_success(&out);
    common::stdout(&out)
}

#[tokio::test(flavor = "multi_thread")]
async fn the_cli_asks_at_a_terminal_and_decides_only_on_yes() {
    let ws = Workspace::new(&two_gates());
    let record = ws
        .pause_run_in(
            &ws.state_db(),
            json!({ "order_id": "T-1" }),
            tollgate_runtime::time::system(),
        )
        .await;
    let asked = cli_at_a_terminal(&ws, "approve", &["--by", "alice"], "n\n");
    assert!(asked.contains(&record.key), "{asked}");
    assert!(asked.contains("Approve 1 approvals? [y/N]"), "{asked}");
    assert!(asked.contains("nothing was decided"), "{asked}");
    assert_eq!(pending_at(&ws, "check"), vec![record.key.clone()]);

    let asked = cli_at_a_terminal(&ws, "reject", &["--by", "alice"], "y\n");
    assert!(asked.contains("Reject 1 approvals? [y/N]"), "{asked}");
    assert!(
        asked.contains(&format!("{}  REJECTED", record.key)),
        "{asked}"
    );
    let stored = common::open_store(&ws.state_db())
        .get_approval(&record.key)
        .await
        .expect("read")
        .expect("stored");
    assert_eq!(stored.status.as_str(), "REJECTED");
}
