//! A vote counts only for what its voter saw: the digest of the payload,
//! an edit that supersedes earlier votes, the ledger over HTTP and from
//! the CLI, and a pause whose rules its requester would leave unmet.

use serde_json::json;

use super::quorum::finished;
use super::{approve, as_person, paused, spec, tokens};
use crate::common::server::{Served, code};
use crate::common::{Workspace, assert_exit, stdout};

fn served(ws: &Workspace) -> Served {
    let tokens = tokens();
    let state = ws.path().join("state.db");
    Served::start(&ws.spec, &state, &[("TOLLGATE_API_TOKENS", &tokens)], &[])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_vote_on_another_payload_is_refused_and_an_edit_asks_again() {
    let ws = Workspace::new(&spec(""));
    let served = served(&ws);
    let (run_id, key, approval) = paused(&served, 100).await;
    let shown = approval["payload_digest"].as_str().unwrap().to_string();
    assert!(shown.starts_with("sha256:"), "{approval}");

    // A digest of something else: refused, nothing recorded.
    let stale = format!("sha256:{}", "0".repeat(64));
    let (status, body) = approve(&served, &key, "alice", json!({ "payload_digest": stale })).await;
    assert_eq!(status, 409, "{body}");
    assert_eq!(code(&body), "payload_changed");
    let message = body["error"]["message"].as_str().unwrap();
    assert!(
        message.contains(&stale) && message.contains(&shown),
        "{message}"
    );
    let (_, ledger) = as_person("erin")
        .get(&served.url(&format!("/approvals/{key}/votes")))
        .await;
    assert_eq!(ledger["votes"], json!([]), "nothing recorded: {ledger}");

    // alice approves what she saw; bob edits the amount.
    let (status, body) = approve(&served, &key, "alice", json!({ "payload_digest": shown })).await;
    assert_eq!(status, 200, "{body}");
    let edit = json!({ "amount": 60 });
    let (status, body) = approve(
        &served,
        &key,
        "bob",
        json!({ "payload": edit, "payload_digest": shown, "reason": "60 is enough" }),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        body["approval"]["status"], "PENDING",
        "the gate asks again: {body}"
    );
    assert_eq!(body["vote"]["decision"], "modify");
    assert_eq!(body["vote"]["progress"], "finance 0 of 2; security 0 of 1");
    let edited = body["approval"]["payload_digest"]
        .as_str()
        .unwrap()
        .to_string();
    assert_ne!(edited, shown);
    assert_eq!(
        body["approval"]["payload"],
        json!({ "amount": 100 }),
        "the original is kept"
    );
    assert_eq!(body["approval"]["roster"]["revised_payload"], edit);

    // What was approved before the edit no longer counts, and is refused now.
    let (status, body) = approve(&served, &key, "carol", json!({ "payload_digest": shown })).await;
    assert_eq!(status, 409, "{body}");
    assert_eq!(code(&body), "payload_changed");
    // The editor may not approve their own edit.
    let (status, body) = approve(&served, &key, "bob", json!({ "payload_digest": edited })).await;
    assert_eq!(status, 403, "{body}");

    for voter in ["alice", "carol", "dave"] {
        let (status, body) =
            approve(&served, &key, voter, json!({ "payload_digest": edited })).await;
        assert_eq!(status, 200, "{voter}: {body}");
        if voter == "alice" {
            // A retry of her vote on the edit answers it again; a different
            // vote is refused, naming the one that stands.
            let (status, again) = approve(&served, &key, "alice", json!({})).await;
            assert_eq!(status, 200, "{again}");
            assert_eq!(again["vote"]["repeated"], true, "{again}");
            let (status, other) = super::reject(&served, &key, "alice", "no").await;
            assert_eq!(status, 409, "{other}");
            let message = other["error"]["message"].as_str().unwrap();
            assert!(message.contains("already voted approve"), "{message}");
        }
    }
    let run = finished(&served, &run_id).await;
    assert_eq!(run["status"], "completed", "{run}");
    assert_eq!(
        run["outputs"]["done"]["paid"],
        json!(60),
        "the edit ran: {run}"
    );

    let (_, ledger) = as_person("erin")
        .get(&served.url(&format!("/approvals/{key}/votes")))
        .await;
    let votes = ledger["votes"].as_array().unwrap();
    let summary: Vec<(String, String, bool)> = votes
        .iter()
        .map(|v| {
            (
                v["voter"].as_str().unwrap().to_string(),
                v["decision"].as_str().unwrap().to_string(),
                v["superseded"].as_bool().unwrap(),
            )
        })
        .collect();
    let row = |v: &str, d: &str, s: bool| (v.to_string(), d.to_string(), s);
    assert_eq!(
        summary,
        vec![
            row("alice", "approve", true),
            row("bob", "modify", false),
            row("alice", "approve", false),
            row("carol", "approve", false),
            row("dave", "approve", false),
        ],
        "{ledger}"
    );
    assert!(votes.iter().all(|v| v["channel"] == "api"));
    assert_eq!(votes[0]["payload_digest"], shown.as_str());
    assert_eq!(votes[2]["payload_digest"], edited.as_str());
    assert_eq!(ledger["status"], "MODIFIED");
    assert_eq!(ledger["requesters"], json!(["bot", "bob"]));

    // The CLI reads the same ledger from the store.
    let state = ws.path().join("state.db");
    let out = ws
        .tollgate()
        .args(["approvals", "votes", &key, "--spec"])
        .arg(&ws.spec)
        .arg("--state")
        .arg(&state)
        .output()
        .unwrap();
    assert_exit(&out, 0);
    let text = stdout(&out);
    assert!(
        text.contains("approval ") && text.contains("is MODIFIED"),
        "{text}"
    );
    assert!(text.contains("rule finance: 2 of 2"), "{text}");
    assert!(text.contains("bob modify"), "{text}");
    assert!(text.contains("[superseded by a later edit]"), "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_cli_votes_as_its_user_and_checks_the_digest_it_is_given() {
    let ws = Workspace::new(&spec(""));
    let served = served(&ws);
    let (_, key, approval) = paused(&served, 10).await;
    let state = ws.path().join("state.db");
    let cli = |by: &str, digest: &str| {
        ws.tollgate()
            .args([
                "approvals",
                "approve",
                &key,
                "--by",
                by,
                "--payload-digest",
                digest,
            ])
            .arg("--spec")
            .arg(&ws.spec)
            .arg("--state")
            .arg(&state)
            .output()
            .unwrap()
    };
    let wrong = cli("alice", &format!("sha256:{}", "1".repeat(64)));
    assert_exit(&wrong, 4);
    assert!(String::from_utf8_lossy(&wrong.stderr).contains("payload_changed"));

    let shown = approval["payload_digest"].as_str().unwrap();
    let voted = cli("alice", shown);
    assert_exit(&voted, 0);
    assert!(
        stdout(&voted).contains("vote recorded: alice voted approve")
            && stdout(&voted).contains("finance 1 of 2; security 0 of 1"),
        "{}",
        stdout(&voted)
    );
    let (_, ledger) = as_person("erin")
        .get(&served.url(&format!("/approvals/{key}/votes")))
        .await;
    assert_eq!(ledger["votes"][0]["channel"], "cli", "{ledger}");
    assert_eq!(ledger["votes"][0]["rule"], "finance");

    // `approvals show` names the rules, who may not vote and the digest.
    let show = ws
        .tollgate()
        .args(["approvals", "show", &key, "--state"])
        .arg(&state)
        .output()
        .unwrap();
    assert_exit(&show, 0);
    let text = stdout(&show);
    assert!(
        text.contains("rule:        2 of finance (alice, bob, carol)"),
        "{text}"
    );
    assert!(text.contains("may not vote: bot"), "{text}");
    assert!(text.contains(&format!("digest:      {shown}")), "{text}");

    // The list shows each gate's progress.
    let list = |json: bool| {
        let mut cmd = ws.tollgate();
        cmd.args(["approvals", "list", "--spec"])
            .arg(&ws.spec)
            .arg("--state")
            .arg(&state);
        if json {
            cmd.arg("--json");
        }
        cmd.output().unwrap()
    };
    let table = list(false);
    assert_exit(&table, 0);
    assert!(
        stdout(&table).contains("[finance 1 of 2; security 0 of 1] Refund 10?"),
        "{}",
        stdout(&table)
    );
    let listed: serde_json::Value = serde_json::from_str(&stdout(&list(true))).unwrap();
    assert_eq!(
        listed["approvals"][0]["progress"],
        "finance 1 of 2; security 0 of 1"
    );
    // GET /approvals says the same, filtered or not.
    for path in ["/approvals", "/approvals?step=check"] {
        let (status, page) = as_person("erin").get(&served.url(path)).await;
        assert_eq!(status, 200, "{page}");
        assert_eq!(
            page["approvals"][0]["progress"], "finance 1 of 2; security 0 of 1",
            "{path}: {page}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_pause_its_requester_would_leave_unmet_fails_the_run_naming_the_rule() {
    // finance has two members and needs both: a run alice starts can never
    // be approved (she may not vote on it), so it fails at the gate.
    let text = r#"version: 1
agent: team-desk
approvals:
  groups: { finance: [alice, bob] }
steps:
  - id: check
    approval:
      message: "Pay?"
      rules: [{ group: finance, min: 2 }]
"#;
    let ws = Workspace::new(text);
    let served = served(&ws);
    let (status, run) = as_person("alice")
        .post(&served.url("/runs?wait=true"), json!({ "input": {} }))
        .await;
    assert_eq!(status, 200, "{run}");
    assert_eq!(run["status"], "failed", "{run}");
    let error = run["error"].as_str().unwrap();
    assert!(
        error.contains("step \"check\"") && error.contains("rule finance of 2"),
        "{error}"
    );
    assert!(error.contains("alice started or edited"), "{error}");

    // Started by someone else, it waits for both.
    let (status, run) = as_person("bot")
        .post(&served.url("/runs?wait=true"), json!({ "input": {} }))
        .await;
    assert_eq!(status, 200, "{run}");
    assert_eq!(run["status"], "awaiting_approval", "{run}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_batch_casts_votes_each_with_its_own_result() {
    let ws = Workspace::new(&spec(""));
    let served = served(&ws);
    let (_, first, approval) = paused(&served, 1).await;
    let (_, second, _) = paused(&served, 2).await;
    let shown = approval["payload_digest"].as_str().unwrap();
    let stale = format!("sha256:{}", "2".repeat(64));
    let (status, body) = as_person("alice")
        .post(
            &served.url("/approvals/batch"),
            json!({ "decisions": [
                { "key": first, "decision": "approve", "payload_digest": shown },
                { "key": second, "decision": "approve", "payload_digest": stale },
            ]}),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    let results = body["results"].as_array().unwrap();
    assert_eq!(results[0]["status"], "PENDING", "{body}");
    assert_eq!(results[0]["progress"], "finance 1 of 2; security 0 of 1");
    assert_eq!(results[1]["status"], "refused");
    assert_eq!(results[1]["error"]["code"], "payload_changed");
    // The same batch again: alice's vote stands, answered as a repeat.
    let (_, again) = as_person("alice")
        .post(
            &served.url("/approvals/batch"),
            json!({ "decisions": [{ "key": first, "decision": "approve" }] }),
        )
        .await;
    assert_eq!(again["results"][0]["status"], "PENDING", "{again}");
    assert_eq!(again["results"][0]["repeated"], true, "{again}");
}
