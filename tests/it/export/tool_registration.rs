//! Inside an exported crate, a `rust:` tool that is not registered (a
//! main.rs that does not call the generated registry) is explained in the
//! crate's own terms: where the tool's code goes and how it is registered,
//! not "export the spec" (it was exported; the crate is the export).

use tollgate_runtime::cli::Embedded;
use tollgate_runtime::server::ServerConfig;
use tollgate_runtime::store::{self, SqliteOptions};
use tollgate_runtime::{App, Spec};

const SPEC: &str = "version: 1\nagent: risk-review\ntools:\n  score_risk:\n    rust: {}\nsteps:\n  - id: score\n    tool: score_risk\n";

fn embedded() -> Embedded {
    let hash = Spec::parse(SPEC, "agent.yaml")
        .expect("spec")
        .hash
        .to_string();
    Embedded {
        agent: "risk-review",
        spec_hash: Box::leak(hash.into_boxed_str()),
        spec_yaml: SPEC,
        spec_file: "agent.yaml",
    }
}

#[tokio::test]
async fn an_unregistered_tool_in_an_export_says_what_to_do_in_the_crate() {
    let store = store::open("memory:", SqliteOptions::default()).expect("store");
    let refused = match App::new(embedded())
        .mount(store, ServerConfig::default())
        .await
    {
        Ok(_) => panic!("an app without its rust: tool mounted"),
        Err(e) => e.to_string(),
    };
    assert!(refused.contains("\"score_risk\""), "{refused}");
    assert!(
        refused.contains("src/main.rs") && refused.contains("`.tools(tools::register)`"),
        "names the registration: {refused}"
    );
    assert!(refused.contains("src/tools/score_risk.rs"), "{refused}");
    assert!(
        !refused.contains("export the spec with") && !refused.contains("DIR/src"),
        "an export is not told to export itself as if it were not one: {refused}"
    );
}
