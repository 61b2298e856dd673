//! PostgreSQL over TLS (`sslmode`, `sslrootcert`) against a real cluster
//! that accepts TCP connections over TLS only (`common/postgres.rs`,
//! `tls_cluster`): a store that gets in was encrypted, and one that asks for
//! plain text is turned away by the server itself.

use std::time::Duration;

use serde_json::json;
use tollgate_runtime::store::{PostgresOptions, PostgresStore, StoreError, prelude::*};

use crate::common::Workspace;
use crate::common::postgres::{SCRAM_PASSWORD, SCRAM_USER, TestDb, tls_cluster};
use crate::common::server::{Api, Served};
use crate::common::store_cases::paused_run;

/// Never sent anywhere useful (the cluster trusts every TLS connection), but
/// put in every URL so each error can be checked for it.
const PASSWORD: &str = "pw-never-logged-7d1e";

fn database() -> TestDb {
    tls_cluster().cluster.database()
}

/// `postgres://postgres:PASSWORD@127.0.0.1:PORT/DB?QUERY`
fn url(db: &TestDb, query: &str) -> String {
    format!(
        "postgres://postgres:{PASSWORD}@127.0.0.1:{}/{}?{query}",
        tls_cluster().cluster.port(),
        db.name
    )
}

async fn connect(url: &str) -> Result<PostgresStore, StoreError> {
    PostgresStore::connect(url, PostgresOptions::default()).await
}

/// The store works end to end on this connection: a pause written and read back.
async fn assert_usable(store: &PostgresStore, key: &str) {
    let record = paused_run(store, key, "tls-agent", 0).await;
    let stored = store
        .get_approval(key)
        .await
        .expect("read the approval")
        .expect("the approval is stored");
    assert_eq!(stored.run_id, record.run_id);
}

#[tokio::test(flavor = "multi_thread")]
async fn sslmode_require_encrypts_without_checking_the_certificate() {
    let db = database();
    let store = connect(&url(&db, "sslmode=require"))
        .await
        .expect("require connects to a server with a certificate nobody trusts");
    assert_usable(&store, "k-require").await;
    // Every pooled connection the server sees from this store is TLS.
    let plain = db.psql(
        "SELECT count(*) FROM pg_stat_activity a JOIN pg_stat_ssl s USING (pid) \
         WHERE a.datname = current_database() AND a.application_name = 'tollgate' AND NOT s.ssl",
    );
    let tls = db.psql(
        "SELECT count(*) FROM pg_stat_activity a JOIN pg_stat_ssl s USING (pid) \
         WHERE a.datname = current_database() AND a.application_name = 'tollgate' AND s.ssl",
    );
    assert_eq!(plain, "0");
    assert_ne!(tls, "0", "the store's pooled connections are listed");
}

#[tokio::test(flavor = "multi_thread")]
async fn verify_full_with_the_servers_ca_connects_the_pool_and_the_listen_connection() {
    let db = database();
    let ca = tls_cluster().ca.display().to_string();
    let store = connect(&url(&db, &format!("sslmode=verify-full&sslrootcert={ca}")))
        .await
        .expect("verify-full against the CA that signed the server's certificate");
    assert_usable(&store, "k-verify-full").await;

    // The LISTEN connection (outside the pool) is set up the same way.
    let feed = store.change_feed().expect("PostgreSQL has a change feed");
    let mut connection = feed.connect().await.expect("LISTEN over TLS");
    db.psql("NOTIFY tollgate_approvals, 'not a change'");
    let item = tokio::time::timeout(Duration::from_secs(30), connection.next())
        .await
        .expect("the notification arrives");
    assert!(item.is_some(), "the LISTEN connection stayed open");
}

#[tokio::test(flavor = "multi_thread")]
async fn verify_full_with_another_ca_fails_saying_why_and_never_the_password() {
    let db = database();
    let wrong = tls_cluster().wrong_ca.display().to_string();
    let err = connect(&url(
        &db,
        &format!("sslmode=verify-full&sslrootcert={wrong}"),
    ))
    .await
    .err()
    .expect("a certificate from another CA is refused");
    let text = err.to_string();
    assert!(
        text.contains("cannot connect to postgres://postgres@127.0.0.1"),
        "{text}"
    );
    assert!(text.contains("sslmode=verify-full"), "{text}");
    assert!(
        text.contains(&wrong),
        "names the roots it checked against: {text}"
    );
    assert!(
        text.contains("UnknownIssuer"),
        "says what was wrong: {text}"
    );
    assert!(!text.contains(PASSWORD), "{text}");
}

#[tokio::test(flavor = "multi_thread")]
async fn verify_full_checks_the_host_name_and_verify_ca_does_not() {
    let db = database();
    let ca = tls_cluster().ca.display().to_string();
    let port = tls_cluster().cluster.port();
    // Connect to 127.0.0.1 (hostaddr) under a name the certificate does not
    // carry (host, the name TLS checks).
    let url = |mode: &str| {
        format!(
            "postgres://postgres:{PASSWORD}@db.elsewhere.test:{port}/{}?hostaddr=127.0.0.1&sslmode={mode}&sslrootcert={ca}",
            db.name
        )
    };
    let err = connect(&url("verify-full"))
        .await
        .err()
        .expect("verify-full refuses a certificate for another name");
    let text = err.to_string();
    assert!(
        text.contains("not valid for name \"db.elsewhere.test\""),
        "{text}"
    );
    assert!(!text.contains(PASSWORD), "{text}");

    let store = connect(&url("verify-ca"))
        .await
        .expect("verify-ca checks the chain only");
    assert_usable(&store, "k-verify-ca").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_password_login_over_tls_binds_the_channel_and_a_wrong_one_is_not_shown() {
    let db = database();
    let ca = tls_cluster().ca.display().to_string();
    let port = tls_cluster().cluster.port();
    let url = |password: &str| {
        format!(
            "postgres://{SCRAM_USER}:{password}@127.0.0.1:{port}/{}?sslmode=verify-full&sslrootcert={ca}&channel_binding=require",
            db.name
        )
    };
    // channel_binding=require: the driver accepts only SCRAM-SHA-256-PLUS,
    // which the server verifies against its own certificate's hash.
    let store = connect(&url(SCRAM_PASSWORD))
        .await
        .expect("SCRAM with channel binding over verify-full");
    assert_usable(&store, "k-scram").await;

    let wrong = "not-the-password-3c1b";
    let err = connect(&url(wrong)).await.err().expect("a wrong password");
    let text = err.to_string();
    assert!(text.contains("password authentication failed"), "{text}");
    assert!(
        !text.contains(wrong) && !text.contains(SCRAM_PASSWORD),
        "{text}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn the_server_refuses_a_connection_without_tls() {
    // Proves the other cases really used TLS: this server lets no plain
    // text connection in.
    let db = database();
    let err = connect(&url(&db, "sslmode=disable"))
        .await
        .err()
        .expect("plain text is refused");
    let text = err.to_string();
    assert!(
        text.contains("no encryption"),
        "the server's pg_hba reject: {text}"
    );
    assert!(text.contains("sslmode=disable"), "{text}");
    assert!(!text.contains(PASSWORD), "{text}");
}

#[tokio::test(flavor = "multi_thread")]
async fn an_unknown_sslmode_is_a_clear_location_error() {
    let db = database();
    let err = connect(&url(&db, "sslmode=verify_full"))
        .await
        .err()
        .expect("a typo in sslmode");
    assert!(matches!(err, StoreError::InvalidLocation { .. }), "{err:?}");
    let text = err.to_string();
    assert!(text.contains("sslmode=\"verify_full\""), "{text}");
    assert!(
        text.contains("verify-full"),
        "lists the known modes: {text}"
    );
    assert!(!text.contains(PASSWORD), "{text}");

    let err = connect(&url(
        &db,
        "sslmode=verify-full&sslrootcert=/nonexistent/ca.pem",
    ))
    .await
    .err()
    .expect("a missing root file");
    let text = err.to_string();
    assert!(text.contains("/nonexistent/ca.pem"), "{text}");
    assert!(!text.contains(PASSWORD), "{text}");
}

const GATED_SPEC: &str = r#"version: 1
agent: tls-desk
steps:
  - id: confirm
    approval:
      message: "Ship {{ input.item }}?"
      ttl: 1h
  - id: done
    set:
      shipped: "{{ input.item }}"
"#;

#[tokio::test(flavor = "multi_thread")]
async fn serve_on_a_tls_database_url_serves_a_run_that_pauses_and_resumes() {
    let db = database();
    let ws = Workspace::new(GATED_SPEC);
    let served = Served::start_on_database(&ws.spec, &url(&db, "sslmode=require"), &[], &[]);
    assert!(!served.logs().contains(PASSWORD), "{}", served.logs());
    let api = Api::new();

    let paused = api.pause(&served, json!({"item": "tls"})).await;
    let (code, pending) = api.get(&served.url("/approvals")).await;
    assert_eq!(code, 200, "{pending}");
    assert!(pending.to_string().contains(&paused.key), "{pending}");
    assert_eq!(
        db.psql(&format!(
            "SELECT status FROM tollgate_approvals WHERE key = '{}'",
            paused.key
        )),
        "PENDING",
        "the pause is in the TLS-only database"
    );

    let (code, decided) = api
        .post(
            &served.url(&format!("/approvals/{}/approve", paused.key)),
            json!({"reason": "over tls"}),
        )
        .await;
    assert_eq!(code, 200, "{decided}");
    let run = api
        .wait_for_status(&served, &paused.run_id, "completed")
        .await;
    assert_eq!(run["outputs"]["done"]["shipped"], "tls", "{run}");
}
