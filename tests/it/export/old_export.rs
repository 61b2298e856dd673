//! A crate exported before the generated tool registry, re-exported: its
//! main.rs registered each `rust:` tool by hand (`.tool("NAME",
//! tools::Type::new())`) and its tool files have `struct` + `fn new()` but
//! no `tool` function. The re-export merges the registry call into main.rs
//! in place of those lines (keeping the user's edit elsewhere), appends a
//! `tool` function to the implemented tool file and replaces the unedited
//! stub; the result builds, and its tools run. A `.tool(...)` line left
//! beside the registry fails the build.
//!
//! The build shares `target/export-e2e` with `build.rs`.

use std::path::Path;

use serde_json::{Value, json};
use tollgate::export::{self, ExportOptions, sha256_hex};

use super::build::{cargo, export_example, request, serve, target_dir, wait_for_run};

const FIXTURES: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/it/export/fixtures/old-export"
);

fn fixture(name: &str) -> String {
    std::fs::read_to_string(Path::new(FIXTURES).join(name)).unwrap()
}

/// Make `out`'s file at `path` what the old version generated (`generated`,
/// recorded in the manifest, and as the pristine copy of a file of yours)
/// with `on_disk` in the file.
fn as_old_export(out: &Path, path: &str, generated: &str, on_disk: &str) {
    std::fs::write(out.join(path), on_disk).unwrap();
    let manifest_path = out.join(".tollgate/export.json");
    let mut manifest: Value =
        serde_json::from_slice(&std::fs::read(&manifest_path).unwrap()).unwrap();
    let entry = &mut manifest["files"][path];
    entry["sha256"] = json!(sha256_hex(generated.as_bytes()));
    if let Some(pristine) = entry["pristine"].as_str() {
        std::fs::write(out.join(pristine), generated).unwrap();
    }
    std::fs::write(
        &manifest_path,
        serde_json::to_vec_pretty(&manifest).unwrap(),
    )
    .unwrap();
}

/// The user's edit of the old main.rs, away from the registrations.
const TEAM_NOTE: &str = "// Deployed by the payments team.\n";

#[test]
fn an_old_export_re_exported_builds_with_the_registry_and_runs_its_tools() {
    let tmp = tempfile::tempdir().unwrap();
    let (out, package) = export_example("with-rust-tools", tmp.path());
    let old_main = fixture("main.rs");
    let edited_main = old_main.replace("mod tools;\n", &format!("mod tools;\n\n{TEAM_NOTE}"));
    assert_ne!(edited_main, old_main);
    as_old_export(&out, "src/main.rs", &old_main, &edited_main);
    as_old_export(
        &out,
        "src/tools/mod.rs",
        &fixture("mod.rs"),
        &fixture("mod.rs"),
    );
    let implemented = fixture("score_risk.implemented.rs");
    as_old_export(
        &out,
        "src/tools/score_risk.rs",
        &fixture("score_risk.rs"),
        &implemented,
    );
    // file_case.rs: the old stub, never edited.
    as_old_export(
        &out,
        "src/tools/file_case.rs",
        &fixture("file_case.rs"),
        &fixture("file_case.rs"),
    );

    let plan = export::command::plan_for(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/with-rust-tools.yaml"),
    )
    .unwrap();
    let report = export::export(&plan, &out, &ExportOptions::default()).unwrap();
    assert!(report.conflicts.is_empty(), "{:?}", report.conflicts);
    let mut merged = report.merged.clone();
    merged.sort();
    assert_eq!(merged, ["src/main.rs", "src/tools/score_risk.rs"]);

    // main.rs: the registry in place of the hand-kept lines, the user's
    // note kept.
    let main = std::fs::read_to_string(out.join("src/main.rs")).unwrap();
    assert!(main.contains(".tools(tools::register)"), "{main}");
    assert!(!main.contains(".tool("), "{main}");
    assert!(main.contains(TEAM_NOTE), "{main}");
    // The implemented tool: every line of the user's, and a constructor
    // building it as main.rs did.
    let score = std::fs::read_to_string(out.join("src/tools/score_risk.rs")).unwrap();
    assert!(score.starts_with(&implemented), "{score}");
    assert!(score.contains("pub fn tool("), "{score}");
    assert!(score.contains("Ok(ScoreRisk::new())"), "{score}");
    // The untouched stub is the new one.
    assert_eq!(
        std::fs::read_to_string(out.join("src/tools/file_case.rs")).unwrap(),
        plan.text("src/tools/file_case.rs").unwrap()
    );
    // Exported again, nothing changes: the upgrade is done once.
    let again = export::export(&plan, &out, &ExportOptions::default()).unwrap();
    assert!(
        again.merged.is_empty() && again.written.is_empty(),
        "{again:?}"
    );

    cargo(&out, &["build", "--locked"]);
    let binary = target_dir().join("debug").join(&package);
    let server = serve(&binary, &tmp.path().join("state.db"));
    let (status, started) = request(
        &server.address,
        "POST",
        "/hooks/payment",
        Some(&json!({"payment_id": "p-9", "amount": 500})),
    );
    assert_eq!(status, 202, "{started}");
    let run_id = started["run_id"].as_str().unwrap().to_string();
    // score_risk, the user's code, ran through the appended constructor.
    let run = wait_for_run(&server, &run_id, |r| r["status"] == "awaiting_approval");
    assert_eq!(run["outputs"]["score"]["risk"], 0.9, "{run}");
    drop(server);

    // An old registration line put back beside the registry does not
    // compile: the tool types are no longer re-exported, so one tool can
    // never be registered twice from the old lines.
    let doubled = main.replace(
        ".tools(tools::register)",
        ".tools(tools::register)\n        .tool(\"score_risk\", tools::ScoreRisk::new())",
    );
    std::fs::write(out.join("src/main.rs"), doubled).unwrap();
    let failed = super::builder::cargo_output(&out, &["build", "--locked"]);
    let stderr = String::from_utf8_lossy(&failed.stderr);
    assert!(!failed.status.success(), "{stderr}");
    assert!(
        stderr.contains("ScoreRisk") && stderr.contains("src/main.rs"),
        "{stderr}"
    );
}
