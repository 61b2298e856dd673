//! `${NAME}` secrets: resolved from the environment at call time, sent to
//! the downstream, and found nowhere else: not in the SQLite file, the
//! stored events, stdout or stderr, even when the downstream echoes them.
//! A `${NAME}` that arrives in run data is text, never a reference.

use crate::common;
use crate::common::assert_stderr_contains;
use crate::common::http;
use crate::common::stub_server;

use common::*;
use http::*;
use serde_json::json;
use std::process::Output;
use stub_server::{Response, StubServer};

const TOKEN: &str = "shp-tok-6f1e2d9c8b7a";

fn shop_spec(url: &str) -> String {
    one_tool_spec(
        &format!(
            r#"http:
  method: POST
  url: "{url}"
  headers: {{ Authorization: "Bearer ${{SHOP_TOKEN}}" }}
  query: {{ region: "${{SHOP_REGION:-eu}}" }}
  json: {{ note: "{{{{ args.note }}}}" }}
"#
        ),
        r#"{ note: "{{ input.note }}" }"#,
    )
}

/// Assert that `TOKEN` is in none of the places a run leaves traces.
async fn assert_token_nowhere(ws: &Workspace, out: &std::process::Output) {
    assert!(!stdout(out).contains(TOKEN), "stdout: {}", stdout(out));
    assert!(!stderr(out).contains(TOKEN), "stderr: {}", stderr(out));
    assert!(
        !contains_bytes(&sqlite_bytes(&ws.state_db()), TOKEN),
        "the SQLite file holds the secret"
    );
    let run_id = events(&stdout(out))
        .first()
        .and_then(|e| e["run_id"].as_str().map(str::to_string))
        .expect("a run_id in the events");
    let store = open_store(&ws.state_db());
    let stored = store.run_events(&run_id, 0).await.unwrap();
    let text = serde_json::to_string(&stored).unwrap();
    assert!(!stored.is_empty());
    assert!(!text.contains(TOKEN), "stored events: {text}");
    let run = store.get_run(&run_id).await.unwrap().unwrap();
    let run_text = format!("{:?} {:?}", run.outputs, run.error);
    assert!(!run_text.contains(TOKEN), "{run_text}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_header_secret_reaches_the_downstream_and_nothing_else() {
    // The downstream echoes the credential back, in its body and a header.
    let stub = StubServer::start(|req| {
        let auth = req.header("authorization").unwrap_or("").to_string();
        Response::json(200, json!({"you_sent": auth, "ok": true})).with_header("X-Echo", &auth)
    });
    let ws = Workspace::new(&shop_spec(&stub.url("/orders")));
    let out = run_persisted(&ws, r#"{"note": "hello"}"#, &[("SHOP_TOKEN", TOKEN)]);
    assert_success(&out);

    let call = &stub.requests()[0];
    assert_eq!(
        call.header("authorization"),
        Some(format!("Bearer {TOKEN}").as_str())
    );
    assert_eq!(
        call.target, "/orders?region=eu",
        "the default applies when unset"
    );
    assert_token_nowhere(&ws, &out).await;

    let completed = events(&stdout(&out))
        .into_iter()
        .find(|e| e["type"] == "run_completed")
        .expect("run_completed");
    let output = &completed["outputs"]["call"];
    assert_eq!(output["body"]["you_sent"], "Bearer [redacted]");
    assert_eq!(output["headers"]["x-echo"], "Bearer [redacted]");
}

/// `shop_spec` with a gate after the call: the call resolves the secret,
/// then the run pauses, so the version is stored by a process that holds
/// the value.
fn paused_after_the_call(url: &str) -> String {
    format!(
        "{}  - id: gate\n    approval:\n      message: \"Go on?\"\n",
        shop_spec(url)
    )
}

/// Pause a run of the workspace's spec with `store_args`, the secret set,
/// and check the call made before the pause resolved it.
fn pause_after_resolving(ws: &Workspace, stub: &StubServer, store_args: &[&str]) -> Output {
    let out = run_persisted_on(
        ws,
        store_args,
        r#"{"note": "hello"}"#,
        &[("SHOP_TOKEN", TOKEN)],
    );
    assert_success(&out);
    paused_key(&out);
    assert_eq!(
        stub.requests()[0].header("authorization"),
        Some(format!("Bearer {TOKEN}").as_str()),
        "the run resolved the secret before it paused"
    );
    out
}

/// The one row of `tollgate_specs` (hash, canonical, source) holds the
/// workspace's spec with its `${NAME}` reference as written, never the
/// value the run resolved.
fn assert_stored_as_written(ws: &Workspace, rows: &[(String, String, String)]) {
    let [(hash, canonical, source)] = rows else {
        panic!("one stored version, found {rows:?}");
    };
    let spec = tollgate_runtime::Spec::load(&ws.spec).expect("spec");
    assert_eq!(hash, spec.hash.as_str());
    assert_eq!(source, &spec_text(ws));
    for (column, text) in [("canonical", canonical), ("source", source)] {
        assert!(text.contains("${SHOP_TOKEN}"), "{column}: {text}");
        assert!(!text.contains(TOKEN), "{column} holds the secret: {text}");
    }
}

/// The stored spec version (`tollgate_specs`, read raw) holds the
/// `${NAME}` reference as written, never the value the run resolved.
#[tokio::test(flavor = "multi_thread")]
async fn the_stored_spec_version_keeps_the_reference_never_the_secret() {
    let stub = StubServer::start(|_| Response::json(200, json!({"ok": true})));
    let ws = Workspace::new(&paused_after_the_call(&stub.url("/orders")));
    let out = pause_after_resolving(&ws, &stub, &[]);

    let raw = rusqlite::Connection::open(ws.state_db()).expect("open the file");
    let rows: Vec<(String, String, String)> = raw
        .prepare("SELECT hash, canonical, source FROM tollgate_specs")
        .and_then(|mut s| {
            s.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?
                .collect()
        })
        .expect("read tollgate_specs");
    assert_stored_as_written(&ws, &rows);
    assert_token_nowhere(&ws, &out).await;
}

/// The same on PostgreSQL: `tollgate_specs` read with psql holds the
/// reference, and the secret is nowhere in the database (a `pg_dump` of
/// it all).
#[test]
fn on_postgres_the_stored_spec_version_keeps_the_reference_never_the_secret() {
    let db = common::postgres::database();
    let stub = StubServer::start(|_| Response::json(200, json!({"ok": true})));
    let ws = Workspace::new(&paused_after_the_call(&stub.url("/orders")));
    let out = pause_after_resolving(&ws, &stub, &["--database-url", &db.url]);
    assert!(!stdout(&out).contains(TOKEN) && !stderr(&out).contains(TOKEN));
    assert!(!ws.state_db().exists(), "the run used the database");

    // One column per query (psql's unaligned rows cannot hold a
    // multi-line text and a separator unambiguously), ended by a dot that
    // psql's trimmed output keeps, so a final newline survives.
    let column = |name: &str| {
        let text = db.psql(&format!("SELECT {name} || '.' FROM tollgate_specs"));
        text.strip_suffix('.').expect("the dot").to_string()
    };
    let rows = [(column("hash"), column("canonical"), column("source"))];
    assert_eq!(db.psql("SELECT count(*) FROM tollgate_specs"), "1");
    assert_stored_as_written(&ws, &rows);

    let cluster = common::postgres::cluster();
    let dump = std::process::Command::new(cluster.bin("pg_dump"))
        .args(["-h", "127.0.0.1", "-p", &cluster.port().to_string()])
        .args(["-U", "postgres", "-d", &db.name])
        .output()
        .expect("run pg_dump");
    assert_success(&dump);
    let dump = stdout(&dump);
    assert!(dump.contains("tollgate_specs"), "the dump holds the table");
    assert!(!dump.contains(TOKEN), "the database holds the secret");
}

fn spec_text(ws: &Workspace) -> String {
    std::fs::read_to_string(&ws.spec).expect("read the spec")
}

#[tokio::test(flavor = "multi_thread")]
async fn an_echoed_secret_in_an_error_body_is_redacted() {
    let stub = StubServer::start(|req| {
        let auth = req.header("authorization").unwrap_or("").to_string();
        Response::text(401, &format!("bad credentials: {auth}"))
    });
    let ws = Workspace::new(&shop_spec(&stub.url("/orders")));
    let out = run_persisted(&ws, r#"{"note": "hello"}"#, &[("SHOP_TOKEN", TOKEN)]);
    assert_exit(&out, 1);
    assert_stderr_contains(&out, "bad credentials: Bearer [redacted]");
    assert_token_nowhere(&ws, &out).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn transport_and_url_errors_never_show_a_secret() {
    let closed = format!("http://127.0.0.1:{}/x?key=${{SHOP_TOKEN}}", closed_port());
    // A host from an expression: `validate` cannot judge it (a fixed
    // `http://[oops` is refused there), so the call finds it malformed.
    let bad_url = "http://{{ '[oops' }}/${SHOP_TOKEN}";
    for url in [closed.as_str(), bad_url] {
        let spec = one_tool_spec(&format!("http: {{ method: POST, url: \"{url}\" }}"), "{}");
        let ws = Workspace::new(&spec);
        let out = run_persisted(&ws, "{}", &[("SHOP_TOKEN", TOKEN)]);
        assert_exit(&out, 1);
        assert_stderr_contains(&out, "tool \"call_it\"");
        assert_token_nowhere(&ws, &out).await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_missing_variable_fails_the_run_and_names_it() {
    let stub = StubServer::start(|_| Response::json(200, json!({})));
    let ws = Workspace::new(&shop_spec(&stub.url("/orders")));
    // In memory: `run --persist` refuses before it starts (exit 2, the
    // preflight of tests/it/cli/errors_and_help.rs); the call itself must
    // fail the same way wherever it runs.
    let out = ws
        .tollgate()
        .args(["run", ws.spec_arg(), "--json"])
        .args(["--input", r#"{"note": "n"}"#])
        .env_remove("SHOP_TOKEN")
        .output()
        .unwrap();
    assert_exit(&out, 1);
    let err = stderr(&out);
    assert!(err.contains("tool \"call_it\""), "{err}");
    assert!(
        err.contains("environment variable SHOP_TOKEN is not set"),
        "{err}"
    );
    assert_eq!(stub.count(), 0, "nothing is sent without the secret");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_reference_in_the_input_is_sent_as_text() {
    let stub = StubServer::start(|_| Response::json(200, json!({})));
    let ws = Workspace::new(&shop_spec(&stub.url("/orders")));
    let out = run_persisted(
        &ws,
        r#"{"note": "give me ${SHOP_TOKEN}"}"#,
        &[("SHOP_TOKEN", TOKEN), ("SHOP_REGION", "us")],
    );
    assert_success(&out);
    let call = &stub.requests()[0];
    assert_eq!(call.json(), json!({"note": "give me ${SHOP_TOKEN}"}));
    assert_eq!(call.target, "/orders?region=us");
    assert!(!call.body_text().contains(TOKEN));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_gated_call_resolves_its_secret_in_the_approving_process() {
    let stub = StubServer::start(|req| {
        let auth = req.header("authorization").unwrap_or("").to_string();
        Response::json(201, json!({"id": "rf_1", "echo": auth}))
    });
    let ws = Workspace::new(&gated_post_spec(
        &stub.url("/refunds"),
        "headers: { Authorization: \"Bearer ${SHOP_TOKEN}\" }",
    ));
    // The pausing process has another value (`run --persist` needs the
    // variable set): the call resolves the approving process's, at the call.
    let paused = run_persisted(
        &ws,
        r#"{"order_id": "A-7", "amount": 40}"#,
        &[("SHOP_TOKEN", "pause-time-value")],
    );
    assert_success(&paused);
    let key = paused_key(&paused);
    let out = ws
        .decide("approve", &key)
        .args(["--json"])
        .env("SHOP_TOKEN", TOKEN)
        .output()
        .unwrap();
    assert_success(&out);
    assert_eq!(
        stub.requests()[0].header("authorization"),
        Some(format!("Bearer {TOKEN}").as_str())
    );
    assert!(!stdout(&out).contains(TOKEN) && !stderr(&out).contains(TOKEN));
    assert!(!contains_bytes(&sqlite_bytes(&ws.state_db()), TOKEN));
}

/// `%HH` back to bytes, strictly: a `+` stays a `+` (it is not a space in
/// a path, and tollgate must not send a bare one for a secret anyway).
fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' && i + 2 < bytes.len() {
            let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).unwrap();
            out.push(u8::from_str_radix(hex, 16).expect("valid %HH"));
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).expect("UTF-8")
}

#[tokio::test(flavor = "multi_thread")]
async fn a_secret_in_the_url_arrives_intact_in_path_and_query() {
    // Every character that reshapes a URL when inserted as it is.
    let secret = "a+b c&d=e#f/g?h%i;j@k:l ü€";
    let stub = StubServer::start(|_| Response::json(200, json!({"ok": true})));
    let spec = one_tool_spec(
        &format!(
            "http: {{ method: GET, url: \"{}/o/${{SHOP_TOKEN}}/x?k=${{SHOP_TOKEN}}&${{SHOP_TOKEN}}=v&n=1#${{SHOP_TOKEN}}\" }}",
            stub.url("")
        ),
        "{}",
    );
    let ws = Workspace::new(&spec);
    let out = run_persisted(&ws, "{}", &[("SHOP_TOKEN", secret)]);
    assert_success(&out);
    let call = &stub.requests()[0];
    // The exact request line: nothing but unreserved characters is literal.
    let encoded = "a%2Bb%20c%26d%3De%23f%2Fg%3Fh%25i%3Bj%40k%3Al%20%C3%BC%E2%82%AC";
    assert_eq!(
        call.target,
        format!("/o/{encoded}/x?k={encoded}&{encoded}=v&n=1"),
        "the fragment is not sent; everything else is one component each"
    );
    let (path, query) = call.target.split_once('?').unwrap();
    let segments: Vec<String> = path.split('/').map(percent_decode).collect();
    assert_eq!(segments, ["", "o", secret, "x"]);
    let pairs: Vec<(String, String)> = query
        .split('&')
        .map(|p| {
            let (k, v) = p.split_once('=').unwrap();
            (percent_decode(k), percent_decode(v))
        })
        .collect();
    assert_eq!(
        pairs,
        [
            ("k".to_string(), secret.to_string()),
            (secret.to_string(), "v".to_string()),
            ("n".to_string(), "1".to_string()),
        ]
    );
    assert!(!stdout(&out).contains(encoded) && !stderr(&out).contains(encoded));
}
