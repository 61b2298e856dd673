//! Approvals left waiting by a deploy, seen everywhere (issue 24 item 5):
//! `tollgate serve` on v1 pauses two runs, stops; v2 (a changed message)
//! is served on the same state file and pauses one more. Then, over real
//! HTTP and real processes: serve's start-up line names the two and the
//! policy, the API marks them (`spec_current`) and filters them
//! (`?spec=`), `/metrics` counts them, `approvals list --spec-version`
//! finds and marks them, and the inbox marks them and, under `refuse`,
//! offers Reject only (which works). Under `auto` and `pin` the inbox says
//! what Approve will do, and it does it (or, with the old version gone
//! from the store, says so, and approve answers `spec_unavailable`).

use std::time::Duration;

use serde_json::{Value, json};

use crate::common;
use crate::common::server::{Api, Served, code};
use crate::ui::client::Client;
use common::Workspace;

const V1: &str = r#"version: 1
agent: stale-desk
steps:
  - id: check
    approval:
      message: "Check order {{ input.order_id }}?"
      payload: { order: "{{ input.order_id }}" }
"#;

/// V1 with another message: every pause of v1 is stale under it.
const V2: &str = r#"version: 1
agent: stale-desk
steps:
  - id: check
    approval:
      message: "Check order {{ input.order_id }} now?"
      payload: { order: "{{ input.order_id }}" }
"#;

fn hash_of(ws: &Workspace) -> String {
    let out = ws
        .tollgate()
        .args(["hash", ws.spec_arg()])
        .output()
        .expect("run tollgate hash");
    common::assert_success(&out);
    common::stdout(&out).trim().to_string()
}

fn keys(page: &Value) -> Vec<String> {
    page["approvals"]
        .as_array()
        .unwrap_or_else(|| panic!("approvals in {page}"))
        .iter()
        .map(|r| r["key"].as_str().expect("key").to_string())
        .collect()
}

async fn listed(api: &Api, served: &Served, query: &str) -> Value {
    let (status, page) = api.get(&served.url(&format!("/approvals{query}"))).await;
    assert_eq!(status, 200, "{query}: {page}");
    page
}

/// `approvals list --spec SPEC ARGS...` on the served state file.
fn cli(ws: &Workspace, args: &[&str]) -> std::process::Output {
    ws.tollgate()
        .args(["approvals", "list", "--spec", ws.spec_arg()])
        .args(args)
        .output()
        .expect("run tollgate")
}

/// One sample of the scrape, by its exact series text.
async fn metric(api: &Api, served: &Served, series: &str) -> f64 {
    let text = api
        .http
        .get(served.url("/metrics"))
        .send()
        .await
        .expect("GET /metrics")
        .text()
        .await
        .expect("body");
    text.lines()
        .find_map(|line| line.strip_prefix(&format!("{series} ")))
        .unwrap_or_else(|| panic!("no {series} in:\n{text}"))
        .parse()
        .expect("a number")
}

#[tokio::test(flavor = "multi_thread")]
async fn approvals_paused_under_an_older_spec_are_marked_filtered_counted_and_logged() {
    let ws = Workspace::new(V1);
    let v1 = hash_of(&ws);
    let api = Api::new();
    let mut old = Served::start(&ws.spec, &ws.state_db(), &[], &[]);
    let a = api.pause(&old, json!({ "order_id": "A-1" })).await;
    let b = api.pause(&old, json!({ "order_id": "BOX-2" })).await;
    // Nothing is stale under the version that made them.
    old.log_line("serving agent=", Duration::from_secs(30))
        .await;
    assert!(
        !old.logs().contains("other spec versions"),
        "{}",
        old.logs()
    );
    old.terminate();

    ws.write_spec(V2);
    let v2 = hash_of(&ws);
    assert_ne!(v1, v2);
    let served = Served::start(&ws.spec, &ws.state_db(), &[], &[]);
    let c = api.pause(&served, json!({ "order_id": "C-3" })).await;

    // serve's start-up line: how many, on which version, and the policy.
    let line = served
        .log_line("on other spec versions", Duration::from_secs(30))
        .await;
    assert!(
        line.contains(&format!(
            "2 pending approvals wait on other spec versions ({}: 2); on_spec_change: refuse, \
             approve answers spec_changed for them until the spec is restored; reject works",
            &v1[..12]
        )),
        "{line}"
    );

    // The records and runs say which version they are on.
    let all = listed(&api, &served, "").await;
    assert_eq!(
        keys(&all),
        vec![c.key.clone(), b.key.clone(), a.key.clone()]
    );
    let current: Vec<(&str, bool)> = all["approvals"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["spec_hash"].as_str().unwrap(),
                r["spec_current"].as_bool().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        current,
        vec![
            (v2.as_str(), true),
            (v1.as_str(), false),
            (v1.as_str(), false)
        ]
    );
    let (status, run) = api.get(&served.url(&format!("/runs/{}", a.run_id))).await;
    assert_eq!(status, 200, "{run}");
    assert_eq!(
        (&run["spec_hash"], &run["spec_current"]),
        (&json!(v1), &json!(false))
    );
    assert_eq!(run["pending_approval"]["spec_current"], json!(false));
    let (_, run) = api.get(&served.url(&format!("/runs/{}", c.run_id))).await;
    assert_eq!(
        (&run["spec_hash"], &run["spec_current"]),
        (&json!(v2), &json!(true))
    );
    let (_, record) = api.get(&served.url(&format!("/approvals/{}", a.key))).await;
    assert_eq!(record["spec_current"], json!(false), "{record}");

    // GET /approvals?spec=
    let stale = vec![b.key.clone(), a.key.clone()];
    assert_eq!(keys(&listed(&api, &served, "?spec=stale").await), stale);
    assert_eq!(
        keys(&listed(&api, &served, "?spec=current").await),
        vec![c.key.clone()]
    );
    assert_eq!(
        keys(&listed(&api, &served, &format!("?spec={v1}")).await),
        stale
    );
    assert_eq!(
        keys(&listed(&api, &served, &format!("?spec={}", &v1[..8])).await),
        stale
    );
    assert_eq!(
        keys(&listed(&api, &served, &format!("?spec={}", v2[..10].to_uppercase())).await),
        vec![c.key.clone()]
    );
    assert_eq!(
        keys(&listed(&api, &served, "?spec=stale&q=box-2").await),
        vec![b.key.clone()]
    );
    let first = listed(&api, &served, "?spec=stale&limit=1").await;
    assert_eq!(keys(&first), vec![b.key.clone()]);
    let cursor = first["next_cursor"].as_str().expect("a next page");
    assert_eq!(
        keys(
            &listed(
                &api,
                &served,
                &format!("?spec=stale&limit=1&cursor={cursor}")
            )
            .await
        ),
        vec![a.key.clone()]
    );
    for bad in ["older", "abc1234", "zzzzzzzz", "current,stale"] {
        let (status, body) = api
            .get(&served.url(&format!("/approvals?spec={bad}")))
            .await;
        assert_eq!(
            (status, code(&body)),
            (400, "invalid_request"),
            "{bad}: {body}"
        );
        assert!(
            body["error"]["message"].as_str().unwrap().contains("stale"),
            "{body}"
        );
    }

    // The gauge.
    assert_eq!(
        metric(&api, &served, "tollgate_stale_pending_approvals").await,
        2.0
    );

    // The CLI: the filter, the JSON and the table's marker.
    let out = cli(&ws, &["--spec-version", "stale", "--json"]);
    common::assert_success(&out);
    let page: Value = serde_json::from_str(&common::stdout(&out)).expect("JSON");
    assert_eq!(keys(&page), stale);
    for record in page["approvals"].as_array().unwrap() {
        assert_eq!(
            (&record["spec_hash"], &record["spec_current"]),
            (&json!(v1), &json!(false))
        );
    }
    let out = cli(&ws, &["--spec-version", &v2[..8], "--json"]);
    common::assert_success(&out);
    let page: Value = serde_json::from_str(&common::stdout(&out)).expect("JSON");
    assert_eq!(keys(&page), vec![c.key.clone()]);
    assert_eq!(page["approvals"][0]["spec_current"], json!(true));
    let out = cli(&ws, &[]);
    common::assert_success(&out);
    let table = common::stdout(&out);
    let marker = format!("[stale (spec {})]", &v1[..12]);
    for (key, stale) in [(&a.key, true), (&b.key, true), (&c.key, false)] {
        let row = table
            .lines()
            .find(|l| l.starts_with(key.as_str()))
            .unwrap_or_else(|| panic!("{key} in\n{table}"));
        assert_eq!(row.contains(&marker), stale, "{row}");
    }
    let out = cli(&ws, &["--spec-version", "older"]);
    common::assert_exit(&out, 2);
    assert!(common::stderr(&out).contains("--spec-version"));
    // Without a spec: a hash still filters (no spec_current to say), but
    // `stale` has nothing to compare with.
    let state = ws.state_db();
    let state = state.to_str().expect("utf-8 path");
    let without_spec = |filter: &str| {
        ws.tollgate()
            .args(["approvals", "list", "--state", state, "--json"])
            .args(["--spec-version", filter])
            .output()
            .expect("run tollgate")
    };
    let out = without_spec(&v1[..8]);
    common::assert_success(&out);
    let page: Value = serde_json::from_str(&common::stdout(&out)).expect("JSON");
    assert_eq!(keys(&page), stale);
    assert_eq!(page["approvals"][0].get("spec_current"), None);
    let out = without_spec("stale");
    common::assert_exit(&out, 2);
    assert!(
        common::stderr(&out).contains("give --spec SPEC"),
        "{}",
        common::stderr(&out)
    );

    // The inbox: marked, with what Approve does; under refuse, Reject only.
    let mut local = Client::new(&served);
    let inbox = local.get("/ui").await;
    assert_eq!(inbox.status, 200);
    assert_eq!(inbox.body.matches(r#"<small class="stale">"#).count(), 2);
    let page = local.get(&format!("/ui/approvals/{}", a.key)).await;
    assert_eq!(page.status, 200);
    assert!(page.has_id("stale"), "{}", page.body);
    assert!(page.text_of("stale").contains(&format!(
        "Requested under an older version of the spec ({}).",
        &v1[..12]
    )));
    assert!(
        page.text_of("stale-effect")
            .contains("approve is not possible")
    );
    assert!(page.has_id("reject-button"));
    assert!(!page.has_id("approve-button") && !page.has_id("modify-button"));
    let current_page = local.get(&format!("/ui/approvals/{}", c.key)).await;
    assert!(!current_page.has_id("stale"));
    assert!(current_page.has_id("approve-button"));
    // Reject, the decision offered, works.
    let csrf = page.csrf();
    let rejected = local
        .post(
            &format!("/ui/approvals/{}", a.key),
            &[("decision", "reject"), ("csrf", &csrf)],
        )
        .await;
    assert_eq!(rejected.status, 303, "{}", rejected.body);
    let (_, record) = api.get(&served.url(&format!("/approvals/{}", a.key))).await;
    assert_eq!(record["status"], "REJECTED", "{record}");
    assert_eq!(
        metric(&api, &served, "tollgate_stale_pending_approvals").await,
        1.0
    );
}

/// Two `if` gates under `policy`; `review`'s message is `review`. Between
/// two versions that differ in it only, `audit` (and all before it) is
/// unchanged: `auto` moves its pause, and pins `review`'s.
fn gates(policy: &str, review: &str) -> String {
    format!(
        r#"version: 1
agent: policy-desk
approvals:
  on_spec_change: {policy}
steps:
  - id: audit
    if: "{{{{ input.gate == 'audit' }}}}"
    then: request_human_approval
    message: "Audit {{{{ input.order }}}}?"
  - id: review
    if: "{{{{ input.gate == 'review' }}}}"
    then: request_human_approval
    message: "{review} {{{{ input.order }}}}?"
  - id: done
    set: {{ ok: true }}
"#
    )
}

fn hash_of_text(text: &str) -> String {
    tollgate_runtime::Spec::parse(text, "agent.yaml")
        .expect("spec")
        .hash
        .to_string()
}

/// v1 served, a pause at each gate, then v2 served on the same state file
/// (`between` done to the state file first): the server and the pauses
/// (gate -> (run id, key)).
async fn deployed(
    ws: &Workspace,
    v2: &str,
    between: impl FnOnce(&std::path::Path),
) -> (Served, Vec<(String, String)>) {
    let api = Api::new();
    let mut old = Served::start(&ws.spec, &ws.state_db(), &[], &[]);
    let mut paused = Vec::new();
    for gate in ["audit", "review"] {
        let p = api
            .pause(&old, json!({ "order": format!("O-{gate}"), "gate": gate }))
            .await;
        paused.push((p.run_id, p.key));
    }
    old.terminate();
    between(&ws.state_db());
    ws.write_spec(v2);
    (Served::start(&ws.spec, &ws.state_db(), &[], &[]), paused)
}

#[tokio::test(flavor = "multi_thread")]
async fn under_auto_the_inbox_says_which_pause_moves_and_which_resumes_on_its_version() {
    let (v1, v2) = (gates("auto", "Review"), gates("auto", "Please review"));
    let ws = Workspace::new(&v1);
    let (served, paused) = deployed(&ws, &v2, |_| {}).await;
    let (audit, review) = (&paused[0], &paused[1]);
    let api = Api::new();

    let line = served
        .log_line("on other spec versions", Duration::from_secs(30))
        .await;
    assert!(
        line.contains(&format!(
            "2 pending approvals wait on other spec versions ({}: 2); on_spec_change: auto, \
             approve moves a run to this version when its gate is unchanged, else resumes it \
             on the version it paused under",
            &hash_of_text(&v1)[..12]
        )),
        "{line}"
    );

    let mut local = Client::new(&served);
    for ((run_id, key), says) in [
        (audit, "approve moves the run to the current version"),
        (
            review,
            "approve resumes the run on the version it paused under",
        ),
    ] {
        let page = local.get(&format!("/ui/approvals/{key}")).await;
        assert_eq!(page.status, 200);
        assert!(page.text_of("stale-effect").contains(says), "{}", page.body);
        assert!(page.has_id("approve-button") && page.has_id("modify-button"));
        // Approve, as offered: the run goes on and completes.
        let approved = local
            .post(
                &format!("/ui/approvals/{key}"),
                &[("decision", "approve"), ("csrf", &page.csrf())],
            )
            .await;
        assert_eq!(approved.status, 303, "{}", approved.body);
        api.wait_for_status(&served, run_id, "completed").await;
    }
    // The moved run is on the served version now; the pinned one is not.
    let v2_hash = hash_of_text(&v2);
    let (_, run) = api.get(&served.url(&format!("/runs/{}", audit.0))).await;
    assert_eq!(
        (&run["spec_hash"], &run["spec_current"]),
        (&json!(v2_hash), &json!(true))
    );
    let (_, run) = api.get(&served.url(&format!("/runs/{}", review.0))).await;
    assert_eq!(run["spec_current"], json!(false), "{run}");
    assert_eq!(
        metric(&api, &served, "tollgate_stale_pending_approvals").await,
        0.0
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn under_pin_a_version_the_store_lost_is_said_and_approve_answers_spec_unavailable() {
    let (v1, v2) = (gates("pin", "Review"), gates("pin", "Please review"));
    let ws = Workspace::new(&v1);
    let v1_hash = hash_of_text(&v1);
    let forget = |state: &std::path::Path| {
        let db = rusqlite::Connection::open(state).expect("open the state file");
        let gone = db
            .execute("DELETE FROM tollgate_specs WHERE hash = ?1", [&v1_hash])
            .expect("forget v1");
        assert_eq!(gone, 1);
    };
    let (served, paused) = deployed(&ws, &v2, forget).await;
    let line = served
        .log_line("on other spec versions", Duration::from_secs(30))
        .await;
    assert!(
        line.contains(
            "on_spec_change: pin, approve resumes each run on the version it paused under"
        ),
        "{line}"
    );
    let key = &paused[1].1;
    let mut local = Client::new(&served);
    let page = local.get(&format!("/ui/approvals/{key}")).await;
    assert!(
        page.text_of("stale-effect")
            .contains("that version is not stored here, so approve cannot resume it"),
        "{}",
        page.body
    );
    // What the page says is what approve answers.
    let api = Api::new();
    let (status, body) = api
        .post(&served.url(&format!("/approvals/{key}/approve")), json!({}))
        .await;
    assert_eq!((status, code(&body)), (409, "spec_unavailable"), "{body}");
}
