//! `approvals migrate` (issue 24 item 4): pending approvals of v1 moved
//! onto v2 by hand, from the CLI and over HTTP. A dry run changes nothing;
//! the compatible ones move with their message and payload rendered by v2;
//! a renamed gate moves with `--map`; a removed one is refused with a
//! reason; a migrate racing decisions on one key: exactly one goes first.

use std::collections::BTreeMap;
use std::process::Output;

use serde_json::{Value, json};

use super::policies::{GATES, hash_of, v1, v2};
use crate::common::server::{self, Api, Served};
use crate::common::stub_server::{Response, StubServer};
use crate::common::{Workspace, assert_exit, assert_stderr_contains, open_store, stderr, stdout};
use tollgate_runtime::EventKind;
use tollgate_runtime::server::openapi::schema_errors;
use tollgate_runtime::spec_version::SpecVersion;

struct Paused {
    ws: Workspace,
    stub: StubServer,
    v2: String,
    v2_hash: String,
    v1_hash: String,
    /// Gate -> approval key.
    keys: BTreeMap<&'static str, String>,
}

/// v1 (`refuse`) with a pause at each gate, v2 written beside it as
/// `v2.yaml` (the same default state file).
fn paused() -> Paused {
    let stub = StubServer::start(|_| Response::json(201, json!({"ok": true})));
    let (v1_text, v2_text) = (
        v1("refuse", &stub.url("/ship")),
        v2("refuse", &stub.url("/ship")),
    );
    let ws = Workspace::new(&v1_text);
    let mut keys = BTreeMap::new();
    for gate in GATES {
        let input = json!({"order": format!("O-{gate}"), "gate": gate}).to_string();
        keys.insert(gate, ws.pause_run(&input));
    }
    let v2_path = ws.path().join("v2.yaml");
    std::fs::write(&v2_path, &v2_text).expect("write v2");
    Paused {
        v1_hash: hash_of(&v1_text),
        v2_hash: hash_of(&v2_text),
        v2: v2_path.to_str().expect("utf-8").to_string(),
        ws,
        stub,
        keys,
    }
}

impl Paused {
    fn migrate(&self, args: &[&str]) -> Output {
        self.ws
            .tollgate()
            .args(["approvals", "migrate", "--to", &self.v2, "--by", "ops"])
            .args(args)
            .output()
            .expect("run tollgate")
    }

    fn report(&self, args: &[&str]) -> (Option<i32>, Value) {
        let out = self.migrate(&[args, &["--json"]].concat());
        let report = serde_json::from_str(&stdout(&out))
            .unwrap_or_else(|e| panic!("{e}: {}\n{}", stdout(&out), crate::common::stderr(&out)));
        (out.status.code(), report)
    }

    async fn spec_of(&self, gate: &str) -> (String, String) {
        let record = open_store(&self.ws.state_db())
            .get_approval(&self.keys[gate])
            .await
            .expect("get")
            .expect("record");
        (record.spec_hash, record.step_id)
    }
}

/// `gate` -> (outcome, classification) of a report.
fn outcomes(
    report: &Value,
    keys: &BTreeMap<&'static str, String>,
) -> BTreeMap<String, (String, String)> {
    report["results"]
        .as_array()
        .expect("results")
        .iter()
        .map(|r| {
            let gate = keys
                .iter()
                .find(|(_, k)| **k == r["key"])
                .map(|(g, _)| g.to_string())
                .expect("a known key");
            let text = |v: &Value| v.as_str().unwrap_or("null").to_string();
            (gate, (text(&r["outcome"]), text(&r["classification"])))
        })
        .collect()
}

fn row(outcome: &str, class: &str) -> (String, String) {
    (outcome.to_string(), class.to_string())
}

#[tokio::test(flavor = "multi_thread")]
async fn a_dry_run_changes_nothing_then_the_compatible_move_and_a_map_moves_the_renamed() {
    let p = paused();
    // Dry run: what would move, what would not and why; nothing changes.
    let (code, dry) = p.report(&["--all", "--dry-run"]);
    assert_eq!(code, Some(4), "some do not fit: {dry}");
    assert_eq!(dry["dry_run"], true);
    assert_eq!(
        outcomes(&dry, &p.keys),
        BTreeMap::from([
            ("audit".into(), row("would_move", "identical_gate")),
            ("review".into(), row("would_move", "message_changed")),
            ("legal".into(), row("refused", "step_removed")),
            ("finance".into(), row("refused", "step_removed")),
        ])
    );
    let review = dry["results"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["step"] == "review")
        .unwrap();
    assert_eq!(review["message_before"], "Review O-review?");
    assert_eq!(review["message_after"], "Please review O-review?");
    let finance = dry["results"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["step"] == "finance")
        .unwrap();
    let why = finance["reason"].as_str().expect("reason");
    assert!(why.contains("--map finance=money"), "a hint: {why}");
    for gate in GATES {
        assert_eq!(p.spec_of(gate).await.0, p.v1_hash, "{gate}: unchanged");
    }

    // Without --yes and no terminal to ask: nothing moves, exit 2.
    let out = p.migrate(&["--all"]);
    assert_eq!(
        out.status.code(),
        Some(2),
        "{}",
        crate::common::stderr(&out)
    );
    assert_eq!(p.spec_of("audit").await.0, p.v1_hash);

    // --yes: the two that fit move; the two that do not say why and stay.
    let (code, moved) = p.report(&["--all", "--yes"]);
    assert_eq!(code, Some(4), "{moved}");
    assert_eq!(
        outcomes(&moved, &p.keys),
        BTreeMap::from([
            ("audit".into(), row("moved", "identical_gate")),
            ("review".into(), row("moved", "message_changed")),
            ("legal".into(), row("refused", "step_removed")),
            ("finance".into(), row("refused", "step_removed")),
        ])
    );
    assert_eq!(
        p.spec_of("audit").await,
        (p.v2_hash.clone(), "audit".into())
    );
    assert_eq!(p.spec_of("review").await.0, p.v2_hash);
    assert_eq!(p.spec_of("legal").await.0, p.v1_hash);
    let store = open_store(&p.ws.state_db());
    let review = store
        .get_approval(&p.keys["review"])
        .await
        .unwrap()
        .unwrap();
    assert_eq!(review.message.as_deref(), Some("Please review O-review?"));
    let events = store.run_events(&review.run_id, 0).await.unwrap();
    assert!(
        events.iter().any(|e| e.kind
            == EventKind::ApprovalMigrated {
                key: p.keys["review"].clone(),
                from: p.v1_hash.clone(),
                to: p.v2_hash.clone(),
                by: "ops".into(),
                map: BTreeMap::new(),
                auto: false,
            }),
        "{events:?}"
    );

    // The renamed gate moves with --map; the removed one is refused alone.
    let finance_key = p.keys["finance"].clone();
    let (code, mapped) = p.report(&["--key", &finance_key, "--map", "finance=money", "--yes"]);
    assert_eq!(code, Some(0), "{mapped}");
    assert_eq!(mapped["results"][0]["to_step"], "money");
    assert_eq!(
        p.spec_of("finance").await,
        (p.v2_hash.clone(), "money".into())
    );
    let legal_key = p.keys["legal"].clone();
    let (code, refused) = p.report(&["--key", &legal_key, "--yes"]);
    assert_eq!(code, Some(4), "{refused}");
    assert_eq!(refused["results"][0]["outcome"], "refused");

    // A moved approval is decided on v2: approve it under v2 (refuse is
    // the policy, and it is v2's own now) and v2's request is the one sent.
    let out =
        p.ws.tollgate()
            .args(["approvals", "approve", &finance_key, "--spec", &p.v2])
            .output()
            .unwrap();
    assert!(out.status.success(), "{}", crate::common::stderr(&out));
    let sent: Vec<Value> = p.stub.requests().iter().map(|r| r.json()).collect();
    assert_eq!(
        sent,
        [json!({"spec": "v2", "order": "O-finance", "gate": "finance"})]
    );
}

/// Four CLI migrates and four CLI approvals of one key at once, each its
/// own process on one SQLite file: exactly one goes first. A move first:
/// the other migrates find it on v2 already (`current`, exit 0) and the
/// approvals, checked against v1, are `spec_changed` (exit 4). An approval
/// first: nothing moves and the rest are `already_resolved` (exit 4).
#[test]
fn migrates_and_approvals_racing_on_one_key_have_one_winner() {
    let p = paused();
    let key = p.keys["audit"].clone();
    let spec_v1 = p.ws.spec_arg().to_string();
    let children: Vec<_> = (0..8)
        .map(|i| {
            let mut cmd = p.ws.tollgate();
            if i % 2 == 0 {
                cmd.args([
                    "approvals",
                    "migrate",
                    "--to",
                    &p.v2,
                    "--key",
                    &key,
                    "--yes",
                    "--json",
                ]);
            } else {
                // Each its own decider: one decider repeating a decision
                // is answered with it (exit 0), not refused.
                let by = format!("user-{i}");
                cmd.args([
                    "approvals",
                    "approve",
                    &key,
                    "--spec",
                    &spec_v1,
                    "--by",
                    &by,
                ]);
            }
            cmd.stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .expect("spawn")
        })
        .collect();
    let outputs: Vec<Output> = children
        .into_iter()
        .map(|c| c.wait_with_output().expect("wait"))
        .collect();
    let mut moved = 0;
    let mut approved = 0;
    for (i, out) in outputs.iter().enumerate() {
        let code = out.status.code();
        if code != Some(0) {
            assert_eq!(code, Some(4), "{}", crate::common::stderr(out));
        } else if i % 2 == 1 {
            approved += 1;
        } else {
            let report: Value = serde_json::from_str(&stdout(out)).expect("report");
            match report["results"][0]["outcome"].as_str() {
                Some("moved") => moved += 1,
                Some("current") => {}
                other => panic!("a migrate that exits 0 moved or found it moved: {other:?}"),
            }
        }
    }
    assert_eq!(
        moved + approved,
        1,
        "exactly one goes first: {moved} moved, {approved} approved"
    );
}

/// The same over HTTP, onto the spec the server serves.
#[tokio::test(flavor = "multi_thread")]
async fn over_http_the_served_spec_is_the_target() {
    let p = paused();
    let served = Served::start(std::path::Path::new(&p.v2), &p.ws.state_db(), &[], &[]);
    let api = Api::new();
    let url = served.url("/approvals/migrate");
    // Every answer holds to the schema the server documents for it.
    let (_, document) = api.get(&served.url("/openapi.json")).await;
    let conforms = |status: u16, body: &Value| {
        let responses = &document["paths"]["/approvals/migrate"]["post"]["responses"];
        let response = match &responses[status.to_string()] {
            Value::Null => &responses["default"],
            listed => listed,
        };
        let schema = &response["content"]["application/json"]["schema"];
        assert!(schema.is_object(), "{status}: {response}");
        let errors = schema_errors(&document, schema, body);
        assert!(errors.is_empty(), "{status} {body}: {errors:#?}");
    };
    let (status, dry) = api.post(&url, json!({"all": true, "dry_run": true})).await;
    assert_eq!(status, 200, "{dry}");
    conforms(status, &dry);
    assert_eq!(
        outcomes(&dry, &p.keys)["audit"],
        row("would_move", "identical_gate")
    );
    let (status, moved) = api
        .post(
            &url,
            json!({"step": "finance", "map": {"finance": "money"}}),
        )
        .await;
    assert_eq!(status, 200, "{moved}");
    conforms(status, &moved);
    assert_eq!(
        outcomes(&moved, &p.keys)["finance"],
        row("moved", "identical_gate")
    );
    assert_eq!(
        p.spec_of("finance").await,
        (p.v2_hash.clone(), "money".into())
    );
    // Exactly one selector.
    let (status, bad) = api.post(&url, json!({"all": true, "step": "audit"})).await;
    conforms(status, &bad);
    assert_eq!(
        (status, server::code(&bad)),
        (400, "invalid_request"),
        "{bad}"
    );
    // A `from` that names no stored version is the caller's mistake.
    let (status, bad) = api.post(&url, json!({"from": "0123abcd"})).await;
    conforms(status, &bad);
    assert_eq!(
        (status, server::code(&bad)),
        (400, "invalid_request"),
        "{bad}"
    );
    let message = bad["error"]["message"].as_str().expect("message");
    assert!(message.contains("no stored spec version"), "{message}");
    // A key already decided answers as a decision would.
    let (status, _) = api
        .post(
            &served.url(&format!("/approvals/{}/reject", p.keys["legal"])),
            json!({}),
        )
        .await;
    assert_eq!(status, 200);
    let (status, gone) = api.post(&url, json!({"key": p.keys["legal"]})).await;
    assert_eq!(
        (status, server::code(&gone)),
        (409, "already_resolved"),
        "{gone}"
    );
}

/// `--from HASH` picks the pauses of one version: with v1's four pauses
/// and one of v1b (v1 with another description) waiting, `--from` v1b's
/// short hash moves v1b's alone and v1's stay; `--from` eight characters
/// of v1's selects v1's four alone. A prefix no stored version has, or one
/// two stored versions share, is refused (exit 2) naming why, and nothing
/// moves.
#[tokio::test(flavor = "multi_thread")]
async fn from_moves_only_the_pauses_of_the_version_it_names() {
    let p = paused();
    let v1b_text = v1("refuse", &p.stub.url("/ship")).replace("(v1)", "(v1b)");
    let v1b = p.ws.path().join("v1b.yaml");
    std::fs::write(&v1b, &v1b_text).expect("write v1b");
    let v1b_hash = hash_of(&v1b_text);
    let v1b_key = p.ws.pause_run_of(
        v1b.to_str().expect("utf-8"),
        &json!({"order": "O-b", "gate": "audit"}).to_string(),
    );
    let keys_of = |report: &Value| -> Vec<String> {
        let mut keys: Vec<String> = report["results"]
            .as_array()
            .expect("results")
            .iter()
            .map(|r| r["key"].as_str().expect("key").to_string())
            .collect();
        keys.sort();
        keys
    };
    let mut v1_keys: Vec<String> = p.keys.values().cloned().collect();
    v1_keys.sort();

    // Eight characters of v1's hash: v1's four, not v1b's.
    let (code, dry) = p.report(&["--from", &p.v1_hash[..8], "--dry-run"]);
    assert_eq!(code, Some(4), "legal and finance do not fit: {dry}");
    assert_eq!(keys_of(&dry), v1_keys, "{dry}");

    // v1b's short hash (in capitals, as pasted): v1b's one pause moves.
    let short = v1b_hash[..12].to_ascii_uppercase();
    let (code, moved) = p.report(&["--from", &short, "--yes"]);
    assert_eq!(code, Some(0), "{moved}");
    assert_eq!(keys_of(&moved), [v1b_key.as_str()], "{moved}");
    assert_eq!(moved["results"][0]["outcome"], "moved", "{moved}");
    assert_eq!(moved["results"][0]["from"], v1b_hash.as_str());
    let store = open_store(&p.ws.state_db());
    let record = store.get_approval(&v1b_key).await.unwrap().unwrap();
    assert_eq!(record.spec_hash, p.v2_hash, "v1b's pause is on v2");
    for gate in GATES {
        assert_eq!(p.spec_of(gate).await.0, p.v1_hash, "{gate} stays on v1");
    }

    // A prefix no stored version has: refused, naming it.
    let unknown = (0..16u32)
        .map(|n| format!("{n:x}").repeat(8))
        .find(|prefix| {
            ![&p.v1_hash, &p.v2_hash, &v1b_hash]
                .iter()
                .any(|h| h.starts_with(prefix))
        })
        .expect("a prefix no version has");
    let out = p.migrate(&["--from", &unknown, "--yes"]);
    assert_exit(&out, 2);
    assert_stderr_contains(
        &out,
        &format!(
            "--from {unknown}: no stored spec version of agent deploys has a hash starting with {unknown}"
        ),
    );

    // Another stored version of the agent whose hash starts as v1's does
    // (a collision in eight characters): those eight are ambiguous, and
    // twelve still name v1.
    let twin = twin_of(&p.v1_hash);
    let mut version = SpecVersion::of(
        &tollgate_runtime::Spec::parse(&v1b_text, "twin.yaml").unwrap(),
        tollgate_runtime::time::now(),
    );
    version.hash = twin.clone();
    store
        .record_spec_version(&version)
        .await
        .expect("record the twin");
    let out = p.migrate(&["--from", &p.v1_hash[..8], "--yes"]);
    assert_exit(&out, 2);
    let err = stderr(&out);
    for needle in [
        "is the start of 2 stored spec versions of agent deploys",
        &twin,
        &p.v1_hash,
    ] {
        assert!(err.contains(needle), "{needle:?} not in:\n{err}");
    }
    for gate in GATES {
        assert_eq!(p.spec_of(gate).await.0, p.v1_hash, "{gate}: nothing moved");
    }
    let (code, moved) = p.report(&["--from", &p.v1_hash[..12], "--yes"]);
    assert_eq!(code, Some(4), "{moved}");
    assert_eq!(keys_of(&moved), v1_keys, "{moved}");
    assert_eq!(p.spec_of("audit").await.0, p.v2_hash);
    assert_eq!(p.spec_of("legal").await.0, p.v1_hash, "refused, stays");
}

/// A hash that shares its first eight characters with `hash` and no more.
fn twin_of(hash: &str) -> String {
    let ninth = if hash.as_bytes()[8] == b'0' { '1' } else { '0' };
    format!("{}{ninth}{}", &hash[..8], "0".repeat(55))
}
