//! Exports and spec changes (DESIGN §12, issue 24 item 7): the exported
//! README's "Deploying a changed spec" names the spec's own
//! `on_spec_change`, and re-exporting over a crate whose state holds
//! pending approvals made under another version says how many wait, on
//! which version, and what the new spec's policy will do with them. Only
//! `tollgate export` and `tollgate run` here: no exported crate is built.

use std::path::{Path, PathBuf};
use std::process::Output;

use tollgate::export;
use tollgate_runtime::Spec;

use crate::common::{GATED_SPEC, Workspace, assert_success, stderr};

/// GATED_SPEC with the gate's message changed: a new version.
fn changed(text: &str) -> String {
    let v2 = text.replace("\"Ship order {{", "\"Really ship order {{");
    assert_ne!(v2, text);
    v2
}

fn with_policy(text: &str, policy: &str) -> String {
    text.replace(
        "steps:\n",
        &format!("approvals: {{ on_spec_change: {policy} }}\nsteps:\n"),
    )
}

fn export_to(ws: &Workspace, out: &Path, flags: &[&str]) -> Output {
    let done = ws
        .tollgate()
        .arg("export")
        .arg(&ws.spec)
        .arg("--out")
        .arg(out)
        .args(flags)
        .output()
        .expect("run tollgate export");
    assert_success(&done);
    done
}

/// Pause a run of the workspace's spec in `state`, as the exported server
/// would have.
fn pause_in(ws: &Workspace, state: &Path) {
    let out = ws
        .tollgate()
        .arg("run")
        .arg(&ws.spec)
        .arg("--persist")
        .arg("--state")
        .arg(state)
        .args(["--input", r#"{"order_id": "A-1"}"#])
        .output()
        .expect("run tollgate run");
    assert_success(&out);
}

fn short_hash(text: &str) -> String {
    Spec::parse(text, "agent.yaml")
        .unwrap()
        .hash
        .short()
        .to_string()
}

#[test]
fn a_re_export_says_how_many_pending_approvals_wait_on_other_versions() {
    let ws = Workspace::new(GATED_SPEC);
    let out = ws.path().join("server");
    let state = out.join(".tollgate").join("state.db");

    // No state file: nothing to say, and none is created.
    let first = export_to(&ws, &out, &[]);
    assert_eq!(stderr(&first), "");
    ws.write_spec(&changed(GATED_SPEC));
    let again = export_to(&ws, &out, &[]);
    assert_eq!(stderr(&again), "");
    assert!(!state.exists(), "the check created {}", state.display());

    // Two pauses under v1 in the crate's default state, then v2 exported.
    ws.write_spec(GATED_SPEC);
    export_to(&ws, &out, &[]);
    pause_in(&ws, &state);
    pause_in(&ws, &state);
    // Re-exporting the version they are on: nothing waits elsewhere.
    let same = export_to(&ws, &out, &[]);
    assert_eq!(stderr(&same), "");

    ws.write_spec(&changed(GATED_SPEC));
    let v2 = export_to(&ws, &out, &[]);
    let notice = stderr(&v2);
    assert_eq!(
        notice.trim_end(),
        format!(
            "2 pending approvals in {state} wait on other spec versions ({v1}: 2); \
             on_spec_change: refuse — approve will answer spec_changed for them (reject works); \
             see README \"Deploying a changed spec\", or run: tollgate plan {spec} --state {state}",
            state = state.display(),
            v1 = short_hash(GATED_SPEC),
            spec = ws.spec.display(),
        )
    );

    // Under pin, the same pauses resume on their version.
    ws.write_spec(&with_policy(&changed(GATED_SPEC), "pin"));
    let pinned = stderr(&export_to(&ws, &out, &[]));
    assert!(
        pinned.contains(&format!(
            "2 pending approvals in {} wait on other spec versions ({}: 2); on_spec_change: pin — approve resumes them on the version each paused under",
            state.display(),
            short_hash(GATED_SPEC)
        )),
        "{pinned}"
    );

    // The check only read: both approvals are still pending.
    let list = ws
        .tollgate()
        .args(["approvals", "list", "--json", "--state"])
        .arg(&state)
        .output()
        .unwrap();
    assert_success(&list);
    let listed: serde_json::Value = serde_json::from_slice(&list.stdout).unwrap();
    let approvals = listed["approvals"].as_array().expect("approvals");
    assert_eq!(approvals.len(), 2, "{listed}");
    for approval in approvals {
        assert_eq!(approval["status"], "PENDING", "{approval}");
    }
}

#[test]
fn a_re_export_reads_the_state_named_by_state_and_warns_when_it_is_missing() {
    let ws = Workspace::new(GATED_SPEC);
    let out = ws.path().join("server");
    let elsewhere = ws.path().join("prod.db");
    export_to(&ws, &out, &[]);
    pause_in(&ws, &elsewhere);

    ws.write_spec(&changed(GATED_SPEC));
    let state_flag = ["--state", elsewhere.to_str().unwrap()];
    let named = stderr(&export_to(&ws, &out, &state_flag));
    assert!(
        named.starts_with(&format!(
            "1 pending approval in {} waits on other spec versions ({}: 1);",
            elsewhere.display(),
            short_hash(GATED_SPEC)
        )),
        "{named}"
    );

    let missing = ws.path().join("missing.db");
    let warned = stderr(&export_to(
        &ws,
        &out,
        &["--state", missing.to_str().unwrap()],
    ));
    assert!(
        warned.starts_with(&format!("warning: no state file at {}", missing.display())),
        "{warned}"
    );
    assert!(!missing.exists());
}

#[test]
fn a_state_that_cannot_be_read_is_a_warning_and_the_export_still_succeeds() {
    let ws = Workspace::new(GATED_SPEC);
    let out = ws.path().join("server");
    export_to(&ws, &out, &[]);
    let state = out.join(".tollgate").join("state.db");
    std::fs::write(&state, "not a database, just text").unwrap();

    ws.write_spec(&changed(GATED_SPEC));
    // export_to asserts exit 0.
    let warned = stderr(&export_to(&ws, &out, &[]));
    assert!(
        warned.starts_with(&format!(
            "warning: cannot read the pending approvals in {}: ",
            state.display()
        )),
        "{warned}"
    );
    assert_eq!(
        std::fs::read_to_string(&state).unwrap(),
        "not a database, just text"
    );
    assert!(
        std::fs::read_to_string(out.join("agent.yaml"))
            .unwrap()
            .contains("Really ship")
    );
}

#[test]
fn under_auto_a_pause_whose_gate_is_unchanged_moves_to_the_new_version() {
    let v1 = with_policy(GATED_SPEC, "auto");
    let ws = Workspace::new(&v1);
    let out = ws.path().join("server");
    let state = out.join(".tollgate").join("state.db");
    export_to(&ws, &out, &[]);
    pause_in(&ws, &state);

    // Only the description changes: the gate and the steps before it are
    // the same in the new version.
    let v2 = v1.replace("description: Ship", "description: Carefully ship");
    assert_ne!(v2, v1);
    ws.write_spec(&v2);
    let notice = stderr(&export_to(&ws, &out, &[]));
    assert!(
        notice.contains(&format!(
            "1 pending approval in {} waits on other spec versions ({}: 1); on_spec_change: auto — approve moves it to the new version;",
            state.display(),
            short_hash(&v1)
        )),
        "{notice}"
    );
}

fn readme(source: &str) -> String {
    let spec = Spec::parse(source, "agent.yaml").unwrap();
    let plan = export::plan(&spec, source.as_bytes()).unwrap();
    plan.text("README.md").unwrap().to_string()
}

#[test]
fn the_readme_says_how_to_deploy_a_changed_spec_under_the_specs_own_policy() {
    let pinned = with_policy(GATED_SPEC, "pin").replace(
        "    approval:\n",
        "    approval:\n      on_spec_change: auto\n",
    );
    let text = readme(&pinned);
    let section = text
        .split("## Deploying a changed spec\n")
        .nth(1)
        .unwrap_or_else(|| panic!("no section in:\n{text}"));
    let section = &section[..section.find("\n## ").unwrap_or(section.len())];
    assert!(
        section.contains("This spec:\n`approvals.on_spec_change: pin`, gate `gate`: `auto`."),
        "{section}"
    );
    for says in [
        "409\n  `spec_changed`",
        "`spec_unavailable`",
        "plan agent.yaml --fail-on stranded",
        "`GET /specs/plan`",
        "approvals migrate --all --dry-run",
    ] {
        assert!(section.contains(says), "{says:?} not in:\n{section}");
    }

    let refuse = readme(GATED_SPEC);
    assert!(
        refuse.contains("This spec:\n`approvals.on_spec_change: refuse` (the default)."),
        "{refuse}"
    );
}

#[test]
fn a_spec_without_a_gate_has_no_such_section() {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("examples/no-gate.yaml");
    let plan = export::command::plan_for(&path).unwrap();
    let text = plan.text("README.md").unwrap();
    assert!(!text.contains("Deploying a changed spec"), "{text}");
    assert!(!text.contains("on_spec_change"), "{text}");
}
