//! The exported crate's docs (issue 42, item 3): README.md is the team's
//! after the first export and a re-export merges the spec's changes into it
//! (a new gate brings its "Pending approvals" section, the team's notes
//! stay); TOLLGATE.md is the server's reference, regenerated from the same
//! sources as docs/reference/, and lists everything the crate's own
//! `openapi.json` and binary offer.

use std::fs;
use std::path::Path;
use std::process::Command;

use serde_json::Value;
use tollgate::export;
use tollgate_runtime::Spec;

use crate::common::{assert_exit, stderr};

const UNGATED: &str = "version: 1
agent: notes
tools:
  fetch:
    http: { url: \"https://example.com/orders\" }
steps:
  - id: fetch
    tool: fetch
";

/// [`UNGATED`] with a gate after its step.
const GATE: &str = "  - id: confirm\n    approval: { message: \"Ship it?\" }\n";

fn export_to(spec: &Path, out: &Path) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_tollgate"))
        .arg("export")
        .arg(spec)
        .arg("--out")
        .arg(out)
        .output()
        .unwrap()
}

#[test]
fn the_readme_is_the_teams_and_a_spec_that_gains_a_gate_merges_its_section_in() {
    let tmp = tempfile::tempdir().unwrap();
    let (spec, out) = (tmp.path().join("notes.yaml"), tmp.path().join("notes"));
    fs::write(&spec, UNGATED).unwrap();
    assert_exit(&export_to(&spec, &out), 0);
    let readme = fs::read_to_string(out.join("README.md")).unwrap();
    assert!(!readme.contains("## Pending approvals"), "{readme}");

    // The team's notes: a section of their own at the end, and a line
    // changed in the middle.
    let note = "\n## Our runbook\n\nPage #payments-oncall before a restart.\n";
    let edited = readme.replacen(
        "## Build and run\n",
        "## Build and run\n\nBuilt by CI on every merge to main.\n",
        1,
    ) + note;
    assert_ne!(edited, readme);
    fs::write(out.join("README.md"), &edited).unwrap();

    fs::write(&spec, format!("{UNGATED}{GATE}")).unwrap();
    let run = export_to(&spec, &out);
    assert_exit(&run, 0);
    let merged = fs::read_to_string(out.join("README.md")).unwrap();
    assert!(merged.contains("## Pending approvals"), "{merged}");
    assert!(
        merged.contains("`confirm`"),
        "the gate is listed:\n{merged}"
    );
    assert!(
        merged.ends_with(note),
        "the team's section stays:\n{merged}"
    );
    assert!(merged.contains("Built by CI on every merge to main."));
    assert!(
        !merged.lines().any(|line| line.starts_with("<<<<<<<")),
        "a clean merge: {}",
        stderr(&run)
    );

    // The reference is replaced, never merged: an edit stops the export.
    fs::write(out.join("TOLLGATE.md"), "mine\n").unwrap();
    let run = export_to(&spec, &out);
    assert_exit(&run, 4);
    assert!(stderr(&run).contains("TOLLGATE.md"), "{}", stderr(&run));
}

/// Every `METHOD /path` of an OpenAPI document.
fn routes_of(document: &Value) -> Vec<String> {
    let mut routes = Vec::new();
    for (path, item) in document["paths"].as_object().expect("paths") {
        for method in item.as_object().expect("path item").keys() {
            routes.push(format!("{} {path}", method.to_uppercase()));
        }
    }
    routes
}

/// Every command path of a clap tree, as `NAME sub sub`, help left out.
fn commands_of(command: &clap::Command, path: &str, out: &mut Vec<String>) {
    out.push(path.to_string());
    for sub in command.get_subcommands() {
        if !sub.is_hide_set() && sub.get_name() != "help" {
            commands_of(sub, &format!("{path} {}", sub.get_name()), out);
        }
    }
}

#[test]
fn tollgate_md_lists_every_route_of_the_crates_openapi_json_and_every_command_and_variable() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    for name in ["refund-desk", "no-gate", "with-rust-tools"] {
        let path = root.join(format!("examples/{name}.yaml"));
        let spec = Spec::load(&path).unwrap();
        let plan = export::command::plan_for(&path).unwrap();
        let reference = plan.text("TOLLGATE.md").unwrap();
        let document: Value = serde_json::from_str(plan.text("openapi.json").unwrap()).unwrap();

        let routes = routes_of(&document);
        assert!(routes.len() >= 28, "{name}: {routes:?}");
        for route in &routes {
            assert!(
                reference.contains(&format!("\n### `{route}`\n")),
                "{name}: TOLLGATE.md has no section for {route}"
            );
        }
        for route in [
            "POST /approvals/batch",
            "POST /approvals/migrate",
            "GET /approvals/{key}/votes",
        ] {
            assert!(routes.contains(&route.to_string()), "{name}: {route}");
        }
        // And nothing the document does not have.
        let sections = reference
            .lines()
            .filter(|l| l.starts_with("### `") && l.contains(" /"))
            .count();
        assert_eq!(sections, routes.len(), "{name}");

        let package = &plan.package;
        let mut commands = Vec::new();
        commands_of(
            &tollgate_runtime::cli::exported_command(),
            package,
            &mut commands,
        );
        for command in &commands {
            assert!(
                reference.contains(&format!("\n### `{command}`\n")),
                "{name}: TOLLGATE.md has no section for `{command}`"
            );
        }
        assert!(
            !reference.contains("`--spec <"),
            "{name}: an exported binary has no --spec"
        );

        for variable in tollgate_runtime::env::ALL {
            assert!(
                reference.contains(&format!("`{}", variable.name)),
                "{name}: {}",
                variable.name
            );
        }
        for secret in spec.secret_names() {
            assert!(
                reference.contains(&format!("| `{secret}` |")),
                "{name}: {secret}"
            );
        }
        for code in tollgate_runtime::server::ERROR_CODES {
            assert!(
                reference.contains(&format!("| `{}` |", code.code)),
                "{name}: {}",
                code.code
            );
        }
    }
}
