//! Approver input (DESIGN §13, issue 25 item 9): a gate's `form:` over
//! real HTTP and the CLI against `tollgate serve` on a SQLite file. An
//! input that does not fit is refused (400 `invalid_input`, each error with
//! its path; exit 2) with nothing written; one that fits, defaults filled
//! in, is the decision's (`decision_data.input`), the vote's on a gate
//! with rules (the ledger), the event's, and the step's output (`input`).

use serde_json::{Value, json};

use super::{as_person, paused, tokens};
use crate::common::server::Served;
use crate::common::{Workspace, assert_exit, open_store, stderr, stdout};

const FORM: &str = r#"      form:
        title: Payout details
        type: object
        properties:
          note: { type: string, title: Note, minLength: 3 }
          amount: { type: integer, minimum: 1, exclusiveMaximum: 1000 }
          urgent: { type: boolean, default: false }
          team: { type: string, enum: [ops, sales] }
        required: [note, amount]"#;

/// One approval step with the form; `rules` adds a gate with rules.
fn spec(rules: &str) -> String {
    format!(
        r#"version: 1
agent: form-desk
approvals:
  groups: {{ finance: [alice, bob, carol], security: [dave] }}
steps:
  - id: check
    approval:
      message: "Pay {{{{ input.amount }}}}?"
      payload: {{ amount: "{{{{ input.amount }}}}" }}
{rules}{FORM}
  - id: done
    set: {{ note: "{{{{ steps.check.output.input.note }}}}", given: "{{{{ steps.check.output.input }}}}" }}
"#
    )
}

fn served(ws: &Workspace) -> Served {
    let state = ws.path().join("state.db");
    let tokens = tokens();
    Served::start(
        &ws.spec,
        &state,
        &[
            ("TOLLGATE_API_TOKENS", tokens.as_str()),
            ("TOLLGATE_SESSION_SECRET", "form-secret"),
        ],
        &[],
    )
}

fn errors(body: &Value) -> Vec<(String, String)> {
    body["error"]["errors"]
        .as_array()
        .unwrap_or_else(|| panic!("no errors: {body}"))
        .iter()
        .map(|e| {
            (
                e["path"].as_str().unwrap().to_string(),
                e["message"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_approval_is_checked_against_the_form_and_its_input_is_the_steps_output() {
    let ws = Workspace::new(&spec(""));
    let served = served(&ws);
    let (run_id, key, _) = paused(&served, 10).await;
    let approve_url = served.url(&format!("/approvals/{key}/approve"));

    // The record says what to fill in.
    let (_, shown) = as_person("erin")
        .get(&served.url(&format!("/approvals/{key}")))
        .await;
    assert_eq!(shown["form"]["title"], "Payout details", "{shown}");
    assert_eq!(shown["form"]["required"], json!(["note", "amount"]));

    // Without input: each required field named; nothing written.
    let (status, body) = as_person("alice").post(&approve_url, json!({})).await;
    assert_eq!(status, 400, "{body}");
    assert_eq!(body["error"]["code"], "invalid_input", "{body}");
    assert_eq!(
        errors(&body),
        [
            ("/note".to_string(), "is required".to_string()),
            ("/amount".to_string(), "is required".to_string()),
        ]
    );

    // Every error at once, each with its path.
    let (status, body) = as_person("alice")
        .post(
            &approve_url,
            json!({ "input": { "note": "ok", "amount": 1000, "team": "hr", "extra": true } }),
        )
        .await;
    assert_eq!(status, 400, "{body}");
    let paths: Vec<String> = errors(&body).into_iter().map(|(p, _)| p).collect();
    assert_eq!(paths, ["/note", "/amount", "/team", "/extra"], "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("/amount: must be less than 1000"),
        "{body}"
    );
    let store = open_store(&ws.path().join("state.db"));
    let record = store.get_approval(&key).await.unwrap().unwrap();
    assert_eq!(
        record.status.as_str(),
        "PENDING",
        "a refusal writes nothing"
    );
    assert!(store.votes(&key).await.unwrap().is_empty());

    // A reject takes no input, an approve on the form does.
    let (status, body) = as_person("alice")
        .post(
            &served.url(&format!("/runs/{key}/approve")),
            json!({ "approved": false, "input": { "note": "no" } }),
        )
        .await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (400, Some("invalid_request")),
        "{body}"
    );

    let (status, body) = as_person("alice")
        .post(
            &format!("{approve_url}?wait=true"),
            json!({ "reason": "checked the invoice", "input": { "note": "paid twice", "amount": 999 } }),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    let input = json!({ "note": "paid twice", "amount": 999, "urgent": false });
    assert_eq!(
        body["approval"]["decision_data"]["input"], input,
        "defaults filled in: {body}"
    );
    assert_eq!(
        body["approval"]["decision_data"]["reason"],
        "checked the invoice"
    );
    let run = &body["run"];
    assert_eq!(run["status"], "completed", "{body}");
    assert_eq!(run["outputs"]["check"]["input"], input, "{run}");
    assert_eq!(run["outputs"]["check"]["reason"], "checked the invoice");
    assert_eq!(run["outputs"]["done"]["note"], "paid twice");
    assert_eq!(run["outputs"]["done"]["given"], input);

    // The event and the ledger say the same.
    let events = store.run_events(&run_id, 0).await.unwrap();
    let resolved = events
        .iter()
        .map(|e| serde_json::to_value(e).unwrap())
        .find(|e| e["type"] == "approval_resolved")
        .unwrap();
    assert_eq!(resolved["input"], input, "{resolved}");
    let (_, ledger) = as_person("erin")
        .get(&served.url(&format!("/approvals/{key}/votes")))
        .await;
    assert_eq!(ledger["votes"][0]["input"], input, "{ledger}");

    // The same approval again is a repeat, answered as stored.
    let (status, again) = as_person("alice")
        .post(
            &approve_url,
            json!({ "reason": "checked the invoice", "input": { "note": "paid twice", "amount": 999 } }),
        )
        .await;
    assert_eq!(
        (status, again["repeated"].as_bool()),
        (200, Some(true)),
        "{again}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn input_on_a_gate_without_a_form_is_refused() {
    let ws = Workspace::new(&super::spec(""));
    let served = served(&ws);
    let (_, key, _) = paused(&served, 10).await;
    let (status, body) = as_person("alice")
        .post(
            &served.url(&format!("/approvals/{key}/approve")),
            json!({ "input": { "note": "x" } }),
        )
        .await;
    assert_eq!(status, 400, "{body}");
    assert_eq!(body["error"]["code"], "invalid_input");
    assert_eq!(
        errors(&body),
        [(
            String::new(),
            "this gate has no form: it takes no input".to_string()
        )]
    );
    let (_, batch) = as_person("alice")
        .post(
            &served.url("/approvals/batch"),
            json!({ "decisions": [{ "key": key, "decision": "approve", "input": {} }] }),
        )
        .await;
    assert_eq!(
        batch["results"][0]["error"]["code"], "invalid_input",
        "{batch}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn each_vote_keeps_its_input_and_the_settling_one_is_the_steps() {
    let rules = "      rules: [{ group: finance, min: 3 }]\n";
    let ws = Workspace::new(&spec(rules));
    let served = served(&ws);
    let (run_id, key, _) = paused(&served, 10).await;

    // The CLI checks too: exit 2 naming the field, nothing recorded.
    let state = ws.path().join("state.db");
    let cli = |by: &str, input: &str| {
        ws.tollgate()
            .args(["approvals", "approve", &key, "--by", by, "--input", input])
            .arg("--spec")
            .arg(&ws.spec)
            .arg("--state")
            .arg(&state)
            .output()
            .unwrap()
    };
    let (status, body) = as_person("carol")
        .post(
            &served.url(&format!("/approvals/{key}/approve")),
            json!({ "input": { "note": "carol's", "amount": 3 } }),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        body["vote"]["input"],
        json!({ "note": "carol's", "amount": 3, "urgent": false }),
        "the vote as recorded: {body}"
    );
    let bad = cli("alice", r#"{"note": "fine", "amount": 0}"#);
    assert_exit(&bad, 2);
    assert!(
        stderr(&bad).contains("/amount: must be at least 1"),
        "{}",
        stderr(&bad)
    );
    let voted = cli(
        "alice",
        r#"{"note": "first look", "amount": 5, "team": "ops"}"#,
    );
    assert_exit(&voted, 0);
    assert!(
        stdout(&voted).contains("vote recorded"),
        "{}",
        stdout(&voted)
    );

    let (status, body) = as_person("bob")
        .post(
            &served.url(&format!("/approvals/{key}/approve?wait=true")),
            json!({ "input": { "note": "second look", "amount": 7, "urgent": true } }),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    let bobs = json!({ "note": "second look", "amount": 7, "urgent": true });
    assert_eq!(body["run"]["outputs"]["check"]["input"], bobs, "{body}");

    let (_, ledger) = as_person("erin")
        .get(&served.url(&format!("/approvals/{key}/votes")))
        .await;
    assert_eq!(
        ledger["votes"][1]["input"],
        json!({ "note": "first look", "amount": 5, "team": "ops", "urgent": false }),
        "{ledger}"
    );
    assert_eq!(ledger["votes"][1]["channel"], "cli");
    assert_eq!(ledger["votes"][2]["input"], bobs, "{ledger}");
    // The inbox's ledger shows each vote's input.
    let mut erin = crate::ui::client::Client::signed_in(&served, "token-erin").await;
    let page = erin.get(&format!("/ui/approvals/{key}")).await;
    let ledger_text = page.text_of("ledger");
    // (The page's text as served: escaped, as everything a person wrote.)
    assert!(
        ledger_text.contains(
            "carol voted approve (finance) · input {&quot;note&quot;:&quot;carol&#x27;s&quot;,&quot;amount&quot;:3,&quot;urgent&quot;:false} · api"
        ),
        "{ledger_text}"
    );

    // The CLI shows each vote's input, and the settled record's.
    let shown = ws
        .tollgate()
        .args(["approvals", "votes", &key, "--spec"])
        .arg(&ws.spec)
        .arg("--state")
        .arg(&state)
        .output()
        .unwrap();
    assert_exit(&shown, 0);
    assert!(
        stdout(&shown)
            .contains(r#"input: {"note":"first look","amount":5,"team":"ops","urgent":false}"#),
        "{}",
        stdout(&shown)
    );
    let show = ws
        .tollgate()
        .args(["approvals", "show", &key, "--spec"])
        .arg(&ws.spec)
        .arg("--state")
        .arg(&state)
        .output()
        .unwrap();
    assert!(
        stdout(&show).contains(r#"input:       {"note":"second look","amount":7,"urgent":true}"#),
        "{}",
        stdout(&show)
    );
    let store = open_store(&state);
    let votes: Vec<Value> = store
        .run_events(&run_id, 0)
        .await
        .unwrap()
        .iter()
        .map(|e| serde_json::to_value(e).unwrap())
        .filter(|e| e["type"] == "approval_vote")
        .collect();
    assert_eq!(votes[0]["input"]["note"], "carol's", "{votes:?}");
    assert_eq!(votes[1]["input"]["note"], "first look", "{votes:?}");
}

/// Our form check against the published `jsonschema` (Python, draft
/// 2020-12, the interpreter the OpenAPI tests use): over a table of
/// schemas and inputs, both must say valid or invalid alike. The schema
/// given to Python is [`Form::effective_schema`] (`additionalProperties:
/// false` written out, the subset's default).
#[test]
fn our_validator_agrees_with_python_jsonschema() {
    use tollgate_runtime::form::Form;

    let schemas = [
        json!({"type": "object", "properties": {
            "note": {"type": "string", "minLength": 2, "maxLength": 4},
            "n": {"type": "integer", "minimum": -3, "maximum": 7},
            "x": {"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 1.5},
            "ok": {"type": "boolean"},
            "team": {"type": "string", "enum": ["ops", "sales"]}
        }, "required": ["note"]}),
        json!({"type": "object", "title": "t", "description": "d", "properties": {}}),
        json!({"type": "object", "additionalProperties": false, "properties": {
            "a": {"type": "number", "default": 1, "title": "A"},
            "b": {"type": "string", "description": "B"}
        }, "required": ["a", "b"]}),
    ];
    let inputs = [
        json!({}),
        json!({"note": "ab"}),
        json!({"note": "a"}),
        json!({"note": "abcde"}),
        json!({"note": "éé"}),
        json!({"note": "ab", "n": 7}),
        json!({"note": "ab", "n": 8}),
        json!({"note": "ab", "n": -3}),
        json!({"note": "ab", "n": 2.0}),
        json!({"note": "ab", "n": 2.5}),
        json!({"note": "ab", "n": "2"}),
        json!({"note": "ab", "n": true}),
        json!({"note": "ab", "x": 0}),
        json!({"note": "ab", "x": 0.001}),
        json!({"note": "ab", "x": 1.5}),
        json!({"note": "ab", "ok": false}),
        json!({"note": "ab", "ok": 0}),
        json!({"note": "ab", "ok": null}),
        json!({"note": "ab", "team": "ops"}),
        json!({"note": "ab", "team": "hr"}),
        json!({"note": "ab", "other": 1}),
        json!({"note": null}),
        json!({"a": 1, "b": ""}),
        json!({"a": "1", "b": "x"}),
        json!({"a": 1}),
        json!([]),
        json!("text"),
        json!(null),
    ];
    let mut cases = Vec::new();
    let mut ours = Vec::new();
    for schema in &schemas {
        let form = Form::parse(schema).unwrap_or_else(|e| panic!("{schema}: {e}"));
        for input in &inputs {
            cases.push(json!({ "schema": form.effective_schema(), "input": input }));
            ours.push(form.validate(input).is_ok());
        }
    }
    let dir = tempfile::tempdir().unwrap();
    let table = dir.path().join("cases.json");
    std::fs::write(&table, serde_json::to_vec(&cases).unwrap()).unwrap();
    let python = crate::common::openapi::python()
        .unwrap_or_else(|why| panic!("no Python jsonschema: {why}"));
    let script = "import json, sys\nfrom jsonschema import Draft202012Validator as V\ncases = json.load(open(sys.argv[1]))\nprint(json.dumps([V(c['schema']).is_valid(c['input']) for c in cases]))\n";
    let out = std::process::Command::new(python)
        .args(["-c", script])
        .arg(&table)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let theirs: Vec<bool> = serde_json::from_slice(&out.stdout).unwrap();
    let disagreements: Vec<String> = cases
        .iter()
        .zip(ours.iter().zip(&theirs))
        .filter(|(_, (a, b))| a != b)
        .map(|(case, (a, b))| format!("ours {a}, jsonschema {b}: {case}"))
        .collect();
    assert!(disagreements.is_empty(), "{}", disagreements.join("\n"));
    assert!(ours.iter().any(|v| *v) && ours.iter().any(|v| !*v));
}

/// `approvals approve --all --input JSON` gives each selected approval the
/// same input, checked against each gate's form: without it every one is
/// refused `invalid_input` (nothing decided); with it each is approved and
/// its run's step has the input.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn approve_all_gives_each_the_same_input_checked_by_its_form() {
    let ws = Workspace::new(&spec(""));
    let mut keys = Vec::new();
    for amount in [10, 20] {
        let record = ws
            .pause_run_in(
                &ws.state_db(),
                json!({ "amount": amount }),
                tollgate_runtime::time::system(),
            )
            .await;
        keys.push(record.key);
    }
    let approve_all = |extra: &[&str]| {
        ws.tollgate()
            .args(["approvals", "approve", "--all", "--yes", "--json", "--spec"])
            .arg(ws.spec_arg())
            .args(extra)
            .output()
            .expect("run tollgate")
    };
    let refused = approve_all(&[]);
    crate::common::assert_exit(&refused, 4);
    let answer: Value = serde_json::from_slice(&refused.stdout).expect("JSON");
    let results = answer["results"].as_array().expect("results");
    assert_eq!(results.len(), 2, "{answer}");
    for result in results {
        assert_eq!(result["error"]["code"], "invalid_input", "{answer}");
    }

    let done = approve_all(&["--input", r#"{"note": "batch", "amount": 5}"#]);
    crate::common::assert_success(&done);
    let answer: Value = serde_json::from_slice(&done.stdout).expect("JSON");
    for result in answer["results"].as_array().expect("results") {
        assert_eq!(result["status"], "APPROVED", "{answer}");
    }
    let store = crate::common::open_store(&ws.state_db());
    for key in &keys {
        let record = store.get_approval(key).await.unwrap().unwrap();
        assert_eq!(
            record.decision_data.as_ref().unwrap()["input"],
            json!({ "note": "batch", "amount": 5, "urgent": false }),
            "defaults filled in for each"
        );
        let run = store.get_run(&record.run_id).await.unwrap().unwrap();
        assert_eq!(run.outputs["done"]["note"], "batch", "{:?}", run.outputs);
    }
}
