//! Every generated (non-vendored) file of an export, for each example spec,
//! as an insta snapshot: one with gates of every kind, one without any gate,
//! one with `rust:` tools. CI runs with INSTA_UPDATE=no, so a changed file
//! fails until its snapshot is reviewed and accepted
//! (`INSTA_UPDATE=always cargo test --test it export::generated_files`, then review
//! the diff).
//!
//! Two files are snapshotted in part, because the rest is not the spec's:
//! Cargo.lock as its own entry (the other entries are templates/Cargo.lock.in,
//! checked here byte for byte and against cargo by export_lockfile.rs), and
//! the manifest without the vendored files' hashes (vendored/ is checked by
//! export_parity.rs).

use std::collections::BTreeSet;
use std::path::PathBuf;

use tollgate::export::{self, Plan, Role, lockfile, manifest::Manifest};

const EXAMPLES: &[&str] = &["refund-desk", "no-gate", "with-rust-tools"];

fn plan_of(example: &str) -> Plan {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(format!("examples/{example}.yaml"));
    export::command::plan_for(&path).unwrap()
}

/// (snapshot name, content) of every snapshotted file of one example.
fn snapshots(example: &str) -> Vec<(String, String)> {
    let plan = plan_of(example);
    let mut out = Vec::new();
    for (path, file) in &plan.files {
        if file.role == Role::Vendored {
            continue;
        }
        let text = String::from_utf8(file.bytes.to_vec()).unwrap();
        let content = match path.as_str() {
            "Cargo.lock" => own_lock_entry(&plan, &text),
            _ => text,
        };
        out.push((snapshot_name(example, path), content));
    }
    out.push((
        snapshot_name(example, ".tollgate/export.json"),
        manifest_without_vendored(&plan),
    ));
    out
}

fn snapshot_name(example: &str, path: &str) -> String {
    format!(
        "{example}@{}",
        path.trim_start_matches('.').replace('/', "-")
    )
}

fn own_lock_entry(plan: &Plan, lock: &str) -> String {
    assert_eq!(
        lockfile::without_package(lock, &plan.package),
        lockfile::template(),
        "Cargo.lock is the template plus the crate's own entry"
    );
    let start = lock
        .find(&format!("[[package]]\nname = \"{}\"\n", plan.package))
        .unwrap();
    let end = lock[start..]
        .find("\n\n")
        .map(|i| start + i)
        .unwrap_or(lock.len());
    // No count: it changes with the runtime's dependencies, which
    // export_lockfile.rs checks.
    format!(
        "{}\n\n(+ the packages of templates/Cargo.lock.in)\n",
        &lock[start..end]
    )
}

/// The manifest without what changes with the runtime itself: vendored
/// files (checked byte for byte by export_parity) and the lockfile's hash
/// (checked against cargo by export_lockfile). Otherwise every change to the
/// runtime would churn three snapshots.
fn manifest_without_vendored(plan: &Plan) -> String {
    let mut manifest = Manifest::of(plan);
    manifest
        .files
        .retain(|_, entry| entry.role != Role::Vendored);
    if let Some(lock) = manifest.files.get_mut("Cargo.lock") {
        lock.sha256 = "(checked by export_lockfile)".into();
    }
    format!(
        "{}(+ the vendored files, checked by export_parity)\n",
        String::from_utf8(manifest.to_bytes()).unwrap()
    )
}

fn assert_snapshots(example: &str) {
    for (name, content) in snapshots(example) {
        insta::assert_snapshot!(name, content);
    }
}

#[test]
fn refund_desk_gates_of_every_kind() {
    assert_snapshots("refund-desk");
}

#[test]
fn no_gate() {
    assert_snapshots("no-gate");
}

#[test]
fn with_rust_tools() {
    assert_snapshots("with-rust-tools");
}

/// `cargo insta test --unreferenced=reject`, without cargo-insta: every file
/// in tests/it/export/snapshots must be one of the snapshots above (or another test
/// file's, by its prefix).
#[test]
fn no_unreferenced_snapshots() {
    let expected: BTreeSet<String> = EXAMPLES
        .iter()
        .flat_map(|example| snapshots(example))
        .map(|(name, _)| format!("it__export__generated_files__{name}.snap"))
        .collect();
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/it/export/snapshots");
    let mut unreferenced = Vec::new();
    for entry in std::fs::read_dir(&dir).unwrap() {
        let name = entry.unwrap().file_name().to_string_lossy().into_owned();
        // Pending snapshots of a failed run are reviewed, not committed
        // (.gitignore has *.new).
        if name.ends_with(".snap.new") || name.ends_with(".pending-snap") {
            continue;
        }
        if name.starts_with("it__export__generated_files__") && !expected.contains(&name) {
            unreferenced.push(name);
        }
    }
    assert!(
        unreferenced.is_empty(),
        "snapshots no test produces (delete them): {unreferenced:?}"
    );
    for name in &expected {
        assert!(dir.join(name).exists(), "missing snapshot {name}");
    }
}
