//! The deploy preview on real processes (DESIGN §12, issue 24 item 3):
//! runs of v1 paused at four gates by `tollgate run --persist` or a served
//! v1, then v2 (a message changed, a step removed, a step renamed, an
//! unrelated change) planned by `tollgate plan` and by `/specs/plan` on
//! the running server: each pause classified, its outcome under the
//! policy of the spec planned, the exit codes CI reads.

use crate::common;
use crate::common::server::{Api, Served, code};

use common::*;
use serde_json::{Value, json};
use tollgate_runtime::Spec;
use tollgate_runtime::server::openapi::schema_errors;

/// Four `if` gates, each taken when `input.gate` names it, so each run
/// pauses at the gate the test asks for. `done` (never reached here)
/// needs SHIP_TOKEN: a version that runs on must keep it set.
const V1: &str = r#"version: 1
agent: desk
description: Ship orders.
steps:
  - id: prepare
    set: { order: "{{ input.order }}" }
  - id: check
    if: "{{ input.gate == 'check' }}"
    then: request_human_approval
    message: "Check {{ steps.prepare.output.order }}"
  - id: confirm
    if: "{{ input.gate == 'confirm' }}"
    then: request_human_approval
    message: "Ship {{ steps.prepare.output.order }}?"
  - id: review
    if: "{{ input.gate == 'review' }}"
    then: request_human_approval
    message: "Review {{ steps.prepare.output.order }}"
  - id: sign_off
    if: "{{ input.gate == 'sign_off' }}"
    then: request_human_approval
    message: "Sign off"
  - id: done
    set: { shipped: true, token: "${SHIP_TOKEN}" }
"#;

const GATES: [&str; 4] = ["check", "confirm", "review", "sign_off"];

/// v1 with a message changed (confirm), a step removed (review), a step
/// renamed (sign_off -> final_check), an unrelated change (the
/// description), and `approvals.on_spec_change: POLICY`.
fn v2(policy: &str) -> String {
    let text = V1
        .replace(
            "description: Ship orders.",
            "description: Ship orders, carefully.",
        )
        .replace("\"Ship {{", "\"Really ship {{")
        .replace(
            "  - id: review\n    if: \"{{ input.gate == 'review' }}\"\n    then: request_human_approval\n    message: \"Review {{ steps.prepare.output.order }}\"\n",
            "",
        )
        .replace("id: sign_off", "id: final_check")
        .replace(
            "steps:\n",
            &format!("approvals: {{ on_spec_change: {policy} }}\nsteps:\n"),
        );
    assert_ne!(text, V1);
    text
}

/// What each pause is under v2 with `approvals.on_spec_change: POLICY`:
/// the same whatever the policy (a policy adopted in the deploy changes no
/// gate).
fn classified(_policy: &str) -> [(&'static str, &'static str); 4] {
    [
        ("check", "identical_gate"),
        ("confirm", "message_changed"),
        ("review", "step_removed"),
        ("sign_off", "step_removed"),
    ]
}

/// Each approval's `(step, classification, outcome, stranded)`, by step.
fn outcomes(plan: &Value) -> Vec<(String, String, String, bool)> {
    let mut rows: Vec<_> = plan["approvals"]
        .as_array()
        .unwrap_or_else(|| panic!("no approvals: {plan}"))
        .iter()
        .map(|a| {
            (
                a["step"].as_str().unwrap().to_string(),
                a["classification"].as_str().unwrap_or("null").to_string(),
                a["outcome"].as_str().unwrap().to_string(),
                a["stranded"].as_bool().unwrap(),
            )
        })
        .collect();
    rows.sort();
    rows
}

/// `outcomes` expected under POLICY: each gate's classification with
/// `outcome_of` it.
fn expected(
    policy: &str,
    outcome_of: impl Fn(&str) -> (&'static str, bool),
) -> Vec<(String, String, String, bool)> {
    classified(policy)
        .iter()
        .map(|(step, class)| {
            let (outcome, stranded) = outcome_of(step);
            (
                step.to_string(),
                class.to_string(),
                outcome.to_string(),
                stranded,
            )
        })
        .collect()
}

/// Pause one run of the workspace's spec (v1) at each gate, in order
/// (`run --persist` needs v1's SHIP_TOKEN set; no step before a gate reads it).
fn pause_at_every_gate(ws: &Workspace) {
    for (n, gate) in GATES.iter().enumerate() {
        let input = json!({ "order": n, "gate": gate }).to_string();
        let out = ws
            .tollgate()
            .args([
                "run",
                ws.spec_arg(),
                "--persist",
                "--json",
                "--input",
                &input,
            ])
            .env("SHIP_TOKEN", "x")
            .output()
            .expect("run tollgate");
        assert_success(&out);
    }
}

/// Ids, hashes and times replaced by stable names (the same value, the
/// same name), so a snapshot holds the shape and the decisions only.
fn redacted(value: &Value) -> String {
    fn walk(value: &Value, seen: &mut Vec<String>) -> Value {
        match value {
            Value::String(s) => {
                let kind = if s.len() == 64 && s.bytes().all(|b| b.is_ascii_hexdigit()) {
                    "hash"
                } else if s.len() == 36 && s.matches('-').count() == 4 {
                    "id"
                } else if chrono::DateTime::parse_from_rfc3339(s).is_ok() {
                    return Value::String("[time]".into());
                } else {
                    return value.clone();
                };
                let n = match seen.iter().position(|x| x == s) {
                    Some(i) => i + 1,
                    None => {
                        seen.push(s.clone());
                        seen.len()
                    }
                };
                Value::String(format!("[{kind} {n}]"))
            }
            Value::Array(items) => Value::Array(items.iter().map(|v| walk(v, seen)).collect()),
            Value::Object(map) => Value::Object(
                map.iter()
                    .map(|(k, v)| (k.clone(), walk(v, seen)))
                    .collect(),
            ),
            other => other.clone(),
        }
    }
    serde_json::to_string_pretty(&walk(value, &mut Vec::new())).expect("JSON")
}

fn plan(ws: &Workspace, args: &[&str]) -> std::process::Output {
    ws.tollgate()
        .arg("plan")
        .args(args)
        .output()
        .expect("run tollgate plan")
}

fn plan_json(ws: &Workspace, args: &[&str]) -> Value {
    let out = plan(ws, &[args, &["--json"]].concat());
    assert_success(&out);
    serde_json::from_str(&stdout(&out)).unwrap_or_else(|e| panic!("{e}: {}", stdout(&out)))
}

fn write(ws: &Workspace, name: &str, text: &str) -> String {
    let path = ws.path().join(name);
    std::fs::write(&path, text).expect("write a spec");
    path.to_str().expect("utf-8 path").to_string()
}

#[test]
fn plan_classifies_each_pause_of_v1_and_says_what_v2_will_do_to_it() {
    let ws = Workspace::new(V1);
    pause_at_every_gate(&ws);
    let state = ws.state_db();
    let state = state.to_str().unwrap();
    let v1_hash = Spec::parse(V1, "v1").unwrap().hash;
    let refuse = write(&ws, "v2.yaml", &v2("refuse"));

    // Under refuse (the default): every pause stays refused, whatever
    // its gate became; the text says so per pause and in one line.
    let out = plan(&ws, &[&refuse, "--state", state]);
    assert_success(&out);
    let text = stdout(&out);
    for needle in [
        &format!("version {}", v1_hash.short()),
        "removed:  review (if, step 4)",
        "renamed?: sign_off -> final_check (if;",
        "changed:  confirm (if): message",
        "sections: description",
        "4 pending approvals: 0 current, 0 pinned, 0 moving to the new version, 4 refused (stranded)",
    ] {
        assert!(text.contains(needle), "{needle:?} not in:\n{text}");
    }
    for (step, class) in classified("refuse") {
        let row = text
            .lines()
            .find(|l| l.contains(&format!(" {step} (before)")))
            .unwrap_or_else(|| panic!("no row for {step}:\n{text}"));
        assert!(
            row.contains(class) && row.contains("refused (stranded)"),
            "{row}"
        );
    }
    assert!(
        !text.contains("keep these set"),
        "nothing runs on v1: {text}"
    );

    // The JSON: the same report, its shape pinned.
    let refused = plan_json(&ws, &[&refuse, "--state", state]);
    assert_eq!(
        refused["spec_hash"],
        Spec::parse(&v2("refuse"), "v2").unwrap().hash.as_str()
    );
    assert_eq!(refused["versions"][0]["hash"], v1_hash.as_str());
    assert_eq!(
        outcomes(&refused),
        expected("refuse", |_| ("refused", true))
    );
    insta::assert_snapshot!("plan_v2_refuse", redacted(&refused));

    // CI: exit 4 once anything is stranded, after the plan was printed.
    let failing = plan(&ws, &[&refuse, "--state", state, "--fail-on", "stranded"]);
    assert_exit(&failing, 4);
    assert_stdout_contains(&failing, "4 refused (stranded)");
    assert_stderr_contains(&failing, "stranded: 4 pending approvals");

    // The store by default: the one next to the spec planned.
    let by_default = plan(&ws, &[&refuse]);
    assert_success(&by_default);
    let body = |text: &str| text.lines().skip(1).collect::<Vec<_>>().join("\n");
    assert_eq!(body(&stdout(&by_default)), body(&text));

    // Planning v1 itself: every pause is current, nothing is stranded.
    let same = plan(
        &ws,
        &[ws.spec_arg(), "--state", state, "--fail-on", "stranded"],
    );
    assert_success(&same);
    assert_stdout_contains(&same, "4 pending approvals: 4 current, 0 pinned");
    assert_stdout_contains(
        &same,
        "no pending approval or live run of desk is on another version",
    );
}

/// `pin` and `auto`, the policy of the spec planned: pin keeps every
/// pause on v1, where approve will resume it, and names the variables v1
/// needs kept set (what `serve`'s start-up preflight will require); auto
/// moves the one gate v2 left as it was and pins the other three.
#[test]
fn pin_and_auto_keep_pauses_on_their_version_or_move_the_unchanged_one() {
    let ws = Workspace::new(V1);
    pause_at_every_gate(&ws);
    let state = ws.state_db();
    let state = state.to_str().unwrap();

    let pin = write(&ws, "v2-pin.yaml", &v2("pin"));
    let pinned = plan_json(&ws, &[&pin, "--state", state]);
    assert_eq!(outcomes(&pinned), expected("pin", |_| ("pinned", false)));
    assert_eq!(pinned["versions"][0]["required_env"], json!(["SHIP_TOKEN"]));
    assert_eq!(pinned["summary"]["stranded"], 0);
    let out = plan(&ws, &[&pin, "--state", state, "--fail-on", "stranded"]);
    assert_success(&out);
    assert_stdout_contains(&out, "keep these set: SHIP_TOKEN");
    assert_stdout_contains(&out, "4 pending approvals: 0 current, 4 pinned, 0 moving");

    let auto = write(&ws, "v2-auto.yaml", &v2("auto"));
    let moved = plan_json(&ws, &[&auto, "--state", state]);
    assert_eq!(
        outcomes(&moved),
        expected("auto", |step| if step == "check" {
            ("moves_to_new", false)
        } else {
            ("pinned", false)
        })
    );
    assert_eq!(
        moved["summary"],
        json!({"pending": 4, "current": 0, "pinned": 3, "moves_to_new": 1, "refused": 0, "stranded": 0})
    );
}

#[test]
fn plan_reads_only_and_names_what_is_wrong() {
    let ws = Workspace::new(V1);
    let refuse = write(&ws, "v2.yaml", &v2("refuse"));

    // No store where it looks: exit 3, and nothing is created.
    let missing = ws.path().join("elsewhere.db");
    let out = plan(&ws, &[&refuse, "--state", missing.to_str().unwrap()]);
    assert_exit(&out, 3);
    assert_stderr_contains(&out, "elsewhere.db");
    assert!(!missing.exists() && !ws.state_db().exists());

    // A bad spec: exit 2 with its file, line and column.
    pause_at_every_gate(&ws);
    let bad = write(
        &ws,
        "bad.yaml",
        &V1.replace("set: { order", "sett: { order"),
    );
    let out = plan(&ws, &[&bad]);
    assert_exit(&out, 2);
    let err = stderr(&out);
    let prefix = format!("error: {bad}:");
    assert!(err.starts_with(&prefix), "{err}");
    let position: Vec<&str> = err[prefix.len()..].splitn(3, ':').collect();
    assert!(
        position[0].parse::<usize>().is_ok() && position[1].parse::<usize>().is_ok(),
        "{err}"
    );

    // Another agent: nothing of it is stored, which is no error.
    let other = write(
        &ws,
        "other.yaml",
        &V1.replace("agent: desk", "agent: elsewhere"),
    );
    let out = plan(&ws, &[&other, "--fail-on", "stranded"]);
    assert_success(&out);
    assert_stdout_contains(&out, "nothing of agent elsewhere is stored there");
}

const TOKEN: &str = "plan-token-4242";

fn yaml_post(api: &Api, url: &str, body: &str, content_type: &str) -> reqwest::RequestBuilder {
    let request = api
        .http
        .post(url)
        .header("content-type", content_type)
        .body(body.to_string());
    match &api.token {
        Some(token) => request.bearer_auth(token),
        None => request,
    }
}

async fn answer(request: reqwest::RequestBuilder) -> (u16, Value) {
    let response = request.send().await.expect("POST /specs/plan");
    let status = response.status().as_u16();
    let bytes = response.bytes().await.expect("a body");
    (
        status,
        serde_json::from_slice(&bytes).unwrap_or(Value::Null),
    )
}

/// The same answer from a running server: `GET /specs/plan` plans the
/// served v1 (every pause current), `POST /specs/plan` plans v2 as
/// `tollgate plan --json` does, byte for byte the same report.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_server_answers_the_same_plan_for_its_spec_and_a_posted_one() {
    let ws = Workspace::new(V1);
    let served = Served::start(
        &ws.spec,
        &ws.state_db(),
        &[
            ("TOLLGATE_API_TOKENS", &format!("ops:{TOKEN}")),
            ("SHIP_TOKEN", "x"),
        ],
        &[],
    );
    let api = Api::with_token(TOKEN);
    for (n, gate) in GATES.iter().enumerate() {
        api.pause(&served, json!({ "order": n, "gate": gate }))
            .await;
    }
    let url = served.url("/specs/plan");

    // Every answer holds to the schema the server documents for it.
    let (_, document) = api.get(&served.url("/openapi.json")).await;
    let conforms = |method: &str, status: u16, body: &Value| {
        let responses = &document["paths"]["/specs/plan"][method]["responses"];
        let response = match &responses[status.to_string()] {
            Value::Null => &responses["default"],
            listed => listed,
        };
        let schema = &response["content"]["application/json"]["schema"];
        assert!(schema.is_object(), "{method} {status}: {response}");
        let errors = schema_errors(&document, schema, body);
        assert!(errors.is_empty(), "{method} {status} {body}: {errors:#?}");
    };

    let (status, own) = api.get(&url).await;
    assert_eq!(status, 200, "{own}");
    conforms("get", status, &own);
    assert_eq!(own["summary"]["current"], 4);
    assert_eq!(own["approvals"], json!([]));

    for policy in ["refuse", "auto"] {
        let text = v2(policy);
        let (status, posted) = answer(yaml_post(&api, &url, &text, "application/yaml")).await;
        assert_eq!(status, 200, "{posted}");
        conforms("post", status, &posted);
        let file = write(&ws, &format!("v2-{policy}.yaml"), &text);
        let state = ws.state_db();
        let from_cli = plan_json(&ws, &[&file, "--state", state.to_str().unwrap()]);
        assert_eq!(posted, from_cli, "one report, over HTTP and on the CLI");
        let outcome_of = |step: &str| match (policy, step) {
            ("refuse", _) => ("refused", true),
            (_, "check") => ("moves_to_new", false),
            _ => ("pinned", false),
        };
        assert_eq!(outcomes(&posted), expected(policy, outcome_of));
    }
    for content_type in ["text/yaml", "text/plain; charset=utf-8"] {
        let (status, _) = answer(yaml_post(&api, &url, &v2("pin"), content_type)).await;
        assert_eq!(status, 200, "{content_type}");
    }

    // A bad spec: 400 with where it is wrong.
    let bad = V1.replace("set: { order", "sett: { order");
    let (status, error) = answer(yaml_post(&api, &url, &bad, "application/yaml")).await;
    assert_eq!((status, code(&error)), (400, "invalid_request"), "{error}");
    conforms("post", status, &error);
    let message = error["error"]["message"].as_str().unwrap();
    assert!(message.starts_with("posted spec:6:"), "{message}");
    // JSON is not a spec body; no token is no answer.
    let (status, error) = answer(yaml_post(&api, &url, &v2("pin"), "application/json")).await;
    assert_eq!(
        (status, code(&error)),
        (415, "unsupported_media_type"),
        "{error}"
    );
    let anonymous = Api::new();
    let (status, error) = anonymous.get(&url).await;
    assert_eq!((status, code(&error)), (401, "unauthorized"), "{error}");
    let (status, _) = answer(yaml_post(&anonymous, &url, &v2("pin"), "application/yaml")).await;
    assert_eq!(status, 401);
}

/// On PostgreSQL: a served v1 on a database, planned from the command
/// line against the same database.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plan_reads_a_postgres_store() {
    let db = common::postgres::database();
    let ws = Workspace::new(V1);
    let served = Served::start_on_database(&ws.spec, &db.url, &[("SHIP_TOKEN", "x")], &[]);
    let api = Api::new();
    api.pause(&served, json!({ "order": 1, "gate": "confirm" }))
        .await;
    api.pause(&served, json!({ "order": 2, "gate": "review" }))
        .await;
    let pin = write(&ws, "v2-pin.yaml", &v2("pin"));
    let planned = plan_json(&ws, &[&pin, "--database-url", &db.url]);
    let rows: Vec<(String, String, String, bool)> = outcomes(&planned);
    assert_eq!(
        rows,
        [
            (
                "confirm".into(),
                "message_changed".into(),
                "pinned".into(),
                false
            ),
            (
                "review".into(),
                "step_removed".into(),
                "pinned".into(),
                false
            ),
        ]
    );
    assert_eq!(
        planned["versions"][0]["required_env"],
        json!(["SHIP_TOKEN"])
    );
}
